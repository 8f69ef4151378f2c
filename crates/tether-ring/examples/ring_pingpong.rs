//! Ping-pong between two threads over two rings of this crate, against a
//! flag ping-pong in one shared word: the floor the ring's design sets
//! under a shared-memory message, without any framing or matching.
//!
//! `cargo run --release -p tether-ring --example ring_pingpong [ITERS]`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tether_ring::{Bytes, Consumer, Producer, RingControl};

/// Words, so that the storage is aligned for `store_word`.
struct Storage(Box<[u64]>);

#[derive(Clone, Copy)]
struct Shared(*mut u8, usize);
// SAFETY: the rings' protocol orders every access to the storage.
unsafe impl Send for Shared {}

unsafe impl Bytes for Shared {
    fn capacity(&self) -> usize {
        self.1
    }
    unsafe fn store(&self, at: usize, src: *const u8, len: usize) {
        std::ptr::copy_nonoverlapping(src, self.0.add(at), len);
    }
    unsafe fn load(&self, at: usize, dst: *mut u8, len: usize) {
        std::ptr::copy_nonoverlapping(self.0.add(at), dst, len);
    }
    unsafe fn store_word(&self, at: usize, value: u64, order: Ordering) {
        (*self.0.add(at).cast::<AtomicU64>()).store(value, order);
    }
    unsafe fn load_word(&self, at: usize, order: Ordering) -> u64 {
        (*self.0.add(at).cast::<AtomicU64>()).load(order)
    }
}

#[repr(align(64))]
struct Line(AtomicU64);

const FRAME: usize = 72;
const CAP: usize = 1 << 18;

fn ring() -> (Arc<RingControl>, Shared, Storage) {
    let mut storage = Storage(vec![0u64; CAP / 8].into_boxed_slice());
    let bytes = Shared(storage.0.as_mut_ptr().cast::<u8>(), CAP);
    (Arc::new(RingControl::new()), bytes, storage)
}

fn main() {
    let iters: u64 = std::env::args()
        .nth(1)
        .map_or(1_000_000, |s| s.parse().expect("ITERS"));
    let (c1, b1, _s1) = ring();
    let (c2, b2, _s2) = ring();
    // SAFETY: one producer and one consumer per ring, on their storage.
    let (mut p1, mut q1) = unsafe { (Producer::new(c1.clone(), b1), Consumer::new(c1, b1)) };
    let (mut p2, mut q2) = unsafe { (Producer::new(c2.clone(), b2), Consumer::new(c2, b2)) };
    let echo = std::thread::spawn(move || {
        let mut frame = [0u8; FRAME];
        for _ in 0..iters {
            while q1.readable(FRAME) < FRAME {
                std::hint::spin_loop();
            }
            unsafe { q1.pop(frame.as_mut_ptr(), FRAME) };
            q1.release();
            unsafe { p2.push(frame.as_ptr(), FRAME) };
            p2.publish();
        }
    });
    let mut frame = [1u8; FRAME];
    let t0 = Instant::now();
    for _ in 0..iters {
        unsafe { p1.push(frame.as_ptr(), FRAME) };
        p1.publish();
        while q2.readable(FRAME) < FRAME {
            std::hint::spin_loop();
        }
        unsafe { q2.pop(frame.as_mut_ptr(), FRAME) };
        q2.release();
    }
    let ring_us = t0.elapsed().as_secs_f64() * 1e6 / iters as f64 / 2.0;
    echo.join().expect("echo thread");

    // Two flags on their own lines, one per direction, as
    // benches/shm/raw_shm.c does between processes.
    let flags = Arc::new([Line(AtomicU64::new(0)), Line(AtomicU64::new(0))]);
    let other = flags.clone();
    let echo = std::thread::spawn(move || {
        for i in 1..=iters {
            while other[0].0.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
            other[1].0.store(i, Ordering::Release);
        }
    });
    let t0 = Instant::now();
    for i in 1..=iters {
        flags[0].0.store(i, Ordering::Release);
        while flags[1].0.load(Ordering::Acquire) != i {
            std::hint::spin_loop();
        }
    }
    let flag_us = t0.elapsed().as_secs_f64() * 1e6 / iters as f64 / 2.0;
    echo.join().expect("echo thread");
    println!("ring {FRAME} B frames: {ring_us:.3} us half round trip; flag: {flag_us:.3} us");
}

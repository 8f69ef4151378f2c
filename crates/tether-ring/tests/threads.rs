//! The ring between two threads: every byte arrives, in order, whatever
//! the chunk sizes and however the ring wraps.
#![cfg(not(loom))]

use std::cell::UnsafeCell;
use std::sync::Arc;

use tether_ring::{Bytes, Consumer, Doorbell, Producer, RingControl};

struct Storage(Vec<UnsafeCell<u8>>);

// SAFETY: the ring protocol orders every access to a byte.
unsafe impl Sync for Storage {}

struct Heap(Arc<Storage>);

// SAFETY: capacity is a power of two; copies stay inside the vector.
unsafe impl Bytes for Heap {
    fn capacity(&self) -> usize {
        self.0 .0.len()
    }
    unsafe fn store(&self, at: usize, src: *const u8, len: usize) {
        std::ptr::copy_nonoverlapping(src, self.0 .0[at].get(), len);
    }
    unsafe fn load(&self, at: usize, dst: *mut u8, len: usize) {
        std::ptr::copy_nonoverlapping(self.0 .0[at].get(), dst, len);
    }
}

fn byte(i: u64) -> u8 {
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
}

#[test]
fn bytes_arrive_in_order_across_wraps() {
    const TOTAL: u64 = 4_000_000;
    let control = Arc::new(RingControl::new());
    let storage = Arc::new(Storage((0..256).map(|_| UnsafeCell::new(0)).collect()));
    // SAFETY: one producer and one consumer over the same storage.
    let mut producer = unsafe { Producer::new(control.clone(), Heap(storage.clone())) };
    let mut consumer = unsafe { Consumer::new(control, Heap(storage)) };
    let writer = std::thread::spawn(move || {
        let mut sent = 0u64;
        let mut chunk = 1usize;
        while sent < TOTAL {
            let len = chunk.min((TOTAL - sent) as usize);
            let data: Vec<u8> = (sent..sent + len as u64).map(byte).collect();
            // SAFETY: `data` is valid for `len` reads.
            let n = unsafe { producer.push(data.as_ptr(), len) };
            producer.publish();
            sent += n as u64;
            chunk = chunk % 301 + 7;
            if n == 0 {
                std::thread::yield_now();
            }
        }
    });
    let mut got = 0u64;
    let mut buf = [0u8; 97];
    while got < TOTAL {
        // SAFETY: `buf` is valid for its length.
        let n = unsafe { consumer.pop(buf.as_mut_ptr(), buf.len()) };
        consumer.release();
        for (k, b) in buf[..n].iter().enumerate() {
            assert_eq!(*b, byte(got + k as u64), "byte {}", got + k as u64);
        }
        got += n as u64;
        if n == 0 {
            std::thread::yield_now();
        }
    }
    writer.join().unwrap();
    assert!(!consumer.has_data());
}

#[test]
fn peek_shows_what_pop_then_takes_across_the_wrap() {
    let control = Arc::new(RingControl::new());
    let storage = Arc::new(Storage((0..16).map(|_| UnsafeCell::new(0)).collect()));
    // SAFETY: one producer and one consumer over the same storage.
    let mut producer = unsafe { Producer::new(control.clone(), Heap(storage.clone())) };
    let mut consumer = unsafe { Consumer::new(control, Heap(storage)) };
    let mut buf = [0u8; 16];
    // Move both cursors to 12 so that the next 8 bytes wrap.
    // SAFETY: the sources and destinations are valid for their lengths.
    unsafe {
        producer.push([0u8; 12].as_ptr(), 12);
        producer.publish();
        consumer.pop(buf.as_mut_ptr(), 12);
        consumer.release();
        producer.push([1, 2, 3, 4, 5, 6, 7, 8].as_ptr(), 8);
    }
    // SAFETY: `buf` is valid for 16 writes.
    assert_eq!(
        unsafe { consumer.peek(buf.as_mut_ptr(), 8) },
        0,
        "unpublished"
    );
    producer.publish();
    let mut peeked = [0u8; 8];
    // SAFETY: as above.
    assert_eq!(unsafe { consumer.peek(peeked.as_mut_ptr(), 16) }, 8);
    assert_eq!(peeked, [1, 2, 3, 4, 5, 6, 7, 8]);
    // SAFETY: as above.
    assert_eq!(unsafe { consumer.pop(buf.as_mut_ptr(), 16) }, 8);
    assert_eq!(buf[..8], peeked);
    assert!(!consumer.has_data(), "pop consumed what peek showed");
}

#[test]
fn doorbell_rings_once_per_sleep() {
    let bell = Doorbell::new();
    assert!(!bell.must_ring());
    bell.prepare_sleep();
    assert!(bell.must_ring());
    assert!(!bell.must_ring());
    bell.awake();
    assert!(!bell.must_ring());
}

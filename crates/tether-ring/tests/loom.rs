//! Model checks of the ring and the doorbell under every interleaving and
//! every reordering the C++/Rust memory model allows (loom). Each byte of
//! storage is a loom cell, so a read that could see a byte before its
//! write happened-before it fails the check.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p tether-ring --release --test loom`
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use loom::thread;

use tether_ring::{Bytes, Consumer, Doorbell, MailboxControl, Ordering, Producer, RingControl};

/// Byte cells, and the atomic words at multiples of 8 apart from them (a
/// test touches each position one way only: marker words as words, frame
/// bodies as bytes).
#[derive(Clone)]
struct Cells(Arc<Vec<UnsafeCell<u8>>>, Arc<Vec<AtomicU64>>);

// SAFETY: capacity is a power of two; accesses stay inside the vector and
// go through loom's cells, which check them.
unsafe impl Bytes for Cells {
    fn capacity(&self) -> usize {
        self.0.len()
    }
    unsafe fn store(&self, at: usize, src: *const u8, len: usize) {
        for i in 0..len {
            self.0[at + i].with_mut(|p| *p = *src.add(i));
        }
    }
    unsafe fn load(&self, at: usize, dst: *mut u8, len: usize) {
        for i in 0..len {
            self.0[at + i].with(|p| *dst.add(i) = *p);
        }
    }
    unsafe fn store_word(&self, at: usize, value: u64, order: Ordering) {
        self.1[at / 8].store(value, order);
    }
    unsafe fn load_word(&self, at: usize, order: Ordering) -> u64 {
        self.1[at / 8].load(order)
    }
}

fn cells(n: usize) -> Cells {
    Cells(
        Arc::new((0..n).map(|_| UnsafeCell::new(0)).collect()),
        Arc::new((0..n.div_ceil(8)).map(|_| AtomicU64::new(0)).collect()),
    )
}

/// The two ends of a new ring over `n` byte cells.
fn ring(
    n: usize,
) -> (
    Producer<Arc<RingControl>, Cells>,
    Consumer<Arc<RingControl>, Cells>,
) {
    let control = Arc::new(RingControl::new());
    let storage = cells(n);
    // SAFETY: one producer and one consumer over the same storage.
    unsafe {
        (
            Producer::new(control.clone(), storage.clone()),
            Consumer::new(control, storage),
        )
    }
}

/// Bounded model: at most three preemptions per execution, the usual
/// bound for loom (the bugs it finds need few), which keeps the
/// exploration of the spinning threads finite and quick.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

/// Five bytes through a ring of four, in chunks that wrap: every byte
/// arrives once, in order, and no access races.
#[test]
fn ring_transfers_in_order_without_races() {
    model(|| {
        let (mut producer, mut consumer) = ring(4);
        let writer = thread::spawn(move || {
            let data = [1u8, 2, 3, 4, 5];
            let mut sent = 0;
            while sent < data.len() {
                let len = 3.min(data.len() - sent);
                // SAFETY: the slice is valid for `len` reads.
                let n = unsafe { producer.push(data[sent..].as_ptr(), len) };
                producer.publish();
                sent += n;
                if n == 0 {
                    thread::yield_now();
                }
            }
        });
        let mut got = Vec::new();
        while got.len() < 5 {
            let mut buf = [0u8; 4];
            // SAFETY: `buf` is valid for its length.
            let n = unsafe { consumer.pop(buf.as_mut_ptr(), 4) };
            consumer.release();
            got.extend_from_slice(&buf[..n]);
            if n == 0 {
                thread::yield_now();
            }
        }
        writer.join().unwrap();
        assert_eq!(got, [1, 2, 3, 4, 5]);
    });
}

/// Three frames of 16 bytes (a marker word, then 8 body bytes) through a
/// ring of 32 that keeps 16 free for the word zeroed after each frame:
/// the consumer polls only the marker at its read position, and the
/// Release/Acquire pair on it orders every body byte (a stale marker from
/// the previous lap is never taken: the zeroed word replaces it first).
#[test]
fn markers_publish_frames_without_the_cursor() {
    model(|| {
        let (mut producer, mut consumer) = ring(32);
        let writer = thread::spawn(move || {
            for i in 0..3u8 {
                while producer.writable(32) < 32 {
                    thread::yield_now();
                }
                // SAFETY: 32 bytes are writable; frames are 16 bytes long,
                // so every marker is aligned.
                unsafe {
                    producer.write_ahead(8, [i + 1; 8].as_ptr(), 8);
                    producer.store_word(16, 0, Ordering::Relaxed);
                    producer.store_word(0, u64::from(i) + 1, Ordering::Release);
                    producer.advance(16);
                }
            }
        });
        for i in 0..3u8 {
            // SAFETY: the read position is a frame's start, aligned.
            while unsafe { consumer.word_at(0) } != u64::from(i) + 1 {
                thread::yield_now();
            }
            let mut body = [0u8; 8];
            // SAFETY: the marker was loaded with Acquire.
            unsafe {
                consumer.read_marked(8, body.as_mut_ptr(), 8);
                consumer.skip_marked(16);
            }
            consumer.release();
            assert_eq!(body, [i + 1; 8]);
        }
        writer.join().unwrap();
    });
}

/// A consumer going to sleep and a producer publishing at the same time:
/// the consumer sees the byte or the producer rings; never neither.
#[test]
fn doorbell_never_loses_a_wakeup() {
    model(|| {
        let bell = Arc::new(Doorbell::new());
        let (mut producer, consumer) = ring(2);
        let producer_bell = bell.clone();
        let writer = thread::spawn(move || {
            // SAFETY: one byte from a local.
            unsafe { producer.push([7u8].as_ptr(), 1) };
            producer.publish();
            producer_bell.must_ring()
        });
        bell.prepare_sleep();
        let saw_data = consumer.has_data();
        let rang = writer.join().unwrap();
        assert!(saw_data || rang, "lost wake-up");
    });
}

/// Two writers share a mailbox of four bytes, each writing one record of
/// two (its id, then 7): a second thread, and the main thread before it
/// reads as the consumer. Under every interleaving of the lock, the room
/// check and the copies, both records arrive whole, once each: the lock
/// hands each writer the head its predecessor published.
#[test]
fn mailbox_writers_take_turns_and_records_arrive_whole() {
    model(|| {
        let control = Arc::new(MailboxControl::new());
        let storage = cells(4);
        let write = |control: &MailboxControl, storage: &Cells, id: u8| {
            // SAFETY: `storage` is the mailbox's storage.
            while unsafe { control.write(storage, u64::from(id), &[&[id, 7]]) }.is_err() {
                thread::yield_now();
            }
        };
        let other = {
            let (control, storage) = (control.clone(), storage.clone());
            thread::spawn(move || write(&control, &storage, 1))
        };
        write(&control, &storage, 2);
        // SAFETY: the only consumer, over the mailbox's storage.
        let mut consumer = unsafe { Consumer::new(MailboxRing(control.clone()), storage) };
        let mut seen = [false; 3];
        for _ in 0..2 {
            let mut record = [0u8; 2];
            // SAFETY: `record` is valid for 2 writes.
            while unsafe { consumer.peek(record.as_mut_ptr(), 2) } < 2 {
                thread::yield_now();
            }
            consumer.skip(2);
            consumer.release();
            assert_eq!(record[1], 7, "record {record:?}");
            assert!(!seen[record[0] as usize], "record {record:?} twice");
            seen[record[0] as usize] = true;
        }
        other.join().unwrap();
    });
}

/// A writer refused for room writes once the consumer released it: a
/// mailbox of two bytes, two records of two through it.
#[test]
fn mailbox_writer_refused_for_room_writes_once_the_consumer_reads() {
    model(|| {
        let control = Arc::new(MailboxControl::new());
        let storage = cells(2);
        let writer = {
            let (control, storage) = (control.clone(), storage.clone());
            thread::spawn(move || {
                for n in 0..2u8 {
                    // SAFETY: `storage` is the mailbox's storage.
                    while unsafe { control.write(&storage, 1, &[&[n, n]]) }.is_err() {
                        thread::yield_now();
                    }
                }
            })
        };
        // SAFETY: the only consumer, over the mailbox's storage.
        let mut consumer = unsafe { Consumer::new(MailboxRing(control.clone()), storage) };
        for n in 0..2u8 {
            let mut record = [0u8; 2];
            // SAFETY: `record` is valid for 2 writes.
            while unsafe { consumer.peek(record.as_mut_ptr(), 2) } < 2 {
                thread::yield_now();
            }
            consumer.skip(2);
            consumer.release();
            assert_eq!(record, [n, n]);
        }
        writer.join().unwrap();
    });
}

/// The ring of a shared mailbox, for its consumer.
struct MailboxRing(Arc<MailboxControl>);

impl std::ops::Deref for MailboxRing {
    type Target = RingControl;
    fn deref(&self) -> &RingControl {
        self.0.ring()
    }
}

//! The ring between two threads: every byte arrives, in order, whatever
//! the chunk sizes and however the ring wraps.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tether_ring::{Bytes, Consumer, Doorbell, MailboxControl, Producer, Refused, RingControl};

/// Ring storage in 8-byte words, so that marker words are aligned.
struct Storage(Vec<AtomicU64>);

fn storage(bytes: usize) -> Arc<Storage> {
    Arc::new(Storage((0..bytes / 8).map(|_| AtomicU64::new(0)).collect()))
}

struct Heap(Arc<Storage>);

impl Heap {
    fn base(&self) -> *mut u8 {
        self.0 .0.as_ptr().cast::<u8>().cast_mut()
    }
}

// SAFETY: capacity is a power of two; copies stay inside the vector, whose
// atomics allow writes through shared references.
unsafe impl Bytes for Heap {
    fn capacity(&self) -> usize {
        self.0 .0.len() * 8
    }
    unsafe fn store(&self, at: usize, src: *const u8, len: usize) {
        std::ptr::copy_nonoverlapping(src, self.base().add(at), len);
    }
    unsafe fn load(&self, at: usize, dst: *mut u8, len: usize) {
        std::ptr::copy_nonoverlapping(self.base().add(at), dst, len);
    }
    unsafe fn store_word(&self, at: usize, value: u64, order: Ordering) {
        self.0 .0[at / 8].store(value, order);
    }
    unsafe fn load_word(&self, at: usize, order: Ordering) -> u64 {
        self.0 .0[at / 8].load(order)
    }
}

type Ends = (
    Producer<Arc<RingControl>, Heap>,
    Consumer<Arc<RingControl>, Heap>,
);

/// The two ends of an empty ring of `bytes` bytes.
fn ring(bytes: usize) -> Ends {
    let control = Arc::new(RingControl::new());
    let storage = storage(bytes);
    // SAFETY: one producer and one consumer over the same storage.
    unsafe {
        (
            Producer::new(control.clone(), Heap(storage.clone())),
            Consumer::new(control, Heap(storage)),
        )
    }
}

fn byte(i: u64) -> u8 {
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
}

#[test]
fn bytes_arrive_in_order_across_wraps() {
    const TOTAL: u64 = 4_000_000;
    let (mut producer, mut consumer) = ring(256);
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
    let (mut producer, mut consumer) = ring(16);
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

/// Frames found by their marker word alone, as the shared-memory
/// transport finds its one-line frames: the producer writes a frame's
/// body, zeroes the word after it (where the next frame's marker goes),
/// then stores the frame's marker with Release; the consumer polls the
/// word at its read position and never the cursor. Frames of 16 to 40
/// bytes wrap around a ring of 128 with a 16-byte reserve kept free for
/// the zeroed word; every frame arrives whole, in order, once.
#[test]
fn marked_frames_arrive_in_order_without_the_cursor() {
    const FRAMES: u64 = 300_000;
    const RESERVE: usize = 16;
    let (mut producer, mut consumer) = ring(128);
    let frame_len = |i: u64| 16 + (i % 4) as usize * 8;
    let writer = std::thread::spawn(move || {
        for i in 0..FRAMES {
            let len = frame_len(i);
            while producer.writable(len + RESERVE) < len + RESERVE {
                std::thread::yield_now();
            }
            let body: Vec<u8> = (0..len - 8).map(|k| byte(i * 64 + k as u64)).collect();
            // SAFETY: room for the frame and the word after it was checked;
            // frame lengths are multiples of 8, so markers are aligned.
            unsafe {
                producer.write_ahead(8, body.as_ptr(), body.len());
                producer.store_word(len, 0, Ordering::Relaxed);
                producer.store_word(0, i + 1, Ordering::Release);
                producer.advance(len);
            }
        }
    });
    let mut body = [0u8; 32];
    for i in 0..FRAMES {
        let len = frame_len(i);
        // SAFETY: the read position is always a frame's start, aligned.
        while unsafe { consumer.word_at(0) } != i + 1 {
            std::hint::spin_loop();
        }
        // SAFETY: the marker was loaded with Acquire; `body` holds 32.
        unsafe {
            consumer.read_marked(8, body.as_mut_ptr(), len - 8);
            consumer.skip_marked(len);
        }
        consumer.release();
        for (k, b) in body[..len - 8].iter().enumerate() {
            assert_eq!(*b, byte(i * 64 + k as u64), "frame {i} byte {k}");
        }
    }
    writer.join().unwrap();
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

/// The consumer's cursor is stored only when bytes were consumed since
/// the last release, and the producer sees room only once it is.
#[test]
fn release_stores_the_cursor_only_when_bytes_were_consumed() {
    let (mut producer, mut consumer) = ring(16);
    let mut buf = [0u8; 16];
    assert!(!consumer.release(), "nothing consumed yet");
    // SAFETY: the sources and destinations are valid for their lengths.
    unsafe {
        assert_eq!(producer.push([7u8; 16].as_ptr(), 16), 16);
        producer.publish();
        assert_eq!(consumer.pop(buf.as_mut_ptr(), 10), 10);
    }
    assert_eq!(consumer.unreleased(), 10);
    assert_eq!(producer.writable(1), 0, "room not returned before release");
    assert!(consumer.release());
    assert_eq!(consumer.unreleased(), 0);
    assert!(!consumer.release(), "released already");
    assert_eq!(producer.writable(1), 10);
}

#[test]
fn a_ring_is_drained_only_once_the_consumer_released_all_written() {
    let (mut producer, mut consumer) = ring(64);
    assert!(producer.drained(), "a fresh ring");
    let mut buf = [0u8; 8];
    // SAFETY: the sources and destinations are valid for their lengths.
    unsafe {
        producer.push([7u8; 8].as_ptr(), 8);
        assert!(!producer.drained(), "written, not published");
        producer.publish();
        consumer.pop(buf.as_mut_ptr(), 8);
    }
    assert!(!producer.drained(), "read, not released");
    consumer.release();
    assert!(producer.drained());
}

/// The ring of a shared mailbox, for its consumer.
struct MailboxRing(Arc<MailboxControl>);

impl std::ops::Deref for MailboxRing {
    type Target = RingControl;
    fn deref(&self) -> &RingControl {
        self.0.ring()
    }
}

/// More writers than cores share a small mailbox: records of random
/// lengths (writer, number, length, then a pattern) arrive whole, each
/// writer's in order, none lost or doubled, however the writers interleave
/// and wait for the lock and for room.
#[test]
fn many_writers_records_arrive_whole_and_in_each_writers_order() {
    const WRITERS: u64 = 8;
    const EACH: u64 = 3000;
    let control = Arc::new(MailboxControl::new());
    let storage = storage(512);
    let writers: Vec<_> = (1..=WRITERS)
        .map(|id| {
            let (control, storage) = (control.clone(), Heap(storage.clone()));
            std::thread::spawn(move || {
                let (mut held, mut full) = (0u64, 0u64);
                for n in 0..EACH {
                    let len = 8 + ((id * 31 + n * 17) % 97) as usize;
                    let mut record = vec![0u8; len.next_multiple_of(8)];
                    record[0] = id as u8;
                    record[1..5].copy_from_slice(&(n as u32).to_le_bytes());
                    record[5] = len as u8;
                    for (k, b) in record[6..len].iter_mut().enumerate() {
                        *b = byte(id * 1_000_000 + n * 1000 + k as u64);
                    }
                    loop {
                        // SAFETY: `storage` is the mailbox's storage.
                        match unsafe { control.write(&storage, id, &[&record]) } {
                            Ok(()) => break,
                            Err(Refused::Held(_)) => held += 1,
                            Err(Refused::Full) => full += 1,
                        }
                        std::thread::yield_now();
                    }
                }
                (held, full)
            })
        })
        .collect();
    // SAFETY: the only consumer, over the mailbox's storage.
    let mut consumer = unsafe { Consumer::new(MailboxRing(control.clone()), Heap(storage)) };
    let mut next = [0u64; WRITERS as usize + 1];
    let mut got = 0;
    while got < WRITERS * EACH {
        let mut head = [0u8; 8];
        // SAFETY: `head` is valid for 8 writes.
        if unsafe { consumer.peek(head.as_mut_ptr(), 8) } < 8 {
            std::thread::yield_now();
            continue;
        }
        let (id, len) = (head[0] as u64, head[5] as usize);
        let n = u32::from_le_bytes(head[1..5].try_into().unwrap()) as u64;
        let mut record = vec![0u8; len.next_multiple_of(8)];
        // SAFETY: as above; a visible head means the record is whole.
        assert_eq!(
            unsafe { consumer.pop(record.as_mut_ptr(), record.len()) },
            record.len()
        );
        consumer.release();
        assert_eq!(
            n, next[id as usize],
            "writer {id}'s record {n} out of order"
        );
        for (k, b) in record[6..len].iter().enumerate() {
            assert_eq!(
                *b,
                byte(id * 1_000_000 + n * 1000 + k as u64),
                "writer {id} record {n} byte {k}"
            );
        }
        next[id as usize] += 1;
        got += 1;
    }
    let waits: Vec<(u64, u64)> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    assert!(next[1..].iter().all(|&n| n == EACH));
    assert!(!consumer.has_data());
    eprintln!("refusals per writer (lock held, mailbox full): {waits:?}");
}

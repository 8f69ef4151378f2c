//! The byte ring: one producer and one consumer, each holding a cursor
//! that only grows (bytes ever written, bytes ever consumed); positions in
//! the storage are the cursors modulo the capacity, a power of two.
//!
//! Memory ordering. The producer copies bytes in, then publishes its cursor
//! `head` with a Release store; the consumer loads `head` with Acquire
//! before it copies those bytes out, so it never reads bytes before they
//! are written. Symmetrically the consumer releases space by storing `tail`
//! (Release) after it has copied the bytes out, and the producer loads
//! `tail` (Acquire) before it overwrites them. Each side caches the other's
//! cursor and reloads it only when the cached value says "empty" or
//! "full", so the control lines move between cores only when needed.

use std::ops::Deref;

use crate::sync::{AtomicU64, Ordering};

#[repr(C, align(64))]
struct Line(AtomicU64);

/// The control words of one ring, each on its own cache line. All-zero
/// memory is a valid, empty ring (how a fresh shared segment starts).
#[repr(C)]
pub struct RingControl {
    head: Line,
    tail: Line,
}

impl RingControl {
    /// An empty ring.
    pub fn new() -> RingControl {
        RingControl {
            head: Line(AtomicU64::new(0)),
            tail: Line(AtomicU64::new(0)),
        }
    }

    /// Bytes ever published by the producer.
    pub fn published(&self) -> u64 {
        self.head.0.load(Ordering::Acquire)
    }
}

impl Default for RingControl {
    fn default() -> Self {
        RingControl::new()
    }
}

/// The storage of a ring.
///
/// # Safety
/// `capacity()` must be a power of two and constant, and `store`/`load`
/// must copy between the given pointer and `capacity()` bytes of storage
/// that only this ring uses.
pub unsafe trait Bytes {
    fn capacity(&self) -> usize;
    /// Copies `len` bytes from `src` into the storage at `at`.
    ///
    /// # Safety
    /// `at + len <= capacity()`; `src` is valid for `len` reads.
    unsafe fn store(&self, at: usize, src: *const u8, len: usize);
    /// Copies `len` bytes of the storage at `at` to `dst`.
    ///
    /// # Safety
    /// `at + len <= capacity()`; `dst` is valid for `len` writes.
    unsafe fn load(&self, at: usize, dst: *mut u8, len: usize);
}

/// The writing end of a ring.
pub struct Producer<C: Deref<Target = RingControl>, B: Bytes> {
    control: C,
    bytes: B,
    head: u64,
    tail_seen: u64,
}

impl<C: Deref<Target = RingControl>, B: Bytes> Producer<C, B> {
    /// The writing end of the ring `control` with storage `bytes`.
    ///
    /// # Safety
    /// No other producer of this ring may exist while this one does, and
    /// `bytes` must be the storage the ring's consumer reads.
    pub unsafe fn new(control: C, bytes: B) -> Self {
        let head = control.head.0.load(Ordering::Relaxed);
        let tail_seen = control.tail.0.load(Ordering::Acquire);
        Producer {
            control,
            bytes,
            head,
            tail_seen,
        }
    }

    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Free bytes; reloads the consumer's cursor when fewer than `want`
    /// seem free.
    pub fn writable(&mut self, want: usize) -> usize {
        let cap = self.bytes.capacity() as u64;
        if cap - (self.head - self.tail_seen) < want as u64 {
            self.tail_seen = self.control.tail.0.load(Ordering::Acquire);
        }
        (cap - (self.head - self.tail_seen)) as usize
    }

    /// Copies up to `len` bytes from `src` (as many as fit); returns how
    /// many. They become visible to the consumer at the next
    /// [`Producer::publish`].
    ///
    /// # Safety
    /// `src` is valid for `len` reads.
    pub unsafe fn push(&mut self, src: *const u8, len: usize) -> usize {
        let n = len.min(self.writable(len));
        let cap = self.bytes.capacity();
        let at = (self.head as usize) & (cap - 1);
        let first = n.min(cap - at);
        self.bytes.store(at, src, first);
        if n > first {
            self.bytes.store(0, src.add(first), n - first);
        }
        self.head += n as u64;
        n
    }

    /// Makes every pushed byte visible to the consumer.
    pub fn publish(&mut self) {
        self.control.head.0.store(self.head, Ordering::Release);
    }

    /// Bytes ever pushed (published or not).
    pub fn position(&self) -> u64 {
        self.head
    }
}

/// The reading end of a ring.
pub struct Consumer<C: Deref<Target = RingControl>, B: Bytes> {
    control: C,
    bytes: B,
    tail: u64,
    head_seen: u64,
}

impl<C: Deref<Target = RingControl>, B: Bytes> Consumer<C, B> {
    /// The reading end of the ring `control` with storage `bytes`.
    ///
    /// # Safety
    /// No other consumer of this ring may exist while this one does, and
    /// `bytes` must be the storage the ring's producer writes.
    pub unsafe fn new(control: C, bytes: B) -> Self {
        let tail = control.tail.0.load(Ordering::Relaxed);
        let head_seen = control.head.0.load(Ordering::Acquire);
        Consumer {
            control,
            bytes,
            tail,
            head_seen,
        }
    }

    /// Bytes ready to read; reloads the producer's cursor when fewer than
    /// `want` seem ready.
    pub fn readable(&mut self, want: usize) -> usize {
        if self.head_seen - self.tail < want as u64 {
            self.head_seen = self.control.head.0.load(Ordering::Acquire);
        }
        (self.head_seen - self.tail) as usize
    }

    /// Copies up to `len` ready bytes to `dst`; returns how many. Their
    /// space returns to the producer at the next [`Consumer::release`].
    ///
    /// # Safety
    /// `dst` is valid for `len` writes.
    pub unsafe fn pop(&mut self, dst: *mut u8, len: usize) -> usize {
        let n = self.peek(dst, len);
        self.tail += n as u64;
        n
    }

    /// Copies up to `len` ready bytes to `dst` without consuming them (a
    /// later `pop` returns the same bytes); returns how many.
    ///
    /// # Safety
    /// `dst` is valid for `len` writes.
    pub unsafe fn peek(&mut self, dst: *mut u8, len: usize) -> usize {
        let n = len.min(self.readable(len));
        let cap = self.bytes.capacity();
        let at = (self.tail as usize) & (cap - 1);
        let first = n.min(cap - at);
        self.bytes.load(at, dst, first);
        if n > first {
            self.bytes.load(0, dst.add(first), n - first);
        }
        n
    }

    /// Drops up to `len` ready bytes; returns how many.
    pub fn skip(&mut self, len: usize) -> usize {
        let n = len.min(self.readable(len));
        self.tail += n as u64;
        n
    }

    /// Returns the space of every popped or skipped byte to the producer.
    pub fn release(&mut self) {
        self.control.tail.0.store(self.tail, Ordering::Release);
    }

    /// Whether bytes are ready. Reads the producer's cursor itself, so a
    /// consumer about to sleep calls it after
    /// [`crate::Doorbell::prepare_sleep`].
    pub fn has_data(&self) -> bool {
        self.control.head.0.load(Ordering::Acquire) != self.tail
    }
}

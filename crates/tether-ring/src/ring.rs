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
    /// Stores `value` in the 8 bytes at `at` as one atomic store.
    ///
    /// # Safety
    /// `at` is a multiple of 8 and `at + 8 <= capacity()`.
    unsafe fn store_word(&self, at: usize, value: u64, order: Ordering);
    /// Loads the 8 bytes at `at` as one atomic load.
    ///
    /// # Safety
    /// `at` is a multiple of 8 and `at + 8 <= capacity()`.
    unsafe fn load_word(&self, at: usize, order: Ordering) -> u64;
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

    /// Whether the consumer has released every byte written (reloads its
    /// cursor): it reads none of the storage until the producer writes
    /// again, so the storage may be given back meanwhile.
    pub fn drained(&mut self) -> bool {
        self.tail_seen = self.control.tail.0.load(Ordering::Acquire);
        self.tail_seen == self.head
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
        self.write_ahead(0, src, n);
        self.head += n as u64;
        n
    }

    /// Copies `len` bytes from `src` to `offset` bytes past the write
    /// position, without moving it (a frame's body, written before the
    /// word that marks it written; see [`Producer::store_word`]).
    ///
    /// # Safety
    /// `src` is valid for `len` reads, and `offset + len` bytes are
    /// writable (checked with [`Producer::writable`]).
    pub unsafe fn write_ahead(&mut self, offset: usize, src: *const u8, len: usize) {
        let at = self.head as usize + offset;
        in_pieces(at, len, self.bytes.capacity(), |to, from, n| {
            // SAFETY: `src` is valid for `len` reads (this function's
            // contract); the piece is inside the ring.
            unsafe { self.bytes.store(to, src.add(from), n) }
        });
    }

    /// Stores `word` atomically `offset` bytes past the write position.
    /// With `Ordering::Release` it publishes everything written before it
    /// to a consumer that loads it with [`Consumer::word_at`] (a *marker*
    /// word: the consumer learns that a frame is written from the frame
    /// itself, without the cursor's cache line).
    ///
    /// # Safety
    /// The write position plus `offset` is a multiple of 8, and
    /// `offset + 8` bytes are writable.
    pub unsafe fn store_word(&mut self, offset: usize, word: u64, order: Ordering) {
        let at = (self.head as usize + offset) & (self.bytes.capacity() - 1);
        self.bytes.store_word(at, word, order);
    }

    /// Moves the write position `len` bytes on, over bytes written with
    /// [`Producer::write_ahead`] and [`Producer::store_word`] (or left as
    /// they were: padding).
    ///
    /// # Safety
    /// `len` bytes are writable.
    pub unsafe fn advance(&mut self, len: usize) {
        self.head += len as u64;
    }

    /// Makes every pushed byte visible to the consumer.
    pub fn publish(&mut self) {
        self.control.head.0.store(self.head, Ordering::Release);
    }

    /// Bytes ever pushed (published or not).
    pub fn position(&self) -> u64 {
        self.head
    }

    /// Where the write position is in the storage.
    pub fn write_offset(&self) -> usize {
        self.head as usize & (self.bytes.capacity() - 1)
    }

    /// The ring's storage, for a caller that writes a frame in place at
    /// [`Producer::write_offset`] (within the bytes
    /// [`Producer::writable`] reported, and published as `write_ahead`'s).
    pub fn storage(&self) -> &B {
        &self.bytes
    }
}

/// Calls `copy(ring_offset, buffer_offset, n)` for the bytes `at..at+len`
/// of a ring of `cap` bytes (a power of two), `at` taken modulo `cap`: once,
/// or twice where they wrap around the end. Inlined, so that a constant
/// `len` reaches the one-piece call as a constant (a few moves, no call).
#[inline(always)]
fn in_pieces(at: usize, len: usize, cap: usize, mut copy: impl FnMut(usize, usize, usize)) {
    let at = at & (cap - 1);
    if len <= cap - at {
        copy(at, 0, len);
        return;
    }
    let first = cap - at;
    copy(at, 0, first);
    copy(0, first, len - first);
}

/// The reading end of a ring.
pub struct Consumer<C: Deref<Target = RingControl>, B: Bytes> {
    control: C,
    bytes: B,
    tail: u64,
    head_seen: u64,
    /// The read position last stored in the control words.
    released: u64,
}

impl<C: Deref<Target = RingControl>, B: Bytes> Consumer<C, B> {
    /// The reading end of the ring `control` with storage `bytes`.
    ///
    /// # Safety
    /// No other consumer of this ring may exist while this one does, and
    /// `bytes` must be the storage the ring's producer writes.
    pub unsafe fn new(control: C, bytes: B) -> Self {
        let tail = control.tail.0.load(Ordering::Relaxed);
        let head_seen = control.head.0.load(Ordering::Acquire).max(tail);
        Consumer {
            control,
            bytes,
            tail,
            head_seen,
            released: tail,
        }
    }

    /// Bytes ready to read; reloads the producer's cursor when fewer than
    /// `want` seem ready.
    pub fn readable(&mut self, want: usize) -> usize {
        if self.head_seen - self.tail < want as u64 {
            // The cursor may lag bytes consumed by their marker.
            self.head_seen = self.control.head.0.load(Ordering::Acquire).max(self.tail);
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
        self.copy_out(0, dst, n);
        n
    }

    /// Drops up to `len` ready bytes; returns how many.
    pub fn skip(&mut self, len: usize) -> usize {
        let n = len.min(self.readable(len));
        self.tail += n as u64;
        n
    }

    /// Loads the word `offset` bytes past the read position with Acquire:
    /// when it is a marker the producer stored with Release
    /// ([`Producer::store_word`]), the bytes written before it can be read
    /// with [`Consumer::read_marked`].
    ///
    /// # Safety
    /// The read position plus `offset` is a multiple of 8, and
    /// `offset + 8 <= capacity`.
    pub unsafe fn word_at(&self, offset: usize) -> u64 {
        let at = (self.tail as usize + offset) & (self.bytes.capacity() - 1);
        self.bytes.load_word(at, Ordering::Acquire)
    }

    /// Copies `len` bytes from `offset` bytes past the read position, bytes
    /// that a marker loaded with [`Consumer::word_at`] says are written.
    ///
    /// # Safety
    /// `dst` is valid for `len` writes; the producer wrote those bytes
    /// before the marker this consumer loaded.
    pub unsafe fn read_marked(&self, offset: usize, dst: *mut u8, len: usize) {
        self.copy_out(offset, dst, len);
    }

    /// Copies `len` bytes from `offset` bytes past the read position, in
    /// two pieces where they wrap around the end.
    ///
    /// # Safety
    /// `dst` is valid for `len` writes, and the bytes are published (by
    /// the cursor or by a marker).
    unsafe fn copy_out(&self, offset: usize, dst: *mut u8, len: usize) {
        let at = self.tail as usize + offset;
        in_pieces(at, len, self.bytes.capacity(), |from, to, n| {
            // SAFETY: `dst` is valid for `len` writes (this function's
            // contract); the piece is inside the ring.
            unsafe { self.bytes.load(from, dst.add(to), n) }
        });
    }

    /// Where the read position is in the storage.
    pub fn read_offset(&self) -> usize {
        self.tail as usize & (self.bytes.capacity() - 1)
    }

    /// The ring's storage, for a caller that reads a frame in place at
    /// [`Consumer::read_offset`] (bytes published, as `read_marked`'s).
    pub fn storage(&self) -> &B {
        &self.bytes
    }

    /// Consumes `len` bytes that a marker says are written (the cursor may
    /// not show them yet).
    ///
    /// # Safety
    /// The producer wrote those bytes before the marker this consumer
    /// loaded.
    pub unsafe fn skip_marked(&mut self, len: usize) {
        self.tail += len as u64;
        self.head_seen = self.head_seen.max(self.tail);
    }

    /// Returns the space of every popped or skipped byte to the producer;
    /// whether there was any (the cursor is stored only then: its line
    /// stays in this consumer's cache while the producer does not look).
    pub fn release(&mut self) -> bool {
        if self.tail == self.released {
            return false;
        }
        self.control.tail.0.store(self.tail, Ordering::Release);
        self.released = self.tail;
        true
    }

    /// Bytes consumed but not yet released.
    pub fn unreleased(&self) -> u64 {
        self.tail - self.released
    }

    /// Whether bytes are ready. Reads the producer's cursor itself, so a
    /// consumer about to sleep calls it after
    /// [`crate::Doorbell::prepare_sleep`].
    pub fn has_data(&self) -> bool {
        self.control.head.0.load(Ordering::Acquire) > self.tail
    }
}

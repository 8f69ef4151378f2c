//! The mailbox: one byte ring that many producers share, one at a time.
//!
//! A writer takes the mailbox's lock word (compare-and-swap from 0 to its
//! own nonzero id), then writes as the ring's one producer would: copies
//! its record in at the head, publishes the head with Release, and
//! releases the lock with Release. The lock's Acquire hands each writer
//! the head its predecessor published, so the head needs no atomic
//! read-modify-write and the consumer is the ring's ordinary
//! [`Consumer`](crate::Consumer): it reads records in the order the
//! writers published them, whole, since the head moves past a record only
//! once all of it is written.
//!
//! Nobody waits holding the lock: a writer that finds the lock taken, or
//! too little room, is refused at once and tries again later. A writer
//! that dies holding the lock published nothing past the head, so what
//! it half wrote is invisible; the lock word names it, and whoever finds
//! it dead frees the lock ([`MailboxControl::free_from`]).

use std::ops::Deref;

use crate::ring::{Bytes, Producer, RingControl};
use crate::sync::{AtomicU64, Ordering};

#[repr(C, align(64))]
struct LockWord(AtomicU64);

/// The control words of a mailbox: the writers' lock, on its own cache
/// line, and the ring's cursors. All-zero memory is a valid, empty,
/// unlocked mailbox.
#[repr(C)]
pub struct MailboxControl {
    lock: LockWord,
    ring: RingControl,
}

/// Why a write was refused (nothing was written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Another writer holds the lock: its id.
    Held(u64),
    /// Fewer free bytes than the record needs.
    Full,
}

impl MailboxControl {
    /// An empty, unlocked mailbox.
    pub fn new() -> MailboxControl {
        MailboxControl {
            lock: LockWord(AtomicU64::new(0)),
            ring: RingControl::new(),
        }
    }

    /// The ring's cursors, for the mailbox's one [`Consumer`](crate::Consumer).
    pub fn ring(&self) -> &RingControl {
        &self.ring
    }

    /// The id of the writer holding the lock now (0: nobody).
    pub fn holder(&self) -> u64 {
        self.lock.0.load(Ordering::Relaxed)
    }

    /// Frees the lock if writer `dead` still holds it; whether it did.
    /// Only for a writer known to be gone: its record, unpublished, is
    /// dropped with it. (Its last stores reached memory when its process
    /// ended, long before anyone could find it gone.)
    pub fn free_from(&self, dead: u64) -> bool {
        dead != 0
            && self
                .lock
                .0
                .compare_exchange(dead, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// Writes one record, the concatenation of `parts`, as writer `id`
    /// (nonzero, and not shared with any other writer), or refuses it
    /// with nothing written.
    ///
    /// # Safety
    /// `bytes` is the mailbox's storage: the storage its consumer reads,
    /// which no writer touches but through this function.
    pub unsafe fn write<B: Bytes>(
        &self,
        bytes: &B,
        id: u64,
        parts: &[&[u8]],
    ) -> Result<(), Refused> {
        assert_ne!(id, 0, "a mailbox writer's id is nonzero");
        if let Err(holder) =
            self.lock
                .0
                .compare_exchange(0, id, Ordering::Acquire, Ordering::Relaxed)
        {
            return Err(Refused::Held(holder));
        }
        let len: usize = parts.iter().map(|p| p.len()).sum();
        // SAFETY: the lock makes this the ring's only producer, and the
        // Acquire that took it makes the head the last writer published
        // visible here.
        let mut producer = unsafe { Producer::new(ByRef(&self.ring), ByRef(bytes)) };
        let result = if producer.writable(len) < len {
            Err(Refused::Full)
        } else {
            for part in parts {
                // SAFETY: `part` is valid for its length; the room for all
                // parts was checked.
                unsafe { producer.push(part.as_ptr(), part.len()) };
            }
            producer.publish();
            Ok(())
        };
        self.lock.0.store(0, Ordering::Release);
        result
    }
}

impl Default for MailboxControl {
    fn default() -> Self {
        MailboxControl::new()
    }
}

/// A borrowed control block or storage, for a producer that lives only
/// while its writer holds the lock.
struct ByRef<'a, T: ?Sized>(&'a T);

impl<T> Deref for ByRef<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0
    }
}

// SAFETY: forwards to `B`, which upholds the contract.
unsafe impl<B: Bytes> Bytes for ByRef<'_, B> {
    fn capacity(&self) -> usize {
        self.0.capacity()
    }
    unsafe fn store(&self, at: usize, src: *const u8, len: usize) {
        self.0.store(at, src, len)
    }
    unsafe fn load(&self, at: usize, dst: *mut u8, len: usize) {
        self.0.load(at, dst, len)
    }
    unsafe fn store_word(&self, at: usize, value: u64, order: Ordering) {
        self.0.store_word(at, value, order)
    }
    unsafe fn load_word(&self, at: usize, order: Ordering) -> u64 {
        self.0.load_word(at, order)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The lock of a writer that died holding it is freed only for that
    /// writer, and the mailbox then takes records again.
    #[test]
    fn a_dead_writers_lock_is_freed_for_it_only() {
        let control = MailboxControl::new();
        control.lock.0.store(9, Ordering::Relaxed);
        assert_eq!(control.holder(), 9);
        assert!(!control.free_from(8), "not the holder");
        assert!(!control.free_from(0));
        assert_eq!(control.holder(), 9);
        assert!(control.free_from(9));
        assert_eq!(control.holder(), 0);
        assert!(!control.free_from(9), "freed once");
    }
}

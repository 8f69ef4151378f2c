//! Sleeping without losing a wake-up.
//!
//! A consumer that found nothing to read for a while sleeps in the kernel
//! (on whatever event the caller chose: an eventfd, a socket, a futex).
//! Producers must wake it, but a wake-up is a system call, so they do it
//! only when it sleeps. The protocol is the store-buffer (Dekker) pattern
//! with sequentially consistent fences on both sides:
//!
//! - consumer: `prepare_sleep()` (store 1, fence), then re-check every ring
//!   it reads ([`crate::Consumer::has_data`]); sleep only if all are
//!   empty; after waking (or instead of sleeping) `awake()`;
//! - producer: publish the ring's head, then `must_ring()` (fence, load;
//!   on 1 swap to 0): true means "wake the consumer now".
//!
//! Because both fences are SeqCst, either the producer's load sees the
//! consumer's 1, or the consumer's re-check sees the producer's bytes:
//! never both miss (tests/loom.rs checks every interleaving). The swap
//! makes at most one producer pay the system call per sleep.

use crate::sync::{fence, AtomicU32, Ordering};

/// The sleep flag of one consumer, on its own cache line.
#[repr(C, align(64))]
pub struct Doorbell {
    sleeping: AtomicU32,
}

impl Doorbell {
    pub fn new() -> Doorbell {
        Doorbell {
            sleeping: AtomicU32::new(0),
        }
    }

    /// Consumer: announces that it is about to sleep. Re-check the rings
    /// afterwards.
    pub fn prepare_sleep(&self) {
        self.sleeping.store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Consumer: it is awake (woken, or it decided not to sleep).
    pub fn awake(&self) {
        self.sleeping.store(0, Ordering::Relaxed);
    }

    /// Producer, after publishing: whether it must wake the consumer.
    #[inline]
    pub fn must_ring(&self) -> bool {
        fence(Ordering::SeqCst);
        self.sleeping.load(Ordering::Relaxed) == 1 && self.sleeping.swap(0, Ordering::Relaxed) == 1
    }
}

impl Default for Doorbell {
    fn default() -> Self {
        Doorbell::new()
    }
}

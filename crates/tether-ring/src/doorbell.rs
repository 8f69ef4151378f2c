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
//!
//! The asymmetric variant moves the producer's fence, paid at every
//! publish, to the consumer, which sleeps rarely: the producer calls
//! [`Doorbell::must_ring_unfenced`] (the compiler keeps the load after the
//! publishing store, the processor need not), and the consumer runs,
//! between `prepare_sleep()` and its re-check, a barrier that makes every
//! CPU running a producer execute a full fence (Linux's `membarrier(2)`,
//! `MEMBARRIER_CMD_GLOBAL_EXPEDITED`, which reaches the CPUs running
//! processes registered for it: the pattern of its manual page). At the
//! point where a producer's CPU fences, either its publishing store came
//! before (and is visible to the re-check after the barrier returns) or
//! its load comes after (and sees the consumer's 1, visible before the
//! barrier began). The caller provides that barrier
//! and decides which variant a pair uses. The guarantee is the kernel's,
//! outside the Rust memory model (as in liburcu and folly); loom cannot
//! model it, so `tether`'s shm transport tests the wiring on the machine
//! (`barrier.rs`). That transport does not use this variant today: the
//! kernel's barrier was found to skip a CPU the process ran on before it
//! registered (`docs/journal/2026-11-28-shm-barrier.md`), so its writers
//! call [`Doorbell::must_ring`].

use std::sync::atomic::compiler_fence;

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
        self.claim_wakeup()
    }

    /// Producer, after publishing, when the consumer runs the asymmetric
    /// barrier before its re-check and that barrier reaches this producer's
    /// CPU (for `membarrier(2)`: this process registered for the command
    /// the consumer issues; see the module documentation): whether it must
    /// wake the consumer. No fence.
    #[inline]
    pub fn must_ring_unfenced(&self) -> bool {
        compiler_fence(Ordering::SeqCst);
        self.claim_wakeup()
    }

    /// Whether the consumer sleeps, and this producer is the one to wake it.
    #[inline(always)]
    fn claim_wakeup(&self) -> bool {
        self.sleeping.load(Ordering::Relaxed) == 1 && self.sleeping.swap(0, Ordering::Relaxed) == 1
    }
}

impl Default for Doorbell {
    fn default() -> Self {
        Doorbell::new()
    }
}

//! The lock around the C API's state, biased to the first thread that
//! takes it.
//!
//! Every exported function takes the lock, so a small message pays it
//! twice per round trip on its critical path: as a `std::sync::Mutex` it
//! is two atomic read-modify-writes per call (lock, unlock), a cost
//! measured on the critical path of every small message
//! (docs/journal/2026-11-24-design-measurements.md#the-c-apis-lock). Most programs call the library from one thread
//! (MPI's `THREAD_SINGLE`/`FUNNELED`), so the lock is *biased*: the
//! first thread to take it (the owner) enters with plain stores and a
//! load, and no other thread may enter while the bias holds. The first
//! time another thread wants in, it revokes the bias for good and from
//! then on every thread, the owner too, takes a plain mutex.
//!
//! Revoking is the store-buffer (Dekker) pattern with an asymmetric
//! fence:
//!
//! - owner: store `owner_in = 1`, compiler fence, load `biased`; enter
//!   when it is still set (else clear `owner_in` and take the mutex);
//!   leave with `owner_in = 0` (Release);
//! - revoker (holding the mutex): store `biased = 0`, then
//!   `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which makes every
//!   other thread of the process execute a full memory barrier, then wait
//!   until it loads `owner_in == 0` (Acquire).
//!
//! The system call stands for the fence the owner does not execute, so
//! either the owner's load sees the revocation or the revoker sees the
//! owner inside and waits for it to leave (the kernel's guarantee, used
//! as liburcu and folly do). Where the call is missing (Linux before 4.14,
//! or refused by a seccomp filter) the lock is never biased.
//!
//! The lock is not re-entrant, and taking it again from the thread that
//! holds it is refused with [`Reentered`] instead of handing out a second
//! guard (two `&mut T` at once on the biased path, a self-deadlock on the
//! mutex): a C callback run inside a Tether call (an active-message
//! handler) that calls Tether again gets an error, not undefined
//! behaviour. The holder is recognised by `owner_in` on the biased path
//! and by `mutex_holder` on the mutex path; both are written only by the
//! thread they name, so that thread reads its own stores and no other
//! thread can make it see its own id there.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tether::membarrier::{membarrier, CMD_PRIVATE_EXPEDITED, CMD_REGISTER_PRIVATE_EXPEDITED};

/// This thread's identity among live threads: its `pthread_t`, unique
/// while the thread lives and read from the thread pointer (a thread-local
/// of this shared library would cost a `__tls_get_addr` call per lock).
fn this_thread() -> usize {
    // SAFETY: no arguments; always succeeds.
    unsafe { libc::pthread_self() as usize }
}

/// The lock was wanted by the thread that already holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reentered {
    /// The label the holder took the lock with (the C call it is in).
    pub holder: &'static str,
}

/// A mutual-exclusion lock biased to the first thread that takes it.
pub struct BiasedLock<T> {
    value: UnsafeCell<T>,
    /// A thread claimed the bias (it may have been revoked since).
    claimed: AtomicBool,
    /// The owner's `this_thread()` (never 0), once it claimed the bias; 0
    /// before.
    owner: AtomicUsize,
    /// The bias holds: the owner enters without the mutex.
    biased: AtomicBool,
    /// The owner is inside through the biased path.
    owner_in: AtomicU32,
    mutex: Mutex<()>,
    /// `this_thread()` of the thread inside through the mutex; 0 when
    /// none is.
    mutex_holder: AtomicUsize,
    /// The label of the thread inside, for [`Reentered`]; written and read
    /// only by the thread that holds the lock.
    label: UnsafeCell<&'static str>,
}

// SAFETY: the value is only reached through a `Guard`, and guards exclude
// each other (the biased path against the mutex by the protocol above).
unsafe impl<T: Send> Sync for BiasedLock<T> {}

/// Access to the locked value; leaving drops the lock.
pub struct Guard<'a, T> {
    lock: &'a BiasedLock<T>,
    /// `None` on the owner's biased path.
    mutex: Option<MutexGuard<'a, ()>>,
}

impl<T> BiasedLock<T> {
    pub const fn new(value: T) -> BiasedLock<T> {
        BiasedLock {
            value: UnsafeCell::new(value),
            claimed: AtomicBool::new(false),
            owner: AtomicUsize::new(0),
            biased: AtomicBool::new(false),
            owner_in: AtomicU32::new(0),
            mutex: Mutex::new(()),
            mutex_holder: AtomicUsize::new(0),
            label: UnsafeCell::new(""),
        }
    }

    /// Takes the lock for the holder named `label`, blocking while another
    /// thread holds it. Fails at once with [`Reentered`] (naming the
    /// holder's label) when the calling thread already holds it; the
    /// holder's guard stays valid. The owner's biased entry is inlined
    /// into the caller (a few instructions on every C call); everything
    /// else is out of line.
    #[inline(always)]
    pub fn lock(&self, label: &'static str) -> Result<Guard<'_, T>, Reentered> {
        let me = this_thread();
        if self.owner.load(Ordering::Relaxed) == me {
            // Only this thread stores `owner_in`: 1 means it is inside
            // (whether or not the bias was revoked since it entered).
            if self.owner_in.load(Ordering::Relaxed) != 0 {
                return Err(self.reentered());
            }
            if let Some(guard) = self.enter_biased() {
                return Ok(self.labelled(guard, label));
            }
        }
        self.lock_slow(me).map(|guard| self.labelled(guard, label))
    }

    #[inline(always)]
    fn labelled<'a>(&'a self, guard: Guard<'a, T>, label: &'static str) -> Guard<'a, T> {
        // SAFETY: `guard` excludes every other thread, and this thread
        // holds no other guard (`lock` refuses re-entry).
        unsafe { *self.label.get() = label };
        guard
    }

    /// The error for a thread that wants the lock it holds.
    #[cold]
    fn reentered(&self) -> Reentered {
        // SAFETY: the caller holds the lock, so nobody else writes the
        // label, and this thread wrote it when it entered.
        let holder = unsafe { *self.label.get() };
        Reentered { holder }
    }

    /// The owner's entry without the mutex, while the bias holds.
    #[inline(always)]
    fn enter_biased(&self) -> Option<Guard<'_, T>> {
        self.owner_in.store(1, Ordering::Relaxed);
        // The revoker's membarrier is this fence's hardware half.
        compiler_fence(Ordering::SeqCst);
        if self.biased.load(Ordering::Relaxed) {
            return Some(Guard {
                lock: self,
                mutex: None,
            });
        }
        self.owner_in.store(0, Ordering::Release);
        None
    }

    /// `lock` for a thread that is not the owner, or when the bias has
    /// been revoked: claims the bias if nobody has, else takes the mutex.
    #[cold]
    #[inline(never)]
    fn lock_slow(&self, me: usize) -> Result<Guard<'_, T>, Reentered> {
        // Only this thread stores its own id there, and it clears it
        // before it unlocks: seeing it means this thread is inside.
        if self.mutex_holder.load(Ordering::Relaxed) == me {
            return Err(self.reentered());
        }
        if self.owner.load(Ordering::Relaxed) != me && self.claim(me) {
            if let Some(guard) = self.enter_biased() {
                return Ok(guard);
            }
        }
        let mutex = self
            .mutex
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if self.biased.load(Ordering::Relaxed) && self.owner.load(Ordering::Relaxed) != me {
            self.revoke();
        }
        self.mutex_holder.store(me, Ordering::Relaxed);
        Ok(Guard {
            lock: self,
            mutex: Some(mutex),
        })
    }

    /// Makes thread `me` the owner if no thread has claimed the bias and
    /// the kernel offers the barrier revoking needs. The bias is set while
    /// holding the mutex, so that no thread that entered through the mutex
    /// without seeing it is still inside when the owner first enters
    /// without the mutex.
    fn claim(&self, me: usize) -> bool {
        if self.claimed.load(Ordering::Relaxed)
            || self
                .claimed
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return false;
        }
        let registered = membarrier(CMD_REGISTER_PRIVATE_EXPEDITED).is_ok();
        if registered {
            // Under the mutex: a thread inside through it (which saw no
            // bias) leaves first, and every later one sees the bias and
            // revokes it.
            let _inside = self
                .mutex
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            self.owner.store(me, Ordering::Relaxed);
            self.biased.store(true, Ordering::Relaxed);
        }
        registered
    }

    /// Ends the bias (the caller holds the mutex and is not the owner):
    /// after it, the owner takes the mutex too.
    fn revoke(&self) {
        self.biased.store(false, Ordering::Relaxed);
        // Registration succeeded before the bias was set, and a child of
        // fork() keeps it (tests/c/threads.c revokes in one).
        assert!(
            membarrier(CMD_PRIVATE_EXPEDITED).is_ok(),
            "membarrier failed after registering"
        );
        // The owner may be inside for long (a blocking receive): wait as a
        // mutex would, without holding a core.
        let mut waits = 0u32;
        while self.owner_in.load(Ordering::Acquire) != 0 {
            waits += 1;
            if waits < 100 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// Whether the owner still enters without the mutex (for tests).
    #[cfg(test)]
    fn is_biased(&self) -> bool {
        self.biased.load(Ordering::Relaxed)
    }
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard excludes every other (see `BiasedLock`).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        if self.mutex.is_none() {
            self.lock.owner_in.store(0, Ordering::Release);
        } else {
            // Before the mutex guard (a field) is dropped, so after this
            // thread's unlock nobody can see its id here.
            self.lock.mutex_holder.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// The owner counts alone through the biased path, then other threads
    /// join while it keeps counting: the bias ends, and no increment of
    /// the unsynchronised counter is lost.
    #[test]
    fn threads_joining_the_owner_lose_no_increment() {
        std::thread::spawn(|| {
            let lock = Arc::new(BiasedLock::new(0u64));
            for _ in 0..10_000 {
                *lock.lock("test").unwrap() += 1;
            }
            assert!(lock.is_biased(), "one thread keeps the bias");
            let others: Vec<_> = (0..3)
                .map(|_| {
                    let lock = lock.clone();
                    std::thread::spawn(move || {
                        for _ in 0..20_000 {
                            let mut value = lock.lock("test").unwrap();
                            let read = *value;
                            std::hint::black_box(&read);
                            *value = read + 1;
                        }
                    })
                })
                .collect();
            for _ in 0..20_000 {
                let mut value = lock.lock("test").unwrap();
                let read = *value;
                std::hint::black_box(&read);
                *value = read + 1;
            }
            for other in others {
                other.join().unwrap();
            }
            assert!(!lock.is_biased(), "another thread revoked the bias");
            assert_eq!(*lock.lock("test").unwrap(), 10_000 + 4 * 20_000);
        })
        .join()
        .unwrap();
    }

    /// Two threads making their first call at the same moment, each
    /// staying inside for a while: whichever claims the bias, they are
    /// never inside at once (the bias is set under the mutex, so a thread
    /// that entered through the mutex while the owner was still claiming
    /// leaves before the owner's first biased entry).
    #[test]
    fn threads_starting_together_are_never_inside_at_once() {
        for _ in 0..20 {
            let lock = Arc::new(BiasedLock::new(()));
            let inside = Arc::new(AtomicU32::new(0));
            let go = Arc::new(std::sync::Barrier::new(2));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (lock, inside, go) = (lock.clone(), inside.clone(), go.clone());
                    std::thread::spawn(move || {
                        go.wait();
                        for _ in 0..2 {
                            let _guard = lock.lock("test").unwrap();
                            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two inside");
                            std::thread::sleep(Duration::from_millis(1));
                            inside.fetch_sub(1, Ordering::SeqCst);
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
        }
    }

    /// A thread that wants in while the owner is inside waits until the
    /// owner leaves.
    #[test]
    fn a_thread_waits_for_the_owner_inside() {
        std::thread::spawn(|| {
            let lock = Arc::new(BiasedLock::new(Vec::<&str>::new()));
            let mut inside = lock.lock("test").unwrap();
            inside.push("owner in");
            let other = {
                let lock = lock.clone();
                std::thread::spawn(move || lock.lock("test").unwrap().push("other"))
            };
            std::thread::sleep(Duration::from_millis(50));
            inside.push("owner out");
            drop(inside);
            other.join().unwrap();
            assert_eq!(
                *lock.lock("test").unwrap(),
                ["owner in", "owner out", "other"]
            );
        })
        .join()
        .unwrap();
    }

    /// Runs `body` on a new thread and returns what it returns, or fails
    /// the test when it has not returned within 5 s (a re-entry that
    /// deadlocks on the mutex instead of being refused).
    fn within_5s<R: Send + 'static>(body: impl FnOnce() -> R + Send + 'static) -> R {
        let (done, result) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(body()).unwrap());
        result
            .recv_timeout(Duration::from_secs(5))
            .expect("re-entering the lock deadlocked instead of failing")
    }

    /// The owner, inside through the biased path, is refused a second
    /// guard (which would be a second `&mut` to the value), told who holds
    /// the lock, and its first guard still excludes other threads.
    #[test]
    fn the_owner_re_entering_on_the_biased_path_is_refused() {
        within_5s(|| {
            let lock = Arc::new(BiasedLock::new(Vec::<&str>::new()));
            let mut outer = lock.lock("tether_wait").unwrap();
            assert!(lock.is_biased(), "the first thread takes the bias");
            assert_eq!(
                lock.lock("tether_send").err(),
                Some(Reentered {
                    holder: "tether_wait"
                })
            );
            outer.push("owner in");
            let other = {
                let lock = lock.clone();
                std::thread::spawn(move || lock.lock("other").unwrap().push("other"))
            };
            std::thread::sleep(Duration::from_millis(50));
            outer.push("owner out");
            drop(outer);
            other.join().unwrap();
            assert_eq!(
                *lock.lock("test").unwrap(),
                ["owner in", "owner out", "other"]
            );
        });
    }

    /// After the bias is revoked every thread enters through the mutex; a
    /// thread inside that wants in again is refused, not deadlocked, and
    /// the lock is free once its guard drops.
    #[test]
    fn a_thread_re_entering_through_the_mutex_is_refused() {
        within_5s(|| {
            let lock = Arc::new(BiasedLock::new(0u32));
            drop(lock.lock("claim the bias").unwrap());
            let other = lock.clone();
            std::thread::spawn(move || *other.lock("revoke").unwrap() += 1)
                .join()
                .unwrap();
            assert!(!lock.is_biased(), "another thread revoked the bias");
            let outer = lock.lock("tether_recv").unwrap();
            assert_eq!(
                lock.lock("tether_isend").err(),
                Some(Reentered {
                    holder: "tether_recv"
                })
            );
            drop(outer);
            *lock.lock("test").unwrap() += 1;
            let other = lock.clone();
            std::thread::spawn(move || *other.lock("test").unwrap() += 1)
                .join()
                .unwrap();
            assert_eq!(*lock.lock("test").unwrap(), 3);
        });
    }

    /// A thread that never owned the bias, inside through the mutex while
    /// the owner is not, is refused too.
    #[test]
    fn a_thread_that_is_not_the_owner_re_entering_is_refused() {
        within_5s(|| {
            let lock = Arc::new(BiasedLock::new(()));
            drop(lock.lock("owner").unwrap());
            let other = lock.clone();
            std::thread::spawn(move || {
                let _outer = other.lock("tether_barrier").unwrap();
                assert_eq!(
                    other.lock("tether_bcast").err(),
                    Some(Reentered {
                        holder: "tether_barrier"
                    })
                );
            })
            .join()
            .unwrap();
            drop(lock.lock("owner again").unwrap());
        });
    }
}

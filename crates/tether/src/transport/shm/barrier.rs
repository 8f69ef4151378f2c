//! The consumer's half of the doorbell's asymmetric barrier
//! (`tether_ring::Doorbell`): Linux's `membarrier(2)` with
//! `MEMBARRIER_CMD_GLOBAL_EXPEDITED`, which makes every CPU that runs a
//! thread of a registered process execute a full memory barrier before it
//! returns (CPUs running other threads have one already: a context switch).
//!
//! With it, a sender does not fence after every message it publishes to
//! a process that sleeps with this barrier: the sleeper pays one system
//! call when it goes to sleep instead, which measured faster where the two
//! CPUs sit far apart (docs/journal/2026-11-25-shm-writers-without-fence.md).
//! The call
//! interrupts every CPU then running a registered process, Tether's of
//! other jobs on the host included: 4 and 5 processes on this machine's 2
//! CPUs, sleeping at nearly every wait, ran as fast with it as without.
//!
//! A pair uses the variant only when both ends can: the sender registered
//! (so that the sleeper's barrier reaches it) and the sleeper's segment
//! says it sleeps with the barrier (`TETHER_SHM_MEMBARRIER`, and a kernel
//! that offers the command: 4.16 or later, not refused by a seccomp filter).
//!
//! That this is enough rests on the kernel's documented guarantee (the
//! pattern of membarrier(2)'s manual page, also used by liburcu and
//! folly), outside the Rust memory model. The test below checks the
//! wiring: with no barrier at all it finds lost wake-ups, with the barrier
//! none; it would also pass with another system call in its place, whose
//! time alone lets the sender's store drain.

use std::io;

use crate::membarrier::{
    membarrier, CMD_GLOBAL_EXPEDITED, CMD_QUERY, CMD_REGISTER_GLOBAL_EXPEDITED,
};

/// Registers this process for the barriers other processes issue, after
/// checking that the kernel offers both commands. Once this succeeded,
/// [`issue`] works and reaches this process.
pub fn register() -> io::Result<()> {
    let offered = membarrier(CMD_QUERY)?;
    let needed = CMD_GLOBAL_EXPEDITED | CMD_REGISTER_GLOBAL_EXPEDITED;
    if offered & needed != needed {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("the kernel offers membarrier commands {offered:#x}, without the global expedited ones"),
        ));
    }
    membarrier(CMD_REGISTER_GLOBAL_EXPEDITED).map(|_| ())
}

/// Makes every CPU running a thread of a registered process execute a
/// full memory barrier, and returns after they all did.
pub fn issue() -> io::Result<()> {
    membarrier(CMD_GLOBAL_EXPEDITED).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use tether_ring::Doorbell;

    fn spin(n: u64) {
        for _ in 0..n {
            std::hint::spin_loop();
        }
    }

    /// Waits until `counter` reaches `r`, yielding now and then (the test
    /// may share its CPUs with others).
    fn wait_for(counter: &AtomicU64, r: u64) {
        let mut spins = 0u32;
        while counter.load(Ordering::Acquire) < r {
            spins += 1;
            if spins.is_multiple_of(1024) {
                std::thread::yield_now();
            }
            std::hint::spin_loop();
        }
    }

    /// Both sides of one wake-up decision per round, started together
    /// and then each delayed by a different number of spins, so that over
    /// the rounds every order of their steps comes up: the sender
    /// publishes round `r` and asks the doorbell unfenced; the sleeper
    /// announces its sleep, issues the barrier and re-checks. Returns the
    /// rounds where the sleeper saw nothing and the sender did not ring.
    fn lost_wakeups(rounds: u64) -> u64 {
        let bell = Arc::new(Doorbell::new());
        let published = Arc::new(AtomicU64::new(0));
        let started = Arc::new(AtomicU64::new(0));
        let finished = Arc::new(AtomicU64::new(0));
        let rang = Arc::new(AtomicU64::new(0));
        let sender = {
            let (bell, published, started, finished, rang) = (
                bell.clone(),
                published.clone(),
                started.clone(),
                finished.clone(),
                rang.clone(),
            );
            std::thread::spawn(move || {
                for r in 1..=rounds {
                    wait_for(&started, r);
                    spin(r % 8);
                    published.store(r, Ordering::Release);
                    if bell.must_ring_unfenced() {
                        rang.store(r, Ordering::Release);
                    }
                    finished.store(r, Ordering::Release);
                }
            })
        };
        let mut lost = 0;
        for r in 1..=rounds {
            started.store(r, Ordering::Release);
            spin(r / 8 % 32);
            bell.prepare_sleep();
            issue().expect("membarrier after a successful registration");
            let saw = published.load(Ordering::Acquire) >= r;
            wait_for(&finished, r);
            if !saw && rang.load(Ordering::Acquire) != r {
                lost += 1;
            }
            bell.awake();
        }
        sender.join().unwrap();
        lost
    }

    #[test]
    fn a_sleeper_that_issues_the_barrier_never_misses_an_unfenced_sender() {
        // Without the barrier, 16 to 28 of the rounds lost their wake-up
        // here (2 CPUs, three runs): the test can fail.
        if let Err(e) = register() {
            eprintln!("membarrier not offered here ({e}): the asymmetric barrier is not used");
            return;
        }
        assert_eq!(lost_wakeups(100_000), 0, "lost wake-ups");
    }
}

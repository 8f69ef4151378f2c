//! How long a wait polls before it sleeps.
//!
//! Waking a process that sleeps in the kernel costs tens of microseconds,
//! more than a message takes over loopback TCP, so a wait first polls for
//! a window; but polling steals the core from the very peer it waits for
//! when processes outnumber cores. A wait therefore polls while bytes are
//! moving and for a window after they last moved, and the window adapts to
//! each wait's idle tail (from the last movement to completion): after a
//! tail within the maximum window (polling that long would have avoided a
//! sleep) it doubles, up to the maximum; after a longer one it halves. On an oversubscribed machine waits
//! are long, and the window falls to nothing within a few of them; in a
//! ping-pong on idle cores waits are short and the window stays open, even
//! if an earlier phase of the program (a long computation of the peer)
//! had closed it.
//!
//! What a wait does between two polls depends on whether every process
//! has a core ([`Polling`]). Where this host runs more processes of the
//! universe than the CPUs a process may use, a wait that spins holds the
//! core its peer needs to answer, until the scheduler's tick takes it away.
//! Giving the core away after each poll (`sched_yield`, as Open MPI does
//! when oversubscribed) lets the peer run at once, several times faster
//! (docs/journal/2026-11-24-design-measurements.md). Where every process
//! has a core, spinning answers fastest.

use std::time::Duration;

/// What a wait does after a poll that found nothing, inside its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Polling {
    /// Busy-polls (a CPU pause hint between polls).
    Spin,
    /// Gives the core to another runnable process between polls.
    Yield,
}

impl Polling {
    /// `TETHER_WAIT`'s choice (`auto`, `spin` or `yield`) for a host
    /// running at least `processes` processes of the universe, where this
    /// process may use `cpus` CPUs.
    pub fn choose(setting: &str, processes: usize, cpus: usize) -> Polling {
        match setting {
            "spin" => Polling::Spin,
            "yield" => Polling::Yield,
            _ if processes > cpus => Polling::Yield,
            _ => Polling::Spin,
        }
    }

    /// What to do after an idle poll.
    pub fn pause(self) {
        match self {
            Polling::Spin => std::hint::spin_loop(),
            Polling::Yield => std::thread::yield_now(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct SpinPolicy {
    max: Duration,
    window: Duration,
}

impl SpinPolicy {
    pub fn new(max: Duration) -> SpinPolicy {
        SpinPolicy { max, window: max }
    }

    pub fn set_max(&mut self, max: Duration) {
        self.max = max;
        self.window = self.window.min(max);
    }

    /// How long the next wait may poll.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Records the idle tail of the last wait.
    pub fn record(&mut self, waited: Duration) {
        self.window = if waited <= self.max {
            (self.window * 2 + Duration::from_micros(1)).min(self.max)
        } else if self.window < Duration::from_micros(2) {
            Duration::ZERO
        } else {
            self.window / 2
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_yields_only_when_processes_outnumber_cpus() {
        assert_eq!(Polling::choose("auto", 4, 2), Polling::Yield);
        assert_eq!(Polling::choose("auto", 2, 2), Polling::Spin);
        assert_eq!(Polling::choose("auto", 1, 1), Polling::Spin);
        assert_eq!(Polling::choose("spin", 8, 2), Polling::Spin);
        assert_eq!(Polling::choose("yield", 1, 8), Polling::Yield);
    }

    #[test]
    fn window_backs_off_fast_and_recovers() {
        let mut p = SpinPolicy::new(Duration::from_micros(50));
        for _ in 0..7 {
            p.record(Duration::from_millis(3));
        }
        assert_eq!(p.window(), Duration::ZERO);
        for _ in 0..10 {
            p.record(Duration::from_micros(20));
        }
        assert_eq!(p.window(), Duration::from_micros(50));
    }
}

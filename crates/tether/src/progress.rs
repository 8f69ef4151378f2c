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

use std::time::Duration;

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

//! How long a wait polls before it sleeps.
//!
//! Waking a process that sleeps in the kernel costs tens of microseconds,
//! more than a message takes over loopback TCP, so a wait first polls for
//! a window; but polling steals the core from the very peer it waits for
//! when processes outnumber cores. The window therefore adapts: it doubles
//! (up to the configured maximum) after a wait that polling satisfied and
//! halves after one that had to sleep, so it falls to nothing within a few
//! waits on an oversubscribed machine and grows back when polling pays.

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

    /// Records how the last wait ended.
    pub fn record(&mut self, satisfied_while_polling: bool) {
        self.window = if satisfied_while_polling {
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
            p.record(false);
        }
        assert_eq!(p.window(), Duration::ZERO);
        for _ in 0..10 {
            p.record(true);
        }
        assert_eq!(p.window(), Duration::from_micros(50));
    }
}

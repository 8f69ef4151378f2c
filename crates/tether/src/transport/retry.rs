//! The one retry schedule of connection set-up: a peer whose address,
//! segment or listener is not there yet is looked up again after 1 ms,
//! then after twice as long each time, up to [`MAX_DELAY`], until the
//! caller's deadline (`TETHER_CONNECT_TIMEOUT`). Used by the router's
//! pending routes and by TCP's connect attempts alike.
//!
//! A lookup may be a round trip to the rendezvous service, so retrying on
//! every progress round (as a busy-polling wait makes them) would load the
//! service and the process for nothing; the cap bounds how late a peer
//! that appears is noticed.

use std::time::{Duration, Instant};

const FIRST_DELAY: Duration = Duration::from_millis(1);
/// The longest pause between two tries.
pub const MAX_DELAY: Duration = Duration::from_millis(100);

/// When to try next.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    next_try: Instant,
    delay: Duration,
    tries: u32,
}

impl Retry {
    /// A schedule whose first try is due at `now`.
    pub fn starting(now: Instant) -> Retry {
        Retry {
            next_try: now,
            delay: FIRST_DELAY,
            tries: 0,
        }
    }

    /// When the next try is due.
    pub fn next_try(&self) -> Instant {
        self.next_try
    }

    pub fn is_due(&self, now: Instant) -> bool {
        now >= self.next_try
    }

    /// Records a try made at `now`: the next one is due one delay later,
    /// and the delay after it doubles (up to [`MAX_DELAY`]).
    pub fn tried(&mut self, now: Instant) {
        self.next_try = now + self.delay;
        self.delay = (self.delay * 2).min(MAX_DELAY);
        self.tries = self.tries.saturating_add(1);
    }

    /// How many tries were made (the ones after the first are retries).
    pub fn tries(&self) -> u32 {
        self.tries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap() {
        let start = Instant::now();
        let mut retry = Retry::starting(start);
        assert!(retry.is_due(start));
        let mut now = start;
        let mut delays = Vec::new();
        for _ in 0..10 {
            retry.tried(now);
            assert!(!retry.is_due(now));
            delays.push(retry.next_try() - now);
            now = retry.next_try();
        }
        let ms: Vec<u128> = delays.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [1, 2, 4, 8, 16, 32, 64, 100, 100, 100]);
        assert_eq!(retry.tries(), 10);
    }
}

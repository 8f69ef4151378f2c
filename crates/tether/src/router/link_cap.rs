//! The link cap (`TETHER_MAX_LINKS`, the hint paper's `max_rc_conn`): at
//! most this many dedicated TCP connections per process. Beyond it, and
//! outside communication kernels (`IN_KERNEL`), the least recently used
//! idle connections that no kernel used are retired, through a goodbye both sides agree
//! on (`transport/tcp/retire.rs`), and dialled again on demand. A
//! connection a kernel used is pinned: it stays, whatever the cap, so
//! the cap may be exceeded while more peers than that are pinned, or
//! while the others are busy.
//!
//! Use is counted in epochs: the router marks a peer with the current
//! epoch whenever it sends it a frame or places a frame from it, and each
//! check of the cap starts a new epoch. A connection is idle when nothing
//! waits to be written on it and it was not used since the previous
//! check. Checks are [`CHECK_PERIOD`] apart at least: a check looks at
//! every link, and made every 64 rounds of a busy poll it cost a kernel's
//! 100-byte shift over shared memory about 30% (4 processes; within the
//! runs' noise once a period apart: docs/journal/2026-11-28-link-cap.md).

use std::time::{Duration, Instant};

use crate::transport::resources::OpenLink;

/// The shortest time between two checks of the cap: so a link is idle
/// when unused for at least this long.
pub const CHECK_PERIOD: Duration = Duration::from_millis(1);

/// The cap and the epoch of use.
#[derive(Debug, Default)]
pub struct LinkCap {
    /// 0: no cap.
    max: usize,
    epoch: u64,
    /// The open links of the last check (kept to reuse their memory).
    open: Vec<OpenLink>,
    /// When the next check may run.
    next_check: Option<Instant>,
}

/// What the cap knows of one peer with an open link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub peer: u32,
    /// Its open connections (one per rail it uses).
    pub links: usize,
    pub idle: bool,
    /// A kernel used it: never retired.
    pub pinned: bool,
    /// The epoch of its last use (0: never used since it was reached).
    pub last_use: u64,
}

impl LinkCap {
    pub fn new(max: usize) -> LinkCap {
        LinkCap {
            max,
            epoch: 1,
            open: Vec::new(),
            next_check: None,
        }
    }

    /// Whether a check may run at `now`; if so, the next may not before
    /// [`CHECK_PERIOD`] has passed.
    pub fn due(&mut self, now: Instant) -> bool {
        if self.next_check.is_some_and(|at| now < at) {
            return false;
        }
        self.next_check = Some(now + CHECK_PERIOD);
        true
    }

    pub fn set_max(&mut self, max: usize) {
        self.max = max;
    }

    /// Whether a cap is set (then uses are marked and checked).
    #[inline(always)]
    pub fn active(&self) -> bool {
        self.max != 0
    }

    /// Whether `connections` (every TCP connection, open or not) may
    /// exceed the cap: the cheap test before a check.
    #[inline(always)]
    pub fn may_exceed(&self, connections: usize) -> bool {
        self.max != 0 && connections > self.max
    }

    /// The epoch a use is marked with now.
    #[inline(always)]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The buffer the caller fills with the open links for a check.
    pub fn open_links(&mut self) -> &mut Vec<OpenLink> {
        self.open.clear();
        &mut self.open
    }

    /// Ends a check: uses from now on count as after it.
    pub fn next_epoch(&mut self) {
        self.epoch += 1;
    }

    pub fn max(&self) -> usize {
        self.max
    }
}

/// The peers whose connections to retire so that at most `max` stay
/// open: idle, unpinned, not used since the previous check (their
/// `last_use` before `epoch`), least recently used first (then by rank,
/// so that the choice is the same every time).
pub fn choose_retires(max: usize, epoch: u64, candidates: &mut [Candidate]) -> Vec<u32> {
    let mut open: usize = candidates.iter().map(|c| c.links).sum();
    if max == 0 || open <= max {
        return Vec::new();
    }
    candidates.sort_unstable_by_key(|c| (c.last_use, c.peer));
    let mut chosen = Vec::new();
    for c in candidates.iter() {
        if open <= max {
            break;
        }
        if c.idle && !c.pinned && c.last_use < epoch {
            chosen.push(c.peer);
            open -= c.links;
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(peer: u32, last_use: u64) -> Candidate {
        Candidate {
            peer,
            links: 1,
            idle: true,
            pinned: false,
            last_use,
        }
    }

    #[test]
    fn the_least_recently_used_go_until_the_cap_holds() {
        let mut links = vec![candidate(1, 5), candidate(2, 3), candidate(3, 4)];
        assert_eq!(choose_retires(1, 9, &mut links), vec![2, 3]);
        assert_eq!(choose_retires(3, 9, &mut links), Vec::<u32>::new());
        assert_eq!(
            choose_retires(0, 9, &mut links),
            Vec::<u32>::new(),
            "no cap"
        );
    }

    #[test]
    fn pinned_busy_and_just_used_links_stay_even_over_the_cap() {
        let mut links = vec![
            Candidate {
                pinned: true,
                ..candidate(1, 1)
            },
            Candidate {
                idle: false,
                ..candidate(2, 1)
            },
            candidate(3, 9),
            candidate(4, 2),
        ];
        assert_eq!(choose_retires(1, 9, &mut links), vec![4]);
        assert_eq!(choose_retires(1, 10, &mut links), vec![4, 3]);
    }

    #[test]
    fn checks_are_a_period_apart() {
        let mut cap = LinkCap::new(1);
        let t = Instant::now();
        assert!(cap.due(t));
        assert!(!cap.due(t + CHECK_PERIOD / 2));
        assert!(cap.due(t + CHECK_PERIOD));
    }

    #[test]
    fn a_peer_on_several_rails_counts_each_connection() {
        let mut links = vec![
            Candidate {
                links: 3,
                ..candidate(1, 1)
            },
            candidate(2, 2),
        ];
        assert_eq!(choose_retires(2, 5, &mut links), vec![1]);
    }
}

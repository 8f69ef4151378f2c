//! The heartbeat thread's bookkeeping, without I/O or clock reads: which
//! peers it watches, when each was last heard, when the next pings are
//! due and which peers have been silent for the timeout. The thread
//! passes the time in, so the rules are tested here on a virtual clock.
//!
//! Rules:
//! - a peer's silence is counted from the latest of: its last answer,
//!   the moment its heartbeat address became known (a grace period: a
//!   peer is never judged before it could have answered), and the last
//!   time this process itself was found to have stopped (see
//!   [`Watch::tick`]);
//! - a peer silent for the timeout is given up once: it leaves the watch
//!   list with its verdict;
//! - this process's own stop (SIGSTOP, a suspended job, a starved thread)
//!   is seen as a tick later than planned by more than a ping period: it
//!   silenced every peer on this side too, so every clock restarts.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap as HashMap;

/// One watched peer.
#[derive(Debug)]
struct Peer {
    /// Where its heartbeats are answered, once its address is known.
    target: Option<SocketAddr>,
    /// From when it is judged: its last answer, or the grace start.
    heard: Instant,
}

/// A peer given up: silent for `silent` (at least the timeout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Silent {
    pub peer: u32,
    pub silent: Duration,
}

/// Every watched peer and the timers over them.
#[derive(Debug)]
pub struct Watch {
    timeout: Duration,
    period: Duration,
    peers: HashMap<u32, Peer>,
    next_ping: Instant,
    /// When the thread planned to wake next (to see its own stops).
    planned: Option<Instant>,
    /// The longest a peer went unheard before it answered (reported at
    /// the end: the margin a run had against the timeout).
    longest: Duration,
}

/// The ping period for a timeout: a quarter of it, so that a peer is
/// given up only after four pings in a row went unanswered, at least
/// 10 ms apart.
pub fn period(timeout: Duration) -> Duration {
    (timeout / 4).max(Duration::from_millis(10))
}

impl Watch {
    pub fn new(timeout: Duration, now: Instant) -> Watch {
        Watch {
            timeout,
            period: period(timeout),
            peers: HashMap::default(),
            next_ping: now,
            planned: None,
            longest: Duration::ZERO,
        }
    }

    /// Starts watching `peer` (no change when it is watched already).
    pub fn watch(&mut self, peer: u32, now: Instant) {
        self.peers.entry(peer).or_insert(Peer {
            target: None,
            heard: now,
        });
    }

    /// Stops watching `peer` (lost otherwise, or said goodbye).
    pub fn forget(&mut self, peer: u32) {
        self.peers.remove(&peer);
    }

    pub fn is_watched(&self, peer: u32) -> bool {
        self.peers.contains_key(&peer)
    }

    /// Watched peers whose heartbeat address is not known yet.
    pub fn without_target(&self) -> impl Iterator<Item = u32> + '_ {
        self.peers
            .iter()
            .filter(|(_, p)| p.target.is_none())
            .map(|(&peer, _)| peer)
    }

    /// `peer`'s heartbeats go to `target` from now on; its grace starts
    /// now, since it could not be asked before.
    pub fn set_target(&mut self, peer: u32, target: SocketAddr, now: Instant) {
        if let Some(p) = self.peers.get_mut(&peer) {
            if p.target.is_none() {
                p.heard = now;
            }
            p.target = Some(target);
        }
    }

    /// An answer came from `from`: it counts for `peer` only when it came
    /// from the address this process pings.
    pub fn heard(&mut self, peer: u32, from: SocketAddr, now: Instant) -> bool {
        match self.peers.get_mut(&peer) {
            Some(p) if p.target == Some(from) => {
                self.longest = self.longest.max(now.saturating_duration_since(p.heard));
                p.heard = p.heard.max(now);
                true
            }
            _ => false,
        }
    }

    /// The longest a watched peer went unheard before it answered.
    pub fn longest(&self) -> Duration {
        self.longest
    }

    /// The thread woke at `now`: if that is later than planned by more
    /// than a period, this process was stopped or starved, and every
    /// peer's clock restarts. Returns whether it was.
    pub fn tick(&mut self, now: Instant) -> bool {
        let late = self
            .planned
            .is_some_and(|planned| now > planned + self.period);
        if late {
            for p in self.peers.values_mut() {
                p.heard = p.heard.max(now);
            }
            self.next_ping = now;
        }
        late
    }

    /// Every watched peer whose heartbeat address is known, with it.
    pub fn targets(&self) -> impl Iterator<Item = (u32, SocketAddr)> + '_ {
        self.peers
            .iter()
            .filter_map(|(&peer, p)| p.target.map(|t| (peer, t)))
    }

    /// Where to send pings now, if they are due (then the next are
    /// planned a period later).
    pub fn due_pings(&mut self, now: Instant) -> Vec<(u32, SocketAddr)> {
        if now < self.next_ping {
            return Vec::new();
        }
        self.next_ping = now + self.period;
        self.peers
            .iter()
            .filter_map(|(&peer, p)| p.target.map(|t| (peer, t)))
            .collect()
    }

    /// The peers silent for the timeout, removed from the watch list.
    pub fn expired(&mut self, now: Instant) -> Vec<Silent> {
        let timeout = self.timeout;
        let gone: Vec<Silent> = self
            .peers
            .iter()
            .filter(|(_, p)| p.target.is_some())
            .filter_map(|(&peer, p)| {
                let silent = now.saturating_duration_since(p.heard);
                (silent >= timeout).then_some(Silent { peer, silent })
            })
            .collect();
        for s in &gone {
            self.peers.remove(&s.peer);
        }
        gone
    }

    /// When the thread must wake next: the next pings, or the earliest
    /// moment a peer's silence reaches the timeout. Remembered, to see
    /// this process's own stops at the next [`Watch::tick`].
    pub fn next_wake(&mut self, now: Instant) -> Instant {
        let deadline = self
            .peers
            .values()
            .filter(|p| p.target.is_some())
            .map(|p| p.heard + self.timeout)
            .min();
        let at = deadline.map_or(self.next_ping, |d| d.min(self.next_ping));
        let at = at.max(now);
        self.planned = Some(at);
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    const S: Duration = Duration::from_secs(1);

    /// Runs the thread's loop on a virtual clock: the peer answers every
    /// ping at once while `answers(t)` holds; returns when it was given up.
    fn run(
        timeout: Duration,
        answers: impl Fn(Duration) -> bool,
        until: Duration,
    ) -> Option<Duration> {
        let t0 = Instant::now();
        let mut w = Watch::new(timeout, t0);
        w.watch(1, t0);
        w.set_target(1, addr(9), t0);
        let mut now = t0;
        while now - t0 < until {
            w.tick(now);
            for (peer, target) in w.due_pings(now) {
                if answers(now - t0) {
                    w.heard(peer, target, now + Duration::from_millis(1));
                }
            }
            if let Some(s) = w.expired(now).first() {
                assert!(s.silent >= timeout);
                return Some(now - t0);
            }
            now = w.next_wake(now);
        }
        None
    }

    #[test]
    fn an_answering_peer_is_never_given_up() {
        assert_eq!(run(2 * S, |_| true, 60 * S), None);
    }

    #[test]
    fn a_peer_that_stops_answering_is_given_up_between_three_quarters_and_one_timeout_later() {
        for stop_ms in [0u64, 100, 333, 499, 500, 501, 1234, 7777] {
            let stop = Duration::from_millis(stop_ms);
            let lost = run(2 * S, |t| t < stop, 60 * S).expect("given up");
            let after = lost.saturating_sub(stop);
            assert!(
                after >= 2 * S * 3 / 4 && after <= 2 * S + Duration::from_millis(10),
                "stopped at {stop:?}, given up {after:?} later"
            );
        }
    }

    #[test]
    fn a_peer_never_answering_is_judged_from_when_its_address_was_known() {
        let t0 = Instant::now();
        let mut w = Watch::new(2 * S, t0);
        w.watch(4, t0);
        assert!(w.expired(t0 + 10 * S).is_empty(), "no address: not judged");
        assert_eq!(w.without_target().collect::<Vec<_>>(), vec![4]);
        w.set_target(4, addr(1), t0 + 10 * S);
        assert!(w.expired(t0 + 11 * S).is_empty(), "grace from the address");
        assert_eq!(
            w.expired(t0 + 12 * S),
            vec![Silent {
                peer: 4,
                silent: 2 * S
            }]
        );
        assert!(!w.is_watched(4), "given up once");
        assert!(w.expired(t0 + 20 * S).is_empty());
    }

    #[test]
    fn answers_from_another_address_do_not_count() {
        let t0 = Instant::now();
        let mut w = Watch::new(2 * S, t0);
        w.watch(1, t0);
        w.set_target(1, addr(9), t0);
        assert!(!w.heard(1, addr(10), t0 + S));
        assert!(!w.heard(2, addr(9), t0 + S), "not watched");
        assert!(w.heard(1, addr(9), t0 + S / 2));
        assert_eq!(w.longest(), S / 2);
        assert_eq!(w.expired(t0 + S / 2 + 2 * S).len(), 1);
    }

    #[test]
    fn this_process_stopping_restarts_every_clock() {
        let t0 = Instant::now();
        let mut w = Watch::new(2 * S, t0);
        w.watch(1, t0);
        w.set_target(1, addr(9), t0);
        let planned = w.next_wake(t0);
        assert!(!w.tick(planned), "on time");
        // Stopped for 10 s: the peer could not be asked meanwhile.
        let resumed = planned + 10 * S;
        assert!(w.tick(resumed));
        assert!(w.expired(resumed).is_empty());
        assert_eq!(w.due_pings(resumed).len(), 1, "pings at once");
        assert!(w.expired(resumed + S).is_empty());
        assert_eq!(w.expired(resumed + 2 * S).len(), 1);
    }

    #[test]
    fn a_forgotten_peer_is_not_pinged_or_judged() {
        let t0 = Instant::now();
        let mut w = Watch::new(S, t0);
        w.watch(1, t0);
        w.set_target(1, addr(9), t0);
        w.forget(1);
        assert!(w.due_pings(t0).is_empty());
        assert!(w.expired(t0 + 5 * S).is_empty());
        assert_eq!(period(S), S / 4);
        assert_eq!(period(Duration::from_millis(8)), Duration::from_millis(10));
    }
}

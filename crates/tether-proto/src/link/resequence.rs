//! The order of one peer's frames across several links: the sender
//! numbers them ([`PeerSequence`]), the receiver holds early ones until
//! the gap before them fills ([`Resequencer`]).
//!
//! Each link is ordered, but two links are not ordered with each other:
//! a frame sent on a fast link overtakes one sent earlier on a slow link.
//! MPI's non-overtaking rule is about the peer's messages, not a link's,
//! so the engine must see the peer's frames in the order its engine
//! emitted them, whichever link each took.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use super::LinkError;

/// The sender's side: numbers every frame to one peer from 0, across all
/// links, in the order the engine emitted them.
#[derive(Debug, Default)]
pub struct PeerSequence {
    next: u64,
}

impl PeerSequence {
    /// The number of the next frame to the peer.
    pub fn stamp(&mut self) -> u64 {
        let seq = self.next;
        self.next += 1;
        seq
    }
}

/// The receiver's side for one peer: takes frames (`T`: whatever the
/// caller needs to deliver one) in any order with their peer sequence
/// numbers and releases them in sequence order.
///
/// Bounded in space and time: at most `hold_limit` frames wait for a
/// missing one, and none waits longer than `gap_timeout`; past either
/// bound the peer's order is broken (a frame was lost, or a link stalled)
/// and an error says which frame is missing. Never blocks, reads no
/// clock; owns the held frames until [`Resequencer::pop`] hands them out.
#[derive(Debug)]
pub struct Resequencer<T> {
    peer: u32,
    hold_limit: usize,
    gap_timeout: Duration,
    /// The sequence number the engine gets next.
    next: u64,
    held: BTreeMap<u64, T>,
    /// Arrival times of held frames, oldest first. Entries of frames
    /// released since are dropped when they reach the front, so the front
    /// is always the longest-waiting held frame.
    arrivals: VecDeque<(Instant, u64)>,
    ready: VecDeque<T>,
}

impl<T> Resequencer<T> {
    /// For frames from universe rank `peer`, whose first frame is number 0.
    pub fn new(peer: u32, hold_limit: usize, gap_timeout: Duration) -> Resequencer<T> {
        Resequencer {
            peer,
            hold_limit,
            gap_timeout,
            next: 0,
            held: BTreeMap::new(),
            arrivals: VecDeque::new(),
            ready: VecDeque::new(),
        }
    }

    /// Takes frame `seq`, which arrived at `now`. Fails on a number seen
    /// before, or when the frame would have to wait and `hold_limit`
    /// frames already do; the frame is then dropped.
    pub fn push(&mut self, now: Instant, seq: u64, frame: T) -> Result<(), LinkError> {
        if seq < self.next || self.held.contains_key(&seq) {
            return Err(LinkError::Duplicate {
                peer: self.peer,
                seq,
            });
        }
        if seq > self.next {
            if self.held.len() >= self.hold_limit {
                return Err(LinkError::HoldQueueFull {
                    peer: self.peer,
                    missing: self.next,
                    held: self.held.len(),
                });
            }
            self.held.insert(seq, frame);
            self.arrivals.push_back((now, seq));
            return Ok(());
        }
        self.ready.push_back(frame);
        self.next += 1;
        while let Some(frame) = self.held.remove(&self.next) {
            self.ready.push_back(frame);
            self.next += 1;
        }
        while matches!(self.arrivals.front(), Some(&(_, seq)) if seq < self.next) {
            self.arrivals.pop_front();
        }
        Ok(())
    }

    /// The next frame in the peer's order, if it is here.
    pub fn pop(&mut self) -> Option<T> {
        self.ready.pop_front()
    }

    /// How many frames wait for a missing one.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// When the longest-waiting held frame will have waited `gap_timeout`;
    /// `None` while nothing waits.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.arrivals
            .front()
            .map(|&(arrived, _)| arrived + self.gap_timeout)
    }

    /// Fails if a held frame has waited `gap_timeout` by `now`: the frame
    /// it waits for is lost. Does nothing otherwise.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), LinkError> {
        match self.poll_timeout() {
            Some(deadline) if deadline <= now => Err(LinkError::GapTimeout {
                peer: self.peer,
                missing: self.next,
                held: self.held.len(),
                timeout: self.gap_timeout,
            }),
            _ => Ok(()),
        }
    }
}

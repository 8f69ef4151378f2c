//! One direction of one simulated link: frames in flight with their
//! arrival times, after latency, jitter and loss.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::rng::XorShift;

/// How a simulated link treats the frames written to it.
#[derive(Debug, Clone, Copy)]
pub struct WireModel {
    /// Every frame takes at least this long.
    pub latency: Duration,
    /// Plus a uniform random part up to this much. A link stays in order
    /// (a frame never arrives before one written earlier on it), so jitter
    /// reorders frames only between links.
    pub jitter: Duration,
    /// Probability that a frame is dropped.
    pub loss: f64,
}

impl WireModel {
    /// Arrives at once, in order, never lost: the harness without faults.
    pub const INSTANT: WireModel = WireModel {
        latency: Duration::ZERO,
        jitter: Duration::ZERO,
        loss: 0.0,
    };
}

/// A frame on its way: the encoded header and payload, and the sender's
/// peer sequence number for engine frames (which a multi-rail wire must
/// carry; see the `link` module docs).
#[derive(Debug)]
pub struct InFlight {
    pub arrives: Instant,
    pub peer_seq: Option<u64>,
    pub bytes: Vec<u8>,
}

#[derive(Debug)]
pub struct Wire {
    pub model: WireModel,
    /// Frames to drop no matter what `model.loss` says, before any other.
    pub drop_next: usize,
    /// In arrival order, which is also the order written.
    in_flight: VecDeque<InFlight>,
    last_arrival: Option<Instant>,
}

impl Wire {
    pub fn new(model: WireModel) -> Wire {
        Wire {
            model,
            drop_next: 0,
            in_flight: VecDeque::new(),
            last_arrival: None,
        }
    }

    /// Writes a frame at `now`; it may be lost.
    pub fn write(
        &mut self,
        now: Instant,
        rng: &mut XorShift,
        peer_seq: Option<u64>,
        bytes: Vec<u8>,
    ) {
        if self.drop_next > 0 {
            self.drop_next -= 1;
            return;
        }
        if rng.chance(self.model.loss) {
            return;
        }
        let jitter_ns = self.model.jitter.as_nanos() as u64;
        let jitter = Duration::from_nanos(rng.below(jitter_ns + 1));
        let mut arrives = now + self.model.latency + jitter;
        if let Some(last) = self.last_arrival {
            arrives = arrives.max(last);
        }
        self.last_arrival = Some(arrives);
        self.in_flight.push_back(InFlight {
            arrives,
            peer_seq,
            bytes,
        });
    }

    /// When the next frame arrives, if one is in flight.
    pub fn next_arrival(&self) -> Option<Instant> {
        self.in_flight.front().map(|f| f.arrives)
    }

    /// The next frame if it has arrived by `now`.
    pub fn take_arrived(&mut self, now: Instant) -> Option<InFlight> {
        match self.in_flight.front() {
            Some(f) if f.arrives <= now => self.in_flight.pop_front(),
            _ => None,
        }
    }
}

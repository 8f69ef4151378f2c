//! A test world: engines wired together in memory over simulated links,
//! in one thread, on a virtual clock.
//!
//! Every frame goes through the real header codec and a real [`Link`]
//! (handshake, per-link sequence numbers, goodbye); engine frames to a
//! peer are numbered by a [`PeerSequence`] and put back in order by a
//! [`Resequencer`] before the receiving engine sees them. Each pair of
//! ranks has `rails` links; each direction of each link is a [`Wire`]
//! with latency, jitter and loss. Time moves only when the test drives
//! the world ([`World::pump`], [`World::advance_to`]), from one arrival
//! or deadline to the next, as quinn's test `Pair` does.
//!
//! A failure (an `Err` from a link or resequencer, or a protocol error
//! from an engine) is recorded in [`World::failures`] and loses the peer
//! on the side that saw it, as the runtime does.

mod drive;
pub mod onesided;
mod remote;
mod rng;
mod wire_model;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::engine::{Engine, EngineConfig, Transmit};
use crate::link::{Link, LinkConfig, LinkError, LinkEvent, LinkState, PeerSequence, Resequencer};
use crate::wire::{FrameHeader, Hello};

pub use remote::{RemoteModel, RmaRecord};
use rng::XorShift;
use wire_model::Wire;
pub use wire_model::WireModel;

/// The engines' eager limit unless a test sets another.
pub const EAGER: u64 = 64;

/// The shape of a world and its faults.
#[derive(Debug, Clone)]
pub struct WorldConfig {
    pub ranks: u32,
    /// Links per pair of ranks.
    pub rails: usize,
    pub eager: u64,
    /// Every wire's model; change single wires with [`World::wire_model`].
    pub model: WireModel,
    pub seed: u64,
    /// The universe id each rank says it belongs to.
    pub universe: Vec<u64>,
    pub handshake_timeout: Duration,
    pub goodbye_timeout: Duration,
    pub gap_timeout: Duration,
    pub hold_limit: usize,
}

impl WorldConfig {
    pub fn new(ranks: u32) -> WorldConfig {
        WorldConfig {
            ranks,
            rails: 1,
            eager: EAGER,
            model: WireModel::INSTANT,
            seed: 1,
            universe: vec![0x7e7e; ranks as usize],
            handshake_timeout: Duration::from_secs(5),
            goodbye_timeout: Duration::from_secs(1),
            gap_timeout: Duration::from_millis(100),
            hold_limit: 1024,
        }
    }
}

/// How a rank picks the link for an engine frame among the open ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RailChoice {
    Random,
    /// Always this rail; frames wait while it is not open.
    Fixed(usize),
}

/// Something that ended a peer for `rank`, and when.
#[derive(Debug, Clone)]
pub struct Failure {
    pub rank: u32,
    pub peer: u32,
    pub error: LinkError,
    pub at: Instant,
}

/// An engine frame taken off a link, waiting for its turn.
#[derive(Debug)]
struct Arrival {
    header: FrameHeader,
    payload: Vec<u8>,
}

/// One rank's view of one peer.
#[derive(Debug)]
struct PeerEnd {
    links: Vec<Link>,
    order: PeerSequence,
    inbound: Resequencer<Arrival>,
    /// Engine frames emitted before a link was open.
    pending: VecDeque<Transmit>,
    /// The highest peer sequence number that arrived.
    highest_arrived: Option<u64>,
    lost: bool,
}

pub struct World {
    pub engines: Vec<Engine>,
    pub failures: Vec<Failure>,
    /// Link events as they happened: (rank, peer, rail, event).
    pub events: Vec<(u32, u32, usize, LinkEvent)>,
    pub rail_choice: RailChoice,
    /// Engine frames that arrived after a later one of their peer (on
    /// another link): proof that a test's faults reordered anything,
    /// counted by the harness, not by the code under test.
    pub overtaken: usize,
    /// Chunks of striped data as they arrived, around the peer's order:
    /// (receiving rank, receive handle, offset).
    pub chunk_log: Vec<(u32, u64, u64)>,
    start: Instant,
    now: Instant,
    rng: XorShift,
    /// `ends[rank][peer]`; `None` on the diagonal.
    ends: Vec<Vec<Option<PeerEnd>>>,
    /// `wires[from][to][rail]`.
    wires: Vec<Vec<Vec<Wire>>>,
    /// How remote memory operations end, once enabled.
    pub remote: Option<remote::RemoteModel>,
    /// Every remote memory operation carried out: (rank, put?, bytes, status).
    pub rma_log: Vec<remote::RmaRecord>,
    /// Leaves one-sided applies with the engines instead of computing
    /// them ([`onesided::compute`]) as the runtime would.
    pub hold_applies: bool,
    /// (rank, peer): `rank` refuses `peer`'s retires, as a transport
    /// does for a peer its kernel used.
    pub pinned: Vec<(u32, u32)>,
    /// Links retired by both sides and opened again in their place.
    pub reopened: usize,
    /// Each rank's link settings, for the links opened after a retire.
    link_configs: Vec<LinkConfig>,
}

impl World {
    /// `n` ranks, one instant link per pair, handshakes done.
    pub fn new(n: u32) -> World {
        let mut world = World::start(WorldConfig::new(n));
        world.pump();
        world
    }

    /// The world at its first instant: links created (the lower rank of
    /// each pair dials), nothing sent yet.
    pub fn start(config: WorldConfig) -> World {
        // The one clock read: the virtual clock's origin. Only the
        // harness reads it; the code under test is given times.
        let start = Instant::now();
        let n = config.ranks as usize;
        let link_config = |rank: usize| LinkConfig {
            hello: Hello {
                universe_id: config.universe[rank],
                universe_rank: rank as u32,
                capabilities: 0,
                program: "world".into(),
                program_rank: rank as u32,
            },
            handshake_timeout: config.handshake_timeout,
            goodbye_timeout: config.goodbye_timeout,
            max_eager: config.eager,
            auth: None,
        };
        let link_configs: Vec<LinkConfig> = (0..n).map(link_config).collect();
        let ends = (0..n)
            .map(|me| {
                (0..n)
                    .map(|peer| {
                        (me != peer).then(|| PeerEnd {
                            links: (0..config.rails)
                                .map(|_| {
                                    if me < peer {
                                        Link::connector(link_config(me), peer as u32, start)
                                    } else {
                                        Link::acceptor(link_config(me), start)
                                    }
                                })
                                .collect(),
                            order: PeerSequence::default(),
                            inbound: Resequencer::new(
                                peer as u32,
                                config.hold_limit,
                                config.gap_timeout,
                            ),
                            pending: VecDeque::new(),
                            highest_arrived: None,
                            lost: false,
                        })
                    })
                    .collect()
            })
            .collect();
        let wires = (0..n)
            .map(|_| {
                (0..n)
                    .map(|_| (0..config.rails).map(|_| Wire::new(config.model)).collect())
                    .collect()
            })
            .collect();
        World {
            engines: (0..config.ranks)
                .map(|me| {
                    Engine::new(EngineConfig {
                        me,
                        eager_limit: config.eager,
                    })
                })
                .collect(),
            failures: Vec::new(),
            events: Vec::new(),
            rail_choice: RailChoice::Random,
            overtaken: 0,
            chunk_log: Vec::new(),
            start,
            now: start,
            rng: XorShift::new(config.seed),
            ends,
            wires,
            remote: None,
            rma_log: Vec::new(),
            hold_applies: false,
            pinned: Vec::new(),
            reopened: 0,
            link_configs,
        }
    }

    /// The virtual clock's origin, when every link was created.
    pub fn start_time(&self) -> Instant {
        self.start
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    /// Moves frames until none is in flight or waiting to be sent, letting
    /// time pass from arrival to arrival; deadlines that fall due on the
    /// way fire. Panics if anything failed.
    pub fn pump(&mut self) {
        self.run_until_idle();
        assert!(self.failures.is_empty(), "failures: {:?}", self.failures);
    }

    /// [`World::pump`] without the check: the test reads `failures`.
    pub fn run_until_idle(&mut self) {
        loop {
            while self.step() {}
            match self.next_arrival() {
                Some(at) => self.now = self.now.max(at),
                None => return,
            }
        }
    }

    /// Runs every arrival and deadline up to `until`, in time order, and
    /// leaves the clock there.
    pub fn advance_to(&mut self, until: Instant) {
        loop {
            while self.step() {}
            match self.next_time() {
                Some(at) if at <= until => self.now = self.now.max(at),
                _ => break,
            }
        }
        self.now = self.now.max(until);
        while self.step() {}
    }

    /// The earliest deadline of any link or resequencer still in use.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.live_ends()
            .flat_map(|end| {
                end.links
                    .iter()
                    .filter_map(Link::poll_timeout)
                    .chain(end.inbound.poll_timeout())
            })
            .min()
    }

    /// How many frames from `peer` wait at `rank` for an earlier one.
    pub fn held(&self, rank: u32, peer: u32) -> usize {
        self.end(rank, peer).inbound.held()
    }

    pub fn link_state(&self, rank: u32, peer: u32, rail: usize) -> LinkState {
        self.end(rank, peer).links[rail].state()
    }

    /// `rank` says goodbye to `peer` on every link.
    pub fn close(&mut self, rank: u32, peer: u32) {
        let now = self.now;
        let rails = self.end(rank, peer).links.len();
        for rail in 0..rails {
            self.end_mut(rank, peer).links[rail].close(now);
            self.answer_events(rank as usize, peer as usize, rail);
        }
    }

    /// `rank` asks to retire its links to `peer` (those that are open);
    /// once both sides' retiring `Bye`s passed, new links take their
    /// place (the lower rank dials), as a transport dials again for the
    /// frames that waited.
    /// A rank never retires a peer it pins.
    pub fn retire(&mut self, rank: u32, peer: u32) {
        if self.pinned.contains(&(rank, peer)) {
            return;
        }
        let rails = self.end(rank, peer).links.len();
        for rail in 0..rails {
            if self.end_mut(rank, peer).links[rail].retire() {
                self.answer_events(rank as usize, peer as usize, rail);
            }
        }
    }

    /// The model of the wire from `from` to `to` on `rail`.
    pub fn wire_model(&mut self, from: u32, to: u32, rail: usize) -> &mut WireModel {
        &mut self.wires[from as usize][to as usize][rail].model
    }

    /// Drops the next `count` frames written from `from` to `to` on `rail`.
    pub fn drop_next(&mut self, from: u32, to: u32, rail: usize, count: usize) {
        self.wires[from as usize][to as usize][rail].drop_next = count;
    }

    fn end(&self, rank: u32, peer: u32) -> &PeerEnd {
        self.ends[rank as usize][peer as usize]
            .as_ref()
            .expect("a rank has no link to itself")
    }

    fn end_mut(&mut self, rank: u32, peer: u32) -> &mut PeerEnd {
        self.ends[rank as usize][peer as usize]
            .as_mut()
            .expect("a rank has no link to itself")
    }

    fn live_ends(&self) -> impl Iterator<Item = &PeerEnd> {
        self.ends.iter().flatten().flatten().filter(|end| !end.lost)
    }

    fn next_arrival(&self) -> Option<Instant> {
        self.wires
            .iter()
            .flatten()
            .flatten()
            .filter_map(Wire::next_arrival)
            .min()
    }

    /// The next moment something happens after now.
    fn next_time(&self) -> Option<Instant> {
        let timeout = self.next_timeout().filter(|&at| at > self.now);
        match (self.next_arrival(), timeout) {
            (Some(a), Some(t)) => Some(a.min(t)),
            (a, t) => a.or(t),
        }
    }
}

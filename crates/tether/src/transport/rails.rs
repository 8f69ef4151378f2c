//! Rails: several links to each peer, composed as one [`Transport`]
//! (libfabric's mrail shape), so that one large message uses several
//! NICs, or several cores' worth of TCP, at once.
//!
//! [`MultiRail`] holds one transport per rail (TCP: one listener each,
//! published in the rendezvous, on the interfaces of
//! `TETHER_TCP_INTERFACE`). Every frame that carries MPI's order (eager
//! messages, `Rts`, `Cts`, the one-sided and control frames, a whole
//! `Data` frame) goes on the peer's *home* rail, fixed for the run and
//! assigned round-robin over peers as they are first used (the Tofu-D
//! paper's TNI-RR), so that order holds without reordering buffers. The
//! engine cuts large rendezvous data into chunks (`FLAG_CHUNK`, see
//! `tether_proto`'s `engine/striped.rs`) because the caps say so
//! ([`Caps::stripe`]); each chunk goes on the rail the [`RailPolicy`]
//! picks among the rails both sides have, and lands in place in the
//! receive buffer whichever rail brings it.
//!
//! Events: each rail reports in its own [`Events`]; after every call the
//! composite drains them into its own (as the router drains its
//! transports), remembering which rail each data-path frame came from, so
//! that the frame's delivery ([`Transport::place`]) goes back to that
//! rail. A rail that loses a peer loses the peer for the composite: the
//! chunks it had taken are not sent again on the others (not done yet;
//! docs/transports.md says so).
//!
//! Costs: on one rail the composite adds a branch per call (`rails == 1`
//! goes straight to rail 0). On several, a frame to a peer costs one hash
//! lookup for its home rail; `least_used` costs one `ioctl` per rail per
//! chunk to read each socket's send queue, `round_robin` nothing.

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;
use tether_proto::{
    FileData, FrameKind, PayloadSink, RmaOp, RmaStatus, Stripe, Transmit, WireError, FLAG_CHUNK,
};

use super::api::{Caps, NoResource, Transport};
use super::events::Events;

/// Which rail takes each chunk of striped data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RailPolicy {
    /// Each rail in turn: free to decide, and as good as any choice when
    /// the rails are equal.
    RoundRobin,
    /// The rail with the fewest bytes to the peer not yet taken by it:
    /// follows unequal rails, for a system call per rail per chunk.
    LeastUsed,
}

impl RailPolicy {
    /// `TETHER_RAIL_POLICY`'s value (validated by the settings).
    pub fn of(name: &str) -> RailPolicy {
        match name {
            "least_used" => RailPolicy::LeastUsed,
            _ => RailPolicy::RoundRobin,
        }
    }
}

/// What a rail must say beyond [`Transport`] for the composite to choose.
pub trait Rail: Transport {
    /// Bytes handed to the link to `peer` that the peer has not taken yet.
    fn unwritten_to(&self, peer: u32) -> u64;
    /// How many rails `peer` has, once known.
    fn rails_of(&self, peer: u32) -> Option<usize>;
}

pub struct MultiRail<T> {
    rails: Vec<T>,
    policy: RailPolicy,
    stripe: Stripe,
    /// Each peer's home rail, and how many rails both sides have.
    peers: HashMap<u32, PeerRails>,
    next_home: usize,
    next_chunk: usize,
    /// What the rails reported, drained after every call.
    pub events: Events,
    /// The rail each frame of `events.frames` came from, in order.
    origins: VecDeque<usize>,
}

#[derive(Debug, Clone, Copy)]
struct PeerRails {
    home: usize,
    /// Rails `0..width` reach the peer; `None` until its address is
    /// known (then chunks stay home).
    width: Option<usize>,
}

impl<T: Rail> MultiRail<T> {
    /// `rails`: rail 0 first; at least one.
    pub fn new(rails: Vec<T>, policy: RailPolicy, stripe: Stripe) -> MultiRail<T> {
        assert!(!rails.is_empty(), "a composite of no rails");
        MultiRail {
            rails,
            policy,
            stripe,
            peers: HashMap::default(),
            next_home: 0,
            next_chunk: 0,
            events: Events::default(),
            origins: VecDeque::new(),
        }
    }

    pub fn rails(&self) -> &[T] {
        &self.rails
    }

    pub fn rails_mut(&mut self) -> &mut [T] {
        &mut self.rails
    }

    pub fn set_policy(&mut self, policy: RailPolicy) {
        self.policy = policy;
    }

    /// The stripe of peers reached from now on.
    pub fn set_stripe(&mut self, stripe: Stripe) {
        self.stripe = stripe;
    }

    /// The home rail of `peer`, chosen at its first use.
    pub fn home_of(&mut self, peer: u32) -> usize {
        self.peer(peer).home
    }

    fn peer(&mut self, peer: u32) -> PeerRails {
        if let Some(p) = self.peers.get_mut(&peer) {
            if p.width.is_none() {
                p.width = self.rails[0]
                    .rails_of(peer)
                    .map(|w| w.min(self.rails.len()));
            }
            return *p;
        }
        let width = self.rails[0]
            .rails_of(peer)
            .map(|w| w.min(self.rails.len()));
        // A home beyond what the peer has would never connect; before
        // its address is known, rail 0 (every peer has it).
        let home = match width {
            Some(w) if w > 1 => {
                self.next_home += 1;
                (self.next_home - 1) % w
            }
            _ => 0,
        };
        let p = PeerRails { home, width };
        self.peers.insert(peer, p);
        p
    }

    /// The rail for `t`: its peer's home, or for a chunk the policy's.
    fn rail_for(&mut self, t: &Transmit) -> usize {
        if self.rails.len() == 1 {
            return 0;
        }
        let p = self.peer(t.peer);
        let width = p.width.unwrap_or(1);
        if t.header.kind != FrameKind::Data || t.header.flags & FLAG_CHUNK == 0 || width < 2 {
            return p.home;
        }
        match self.policy {
            RailPolicy::RoundRobin => {
                self.next_chunk += 1;
                (self.next_chunk - 1) % width
            }
            RailPolicy::LeastUsed => (0..width)
                .min_by_key(|&rail| (self.rails[rail].unwritten_to(t.peer), rail != p.home))
                .unwrap_or(p.home),
        }
    }

    /// Drains every rail's events into the composite's own.
    pub fn collect(&mut self) {
        for (index, rail) in self.rails.iter_mut().enumerate() {
            let from = rail.events();
            if from.is_empty() {
                continue;
            }
            let to = &mut self.events;
            to.sent.append(&mut from.sent);
            to.filled.append(&mut from.filled);
            while let Some(frame) = from.frames.pop_front() {
                to.frames.push_back(frame);
                self.origins.push_back(index);
            }
            to.links.append(&mut from.links);
            to.reached.append(&mut from.reached);
        }
    }

    /// The rail the oldest reported frame came from.
    fn origin(&mut self) -> Option<&mut T> {
        let rail = self.origins.pop_front()?;
        self.rails.get_mut(rail)
    }

    /// Runs `f` on every rail, then collects.
    fn each(&mut self, f: impl FnMut(&mut T)) {
        self.rails.iter_mut().for_each(f);
        self.collect();
    }
}

impl<T: Rail> Transport for MultiRail<T> {
    /// Rail 0's, striped when there are several rails.
    fn caps(&self) -> Caps {
        Caps {
            stripe: (self.rails.len() > 1).then_some(self.stripe),
            ..self.rails[0].caps()
        }
    }

    fn send(&mut self, t: Transmit) -> Result<(), NoResource> {
        let rail = self.rail_for(&t);
        let result = self.rails[rail].send(t);
        self.collect();
        result
    }

    fn rma(&mut self, op: &RmaOp) -> RmaStatus {
        let home = self.home_of(op.peer);
        let status = self.rails[home].rma(op);
        self.collect();
        status
    }

    fn place(&mut self, peer: u32, sink: PayloadSink) {
        if let Some(rail) = self.origin() {
            rail.place(peer, sink);
        }
        self.collect();
    }

    fn place_in_file(&mut self, data: FileData) {
        if let Some(rail) = self.origin() {
            rail.place_in_file(data);
        }
        self.collect();
    }

    fn broke_protocol(&mut self, peer: u32, error: WireError) {
        if let Some(rail) = self.origin() {
            rail.broke_protocol(peer, error);
        }
        self.collect();
    }

    fn events(&mut self) -> &mut Events {
        &mut self.events
    }

    fn has_output(&self) -> bool {
        self.rails.iter().any(Transport::has_output)
    }

    fn say_goodbye(&mut self) {
        self.each(|rail| rail.say_goodbye());
    }

    fn all_goodbyes_heard(&self) -> bool {
        self.rails.iter().all(Transport::all_goodbyes_heard)
    }

    fn broadcast_abort(&mut self, code: i32) {
        self.each(|rail| rail.broadcast_abort(code));
    }
}

mod tcp;
#[cfg(test)]
mod tests;

//! Rails: several links to each peer, composed as one [`Transport`]
//! (libfabric's mrail shape), so that one large message uses several
//! NICs, or several cores' worth of TCP, at once.
//!
//! [`MultiRail`] holds one transport per rail (TCP: one listener each,
//! published in the rendezvous, on the interfaces of
//! `TETHER_TCP_INTERFACE`). Every frame that carries MPI's order (eager
//! messages, `Rts`, `Cts`, `Landed`, the one-sided and control frames, a
//! whole `Data` frame) goes on the pair's *home* rail, so that order
//! holds without reordering buffers. The home of a pair is rail
//! `(a + b) mod width` of universe ranks `a` and `b` over the `width`
//! rails both publish: the same rail seen from both sides, and a
//! process's peers dealt round-robin over its rails (the Tofu-D paper's
//! TNI-RR). Until a peer's address says how many rails it has, its frames
//! wait (given back as [`NoResource`]) and only rail 0, which every peer
//! has, connects to it. The engine cuts large rendezvous data into chunks
//! (`FLAG_CHUNK`, see `tether_proto`'s `engine/striped.rs`) because the
//! caps say so ([`Caps::stripe`]); each chunk goes on the rail the
//! [`RailPolicy`] picks among the pair's live rails, and lands in place
//! in the receive buffer whichever rail brings it.
//!
//! Chunks are pulled, not pushed: a rail takes a chunk only when nothing
//! of the peer's waits for it in user space (its socket took everything
//! so far), else the chunk is given back ([`NoResource`]) and offered
//! again once a socket drained (its writable event wakes the process).
//! The kernel's send buffer is then each rail's only queue, and the
//! choice of rail is made when a rail can send, not when the engine cut
//! the message: on unequal rails the fast one takes more chunks.
//!
//! Events: each rail reports in its own [`Events`]; after every call the
//! composite drains them into its own (as the router drains its
//! transports), remembering which rail each data-path frame came from, so
//! that the frame's delivery ([`Transport::place`]) goes back to that
//! rail.
//!
//! Failure: a rail that loses a peer is taken out for that peer (both
//! sides see the link fail). The chunks it had taken and not yet written
//! are reported sent (nothing reads them again, so their buffers are
//! free), and the loss is reported as [`LinkEvent::RailLost`], on which
//! the engine sends again every chunk of its sends to the peer that have
//! not landed. The home rail carries the pair's order: its loss is the
//! peer's ([`LinkEvent::Lost`]), as a single connection's is.
//!
//! Costs: on one rail the composite adds a branch per call. On several, a
//! frame costs one hash lookup for its pair's rails; `least_used` costs
//! one `ioctl` per live rail per chunk to read each socket's send queue,
//! `round_robin` nothing.

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;
use tether_proto::{
    FileData, FrameKind, PayloadSink, ReqId, RmaOp, Stripe, Transmit, WireError, FLAG_CHUNK,
};

use super::api::{Caps, NoResource, RmaOutcome, Transport};
use super::events::{Events, LinkEvent};
use crate::error::Error;

/// Which rail takes each chunk of striped data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RailPolicy {
    /// Each live rail in turn: free to decide, and as good as any choice
    /// when the rails are equal.
    RoundRobin,
    /// The live rail with the fewest bytes to the peer not yet taken by
    /// it: follows unequal rails, for a system call per rail per chunk.
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
    /// Whether the link to `peer` writes a frame given now at once
    /// (nothing of it waits in user space).
    fn has_room(&self, peer: u32) -> bool;
}

/// The most rails a composite takes (a bit each in [`PeerRails::dead`]).
pub const MAX_RAILS: usize = 32;

pub struct MultiRail<T> {
    rails: Vec<T>,
    /// This process's universe rank (for the pairs' home rails).
    me: u32,
    policy: RailPolicy,
    stripe: Stripe,
    /// Each peer's rails, once its address is known.
    peers: HashMap<u32, PeerRails>,
    next_chunk: usize,
    /// Chunk frames each rail has taken and not yet reported sent, by
    /// (rail, send): (peer, count). What a failed rail drops.
    unsent_chunks: HashMap<(usize, ReqId), (u32, u32)>,
    /// What the rails reported, drained after every call.
    pub events: Events,
    /// The rail each frame of `events.frames` came from, in order.
    origins: VecDeque<usize>,
    /// Peers to connect to once their address says which rail is the
    /// pair's home, and until when to wait for it (`rails/tcp.rs`).
    homeless: Vec<(u32, std::time::Instant)>,
}

#[derive(Debug, Clone, Copy)]
struct PeerRails {
    home: usize,
    /// Rails `0..width` reach the peer.
    width: usize,
    /// Rails taken out for this peer (a bit per rail).
    dead: u32,
}

impl PeerRails {
    /// The pair's rails that have not failed.
    fn live(self) -> impl Iterator<Item = usize> {
        (0..self.width).filter(move |rail| self.dead & (1 << rail) == 0)
    }
}

impl<T: Rail> MultiRail<T> {
    /// `rails`: rail 0 first, 1 to [`MAX_RAILS`] of them. `me`: this
    /// process's universe rank.
    pub fn new(rails: Vec<T>, me: u32, policy: RailPolicy, stripe: Stripe) -> MultiRail<T> {
        assert!(
            (1..=MAX_RAILS).contains(&rails.len()),
            "a composite of 1 to {MAX_RAILS} rails"
        );
        MultiRail {
            rails,
            me,
            policy,
            stripe,
            peers: HashMap::default(),
            next_chunk: 0,
            unsent_chunks: HashMap::default(),
            events: Events::default(),
            origins: VecDeque::new(),
            homeless: Vec::new(),
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

    /// The home rail of the pair with `peer`, once the peer's address
    /// says how many rails it has.
    pub fn home_of(&mut self, peer: u32) -> Option<usize> {
        self.peer(peer).map(|p| p.home)
    }

    fn peer(&mut self, peer: u32) -> Option<PeerRails> {
        if self.rails.len() == 1 {
            return Some(PeerRails {
                home: 0,
                width: 1,
                dead: 0,
            });
        }
        if let Some(p) = self.peers.get(&peer) {
            return Some(*p);
        }
        let width = self.rails[0].rails_of(peer)?.clamp(1, self.rails.len());
        let p = PeerRails {
            home: (self.me as usize + peer as usize) % width,
            width,
            dead: 0,
        };
        self.peers.insert(peer, p);
        Some(p)
    }

    /// The rail for `t`: its pair's home, or for a chunk the policy's
    /// among the live rails that have room; `None` while the peer's
    /// rails are unknown, or no rail the policy allows has room.
    fn rail_for(&mut self, t: &Transmit) -> Option<usize> {
        let p = self.peer(t.peer)?;
        let chunk = t.header.kind == FrameKind::Data && t.header.flags & FLAG_CHUNK != 0;
        let live = p.live().count();
        if !chunk || live < 2 {
            return Some(p.home);
        }
        let peer = t.peer;
        match self.policy {
            RailPolicy::RoundRobin => {
                let rail = p.live().nth(self.next_chunk % live)?;
                if !self.rails[rail].has_room(peer) {
                    return None;
                }
                self.next_chunk = self.next_chunk.wrapping_add(1);
                Some(rail)
            }
            RailPolicy::LeastUsed => p
                .live()
                .filter(|&rail| self.rails[rail].has_room(peer))
                .min_by_key(|&rail| (self.rails[rail].unwritten_to(peer), rail != p.home)),
        }
    }

    /// Rail `rail` lost `peer`: the peer's loss if it is the pair's home
    /// (or the pair's rails are unknown), else the rail is taken out for
    /// the peer and the chunks it dropped are reported sent.
    fn rail_lost(&mut self, rail: usize, peer: u32, error: Error) -> LinkEvent {
        let Some(p) = self.peers.get_mut(&peer).filter(|p| p.home != rail) else {
            return LinkEvent::Lost { peer, error };
        };
        p.dead |= 1 << rail;
        let dropped: Vec<(ReqId, u32)> = self
            .unsent_chunks
            .iter()
            .filter(|(&(r, _), &(to, _))| r == rail && to == peer)
            .map(|(&(_, req), &(_, count))| (req, count))
            .collect();
        for (req, count) in dropped {
            self.unsent_chunks.remove(&(rail, req));
            self.events
                .sent
                .extend(std::iter::repeat_n(req, count as usize));
        }
        LinkEvent::RailLost { peer, rail, error }
    }

    /// Drains every rail's events into the composite's own.
    pub fn collect(&mut self) {
        for index in 0..self.rails.len() {
            let from = self.rails[index].events();
            if from.is_empty() {
                continue;
            }
            if !self.unsent_chunks.is_empty() {
                for req in &from.sent {
                    if let Some((_, count)) = self.unsent_chunks.get_mut(&(index, *req)) {
                        *count -= 1;
                        if *count == 0 {
                            self.unsent_chunks.remove(&(index, *req));
                        }
                    }
                }
            }
            let to = &mut self.events;
            to.sent.append(&mut from.sent);
            to.filled.append(&mut from.filled);
            to.rma_done.append(&mut from.rma_done);
            while let Some(frame) = from.frames.pop_front() {
                to.frames.push_back(frame);
                self.origins.push_back(index);
            }
            to.reached.append(&mut from.reached);
            let links = std::mem::take(&mut from.links);
            for event in links {
                let event = match event {
                    LinkEvent::Lost { peer, error } if self.rails.len() > 1 => {
                        self.rail_lost(index, peer, error)
                    }
                    other => other,
                };
                self.events.links.push(event);
            }
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

    /// A frame for a peer whose rails are not known yet, and a chunk no
    /// rail has room for, are given back.
    fn send(&mut self, t: Transmit) -> Result<(), NoResource> {
        let Some(rail) = self.rail_for(&t) else {
            return Err(NoResource(t));
        };
        let counted = (t.header.flags & FLAG_CHUNK != 0 && self.rails.len() > 1)
            .then_some(t.completes)
            .flatten()
            .map(|req| (req, t.peer));
        let result = self.rails[rail].send(t);
        if let (Ok(()), Some((req, peer))) = (&result, counted) {
            self.unsent_chunks.entry((rail, req)).or_insert((peer, 0)).1 += 1;
        }
        self.collect();
        result
    }

    fn rma(&mut self, op: &RmaOp) -> RmaOutcome {
        let home = self.home_of(op.peer).unwrap_or(0);
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

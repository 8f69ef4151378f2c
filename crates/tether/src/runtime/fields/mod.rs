//! A field as an activity ([`super::activities`]): from its creation to
//! its free, it receives the other side's hello, plans, and moves the steps
//! put or got, one at a time, in step order (the protocol is in
//! [`crate::field`]).
//!
//! Ownership: a step's request owns nothing of the user's buffer beyond
//! the caller's promise to keep it until the request completes; buffers
//! the field packs into or copies to are its own and live until the
//! transfers using them complete. A failed step completes its request only
//! after every transfer of it has finished or been cancelled, so the
//! library never writes into a buffer it gave back.
//!
//! Files: this one holds the field's state and its life (start, free,
//! end); `handshake.rs` the hellos and the plan; `steps.rs` how steps
//! move; `buffers.rs` the buffers kept between steps; `calls.rs` the
//! runtime's field calls, creation's collective part among them.

mod buffers;
mod calls;
mod handshake;
mod steps;

use std::collections::VecDeque;

use tether_proto::{CompletionError, Engine, Region, ReqId};
use tether_redist::{Dist, Plan};

use super::activities::{Activity, Progress};
use crate::datatype::Datatype;
use crate::error::{err, Error, ErrorClass};
use crate::field::wire::{self, Hello, Kind, CONTROL_CONTEXT, END, LEFT};
use crate::field::Mode;
use buffers::Spares;
use steps::{post_word, StepOp};

/// The other program of a field (a consumer program of a producer, or the
/// producer of a consumer) and what this process knows of it.
pub(in crate::runtime) struct PeerProgram {
    pub name: String,
    /// Universe rank of its rank 0.
    pub first: u32,
    pub size: u32,
    hello: HelloState,
    /// What this process sends to or receives from its ranks, once the
    /// hello came and the two sides agree.
    plan: Option<Plan>,
    /// Producer: the ranks of this program that acknowledge steps to me.
    receivers: Vec<Receiver>,
    /// Producer: steps sent to this program, oldest first, not yet
    /// acknowledged by all its receivers.
    outstanding: VecDeque<i64>,
    /// Consumer: the producer's announcement of its next step.
    announcement: Option<Announcement>,
}

enum HelloState {
    Waiting,
    Receiving { request: ReqId, buffer: Vec<u8> },
    Arrived(Box<Hello>),
}

/// A consumer rank that acknowledges steps to this producer rank.
struct Receiver {
    rank: u32,
    acked: Option<i64>,
    /// Its posted acknowledgement receive and the buffer it lands in.
    posted: Option<(ReqId, Box<[u8; 8]>)>,
}

impl Receiver {
    fn has_left(&self) -> bool {
        self.acked == Some(LEFT)
    }
}

impl PeerProgram {
    /// Its ranks that left the field (a consumer's free): nothing more is
    /// sent to them.
    fn left(&self) -> Vec<u32> {
        self.receivers
            .iter()
            .filter(|r| r.has_left())
            .map(|r| r.rank)
            .collect()
    }
}

enum Announcement {
    Posted(ReqId, Box<[u8; 8]>),
    Arrived(i64),
}

impl PeerProgram {
    pub(in crate::runtime) fn new(name: String, first: u32, size: u32) -> PeerProgram {
        PeerProgram {
            name,
            first,
            size,
            hello: HelloState::Waiting,
            plan: None,
            receivers: Vec::new(),
            outstanding: VecDeque::new(),
            announcement: None,
        }
    }
}

/// A field, from `tether_field_create` to its free.
pub(in crate::runtime) struct Field {
    pub handle: i32,
    pub name: String,
    /// The producer program's name (this program's when putting).
    pub producer: String,
    pub key: u32,
    mode: Mode,
    element: Datatype,
    /// This process's rank in its program.
    my_rank: u32,
    /// This program's side, combined from every rank's description.
    side: Dist,
    peers: Vec<PeerProgram>,
    queue_limit: usize,
    /// Sends whose buffers the field owns and that no step waits for.
    owned_sends: Vec<(ReqId, u32, Vec<u8>)>,
    /// Buffers of finished transfers, for the next steps.
    spares: Spares,
    ops: VecDeque<StepOp>,
    /// Errors of completed step requests, until their requests are taken.
    errors: Vec<(ReqId, Error)>,
    /// Why every later call fails (mismatch, lost peer), once known.
    failure: Option<Error>,
    /// Whether it was freed: it ends once nothing is in flight.
    freed: bool,
    /// The last step queued (put or got).
    pub last_step: Option<i64>,
    /// Whether a freed field said its last word (a producer's end of
    /// steps) and withdrew its posted receives.
    ended: bool,
}

/// What a field is made of at creation.
pub(in crate::runtime) struct FieldParts {
    pub handle: i32,
    pub name: String,
    pub producer: String,
    /// Its tags' key (`wire::field_key`).
    pub key: u32,
    pub mode: Mode,
    pub element: Datatype,
    pub my_rank: u32,
    pub side: Dist,
    pub peers: Vec<PeerProgram>,
    pub queue_limit: usize,
}

impl Field {
    pub(in crate::runtime) fn new(parts: FieldParts) -> Field {
        Field {
            handle: parts.handle,
            key: parts.key,
            name: parts.name,
            producer: parts.producer,
            mode: parts.mode,
            element: parts.element,
            my_rank: parts.my_rank,
            side: parts.side,
            peers: parts.peers,
            queue_limit: parts.queue_limit,
            owned_sends: Vec::new(),
            spares: Spares::default(),
            ops: VecDeque::new(),
            errors: Vec::new(),
            failure: None,
            freed: false,
            last_step: None,
            ended: false,
        }
    }

    pub(in crate::runtime) fn is_freed(&self) -> bool {
        self.freed
    }

    /// The first process of the first program on the other side (for
    /// traces: whom a step waits for).
    pub(in crate::runtime) fn other_side(&self) -> Option<u32> {
        self.peers.first().map(|p| p.first)
    }

    pub(in crate::runtime) fn mode(&self) -> Mode {
        self.mode
    }

    /// Bytes of this process's local part.
    pub(in crate::runtime) fn local_bytes(&self) -> usize {
        self.side.local_len(self.my_rank as usize) as usize * self.element.size
    }

    /// Why calls on it fail, if they do.
    pub(in crate::runtime) fn failure(&self) -> Option<&Error> {
        self.failure.as_ref()
    }

    /// Sends this side's hello to every rank of every peer program
    /// (called on rank 0 only) and, as a consumer, posts the receive of
    /// the producer's first announcement.
    pub(in crate::runtime) fn start(&mut self, engine: &mut Engine) {
        if self.my_rank == 0 {
            let hello = Hello {
                mode: self.mode,
                producer: self.producer.clone(),
                name: self.name.clone(),
                family: self.element.family(),
                element_size: self.element.size as u32,
                dist: self.side.clone(),
            }
            .encode();
            let tag = wire::control_tag(self.key, Kind::Hello);
            let targets: Vec<u32> = self
                .peers
                .iter()
                .flat_map(|p| p.first..p.first + p.size)
                .collect();
            for rank in targets {
                self.send_owned(engine, rank, tag, hello.clone());
            }
        }
        if self.mode == Mode::Get {
            let tag = wire::control_tag(self.key, Kind::Step);
            let producer = &mut self.peers[0];
            producer.announcement = Some(post_word(engine, producer.first, tag));
        }
    }

    fn send_owned(&mut self, engine: &mut Engine, rank: u32, tag: i32, bytes: Vec<u8>) {
        let request = engine.isend(
            rank,
            CONTROL_CONTEXT,
            tag,
            Region::from_const(bytes.as_ptr(), bytes.len()),
        );
        self.owned_sends.push((request, rank, bytes));
    }

    /// Marks it freed: a producer's steps still queued are delivered and
    /// the consumers told that no more will come; a consumer tells the
    /// producer it left. It ends once nothing is in flight.
    pub(in crate::runtime) fn free(&mut self, engine: &mut Engine) {
        if self.freed {
            return;
        }
        self.freed = true;
        if self.mode == Mode::Get {
            let tag = wire::control_tag(self.key, Kind::Ack);
            for rank in self.ack_targets() {
                self.send_owned(engine, rank, tag, LEFT.to_le_bytes().to_vec());
            }
        }
    }

    /// Whether everything it was asked to do is done: no step queued,
    /// no step unacknowledged, no send in flight.
    pub(in crate::runtime) fn is_settled(&self) -> bool {
        self.ops.is_empty()
            && self.owned_sends.is_empty()
            && (self.failure.is_some() || self.peers.iter().all(|p| p.outstanding.is_empty()))
    }

    /// Producer ranks a consumer acknowledges to: those it receives data
    /// from, and rank 0, which announces every step.
    fn ack_targets(&self) -> Vec<u32> {
        let producer = &self.peers[0];
        let mut targets = vec![producer.first];
        if let Some(plan) = &producer.plan {
            for peer in plan.peers() {
                let rank = producer.first + peer.peer() as u32;
                if rank != producer.first {
                    targets.push(rank);
                }
            }
        }
        targets
    }

    fn fail(&mut self, error: Error) {
        if self.failure.is_none() {
            self.failure = Some(error);
        }
    }

    /// The error of a transfer with `peer` that completed with `why`.
    fn transfer_error(&self, progress: &Progress<'_>, peer: u32, why: CompletionError) -> Error {
        let who = progress.universe.describe(peer);
        match why {
            CompletionError::PeerLost => {
                let detail = progress.peers.lost(peer);
                let class = detail.map_or(ErrorClass::PeerLost, |e| e.class);
                let reason =
                    detail.map_or("the connection was lost".to_string(), |e| e.message.clone());
                err(class, format!("field {:?}: {who}: {reason}", self.name))
            }
            other => err(
                ErrorClass::Internal,
                format!(
                    "field {:?}: a transfer with {who} failed: {}",
                    self.name,
                    crate::error::completion_words(other)
                ),
            ),
        }
    }

    fn collect_owned_sends(&mut self, progress: &mut Progress<'_>) {
        let mut failed = None;
        let mut index = 0;
        while index < self.owned_sends.len() {
            let (request, peer, _) = self.owned_sends[index];
            match progress.engine.take_completion(request) {
                None => index += 1,
                Some(done) => {
                    if let Some(why) = done.error {
                        failed.get_or_insert((peer, why));
                    }
                    let (_, _, buffer) = self.owned_sends.swap_remove(index);
                    self.spares.give(buffer);
                }
            }
        }
        if let Some((peer, why)) = failed {
            let error = self.transfer_error(progress, peer, why);
            self.fail(error);
        }
    }

    /// A producer's last announcement, once every step is sent: no more
    /// steps will come.
    fn announce_end(&mut self, engine: &mut Engine) {
        let tag = wire::control_tag(self.key, Kind::Step);
        let ranks: Vec<u32> = self
            .peers
            .iter()
            .flat_map(|p| {
                let left = p.left();
                (p.first..p.first + p.size).filter(move |r| !left.contains(r))
            })
            .collect();
        let live: Vec<u32> = ranks.into_iter().filter(|r| !engine.is_lost(*r)).collect();
        for rank in live {
            self.send_owned(engine, rank, tag, END.to_le_bytes().to_vec());
        }
    }

    /// Cancels the receives it keeps posted, once it ends.
    fn withdraw(&mut self, engine: &mut Engine) {
        for peer in &mut self.peers {
            for receiver in &mut peer.receivers {
                if let Some((request, _)) = &receiver.posted {
                    if engine.cancel(*request) || engine.completion(*request).is_some() {
                        engine.take_completion(*request);
                        receiver.posted = None;
                    }
                }
            }
            if let Some(Announcement::Posted(request, _)) = &peer.announcement {
                if engine.cancel(*request) || engine.completion(*request).is_some() {
                    engine.take_completion(*request);
                    peer.announcement = None;
                }
            }
            if let HelloState::Receiving { request, .. } = &peer.hello {
                if engine.completion(*request).is_some() {
                    engine.take_completion(*request);
                    peer.hello = HelloState::Waiting;
                }
            }
        }
    }

    fn has_posted(&self) -> bool {
        self.peers.iter().any(|p| {
            p.receivers.iter().any(|r| r.posted.is_some())
                || matches!(p.announcement, Some(Announcement::Posted(..)))
                || matches!(p.hello, HelloState::Receiving { .. })
        })
    }
}

impl Activity for Field {
    fn advance(&mut self, progress: &mut Progress<'_>) {
        self.collect_owned_sends(progress);
        self.receive_hellos(progress);
        match self.mode {
            Mode::Put => self.collect_acks(progress),
            Mode::Get => self.collect_announcement(progress),
        }
        self.advance_steps(progress);
        if self.freed && self.ops.is_empty() && self.is_settled() {
            // Also after a failure: consumers waiting for the next step
            // then fail at once instead of waiting for this process to go.
            if self.mode == Mode::Put && !self.ended && self.my_rank == 0 {
                self.announce_end(progress.engine);
            }
            self.ended = true;
            self.withdraw(progress.engine);
        }
    }

    fn needs_progress(&self) -> bool {
        !self.ops.is_empty()
            || !self.owned_sends.is_empty()
            || (!self.is_ready() && self.failure.is_none() && !self.freed)
            || (self.freed && (!self.ended || self.has_posted()))
    }

    fn take_error(&mut self, request: ReqId) -> Option<Error> {
        if self.errors.is_empty() {
            return None;
        }
        let index = self.errors.iter().position(|(r, _)| *r == request)?;
        Some(self.errors.swap_remove(index).1)
    }

    fn is_done(&self) -> bool {
        self.freed
            && self.ended
            && self.owned_sends.is_empty()
            && !self.has_posted()
            && self.errors.is_empty()
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

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

use std::collections::VecDeque;

use tether_proto::{Completion, CompletionError, Engine, Region, ReqId};
use tether_redist::{Dist, PeerPlan, Plan, Side};

use super::activities::{Activity, Progress};
use super::field_buffers::Spares;
use crate::datatype::Datatype;
use crate::error::{err, Error, ErrorClass};
use crate::field::wire::{self, Hello, Kind, CONTROL_CONTEXT, DATA_CONTEXT, END, LEFT};
use crate::field::Mode;

/// The other program of a field (a consumer program of a producer, or the
/// producer of a consumer) and what this process knows of it.
pub(super) struct PeerProgram {
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

enum Announcement {
    Posted(ReqId, Box<[u8; 8]>),
    Arrived(i64),
}

impl PeerProgram {
    pub fn new(name: String, first: u32, size: u32) -> PeerProgram {
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

/// One step put or got.
struct StepOp {
    request: ReqId,
    step: i64,
    /// The user's local part (the caller keeps it until `request` completes).
    local: Region,
    /// Blocking put: copy every byte, so that the step is queued and the
    /// request completes as soon as its transfers are posted.
    copy: bool,
    stage: Stage,
}

enum Stage {
    Waiting,
    Moving {
        transfers: Vec<Transfer>,
        failure: Option<Error>,
    },
}

/// One message of a step and the buffer it uses when not the user's.
struct Transfer {
    request: ReqId,
    peer: u32,
    buffer: Option<Vec<u8>>,
    /// Consumer: which peer plan unpacks `buffer` into the local part.
    unpack: Option<usize>,
}

/// A field, from `tether_field_create` to its free.
pub(super) struct Field {
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
pub(super) struct FieldParts {
    pub handle: i32,
    pub name: String,
    pub producer: String,
    pub mode: Mode,
    pub element: Datatype,
    pub my_rank: u32,
    pub side: Dist,
    pub peers: Vec<PeerProgram>,
    pub queue_limit: usize,
}

impl Field {
    pub fn new(parts: FieldParts) -> Field {
        Field {
            handle: parts.handle,
            key: wire::field_key(&parts.producer, &parts.name),
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

    pub fn is_freed(&self) -> bool {
        self.freed
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Bytes of this process's local part.
    pub fn local_bytes(&self) -> usize {
        self.side.local_len(self.my_rank as usize) as usize * self.element.size
    }

    /// Why calls on it fail, if they do.
    pub fn failure(&self) -> Option<&Error> {
        self.failure.as_ref()
    }

    /// Sends this side's hello to every rank of every peer program
    /// (called on rank 0 only) and, as a consumer, posts the receive of
    /// the producer's first announcement.
    pub fn start(&mut self, engine: &mut Engine) {
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

    /// Queues a step put (`Mode::Put`) or got; `request` completes when it
    /// is done (see [`StepOp::copy`] for blocking puts).
    pub fn queue(&mut self, request: ReqId, step: i64, local: Region, copy: bool) {
        self.ops.push_back(StepOp {
            request,
            step,
            local,
            copy,
            stage: Stage::Waiting,
        });
    }

    /// Marks it freed: a producer's steps still queued are delivered and
    /// the consumers told that no more will come; a consumer tells the
    /// producer it left. It ends once nothing is in flight.
    pub fn free(&mut self, engine: &mut Engine) {
        if self.freed {
            return;
        }
        self.freed = true;
        if self.mode == Mode::Get {
            let tag = wire::control_tag(self.key, Kind::Ack);
            for rank in self.ack_targets() {
                self.send_owned(engine, rank, tag, LEFT.to_le_bytes().to_vec());
            }
            let producer = &mut self.peers[0];
            if let Some(Announcement::Posted(request, _)) = &producer.announcement {
                if engine.cancel(*request) {
                    engine.take_completion(*request);
                    producer.announcement = None;
                }
            }
        }
    }

    /// Whether everything it was asked to do is done: no step queued,
    /// no step unacknowledged, no send in flight.
    pub fn is_settled(&self) -> bool {
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
                let detail = progress.unreachable.get(&peer);
                let class = detail.map_or(ErrorClass::PeerLost, |e| e.class);
                let reason =
                    detail.map_or("the connection was lost".to_string(), |e| e.message.clone());
                err(class, format!("field {:?}: {who}: {reason}", self.name))
            }
            other => err(
                ErrorClass::Internal,
                format!(
                    "field {:?}: a transfer with {who} ended with {other:?}",
                    self.name
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

    /// Takes in the other side's hellos and, once all came, checks the
    /// two sides against each other and plans.
    fn receive_hellos(&mut self, progress: &mut Progress<'_>) {
        let tag = wire::control_tag(self.key, Kind::Hello);
        let mut lost = None;
        for peer in &mut self.peers {
            if let HelloState::Waiting = peer.hello {
                if let Some((_, size)) =
                    progress
                        .engine
                        .iprobe(Some(peer.first), CONTROL_CONTEXT, Some(tag))
                {
                    let mut buffer = vec![0u8; size as usize];
                    let request = progress.engine.irecv(
                        Some(peer.first),
                        CONTROL_CONTEXT,
                        Some(tag),
                        Region {
                            ptr: buffer.as_mut_ptr(),
                            len: buffer.len(),
                        },
                    );
                    peer.hello = HelloState::Receiving { request, buffer };
                } else if progress.engine.is_lost(peer.first) {
                    lost = Some(peer.first);
                }
            }
            if let HelloState::Receiving { request, buffer } = &mut peer.hello {
                match progress.engine.take_completion(*request) {
                    None => {}
                    Some(Completion { error: Some(_), .. }) => lost = Some(peer.first),
                    Some(_) => {
                        let decoded = Hello::decode(buffer);
                        match decoded {
                            Some(hello) => peer.hello = HelloState::Arrived(Box::new(hello)),
                            None => {
                                let error = err(
                                    ErrorClass::Protocol,
                                    format!(
                                        "field {:?}: {} sent a hello this version cannot read",
                                        self.name,
                                        progress.universe.describe(peer.first)
                                    ),
                                );
                                self.failure.get_or_insert(error);
                                peer.hello = HelloState::Waiting;
                                return;
                            }
                        }
                    }
                }
            }
        }
        if let Some(peer) = lost {
            let error = self.transfer_error(progress, peer, CompletionError::PeerLost);
            self.fail(error);
            return;
        }
        if self.failure.is_some() || self.is_ready() {
            return;
        }
        if self
            .peers
            .iter()
            .all(|p| matches!(p.hello, HelloState::Arrived(_)))
        {
            self.agree_and_plan(progress.engine);
        }
    }

    fn is_ready(&self) -> bool {
        self.peers.iter().all(|p| p.plan.is_some())
    }

    /// Checks each hello against this side and plans; any disagreement
    /// fails the field with `FieldMismatch`. Both sides run the same
    /// checks on the same two descriptions, so both reach one verdict.
    fn agree_and_plan(&mut self, engine: &mut Engine) {
        for index in 0..self.peers.len() {
            let HelloState::Arrived(hello) = &self.peers[index].hello else {
                unreachable!("called once every hello arrived");
            };
            if let Err(what) = self.compare(hello) {
                let error = err(
                    ErrorClass::FieldMismatch,
                    format!(
                        "field {:?} (producer {:?}) disagrees with program {:?}: {what}",
                        self.name, self.producer, self.peers[index].name
                    ),
                );
                self.fail(error);
                return;
            }
        }
        let my_rank = self.my_rank as usize;
        for index in 0..self.peers.len() {
            let peer = &mut self.peers[index];
            let HelloState::Arrived(hello) = &peer.hello else {
                unreachable!("called once every hello arrived");
            };
            let plan = match self.mode {
                Mode::Put => tether_redist::plan(&self.side, &hello.dist, Side::Producer, my_rank),
                Mode::Get => tether_redist::plan(&hello.dist, &self.side, Side::Consumer, my_rank),
            };
            if self.mode == Mode::Put {
                let mut ranks: Vec<u32> = plan
                    .peers()
                    .iter()
                    .map(|p| peer.first + p.peer() as u32)
                    .collect();
                if self.my_rank == 0 {
                    ranks = (peer.first..peer.first + peer.size).collect();
                }
                let tag = wire::control_tag(self.key, Kind::Ack);
                peer.receivers = ranks
                    .into_iter()
                    .map(|rank| {
                        let (request, buffer) = post_ack(engine, rank, tag);
                        Receiver {
                            rank,
                            acked: None,
                            posted: Some((request, buffer)),
                        }
                    })
                    .collect();
            }
            peer.plan = Some(plan);
        }
    }

    /// What differs between this side and `hello`'s, described as
    /// expected (the producer's) against received (the consumer's).
    fn compare(&self, hello: &Hello) -> std::result::Result<(), String> {
        if hello.name != self.name || hello.producer != self.producer {
            return Err(format!(
                "its hello names field {:?} of producer {:?} (the two names share a tag: rename one)",
                hello.name, hello.producer
            ));
        }
        let expected_mode = match self.mode {
            Mode::Put => Mode::Get,
            Mode::Get => Mode::Put,
        };
        if hello.mode != expected_mode {
            return Err("both programs created it in the same mode".to_string());
        }
        let mine = (self.element.family(), self.element.size as u32);
        let theirs = (hello.family, hello.element_size);
        if mine != theirs {
            let (expected, received) = match self.mode {
                Mode::Put => (mine, theirs),
                Mode::Get => (theirs, mine),
            };
            return Err(format!(
                "element type: expected {} of {} bytes, received {} of {} bytes",
                expected.0.name(),
                expected.1,
                received.0.name(),
                received.1
            ));
        }
        let (producer, consumer) = match self.mode {
            Mode::Put => (&self.side, &hello.dist),
            Mode::Get => (&hello.dist, &self.side),
        };
        tether_redist::check(producer, consumer).map_err(|m| m.to_string())
    }

    /// Producer: takes in acknowledgements and retires the steps every
    /// receiver took.
    fn collect_acks(&mut self, progress: &mut Progress<'_>) {
        let tag = wire::control_tag(self.key, Kind::Ack);
        let mut lost = None;
        for peer in &mut self.peers {
            for receiver in &mut peer.receivers {
                let Some((request, buffer)) = &receiver.posted else {
                    continue;
                };
                match progress.engine.take_completion(*request) {
                    None => continue,
                    Some(Completion { error: Some(_), .. }) => {
                        receiver.posted = None;
                        lost.get_or_insert(receiver.rank);
                        continue;
                    }
                    Some(_) => {}
                }
                let step = i64::from_le_bytes(**buffer);
                receiver.acked = Some(step);
                receiver.posted =
                    (step != LEFT).then(|| post_ack(progress.engine, receiver.rank, tag));
            }
            while let Some(&oldest) = peer.outstanding.front() {
                let taken = peer
                    .receivers
                    .iter()
                    .all(|r| r.acked.is_some_and(|a| a >= oldest));
                if !taken {
                    break;
                }
                peer.outstanding.pop_front();
            }
        }
        if let Some(rank) = lost {
            let error = self.transfer_error(progress, rank, CompletionError::PeerLost);
            self.fail(error);
        }
    }

    /// Consumer: takes in the producer's announcement of its next step.
    fn collect_announcement(&mut self, progress: &mut Progress<'_>) {
        let producer = &mut self.peers[0];
        let Some(Announcement::Posted(request, buffer)) = &producer.announcement else {
            return;
        };
        match progress.engine.take_completion(*request) {
            None => {}
            Some(Completion {
                error: Some(why), ..
            }) => {
                let rank = producer.first;
                producer.announcement = None;
                let error = self.transfer_error(progress, rank, why);
                self.fail(error);
            }
            Some(_) => {
                producer.announcement = Some(Announcement::Arrived(i64::from_le_bytes(**buffer)))
            }
        }
    }

    /// Moves the oldest steps as far as they go.
    fn advance_steps(&mut self, progress: &mut Progress<'_>) {
        while let Some(op) = self.ops.front_mut() {
            if let Stage::Waiting = op.stage {
                if let Some(error) = &self.failure {
                    let error = error.clone();
                    let op = self.ops.pop_front().expect("front exists");
                    self.complete(progress.engine, op.request, Some(error));
                    continue;
                }
                if !self.is_ready() {
                    return;
                }
                let started = match self.mode {
                    Mode::Put => self.start_put(progress),
                    Mode::Get => self.start_get(progress),
                };
                if !started {
                    return;
                }
            }
            if !self.finish_front(progress) {
                return;
            }
        }
    }

    /// Sends the front step, if every consumer program has room for it.
    fn start_put(&mut self, progress: &mut Progress<'_>) -> bool {
        let limit = self.queue_limit;
        if self.peers.iter().any(|p| p.outstanding.len() >= limit) {
            return false;
        }
        let op = self.ops.front_mut().expect("called with a front step");
        let size = self.element.size;
        let data_tag = wire::data_tag(self.key);
        let step_tag = wire::control_tag(self.key, Kind::Step);
        // SAFETY: the caller keeps its local part valid and unchanged
        // until the step's request completes (API contract).
        let local = unsafe { op.local.as_slice() };
        let mut transfers = Vec::new();
        let mut announcements = Vec::new();
        for peer in &mut self.peers {
            let plan = peer.plan.as_ref().expect("ready fields have plans");
            let left: Vec<u32> = peer
                .receivers
                .iter()
                .filter(|r| r.has_left())
                .map(|r| r.rank)
                .collect();
            for part in plan.peers() {
                let rank = peer.first + part.peer() as u32;
                if left.contains(&rank) {
                    continue;
                }
                let (region, buffer) = outgoing(part, local, size, op.copy, &mut self.spares);
                let request = progress.engine.isend(rank, DATA_CONTEXT, data_tag, region);
                transfers.push(Transfer {
                    request,
                    peer: rank,
                    buffer,
                    unpack: None,
                });
            }
            if self.my_rank == 0 {
                for rank in peer.first..peer.first + peer.size {
                    if !left.contains(&rank) {
                        announcements.push(rank);
                    }
                }
            }
            peer.outstanding.push_back(op.step);
        }
        let step = op.step;
        if op.copy {
            for t in transfers.drain(..) {
                let buffer = t.buffer.expect("a copied step owns its buffers");
                self.owned_sends.push((t.request, t.peer, buffer));
            }
        }
        let op = self.ops.front_mut().expect("called with a front step");
        op.stage = Stage::Moving {
            transfers,
            failure: None,
        };
        for rank in announcements {
            self.send_owned(progress.engine, rank, step_tag, step.to_le_bytes().to_vec());
        }
        true
    }

    /// Posts the receives of the front step, once the producer announced
    /// it; a step that is not the producer's next fails with `Arg`.
    fn start_get(&mut self, progress: &mut Progress<'_>) -> bool {
        let Field {
            peers,
            ops,
            spares,
            name,
            key,
            element,
            ..
        } = self;
        let producer = &mut peers[0];
        let announced = match producer.announcement {
            Some(Announcement::Arrived(step)) => step,
            _ => return false,
        };
        let op = ops.front_mut().expect("called with a front step");
        if announced != op.step {
            let message = if announced == END {
                format!(
                    "field {:?}: get of step {}, but program {:?} freed the field: no more steps will come",
                    name, op.step, producer.name
                )
            } else {
                format!(
                    "field {:?}: get of step {}, but the producer's next step is {announced}",
                    name, op.step
                )
            };
            let class = if announced == END {
                ErrorClass::PeerLost
            } else {
                ErrorClass::Arg
            };
            let op = ops.pop_front().expect("front exists");
            self.complete(progress.engine, op.request, Some(err(class, message)));
            return false;
        }
        let tag = wire::control_tag(*key, Kind::Step);
        producer.announcement = Some(post_word(progress.engine, producer.first, tag));
        let plan = producer.plan.as_ref().expect("ready fields have plans");
        let size = element.size;
        let data_tag = wire::data_tag(*key);
        let mut transfers = Vec::new();
        for (index, part) in plan.peers().iter().enumerate() {
            let rank = producer.first + part.peer() as u32;
            let bytes = part.elements() as usize * size;
            let (region, buffer, unpack) = match part.contiguous() {
                Some((first, _)) => (
                    Region {
                        // SAFETY: the plan's range lies inside the local part.
                        ptr: unsafe { op.local.ptr.add(first as usize * size) },
                        len: bytes,
                    },
                    None,
                    None,
                ),
                None => {
                    let mut buffer = spares.take(bytes);
                    let region = Region {
                        ptr: buffer.as_mut_ptr(),
                        len: bytes,
                    };
                    (region, Some(buffer), Some(index))
                }
            };
            let request = progress
                .engine
                .irecv(Some(rank), DATA_CONTEXT, Some(data_tag), region);
            transfers.push(Transfer {
                request,
                peer: rank,
                buffer,
                unpack,
            });
        }
        op.stage = Stage::Moving {
            transfers,
            failure: None,
        };
        true
    }

    /// Finishes the front step if its transfers are done (or, for a
    /// copied put, at once); returns whether it did.
    fn finish_front(&mut self, progress: &mut Progress<'_>) -> bool {
        let size = self.element.size;
        let Field {
            ops, peers, spares, ..
        } = self;
        let StepOp { local, stage, .. } = ops.front_mut().expect("called with a front step");
        let Stage::Moving { transfers, failure } = stage else {
            return false;
        };
        let plan = peers[0].plan.as_ref();
        let mut failed = None;
        transfers.retain_mut(|t| {
            let Some(done) = progress.engine.take_completion(t.request) else {
                return true;
            };
            match (done.error, t.unpack, &t.buffer, plan) {
                (Some(why), ..) => {
                    failed.get_or_insert((t.peer, why));
                }
                (None, Some(index), Some(buffer), Some(plan)) if failure.is_none() => {
                    // SAFETY: the caller keeps its local part valid and
                    // untouched until the step's request completes.
                    let local = unsafe { std::slice::from_raw_parts_mut(local.ptr, local.len) };
                    plan.peers()[index].unpack(buffer, size, local);
                }
                _ => {}
            }
            if let Some(buffer) = t.buffer.take() {
                spares.give(buffer);
            }
            false
        });
        if let Some((peer, why)) = failed {
            if failure.is_none() {
                // Nothing more lands in a step that failed.
                for t in transfers.iter() {
                    progress.engine.cancel(t.request);
                }
            }
            let error = self.transfer_error(progress, peer, why);
            if let Some(StepOp {
                stage: Stage::Moving { failure, .. },
                ..
            }) = self.ops.front_mut()
            {
                failure.get_or_insert(error.clone());
            }
            self.fail(error);
        }
        let Some(StepOp {
            stage: Stage::Moving { transfers, failure },
            ..
        }) = self.ops.front_mut()
        else {
            unreachable!("the front step is moving");
        };
        if !transfers.is_empty() {
            return false;
        }
        let failure = failure.take();
        let op = self.ops.pop_front().expect("front exists");
        if self.mode == Mode::Get && failure.is_none() {
            let tag = wire::control_tag(self.key, Kind::Ack);
            for rank in self.ack_targets() {
                self.send_owned(progress.engine, rank, tag, op.step.to_le_bytes().to_vec());
            }
        }
        self.complete(progress.engine, op.request, failure);
        true
    }

    fn complete(&mut self, engine: &mut Engine, request: ReqId, error: Option<Error>) {
        let completion = Completion {
            source: u32::MAX,
            tag: super::ANY_TAG,
            bytes: 0,
            error: error.as_ref().map(|_| CompletionError::PeerLost),
        };
        if let Some(error) = error {
            self.errors.push((request, error));
        }
        engine.complete_generalized(request, completion);
    }

    /// A producer's last announcement, once every step is sent: no more
    /// steps will come.
    fn announce_end(&mut self, engine: &mut Engine) {
        let tag = wire::control_tag(self.key, Kind::Step);
        let ranks: Vec<u32> = self
            .peers
            .iter()
            .flat_map(|p| {
                let left: Vec<u32> = p
                    .receivers
                    .iter()
                    .filter(|r| r.has_left())
                    .map(|r| r.rank)
                    .collect();
                (p.first..p.first + p.size).filter(move |r| !left.contains(r))
            })
            .collect();
        for rank in ranks {
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

/// The region a producer sends `part` from, and the buffer it owns when
/// the part is packed or copied.
fn outgoing(
    part: &PeerPlan,
    local: &[u8],
    size: usize,
    copy: bool,
    spares: &mut Spares,
) -> (Region, Option<Vec<u8>>) {
    let bytes = part.elements() as usize * size;
    match part.contiguous() {
        Some((first, _)) if !copy => {
            let start = first as usize * size;
            (
                Region::from_const(local[start..start + bytes].as_ptr(), bytes),
                None,
            )
        }
        _ => {
            let mut buffer = spares.take(bytes);
            part.pack(local, size, &mut buffer);
            (Region::from_const(buffer.as_ptr(), bytes), Some(buffer))
        }
    }
}

fn post_word(engine: &mut Engine, source: u32, tag: i32) -> Announcement {
    let mut buffer = Box::new([0u8; 8]);
    let request = engine.irecv(
        Some(source),
        CONTROL_CONTEXT,
        Some(tag),
        Region {
            ptr: buffer.as_mut_ptr(),
            len: 8,
        },
    );
    Announcement::Posted(request, buffer)
}

fn post_ack(engine: &mut Engine, source: u32, tag: i32) -> (ReqId, Box<[u8; 8]>) {
    match post_word(engine, source, tag) {
        Announcement::Posted(request, buffer) => (request, buffer),
        Announcement::Arrived(_) => unreachable!("a posted word"),
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
            if self.mode == Mode::Put && !self.ended && self.failure.is_none() && self.my_rank == 0
            {
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
            || (self.freed && !(self.ended && !self.has_posted()))
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

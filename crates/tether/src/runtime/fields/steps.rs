//! How a field's steps move: a producer packs and sends each consumer
//! peer its part and counts acknowledgements against `FIELD_QUEUE`; a
//! consumer waits for the producer's announcement, receives each part in
//! place or into a buffer it unpacks, and acknowledges.

use tether_proto::{Completion, CompletionError, Engine, Gather, Region, ReqId};
use tether_redist::PeerPlan;

use super::buffers::Spares;
use super::{Announcement, Field};
use crate::error::{err, Error, ErrorClass};
use crate::field::wire::{self, Kind, CONTROL_CONTEXT, DATA_CONTEXT, END, LEFT};
use crate::field::Mode;
use crate::runtime::activities::Progress;

/// One step put or got.
pub(super) struct StepOp {
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

impl Field {
    /// Queues a step put (`Mode::Put`) or got; `request` completes when it
    /// is done (see [`StepOp::copy`] for blocking puts).
    pub(in crate::runtime) fn queue(
        &mut self,
        request: ReqId,
        step: i64,
        local: Region,
        copy: bool,
    ) {
        self.ops.push_back(StepOp {
            request,
            step,
            local,
            copy,
            stage: Stage::Waiting,
        });
    }

    /// Producer: takes in acknowledgements and retires the steps every
    /// receiver took.
    pub(super) fn collect_acks(&mut self, progress: &mut Progress<'_>) {
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
    pub(super) fn collect_announcement(&mut self, progress: &mut Progress<'_>) {
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
    pub(super) fn advance_steps(&mut self, progress: &mut Progress<'_>) {
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
            let left = peer.left();
            for part in plan.peers() {
                let rank = peer.first + part.peer() as u32;
                if left.contains(&rank) {
                    continue;
                }
                let (request, buffer) = match outgoing(part, local, size, op.copy, &mut self.spares)
                {
                    Outgoing::InPlace(region) => (
                        progress.engine.isend(rank, DATA_CONTEXT, data_tag, region),
                        None,
                    ),
                    Outgoing::Gathered(gather) => (
                        progress
                            .engine
                            .isend_gather(rank, DATA_CONTEXT, data_tag, gather),
                        None,
                    ),
                    Outgoing::Packed(buffer) => {
                        let region = Region::from_const(buffer.as_ptr(), buffer.len());
                        (
                            progress.engine.isend(rank, DATA_CONTEXT, data_tag, region),
                            Some(buffer),
                        )
                    }
                };
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
            tag: crate::runtime::ANY_TAG,
            bytes: 0,
            error: error.as_ref().map(|_| CompletionError::PeerLost),
        };
        if let Some(error) = error {
            self.errors.push((request, error));
        }
        engine.complete_generalized(request, completion);
    }
}

/// How a producer sends one part of a step.
enum Outgoing {
    /// Straight from the local part: it is one range there.
    InPlace(Region),
    /// Its runs, gathered by the transport as it moves them (tcp through a
    /// small stage that stays in cache, shm into the ring or by
    /// cross-memory copy): one copy fewer than packing them first.
    Gathered(Gather),
    /// Packed (or, for a blocking put, copied) into a buffer of the field.
    Packed(Vec<u8>),
}

/// How `part` is sent from `local`: in place or gathered when the caller
/// keeps its part until the step completes (`!copy`), else packed.
fn outgoing(
    part: &PeerPlan,
    local: &[u8],
    size: usize,
    copy: bool,
    spares: &mut Spares,
) -> Outgoing {
    let bytes = part.elements() as usize * size;
    if !copy {
        if let Some((first, _)) = part.contiguous() {
            let start = first as usize * size;
            return Outgoing::InPlace(Region::from_const(
                local[start..start + bytes].as_ptr(),
                bytes,
            ));
        }
        if let Some(runs) = part.byte_runs(size) {
            if !runs.is_empty() {
                let regions = runs
                    .into_iter()
                    .map(|(first, len)| Region::from_const(local[first..first + len].as_ptr(), len))
                    .collect();
                return Outgoing::Gathered(Gather::new(regions));
            }
        }
    }
    let mut buffer = spares.take(bytes);
    part.pack(local, size, &mut buffer);
    Outgoing::Packed(buffer)
}

pub(super) fn post_word(engine: &mut Engine, source: u32, tag: i32) -> Announcement {
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

pub(super) fn post_ack(engine: &mut Engine, source: u32, tag: i32) -> (ReqId, Box<[u8; 8]>) {
    match post_word(engine, source, tag) {
        Announcement::Posted(request, buffer) => (request, buffer),
        Announcement::Arrived(_) => unreachable!("a posted word"),
    }
}

//! Collectives on communicators (DESIGN 3.5): argument checks, the choice
//! of schedule, and running schedules as the engine progresses.
//!
//! Every collective is non-blocking underneath: it returns a request (a
//! generalized request of the engine) that `wait`/`test` complete like any
//! other. Arguments follow MPI, including which are significant only at the
//! root, and [`IN_PLACE`] where MPI allows `MPI_IN_PLACE`.

use std::sync::Arc;

use tether_proto::ReqId;

use super::aliasing::check_disjoint;
use super::collective_activity::{describe_failure, Collective};
use super::{comm_word, RingShortcut, Runtime};
use crate::coll::cache::Key;
use crate::coll::{
    pairwise, ring, tree, Buf, Buffers, Channel, Failure, Running, Schedule, Shape, Span,
};
use crate::datatype::{self, byte_len, Datatype};
use crate::error::{err, Error, ErrorClass, Result};
use crate::op::{self, Op};

/// The address that stands for "in place" (`TETHER_IN_PLACE`, `(void *)-1`).
pub const IN_PLACE: *const u8 = usize::MAX as *const u8;

/// A buffer argument as the caller passed it: address, element count and
/// datatype handle, checked only where it is significant.
#[derive(Debug, Clone, Copy)]
pub struct Arg {
    pub ptr: *const u8,
    pub count: i64,
    pub datatype: i32,
}

impl Arg {
    pub fn new(ptr: *const u8, count: i64, datatype: i32) -> Arg {
        Arg {
            ptr,
            count,
            datatype,
        }
    }

    fn in_place(&self) -> bool {
        self.ptr == IN_PLACE
    }

    /// The datatype and length in bytes, checked; `name` names the
    /// argument in errors.
    fn bytes(&self, name: &str) -> Result<(Datatype, usize)> {
        let datatype = datatype::lookup(self.datatype)?;
        let len = byte_len(self.count, datatype)?;
        nonnull(self.ptr, len, name)?;
        Ok((datatype, len))
    }
}

/// Per-rank counts and displacements of a v-collective, as MPI passes them.
#[derive(Debug, Clone, Copy)]
pub struct Layout<'a> {
    pub counts: Option<&'a [i32]>,
    pub displs: Option<&'a [i32]>,
}

impl Layout<'_> {
    /// (byte offset, byte length) of each rank's block, checked.
    fn blocks(&self, size: u32, datatype: Datatype, name: &str) -> Result<Vec<(usize, usize)>> {
        let (Some(counts), Some(displs)) = (self.counts, self.displs) else {
            return Err(err(
                ErrorClass::Arg,
                format!("{name}: counts or displacements are NULL"),
            ));
        };
        if counts.len() != size as usize || displs.len() != size as usize {
            return Err(err(
                ErrorClass::Arg,
                format!("{name}: {size} counts and displacements needed"),
            ));
        }
        counts
            .iter()
            .zip(displs)
            .enumerate()
            .map(|(rank, (count, displ))| {
                if *displ < 0 {
                    return Err(err(
                        ErrorClass::Arg,
                        format!("{name}: displacement {displ} of rank {rank} is negative"),
                    ));
                }
                let len = byte_len(*count as i64, datatype)?;
                Ok((*displ as usize * datatype.size, len))
            })
            .collect()
    }
}

/// The furthest byte any block reaches.
fn extent(blocks: &[(usize, usize)]) -> usize {
    blocks.iter().map(|(o, l)| o + l).max().unwrap_or(0)
}

/// A collective about to run: its communicator, name (for errors),
/// schedule, buffers and reduction.
pub(super) struct Plan {
    comm: i32,
    what: &'static str,
    schedule: Arc<Schedule>,
    buffers: Buffers,
    reduction: Option<(Op, Datatype)>,
}

fn in_place_only_at_root(name: &str) -> Error {
    err(
        ErrorClass::Arg,
        format!("TETHER_IN_PLACE is only valid as the root's {name}"),
    )
}

fn mismatch(what: &str, (sendtype, recvtype): (i32, i32), send: usize, recv: usize) -> Error {
    // Elements of two sizes: the types were mixed up, not the counts.
    if let (Ok(s), Ok(r)) = (datatype::lookup(sendtype), datatype::lookup(recvtype)) {
        if s.size != r.size {
            return err(
                ErrorClass::Type,
                format!(
                    "{what}: sendtype TETHER_{} has {}-byte elements but recvtype TETHER_{} {}-byte ones \
                     ({send} bytes sent, {recv} expected): the send and receive types must match",
                    s.name, s.size, r.name, r.size
                ),
            );
        }
    }
    err(
        ErrorClass::Count,
        format!("{what}: the send block is {send} bytes but the receive block is {recv} bytes"),
    )
}

impl Runtime {
    fn shape(&self, comm: i32) -> Result<Shape> {
        let c = self.comms.get(comm)?;
        Ok(Shape {
            rank: c.my_rank,
            size: c.size(),
        })
    }

    fn root(&self, root: i32, me: Shape) -> Result<u32> {
        u32::try_from(root)
            .ok()
            .filter(|r| *r < me.size)
            .ok_or_else(|| {
                err(
                    ErrorClass::Rank,
                    format!(
                        "root {root} is outside a communicator of {} processes",
                        me.size
                    ),
                )
            })
    }

    fn reduction(&self, datatype: i32, op: i32) -> Result<(Datatype, Op)> {
        let datatype = datatype::lookup(datatype)?;
        let op = Op::from_handle(op)?;
        op::check(op, datatype)?;
        Ok((datatype, op))
    }

    /// Starts `schedule` on `comm` and returns its request.
    fn start(
        &mut self,
        comm: i32,
        what: &'static str,
        schedule: impl Into<Arc<Schedule>>,
        buffers: Buffers,
        reduction: Option<(Op, Datatype)>,
    ) -> Result<ReqId> {
        self.start_plan(Plan {
            comm,
            what,
            schedule: schedule.into(),
            buffers,
            reduction,
        })
    }

    /// Starts `plan` as a non-blocking collective: a generalized request
    /// that progress completes.
    fn start_plan(&mut self, plan: Plan) -> Result<ReqId> {
        let (comm, what) = (plan.comm, plan.what);
        let running = self.running(plan)?;
        let req = self.engine.start_generalized();
        self.engine.set_user(req, comm_word(comm));
        if let Some(start) = self.trace_now() {
            self.trace_open(req, crate::trace::Span::new(what, start));
        }
        self.activities
            .push(Box::new(Collective::running(req, what, comm, running)));
        self.advance_activities();
        self.push_transmits();
        Ok(req)
    }

    /// Runs `plan` to its end in this call: the blocking forms of the
    /// collectives whose latency matters most (barrier, bcast, allreduce)
    /// need no request, no entry among the collectives in progress and no
    /// status, a visible share of a small collective's instructions
    /// (docs/journal/2026-11-24-collectives.md).
    fn run_plan(&mut self, plan: Plan) -> Result<()> {
        let (comm, what) = (plan.comm, plan.what);
        let started = self.trace_now();
        let mut running = self.running(plan)?;
        let outcome = self.run_to_end(&mut running);
        if let Some(start) = started {
            self.trace_push(crate::trace::Span::new(what, start));
        }
        match outcome {
            Ok(()) => {
                running.recycle(&mut self.scratch);
                Ok(())
            }
            Err(failure) => {
                let (_, error) = describe_failure(
                    &self.universe,
                    self.transport.router().peers(),
                    what,
                    comm,
                    &running,
                    &failure,
                );
                let transfers = running.orphans(&mut self.engine);
                if let Some(orphan) = Collective::orphaned(transfers, running, None) {
                    self.activities.push(Box::new(orphan));
                }
                Err(error)
            }
        }
    }

    /// The collective `plan` describes, about to run on its communicator
    /// with the communicator's next collective tag. Refuses aliased send
    /// and receive buffers first, before the tag is taken, so that a
    /// refused call leaves the communicator as it was.
    fn running(&mut self, plan: Plan) -> Result<Running> {
        check_disjoint(plan.what, &plan.buffers)?;
        let c = self.comms.get_mut(plan.comm)?;
        let channel = Channel {
            members: c.members.clone(),
            context: c.collective_context(),
            tag: c.next_collective_tag(),
        };
        Ok(Running::new(
            plan.schedule,
            channel,
            plan.buffers,
            plan.reduction,
            &mut self.scratch,
        ))
    }

    /// Advances `running` until it ends, making progress on everything
    /// else while it waits. The first round is posted before any polling:
    /// a message already in a peer's ring is then taken straight by the
    /// shortcut instead of being read into the unexpected queue first.
    ///
    /// A receive the shortcut found nothing for yet is not posted in the
    /// engine at once: like a blocking receive (`direct.rs`), the round's
    /// rings are asked again a bounded number of times, so that a message
    /// arriving a moment later is also taken straight; then the receives
    /// are posted and the wait goes through the engine.
    pub(super) fn run_to_end(&mut self, running: &mut Running) -> std::result::Result<(), Failure> {
        running.defer_receives();
        loop {
            if let Some(outcome) = self.advance_one(running) {
                return outcome;
            }
            if running.has_deferred() {
                if let Some(outcome) = self.poll_deferred(running) {
                    return outcome;
                }
                running.post_deferred(&mut self.engine);
            }
            let mut outcome = None;
            self.wait_until(|rt| {
                outcome = rt.advance_one(running);
                outcome.is_some() || running.has_deferred()
            });
            if let Some(outcome) = outcome {
                return outcome;
            }
        }
    }

    /// Asks the shortcut again for `running`'s deferred receives, up to
    /// [`Runtime::direct_polls`] times (fewer when waits yield the core); returns
    /// the outcome if the collective ended meanwhile. Nothing else
    /// progresses meanwhile, so it is skipped while activities need
    /// progress.
    fn poll_deferred(&mut self, running: &mut Running) -> Option<std::result::Result<(), Failure>> {
        if !self.activities.is_idle() {
            return None;
        }
        for _ in 0..self.direct_polls() {
            self.polling.pause();
            let outcome = self.advance_one(running);
            if outcome.is_some() || !running.has_deferred() {
                return outcome;
            }
        }
        None
    }

    /// Advances `running` as far as it goes now, handing its frames to
    /// the transports as it posts them.
    fn advance_one(&mut self, running: &mut Running) -> Option<std::result::Result<(), Failure>> {
        loop {
            let mut shortcut = RingShortcut {
                transport: self.transport.router_mut().short_path(),
            };
            let outcome = running.advance_via(&mut self.engine, &mut shortcut);
            if outcome.is_some() || !(self.engine.has_transmit() || self.engine.has_rma()) {
                return outcome;
            }
            self.push_transmits();
        }
    }

    /// The schedule `build` makes for `key` on `comm`, kept from an earlier
    /// call when there was one.
    fn cached(
        &mut self,
        comm: i32,
        key: Key,
        build: impl FnOnce() -> Schedule,
    ) -> Result<Arc<Schedule>> {
        Ok(self.comms.get_mut(comm)?.schedules.get_or_build(key, build))
    }

    /// A non-root rank's part of a gather: it sends its block to the root,
    /// along the schedule `build(me, root, block, input)` makes.
    fn send_to_root(
        &mut self,
        comm: i32,
        what: &'static str,
        me: Shape,
        root: u32,
        send: Arg,
        build: fn(Shape, u32, usize, Span) -> Schedule,
    ) -> Result<ReqId> {
        if send.in_place() {
            return Err(in_place_only_at_root("sendbuf"));
        }
        let (_, block) = send.bytes("sendbuf")?;
        let schedule = build(me, root, block, Span::whole(Buf::Send, block));
        self.start(comm, what, schedule, send_only(send.ptr, block), None)
    }

    /// A non-root rank's part of a scatter: it receives its block from the
    /// root, along the schedule `build(me, root, block, output)` makes.
    fn recv_from_root(
        &mut self,
        comm: i32,
        what: &'static str,
        me: Shape,
        root: u32,
        recv: Arg,
        build: fn(Shape, u32, usize, Option<Span>) -> Schedule,
    ) -> Result<ReqId> {
        if recv.in_place() {
            return Err(in_place_only_at_root("recvbuf"));
        }
        let (_, block) = recv.bytes("recvbuf")?;
        let schedule = build(me, root, block, Some(Span::whole(Buf::Recv, block)));
        self.start(comm, what, schedule, recv_only(recv.ptr, block), None)
    }

    /// Starts a barrier.
    pub fn ibarrier(&mut self, comm: i32) -> Result<ReqId> {
        let plan = self.plan_barrier(comm)?;
        self.start_plan(plan)
    }

    /// Blocks until every member of `comm` has entered the barrier.
    pub fn barrier(&mut self, comm: i32) -> Result<()> {
        let plan = self.plan_barrier(comm)?;
        self.run_plan(plan)
    }

    fn plan_barrier(&mut self, comm: i32) -> Result<Plan> {
        let me = self.shape(comm)?;
        let schedule = self.cached(comm, Key::Barrier, || tree::barrier(me))?;
        Ok(Plan {
            comm,
            what: "barrier",
            schedule,
            buffers: no_buffers(),
            reduction: None,
        })
    }

    /// Starts a broadcast of `buf` from `root`.
    ///
    /// # Safety
    /// Every buffer stays valid (and a send buffer unmodified) until the
    /// request completes. The same holds for every collective below.
    pub unsafe fn ibcast(&mut self, buf: Arg, root: i32, comm: i32) -> Result<ReqId> {
        let plan = self.plan_bcast(buf, root, comm)?;
        self.start_plan(plan)
    }

    /// Broadcasts `buf` from `root`, blocking.
    ///
    /// # Safety
    /// The buffer is valid during the call.
    pub unsafe fn bcast(&mut self, buf: Arg, root: i32, comm: i32) -> Result<()> {
        let plan = self.plan_bcast(buf, root, comm)?;
        self.run_plan(plan)
    }

    fn plan_bcast(&mut self, buf: Arg, root: i32, comm: i32) -> Result<Plan> {
        let me = self.shape(comm)?;
        let root = self.root(root, me)?;
        let (_, len) = buf.bytes("buffer")?;
        let schedule = self.cached(comm, Key::Bcast { root, len }, || {
            tree::bcast(me, root, len)
        })?;
        Ok(Plan {
            comm,
            what: "bcast",
            schedule,
            buffers: recv_only(buf.ptr, len),
            reduction: None,
        })
    }

    /// Starts a reduction to `root`. `send` may be in place at the root.
    ///
    /// # Safety
    /// See [`Runtime::ibcast`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn ireduce(
        &mut self,
        send: *const u8,
        recv: *mut u8,
        count: i64,
        datatype: i32,
        op: i32,
        root: i32,
        comm: i32,
    ) -> Result<ReqId> {
        let me = self.shape(comm)?;
        let root = self.root(root, me)?;
        let (datatype, op) = self.reduction(datatype, op)?;
        let is_root = me.rank == root;
        let len = byte_len(count, datatype)?;
        let in_place = send == IN_PLACE;
        if in_place && !is_root {
            return Err(in_place_only_at_root("sendbuf"));
        }
        let input = if in_place {
            Span::whole(Buf::Recv, len)
        } else {
            nonnull(send, len, "sendbuf")?;
            Span::whole(Buf::Send, len)
        };
        if is_root {
            nonnull(recv, len, "recvbuf")?;
        }
        let buffers = Buffers {
            send: if in_place { std::ptr::null() } else { send },
            send_len: if in_place { 0 } else { len },
            recv,
            recv_len: if is_root { len } else { 0 },
        };
        let schedule = tree::reduce(me, root, len, datatype.size, input);
        self.start(comm, "reduce", schedule, buffers, Some((op, datatype)))
    }

    /// Starts an allreduce. `send` may be in place.
    ///
    /// # Safety
    /// See [`Runtime::ibcast`].
    pub unsafe fn iallreduce(
        &mut self,
        send: *const u8,
        recv: *mut u8,
        count: i64,
        datatype: i32,
        op: i32,
        comm: i32,
    ) -> Result<ReqId> {
        let plan = self.plan_allreduce(send, recv, count, datatype, op, comm)?;
        self.start_plan(plan)
    }

    /// An allreduce, blocking. `send` may be in place.
    ///
    /// # Safety
    /// The buffers are valid during the call.
    pub unsafe fn allreduce(
        &mut self,
        send: *const u8,
        recv: *mut u8,
        count: i64,
        datatype: i32,
        op: i32,
        comm: i32,
    ) -> Result<()> {
        let plan = self.plan_allreduce(send, recv, count, datatype, op, comm)?;
        self.run_plan(plan)
    }

    fn plan_allreduce(
        &mut self,
        send: *const u8,
        recv: *mut u8,
        count: i64,
        datatype: i32,
        op: i32,
        comm: i32,
    ) -> Result<Plan> {
        let me = self.shape(comm)?;
        let (datatype, op) = self.reduction(datatype, op)?;
        let len = byte_len(count, datatype)?;
        nonnull(recv, len, "recvbuf")?;
        let in_place = send == IN_PLACE;
        let input = if in_place {
            Span::whole(Buf::Recv, len)
        } else {
            nonnull(send, len, "sendbuf")?;
            Span::whole(Buf::Send, len)
        };
        let buffers = Buffers {
            send: if in_place { std::ptr::null() } else { send },
            send_len: if in_place { 0 } else { len },
            recv,
            recv_len: len,
        };
        let elem = datatype.size;
        let key = Key::Allreduce { len, elem, input };
        let schedule = self.cached(comm, key, || ring::allreduce(me, len, elem, input))?;
        Ok(Plan {
            comm,
            what: "allreduce",
            schedule,
            buffers,
            reduction: Some((op, datatype)),
        })
    }

    /// Starts a reduce-scatter with `count` elements for each rank. `send`
    /// (p blocks) may be in place, in the receive buffer.
    ///
    /// # Safety
    /// See [`Runtime::ibcast`].
    pub unsafe fn ireduce_scatter_block(
        &mut self,
        send: *const u8,
        recv: *mut u8,
        count: i64,
        datatype: i32,
        op: i32,
        comm: i32,
    ) -> Result<ReqId> {
        let me = self.shape(comm)?;
        let (datatype, op) = self.reduction(datatype, op)?;
        let whole = count.checked_mul(me.size as i64).ok_or_else(|| {
            err(
                ErrorClass::Count,
                format!("count {count} times {} processes overflows", me.size),
            )
        })?;
        let block = byte_len(count, datatype)?;
        let len = byte_len(whole, datatype)?;
        let in_place = send == IN_PLACE;
        let (input, recv_len) = if in_place {
            (Span::whole(Buf::Recv, len), len)
        } else {
            nonnull(send, len, "sendbuf")?;
            (Span::whole(Buf::Send, len), block)
        };
        nonnull(recv, recv_len, "recvbuf")?;
        let buffers = Buffers {
            send: if in_place { std::ptr::null() } else { send },
            send_len: if in_place { 0 } else { len },
            recv,
            recv_len,
        };
        let schedule = ring::reduce_scatter_block(me, block, datatype.size, input);
        self.start(
            comm,
            "reduce_scatter_block",
            schedule,
            buffers,
            Some((op, datatype)),
        )
    }

    /// Starts a gather to `root`. `send` may be in place at the root.
    ///
    /// # Safety
    /// See [`Runtime::ibcast`].
    pub unsafe fn igather(&mut self, send: Arg, recv: Arg, root: i32, comm: i32) -> Result<ReqId> {
        let me = self.shape(comm)?;
        let root = self.root(root, me)?;
        if me.rank != root {
            return self.send_to_root(comm, "gather", me, root, send, tree::gather);
        }
        let (_, block) = recv.bytes("recvbuf")?;
        let len = total(block, me.size)?;
        let input = if send.in_place() {
            Span::new(Buf::Recv, root as usize * block, block)
        } else {
            let (_, sent) = send.bytes("sendbuf")?;
            if sent != block {
                return Err(mismatch(
                    "gather",
                    (send.datatype, recv.datatype),
                    sent,
                    block,
                ));
            }
            Span::whole(Buf::Send, block)
        };
        let buffers = both(send, block, recv, len);
        self.start(
            comm,
            "gather",
            tree::gather(me, root, block, input),
            buffers,
            None,
        )
    }

    /// Starts a gather of blocks of different sizes to `root`.
    ///
    /// # Safety
    /// See [`Runtime::ibcast`].
    pub unsafe fn igatherv(
        &mut self,
        send: Arg,
        recv: *mut u8,
        layout: Layout,
        recvtype: i32,
        root: i32,
        comm: i32,
    ) -> Result<ReqId> {
        let me = self.shape(comm)?;
        let root = self.root(root, me)?;
        if me.rank != root {
            let build = |me, root, _, input| pairwise::gatherv(me, root, &[], input);
            return self.send_to_root(comm, "gatherv", me, root, send, build);
        }
        let blocks = layout.blocks(me.size, datatype::lookup(recvtype)?, "gatherv")?;
        let len = extent(&blocks);
        nonnull(recv, len, "recvbuf")?;
        let mine = blocks[root as usize];
        let input = if send.in_place() {
            Span::new(Buf::Recv, mine.0, mine.1)
        } else {
            let (_, sent) = send.bytes("sendbuf")?;
            if sent != mine.1 {
                return Err(mismatch("gatherv", (send.datatype, recvtype), sent, mine.1));
            }
            Span::whole(Buf::Send, sent)
        };
        let buffers = both(send, mine.1, Arg::new(recv, 0, 0), len);
        let schedule = pairwise::gatherv(me, root, &blocks, input);
        self.start(comm, "gatherv", schedule, buffers, None)
    }

    /// Starts a scatter from `root`. `recv` may be in place at the root.
    ///
    /// # Safety
    /// See [`Runtime::ibcast`].
    pub unsafe fn iscatter(&mut self, send: Arg, recv: Arg, root: i32, comm: i32) -> Result<ReqId> {
        let me = self.shape(comm)?;
        let root = self.root(root, me)?;
        if me.rank != root {
            return self.recv_from_root(comm, "scatter", me, root, recv, tree::scatter);
        }
        let (_, block) = send.bytes("sendbuf")?;
        let len = total(block, me.size)?;
        nonnull(send.ptr, len, "sendbuf")?;
        let output = if recv.in_place() {
            None
        } else {
            let (_, got) = recv.bytes("recvbuf")?;
            if got != block {
                return Err(mismatch(
                    "scatter",
                    (send.datatype, recv.datatype),
                    block,
                    got,
                ));
            }
            Some(Span::whole(Buf::Recv, block))
        };
        let buffers = both(send, len, recv, if recv.in_place() { 0 } else { block });
        self.start(
            comm,
            "scatter",
            tree::scatter(me, root, block, output),
            buffers,
            None,
        )
    }

    /// Starts a scatter of blocks of different sizes from `root`.
    ///
    /// # Safety
    /// See [`Runtime::ibcast`].
    pub unsafe fn iscatterv(
        &mut self,
        send: *const u8,
        layout: Layout,
        sendtype: i32,
        recv: Arg,
        root: i32,
        comm: i32,
    ) -> Result<ReqId> {
        let me = self.shape(comm)?;
        let root = self.root(root, me)?;
        if me.rank != root {
            let build = |me, root, _, output| pairwise::scatterv(me, root, &[], output);
            return self.recv_from_root(comm, "scatterv", me, root, recv, build);
        }
        let blocks = layout.blocks(me.size, datatype::lookup(sendtype)?, "scatterv")?;
        let len = extent(&blocks);
        nonnull(send, len, "sendbuf")?;
        let mine = blocks[root as usize].1;
        let output = if recv.in_place() {
            None
        } else {
            let (_, got) = recv.bytes("recvbuf")?;
            if got != mine {
                return Err(mismatch("scatterv", (sendtype, recv.datatype), mine, got));
            }
            Some(Span::whole(Buf::Recv, mine))
        };
        let send = Arg::new(send, 0, 0);
        let buffers = both(send, len, recv, if recv.in_place() { 0 } else { mine });
        let schedule = pairwise::scatterv(me, root, &blocks, output);
        self.start(comm, "scatterv", schedule, buffers, None)
    }

    /// Starts an allgather. `send` may be in place.
    ///
    /// # Safety
    /// See [`Runtime::ibcast`].
    pub unsafe fn iallgather(&mut self, send: Arg, recv: Arg, comm: i32) -> Result<ReqId> {
        let me = self.shape(comm)?;
        let (_, block) = recv.bytes("recvbuf")?;
        let len = total(block, me.size)?;
        nonnull(recv.ptr, len, "recvbuf")?;
        let input = if send.in_place() {
            Span::new(Buf::Recv, me.rank as usize * block, block)
        } else {
            let (_, sent) = send.bytes("sendbuf")?;
            if sent != block {
                return Err(mismatch(
                    "allgather",
                    (send.datatype, recv.datatype),
                    sent,
                    block,
                ));
            }
            Span::whole(Buf::Send, block)
        };
        let buffers = both(send, block, recv, len);
        self.start(
            comm,
            "allgather",
            ring::allgather(me, block, input),
            buffers,
            None,
        )
    }

    /// Starts an allgather of blocks of different sizes.
    ///
    /// # Safety
    /// See [`Runtime::ibcast`].
    pub unsafe fn iallgatherv(
        &mut self,
        send: Arg,
        recv: *mut u8,
        layout: Layout,
        recvtype: i32,
        comm: i32,
    ) -> Result<ReqId> {
        let me = self.shape(comm)?;
        let blocks = layout.blocks(me.size, datatype::lookup(recvtype)?, "allgatherv")?;
        let len = extent(&blocks);
        nonnull(recv, len, "recvbuf")?;
        let mine = blocks[me.rank as usize];
        let input = if send.in_place() {
            Span::new(Buf::Recv, mine.0, mine.1)
        } else {
            let (_, sent) = send.bytes("sendbuf")?;
            if sent != mine.1 {
                return Err(mismatch(
                    "allgatherv",
                    (send.datatype, recvtype),
                    sent,
                    mine.1,
                ));
            }
            Span::whole(Buf::Send, sent)
        };
        let buffers = both(send, mine.1, Arg::new(recv, 0, 0), len);
        let schedule = ring::allgatherv(me, &blocks, input);
        self.start(comm, "allgatherv", schedule, buffers, None)
    }

    /// Starts an all-to-all. `send` may be in place.
    ///
    /// # Safety
    /// See [`Runtime::ibcast`].
    pub unsafe fn ialltoall(&mut self, send: Arg, recv: Arg, comm: i32) -> Result<ReqId> {
        let me = self.shape(comm)?;
        let (_, block) = recv.bytes("recvbuf")?;
        let len = total(block, me.size)?;
        nonnull(recv.ptr, len, "recvbuf")?;
        let blocks = crate::coll::uniform(me.size, block);
        let send_blocks = if send.in_place() {
            None
        } else {
            let (_, sent) = send.bytes("sendbuf")?;
            if sent != block {
                return Err(mismatch(
                    "alltoall",
                    (send.datatype, recv.datatype),
                    sent,
                    block,
                ));
            }
            nonnull(send.ptr, len, "sendbuf")?;
            Some(blocks.as_slice())
        };
        let buffers = both(send, len, recv, len);
        let schedule = pairwise::alltoallv(me, send_blocks, &blocks);
        self.start(comm, "alltoall", schedule, buffers, None)
    }

    /// Starts an all-to-all with blocks of different sizes.
    ///
    /// # Safety
    /// See [`Runtime::ibcast`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn ialltoallv(
        &mut self,
        send: *const u8,
        send_layout: Layout,
        sendtype: i32,
        recv: *mut u8,
        recv_layout: Layout,
        recvtype: i32,
        comm: i32,
    ) -> Result<ReqId> {
        let me = self.shape(comm)?;
        let recv_blocks = recv_layout.blocks(me.size, datatype::lookup(recvtype)?, "alltoallv")?;
        let recv_len = extent(&recv_blocks);
        nonnull(recv, recv_len, "recvbuf")?;
        let in_place = send == IN_PLACE;
        let (send_blocks, send_len) = if in_place {
            (None, 0)
        } else {
            let blocks = send_layout.blocks(me.size, datatype::lookup(sendtype)?, "alltoallv")?;
            let len = extent(&blocks);
            nonnull(send, len, "sendbuf")?;
            // The block to itself is copied locally, as long as it is sent.
            let (sent, kept) = (blocks[me.rank as usize].1, recv_blocks[me.rank as usize].1);
            if sent != kept {
                return Err(mismatch(
                    "alltoallv (the block to itself)",
                    (sendtype, recvtype),
                    sent,
                    kept,
                ));
            }
            (Some(blocks), len)
        };
        let buffers = Buffers {
            send,
            send_len,
            recv,
            recv_len,
        };
        let schedule = pairwise::alltoallv(me, send_blocks.as_deref(), &recv_blocks);
        self.start(comm, "alltoallv", schedule, buffers, None)
    }
}

/// A buffer of `len` bytes must have an address.
fn nonnull(ptr: *const u8, len: usize, name: &str) -> Result<()> {
    if ptr.is_null() && len > 0 {
        return Err(err(
            ErrorClass::Arg,
            format!("{name} is NULL but holds {len} bytes"),
        ));
    }
    Ok(())
}

fn total(block: usize, size: u32) -> Result<usize> {
    block
        .checked_mul(size as usize)
        .filter(|b| *b <= isize::MAX as usize)
        .ok_or_else(|| {
            err(
                ErrorClass::Count,
                format!("{block} bytes for each of {size} processes overflow the address space"),
            )
        })
}

fn no_buffers() -> Buffers {
    Buffers {
        send: std::ptr::null(),
        send_len: 0,
        recv: std::ptr::null_mut(),
        recv_len: 0,
    }
}

fn send_only(send: *const u8, len: usize) -> Buffers {
    Buffers {
        send,
        send_len: len,
        ..no_buffers()
    }
}

fn recv_only(recv: *const u8, len: usize) -> Buffers {
    Buffers {
        recv: recv.cast_mut(),
        recv_len: len,
        ..no_buffers()
    }
}

/// Buffers of a collective whose send argument may be in place (then it
/// has no send buffer).
fn both(send: Arg, send_len: usize, recv: Arg, recv_len: usize) -> Buffers {
    Buffers {
        send: if send.in_place() {
            std::ptr::null()
        } else {
            send.ptr
        },
        send_len: if send.in_place() { 0 } else { send_len },
        recv: if recv.in_place() {
            std::ptr::null_mut()
        } else {
            recv.ptr.cast_mut()
        },
        recv_len: if recv.in_place() { 0 } else { recv_len },
    }
}

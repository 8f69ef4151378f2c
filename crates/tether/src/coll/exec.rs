//! Runs a [`Schedule`] on the point-to-point engine, one round at a time,
//! whenever the runtime makes progress. Free of I/O: it posts requests on
//! the engine and the runtime moves their frames.

use std::sync::Arc;

use tether_proto::pool::BufferPool;
use tether_proto::{CompletionError, Engine, Region, ReqId};

use super::schedule::{Buf, Local, Schedule, Span, Transfer};
use crate::datatype::Datatype;
use crate::op::{self, Op};

/// Where a running collective sends and receives: the communicator's
/// members (universe ranks, by rank), the collective context and the tag
/// that tells this operation from the others on the same communicator.
#[derive(Debug, Clone)]
pub struct Channel {
    pub members: Arc<[u32]>,
    pub context: u32,
    pub tag: i32,
}

/// The caller's buffers. The send buffer is only read.
#[derive(Debug, Clone, Copy)]
pub struct Buffers {
    pub send: *const u8,
    pub send_len: usize,
    pub recv: *mut u8,
    pub recv_len: usize,
}

/// Why a collective failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// A transfer with communicator rank `rank` failed.
    Transfer { rank: u32, error: CompletionError },
    /// Rank `rank` sent `got` bytes where `expected` were due: the ranks
    /// passed different counts.
    ShortMessage { rank: u32, got: u64, expected: u64 },
}

/// How a transfer may move without becoming an engine request, for a
/// transport that can write to or read from a peer at once (shared
/// memory). Both may decline (`false`/`None`), and the transfer then goes
/// through the engine.
///
/// Contract: `send` hands over a whole message with envelope (`context`,
/// `tag`) to universe rank `dest` and returns true only if nothing queued
/// for that peer (in the engine or the transport) goes before it; `recv`
/// fills `region` with the next message from `source` and returns its
/// size only if the engine could not have matched it differently (no
/// earlier message matches the receive, no posted receive takes the
/// message), the message fits, and it is the peer's next frame.
pub trait Shortcut {
    fn send(&mut self, engine: &Engine, dest: u32, context: u32, tag: i32, region: Region) -> bool;
    fn recv(
        &mut self,
        engine: &Engine,
        source: u32,
        context: u32,
        tag: i32,
        region: Region,
    ) -> Received;
}

/// What a [`Shortcut`] did with a receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// The message was taken into the region: this many bytes.
    Taken(u64),
    /// Nothing from the source yet; asking again may take it.
    NotYet,
    /// The receive must go through the engine (a matching message is
    /// already there, or something else comes first from that peer).
    Engine,
}

/// The shortcut that always declines: every transfer through the engine.
pub struct NoShortcut;

impl Shortcut for NoShortcut {
    fn send(&mut self, _: &Engine, _: u32, _: u32, _: i32, _: Region) -> bool {
        false
    }

    fn recv(&mut self, _: &Engine, _: u32, _: u32, _: i32, _: Region) -> Received {
        Received::Engine
    }
}

/// A receive of the current round that the shortcut found nothing for
/// yet and that is not posted in the engine: asked again on each pass
/// (`Running::advance_via`) until taken, or posted by
/// `Running::post_deferred` before the runtime waits in the engine.
#[derive(Debug)]
struct Deferred {
    from: u32,
    source: u32,
    span: Span,
    region: Region,
}

/// A collective in progress.
#[derive(Debug)]
pub struct Running {
    schedule: Arc<Schedule>,
    channel: Channel,
    buffers: Buffers,
    reduction: Option<(Op, Datatype)>,
    temps: Vec<Vec<u8>>,
    /// The round whose transfers are posted (or are posted next).
    round: usize,
    in_flight: bool,
    /// Posted requests of the current round, with the span each receive
    /// must fill.
    pending: Vec<(ReqId, u32, Option<Span>)>,
    /// A short message the shortcut received in the current round,
    /// reported once the round's requests are all complete (as one that
    /// came through the engine), so that nothing of the round still uses
    /// the caller's buffers when the collective fails.
    short: Option<Failure>,
    /// Receives of the current round waiting for the shortcut, in the
    /// schedule's order.
    deferred: Vec<Deferred>,
    /// Whether receives may be deferred ([`Running::defer_receives`]).
    deferring: bool,
}

// SAFETY: the raw pointers are the caller's buffers, which the API contract
// keeps valid until the collective completes; the runtime that owns a
// `Running` is used by one thread at a time.
unsafe impl Send for Running {}

/// Scratch buffers of finished collectives, kept for the next ones. Their
/// contents are unspecified when taken: a schedule writes its scratch (a
/// receive or a copy) before it reads it.
#[derive(Debug)]
pub struct ScratchPool {
    buffers: BufferPool,
    /// The bookkeeping vectors of the last finished collective, empty, for
    /// the next one: a small blocking collective then allocates nothing.
    temps: Vec<Vec<u8>>,
    pending: Vec<(ReqId, u32, Option<Span>)>,
    deferred: Vec<Deferred>,
}

impl Default for ScratchPool {
    fn default() -> Self {
        ScratchPool {
            buffers: BufferPool::new(16, 256 * 1024),
            temps: Vec::new(),
            pending: Vec::new(),
            deferred: Vec::new(),
        }
    }
}

impl ScratchPool {
    /// A buffer of `len` bytes (contents unspecified).
    pub fn take(&mut self, len: usize) -> Vec<u8> {
        self.buffers.take(len)
    }

    /// Keeps `buffers` for later (within the pool's bounds).
    pub fn give(&mut self, buffers: impl IntoIterator<Item = Vec<u8>>) {
        for buf in buffers {
            self.buffers.give(buf);
        }
    }
}

impl Running {
    /// A collective about to run `schedule`, with scratch buffers from `pool`.
    pub fn new(
        schedule: Arc<Schedule>,
        channel: Channel,
        buffers: Buffers,
        reduction: Option<(Op, Datatype)>,
        pool: &mut ScratchPool,
    ) -> Running {
        let mut temps = std::mem::take(&mut pool.temps);
        temps.extend(schedule.temps.iter().map(|len| pool.take(*len)));
        Running {
            schedule,
            channel,
            buffers,
            reduction,
            temps,
            round: 0,
            in_flight: false,
            pending: std::mem::take(&mut pool.pending),
            short: None,
            deferred: std::mem::take(&mut pool.deferred),
            deferring: false,
        }
    }

    /// Lets receives the shortcut finds nothing for yet wait, unposted,
    /// for the caller to ask again ([`Running::has_deferred`]); only a
    /// caller that does so, and then [`Running::post_deferred`], turns it
    /// on. Otherwise such receives are posted in the engine at once.
    pub fn defer_receives(&mut self) {
        self.deferring = true;
    }

    /// Whether receives of the current round wait for the shortcut, not
    /// posted in the engine: then only asking the shortcut again
    /// (another [`Running::advance_via`]) moves them, until
    /// [`Running::post_deferred`].
    pub fn has_deferred(&self) -> bool {
        !self.deferred.is_empty()
    }

    /// Posts every receive still waiting for the shortcut in the engine,
    /// in the schedule's order: for a runtime about to wait in the engine,
    /// where the messages are matched on arrival.
    pub fn post_deferred(&mut self, engine: &mut Engine) {
        for d in std::mem::take(&mut self.deferred) {
            self.post_recv(engine, d);
        }
    }

    /// Posts receive `d` in the engine, among the round's requests.
    fn post_recv(&mut self, engine: &mut Engine, d: Deferred) {
        let (context, tag) = (self.channel.context, self.channel.tag);
        let req = engine.irecv(Some(d.source), context, Some(tag), d.region);
        self.pending.push((req, d.from, Some(d.span)));
    }

    /// Gives the scratch buffers and the bookkeeping vectors back to
    /// `pool`, once the collective completed.
    pub fn recycle(mut self, pool: &mut ScratchPool) {
        pool.give(self.temps.drain(..));
        self.pending.clear();
        self.deferred.clear();
        pool.temps = self.temps;
        pool.pending = self.pending;
        pool.deferred = self.deferred;
    }

    /// Where this collective sends and receives.
    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    /// Moves the collective as far as completed transfers allow. Returns
    /// `None` while it runs, then its outcome once. After a failure the
    /// requests still pending are left in [`Running::orphans`].
    pub fn advance(&mut self, engine: &mut Engine) -> Option<Result<(), Failure>> {
        self.advance_via(engine, &mut NoShortcut)
    }

    /// [`Running::advance`], moving the transfers that `shortcut` takes
    /// without engine requests.
    pub fn advance_via(
        &mut self,
        engine: &mut Engine,
        shortcut: &mut dyn Shortcut,
    ) -> Option<Result<(), Failure>> {
        loop {
            if !self.in_flight {
                if self.round == self.schedule.rounds.len() {
                    return Some(Ok(()));
                }
                self.post(engine, shortcut);
            } else if !self.deferred.is_empty() {
                self.retry_deferred(engine, shortcut);
            }
            // One look at each request of the round (this runs on every
            // poll of a wait): a failed one ends the collective, a pending
            // one ends this pass.
            let mut all_done = self.deferred.is_empty();
            for (i, (req, _, _)) in self.pending.iter().enumerate() {
                match engine.completion(*req) {
                    None => all_done = false,
                    Some(c) if c.error.is_some() => return Some(Err(self.failed(i, engine))),
                    Some(_) => {}
                }
            }
            if !all_done {
                return None;
            }
            // Every request is freed, even after a short message.
            let mut short = self.short.take();
            for (req, rank, expect) in self.pending.drain(..) {
                let done = engine.take_completion(req).expect("checked complete");
                match expect {
                    Some(span) if done.bytes < span.len as u64 && short.is_none() => {
                        short = Some(Failure::ShortMessage {
                            rank,
                            got: done.bytes,
                            expected: span.len as u64,
                        });
                    }
                    _ => {}
                }
            }
            if let Some(failure) = short {
                return Some(Err(failure));
            }
            let schedule = Arc::clone(&self.schedule);
            for local in &schedule.rounds[self.round].locals {
                self.run_local(local);
            }
            self.round += 1;
            self.in_flight = false;
        }
    }

    /// Requests still posted after a failure; receives among them are
    /// cancelled. The runtime keeps this collective (and so its scratch
    /// buffers) until they complete.
    pub fn orphans(&mut self, engine: &mut Engine) -> Vec<ReqId> {
        self.pending
            .iter()
            .map(|(req, _, _)| {
                engine.cancel(*req);
                *req
            })
            .collect()
    }

    /// The failure of the request at `index` of `pending`, which failed;
    /// frees it.
    fn failed(&mut self, index: usize, engine: &mut Engine) -> Failure {
        let (req, rank, _) = self.pending.remove(index);
        let error = engine
            .take_completion(req)
            .and_then(|c| c.error)
            .expect("checked failed");
        Failure::Transfer { rank, error }
    }

    /// Posts the current round's transfers; those `shortcut` moves at
    /// once need no request. A message the shortcut received that is
    /// shorter than its span fails the collective once the round's
    /// requests are complete, as one through the engine does.
    fn post(&mut self, engine: &mut Engine, shortcut: &mut dyn Shortcut) {
        let schedule = Arc::clone(&self.schedule);
        let (context, tag) = (self.channel.context, self.channel.tag);
        for transfer in &schedule.rounds[self.round].transfers {
            let (req, rank, expect) = match *transfer {
                Transfer::Send { to, span } => {
                    let (ptr, len) = self.resolve(span, false);
                    let region = Region::from_const(ptr, len);
                    let dest = self.channel.members[to as usize];
                    if shortcut.send(engine, dest, context, tag, region) {
                        continue;
                    }
                    (engine.isend(dest, context, tag, region), to, None)
                }
                Transfer::Recv { from, span } => {
                    let (ptr, len) = self.resolve(span, true);
                    let region = Region { ptr, len };
                    let source = self.channel.members[from as usize];
                    let deferred = Deferred {
                        from,
                        source,
                        span,
                        region,
                    };
                    match shortcut.recv(engine, source, context, tag, region) {
                        Received::Taken(got) => {
                            self.note_short(from, got, span);
                            continue;
                        }
                        // Deferring a receive lets a later one from the
                        // same source take its message: only the one
                        // receive of the round from that source waits.
                        Received::NotYet
                            if self.deferring
                                && schedule.rounds[self.round].receives_from(from) == 1 =>
                        {
                            self.deferred.push(deferred);
                            continue;
                        }
                        Received::NotYet | Received::Engine => {
                            let req = engine.irecv(Some(source), context, Some(tag), region);
                            (req, from, Some(span))
                        }
                    }
                }
            };
            self.pending.push((req, rank, expect));
        }
        self.in_flight = true;
    }

    /// Asks the shortcut again for each deferred receive; posts in the
    /// engine those it says must go there.
    fn retry_deferred(&mut self, engine: &mut Engine, shortcut: &mut dyn Shortcut) {
        let (context, tag) = (self.channel.context, self.channel.tag);
        let mut i = 0;
        while i < self.deferred.len() {
            let d = &self.deferred[i];
            match shortcut.recv(engine, d.source, context, tag, d.region) {
                Received::NotYet => i += 1,
                Received::Taken(got) => {
                    let d = self.deferred.remove(i);
                    self.note_short(d.from, got, d.span);
                }
                Received::Engine => {
                    let d = self.deferred.remove(i);
                    self.post_recv(engine, d);
                }
            }
        }
    }

    /// Keeps the first short message the shortcut took this round, to
    /// fail the collective with once the round is complete.
    fn note_short(&mut self, from: u32, got: u64, span: Span) {
        if got < span.len as u64 && self.short.is_none() {
            self.short = Some(Failure::ShortMessage {
                rank: from,
                got,
                expected: span.len as u64,
            });
        }
    }

    /// The address and length of `span`, checked against its buffer.
    ///
    /// The asserts here and in `run_local` guard the schedule builders'
    /// invariants, not the caller's arguments: the runtime checks those
    /// before a collective starts (lengths against counts, blocks of equal
    /// size where data is copied, send and receive buffers disjoint in
    /// `runtime/aliasing.rs`), so a failure is a bug in Tether, and the
    /// C boundary reports it as one.
    fn resolve(&mut self, span: Span, write: bool) -> (*mut u8, usize) {
        let (base, len) = match span.buf {
            Buf::Send => {
                assert!(!write, "a schedule writes the send buffer");
                (self.buffers.send.cast_mut(), self.buffers.send_len)
            }
            Buf::Recv => (self.buffers.recv, self.buffers.recv_len),
            Buf::Temp(i) => (self.temps[i].as_mut_ptr(), self.temps[i].len()),
        };
        assert!(
            span.offset
                .checked_add(span.len)
                .is_some_and(|end| end <= len),
            "span {span:?} outside a buffer of {len} bytes"
        );
        if span.len == 0 {
            return (std::ptr::NonNull::dangling().as_ptr(), 0);
        }
        // SAFETY: offset + len lies inside the buffer, checked above.
        (unsafe { base.add(span.offset) }, span.len)
    }

    fn run_local(&mut self, local: &Local) {
        match *local {
            Local::Copy { from, to } => {
                let (src, len) = self.resolve(from, false);
                let (dst, room) = self.resolve(to, true);
                // A longer source would write past `to`'s end.
                assert_eq!(len, room, "a copy between spans of different lengths");
                // SAFETY: both spans were checked against their buffers and
                // are `len` bytes long; the copy tolerates overlap.
                unsafe { std::ptr::copy(src, dst, len) };
            }
            Local::Reduce { from, into } => {
                let (op, datatype) = self
                    .reduction
                    .expect("a reducing schedule has an operation");
                let (src, len) = self.resolve(from, false);
                let (dst, room) = self.resolve(into, true);
                assert_eq!(len, room, "a reduction between spans of different lengths");
                let overlap =
                    (src as usize) < dst as usize + len && (dst as usize) < src as usize + len;
                assert!(!overlap, "reduction operands overlap");
                // SAFETY: disjoint, checked spans of `len` bytes.
                let (from, into) = unsafe {
                    (
                        std::slice::from_raw_parts(src, len),
                        std::slice::from_raw_parts_mut(dst, len),
                    )
                };
                op::combine(op, datatype, from, into);
            }
        }
    }
}

//! The short path of blocking point-to-point calls: a small message to or
//! from a peer over shared memory moves between the user's buffer and the
//! ring without becoming an engine request.
//!
//! The engine's path (a request in the slab, a frame in the outbox, the
//! transport's queues, a full progress round that polls every transport,
//! the completion and its status) costs several times the instructions of
//! the whole call (counts: docs/journal/2026-11-24-design-measurements.md);
//! the short path skips all of it and keeps MPI's semantics by taking it
//! only when the engine could not have done anything different:
//!
//! - **send**: the message is eager for its peer, the peer's route is
//!   shared memory, and the ring takes the whole frame now with nothing
//!   queued before it. The frame is the one the engine would have made
//!   (no request handle: an eager receiver never uses it), written in the
//!   same order, so the receiver cannot tell the difference.
//! - **receive**: the source is a named peer whose frames arrive through
//!   shared memory, no message that arrived earlier matches (the engine's
//!   unexpected queue), no receive posted earlier could take a message
//!   this one accepts (MPI's order: the oldest matching receive takes a
//!   message; with `TETHER_ANY_TAG` any earlier receive from the peer
//!   counts), and the next frame in the peer's ring is an eager message
//!   that fits the buffer and that the receive accepts. Anything else (a
//!   rendezvous announcement, a frame for another receive, a truncating
//!   message) is left in the ring and the receive goes the engine's way.
//!
//! While an activity needs progress (a non-blocking collective runs, or a
//! failed one's transfers are in flight: `Activities::is_idle`), both take
//! the engine's path: its progress rounds advance the activity.
//!
//! Waiting: a receive whose message has not arrived polls that one ring a
//! bounded number of times ([`DIRECT_POLLS`], fewer when waits yield the
//! core), then posts the receive in the engine and waits there, which
//! progresses everything else (other peers, TCP, liveness) and may sleep.
//!
//! Collectives use the same two moves for the transfers of their rounds
//! ([`RingShortcut`], the executor's [`Shortcut`]), without the polling: a
//! transfer that cannot move at once becomes an engine request.

use crate::coll::{Received, Shortcut};
use crate::error::Result;
use crate::progress::Polling;
use crate::router::{Direct, ShortPath, Wanted};
use crate::{Runtime, Status};
use tether_proto::{Engine, Region, SendPath};

use crate::trace::Span;

/// How many times a blocking receive polls its peer's ring before it
/// waits in the engine: many times a shared-memory round trip (an empty
/// poll is a few dozen instructions and a pause hint), and few enough
/// that other peers, which only the full progress round serves, wait
/// little for it.
pub const DIRECT_POLLS: u32 = 1024;
/// The same when waits give the core away between polls (more processes
/// than CPUs): each poll then costs a `sched_yield`.
pub const DIRECT_POLLS_YIELDING: u32 = 16;

/// A message the short path of a receive took: its tag and size (its
/// source is the receive's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    pub tag: i32,
    pub bytes: u64,
}

impl Runtime {
    /// Sends `len` bytes at `buf` to rank `dest` of `comm` and waits until
    /// the buffer may be reused (a blocking send).
    ///
    /// # Safety
    /// `buf..buf+len` must be valid for reads during the call.
    pub unsafe fn send(
        &mut self,
        buf: *const u8,
        len: usize,
        dest: i32,
        tag: i32,
        comm: i32,
    ) -> Result<Status> {
        if self.send_direct(buf, len, dest, tag, comm)? {
            return Ok(Status {
                source: self.comms.get(comm)?.my_rank as i32,
                tag,
                bytes: len as u64,
                error: None,
            });
        }
        let req = self.isend(buf, len, dest, tag, comm)?;
        self.wait(req)
    }

    /// Receives at most `len` bytes into `buf` (a blocking receive).
    ///
    /// # Safety
    /// `buf..buf+len` must be valid for writes during the call.
    pub unsafe fn recv(
        &mut self,
        buf: *mut u8,
        len: usize,
        source: i32,
        tag: i32,
        comm: i32,
    ) -> Result<Status> {
        if let Some(arrival) = self.recv_direct(buf, len, source, tag, comm)? {
            return Ok(Status {
                source,
                tag: arrival.tag,
                bytes: arrival.bytes,
                error: None,
            });
        }
        let req = self.irecv(buf, len, source, tag, comm)?;
        self.wait(req)
    }

    /// The short path of a send (see the module documentation): `true`
    /// when the message was handed over and the send is complete, `false`
    /// when the caller must take the engine's path (nothing was sent).
    /// Arguments are checked as [`Runtime::isend`] checks them.
    ///
    /// # Safety
    /// `buf..buf+len` must be valid for reads during the call.
    pub unsafe fn send_direct(
        &mut self,
        buf: *const u8,
        len: usize,
        dest: i32,
        tag: i32,
        comm: i32,
    ) -> Result<bool> {
        let (peer, context, tag) = self.destination(dest, tag, comm)?;
        if !self.activities.is_idle() || peer == self.me {
            return Ok(false);
        }
        let started = self.trace_now();
        let sent = send_now(
            &mut self.transport.router_mut().short_path(),
            &self.engine,
            peer,
            context,
            tag,
            Region::from_const(buf, len),
        );
        if sent {
            self.note_peer(peer);
            self.engine
                .counters_mut()
                .sent(peer, len as u64, SendPath::Eager);
            if let Some(start) = started {
                let mut span = Span::new("send", start);
                (span.peer, span.context, span.tag, span.bytes) =
                    (Some(peer), context, tag, len as u64);
                span.ordinal = self.engine.ordinal_outside(peer, context, tag, true);
                self.trace_push(span);
            }
        }
        Ok(sent)
    }

    /// How many times the short path polls a ring before it waits in
    /// the engine, as waits poll now.
    pub(super) fn direct_polls(&self) -> u32 {
        match self.polling {
            Polling::Spin => DIRECT_POLLS,
            Polling::Yield => DIRECT_POLLS_YIELDING,
        }
    }

    /// The short path of a receive (see the module documentation): `Some`
    /// when a message was received into `buf`, `None` when the caller
    /// must take the engine's path (nothing was received). Polls the
    /// peer's ring a bounded number of times while it is empty.
    ///
    /// # Safety
    /// `buf..buf+len` must be valid for writes during the call.
    pub unsafe fn recv_direct(
        &mut self,
        buf: *mut u8,
        len: usize,
        source: i32,
        tag: i32,
        comm: i32,
    ) -> Result<Option<Arrival>> {
        let (source_peer, context, tag) = self.selector(source, tag, comm)?;
        let Some(peer) = source_peer else {
            return Ok(None);
        };
        if !self.activities.is_idle()
            || peer == self.me
            || self.engine.iprobe(Some(peer), context, tag).is_some()
        {
            return Ok(None);
        }
        self.note_peer(peer);
        let started = self.trace_now();
        let polls = self.direct_polls();
        let polling = self.polling;
        // Nothing reaches the engine while the transport polls, so the
        // check of the unexpected queue above holds for every poll.
        match take_next(
            &mut self.transport.router_mut().short_path(),
            &self.engine,
            (peer, context, tag),
            Region { ptr: buf, len },
            polls,
            || polling.pause(),
        ) {
            Direct::Taken { tag, bytes } => {
                self.engine.counters_mut().received(peer, bytes);
                if let Some(start) = started {
                    let mut span = Span::new("recv", start);
                    (span.peer, span.context, span.tag, span.bytes) =
                        (Some(peer), context, tag, bytes);
                    span.ordinal = self.engine.ordinal_outside(peer, context, tag, false);
                    self.trace_push(span);
                }
                Ok(Some(Arrival { tag, bytes }))
            }
            Direct::Other | Direct::Empty => Ok(None),
        }
    }
}

/// Writes an eager message to `peer` straight into its ring, if the
/// engine allows (within the peer's eager limit, the peer not lost,
/// nothing of the engine's queued before it) and the transport can (see
/// [`ShortPath::send_eager`]).
#[inline(always)]
fn send_now(
    transport: &mut ShortPath<'_>,
    engine: &Engine,
    peer: u32,
    context: u32,
    tag: i32,
    payload: Region,
) -> bool {
    if engine.has_transmit()
        || payload.len as u64 > engine.eager_limit(peer)
        || engine.is_lost(peer)
    {
        return false;
    }
    transport.send_eager(peer, context, tag, payload)
}

/// Takes the next frame from `peer` into `region` if it is an eager
/// message that a receive of (`context`, `tag`) accepts, polling up to
/// `polls` times while none is there; `Other` at once when a receive
/// posted earlier could take such a message. The caller has checked that
/// no message already here matches the receive (`Engine::iprobe`), and
/// nothing has reached the engine since.
#[inline(always)]
fn take_next(
    transport: &mut ShortPath<'_>,
    engine: &Engine,
    (peer, context, tag): (u32, u32, Option<i32>),
    region: Region,
    polls: u32,
    pause: impl FnMut(),
) -> Direct {
    // Nothing reaches the engine while the transport polls, so a receive
    // posted earlier that could take the message has it first.
    if engine.has_posted_overlapping(peer, context, tag) {
        return Direct::Other;
    }
    transport.take_eager(peer, region, polls, pause, Wanted { context, tag })
}

/// The short path for the transfers of a collective ([`Shortcut`]): its
/// sends written straight into the peers' rings, its receives taken
/// straight from them when the message is already there.
pub(super) struct RingShortcut<'a> {
    pub transport: ShortPath<'a>,
}

impl Shortcut for RingShortcut<'_> {
    fn send(&mut self, engine: &Engine, dest: u32, context: u32, tag: i32, region: Region) -> bool {
        send_now(&mut self.transport, engine, dest, context, tag, region)
    }

    fn recv(
        &mut self,
        engine: &Engine,
        source: u32,
        context: u32,
        tag: i32,
        region: Region,
    ) -> Received {
        if engine.iprobe(Some(source), context, Some(tag)).is_some() {
            return Received::Engine;
        }
        match take_next(
            &mut self.transport,
            engine,
            (source, context, Some(tag)),
            region,
            1,
            || {},
        ) {
            Direct::Taken { bytes, .. } => Received::Taken(bytes),
            Direct::Empty => Received::NotYet,
            Direct::Other => Received::Engine,
        }
    }
}

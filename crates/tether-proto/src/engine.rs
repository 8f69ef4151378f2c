//! The point-to-point protocol engine: requests in, frames out.
//!
//! Protocols:
//! - **eager** (message size <= `eager_limit`): one `Eager` frame carries
//!   envelope and data. If a matching receive is posted when the header
//!   arrives, the payload is read straight into its buffer; otherwise into
//!   a buffer of exactly the announced size (bounded by the decoder) that
//!   waits in the unexpected queue. The send completes once the frame is
//!   handed to the transport (which copies what it cannot write at once).
//! - **rendezvous** (larger): `Rts` carries the envelope and size; the
//!   receiver matches it like any message and answers `Cts` with how many
//!   bytes its buffer takes; the sender then sends one `Data` frame of
//!   exactly that size, read straight into the receive buffer. A truncated
//!   receive therefore moves only what fits, and the link stays in step.
//! - **rendezvous by remote memory** (`engine/remote.rs`), with a peer
//!   whose transport reaches its memory by address
//!   ([`Engine::set_remote_memory`]): the `Cts` carries a key to the
//!   granted buffer and the sender writes the data there itself, then
//!   sends an empty `Data` that says so; with both sides' consent
//!   (`Rts` with a key to the send buffer, `Cts` flagged split) each side
//!   copies half. The data still goes through the link whenever remote
//!   access is refused.
//! - **self**: a message to oneself is copied between the two buffers once
//!   both exist (or buffered if small).
//!
//! Contract with the runtime (all calls from one thread):
//! 1. call [`Engine::isend`]/[`Engine::irecv`]/...; then drain
//!    [`Engine::poll_transmit`] and send each frame on the link to its peer,
//!    in order; when a frame with `completes: Some(req)` is fully handed to
//!    the transport, call [`Engine::transmit_done`];
//! 2. for every decoded header of kind `Eager`, `Rts`, `Cts` or `Data`,
//!    call [`Engine::on_header`], fill the returned [`PayloadSink`] from the
//!    link, then call [`Engine::payload_done`] with its token;
//! 3. when a link to a peer fails, call [`Engine::peer_lost`];
//! 4. after the frames of step 1, drain [`Engine::poll_rma`], carry out
//!    each operation on the peer's transport and report how it ended with
//!    [`Engine::rma_done`] (which may queue more frames); a frame made
//!    before its peer's route was known goes through [`Engine::revisit`]
//!    first;
//! 5. one-sided operations (`engine/onesided.rs`): register windows with
//!    [`Engine::win_create`], hand `RmaRequest` and `RmaReply` headers to
//!    [`Engine::on_header`] like any data-path frame, and drain
//!    [`Engine::poll_apply`], handing each apply back with
//!    [`Engine::apply_done`];
//! 6. a blocking call may move an eager message without the engine (the
//!    runtime's short path): a send may hand its own `Eager` frame (no
//!    request handle) to the link when [`Engine::eager_limit`] allows it
//!    and the peer is not lost; a receive may take an `Eager` frame
//!    straight from the link when nothing [`Engine::iprobe`] finds matches
//!    it and [`Engine::eager_destination`] names no posted receive for
//!    the frame. The engine then never sees that message, which is what
//!    it would have done with it.

use std::collections::VecDeque;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::counters::{Counters, SendPath};
use crate::matching::{Envelope, PostedQueue, Selector, UnexpectedQueue};
use crate::pool::BufferPool;
use crate::request::{Completion, CompletionError, Gather, Region, ReqId, Slab};
use crate::rma::{RemoteKey, RmaOp};
use crate::wire::{FrameHeader, FrameKind, WireError, FLAG_REMOTE_KEY};

mod onesided;
mod remote;
mod striped;

pub use onesided::{Apply, ApplyStatus, FlushMark, Reduction, RmaError, RmaTarget};
use remote::{key_sink, keyed, PutState, RemoteRecv};
pub use striped::Stripe;
use striped::{ChunksReceived, StripedSend};

/// Settings of one engine.
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    /// This process's universe rank: the source of what it sends.
    pub me: u32,
    /// Messages up to this many bytes go eagerly.
    pub eager_limit: u64,
}

/// What a frame's payload is.
#[derive(Debug)]
pub enum TransmitPayload {
    None,
    /// User memory: valid until the request in `completes` completes.
    Borrowed(Region),
    Owned(Vec<u8>),
    /// User memory in runs, sent as one payload in their order: valid
    /// until the request in `completes` completes. A transport that cannot
    /// gather packs it ([`Gather::to_vec`]).
    Gathered(Gather),
}

impl TransmitPayload {
    pub fn len(&self) -> usize {
        match self {
            TransmitPayload::None => 0,
            TransmitPayload::Borrowed(r) => r.len,
            TransmitPayload::Owned(v) => v.len(),
            TransmitPayload::Gathered(g) => g.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Replaces user memory (a borrowed region, or runs) with an owned
    /// copy, so that the send it belongs to may complete while the frame
    /// still waits (an eager frame with `copy_if_blocked`). Returns
    /// whether it copied; an owned payload or none is left as it is.
    ///
    /// # Safety
    /// The user memory is still valid: its request has not completed.
    pub unsafe fn make_owned(&mut self) -> bool {
        let copy = match self {
            // SAFETY: valid, by this function's contract.
            TransmitPayload::Borrowed(region) => unsafe { region.as_slice() }.to_vec(),
            // SAFETY: as above, for every run.
            TransmitPayload::Gathered(g) => unsafe { g.to_vec() },
            TransmitPayload::None | TransmitPayload::Owned(_) => return false,
        };
        *self = TransmitPayload::Owned(copy);
        true
    }
}

/// A frame for the runtime to send to `peer`. The transport fills in the
/// sequence number and the payload length.
#[derive(Debug)]
pub struct Transmit {
    pub peer: u32,
    pub header: FrameHeader,
    pub payload: TransmitPayload,
    /// Request to report through [`Engine::transmit_done`] once the frame
    /// is handed over.
    pub completes: Option<ReqId>,
    /// The transport may copy a borrowed payload it cannot write at once
    /// and report the frame handed over (eager sends complete locally);
    /// otherwise the user memory must be written in place (rendezvous data).
    pub copy_if_blocked: bool,
}

/// Where the payload that follows a header goes. Opaque to the runtime
/// except through the variants' fields.
#[derive(Debug)]
pub struct SinkToken(Token);

#[derive(Debug)]
enum Token {
    Recv(ReqId),
    /// The chunk at `offset`, `len` bytes, of a striped receive's data.
    Chunk {
        req: ReqId,
        offset: u64,
        len: u64,
    },
    /// A chunk sent again for a receive already complete: dropped.
    Stray,
    Unexpected(Envelope),
    /// The remote key of a keyed `Rts` or `Cts` from `peer`.
    Key {
        peer: u32,
        header: FrameHeader,
    },
    /// A put's payload, read into this process's window.
    RmaPut {
        origin: u32,
        request: crate::wire::onesided::RmaRequest,
    },
    /// An accumulate-family payload, for the apply queued in slot `0`.
    RmaOperand(u64),
    /// The data of a reply, read into operation `0`'s result buffer.
    RmaResult(u64),
    /// The payload of a refused one-sided request, dropped.
    RmaDiscard,
}

/// What the runtime must do with the payload that follows a header.
#[derive(Debug)]
pub enum PayloadSink {
    /// Nothing follows, or nothing more to do.
    None,
    /// Read `region.len` bytes into `region`, then read and drop `discard`
    /// bytes, then call [`Engine::payload_done`] with `token` and no buffer.
    Region {
        region: Region,
        discard: u64,
        token: SinkToken,
    },
    /// Fill `buf` completely, then hand it back with `token`.
    Owned { buf: Vec<u8>, token: SinkToken },
}

#[derive(Debug)]
enum Unexpected {
    Eager(Vec<u8>),
    Rts {
        sender_req: u64,
        size: u64,
        /// The sender's key to its buffer, offering a split copy.
        key: Option<RemoteKey>,
    },
    /// A large message to oneself, waiting for its receive.
    Local(ReqId),
}

#[derive(Debug, PartialEq, Eq)]
enum SendState {
    /// Handed out as an eager frame, or waiting in this engine's unexpected
    /// queue as a self-send.
    Eager,
    /// `Rts` sent (`offered`: with a key to the send buffer); waiting for
    /// the receiver's `Cts`.
    AwaitCts { offered: bool },
    /// `Data` handed out.
    Data,
    /// Writing into the receiver's memory (`engine/remote.rs`).
    Put(PutState),
}

#[derive(Debug)]
enum RecvState {
    Posted,
    /// Matched; the data is on its way (eager payload or rendezvous data).
    Matched {
        source: u32,
        tag: i32,
        size: u64,
        granted: u64,
        /// Whether the data comes by remote memory.
        remote: RemoteRecv,
    },
}

#[derive(Debug)]
enum Kind {
    Send {
        peer: u32,
        tag: i32,
        /// The data; for a gathered send, its total length (and, to self,
        /// the packed copy).
        region: Region,
        gather: Option<SendGather>,
        state: SendState,
    },
    Recv {
        region: Region,
        selector: Selector,
        state: RecvState,
    },
    /// Completed by its owner through [`Engine::complete_generalized`]
    /// (a collective operation built from point-to-point requests).
    Generalized,
    /// A one-sided operation's request (`rput`, `rget`) of `bytes` bytes
    /// to `target` (`engine/onesided.rs`).
    OneSided { target: u32, bytes: u64 },
}

/// What a gathered send keeps: its runs, or, sent to this process itself,
/// the packed copy its region points into.
#[derive(Debug)]
enum SendGather {
    Runs(Gather),
    Packed(#[allow(dead_code)] Box<[u8]>),
}

#[derive(Debug)]
struct Request {
    kind: Kind,
    done: Option<Completion>,
    /// The owner's word for this request ([`Engine::set_user`]); zero
    /// until set.
    user: u64,
    /// Its message's ordinal ([`Engine::enable_ordinals`]), once known.
    ordinal: u64,
}

/// Marks a request whose message has no ordinal (yet, or at all).
const NO_ORDINAL: u64 = u64::MAX;

/// Message ordinals, for traces: the k-th message from one process to
/// another with one (context, tag) is the k-th that both count — the
/// sender when it starts the send, the receiver when a receive matches
/// it — because MPI's order does not let messages of one sender overtake
/// each other. A trace pairs every send with its receive by them, with
/// nothing extra on the wire.
#[derive(Debug, Default)]
struct Ordinals {
    sent: HashMap<(u32, u32, i32), u64>,
    matched: HashMap<(u32, u32, i32), u64>,
}

fn next_ordinal(book: &mut HashMap<(u32, u32, i32), u64>, key: (u32, u32, i32)) -> u64 {
    let next = book.entry(key).or_insert(0);
    *next += 1;
    *next - 1
}

/// The point-to-point engine of one process. See the module documentation
/// for the contract.
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    requests: Slab<Request>,
    posted: PostedQueue,
    unexpected: UnexpectedQueue<Unexpected>,
    outbox: VecDeque<Transmit>,
    lost: HashSet<u32>,
    /// Eager limits of peers whose transport wants its own (indexed by
    /// universe rank; [`NO_PEER_LIMIT`] where the general one applies).
    peer_eager_limits: Vec<u64>,
    /// Buffers of unexpected eager messages already delivered, for the
    /// next ones: messages that arrive before their receive (the usual
    /// case in a collective, where a peer runs ahead) reuse them. The
    /// transport fills such a buffer completely.
    spare: BufferPool,
    counters: Counters,
    /// Counted only while a trace is recorded.
    ordinals: Option<Box<Ordinals>>,
    /// By peer, the largest message whose data may move by remote memory
    /// (0: none); see [`Engine::set_remote_memory`].
    remote_memory: Vec<u64>,
    /// Rendezvous data from this many bytes on is copied by both sides
    /// at once (0: never).
    split_bytes: u64,
    /// Peers whose memory the system refused to let this process read.
    reads_refused: HashSet<u32>,
    /// Remote memory operations for the transports ([`Engine::poll_rma`]).
    rma: VecDeque<RmaOp>,
    /// Windows and one-sided operations (`engine/onesided.rs`).
    onesided: onesided::OneSided,
    /// Peers whose rendezvous data goes in chunks (`engine/striped.rs`).
    stripes: HashMap<u32, Stripe>,
    /// Sends whose data went in chunks, until they complete.
    striped_sends: HashMap<ReqId, StripedSend>,
    /// Striped receives: what their chunks have brought so far.
    chunks_received: HashMap<ReqId, ChunksReceived>,
    /// Peers a rail to which failed (`engine/striped.rs`).
    rails_failed: HashSet<u32>,
    /// The last striped receives completed, by (peer, handle), oldest
    /// first in `landed_order` (`engine/striped.rs`).
    landed: HashSet<(u32, u64)>,
    landed_order: VecDeque<(u32, u64)>,
}

/// Spare unexpected-message buffers kept at most, and the largest kept
/// (the default eager limit).
const SPARE_BUFFERS: usize = 16;
const SPARE_MAX_BYTES: usize = 128 * 1024;

/// Marks a peer without an eager limit of its own.
const NO_PEER_LIMIT: u64 = u64::MAX;

impl Engine {
    pub fn new(config: EngineConfig) -> Engine {
        Engine {
            config,
            requests: Slab::new(),
            posted: PostedQueue::default(),
            unexpected: UnexpectedQueue::default(),
            outbox: VecDeque::new(),
            lost: HashSet::default(),
            peer_eager_limits: Vec::new(),
            spare: BufferPool::new(SPARE_BUFFERS, SPARE_MAX_BYTES),
            counters: Counters::default(),
            ordinals: None,
            remote_memory: Vec::new(),
            split_bytes: 0,
            reads_refused: HashSet::default(),
            rma: VecDeque::new(),
            onesided: onesided::OneSided::default(),
            stripes: HashMap::default(),
            striped_sends: HashMap::default(),
            chunks_received: HashMap::default(),
            rails_failed: HashSet::default(),
            landed: HashSet::default(),
            landed_order: VecDeque::new(),
        }
    }

    /// Gives sends to `peer` started from now on their own eager limit
    /// (a transport whose costs differ: one file per eager message
    /// against three for a rendezvous). The general limit no longer
    /// applies to that peer.
    pub fn set_peer_eager_limit(&mut self, peer: u32, limit: u64) {
        let index = peer as usize;
        if self.peer_eager_limits.len() <= index {
            self.peer_eager_limits.resize(index + 1, NO_PEER_LIMIT);
        }
        self.peer_eager_limits[index] = limit.min(NO_PEER_LIMIT - 1);
    }

    /// The largest message sent eagerly to `peer`.
    #[inline]
    pub fn eager_limit(&self, peer: u32) -> u64 {
        match self.peer_eager_limits.get(peer as usize) {
            Some(&limit) if limit != NO_PEER_LIMIT => limit,
            _ => self.config.eager_limit,
        }
    }

    /// Changes the eager limit for sends started from now on.
    pub fn set_eager_limit(&mut self, limit: u64) {
        self.config.eager_limit = limit;
    }

    /// Counts the messages of `context` that arrive unexpected (for a
    /// context taken by probing: see [`Engine::watched_arrivals`]).
    pub fn watch_context(&mut self, context: u32) {
        self.unexpected.watch(context);
    }

    /// Messages of the watched context that arrived unexpected so far: a
    /// probe can only find a new one when this changed.
    #[inline]
    pub fn watched_arrivals(&self) -> u64 {
        self.unexpected.watched_arrivals()
    }

    /// Starts a send of `region` to universe rank `dest`.
    pub fn isend(&mut self, dest: u32, context: u32, tag: i32, region: Region) -> ReqId {
        self.start_send(dest, context, tag, region, None)
    }

    /// Starts a send of the runs of `gather`, in order, as one message:
    /// the transport gathers them where it can, so the sender packs
    /// nothing. Every run must stay valid until the request completes.
    pub fn isend_gather(&mut self, dest: u32, context: u32, tag: i32, gather: Gather) -> ReqId {
        if dest == self.config.me {
            // SAFETY: the runs are valid until this request completes.
            let packed = unsafe { gather.to_vec() }.into_boxed_slice();
            let region = Region::from_const(packed.as_ptr(), packed.len());
            return self.start_send(dest, context, tag, region, Some(SendGather::Packed(packed)));
        }
        let region = Region {
            ptr: std::ptr::NonNull::<u8>::dangling().as_ptr(),
            len: gather.len(),
        };
        self.start_send(dest, context, tag, region, Some(SendGather::Runs(gather)))
    }

    fn start_send(
        &mut self,
        dest: u32,
        context: u32,
        tag: i32,
        region: Region,
        gather: Option<SendGather>,
    ) -> ReqId {
        let runs = match &gather {
            Some(SendGather::Runs(g)) => Some(g.clone()),
            _ => None,
        };
        let req = self.requests.insert(Request {
            kind: Kind::Send {
                peer: dest,
                tag,
                region,
                gather,
                state: SendState::Eager,
            },
            done: None,
            user: 0,
            ordinal: NO_ORDINAL,
        });
        if let Some(book) = self.ordinals.as_deref_mut() {
            let ordinal = next_ordinal(&mut book.sent, (dest, context, tag));
            if let Some(r) = self.requests.get_mut(req) {
                r.ordinal = ordinal;
            }
        }
        let size = region.len as u64;
        let sent = Completion {
            source: self.config.me,
            tag,
            bytes: size,
            error: None,
        };
        if self.lost.contains(&dest) {
            // Named by the peer it was for, as every failed send is.
            self.fail(req, CompletionError::PeerLost);
            return req;
        }
        let envelope = Envelope {
            source: self.config.me,
            context,
            tag,
        };
        if dest == self.config.me {
            self.send_to_self(req, envelope, region, sent);
            return req;
        }
        let mut header = FrameHeader::new(FrameKind::Rts);
        header.context = context;
        header.tag = tag;
        header.msg_size = size;
        header.sender_req = req.to_wire();
        let eager = size <= self.eager_limit(dest);
        self.counters.sent(
            dest,
            size,
            if eager {
                SendPath::Eager
            } else {
                SendPath::Rendezvous
            },
        );
        if eager {
            header.kind = FrameKind::Eager;
            self.outbox.push_back(Transmit {
                peer: dest,
                header,
                payload: match runs {
                    Some(g) => TransmitPayload::Gathered(g),
                    None => TransmitPayload::Borrowed(region),
                },
                completes: Some(req),
                copy_if_blocked: true,
            });
        } else {
            // Runs offer no one address to read from: the receiver grants
            // its buffer and the sender writes into it.
            let offer = match runs {
                Some(_) => None,
                None => self.offer(dest, req, region),
            };
            self.set_send_state(
                req,
                SendState::AwaitCts {
                    offered: offer.is_some(),
                },
            );
            let payload = match offer {
                Some(key) => keyed(&mut header, key),
                None => TransmitPayload::None,
            };
            self.outbox.push_back(Transmit {
                peer: dest,
                header,
                payload,
                completes: None,
                copy_if_blocked: false,
            });
        }
        req
    }

    fn send_to_self(&mut self, req: ReqId, envelope: Envelope, region: Region, sent: Completion) {
        if let Some(recv) = self.posted.take_match(&envelope) {
            // SAFETY: both regions are valid until their requests complete,
            // which happens below.
            let data = unsafe { region.as_slice() };
            self.deliver(recv, envelope, data);
            self.complete(req, sent);
        } else if region.len as u64 <= self.config.eager_limit {
            // SAFETY: the send buffer is valid until this request completes.
            let copy = unsafe { region.as_slice() }.to_vec();
            self.unexpected.push(envelope, Unexpected::Eager(copy));
            self.complete(req, sent);
        } else {
            self.unexpected.push(envelope, Unexpected::Local(req));
        }
    }

    /// Posts a receive into `region`; `None` source or tag is a wildcard.
    pub fn irecv(
        &mut self,
        source: Option<u32>,
        context: u32,
        tag: Option<i32>,
        region: Region,
    ) -> ReqId {
        let selector = Selector {
            source,
            context,
            tag,
        };
        let req = self.requests.insert(Request {
            kind: Kind::Recv {
                region,
                selector,
                state: RecvState::Posted,
            },
            done: None,
            user: 0,
            ordinal: NO_ORDINAL,
        });
        match self.unexpected.take_match(&selector) {
            Some((envelope, Unexpected::Eager(data))) => {
                self.deliver(req, envelope, &data);
                self.spare.give(data);
            }
            Some((
                envelope,
                Unexpected::Rts {
                    sender_req,
                    size,
                    key,
                },
            )) => {
                self.grant(req, envelope, sender_req, size, key);
            }
            Some((envelope, Unexpected::Local(send))) => {
                let send_region = match self.requests.get(send).map(|r| &r.kind) {
                    Some(Kind::Send { region, .. }) => *region,
                    _ => unreachable!("a local rendezvous names a live send"),
                };
                // SAFETY: the send buffer is valid until `send` completes.
                let data = unsafe { send_region.as_slice() };
                self.deliver(req, envelope, data);
                let sent = Completion {
                    source: self.config.me,
                    tag: envelope.tag,
                    bytes: send_region.len as u64,
                    error: None,
                };
                self.complete(send, sent);
            }
            None => match source {
                Some(peer) if self.lost.contains(&peer) => {
                    self.fail(req, CompletionError::PeerLost);
                }
                _ => self.posted.push(selector, req),
            },
        }
        req
    }

    /// The oldest message a receive with these arguments would take, if it
    /// has arrived: its envelope and size.
    pub fn iprobe(
        &self,
        source: Option<u32>,
        context: u32,
        tag: Option<i32>,
    ) -> Option<(Envelope, u64)> {
        let selector = Selector {
            source,
            context,
            tag,
        };
        self.unexpected
            .peek_match(&selector)
            .map(|(envelope, item)| {
                let size = match item {
                    Unexpected::Eager(data) => data.len() as u64,
                    Unexpected::Rts { size, .. } => *size,
                    Unexpected::Local(send) => match self.requests.get(*send).map(|r| &r.kind) {
                        Some(Kind::Send { region, .. }) => region.len as u64,
                        _ => 0,
                    },
                };
                (*envelope, size)
            })
    }

    /// Cancels a receive that has not matched a message yet. Returns false
    /// (and changes nothing) when the request cannot be cancelled: it is a
    /// send, it has matched, or it has completed.
    pub fn cancel(&mut self, req: ReqId) -> bool {
        let posted = matches!(
            self.requests.get(req),
            Some(Request {
                kind: Kind::Recv {
                    state: RecvState::Posted,
                    ..
                },
                done: None,
                ..
            })
        );
        if posted && self.posted.remove(req) {
            self.fail(req, CompletionError::Cancelled);
            true
        } else {
            false
        }
    }

    /// Starts a generalized request: one that this engine never completes
    /// by itself. Its owner completes it with
    /// [`Engine::complete_generalized`]; it is waited on, tested and freed
    /// like any other request, and cannot be cancelled.
    pub fn start_generalized(&mut self) -> ReqId {
        self.requests.insert(Request {
            kind: Kind::Generalized,
            done: None,
            user: 0,
            ordinal: NO_ORDINAL,
        })
    }

    /// Completes a generalized request; does nothing to other requests or
    /// to one already complete.
    pub fn complete_generalized(&mut self, req: ReqId, completion: Completion) {
        if let Some(Request {
            kind: Kind::Generalized,
            done: None,
            ..
        }) = self.requests.get(req)
        {
            self.complete(req, completion);
        }
    }

    /// How `req` completed, if it has; `None` for pending or unknown requests.
    pub fn completion(&self, req: ReqId) -> Option<Completion> {
        self.requests.get(req).and_then(|r| r.done)
    }

    /// Whether the link to `peer` was reported lost.
    #[inline]
    pub fn is_lost(&self, peer: u32) -> bool {
        !self.lost.is_empty() && self.lost.contains(&peer)
    }

    /// Whether `req` names a request of this engine that was not freed.
    pub fn is_live(&self, req: ReqId) -> bool {
        self.requests.get(req).is_some()
    }

    /// Frees a completed request and returns its completion; a pending
    /// request is left alone (`None`).
    pub fn take_completion(&mut self, req: ReqId) -> Option<Completion> {
        let done = self.completion(req)?;
        self.requests.remove(req);
        Some(done)
    }

    /// Gives `req` its owner's word: what the runtime needs back when it
    /// completes the request (the communicator it belongs to), so that it
    /// keeps no table of its own beside the slab. The engine never reads
    /// it. Does nothing to a request that was freed (or never existed).
    #[inline]
    pub fn set_user(&mut self, req: ReqId, user: u64) {
        if let Some(request) = self.requests.get_mut(req) {
            request.user = user;
        }
    }

    /// The word [`Engine::set_user`] gave `req` (zero if none was);
    /// `None` for a request that was freed.
    pub fn user(&self, req: ReqId) -> Option<u64> {
        self.requests.get(req).map(|r| r.user)
    }

    /// [`Engine::take_completion`], with the request's word
    /// ([`Engine::set_user`]) read in the same look-up.
    #[inline]
    pub fn take_completion_with_user(&mut self, req: ReqId) -> Option<(Completion, u64)> {
        let request = self.requests.get(req)?;
        let done = request.done?;
        let user = request.user;
        self.requests.remove(req);
        Some((done, user))
    }

    /// Number of requests not yet freed.
    /// Starts counting message ordinals (see [`Engine::ordinal`]); for
    /// messages started and matched from now on.
    pub fn enable_ordinals(&mut self) {
        self.ordinals.get_or_insert_with(Box::default);
    }

    /// The ordinal of the message of send or receive `req` among those
    /// between the two processes with its context and tag (from 0; a
    /// receive's once it matched), while ordinals are counted.
    pub fn ordinal(&self, req: ReqId) -> Option<u64> {
        let r = self.requests.get(req)?;
        (r.ordinal != NO_ORDINAL).then_some(r.ordinal)
    }

    /// Counts a message moved outside the engine (the runtime's short
    /// path) and gives its ordinal, while ordinals are counted: `sent`
    /// to `peer`, else received from it.
    pub fn ordinal_outside(
        &mut self,
        peer: u32,
        context: u32,
        tag: i32,
        sent: bool,
    ) -> Option<u64> {
        let book = self.ordinals.as_deref_mut()?;
        let map = if sent {
            &mut book.sent
        } else {
            &mut book.matched
        };
        Some(next_ordinal(map, (peer, context, tag)))
    }

    /// Messages and bytes moved so far, per peer.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// For a message moved outside the engine (the runtime's short path).
    pub fn counters_mut(&mut self) -> &mut Counters {
        &mut self.counters
    }

    /// The peers that posted receives wait for by name (for linking with
    /// them, so that their death is seen).
    pub fn awaited_sources(&self) -> Vec<u32> {
        let mut sources: Vec<u32> = self.posted.sources().collect();
        sources.sort_unstable();
        sources.dedup();
        sources
    }

    /// Messages that arrived before their receive, waiting for it now.
    pub fn unexpected_len(&self) -> usize {
        self.unexpected.len()
    }

    /// The most messages that waited for their receive at once.
    pub fn unexpected_deepest(&self) -> usize {
        self.unexpected.deepest()
    }

    pub fn live_requests(&self) -> usize {
        self.requests.len()
    }

    /// The next frame to send, in the order the protocol requires.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let t = self.outbox.pop_front()?;
        if t.header.kind == FrameKind::RmaRequest {
            self.rma_request_sent(t.header.sender_req);
        }
        Some(t)
    }

    /// Whether frames are waiting in [`Engine::poll_transmit`].
    #[inline]
    pub fn has_transmit(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// A frame whose `completes` named `req` was handed to the transport.
    pub fn transmit_done(&mut self, req: ReqId) {
        let live_send = matches!(
            self.requests.get(req),
            Some(Request {
                kind: Kind::Send { .. },
                done: None,
                ..
            })
        );
        if live_send {
            if self.striped_handed_over(req) {
                self.send_complete(req);
            }
            return;
        }
        if let Some(Request {
            kind: Kind::OneSided { target, bytes },
            done: None,
            ..
        }) = self.requests.get(req)
        {
            let (target, bytes) = (*target, *bytes);
            self.rput_handed_over(req, target, bytes);
        }
    }

    /// Completes send `req`: all its data is handed over (or landed).
    fn send_complete(&mut self, req: ReqId) {
        let Some(Request {
            kind: Kind::Send { tag, region, .. },
            done: None,
            ..
        }) = self.requests.get(req)
        else {
            return;
        };
        let sent = Completion {
            source: self.config.me,
            tag: *tag,
            bytes: region.len as u64,
            error: None,
        };
        self.complete(req, sent);
    }

    /// Handles a data-path header from `peer`; returns where its payload goes.
    ///
    /// An error means the peer broke the protocol: the runtime closes that
    /// link (and reports [`Engine::peer_lost`]).
    pub fn on_header(&mut self, peer: u32, header: &FrameHeader) -> Result<PayloadSink, WireError> {
        let envelope = Envelope {
            source: peer,
            context: header.context,
            tag: header.tag,
        };
        match header.kind {
            FrameKind::Eager => {
                self.counters.received(peer, header.payload_len);
                Ok(self.on_eager(envelope, header.payload_len))
            }
            FrameKind::Rts => {
                self.counters.received(peer, header.msg_size);
                if header.flags & FLAG_REMOTE_KEY != 0 {
                    return Ok(key_sink(peer, header));
                }
                self.on_rts(envelope, header, None);
                Ok(PayloadSink::None)
            }
            FrameKind::Cts => {
                self.check_cts(peer, header)?;
                if header.flags & FLAG_REMOTE_KEY != 0 {
                    return Ok(key_sink(peer, header));
                }
                self.on_cts(peer, header, None);
                Ok(PayloadSink::None)
            }
            FrameKind::Data => self.on_data(peer, header),
            FrameKind::ReadDone => self.on_read_done(peer, header),
            FrameKind::Landed => self.on_landed(peer, header),
            FrameKind::RmaRequest => self.on_rma_request(peer, header),
            FrameKind::RmaReply => self.on_rma_reply(peer, header),
            other => Err(WireError::UnexpectedFrame {
                got: other,
                state: "on the data path",
            }),
        }
    }

    fn on_eager(&mut self, envelope: Envelope, len: u64) -> PayloadSink {
        match self.posted.take_match(&envelope) {
            Some(req) => {
                let region = self.recv_region(req);
                if len == 0 {
                    self.finish_recv(req, envelope, 0, region);
                    return PayloadSink::None;
                }
                let fits = (region.len as u64).min(len);
                self.set_matched(req, envelope, len, fits, RemoteRecv::Link { offer: None });
                PayloadSink::Region {
                    region: region.prefix(fits as usize),
                    discard: len - fits,
                    token: SinkToken(Token::Recv(req)),
                }
            }
            None if len == 0 => {
                self.unexpected
                    .push(envelope, Unexpected::Eager(Vec::new()));
                PayloadSink::None
            }
            None => PayloadSink::Owned {
                buf: self.spare.take(len as usize),
                token: SinkToken(Token::Unexpected(envelope)),
            },
        }
    }

    /// An `Rts` (its key read, if it has one): matched now or kept.
    fn on_rts(&mut self, envelope: Envelope, header: &FrameHeader, key: Option<RemoteKey>) {
        match self.posted.take_match(&envelope) {
            Some(req) => self.grant(req, envelope, header.sender_req, header.msg_size, key),
            None => self.unexpected.push(
                envelope,
                Unexpected::Rts {
                    sender_req: header.sender_req,
                    size: header.msg_size,
                    key,
                },
            ),
        }
    }

    /// Checks that a `Cts` from `peer` answers one of our sends that
    /// waits for it, and grants no more than it has.
    fn check_cts(&self, peer: u32, header: &FrameHeader) -> Result<(), WireError> {
        let req = ReqId::from_wire(header.sender_req);
        match self.requests.get(req) {
            Some(Request {
                kind:
                    Kind::Send {
                        peer: p,
                        region,
                        state: SendState::AwaitCts { offered },
                        ..
                    },
                done: None,
                ..
            }) if *p == peer => {
                if header.msg_size > region.len as u64 {
                    return Err(WireError::DataLength {
                        expected: region.len as u64,
                        got: header.msg_size,
                    });
                }
                if header.flags & crate::wire::FLAG_SPLIT != 0 && !offered {
                    // Only a send that offered its buffer can be split.
                    return Err(WireError::BadFlags {
                        kind: FrameKind::Cts,
                        got: header.flags,
                    });
                }
                Ok(())
            }
            _ => Err(WireError::UnknownHandle {
                kind: FrameKind::Cts,
                handle: header.sender_req,
            }),
        }
    }

    /// A checked `Cts` (its key read, if it has one): the data goes to
    /// the receiver by remote memory when the key allows, else in a `Data`
    /// frame. A send lost since the header came does nothing.
    fn on_cts(&mut self, peer: u32, header: &FrameHeader, key: Option<RemoteKey>) {
        let req = ReqId::from_wire(header.sender_req);
        let (region, runs) = match self.requests.get(req) {
            Some(Request {
                kind:
                    Kind::Send {
                        region,
                        gather,
                        state: SendState::AwaitCts { .. },
                        ..
                    },
                done: None,
                ..
            }) => (
                *region,
                match gather {
                    Some(SendGather::Runs(g)) => Some(g.clone()),
                    _ => None,
                },
            ),
            _ => return,
        };
        if self.put_granted(peer, req, header, key, region, runs.as_ref()) {
            return;
        }
        self.send_data(peer, req, header, region, runs);
    }

    /// Sends the granted part of a send's data in a `Data` frame, which
    /// completes the send once handed over.
    fn send_data(
        &mut self,
        peer: u32,
        req: ReqId,
        cts: &FrameHeader,
        region: Region,
        runs: Option<Gather>,
    ) {
        if let Some(chunk) = self.chunk_size(peer, cts.msg_size) {
            return self.send_chunks(peer, req, cts, (region, runs), chunk);
        }
        self.set_send_state(req, SendState::Data);
        self.outbox.push_back(Transmit {
            peer,
            header: data_answering(cts),
            payload: match runs {
                Some(g) => TransmitPayload::Gathered(g.prefix(cts.msg_size as usize)),
                None => TransmitPayload::Borrowed(region.prefix(cts.msg_size as usize)),
            },
            completes: Some(req),
            copy_if_blocked: false,
        });
    }

    fn on_data(&mut self, peer: u32, header: &FrameHeader) -> Result<PayloadSink, WireError> {
        let req = ReqId::from_wire(header.receiver_req);
        let (region, source, tag, size, granted, remote) = match self.requests.get(req) {
            Some(Request {
                kind:
                    Kind::Recv {
                        region,
                        state:
                            RecvState::Matched {
                                source,
                                tag,
                                size,
                                granted,
                                remote,
                            },
                        ..
                    },
                done: None,
                ..
            }) if *source == peer => (*region, *source, *tag, *size, *granted, *remote),
            _ => {
                if let Some(drop) = self.stray_chunk(peer, header) {
                    return Ok(drop);
                }
                return Err(WireError::UnknownHandle {
                    kind: FrameKind::Data,
                    handle: header.receiver_req,
                });
            }
        };
        if header.flags & crate::wire::FLAG_WRITTEN != 0 {
            return self.on_written(req, header, remote, (source, tag, size, region));
        }
        if header.flags & crate::wire::FLAG_CHUNK != 0 {
            return self.on_chunk(req, header, region, granted, remote);
        }
        if matches!(remote, RemoteRecv::Reading { .. }) {
            return Err(WireError::UnexpectedFrame {
                got: FrameKind::Data,
                state: "while the receiver reads its part of the data",
            });
        }
        if header.payload_len != granted {
            return Err(WireError::DataLength {
                expected: granted,
                got: header.payload_len,
            });
        }
        if granted == 0 {
            let envelope = Envelope {
                source,
                context: header.context,
                tag,
            };
            self.finish_recv(req, envelope, size, region);
            return Ok(PayloadSink::None);
        }
        Ok(PayloadSink::Region {
            region: region.prefix(granted as usize),
            discard: 0,
            token: SinkToken(Token::Recv(req)),
        })
    }

    /// Where the payload of an `Eager` frame `header` from `peer` would be
    /// written if it were handed to [`Engine::on_header`] now: the posted
    /// receive it would match (its first `payload_len` bytes at most), or
    /// `None` when it would wait in the unexpected queue. Nothing changes;
    /// a transport that must verify a payload before it delivers it (the
    /// file transport) reads it straight into this region, verifies it,
    /// and only then calls `on_header`, which matches the same receive
    /// (nothing else ran in between). The region's bytes are undefined
    /// until its receive completes, as MPI allows.
    pub fn eager_destination(&self, peer: u32, header: &FrameHeader) -> Option<Region> {
        if header.kind != FrameKind::Eager {
            return None;
        }
        let envelope = Envelope {
            source: peer,
            context: header.context,
            tag: header.tag,
        };
        let req = self.posted.peek_match(&envelope)?;
        Some(self.recv_region(req).prefix(header.payload_len as usize))
    }

    /// Whether a posted receive could take a message from `peer` that a
    /// receive of (`context`, `tag`, `None`: any tag) also accepts: then
    /// that message is the posted receive's (the oldest matching receive
    /// takes a message), and a new receive must not take it first.
    #[inline]
    pub fn has_posted_overlapping(&self, peer: u32, context: u32, tag: Option<i32>) -> bool {
        self.posted.overlaps(&Selector {
            source: Some(peer),
            context,
            tag,
        })
    }

    /// Where the rendezvous data of receive `req` will land: the part of
    /// its buffer that its `Cts` granted; `None` unless `req` is a receive
    /// that has sent its `Cts` and waits for the data. The region is valid
    /// until the request completes. Transports are not told it: a peer
    /// writes there only through the key the `Cts` carries
    /// (`engine/remote.rs`); the tests and the engine fuzz target read it
    /// to check what the engine holds.
    pub fn granted_region(&self, req: ReqId) -> Option<Region> {
        match self.requests.get(req) {
            Some(Request {
                kind:
                    Kind::Recv {
                        region,
                        state: RecvState::Matched { granted, .. },
                        ..
                    },
                done: None,
                ..
            }) => Some(region.prefix(*granted as usize)),
            _ => None,
        }
    }

    /// The payload announced by [`Engine::on_header`] has been read.
    /// `owned` is the buffer of a [`PayloadSink::Owned`], `None` otherwise.
    pub fn payload_done(&mut self, token: SinkToken, owned: Option<Vec<u8>>) {
        match token.0 {
            Token::Chunk { req, offset, len } => {
                let (source, granted) = match self.requests.get(req) {
                    Some(Request {
                        kind:
                            Kind::Recv {
                                state:
                                    RecvState::Matched {
                                        source, granted, ..
                                    },
                                ..
                            },
                        done: None,
                        ..
                    }) => (*source, *granted),
                    _ => return,
                };
                if self.chunk_read(req, offset, len, granted) {
                    self.say_landed(source, req);
                    self.payload_done(SinkToken(Token::Recv(req)), None);
                }
            }
            Token::Stray => {}
            Token::Recv(req) => {
                if let Some(Request {
                    kind:
                        Kind::Recv {
                            region,
                            state:
                                RecvState::Matched {
                                    source, tag, size, ..
                                },
                            selector,
                        },
                    done: None,
                    ..
                }) = self.requests.get(req)
                {
                    let envelope = Envelope {
                        source: *source,
                        context: selector.context,
                        tag: *tag,
                    };
                    let (size, region) = (*size, *region);
                    self.finish_recv(req, envelope, size, region);
                }
            }
            Token::Key { peer, header } => {
                // A key that does not decode is not used: the data then
                // comes through the link (rma.rs).
                let key = owned.and_then(|bytes| RemoteKey::decode(&bytes).ok());
                if header.kind == FrameKind::Rts {
                    let envelope = Envelope {
                        source: peer,
                        context: header.context,
                        tag: header.tag,
                    };
                    self.on_rts(envelope, &header, key);
                } else {
                    self.on_cts(peer, &header, key);
                }
            }
            Token::RmaPut { origin, request } => self.rma_put_done(origin, request),
            Token::RmaOperand(slot) => self.rma_operand_done(slot, owned.unwrap_or_default()),
            Token::RmaResult(op) => self.rma_result_done(op),
            Token::RmaDiscard => {}
            Token::Unexpected(envelope) => {
                let data = owned.unwrap_or_default();
                match self.posted.take_match(&envelope) {
                    Some(req) => {
                        self.deliver(req, envelope, &data);
                        self.spare.give(data);
                    }
                    None => self.unexpected.push(envelope, Unexpected::Eager(data)),
                }
            }
        }
    }

    /// The link to `peer` is gone: every request that needs it completes
    /// with [`CompletionError::PeerLost`], and so will new ones.
    pub fn peer_lost(&mut self, peer: u32) {
        self.lost.insert(peer);
        self.outbox.retain(|t| t.peer != peer);
        self.rma.retain(|op| op.peer != peer);
        self.onesided_peer_lost(peer);
        let mut failed: Vec<ReqId> = self.posted.take_from_source(peer);
        for (id, request) in self.requests.iter_mut() {
            if request.done.is_some() {
                continue;
            }
            let needs_peer = match &request.kind {
                Kind::Send { peer: p, .. } => *p == peer,
                Kind::Recv {
                    state: RecvState::Matched { source, .. },
                    ..
                } => *source == peer,
                // Failed (or not) by `onesided_peer_lost`, which knows
                // whether the operation is still outstanding.
                Kind::Recv { .. } | Kind::Generalized | Kind::OneSided { .. } => false,
            };
            if needs_peer {
                failed.push(id);
            }
        }
        for req in failed {
            self.fail(req, CompletionError::PeerLost);
        }
    }

    fn recv_region(&self, req: ReqId) -> Region {
        match self.requests.get(req).map(|r| &r.kind) {
            Some(Kind::Recv { region, .. }) => *region,
            _ => unreachable!("posted queue holds only live receives"),
        }
    }

    fn set_send_state(&mut self, req: ReqId, new: SendState) {
        if let Some(Request {
            kind: Kind::Send { state, .. },
            ..
        }) = self.requests.get_mut(req)
        {
            *state = new;
        }
    }

    /// Gives a receive the ordinal of the message it matched, once.
    fn note_match(&mut self, req: ReqId, envelope: &Envelope) {
        let Some(book) = self.ordinals.as_deref_mut() else {
            return;
        };
        if let Some(r) = self.requests.get_mut(req) {
            if r.ordinal == NO_ORDINAL {
                let key = (envelope.source, envelope.context, envelope.tag);
                r.ordinal = next_ordinal(&mut book.matched, key);
            }
        }
    }

    fn set_matched(
        &mut self,
        req: ReqId,
        envelope: Envelope,
        size: u64,
        granted: u64,
        remote: RemoteRecv,
    ) {
        self.note_match(req, &envelope);
        if let Some(Request {
            kind: Kind::Recv { state, .. },
            ..
        }) = self.requests.get_mut(req)
        {
            *state = RecvState::Matched {
                source: envelope.source,
                tag: envelope.tag,
                size,
                granted,
                remote,
            };
        }
    }

    /// Matches a receive with a rendezvous announcement and grants the
    /// data, with a key to the granted buffer where the peer's memory is
    /// reachable (`engine/remote.rs`), reading its part itself where the
    /// sender offered its buffer (`offer`).
    fn grant(
        &mut self,
        req: ReqId,
        envelope: Envelope,
        sender_req: u64,
        size: u64,
        offer: Option<RemoteKey>,
    ) {
        if self.lost.contains(&envelope.source) {
            self.fail(req, CompletionError::PeerLost);
            return;
        }
        let region = self.recv_region(req);
        let granted = (region.len as u64).min(size);
        let mut cts = FrameHeader::new(FrameKind::Cts);
        cts.context = envelope.context;
        cts.tag = envelope.tag;
        cts.msg_size = granted;
        cts.sender_req = sender_req;
        cts.receiver_req = req.to_wire();
        let granted_region = region.prefix(granted as usize);
        let (remote, payload, read) =
            self.remote_grant(req, &mut cts, granted_region, offer, envelope.source);
        self.set_matched(req, envelope, size, granted, remote);
        self.outbox.push_back(Transmit {
            peer: envelope.source,
            header: cts,
            payload,
            completes: None,
            copy_if_blocked: false,
        });
        // After the `Cts`, so that the sender starts its part while this
        // process reads its own.
        if let Some(op) = read {
            self.rma.push_back(op);
        }
    }

    /// Copies a whole message that is already here into a receive.
    fn deliver(&mut self, req: ReqId, envelope: Envelope, data: &[u8]) {
        let region = self.recv_region(req);
        // SAFETY: the receive buffer is valid until `req` completes, and the
        // data is in engine memory or another request's buffer, not in it.
        unsafe { region.copy_from(data) };
        self.finish_recv(req, envelope, data.len() as u64, region);
    }

    fn finish_recv(&mut self, req: ReqId, envelope: Envelope, size: u64, region: Region) {
        self.note_match(req, &envelope);
        let error = (size > region.len as u64).then_some(CompletionError::Truncated);
        self.complete(
            req,
            Completion {
                source: envelope.source,
                tag: envelope.tag,
                bytes: size,
                error,
            },
        );
    }

    fn fail(&mut self, req: ReqId, error: CompletionError) {
        let tag = match self.requests.get(req).map(|r| &r.kind) {
            Some(Kind::Send { tag, .. }) => *tag,
            _ => 0,
        };
        let source = match self.requests.get(req).map(|r| &r.kind) {
            Some(Kind::Send { peer, .. }) => *peer,
            Some(Kind::Recv { selector, .. }) => selector.source.unwrap_or(u32::MAX),
            Some(Kind::OneSided { target, .. }) => *target,
            Some(Kind::Generalized) | None => u32::MAX,
        };
        self.complete(
            req,
            Completion {
                source,
                tag,
                bytes: 0,
                error: Some(error),
            },
        );
    }

    fn complete(&mut self, req: ReqId, completion: Completion) {
        self.forget_chunks(req);
        if let Some(request) = self.requests.get_mut(req) {
            if request.done.is_none() {
                request.done = Some(completion);
            }
        }
    }
}

/// The `Data` frame that answers `cts`: its envelope and handles.
fn data_answering(cts: &FrameHeader) -> FrameHeader {
    let mut data = FrameHeader::new(FrameKind::Data);
    data.context = cts.context;
    data.tag = cts.tag;
    data.msg_size = cts.msg_size;
    data.sender_req = cts.sender_req;
    data.receiver_req = cts.receiver_req;
    data
}

#[cfg(test)]
mod tests;

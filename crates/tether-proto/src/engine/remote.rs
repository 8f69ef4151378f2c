//! The rendezvous by remote memory: the engine's protocol choice for a
//! peer whose memory the transport reaches by address (cross-memory
//! attach between processes of one host).
//!
//! 1. The sender's `Rts` carries a key to its send buffer when the
//!    message is large enough for both sides to copy at once
//!    ([`Engine::set_split_bytes`]): an offer.
//! 2. The receiver's `Cts` carries a key to the granted buffer. When it
//!    takes the offer (its own threshold, and reads not refused before)
//!    the `Cts` is flagged split, and the receiver then reads the part
//!    from [`split_point`] on through the sender's key and answers
//!    `ReadDone` (tag 1 when the system refused the read).
//! 3. The sender writes the granted data (the part before the split
//!    point when split) through the receiver's key; once its writes are
//!    done and, when split, the `ReadDone` came, it sends an empty `Data`
//!    flagged written, which completes both requests. Until the
//!    `ReadDone` the receiver may be reading the send buffer, so the send
//!    does not complete before it.
//!
//! Whatever the system refuses, the data still arrives: a refused write
//! sends the whole payload in a `Data` frame; a refused read makes the
//! sender write that part too. A refusal also stops that kind of access
//! to the peer for the rest of the run. A copy cut short by a peer that
//! died is reported by the transport, which reports the peer lost.
//!
//! A cross-memory copy is bound by the kernel's per-page work, not by
//! memory bandwidth, so two halves in parallel take little more than one
//! half (docs/journal/2026-11-24-shm-split-copy.md).

use super::{
    data_answering, Engine, Envelope, FrameHeader, FrameKind, Kind, PayloadSink, RecvState,
    Request, SendGather, SendState, SinkToken, Token, Transmit, TransmitPayload,
};
use crate::request::{Gather, Region, ReqId};
use crate::rma::{split_point, PutSource, RemoteKey, RmaKind, RmaOp, RmaOwner, RmaStatus};
use crate::wire::{WireError, FLAG_REMOTE_KEY, FLAG_SPLIT, FLAG_WRITTEN};

/// Gathered data whose runs average fewer bytes than this goes through the
/// link instead of by remote memory: a cross-memory copy pins and copies
/// each run of the sender's on its own, which for 512-byte runs ran at half
/// the speed of a contiguous copy, where the sender packing the runs into
/// the link (a ring: a copy in user space) and the receiver copying them out
/// cost less (docs/journal/2026-11-28-fields-gather.md).
pub const SHORTEST_REMOTE_RUN: usize = 4096;

/// Where the data of a matched receive comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RemoteRecv {
    /// Through the link; the sender's offer of its buffer is kept in case
    /// the `Cts` waits for the peer's route ([`Engine::revisit`]).
    Link { offer: Option<RemoteKey> },
    /// Its `Cts` granted a key: written by the sender, or through the link.
    Granted,
    /// Its `Cts` split the copy; this process reads its part of
    /// `sender_req`'s buffer.
    Reading { sender_req: u64 },
    /// Its part is read and `ReadDone` sent.
    Read,
}

/// A send writing into the receiver's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PutState {
    /// The receiver's `Cts`, for the `Data` frame that ends the send.
    cts: FrameHeader,
    key: Option<RemoteKey>,
    split: bool,
    /// Whether the first part is written (`None`: its put is under way).
    first: Option<bool>,
    /// The receiver's `ReadDone` (split only): whether it read its part.
    read: Option<bool>,
    /// The put of the part after the split point is under way (the
    /// receiver could not read it).
    rest: bool,
}

/// Flags `header` as carrying `key`, and the payload that carries it.
pub(super) fn keyed(header: &mut FrameHeader, key: RemoteKey) -> TransmitPayload {
    header.flags |= FLAG_REMOTE_KEY;
    TransmitPayload::Owned(key.encode().to_vec())
}

/// Where the remote key that follows a keyed `Rts` or `Cts` goes.
pub(super) fn key_sink(peer: u32, header: &FrameHeader) -> PayloadSink {
    PayloadSink::Owned {
        buf: vec![0; RemoteKey::ENCODED_LEN],
        token: SinkToken(Token::Key {
            peer,
            header: *header,
        }),
    }
}

impl Engine {
    /// Lets rendezvous data of up to `up_to` bytes to and from `peer` move
    /// by remote memory (0: never). The runtime sets it once the peer's
    /// transport is known and reaches the peer's memory; a refused access
    /// lowers it to 0.
    pub fn set_remote_memory(&mut self, peer: u32, up_to: u64) {
        let index = peer as usize;
        if self.remote_memory.len() <= index {
            self.remote_memory.resize(index + 1, 0);
        }
        self.remote_memory[index] = up_to;
    }

    /// Rendezvous data from `bytes` on is copied by both sides at once
    /// where remote memory allows it (0: never).
    pub fn set_split_bytes(&mut self, bytes: u64) {
        self.split_bytes = bytes;
    }

    #[inline]
    pub(super) fn remote_memory(&self, peer: u32) -> u64 {
        self.remote_memory.get(peer as usize).copied().unwrap_or(0)
    }

    /// The next remote memory operation for a transport to carry out.
    pub fn poll_rma(&mut self) -> Option<RmaOp> {
        self.rma.pop_front()
    }

    /// Whether operations wait in [`Engine::poll_rma`].
    #[inline]
    pub fn has_rma(&self) -> bool {
        !self.rma.is_empty()
    }

    /// The offer of a send's buffer for a split copy, if it makes one.
    pub(super) fn offer(&self, dest: u32, req: ReqId, region: Region) -> Option<RemoteKey> {
        let len = region.len as u64;
        let wanted = self.split_bytes > 0 && len >= self.split_bytes;
        (wanted && len <= self.remote_memory(dest)).then(|| RemoteKey::of(req.to_wire(), region))
    }

    /// Takes another look at the protocol of a frame made before its
    /// peer's route was known (the runtime learns only then whether the
    /// peer's memory is reachable: the first frame to a peer, or one that
    /// waited for the peer's segment): an `Rts` that offered nothing
    /// offers its buffer now if it may, and a `Cts` that granted no key
    /// grants one (and takes the sender's offer).
    pub fn revisit(&mut self, t: &mut Transmit) {
        if t.header.flags & FLAG_REMOTE_KEY != 0 {
            return;
        }
        match t.header.kind {
            FrameKind::Rts => self.revisit_rts(t),
            FrameKind::Cts => self.revisit_cts(t),
            _ => {}
        }
    }

    fn revisit_rts(&mut self, t: &mut Transmit) {
        let req = ReqId::from_wire(t.header.sender_req);
        let offer = match self.requests.get(req) {
            Some(Request {
                kind:
                    Kind::Send {
                        region,
                        gather: None,
                        state: SendState::AwaitCts { offered: false },
                        ..
                    },
                done: None,
                ..
            }) => self.offer(t.peer, req, *region),
            _ => None,
        };
        if let Some(key) = offer {
            t.payload = keyed(&mut t.header, key);
            self.set_send_state(req, SendState::AwaitCts { offered: true });
        }
    }

    fn revisit_cts(&mut self, t: &mut Transmit) {
        let req = ReqId::from_wire(t.header.receiver_req);
        let (granted, offer) = match self.requests.get(req) {
            Some(Request {
                kind:
                    Kind::Recv {
                        region,
                        state:
                            RecvState::Matched {
                                granted,
                                remote: RemoteRecv::Link { offer },
                                ..
                            },
                        ..
                    },
                done: None,
                ..
            }) => (region.prefix(*granted as usize), *offer),
            _ => return,
        };
        let (remote, payload, read) = self.remote_grant(req, &mut t.header, granted, offer, t.peer);
        if matches!(remote, RemoteRecv::Link { .. }) {
            return;
        }
        t.payload = payload;
        if let Some(Kind::Recv {
            state: RecvState::Matched { remote: r, .. },
            ..
        }) = self.requests.get_mut(req).map(|r| &mut r.kind)
        {
            *r = remote;
        }
        // Executed after the frames, so after this `Cts`.
        if let Some(op) = read {
            self.rma.push_back(op);
        }
    }

    /// What a `Cts` for `req` granting `granted` says beyond the plain
    /// grant: a key to the buffer (flagged in `cts`, carried in the
    /// payload), and whether and what this process reads itself.
    pub(super) fn remote_grant(
        &mut self,
        req: ReqId,
        cts: &mut FrameHeader,
        granted: Region,
        offer: Option<RemoteKey>,
        peer: u32,
    ) -> (RemoteRecv, TransmitPayload, Option<RmaOp>) {
        let len = granted.len as u64;
        if len == 0 || len > self.remote_memory(peer) {
            return (RemoteRecv::Link { offer }, TransmitPayload::None, None);
        }
        let payload = keyed(cts, RemoteKey::of(req.to_wire(), granted));
        let offer = offer.filter(|key| key.id == cts.sender_req && key.len >= len);
        let split = self.split_bytes > 0 && len >= self.split_bytes;
        match offer {
            Some(key) if split && !self.reads_refused.contains(&peer) => {
                cts.flags |= FLAG_SPLIT;
                let at = split_point(len);
                let read = RmaOp {
                    owner: RmaOwner::Transfer(req),
                    peer,
                    key,
                    offset: at,
                    kind: RmaKind::Get(Region {
                        // SAFETY: `at` < `len`, within the granted buffer.
                        ptr: unsafe { granted.ptr.add(at as usize) },
                        len: (len - at) as usize,
                    }),
                };
                let reading = RemoteRecv::Reading {
                    sender_req: cts.sender_req,
                };
                (reading, payload, Some(read))
            }
            _ => (RemoteRecv::Granted, payload, None),
        }
    }

    /// Starts writing the data a keyed `Cts` granted into the receiver's
    /// memory; returns false when the data goes in a `Data` frame instead
    /// (no usable key and no split).
    pub(super) fn put_granted(
        &mut self,
        peer: u32,
        req: ReqId,
        cts: &FrameHeader,
        key: Option<RemoteKey>,
        region: Region,
        runs: Option<&Gather>,
    ) -> bool {
        let granted = cts.msg_size;
        let split = cts.flags & FLAG_SPLIT != 0;
        let key = key.filter(|k| {
            k.id == cts.receiver_req
                && k.len >= granted
                && granted > 0
                && granted <= self.remote_memory(peer)
        });
        let short_runs =
            runs.is_some_and(|g| g.len() < g.runs().saturating_mul(SHORTEST_REMOTE_RUN));
        if (key.is_none() || short_runs) && !split {
            return false;
        }
        let first_len = if split { split_point(granted) } else { granted };
        let mut state = PutState {
            cts: *cts,
            key,
            split,
            first: None,
            read: None,
            rest: false,
        };
        match key {
            Some(key) if first_len > 0 => {
                let source = match runs {
                    Some(g) => PutSource::Gathered(g.prefix(first_len as usize)),
                    None => PutSource::Region(region.prefix(first_len as usize)),
                };
                self.rma.push_back(RmaOp {
                    owner: RmaOwner::Transfer(req),
                    peer,
                    key,
                    offset: 0,
                    kind: RmaKind::Put(source),
                });
            }
            // Nothing to write before the split point.
            Some(_) => state.first = Some(true),
            // The receiver reads its part through our offer while the
            // key it sent cannot be used: this side sends the data once
            // the reading is over.
            None => state.first = Some(false),
        }
        self.set_send_state(req, SendState::Put(state));
        true
    }

    /// The operation `op` ([`Engine::poll_rma`]) ended with `status`.
    pub fn rma_done(&mut self, op: RmaOp, status: RmaStatus) {
        let req = match op.owner {
            RmaOwner::Transfer(req) => req,
            RmaOwner::Window(id) => return self.window_rma_done(id, &op, status),
        };
        let (peer, is_send) = match self.requests.get(req) {
            Some(Request {
                kind: Kind::Send { peer, .. },
                done: None,
                ..
            }) => (*peer, true),
            Some(Request {
                kind:
                    Kind::Recv {
                        state: RecvState::Matched { source, .. },
                        ..
                    },
                done: None,
                ..
            }) => (*source, false),
            _ => return,
        };
        match status {
            // The transport reports the peer lost, which fails the request.
            RmaStatus::Failed => return,
            RmaStatus::Refused if is_send => self.set_remote_memory(peer, 0),
            RmaStatus::Refused => {
                self.reads_refused.insert(peer);
            }
            RmaStatus::Done => {}
        }
        let done = status == RmaStatus::Done;
        if done {
            self.counters.remote(peer, is_send, op.len() as u64);
        }
        if is_send {
            self.put_done(peer, req, done);
        } else {
            self.read_done(peer, req, done);
        }
    }

    /// The receiver's part of a split copy is read (or could not be):
    /// tells the sender.
    fn read_done(&mut self, peer: u32, req: ReqId, ok: bool) {
        let Some(Request {
            kind:
                Kind::Recv {
                    state: RecvState::Matched { remote, .. },
                    ..
                },
            ..
        }) = self.requests.get_mut(req)
        else {
            return;
        };
        let RemoteRecv::Reading { sender_req } = *remote else {
            return;
        };
        *remote = RemoteRecv::Read;
        let mut header = FrameHeader::new(FrameKind::ReadDone);
        header.sender_req = sender_req;
        header.tag = i32::from(!ok);
        self.outbox.push_back(Transmit {
            peer,
            header,
            payload: TransmitPayload::None,
            completes: None,
            copy_if_blocked: false,
        });
    }

    fn put_state(&mut self, req: ReqId) -> Option<&mut PutState> {
        match self.requests.get_mut(req) {
            Some(Request {
                kind:
                    Kind::Send {
                        state: SendState::Put(state),
                        ..
                    },
                done: None,
                ..
            }) => Some(state),
            _ => None,
        }
    }

    fn put_done(&mut self, peer: u32, req: ReqId, written: bool) {
        let Some(state) = self.put_state(req) else {
            return;
        };
        if state.rest {
            let cts = state.cts;
            if written {
                self.send_written(peer, req, &cts);
            } else {
                self.send_data_of(peer, req, &cts);
            }
            return;
        }
        state.first = Some(written);
        self.finish_put(peer, req);
    }

    /// A `ReadDone` from `peer`: its part of our send is read, or not.
    pub(super) fn on_read_done(
        &mut self,
        peer: u32,
        header: &FrameHeader,
    ) -> Result<PayloadSink, WireError> {
        let req = ReqId::from_wire(header.sender_req);
        let awaited = matches!(
            self.requests.get(req),
            Some(Request {
                kind: Kind::Send { peer: p, state: SendState::Put(s), .. },
                done: None,
                ..
            }) if *p == peer && s.split && s.read.is_none()
        );
        if !awaited {
            return Err(WireError::UnknownHandle {
                kind: FrameKind::ReadDone,
                handle: header.sender_req,
            });
        }
        if let Some(state) = self.put_state(req) {
            state.read = Some(header.tag == 0);
        }
        self.finish_put(peer, req);
        Ok(PayloadSink::None)
    }

    /// Ends a send by remote memory once its own writes are done and,
    /// when split, the receiver's reading is over.
    fn finish_put(&mut self, peer: u32, req: ReqId) {
        let Some(state) = self.put_state(req) else {
            return;
        };
        let Some(first) = state.first else {
            return;
        };
        if state.split && state.read.is_none() {
            return;
        }
        let (cts, key, read) = (state.cts, state.key, state.read.unwrap_or(true));
        if !first {
            return self.send_data_of(peer, req, &cts);
        }
        if read {
            return self.send_written(peer, req, &cts);
        }
        // The receiver could not read its part: write it too.
        let at = split_point(cts.msg_size);
        let rest = match (key, self.send_memory(req)) {
            (Some(key), Some((region, None))) if cts.msg_size <= self.remote_memory(peer) => {
                Some((key, region))
            }
            _ => None,
        };
        let Some((key, region)) = rest else {
            return self.send_data_of(peer, req, &cts);
        };
        if let Some(state) = self.put_state(req) {
            state.rest = true;
        }
        self.rma.push_back(RmaOp {
            owner: RmaOwner::Transfer(req),
            peer,
            key,
            offset: at,
            kind: RmaKind::Put(PutSource::Region(Region {
                // SAFETY: `at` < the granted length <= the send buffer's.
                ptr: unsafe { region.ptr.add(at as usize) },
                len: (cts.msg_size - at) as usize,
            })),
        });
    }

    /// A send's buffer, and its runs when it is gathered.
    fn send_memory(&self, req: ReqId) -> Option<(Region, Option<Gather>)> {
        match self.requests.get(req).map(|r| &r.kind) {
            Some(Kind::Send { region, gather, .. }) => Some((
                *region,
                match gather {
                    Some(SendGather::Runs(g)) => Some(g.clone()),
                    _ => None,
                },
            )),
            _ => None,
        }
    }

    /// Falls back to sending the granted data in a `Data` frame.
    fn send_data_of(&mut self, peer: u32, req: ReqId, cts: &FrameHeader) {
        if let Some((region, runs)) = self.send_memory(req) {
            self.send_data(peer, req, cts, region, runs);
        }
    }

    /// Says the data is in the receiver's buffer: an empty `Data` frame
    /// flagged written, which completes the send once handed over.
    fn send_written(&mut self, peer: u32, req: ReqId, cts: &FrameHeader) {
        self.set_send_state(req, SendState::Data);
        let mut data = data_answering(cts);
        data.flags = FLAG_WRITTEN;
        self.outbox.push_back(Transmit {
            peer,
            header: data,
            payload: TransmitPayload::None,
            completes: Some(req),
            copy_if_blocked: false,
        });
    }

    /// A `Data` frame flagged written for receive `req`: the data is in
    /// its buffer, which only a receive that granted a key (and finished
    /// reading its own part) accepts.
    pub(super) fn on_written(
        &mut self,
        req: ReqId,
        header: &FrameHeader,
        remote: RemoteRecv,
        (source, tag, size, region): (u32, i32, u64, Region),
    ) -> Result<PayloadSink, WireError> {
        if !matches!(remote, RemoteRecv::Granted | RemoteRecv::Read) {
            return Err(WireError::UnexpectedFrame {
                got: FrameKind::Data,
                state: "written into a buffer this process did not give a key to (or still reads)",
            });
        }
        let envelope = Envelope {
            source,
            context: header.context,
            tag,
        };
        self.finish_recv(req, envelope, size, region);
        Ok(PayloadSink::None)
    }
}

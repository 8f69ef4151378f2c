//! The engine target: one `tether_proto::Engine` (universe rank 0) whose
//! peers 1 and 2 are hostile. The fuzz bytes are a script of operations:
//! the local program's sends, receives, cancels and frees, and frames from
//! the peers, either as 56 raw header bytes or built from a few bytes
//! (kind, envelope, and request handles and sizes taken from the frames
//! the engine sent, so that a script reaches the rendezvous states
//! quickly). Every frame goes through `FrameHeader::decode` with the
//! link's sequence number, then `Engine::on_header`; its payload fills the
//! returned `PayloadSink` at once, later (other work runs while the link
//! is mid-payload), or never (the link dies in the middle).
//!
//! The runtime's contract is kept: a link whose frame is refused (by the
//! decoder or the engine) is closed and reported with `peer_lost`, and
//! nothing more is read from it. The engine must never panic; besides,
//! the target checks what the runtime relies on:
//! - every region the engine hands out (a payload sink, a borrowed send
//!   payload, the memory the key of an `Rts` announces or of a `Cts`
//!   grants, the local memory of a remote memory operation,
//!   `eager_destination`) lies inside the buffer of a live request, a
//!   receive's or a send's as it should be;
//! - remote memory is used only with peer 1, the one whose memory the
//!   script says is reachable (when it says so: the first byte), and an
//!   operation's access lies inside its key; operations end as the
//!   script's counter says (done, refused, or failed);
//! - a sink of nothing follows only a header without payload, and a sink
//!   takes exactly the header's payload;
//! - frames off the data path (`Hello`, `Bye`, ...) are refused;
//! - no frame goes to a lost peer or to the engine itself;
//! - completions tell the truth: a receive that succeeded got at most its
//!   buffer, a truncated one more; a send that succeeded sent its buffer;
//!   `Cancelled` exactly for cancelled receives;
//! - once every peer is lost, every request that needs a peer has
//!   completed and nothing is left to send or to copy.

use tether_proto::wire::{
    FLAG_CHUNK, FLAG_PAYLOAD_IN_FILE, FLAG_REMOTE_KEY, FLAG_SPLIT, HEADER_LEN,
};
use tether_proto::{
    Completion, CompletionError, Engine, EngineConfig, FrameHeader, FrameKind, PayloadSink,
    PutSource, Region, RemoteKey, ReqId, RmaKind, RmaStatus, SinkToken, TransmitPayload,
};

use crate::input::Input;

const ME: u32 = 0;
const PEERS: [u32; 2] = [1, 2];
/// The decoder's bound on an `Eager` payload.
const MAX_EAGER: u64 = 4096;
/// The largest user buffer (above every eager limit the script picks).
const MAX_BUF: usize = 6000;

/// Runs the script in `data`; panics on a finding.
pub fn engine(data: &[u8]) {
    let mut input = Input::new(data);
    let Some(first) = input.u8() else {
        return;
    };
    let eager_limit = [0, 1, 64, MAX_EAGER][usize::from(first % 4)];
    let mut h = Harness::new(eager_limit);
    if first & 4 != 0 {
        h.engine.set_remote_memory(PEERS[0], u64::MAX);
        h.engine
            .set_split_bytes([0, 1, 4096, 8192][usize::from((first >> 3) % 4)]);
    }
    while let Some(op) = input.u8() {
        if h.step(op, &mut input).is_none() {
            break;
        }
    }
    h.finish();
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Send { dest: u32 },
    Recv { source: Option<u32> },
}

struct Tracked {
    req: ReqId,
    role: Role,
    /// Index into `Harness::buffers`.
    buf: usize,
    cancelled: bool,
    freed: bool,
}

/// A payload the link has not finished reading.
enum Pending {
    Region {
        region: Region,
        token: SinkToken,
    },
    Owned {
        buf: Vec<u8>,
        token: SinkToken,
        /// For a remote key: one that fits what its frame says.
        key: Option<RemoteKey>,
    },
}

struct Harness {
    engine: Engine,
    /// The user buffers, each the memory of one request, kept until the
    /// end (a `Box<[u8]>` does not move when the `Vec` grows).
    buffers: Vec<Box<[u8]>>,
    tracked: Vec<Tracked>,
    /// Per hostile peer (index into `PEERS`): next sequence number,
    /// whether the link is closed, the payload it is in the middle of.
    seq: [u64; 2],
    closed: [bool; 2],
    pending: [Option<Pending>; 2],
    /// `Rts` the engine sent: (peer, sender_req, msg_size).
    rts_sent: Vec<(u32, u64, u64)>,
    /// `Cts` the engine sent: (peer, receiver_req, granted).
    cts_sent: Vec<(u32, u64, u64)>,
    fill: u8,
    /// Remote memory operations carried out, for how the next one ends.
    copies: u8,
}

impl Harness {
    fn new(eager_limit: u64) -> Harness {
        Harness {
            engine: Engine::new(EngineConfig {
                me: ME,
                eager_limit,
            }),
            buffers: Vec::new(),
            tracked: Vec::new(),
            seq: [0; 2],
            closed: [false; 2],
            pending: [None, None],
            rts_sent: Vec::new(),
            cts_sent: Vec::new(),
            fill: 0,
            copies: 0,
        }
    }

    /// One operation; `None` when the input ran out.
    fn step(&mut self, op: u8, input: &mut Input) -> Option<()> {
        match op % 11 {
            0 => {
                let dest = [ME, PEERS[0], PEERS[1]][usize::from(input.u8()? % 3)];
                let (context, tag) = envelope(input.u8()?);
                let region = self.buffer(input.u16()?);
                let req = self.engine.isend(dest, context, tag, region);
                self.track(req, Role::Send { dest });
            }
            1 => {
                let b = input.u8()?;
                let source = [None, Some(ME), Some(PEERS[0]), Some(PEERS[1])][usize::from(b % 4)];
                let (context, tag) = envelope(b >> 2);
                let tag = (b & 0x80 == 0).then_some(tag);
                let region = self.buffer(input.u16()?);
                let req = self.engine.irecv(source, context, tag, region);
                self.track(req, Role::Recv { source });
            }
            2 => {
                let peer = usize::from(input.u8()? % 2);
                let bytes: [u8; HEADER_LEN] = input.take(HEADER_LEN)?.try_into().expect("header");
                let how = input.u8().unwrap_or(0);
                self.frame(peer, &bytes, how);
            }
            3 => {
                let peer = usize::from(input.u8()? % 2);
                let bytes = self.build_frame(peer, input)?;
                let how = input.u8().unwrap_or(0);
                self.frame(peer, &bytes, how);
            }
            4 => {
                let peer = usize::from(input.u8()? % 2);
                self.finish_payload(peer);
            }
            5 => {
                let i = self.pick(input.u8()?)?;
                let t = &self.tracked[i];
                if !t.freed && matches!(t.role, Role::Recv { .. }) && self.engine.cancel(t.req) {
                    self.tracked[i].cancelled = true;
                    assert!(
                        self.engine.completion(self.tracked[i].req).is_some(),
                        "a cancelled receive completes at once"
                    );
                }
            }
            6 => {
                let i = self.pick(input.u8()?)?;
                if !self.tracked[i].freed {
                    if let Some(c) = self.engine.take_completion(self.tracked[i].req) {
                        self.check_completion(i, c);
                        self.tracked[i].freed = true;
                        assert!(!self.engine.is_live(self.tracked[i].req));
                    }
                }
            }
            7 => {
                let peer = usize::from(input.u8()? % 2);
                self.lose(peer);
            }
            8 => self.drain(),
            9 => {
                let peer = PEERS[usize::from(input.u8()? % 2)];
                let limit = u64::from(input.u16()?);
                self.engine.set_peer_eager_limit(peer, limit);
                assert_eq!(self.engine.eager_limit(peer), limit);
            }
            _ => {
                let peer = PEERS[usize::from(input.u8()? % 2)];
                let (context, tag) = envelope(input.u8()?);
                let mut header = FrameHeader::new(FrameKind::Eager);
                header.context = context;
                header.tag = tag;
                header.payload_len = u64::from(input.u16()?);
                if let Some(region) = self.engine.eager_destination(peer, &header) {
                    assert!(region.len as u64 <= header.payload_len);
                    self.check_region(region, true);
                }
                let _ = self.engine.iprobe(Some(peer), context, Some(tag));
                let _ = self.engine.has_posted_overlapping(peer, context, None);
            }
        }
        Some(())
    }

    /// A fresh buffer of `len % (MAX_BUF + 1)` bytes.
    fn buffer(&mut self, len: u16) -> Region {
        let len = usize::from(len) % (MAX_BUF + 1);
        let mut buf = vec![0xa5u8; len].into_boxed_slice();
        let region = Region {
            ptr: buf.as_mut_ptr(),
            len,
        };
        self.buffers.push(buf);
        region
    }

    fn track(&mut self, req: ReqId, role: Role) {
        self.tracked.push(Tracked {
            req,
            role,
            buf: self.buffers.len() - 1,
            cancelled: false,
            freed: false,
        });
    }

    fn pick(&self, b: u8) -> Option<usize> {
        (!self.tracked.is_empty()).then(|| usize::from(b) % self.tracked.len())
    }

    /// A well-formed header (right magic, version and sequence number)
    /// from a few bytes; the decoder may still refuse its length.
    fn build_frame(&mut self, peer: usize, input: &mut Input) -> Option<[u8; HEADER_LEN]> {
        use FrameKind::*;
        const KINDS: [FrameKind; 16] = [
            Eager,
            Rts,
            Cts,
            Data,
            Eager,
            Rts,
            Cts,
            Data,
            Landed,
            Data,
            Hello,
            HelloAck,
            HelloReject,
            Bye,
            Abort,
            ReadDone,
        ];
        let b = input.u8()?;
        let mut header = FrameHeader::new(KINDS[usize::from(b % 16)]);
        let (context, tag) = envelope(input.u8()?);
        header.context = context;
        header.tag = tag;
        header.seq = self.seq[peer];
        let from = PEERS[peer];
        match header.kind {
            Eager => header.payload_len = u64::from(input.u16()?) % (MAX_EAGER + 100),
            Rts => {
                header.msg_size = if b & 0x10 != 0 {
                    input.u64()?
                } else {
                    u64::from(input.u16()?)
                };
                header.sender_req = u64::from(input.u8()?);
                if b & 0x20 != 0 {
                    header.flags = FLAG_REMOTE_KEY;
                    header.payload_len = RemoteKey::ENCODED_LEN as u64;
                }
            }
            Cts => {
                let sent: Vec<_> = self.rts_sent.iter().filter(|r| r.0 == from).collect();
                let i = usize::from(input.u8()?);
                let grant = u64::from(input.u16()?);
                match sent.get(i % sent.len().max(1)) {
                    Some(&&(_, sender_req, size)) if b & 0x10 == 0 => {
                        header.sender_req = sender_req;
                        header.msg_size = if b & 0x20 == 0 {
                            size.min(grant)
                        } else {
                            grant
                        };
                    }
                    _ => {
                        header.sender_req = u64::from(input.u32()?);
                        header.msg_size = grant;
                    }
                }
                header.receiver_req = u64::from(input.u8()?);
                let keyed = input.u8()?;
                if keyed & 1 != 0 {
                    header.flags = FLAG_REMOTE_KEY;
                    header.payload_len = RemoteKey::ENCODED_LEN as u64;
                    if keyed & 2 != 0 {
                        header.flags |= FLAG_SPLIT;
                    }
                }
            }
            Data => {
                let sent: Vec<_> = self.cts_sent.iter().filter(|r| r.0 == from).collect();
                let i = usize::from(input.u8()?);
                match sent.get(i % sent.len().max(1)) {
                    Some(&&(_, receiver_req, granted)) if b & 0x10 == 0 => {
                        header.receiver_req = receiver_req;
                        header.payload_len = granted;
                        header.msg_size = granted;
                    }
                    _ => {
                        header.receiver_req = u64::from(input.u32()?);
                        header.payload_len = u64::from(input.u16()?);
                    }
                }
                if b & 0x20 != 0 {
                    header.flags = FLAG_PAYLOAD_IN_FILE;
                } else if b & 0x40 != 0 {
                    // A chunk of striped data: some part of the grant.
                    header.flags = FLAG_CHUNK;
                    let offset = u64::from(input.u16()?);
                    header.sender_req = offset;
                    header.payload_len =
                        header.payload_len.saturating_sub(offset) % (u64::from(input.u16()?) + 1);
                }
            }
            Landed => header.receiver_req = u64::from(input.u8()?),
            Hello | HelloAck | HelloReject | Challenge | Proof => {
                header.payload_len = u64::from(input.u8()?)
            }
            ReadDone => {
                let sent: Vec<_> = self.rts_sent.iter().filter(|r| r.0 == from).collect();
                let i = usize::from(input.u8()?);
                header.sender_req = match sent.get(i % sent.len().max(1)) {
                    Some(&&(_, sender_req, _)) => sender_req,
                    None => u64::from(input.u8()?),
                };
                header.tag = i32::from(b & 0x20 != 0);
            }
            // One-sided frames are the `onesided` target's (onesided.rs).
            Bye | Abort | RmaRequest | RmaReply => {}
        }
        Some(header.encode())
    }

    /// A frame from `PEERS[peer]`, as the runtime handles it; `how` says
    /// what the link does with its payload: read it now (0), later (1),
    /// or die in the middle of it (2).
    fn frame(&mut self, peer: usize, bytes: &[u8; HEADER_LEN], how: u8) {
        if self.closed[peer] {
            return;
        }
        // A link reads a payload before its next header.
        self.finish_payload(peer);
        let header = match FrameHeader::decode(bytes, self.seq[peer], MAX_EAGER) {
            Ok(header) => header,
            Err(_) => return self.lose(peer),
        };
        self.seq[peer] += 1;
        let sink = match self.engine.on_header(PEERS[peer], &header) {
            Ok(sink) => sink,
            Err(_) => return self.lose(peer),
        };
        assert!(
            matches!(
                header.kind,
                FrameKind::Eager
                    | FrameKind::Rts
                    | FrameKind::Cts
                    | FrameKind::Data
                    | FrameKind::ReadDone
                    | FrameKind::Landed
            ),
            "the engine took a frame off the data path: {header:?}"
        );
        let pending = match sink {
            PayloadSink::None => {
                assert_eq!(header.payload_len, 0, "no sink for a payload: {header:?}");
                return;
            }
            PayloadSink::Region {
                region,
                discard,
                token,
            } => {
                assert_eq!(
                    region.len as u64 + discard,
                    header.payload_len,
                    "{header:?}"
                );
                self.check_region(region, true);
                Pending::Region { region, token }
            }
            PayloadSink::Owned { buf, token } => {
                assert_eq!(buf.len() as u64, header.payload_len, "{header:?}");
                let key = (header.flags & FLAG_REMOTE_KEY != 0).then(|| RemoteKey {
                    id: match header.kind {
                        FrameKind::Rts => header.sender_req,
                        _ => header.receiver_req,
                    },
                    addr: 0x1000,
                    len: header.msg_size.min(u64::MAX - 0x1000),
                });
                Pending::Owned { buf, token, key }
            }
        };
        self.pending[peer] = Some(pending);
        match how % 3 {
            0 => self.finish_payload(peer),
            1 => {}
            _ => self.lose(peer),
        }
    }

    /// The link to `PEERS[peer]` has read the payload it was reading.
    fn finish_payload(&mut self, peer: usize) {
        let Some(pending) = self.pending[peer].take() else {
            return;
        };
        self.fill = self.fill.wrapping_add(1);
        match pending {
            Pending::Region { region, token } => {
                self.check_region(region, true);
                let bytes = vec![self.fill; region.len];
                // SAFETY: `region` lies inside one of `self.buffers`
                // (checked above), which live as long as `self`.
                unsafe { region.copy_from(&bytes) };
                self.engine.payload_done(token, None);
            }
            Pending::Owned {
                mut buf,
                token,
                key,
            } => {
                match key {
                    Some(key) if self.fill & 1 == 0 => buf.copy_from_slice(&key.encode()),
                    _ => buf.fill(self.fill),
                }
                self.engine.payload_done(token, Some(buf));
            }
        }
    }

    /// The link to `PEERS[peer]` closes; a payload it was reading is lost.
    fn lose(&mut self, peer: usize) {
        self.pending[peer] = None;
        self.closed[peer] = true;
        self.engine.peer_lost(PEERS[peer]);
    }

    /// Hands every frame the engine wants sent to its link.
    fn drain(&mut self) {
        while let Some(t) = self.engine.poll_transmit() {
            let peer = PEERS
                .iter()
                .position(|&p| p == t.peer)
                .unwrap_or_else(|| panic!("a frame for {}: {:?}", t.peer, t.header));
            assert!(!self.closed[peer], "a frame for lost peer: {:?}", t.header);
            let h = &t.header;
            match h.kind {
                FrameKind::Rts => self.rts_sent.push((t.peer, h.sender_req, h.msg_size)),
                FrameKind::Cts => self.cts_sent.push((t.peer, h.receiver_req, h.msg_size)),
                FrameKind::Eager | FrameKind::Data => {}
                FrameKind::ReadDone => assert_eq!(t.peer, PEERS[0], "{h:?}"),
                other => panic!("the engine sent a {other:?} frame"),
            }
            if h.flags & FLAG_REMOTE_KEY != 0 {
                assert_eq!(t.peer, PEERS[0], "a key for a peer out of reach: {h:?}");
                let TransmitPayload::Owned(bytes) = &t.payload else {
                    panic!("a keyed frame without its key: {h:?}");
                };
                let key = RemoteKey::decode(bytes).expect("the engine's key decodes");
                // An Rts announces its send's buffer, a Cts grants part of
                // its receive's.
                let (req, recv) = match h.kind {
                    FrameKind::Rts => (h.sender_req, false),
                    FrameKind::Cts => (h.receiver_req, true),
                    other => panic!("a {other:?} frame with a key"),
                };
                assert_eq!((key.id, key.len), (req, h.msg_size), "{h:?}");
                let region = Region {
                    ptr: key.addr as *mut u8,
                    len: key.len as usize,
                };
                self.check_region(region, recv);
            }
            if let TransmitPayload::Borrowed(region) = t.payload {
                let req = t.completes.expect("a borrowed payload names its send");
                let i = self
                    .tracked
                    .iter()
                    .position(|x| x.req == req && !x.freed)
                    .expect("a borrowed payload of a live send");
                assert_eq!(self.tracked[i].role, Role::Send { dest: t.peer });
                let buf = &self.buffers[self.tracked[i].buf];
                assert!(inside(region, buf), "send payload outside its buffer");
            }
            if let Some(req) = t.completes {
                self.engine.transmit_done(req);
            }
        }
        while let Some(op) = self.engine.poll_rma() {
            assert_eq!(op.peer, PEERS[0], "remote memory of a peer out of reach");
            assert!(!self.closed[0], "remote memory of a lost peer");
            assert!(op.remote_address().is_some(), "outside its key: {op:?}");
            match &op.kind {
                RmaKind::Put(PutSource::Region(r)) => self.check_region(*r, false),
                RmaKind::Put(PutSource::Gathered(_)) => panic!("the script gathers nothing"),
                RmaKind::Get(r) => self.check_region(*r, true),
                RmaKind::Atomic(_) => panic!("the script has no native atomics"),
            }
            self.copies = self.copies.wrapping_add(1);
            let status = [
                RmaStatus::Done,
                RmaStatus::Done,
                RmaStatus::Refused,
                RmaStatus::Failed,
            ][usize::from(self.copies % 4)];
            self.engine.rma_done(op, status);
            // A failed copy is followed by the loss of the peer.
            if status == RmaStatus::Failed {
                self.lose(0);
            }
        }
    }

    /// `region` lies inside the buffer of a live, pending receive (`recv`)
    /// or send. An empty region names no memory (empty buffers share one
    /// dangling address), so it passes.
    fn check_region(&self, region: Region, recv: bool) {
        if region.len == 0 {
            return;
        }
        let owner = self.tracked.iter().find(|t| {
            !t.freed
                && matches!(t.role, Role::Recv { .. }) == recv
                && inside(region, &self.buffers[t.buf])
        });
        let owner = owner.unwrap_or_else(|| panic!("{region:?} is in no buffer of a live request"));
        assert!(
            self.engine.completion(owner.req).is_none(),
            "{region:?} belongs to a completed request"
        );
    }

    fn check_completion(&self, i: usize, c: Completion) {
        let t = &self.tracked[i];
        let len = self.buffers[t.buf].len() as u64;
        assert_eq!(
            c.error == Some(CompletionError::Cancelled),
            t.cancelled,
            "{c:?}"
        );
        match (t.role, c.error) {
            (Role::Recv { source }, None) => {
                assert!(c.bytes <= len, "{c:?} into {len} bytes");
                if let Some(source) = source {
                    assert_eq!(c.source, source, "{c:?}");
                }
            }
            (Role::Recv { .. }, Some(CompletionError::Truncated)) => {
                assert!(c.bytes > len, "{c:?} into {len} bytes")
            }
            (Role::Send { .. }, None) => assert_eq!((c.source, c.bytes), (ME, len), "{c:?}"),
            (Role::Send { .. }, Some(CompletionError::Truncated)) => panic!("a send {c:?}"),
            (_, Some(CompletionError::PeerLost | CompletionError::Cancelled)) => {}
            (_, Some(CompletionError::RmaRange)) => panic!("a two-sided request {c:?}"),
        }
    }

    /// Reads what the links are reading, sends what is queued, then loses
    /// every peer and checks that nothing is left waiting for one.
    fn finish(mut self) {
        for peer in 0..PEERS.len() {
            self.finish_payload(peer);
        }
        self.drain();
        for peer in 0..PEERS.len() {
            if !self.closed[peer] {
                self.lose(peer);
            }
        }
        if let Some(t) = self.engine.poll_transmit() {
            panic!("a frame after every peer was lost: {t:?}");
        }
        assert!(!self.engine.has_rma(), "a copy after every peer was lost");
        for i in 0..self.tracked.len() {
            let t = &self.tracked[i];
            if t.freed {
                continue;
            }
            let needs_peer = match t.role {
                Role::Send { dest } => dest != ME,
                Role::Recv { source } => source.is_some_and(|s| s != ME),
            };
            let done = self.engine.completion(t.req);
            assert!(
                done.is_some() || !needs_peer,
                "{:?} still pending after every peer was lost",
                t.role
            );
            assert!(self.engine.granted_region(t.req).is_none());
            if let Some(c) = done {
                self.check_completion(i, c);
            }
        }
    }
}

/// A context (0 or 1) and a tag (-1 to 2) from one byte: few values, so
/// that messages and receives meet.
fn envelope(b: u8) -> (u32, i32) {
    (u32::from(b & 1), i32::from((b >> 1) & 3) - 1)
}

/// Whether `region` lies inside `buf`.
fn inside(region: Region, buf: &[u8]) -> bool {
    let start = buf.as_ptr() as usize;
    let at = region.ptr as usize;
    at >= start
        && at
            .checked_add(region.len)
            .is_some_and(|end| end <= start + buf.len())
}

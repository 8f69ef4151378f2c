//! The one-sided target: one `tether_proto::Engine` (universe rank 0)
//! with windows, whose peers 1 and 2 are hostile. The fuzz bytes are a
//! script: the local program creates windows (0 bytes, a null pointer,
//! up to 4 KiB) and frees them, issues put, rput, get, rget, accumulate,
//! fetch-and-op and compare-and-swap to itself and the peers, marks and
//! polls flushes; the peers send `RmaRequest` and `RmaReply` frames built
//! from a few bytes (window ids, offsets and lengths near the windows'
//! sizes, operation ids of the operations the engine sent) or from raw
//! fields, on two links each, their payloads read at once, later or
//! never; the harness computes or refuses the applies the engine hands
//! out (holding one while other work runs), carries out the remote memory
//! operations of windows whose address it gave (peer 1's memory is
//! reachable when the first byte says so) with a done, refused or failed
//! outcome, and loses peers.
//!
//! As the runtime does, a refused frame closes its peer (both links) and
//! reports `peer_lost`. The engine must never panic; the target also
//! checks what the runtime relies on:
//! - every region the engine hands out lies where it should: a put's sink
//!   and an apply's target are exactly the accessed bytes of a live
//!   window, a get's borrowed reply too; a reply's sink lies in the result
//!   buffer of a live operation, a request's borrowed payload in its live
//!   operation's source, a remote memory operation's local memory in its
//!   live operation's buffer and its access inside the window's key;
//! - no window's memory (nor the guard bytes around it) changes except
//!   where a put or an apply writes it: a refused request touches nothing;
//! - every request a peer sends is answered exactly once, with the status
//!   the harness expects (out of range, no window, done, or refused by the
//!   runtime), once its payload is in or its apply is handed back;
//! - local calls fail exactly when they should (no window, not a member,
//!   out of range or misaligned), and window ids are busy exactly when
//!   taken;
//! - at most one apply is out, and one is handed out exactly when the
//!   oldest queued has its payload;
//! - a flush poll is `Some` exactly when every operation it covers is
//!   answered (or its peer lost);
//! - no frame goes to a lost peer; an rput and an rget complete truthfully;
//! - once the peers are served and then lost, nothing is pending, every
//!   flush is complete, and every window can be freed.

use std::collections::{HashMap, VecDeque};

use tether_proto::wire::onesided::{ReplyStatus, RmaReply, RmaRequest};
use tether_proto::wire::HEADER_LEN;
use tether_proto::{
    Apply, ApplyStatus, CompletionError, Engine, EngineConfig, FlushMark, FrameHeader, FrameKind,
    PayloadSink, PutSource, Reduction, Region, ReqId, RmaCode, RmaError, RmaKind, RmaOp, RmaOwner,
    RmaStatus, RmaTarget, SinkToken, TransmitPayload,
};

use crate::input::Input;

const ME: u32 = 0;
const PEERS: [u32; 2] = [1, 2];
/// Bytes around each window's memory that nobody may touch.
const GUARD: usize = 16;
/// Window sizes the script picks from.
const SIZES: [usize; 8] = [0, 1, 8, 16, 24, 64, 100, 4096];
/// The decoder's bound on an `Eager` payload (not used by these frames).
const MAX_EAGER: u64 = 4096;

/// Runs the script in `data`; panics on a finding.
pub fn onesided(data: &[u8]) {
    let mut input = Input::new(data);
    let Some(first) = input.u8() else {
        return;
    };
    let mut h = Harness::new([0, 1, 64, 4096][usize::from(first % 4)]);
    if first & 4 != 0 {
        h.engine.set_remote_memory(PEERS[0], u64::MAX);
    }
    h.engine
        .set_window_direct_bytes([0, 1, 8, 64][usize::from((first >> 3) % 4)]);
    while let Some(op) = input.u8() {
        if h.step(op, &mut input).is_none() {
            break;
        }
        h.check_memory();
    }
    h.finish();
}

/// One window this process created: its memory with guards around it,
/// and what that memory must hold.
struct Win {
    id: u32,
    mem: Box<[u8]>,
    shadow: Vec<u8>,
    region: Region,
    /// Peers' window sizes (`None`: not a member).
    sizes: [Option<u64>; 2],
    live: bool,
}

/// An operation the local program issued.
struct Op {
    target: u32,
    win: u32,
    code: RmaCode,
    len: u64,
    source: Option<Region>,
    result: Option<Region>,
    req: Option<ReqId>,
    /// Outstanding: not answered, its target not lost.
    live: bool,
    /// An rput whose frame was handed over: its source is the program's.
    released: bool,
    /// The target's window address when the operation was issued.
    address: Option<u64>,
}

/// A reply the engine owes a peer.
struct Owed {
    peer: u32,
    window: u32,
    origin_op: u64,
    /// `None` while its apply is queued or out.
    status: Option<ReplyStatus>,
    len: u64,
    /// A get's: the window's bytes the reply borrows.
    get: Option<Region>,
    /// Its payload is in (a put's reply waits for it).
    ready: bool,
}

/// An apply the engine should hand out, in order.
struct Expect {
    origin: u32,
    window: u32,
    code: RmaCode,
    target: Region,
    ready: bool,
    /// An apply for a peer: its owed reply (index into `Harness::owed`).
    owed: Option<usize>,
    /// An apply of this process's own operation (index into `ops`).
    op: Option<usize>,
    id: u64,
}

/// What a finished payload means.
enum Then {
    Owed(usize),
    Apply(u64),
    Op(usize),
    Nothing,
}

enum Pending {
    Region(Region, SinkToken, Then),
    Owned(Vec<u8>, SinkToken, Then),
}

struct Harness {
    engine: Engine,
    wins: Vec<Win>,
    buffers: Vec<Box<[u8]>>,
    ops: Vec<Op>,
    by_id: HashMap<u64, usize>,
    /// The engine's next operation id, as the harness counts.
    next_id: u64,
    owed: Vec<Option<Owed>>,
    applies: VecDeque<Expect>,
    next_apply: u64,
    out: Option<(Apply, Expect)>,
    rma_out: Vec<(RmaOp, usize)>,
    marks: Vec<(FlushMark, Vec<usize>)>,
    /// Addresses given for peer 1's windows, by window id.
    addresses: HashMap<u32, u64>,
    seq: [[u64; 2]; 2],
    pending: [[Option<Pending>; 2]; 2],
    lost: [bool; 2],
    fill: u8,
    outcomes: u8,
}

impl Harness {
    fn new(eager_limit: u64) -> Harness {
        Harness {
            engine: Engine::new(EngineConfig {
                me: ME,
                eager_limit,
            }),
            wins: Vec::new(),
            buffers: Vec::new(),
            ops: Vec::new(),
            by_id: HashMap::new(),
            next_id: 1,
            owed: Vec::new(),
            applies: VecDeque::new(),
            next_apply: 0,
            out: None,
            rma_out: Vec::new(),
            marks: Vec::new(),
            addresses: HashMap::new(),
            seq: [[0; 2]; 2],
            pending: [[None, None], [None, None]],
            lost: [false; 2],
            fill: 0,
            outcomes: 0,
        }
    }

    fn step(&mut self, op: u8, input: &mut Input) -> Option<()> {
        match op % 16 {
            0 => self.create(input)?,
            1 => self.free(input.u8()?),
            2 | 3 => self.issue(input)?,
            4 => {
                let (peer, link) = self.link(input.u8()?);
                let bytes = self.build_request(peer, input)?;
                let how = input.u8().unwrap_or(0);
                self.frame(peer, link, &bytes, how);
            }
            5 => {
                let (peer, link) = self.link(input.u8()?);
                let bytes = self.build_reply(peer, input)?;
                let how = input.u8().unwrap_or(0);
                self.frame(peer, link, &bytes, how);
            }
            6 => {
                let (peer, link) = self.link(input.u8()?);
                let bytes = self.raw_frame(peer, link, input)?;
                let how = input.u8().unwrap_or(0);
                self.frame(peer, link, &bytes, how);
            }
            7 => {
                let (peer, link) = self.link(input.u8()?);
                self.finish_payload(peer, link);
            }
            8 => self.poll_apply(),
            9 => self.apply_done(input.u8()? & 1 == 0),
            10 => self.mark(input.u8()?, input.u8()?),
            11 => {
                let i = usize::from(input.u8()?);
                self.poll_mark(i);
            }
            12 => self.drain(),
            13 => {
                let i = usize::from(input.u8()?);
                self.carry_out(i);
            }
            14 => self.lose(usize::from(input.u8()? % 2)),
            _ => {
                let b = input.u8()?;
                match b % 4 {
                    0 | 1 => {
                        let id = u32::from(input.u8()? % 4);
                        // A member's address, as any member may announce
                        // it: plausible, raw, or near the end of memory.
                        let address = match b & 0x0c {
                            4 => input.u64()?,
                            8 => u64::MAX - u64::from(input.u8()?),
                            _ => 0x7f00_0000_0000 + u64::from(id) * 0x10_0000,
                        };
                        let rank = [PEERS[0], PEERS[1], ME, 9][usize::from(b >> 4) % 4];
                        self.engine.win_set_address(id, rank, address);
                        if rank == PEERS[0] && self.live_win(id).is_some() {
                            self.addresses.insert(id, address);
                        }
                    }
                    2 => self.completions(),
                    _ => self.engine.set_window_direct_bytes(u64::from(input.u8()?)),
                }
            }
        }
        Some(())
    }

    /// A peer (index into `PEERS`) and one of its two links.
    fn link(&self, b: u8) -> (usize, usize) {
        (usize::from(b & 1), usize::from((b >> 1) & 1))
    }

    fn live_win(&self, id: u32) -> Option<usize> {
        self.wins.iter().rposition(|w| w.live && w.id == id)
    }

    /// The window size the program knows of `rank` on window `id`.
    fn size_of(&self, id: u32, rank: u32) -> Option<u64> {
        let w = &self.wins[self.live_win(id)?];
        match rank {
            ME => Some(w.region.len as u64),
            r => PEERS.iter().position(|&p| p == r).and_then(|i| w.sizes[i]),
        }
    }

    fn create(&mut self, input: &mut Input) -> Option<()> {
        let b = input.u8()?;
        let id = u32::from(b % 4);
        let size = SIZES[usize::from((b >> 2) % 8)];
        let null = size == 0 && b & 0x20 != 0;
        let s = input.u8()?;
        let sizes = [s, s >> 4].map(|x| match x % 16 {
            0 => None,
            n => Some(SIZES[usize::from(n % 8)] as u64 + u64::from(n >> 3) * 3),
        });
        let mut mem = vec![0u8; size + 2 * GUARD].into_boxed_slice();
        for (i, x) in mem.iter_mut().enumerate() {
            *x = (i as u8).wrapping_mul(31).wrapping_add(7);
        }
        let region = Region {
            ptr: if null {
                std::ptr::null_mut()
            } else {
                mem[GUARD..].as_mut_ptr()
            },
            len: size,
        };
        let list: Vec<(u32, u64)> = PEERS
            .iter()
            .zip(sizes)
            .filter_map(|(&p, s)| s.map(|s| (p, s)))
            .collect();
        let taken = self.live_win(id).is_some();
        let got = self.engine.win_create(id, region, &list);
        if taken {
            assert_eq!(got, Err(RmaError::Busy), "window {id} created twice");
            return Some(());
        }
        assert_eq!(got, Ok(()), "window {id} is free");
        let shadow = mem.to_vec();
        self.addresses.remove(&id);
        self.wins.push(Win {
            id,
            mem,
            shadow,
            region,
            sizes,
            live: true,
        });
        Some(())
    }

    fn free(&mut self, b: u8) {
        let id = u32::from(b % 4);
        let got = self.engine.win_free(id);
        let Some(w) = self.live_win(id) else {
            assert_eq!(got, Err(RmaError::NoWindow));
            return;
        };
        let busy = self.ops.iter().any(|o| o.live && o.win == id)
            || self.applies.iter().any(|e| e.window == id)
            || self.out.as_ref().is_some_and(|(_, e)| e.window == id)
            || self.pending.iter().flatten().flatten().any(|p| {
                matches!(p, Pending::Region(_, _, Then::Owed(i))
                    if self.owed[*i].as_ref().is_some_and(|o| o.window == id))
            });
        if busy {
            assert_eq!(got, Err(RmaError::Busy), "window {id} freed while in use");
        }
        if got.is_ok() {
            self.wins[w].live = false;
            self.addresses.remove(&id);
        }
    }

    /// A fresh buffer of `len` bytes for an operation.
    fn buffer(&mut self, len: usize) -> Region {
        let mut buf = vec![0x5au8; len].into_boxed_slice();
        for (i, x) in buf.iter_mut().enumerate() {
            *x = i as u8;
        }
        let region = Region {
            ptr: buf.as_mut_ptr(),
            len,
        };
        self.buffers.push(buf);
        region
    }

    /// An offset and a length near the edges of a window of `size` bytes.
    fn access(size: u64, input: &mut Input) -> Option<(u64, u64)> {
        let b = input.u8()?;
        let len = match b % 8 {
            0 => 0,
            1 => 1,
            2 => 8,
            3 => 16,
            4 => size,
            5 => size + 1,
            6 => u64::from(input.u8()?),
            _ => u64::from(input.u16()?),
        };
        let offset = match (b >> 3) % 8 {
            0 => 0,
            1 => size.saturating_sub(len),
            2 => size,
            3 => size.saturating_sub(len) + 1,
            4 => u64::from(input.u8()?),
            5 => u64::MAX - u64::from(input.u8()?),
            6 => size.saturating_sub(len) & !7,
            _ => u64::from(input.u16()?),
        };
        Some((offset, len))
    }

    fn issue(&mut self, input: &mut Input) -> Option<()> {
        let b = input.u8()?;
        let kind = b % 7;
        let target = [ME, PEERS[0], PEERS[1], 9][usize::from((b >> 3) % 4)];
        let win = u32::from((b >> 5) % 4);
        let size = self.size_of(win, target).unwrap_or(64);
        let (offset, len) = Self::access(size, input)?;
        let len = len.min(8192);
        let at = RmaTarget {
            win,
            rank: target,
            offset,
        };
        let reduction = Reduction {
            datatype: input.u8()?,
            op: input.u8()?,
        };
        let atomic = kind >= 5;
        let mut ok_len = true;
        let (source, result, code, got);
        match kind {
            0 | 1 => {
                let s = self.buffer(len as usize);
                (source, result) = (Some(s), None);
                if kind == 0 {
                    got = self.engine.win_put(at, s).map(|()| None);
                } else {
                    got = self.engine.win_rput(at, s).map(Some);
                }
                code = RmaCode::Put;
            }
            2 | 3 => {
                let r = self.buffer(len as usize);
                (source, result) = (None, Some(r));
                if kind == 2 {
                    got = self.engine.win_get(at, r).map(|()| None);
                } else {
                    got = self.engine.win_rget(at, r).map(Some);
                }
                code = RmaCode::Get;
            }
            4 => {
                let s = self.buffer(len as usize);
                (source, result) = (Some(s), None);
                got = self.engine.win_accumulate(at, s, reduction).map(|()| None);
                code = RmaCode::Accumulate;
            }
            5 => {
                let s = self.buffer(len as usize);
                let rlen = if input.u8()? & 1 == 0 { len } else { len + 1 };
                ok_len = rlen == len;
                let r = self.buffer(rlen as usize);
                (source, result) = (None, Some(r));
                got = self
                    .engine
                    .win_fetch_and_op(at, s, r, reduction)
                    .map(|()| None);
                code = RmaCode::FetchAndOp;
            }
            _ => {
                let v = self.buffer(len as usize);
                let clen = if input.u8()? & 1 == 0 { len } else { len + 1 };
                ok_len = clen == len;
                let c = self.buffer(clen as usize);
                let r = self.buffer(len as usize);
                (source, result) = (None, Some(r));
                got = self
                    .engine
                    .win_compare_and_swap(at, v, c, r, reduction.datatype)
                    .map(|()| None);
                code = RmaCode::CompareAndSwap;
            }
        }
        // What the call must answer.
        let element = (1..=16).contains(&len) && offset.is_multiple_of(len.max(1)) && ok_len;
        let expected = if atomic && !element {
            Err(RmaError::OutOfRange)
        } else if self.live_win(win).is_none() {
            Err(RmaError::NoWindow)
        } else {
            match self.size_of(win, target) {
                None => Err(RmaError::NotMember),
                Some(size) if offset.checked_add(len).is_none_or(|end| end > size) => {
                    Err(RmaError::OutOfRange)
                }
                Some(_) => Ok(()),
            }
        };
        let req = match (got, expected) {
            (Ok(req), Ok(())) => req,
            (Err(e), Err(x)) if e == x => return Some(()),
            (got, expected) => {
                panic!("{code:?} at {at:?} of {len} bytes: {got:?}, not {expected:?}")
            }
        };
        let lost = target != ME && self.lost[peer_index(target)];
        let i = self.ops.len();
        self.ops.push(Op {
            target,
            win,
            code,
            len,
            source,
            result,
            req,
            live: !lost,
            released: false,
            address: self
                .addresses
                .get(&win)
                .copied()
                .filter(|_| target == PEERS[0]),
        });
        if lost {
            if let Some(req) = req {
                let c = self.engine.completion(req).expect("fails at once");
                assert_eq!(c.error, Some(CompletionError::PeerLost));
            }
            return Some(());
        }
        self.by_id.insert(self.next_id, i);
        self.next_id += 1;
        if target == ME {
            let w = self.live_win(win).expect("checked");
            match code {
                RmaCode::Put => {
                    // The engine copies at once.
                    let s = source.expect("a put's source");
                    // SAFETY: the harness's own buffer.
                    let bytes = unsafe { s.as_slice() };
                    let at = GUARD + offset as usize;
                    self.wins[w].shadow[at..at + bytes.len()].copy_from_slice(bytes);
                    self.ops[i].live = false;
                }
                RmaCode::Get => self.ops[i].live = false,
                RmaCode::Accumulate if len == 0 => self.ops[i].live = false,
                _ => {
                    let target = slice(self.wins[w].region, offset, len);
                    let id = self.next_apply;
                    self.next_apply += 1;
                    self.applies.push_back(Expect {
                        origin: ME,
                        window: win,
                        code,
                        target,
                        ready: true,
                        owed: None,
                        op: Some(i),
                        id,
                    });
                }
            }
            if let Some(req) = req {
                let done = self.engine.completion(req).is_some();
                assert!(
                    done,
                    "an operation on this process's window completes at once"
                );
            }
        }
        Some(())
    }
}

fn peer_index(rank: u32) -> usize {
    PEERS
        .iter()
        .position(|&p| p == rank)
        .unwrap_or_else(|| panic!("rank {rank} is no peer"))
}

/// The `len` bytes at `offset` of `region`.
fn slice(region: Region, offset: u64, len: u64) -> Region {
    Region {
        ptr: region.ptr.wrapping_add(offset as usize),
        len: len as usize,
    }
}

/// Whether `inner` lies inside `outer` (an empty region names no memory,
/// so it passes).
fn inside(inner: Region, outer: Region) -> bool {
    if inner.len == 0 {
        return true;
    }
    let (start, at) = (outer.ptr as usize, inner.ptr as usize);
    at >= start
        && at
            .checked_add(inner.len)
            .is_some_and(|end| end <= start + outer.len)
}

impl Harness {
    /// An `RmaRequest` from `PEERS[peer]`, built from a few bytes: a
    /// window id this process used (or any), an access near its edges.
    fn build_request(&mut self, peer: usize, input: &mut Input) -> Option<FrameHeader> {
        let b = input.u8()?;
        let code = [
            RmaCode::Put,
            RmaCode::Get,
            RmaCode::Accumulate,
            RmaCode::FetchAndOp,
            RmaCode::CompareAndSwap,
            RmaCode::Put,
            RmaCode::Get,
            RmaCode::FetchAndOp,
        ][usize::from(b % 8)];
        let window = match b & 0x08 {
            0 => u32::from(input.u8()? % 5),
            _ => input.u32()?,
        };
        let size = self
            .live_win(window)
            .map_or(64, |w| self.wins[w].region.len as u64);
        let (offset, len) = Self::access(size, input)?;
        let request = RmaRequest {
            window,
            code,
            datatype: input.u8()?,
            op: input.u8()?,
            offset,
            len,
            origin_op: u64::from(input.u8()?),
        };
        let mut header = request.to_header();
        header.seq = self.seq[peer][0];
        if b & 0x10 != 0 {
            // A payload length that may not fit the operation.
            header.payload_len = header.payload_len.wrapping_add(u64::from(input.u8()?) % 3);
        }
        Some(header)
    }

    /// An `RmaReply` from `PEERS[peer]`: to an operation the engine sent
    /// it (or any id), with the data that operation expects (or not).
    fn build_reply(&mut self, peer: usize, input: &mut Input) -> Option<FrameHeader> {
        let b = input.u8()?;
        let from = PEERS[peer];
        let mine: Vec<(u64, usize)> = self
            .by_id
            .iter()
            .filter(|(_, &i)| self.ops[i].target == from)
            .map(|(&id, &i)| (id, i))
            .collect();
        let mut mine = mine;
        mine.sort_unstable();
        let pick = usize::from(input.u8()?);
        let (origin_op, window, expected) = match mine.get(pick % mine.len().max(1)) {
            Some(&(id, i)) if b & 0x08 == 0 => {
                let op = &self.ops[i];
                (id, op.win, op.code.reply_len(op.len))
            }
            _ => (u64::from(input.u8()?), u32::from(input.u8()? % 5), 0),
        };
        let status = [
            ReplyStatus::Done,
            ReplyStatus::Done,
            ReplyStatus::Done,
            ReplyStatus::OutOfRange,
            ReplyStatus::NoWindow,
            ReplyStatus::Refused,
            ReplyStatus::Done,
            ReplyStatus::Done,
        ][usize::from(b % 8)];
        let len = match (status, b & 0x30) {
            (ReplyStatus::Done, 0x30) => u64::from(input.u8()?),
            (ReplyStatus::Done, _) => expected,
            _ => 0,
        };
        let mut header = RmaReply {
            window: if b & 0x40 == 0 { window } else { window ^ 1 },
            status,
            origin_op,
            len,
        }
        .to_header();
        header.seq = self.seq[peer][0];
        Some(header)
    }

    /// A one-sided frame from raw fields.
    fn raw_frame(&mut self, peer: usize, link: usize, input: &mut Input) -> Option<FrameHeader> {
        let b = input.u8()?;
        let mut header = FrameHeader::new(if b & 1 == 0 {
            FrameKind::RmaRequest
        } else {
            FrameKind::RmaReply
        });
        header.context = u32::from(input.u8()?);
        header.tag = i32::from_le_bytes(input.take(4)?.try_into().expect("4 bytes"));
        header.msg_size = if b & 2 == 0 {
            u64::from(input.u16()?)
        } else {
            input.u64()?
        };
        header.sender_req = u64::from(input.u8()?);
        header.receiver_req = if b & 4 == 0 {
            u64::from(input.u16()?)
        } else {
            input.u64()?
        };
        header.payload_len = match b & 0x18 {
            0 => header.msg_size,
            8 => header.msg_size.wrapping_mul(2),
            _ => u64::from(input.u16()?),
        };
        header.flags = if b & 0x20 != 0 { input.u8()? } else { 0 };
        header.seq = self.seq[peer][link];
        Some(header)
    }

    /// A frame on link `link` of `PEERS[peer]`, as the runtime handles it;
    /// `how` says what the link does with its payload: read it now (0),
    /// later (1), or die in the middle of it (2).
    fn frame(&mut self, peer: usize, link: usize, header: &FrameHeader, how: u8) {
        if self.lost[peer] {
            return;
        }
        // A link reads a payload before its next header.
        self.finish_payload(peer, link);
        let mut header = *header;
        header.seq = self.seq[peer][link];
        let bytes: [u8; HEADER_LEN] = header.encode();
        let header = match FrameHeader::decode(&bytes, self.seq[peer][link], MAX_EAGER) {
            Ok(header) => header,
            Err(_) => return self.lose(peer),
        };
        self.seq[peer][link] += 1;
        let from = PEERS[peer];
        let got = self.engine.on_header(from, &header);
        let pending = match header.kind {
            FrameKind::RmaRequest => {
                let request = RmaRequest::from_header(&header).expect("the decoder checked it");
                let sink = got.unwrap_or_else(|e| panic!("{request:?} refused: {e}"));
                self.on_request(peer, &header, &request, sink)
            }
            FrameKind::RmaReply => match got {
                Ok(sink) => self.on_reply(peer, &header, sink),
                Err(_) => return self.lose(peer),
            },
            other => panic!("the script built a {other:?}"),
        };
        let Some(pending) = pending else {
            return;
        };
        self.pending[peer][link] = Some(pending);
        match how % 3 {
            0 => self.finish_payload(peer, link),
            1 => {}
            _ => self.lose(peer),
        }
    }

    /// What the engine must make of a request, and the payload to read.
    fn on_request(
        &mut self,
        peer: usize,
        header: &FrameHeader,
        r: &RmaRequest,
        sink: PayloadSink,
    ) -> Option<Pending> {
        let from = PEERS[peer];
        let w = self.live_win(r.window);
        let atomic = matches!(r.code, RmaCode::FetchAndOp | RmaCode::CompareAndSwap);
        let status = match w {
            None => ReplyStatus::NoWindow,
            Some(w) => {
                let size = self.wins[w].region.len as u64;
                let fits = r.offset.checked_add(r.len).is_some_and(|end| end <= size);
                if !fits || (atomic && !r.offset.is_multiple_of(r.len.max(1))) {
                    ReplyStatus::OutOfRange
                } else {
                    ReplyStatus::Done
                }
            }
        };
        let mut owed = Owed {
            peer: from,
            window: r.window,
            origin_op: r.origin_op,
            status: Some(status),
            len: 0,
            get: None,
            ready: true,
        };
        if status != ReplyStatus::Done {
            self.owe(owed);
            return match sink {
                PayloadSink::None => {
                    assert_eq!(header.payload_len, 0, "{r:?}");
                    None
                }
                PayloadSink::Region {
                    region,
                    discard,
                    token,
                } => {
                    assert_eq!((region.len as u64, discard), (0, header.payload_len));
                    Some(Pending::Region(region, token, Then::Nothing))
                }
                PayloadSink::Owned { .. } => panic!("a refused {r:?} read into a buffer"),
            };
        }
        let w = w.expect("a window");
        let target = slice(self.wins[w].region, r.offset, r.len);
        match (r.code, sink) {
            (RmaCode::Put | RmaCode::Accumulate, PayloadSink::None) if r.len == 0 => {
                self.owe(owed);
                None
            }
            (
                RmaCode::Put,
                PayloadSink::Region {
                    region,
                    discard,
                    token,
                },
            ) => {
                assert_eq!(
                    (region.ptr, region.len, discard),
                    (target.ptr, target.len, 0)
                );
                owed.ready = false;
                let i = self.owe(owed);
                Some(Pending::Region(region, token, Then::Owed(i)))
            }
            (RmaCode::Get, PayloadSink::None) => {
                owed.len = r.len;
                owed.get = Some(target);
                self.owe(owed);
                None
            }
            (
                RmaCode::Accumulate | RmaCode::FetchAndOp | RmaCode::CompareAndSwap,
                PayloadSink::Owned { buf, token },
            ) => {
                assert_eq!(buf.len() as u64, header.payload_len, "{r:?}");
                owed.status = None;
                let i = self.owe(owed);
                let id = self.next_apply;
                self.next_apply += 1;
                self.applies.push_back(Expect {
                    origin: from,
                    window: r.window,
                    code: r.code,
                    target,
                    ready: false,
                    owed: Some(i),
                    op: None,
                    id,
                });
                Some(Pending::Owned(buf, token, Then::Apply(id)))
            }
            (_, sink) => panic!("{r:?} into {sink:?}"),
        }
    }

    fn owe(&mut self, owed: Owed) -> usize {
        self.owed.push(Some(owed));
        self.owed.len() - 1
    }

    /// What a reply the engine took does to its operation.
    fn on_reply(
        &mut self,
        peer: usize,
        header: &FrameHeader,
        sink: PayloadSink,
    ) -> Option<Pending> {
        let reply = RmaReply::from_header(header).expect("the decoder checked it");
        let i = *self
            .by_id
            .get(&reply.origin_op)
            .unwrap_or_else(|| panic!("{reply:?} for no operation taken"));
        let op = &self.ops[i];
        assert!(op.live, "{reply:?} taken for an operation answered");
        assert_eq!(
            (op.target, op.win),
            (PEERS[peer], reply.window),
            "{reply:?}"
        );
        match sink {
            PayloadSink::None => {
                assert_eq!(header.payload_len, 0, "{reply:?}");
                self.answered(i);
                None
            }
            PayloadSink::Region {
                region,
                discard,
                token,
            } => {
                assert_eq!((region.len as u64, discard), (reply.len, 0), "{reply:?}");
                let result = op.result.expect("a reply's data goes to a result buffer");
                assert!(inside(region, result), "{reply:?} outside its result");
                Some(Pending::Region(region, token, Then::Op(i)))
            }
            PayloadSink::Owned { .. } => panic!("{reply:?} read into a buffer"),
        }
    }

    /// Operation `i` was answered (or its target lost).
    fn answered(&mut self, i: usize) {
        self.ops[i].live = false;
    }

    /// The link reads the payload it was reading.
    fn finish_payload(&mut self, peer: usize, link: usize) {
        let Some(pending) = self.pending[peer][link].take() else {
            return;
        };
        self.fill = self.fill.wrapping_add(1);
        match pending {
            Pending::Region(region, token, then) => {
                match then {
                    Then::Owed(i) => {
                        let o = self.owed[i].as_mut().expect("owed until answered");
                        o.ready = true;
                        let window = o.window;
                        self.write_window(window, region);
                    }
                    Then::Op(i) => {
                        let op = &self.ops[i];
                        assert!(op.live, "a reply's data for an operation answered");
                        let result = op.result.expect("a result buffer");
                        assert!(inside(region, result));
                        // SAFETY: inside the harness's result buffer.
                        unsafe { region.copy_from(&vec![self.fill; region.len]) };
                        self.answered(i);
                    }
                    Then::Apply(_) | Then::Nothing => assert_eq!(region.len, 0),
                }
                self.engine.payload_done(token, None);
            }
            Pending::Owned(mut buf, token, then) => {
                buf.fill(self.fill);
                if let Then::Apply(id) = then {
                    if let Some(e) = self.applies.iter_mut().find(|e| e.id == id) {
                        e.ready = true;
                    }
                }
                self.engine.payload_done(token, Some(buf));
            }
        }
    }

    /// Writes `region`, which must be inside live window `id`, as a put's
    /// payload or an apply would, and notes it in the window's shadow.
    fn write_window(&mut self, id: u32, region: Region) {
        let w = self
            .live_win(id)
            .unwrap_or_else(|| panic!("{region:?} of window {id}, which is gone"));
        let win = &mut self.wins[w];
        assert!(inside(region, win.region), "{region:?} outside window {id}");
        if region.len == 0 {
            return;
        }
        let at = GUARD + (region.ptr as usize - win.region.ptr as usize);
        for (k, x) in win.shadow[at..at + region.len].iter_mut().enumerate() {
            *x = self.fill.wrapping_add(k as u8);
        }
        // SAFETY: inside the window's memory (checked).
        unsafe { region.copy_from(&win.shadow[at..at + region.len]) };
    }

    fn poll_apply(&mut self) {
        let expect = self.out.is_none() && self.applies.front().is_some_and(|e| e.ready);
        assert_eq!(self.engine.has_apply(), expect, "has_apply");
        let got = self.engine.poll_apply();
        assert_eq!(
            got.is_some(),
            expect,
            "an apply out: {}",
            self.out.is_some()
        );
        let Some(mut apply) = got else {
            return;
        };
        let e = self.applies.pop_front().expect("expected");
        assert_eq!(
            (apply.origin, apply.window, apply.code),
            (e.origin, e.window, e.code)
        );
        assert_eq!(
            (apply.target.ptr, apply.target.len),
            (e.target.ptr, e.target.len)
        );
        let len = apply.target.len;
        assert_eq!(apply.operand().len(), len);
        let cas = apply.code == RmaCode::CompareAndSwap;
        assert_eq!(apply.compare().len(), if cas { len } else { 0 });
        let fetch = apply.code != RmaCode::Accumulate;
        assert_eq!(apply.old_mut().len(), if fetch { len } else { 0 });
        self.out = Some((apply, e));
    }

    fn apply_done(&mut self, done: bool) {
        let Some((mut apply, e)) = self.out.take() else {
            return;
        };
        if done {
            // SAFETY: checked to be inside a live window when handed out;
            // the window cannot be freed while the apply is out.
            let before = unsafe { apply.target.as_slice() }.to_vec();
            let fetched = apply.old_mut();
            if !fetched.is_empty() {
                fetched.copy_from_slice(&before);
            }
            self.write_window(apply.window, apply.target);
        }
        let status = if done {
            ApplyStatus::Done
        } else {
            ApplyStatus::Refused
        };
        let fetch = apply.code != RmaCode::Accumulate;
        self.engine.apply_done(apply, status);
        if let Some(i) = e.owed {
            if let Some(o) = self.owed[i].as_mut() {
                o.status = Some(if done {
                    ReplyStatus::Done
                } else {
                    ReplyStatus::Refused
                });
                o.len = if done && fetch {
                    e.target.len as u64
                } else {
                    0
                };
            }
        }
        if let Some(i) = e.op {
            self.answered(i);
        }
    }

    fn mark(&mut self, b: u8, t: u8) {
        let win = u32::from(b % 5);
        let target = [None, Some(ME), Some(PEERS[0]), Some(PEERS[1]), Some(9)][usize::from(t % 5)];
        let got = self.engine.win_flush_mark(win, target);
        let expected = match (self.live_win(win), target) {
            (None, _) => Err(RmaError::NoWindow),
            (Some(_), Some(rank)) if self.size_of(win, rank).is_none() => Err(RmaError::NotMember),
            _ => Ok(()),
        };
        assert_eq!(
            got.map(|_| ()),
            expected,
            "flush mark of {win} to {target:?}"
        );
        let Ok(mark) = got else {
            return;
        };
        let covered = (0..self.ops.len())
            .filter(|&i| {
                let op = &self.ops[i];
                op.live && op.win == win && target.is_none_or(|t| t == op.target)
            })
            .collect();
        self.marks.push((mark, covered));
    }

    fn poll_mark(&mut self, i: usize) {
        if self.marks.is_empty() {
            return;
        }
        let i = i % self.marks.len();
        let (mark, covered) = &self.marks[i];
        let got = self.engine.win_flush_poll(mark);
        let waiting = covered.iter().any(|&i| self.ops[i].live);
        assert_eq!(got.is_none(), waiting, "flush poll {got:?}");
    }

    /// Hands every frame the engine wants sent to its link, and takes the
    /// remote memory operations it asks for.
    fn drain(&mut self) {
        while let Some(t) = self.engine.poll_transmit() {
            let peer = peer_index(t.peer);
            assert!(!self.lost[peer], "a frame for lost peer: {:?}", t.header);
            let h = t.header;
            // The peer's decoder takes it.
            FrameHeader::decode(&h.encode(), h.seq, MAX_EAGER).expect("the peer decodes it");
            match h.kind {
                FrameKind::RmaRequest => {
                    let r = RmaRequest::from_header(&h).expect("a request");
                    let i = *self
                        .by_id
                        .get(&r.origin_op)
                        .expect("a request of an operation");
                    let op = &self.ops[i];
                    assert!(op.live, "{r:?} of an operation answered");
                    assert_eq!(
                        (op.target, op.win, op.code, op.len),
                        (t.peer, r.window, r.code, r.len)
                    );
                    match &t.payload {
                        TransmitPayload::Borrowed(region) => {
                            let source = op.source.expect("a source");
                            assert!(!op.released, "{r:?} from a released source");
                            assert_eq!((region.ptr, region.len), (source.ptr, source.len));
                        }
                        TransmitPayload::Owned(bytes) => {
                            assert_eq!(bytes.len() as u64, h.payload_len);
                        }
                        TransmitPayload::None => assert_eq!(h.payload_len, 0),
                        TransmitPayload::Gathered(_) => panic!("{r:?} gathered"),
                    }
                    assert_eq!(t.completes, op.req.filter(|_| op.code == RmaCode::Put));
                    if let Some(req) = t.completes {
                        self.engine.transmit_done(req);
                        self.ops[i].released = true;
                    }
                }
                FrameKind::RmaReply => {
                    let reply = RmaReply::from_header(&h).expect("a reply");
                    let region = match t.payload {
                        TransmitPayload::Borrowed(region) => Some(region),
                        TransmitPayload::None => None,
                        TransmitPayload::Owned(ref bytes) => {
                            assert_eq!(bytes.len() as u64, reply.len);
                            None
                        }
                        TransmitPayload::Gathered(_) => panic!("{reply:?} gathered"),
                    };
                    let at = self.owed.iter().position(|o| {
                        o.as_ref().is_some_and(|o| {
                            o.ready
                                && (o.peer, o.window, o.origin_op, o.status, o.len)
                                    == (
                                        t.peer,
                                        reply.window,
                                        reply.origin_op,
                                        Some(reply.status),
                                        reply.len,
                                    )
                                && o.get.map(|g| (g.ptr, g.len)) == region.map(|g| (g.ptr, g.len))
                        })
                    });
                    let at = at.unwrap_or_else(|| panic!("{reply:?} to {} owed nothing", t.peer));
                    let o = self.owed[at].take().expect("owed");
                    if let Some(g) = o.get {
                        let w = self
                            .live_win(o.window)
                            .expect("a get's reply of a live window");
                        assert!(inside(g, self.wins[w].region));
                    }
                }
                other => panic!("the engine sent a {other:?} frame"),
            }
        }
        while let Some(op) = self.engine.poll_rma() {
            let RmaOwner::Window(id) = op.owner else {
                panic!("a transfer without a send or receive: {op:?}");
            };
            assert_eq!(op.peer, PEERS[0], "remote memory of a peer out of reach");
            assert!(!self.lost[0], "remote memory of a lost peer");
            let i = *self.by_id.get(&id).expect("an operation");
            let o = &self.ops[i];
            assert!(o.live, "{op:?} of an operation answered");
            assert_eq!(op.peer, o.target);
            let address = o.address;
            let size = self.size_of(o.win, o.target);
            assert_eq!(
                (Some(op.key.addr), Some(op.key.len), op.key.id),
                (address, size, u64::from(o.win))
            );
            assert!(
                op.key.addr.checked_add(op.key.len).is_some(),
                "a key that wraps: {op:?}"
            );
            assert!(op.remote_address().is_some(), "outside its key: {op:?}");
            assert_eq!(op.len() as u64, o.len);
            match &op.kind {
                RmaKind::Put(PutSource::Region(r)) => {
                    assert!(!o.released && o.code == RmaCode::Put);
                    assert!(inside(*r, o.source.expect("a source")));
                }
                RmaKind::Put(PutSource::Gathered(_)) => panic!("the script gathers nothing"),
                RmaKind::Get(r) => {
                    assert_eq!(o.code, RmaCode::Get);
                    assert!(inside(*r, o.result.expect("a result")));
                }
                RmaKind::Atomic(_) => panic!("the script sets no window to native atomics"),
            }
            self.rma_out.push((op, i));
        }
    }

    /// The transport carries out remote memory operation `i`: done,
    /// refused or failed in turn.
    fn carry_out(&mut self, i: usize) {
        if self.rma_out.is_empty() {
            return;
        }
        let (op, o) = self.rma_out.swap_remove(i % self.rma_out.len());
        self.outcomes = self.outcomes.wrapping_add(1);
        let status = [
            RmaStatus::Done,
            RmaStatus::Done,
            RmaStatus::Refused,
            RmaStatus::Failed,
        ][usize::from(self.outcomes % 4)];
        self.finish_rma(op, o, status);
    }

    fn finish_rma(&mut self, op: RmaOp, o: usize, status: RmaStatus) {
        if status == RmaStatus::Done {
            assert!(self.ops[o].live, "{op:?} done for an operation answered");
            if let RmaKind::Get(r) = op.kind {
                // SAFETY: inside the operation's live result buffer.
                unsafe { r.copy_from(&vec![self.fill; r.len]) };
            }
        }
        self.engine.rma_done(op, status);
        match status {
            RmaStatus::Done => self.answered(o),
            RmaStatus::Refused => {}
            // A failed copy is followed by the loss of the peer.
            RmaStatus::Failed => self.lose(0),
        }
    }

    /// The peer `PEERS[peer]` is lost: both its links close.
    fn lose(&mut self, peer: usize) {
        self.pending[peer] = [None, None];
        if self.lost[peer] {
            return;
        }
        self.lost[peer] = true;
        self.engine.peer_lost(PEERS[peer]);
        let rank = PEERS[peer];
        for op in &mut self.ops {
            if op.target == rank {
                op.live = false;
            }
        }
        for o in &mut self.owed {
            if o.as_ref().is_some_and(|o| o.peer == rank) {
                *o = None;
            }
        }
        self.applies.retain(|e| e.origin != rank);
        // The transport drops what it was doing for the peer.
        for (op, o) in std::mem::take(&mut self.rma_out) {
            if op.peer == rank {
                self.engine.rma_done(op, RmaStatus::Failed);
            } else {
                self.rma_out.push((op, o));
            }
        }
    }

    /// Takes the completions of rputs and rgets and checks them.
    fn completions(&mut self) {
        for i in 0..self.ops.len() {
            let op = &self.ops[i];
            let Some(req) = op.req else {
                continue;
            };
            if !self.engine.is_live(req) {
                continue;
            }
            let Some(c) = self.engine.take_completion(req) else {
                continue;
            };
            match c.error {
                None => {
                    assert_eq!((c.source, c.bytes), (op.target, op.len), "{c:?}");
                    if op.code == RmaCode::Get {
                        assert!(!op.live, "an rget complete before its data");
                    }
                }
                Some(CompletionError::PeerLost | CompletionError::RmaRange) => {}
                Some(e) => panic!("an {:?} completed with {e:?}", op.code),
            }
        }
    }

    /// No window's memory, nor the guards around it, changed except where
    /// a put or an apply wrote it.
    fn check_memory(&self) {
        for w in &self.wins {
            if w.mem[..] != w.shadow[..] {
                let at = (0..w.mem.len()).find(|&k| w.mem[k] != w.shadow[k]);
                panic!(
                    "window {} (live {}, {} bytes) changed at byte {at:?} of its allocation (guard {GUARD})",
                    w.id,
                    w.live,
                    w.region.len
                );
            }
        }
    }

    /// Serves the peers until nothing moves, then loses them and checks
    /// that nothing is left.
    fn finish(mut self) {
        for _ in 0..64 {
            for peer in 0..2 {
                for link in 0..2 {
                    self.finish_payload(peer, link);
                }
            }
            self.drain();
            while !self.rma_out.is_empty() {
                let (op, o) = self.rma_out.swap_remove(0);
                self.finish_rma(op, o, RmaStatus::Done);
            }
            loop {
                self.apply_done(true);
                self.poll_apply();
                if self.out.is_none() {
                    break;
                }
            }
            self.check_memory();
            let idle = self.out.is_none()
                && self.applies.is_empty()
                && self.rma_out.is_empty()
                && !self.engine.has_rma()
                && !self.engine.has_apply();
            if idle {
                self.drain();
                break;
            }
        }
        if let Some(o) = self.owed.iter().flatten().next() {
            panic!(
                "a reply to {} for operation {} never sent",
                o.peer, o.origin_op
            );
        }
        for peer in 0..2 {
            self.lose(peer);
        }
        if let Some(t) = self.engine.poll_transmit() {
            panic!("a frame after every peer was lost: {t:?}");
        }
        assert!(!self.engine.has_rma(), "a copy after every peer was lost");
        assert!(self.engine.poll_apply().is_none(), "an apply left");
        for i in 0..self.marks.len() {
            let (mark, _) = &self.marks[i];
            assert!(
                self.engine.win_flush_poll(mark).is_some(),
                "a flush waits after every peer was lost"
            );
        }
        for op in &self.ops {
            assert!(
                !op.live,
                "{:?} of {} bytes to {} on window {} outstanding after every peer was lost",
                op.code, op.len, op.target, op.win
            );
            if let Some(req) = op.req {
                if self.engine.is_live(req) {
                    assert!(
                        self.engine.completion(req).is_some(),
                        "{:?} pending",
                        op.code
                    );
                }
            }
        }
        self.completions();
        let ids: Vec<u32> = self.wins.iter().filter(|w| w.live).map(|w| w.id).collect();
        for id in ids {
            assert_eq!(self.engine.win_free(id), Ok(()), "window {id} stays busy");
        }
        self.check_memory();
    }
}

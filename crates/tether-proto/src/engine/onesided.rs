//! One-sided operations on windows, carried as frames that the target's
//! engine applies (DESIGN 3.7; the frames are in `wire/onesided.rs`).
//!
//! A window is registered in every member's engine under one id
//! ([`Engine::win_create`]): this process's memory, and every member's
//! size so that the origin checks each access before anything is sent.
//!
//! - **Origin.** `win_put`, `win_get`, `win_accumulate`,
//!   `win_fetch_and_op` and `win_compare_and_swap` queue an `RmaRequest`
//!   (`origin.rs`) and count the operation as outstanding to its target
//!   until the target's `RmaReply` comes; `win_rput`/`win_rget` also give
//!   a request that completes locally (an rput once its frame is handed
//!   to the transport, an rget once the data is in place). A flush
//!   ([`Engine::win_flush_mark`], [`Engine::win_flush_poll`]) is complete
//!   when every operation issued to its target(s) before it was answered.
//! - **Target** (`target.rs`). Every request is checked against this
//!   process's window (offset and length overflow, end past the window,
//!   atomics aligned): a refused one is answered with its status and its
//!   payload dropped, the memory untouched. A put's payload is read
//!   straight into the window; a get is answered with the window's bytes
//!   as the reply's payload, borrowed, not copied. The accumulate family
//!   is computed by the runtime, which owns the reduction operations: the
//!   engine hands out one [`Apply`] at a time, in the order the requests'
//!   headers arrived (so in issue order per origin, the frames of a peer
//!   arriving in order, even where payloads are read on several links),
//!   and answers the origin once the runtime hands it back.
//! - **Self.** An operation whose target is this process takes the same
//!   paths without frames: put and get copy at once, the accumulate
//!   family queues its `Apply` behind the others.
//! - **Loss.** A lost target fails every outstanding operation to it: a
//!   request with `PeerLost`, the others through the next flush. Applies
//!   queued for a lost origin are dropped (nobody waits for them).
//!
//! Contract with the runtime, beside the engine's (all calls from one
//! thread, or under one lock):
//! 1. regions given to an operation stay valid, and untouched by the
//!    program, until its flush returns or its request completes; a
//!    window's memory stays valid until [`Engine::win_free`] succeeds;
//! 2. drain [`Engine::poll_apply`], compute each [`Apply`] and hand it
//!    back with [`Engine::apply_done`] (which may queue a frame) before the
//!    next one is handed out: the engine keeps at most one out, which is
//!    what makes the accumulate family atomic and ordered;
//! 3. a blocking flush calls [`Engine::win_flush_mark`] once, then makes
//!    progress until [`Engine::win_flush_poll`] says it is complete.
//!
//! Nothing here blocks; every error is returned before anything is sent
//! or touched.

use std::collections::{BTreeSet, VecDeque};

use rustc_hash::FxHashMap as HashMap;
use thiserror::Error;

use super::{Engine, TransmitPayload};
use crate::request::{CompletionError, Region, ReqId};
use crate::wire::onesided::RmaCode;
use crate::wire::FrameKind;

mod direct;
mod origin;
mod target;

#[cfg(test)]
mod tests;

/// Where a one-sided operation goes: window, target (universe rank) and
/// the offset in bytes from the start of the target's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmaTarget {
    pub win: u32,
    pub rank: u32,
    pub offset: u64,
}

/// The runtime's codes for an accumulate-family operation: the engine
/// carries them to the target's runtime and never interprets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reduction {
    pub datatype: u8,
    pub op: u8,
}

/// Why a one-sided call or operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RmaError {
    /// The access lies outside the target's window (its end overflows, or
    /// passes the window's size as this process knows it, or the target
    /// refused it), or an atomic operation is not one aligned element of
    /// 1 to 16 bytes: `TETHER_ERR_RMA_RANGE`. Nothing was sent or touched.
    #[error("access outside the target's window")]
    OutOfRange,
    /// This process has no window with that id (never created, or freed).
    #[error("no such window")]
    NoWindow,
    /// The target answered that it has no window with that id: the
    /// members disagree about the window.
    #[error("the target has no such window")]
    TargetNoWindow,
    /// The target is not a member of the window.
    #[error("the target is not a member of the window")]
    NotMember,
    /// The target's runtime refused the (datatype, op) pair, or a length
    /// that is not a whole number of elements: `TETHER_ERR_OP`.
    #[error("the target refused the datatype and operation")]
    Refused,
    /// The target was lost before it answered: `TETHER_ERR_PEER_LOST`.
    #[error("the target was lost")]
    PeerLost,
    /// The window id is taken (create), or operations on the window are
    /// still outstanding or being applied (free).
    #[error("the window is busy")]
    Busy,
    /// The transport could not complete an operation on this process's
    /// own window (by its own key, where the window's atomics go
    /// through the transport): `TETHER_ERR_TRANSPORT`.
    #[error("the transport could not complete it on this process's own window")]
    Transport,
}

impl RmaError {
    /// How a request (`rput`, `rget`) that failed with this error completes.
    fn completion(self) -> CompletionError {
        match self {
            RmaError::PeerLost => CompletionError::PeerLost,
            _ => CompletionError::RmaRange,
        }
    }
}

/// An accumulate-family operation for the runtime to compute on this
/// process's window ([`Engine::poll_apply`]), then hand back with
/// [`Engine::apply_done`]. `target` is the window's memory the operation
/// covers (valid until handed back; nothing else touches it meanwhile).
/// What the runtime does, element by element, for `datatype` and `op`:
/// - `Accumulate`: `target = op(target, operand)`;
/// - `FetchAndOp`: copy `target` into `old`, then `target = op(target, operand)`;
/// - `CompareAndSwap`: copy `target` into `old`; if `target == compare`,
///   `target = operand`.
///
/// An invalid (datatype, op) pair, or a length that is not a whole number
/// of elements, is handed back [`ApplyStatus::Refused`] with the target
/// untouched.
#[derive(Debug)]
pub struct Apply {
    pub window: u32,
    /// Universe rank of the origin.
    pub origin: u32,
    pub code: RmaCode,
    pub reduction: Reduction,
    pub target: Region,
    /// The origin's data; compare-and-swap: the new value, then the
    /// compare value.
    payload: Vec<u8>,
    /// The value before the operation (fetch-and-op, compare-and-swap).
    old: Vec<u8>,
    origin_op: u64,
}

impl Apply {
    /// The origin's operand (compare-and-swap: the new value).
    pub fn operand(&self) -> &[u8] {
        &self.payload[..self.target.len.min(self.payload.len())]
    }

    /// Compare-and-swap's compare value; empty for the other operations.
    pub fn compare(&self) -> &[u8] {
        match self.code {
            RmaCode::CompareAndSwap => &self.payload[self.target.len..],
            _ => &[],
        }
    }

    /// Where the value before the operation goes: as long as `target`
    /// for fetch-and-op and compare-and-swap, empty otherwise.
    pub fn old_mut(&mut self) -> &mut [u8] {
        &mut self.old
    }
}

/// How the runtime ended an [`Apply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyStatus {
    /// Computed; `old` holds the value before where the operation returns one.
    Done,
    /// Not computed: the (datatype, op) pair or the length is invalid.
    Refused,
}

/// What a flush waits for ([`Engine::win_flush_mark`]): the operations
/// issued before it on one window, to one target or to all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushMark {
    win: u32,
    target: Option<u32>,
    /// Operation ids below this were issued before the flush.
    before: u64,
}

/// This process's part of one window.
#[derive(Debug)]
struct Window {
    local: Region,
    /// By target universe rank, this process included.
    targets: HashMap<u32, TargetBook>,
    /// Applies on this window queued or out with the runtime.
    applies: usize,
    /// The origins of puts whose payload is being read into the memory,
    /// one entry a put.
    writing: Vec<u32>,
    /// Every member agreed that the window's native atomics go to the
    /// transport, this process's own included (`onesided/direct.rs`).
    native_atomics: bool,
}

/// The origin's book of one target of one window.
#[derive(Debug, Default)]
struct TargetBook {
    /// The target's window size in bytes.
    size: u64,
    /// Where the target's window starts in its address space, once the
    /// runtime passed it on ([`Engine::win_set_address`]): puts and gets
    /// then go straight into it where the transport reaches the target's
    /// memory (`onesided/direct.rs`).
    address: Option<u64>,
    /// Operations issued to the target and not answered yet.
    outstanding: BTreeSet<u64>,
    /// The first failure of an operation without a request since the
    /// last flush, which that flush reports.
    error: Option<RmaError>,
}

/// An operation waiting for its reply.
#[derive(Debug)]
struct Pending {
    win: u32,
    target: u32,
    code: RmaCode,
    /// Bytes of the window accessed.
    len: u64,
    /// Where the reply's data lands (get, fetch-and-op, compare-and-swap).
    result: Option<Region>,
    request: Option<ReqId>,
    /// A reply may come: its `RmaRequest` was handed to the transport
    /// (not waiting in the outbox, nor gone by remote memory), and no
    /// reply's data is being read into its result (a second reply, on
    /// another link, would write it after the operation ended).
    awaiting: bool,
}

/// An apply in the queue. Its place is taken when its request's header
/// arrives: a later request of the same origin whose payload is read
/// first, on another link, must not overtake it.
#[derive(Debug)]
struct Queued {
    apply: Apply,
    /// Names it for its payload ([`Token::RmaOperand`](super::Token)).
    slot: u64,
    /// Its payload is in.
    ready: bool,
}

/// The one-sided state of an engine.
#[derive(Debug)]
pub(super) struct OneSided {
    windows: HashMap<u32, Window>,
    ops: HashMap<u64, Pending>,
    /// The next operation id; ids grow, so a flush compares them with its mark.
    next_op: u64,
    /// Accumulate-family operations waiting for the runtime, in the order
    /// their headers arrived.
    applies: VecDeque<Queued>,
    /// The next [`Queued::slot`].
    next_slot: u64,
    /// Puts and gets under way by remote memory, with their frame in
    /// case the system refuses the access (`onesided/direct.rs`).
    direct: HashMap<u64, direct::Fallback>,
    /// Puts and gets of at least this many bytes go by remote memory
    /// where they can (0: never).
    direct_bytes: u64,
    /// Peers whose transport carries window puts and gets by the
    /// window's own key from this size on, whatever `direct_bytes` and
    /// the peer's remote memory say (`Engine::set_window_rma`).
    keyed_from: HashMap<u32, u64>,
    /// One apply is out with the runtime.
    applying: bool,
}

impl Default for OneSided {
    fn default() -> OneSided {
        OneSided {
            windows: HashMap::default(),
            ops: HashMap::default(),
            // 0 never names an operation on the wire.
            next_op: 1,
            applies: VecDeque::new(),
            next_slot: 0,
            applying: false,
            direct: HashMap::default(),
            direct_bytes: 0,
            keyed_from: HashMap::default(),
        }
    }
}

/// Whether `len` bytes at `offset` lie inside `size` bytes.
fn inside(size: u64, offset: u64, len: u64) -> bool {
    offset.checked_add(len).is_some_and(|end| end <= size)
}

/// The `len` bytes at `offset` of `region`, which hold them.
fn slice(region: Region, offset: u64, len: u64) -> Region {
    Region {
        // Never dereferenced when empty (a window of 0 bytes may be NULL).
        ptr: region.ptr.wrapping_add(offset as usize),
        len: len as usize,
    }
}

impl Engine {
    /// Registers window `win`: `local`, this process's memory (0 bytes
    /// allowed, with any pointer), and `sizes`, every other member's
    /// window size by universe rank. Every member registers the same id
    /// before any operation may reach it (`tether_win_create`
    /// synchronises). `Busy` if the id is taken.
    pub fn win_create(
        &mut self,
        win: u32,
        local: Region,
        sizes: &[(u32, u64)],
    ) -> Result<(), RmaError> {
        if self.onesided.windows.contains_key(&win) {
            return Err(RmaError::Busy);
        }
        let mut targets: HashMap<u32, TargetBook> = sizes
            .iter()
            .map(|&(rank, size)| {
                let book = TargetBook {
                    size,
                    ..TargetBook::default()
                };
                (rank, book)
            })
            .collect();
        targets.insert(
            self.config.me,
            TargetBook {
                size: local.len as u64,
                ..TargetBook::default()
            },
        );
        let window = Window {
            local,
            targets,
            applies: 0,
            writing: Vec::new(),
            native_atomics: false,
        };
        self.onesided.windows.insert(win, window);
        Ok(())
    }

    /// Removes window `win`; its memory is the program's again. `Busy`
    /// while operations this process issued on it are unanswered,
    /// operations on its memory are being applied, a put's payload is
    /// being read into it, or a get's reply that
    /// borrows it waits in [`Engine::poll_transmit`]: the runtime's
    /// collective free flushes every member first, so that every reply
    /// has also left the transport. Errors recorded since the last flush
    /// are dropped with the window.
    pub fn win_free(&mut self, win: u32) -> Result<(), RmaError> {
        let window = self.onesided.windows.get(&win).ok_or(RmaError::NoWindow)?;
        let replying = self.outbox.iter().any(|t| {
            t.header.kind == FrameKind::RmaReply
                && t.header.context == win
                && matches!(t.payload, TransmitPayload::Borrowed(_))
        });
        let busy = replying
            || window.applies > 0
            || !window.writing.is_empty()
            || window.targets.values().any(|b| !b.outstanding.is_empty());
        if busy {
            return Err(RmaError::Busy);
        }
        self.onesided.windows.remove(&win);
        Ok(())
    }

    /// Operations issued to `target` on `win` and not answered yet (0 for
    /// an unknown window or target).
    pub fn win_outstanding(&self, win: u32, target: u32) -> usize {
        self.onesided
            .windows
            .get(&win)
            .and_then(|w| w.targets.get(&target))
            .map_or(0, |b| b.outstanding.len())
    }

    /// Starts a flush of the operations issued so far on `win` to
    /// `target` (`None`: to every member). Errors: `NoWindow`, `NotMember`.
    pub fn win_flush_mark(&self, win: u32, target: Option<u32>) -> Result<FlushMark, RmaError> {
        let window = self.onesided.windows.get(&win).ok_or(RmaError::NoWindow)?;
        if let Some(rank) = target {
            if !window.targets.contains_key(&rank) {
                return Err(RmaError::NotMember);
            }
        }
        Ok(FlushMark {
            win,
            target,
            before: self.onesided.next_op,
        })
    }

    /// `None` while an operation the flush waits for is unanswered; then
    /// how the operations without a request ended: the first failure
    /// since the last flush of that target (of the lowest rank, for a
    /// flush of all), which this call clears. A request's failure is its
    /// own, not the flush's. `NoWindow` if the window was freed.
    pub fn win_flush_poll(&mut self, mark: &FlushMark) -> Option<Result<(), RmaError>> {
        let Some(window) = self.onesided.windows.get_mut(&mark.win) else {
            return Some(Err(RmaError::NoWindow));
        };
        let in_scope = |rank: &u32| mark.target.is_none_or(|t| t == *rank);
        let waiting = window
            .targets
            .iter()
            .filter(|(rank, _)| in_scope(rank))
            .any(|(_, book)| book.outstanding.first().is_some_and(|&id| id < mark.before));
        if waiting {
            return None;
        }
        let mut first: Option<(u32, RmaError)> = None;
        for (rank, book) in window.targets.iter_mut().filter(|(rank, _)| in_scope(rank)) {
            if let Some(error) = book.error.take() {
                if first.is_none_or(|(r, _)| *rank < r) {
                    first = Some((*rank, error));
                }
            }
        }
        Some(first.map_or(Ok(()), |(_, error)| Err(error)))
    }

    /// The next accumulate-family operation to compute, unless one is out
    /// with the runtime already (at most one is: see the module docs).
    pub fn poll_apply(&mut self) -> Option<Apply> {
        if self.onesided.applying || !self.onesided.applies.front()?.ready {
            return None;
        }
        let queued = self.onesided.applies.pop_front()?;
        self.onesided.applying = true;
        Some(queued.apply)
    }

    /// Whether an apply waits in [`Engine::poll_apply`].
    #[inline]
    pub fn has_apply(&self) -> bool {
        !self.onesided.applying && self.onesided.applies.front().is_some_and(|q| q.ready)
    }

    /// The runtime computed (or refused) `apply`: its origin is answered.
    pub fn apply_done(&mut self, apply: Apply, status: ApplyStatus) {
        self.onesided.applying = false;
        if let Some(window) = self.onesided.windows.get_mut(&apply.window) {
            window.applies -= 1;
        }
        self.applied(apply, status);
    }

    /// `peer` is gone: what was outstanding to it fails (a pending
    /// request with `PeerLost`, the rest through the next flush), and what
    /// it asked of this process and is not yet applied is dropped.
    pub(super) fn onesided_peer_lost(&mut self, peer: u32) {
        let mut failed = Vec::new();
        let state = &mut self.onesided;
        for window in state.windows.values_mut() {
            let Some(book) = window.targets.get_mut(&peer) else {
                continue;
            };
            for id in std::mem::take(&mut book.outstanding) {
                let request = state.ops.remove(&id).and_then(|p| p.request);
                match request
                    .filter(|&req| matches!(self.requests.get(req), Some(r) if r.done.is_none()))
                {
                    Some(req) => failed.push(req),
                    // Done already (an rput's buffer was handed over) or
                    // without a request: the flush says it.
                    None => {
                        book.error.get_or_insert(RmaError::PeerLost);
                    }
                }
            }
        }
        for window in state.windows.values_mut() {
            // Its link is closed: nothing more is read into the window.
            window.writing.retain(|&origin| origin != peer);
        }
        state.direct.retain(|_, fallback| fallback.peer != peer);
        let windows = &mut state.windows;
        state.applies.retain(|queued| {
            let keep = queued.apply.origin != peer;
            if !keep {
                if let Some(window) = windows.get_mut(&queued.apply.window) {
                    window.applies -= 1;
                }
            }
            keep
        });
        for req in failed {
            self.fail(req, CompletionError::PeerLost);
        }
    }
}

//! Window puts, gets and atomics as UCX RMA: the window's memory is
//! registered when it is created (`ucp_mem_map`), its packed key travels to the
//! members with the window's other facts (the runtime's `win_create`),
//! and an origin's put or get is `ucp_put_nbx`/`ucp_get_nbx` into the
//! target's memory by that key, unpacked on the endpoint to the target
//! the first time it is used. Where the network registers memory (RDMA)
//! the target's NIC serves them and the target process does nothing.
//! Atomics (`ucp_atomic_op_nbx`) come only on windows whose members all
//! agreed to them (`runtime/windows/native.rs` says why), this process's
//! own window included, through an endpoint to its own worker; each is
//! fenced after what was issued before it, for MPI's accumulate order.
//!
//! Completion. UCX says an operation is visible at the target only once
//! a flush of the endpoint that issued it is done. So the operations
//! issued to a peer since the last progress round are followed by one
//! `ucp_ep_flush_nbx` at the start of the next, which is where anyone
//! waiting for them is ([`UcxTransport::flush_issued`]: a window of puts
//! issued between two rounds costs one flush, not one each), and are
//! reported done (the engine's `rma_done`) when it completes. An operation to a
//! peer whose link is still being set up waits for it, as frames do.
//!
//! When. `TETHER_UCX_RMA` decides at start ([`choose`]): `on` for every
//! peer, `off` for none; `auto` for every peer where UCX has an RDMA
//! network, else for peers on this host only. Without RDMA, UCX emulates
//! RMA with messages the target must progress: over its shared memory
//! that still beats Tether's frames over UCX (its `cma` moves large puts
//! and gets without the target), over `tcp` it is slower than the frames
//! (docs/journal/2026-11-28-ucx-rma.md).

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap as HashMap;
use tether_proto::{Atomic, AtomicCode, PutSource, RmaKind, RmaOp, RmaOwner, RmaStatus};
use tether_ucx::{AtomicOp, Completion, Context, Endpoint, ErrorMode, MemRegion, RemoteKey};

use super::UcxTransport;
use crate::error::ErrorClass;
use crate::transport::api::RmaOutcome;

/// UCX transports over which UCX emulates RMA on user memory with
/// messages the target's progress serves (or which reach only this
/// host's memory): with only these, `auto` leaves windows to frames.
const EMULATED: &[&str] = &[
    "self",
    "tcp",
    "sysv",
    "posix",
    "cma",
    "knem",
    "xpmem",
    "cuda_copy",
    "cuda_ipc",
    "rocm_copy",
    "rocm_ipc",
    "gdr_copy",
];

/// Which peers' window operations go as UCX RMA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RmaPeers {
    All,
    /// Peers on this host only.
    SameHost,
    None,
}

/// Whether window operations go as UCX RMA in this process, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RmaChoice {
    pub peers: RmaPeers,
    pub why: String,
}

/// `TETHER_UCX_RMA` (`auto`, `on`, `off`) given UCX's transports here.
pub fn choose(setting: &str, transports: &[String]) -> RmaChoice {
    let networks: Vec<&str> = transports
        .iter()
        .map(String::as_str)
        .filter(|t| !EMULATED.contains(t))
        .collect();
    match setting {
        "on" => RmaChoice {
            peers: RmaPeers::All,
            why: "TETHER_UCX_RMA=on".into(),
        },
        "off" => RmaChoice {
            peers: RmaPeers::None,
            why: "TETHER_UCX_RMA=off".into(),
        },
        _ if networks.is_empty() => RmaChoice {
            peers: RmaPeers::SameHost,
            why: format!(
                "UCX has no RDMA network here ({}): UCX RMA with peers on this host, frames with the others",
                transports.join(", ")
            ),
        },
        _ => RmaChoice {
            peers: RmaPeers::All,
            why: format!("UCX has RDMA here ({})", networks.join(", ")),
        },
    }
}

/// The windows of a transport whose window operations go as UCX RMA.
pub(super) struct Windows {
    /// Which peers' operations go so (never `None`).
    pub(super) peers: RmaPeers,
    context: Context,
    /// This process's part of each window, registered.
    regions: HashMap<u32, MemRegion>,
    /// Members' packed keys, by window and universe rank.
    packed: HashMap<(u32, u32), Vec<u8>>,
    /// Operations issued and not flushed yet, in issue order.
    issued: Vec<Flushing>,
    /// Operations whose flush UCX has not reported, by its token.
    flushing: HashMap<u64, Vec<Flushing>>,
    /// This process's own windows' keys, unpacked on `self_ep` (dropped
    /// before it).
    self_keys: HashMap<u32, RemoteKey>,
    /// An endpoint to this process's own worker, for atomics on its own
    /// windows (they must take the same path as everyone else's).
    self_ep: Option<Endpoint>,
}

/// An operation UCX is completing, and what it reads until then.
struct Flushing {
    op: RmaOp,
    /// An atomic's operand and reply space (boxed: UCX holds pointers
    /// into it).
    _scratch: Option<Box<[u8; 16]>>,
}

/// Issues `atomic` on `ep`; returns UCX's answer and the scratch memory
/// the operation reads and writes, which must live until its flush.
///
/// # Safety
/// As [`Endpoint::atomic_raw`]: the atomic's result region stays valid
/// until the flush, and `remote` lies in `key`'s registered memory.
unsafe fn issue_atomic(
    ep: &Endpoint,
    atomic: &Atomic,
    remote: u64,
    key: &RemoteKey,
) -> (tether_ucx::Result<()>, Box<[u8; 16]>) {
    let size = usize::from(atomic.size);
    let mut scratch = Box::new([0u8; 16]);
    scratch[..8].copy_from_slice(&atomic.operand);
    // UCX's compare-and-swap takes the new value in its reply buffer and
    // leaves the old one there; a swap and fetching operations reply.
    let reply = match (atomic.code, atomic.result) {
        (AtomicCode::CompareSwap, Some(result)) => {
            // SAFETY: the result region holds `size` bytes, borrowed by
            // the operation until its flush.
            unsafe { std::ptr::copy_nonoverlapping(atomic.swap.as_ptr(), result.ptr, size) };
            Some(result.ptr)
        }
        (AtomicCode::CompareSwap | AtomicCode::Swap, None) => {
            scratch[8..8 + size].copy_from_slice(&atomic.swap[..size]);
            Some(scratch[8..].as_mut_ptr())
        }
        (_, Some(result)) => Some(result.ptr),
        (_, None) => None,
    };
    let op = match atomic.code {
        AtomicCode::Add => AtomicOp::Add,
        AtomicCode::Swap => AtomicOp::Swap,
        AtomicCode::CompareSwap => AtomicOp::CompareSwap,
        AtomicCode::And => AtomicOp::And,
        AtomicCode::Or => AtomicOp::Or,
        AtomicCode::Xor => AtomicOp::Xor,
    };
    // SAFETY: the operand is in `scratch`, which the caller keeps until
    // the flush; the rest is the caller's contract.
    let issued = unsafe { ep.atomic_raw(op, scratch.as_ptr(), size, remote, key, reply) };
    (issued, scratch)
}

impl Windows {
    /// The windows of `choice`, `None` where no peer's operations go as
    /// UCX RMA.
    pub(super) fn new(choice: &RmaChoice, context: Context) -> Option<Windows> {
        (choice.peers != RmaPeers::None).then(|| Windows {
            peers: choice.peers,
            context,
            regions: HashMap::default(),
            packed: HashMap::default(),
            issued: Vec::new(),
            flushing: HashMap::default(),
            self_ep: None,
            self_keys: HashMap::default(),
        })
    }
}

impl UcxTransport {
    /// Whether window operations to `peer` go as UCX RMA: the smallest
    /// size for the engine ([`Caps::window_rma`](crate::transport::api::Caps)).
    pub fn window_rma(&self, peer: u32) -> Option<u64> {
        let same_host = || {
            self.addresses
                .get(peer)
                .is_ok_and(|a| a.host == self.config.host)
        };
        match self.windows.as_ref()?.peers {
            RmaPeers::All => Some(0),
            RmaPeers::SameHost => same_host().then_some(0),
            RmaPeers::None => None,
        }
    }

    /// Whether window operations to some peers may go as UCX RMA.
    pub fn registers_windows(&self) -> bool {
        self.windows.is_some()
    }

    /// Registers this process's part of window `win` and returns its
    /// packed key for the members (empty: window operations to this
    /// process go as frames).
    ///
    /// # Safety
    /// `base..base+len` stays allocated until [`UcxTransport::window_freed`].
    pub unsafe fn window_created(&mut self, win: u32, base: *mut u8, len: usize) -> Vec<u8> {
        let Some(windows) = self.windows.as_mut() else {
            return Vec::new();
        };
        if len == 0 {
            return Vec::new();
        }
        // SAFETY: the caller keeps the memory until the window is freed,
        // which drops the region first.
        let me = self.universe.my_universe_rank();
        let packed = unsafe { windows.context.map(base, len) }.and_then(|region| {
            let packed = region.pack()?;
            windows.regions.insert(win, region);
            windows.packed.insert((win, me), packed.clone());
            Ok(packed)
        });
        packed.unwrap_or_else(|e| {
            tracing::warn!("window {win}: UCX could not register its memory ({e}); its operations go as frames");
            Vec::new()
        })
    }

    /// `peer`'s packed key of its part of window `win`.
    pub fn window_key(&mut self, win: u32, peer: u32, packed: Vec<u8>) {
        if let Some(windows) = self.windows.as_mut() {
            windows.packed.insert((win, peer), packed);
        }
    }

    /// Window `win` is freed (every operation on it is complete): its
    /// keys are destroyed and its memory unregistered.
    pub fn window_freed(&mut self, win: u32) {
        let Some(windows) = self.windows.as_mut() else {
            return;
        };
        windows.packed.retain(|&(w, _), _| w != win);
        windows.self_keys.remove(&win);
        for p in self.peers.values_mut() {
            p.keys.remove(&win);
        }
        windows.regions.remove(&win);
    }

    /// Starts a window operation (see the module documentation).
    pub(super) fn start_rma(&mut self, op: &RmaOp) -> RmaOutcome {
        if self.windows.is_none() || !matches!(op.owner, RmaOwner::Window(_)) {
            return RmaOutcome::Now(RmaStatus::Refused);
        }
        if op.peer == self.me() {
            return self.issue(op);
        }
        let p = self.peers.entry(op.peer).or_default();
        if p.finished {
            return RmaOutcome::Now(RmaStatus::Failed);
        }
        if !p.established {
            p.rma_waiting.push(op.clone());
            self.start_connect(op.peer);
            return RmaOutcome::Reported;
        }
        self.issue(op)
    }

    /// Issues the operations that waited for `peer`'s link.
    pub(super) fn issue_waiting_rma(&mut self, peer: u32) {
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        for op in std::mem::take(&mut p.rma_waiting) {
            if let RmaOutcome::Now(status) = self.issue(&op) {
                self.events.rma_done.push((op, status));
            }
        }
    }

    /// A flush UCX reported: the operation it completes, if it is one of
    /// the windows'.
    pub(super) fn flushed(&mut self, token: u64, result: tether_ucx::Result<()>) -> bool {
        let Some(ops) = self
            .windows
            .as_mut()
            .and_then(|w| w.flushing.remove(&token))
        else {
            return false;
        };
        self.ended(ops, result);
        true
    }

    /// Flushes each endpoint that operations were issued on since the
    /// last call, once (see the module documentation).
    pub(super) fn flush_issued(&mut self) {
        let Some(windows) = self.windows.as_mut() else {
            return;
        };
        if windows.issued.is_empty() {
            return;
        }
        let mut issued = std::mem::take(&mut windows.issued);
        while let Some(first) = issued.first() {
            let peer = first.op.peer;
            let (ops, rest): (Vec<Flushing>, Vec<Flushing>) =
                issued.into_iter().partition(|f| f.op.peer == peer);
            issued = rest;
            let ep = if peer == self.me() {
                self.windows.as_ref().and_then(|w| w.self_ep.as_ref())
            } else {
                self.peers.get(&peer).and_then(|p| p.ep.as_ref())
            };
            // A peer forgotten meanwhile is reported lost, which fails its
            // operations.
            let flushed = ep.map_or(Ok(Completion::Done(())), Endpoint::flush);
            match flushed {
                Ok(Completion::Done(())) => self.ended(ops, Ok(())),
                Ok(Completion::Pending(token)) => {
                    if let Some(windows) = self.windows.as_mut() {
                        windows.flushing.insert(token.0, ops);
                    }
                }
                Err(e) => self.ended(ops, Err(e)),
            }
        }
    }

    /// `ops` ended as their flush did: done, or failed with the endpoint
    /// (which loses the peer).
    fn ended(&mut self, ops: Vec<Flushing>, result: tether_ucx::Result<()>) {
        let status = match &result {
            Ok(()) => RmaStatus::Done,
            Err(_) => RmaStatus::Failed,
        };
        if let (Err(e), Some(first)) = (&result, ops.first()) {
            self.flush_failed(first.op.peer, e);
        }
        self.events
            .rma_done
            .extend(ops.into_iter().map(|f| (f.op, status)));
    }

    /// The operation on the established endpoint to `op.peer` (this
    /// process's own endpoint for its own window); the next progress
    /// round flushes it.
    fn issue(&mut self, op: &RmaOp) -> RmaOutcome {
        let refused = RmaOutcome::Now(RmaStatus::Refused);
        let RmaOwner::Window(_) = op.owner else {
            return refused;
        };
        let me = self.me();
        let win = op.key.id as u32;
        let Some(windows) = self.windows.as_mut() else {
            return refused;
        };
        if op.peer == me && windows.self_ep.is_none() {
            match self.worker.connect(&self.address, ErrorMode::None) {
                Ok(ep) => windows.self_ep = Some(ep),
                Err(e) => {
                    tracing::warn!("UCX cannot reach this process's own window memory ({e}); its atomics are applied here");
                    return refused;
                }
            }
        }
        let Windows {
            self_ep,
            self_keys,
            packed,
            issued: unflushed,
            ..
        } = windows;
        let (ep, keys) = if op.peer == me {
            (self_ep.as_ref(), self_keys)
        } else {
            match self.peers.get_mut(&op.peer) {
                Some(p) => (p.ep.as_ref(), &mut p.keys),
                None => return refused,
            }
        };
        let (Some(ep), Some(remote)) = (ep, op.remote_address()) else {
            return refused;
        };
        let key = match keys.entry(win) {
            Entry::Occupied(known) => known.into_mut(),
            Entry::Vacant(slot) => {
                let Some(packed) = packed.get(&(win, op.peer)) else {
                    return refused;
                };
                match ep.unpack_key(packed) {
                    Ok(key) => slot.insert(key),
                    Err(e) => {
                        tracing::info!(
                            "window {win}: UCX cannot reach universe rank {}'s memory ({e}); its operations go as frames",
                            op.peer
                        );
                        return refused;
                    }
                }
            }
        };
        let mut scratch = None;
        // SAFETY: the engine keeps the operation's local memory valid until
        // it hears the outcome, which waits for the flush; the
        // remote range lies in the key's extent (checked above) and the
        // member registered that extent; `scratch` lives until then too.
        let issued = unsafe {
            match &op.kind {
                RmaKind::Put(PutSource::Region(source)) => {
                    ep.put_raw(source.ptr, source.len, remote, key)
                }
                RmaKind::Get(dest) => ep.get_raw(dest.ptr, dest.len, remote, key),
                RmaKind::Atomic(atomic) => {
                    // Accumulates of one origin to one target are applied
                    // in the order they were issued (MPI's default
                    // ordering); UCX keeps none without a fence.
                    if let Err(e) = self.worker.fence() {
                        tracing::warn!("UCX could not order an atomic ({e}); it goes as a frame");
                        return refused;
                    }
                    let (issued, kept) = issue_atomic(ep, atomic, remote, key);
                    scratch = Some(kept);
                    issued
                }
                RmaKind::Put(PutSource::Gathered(_)) => return refused,
            }
        };
        if let Err(e) = issued {
            tracing::warn!(
                "a UCX RMA operation to universe rank {} failed ({e}); it goes as a frame",
                op.peer
            );
            return refused;
        }
        unflushed.push(Flushing {
            op: op.clone(),
            _scratch: scratch,
        });
        RmaOutcome::Reported
    }

    /// A flush failed: the endpoint is broken, so the peer is lost (which
    /// fails its operations; UCX may report the endpoint too).
    fn flush_failed(&mut self, peer: u32, error: &dyn std::fmt::Display) {
        self.lose_with(peer, ErrorClass::PeerLost, |who| {
            format!("UCX could not complete one-sided operations with {who}: {error}")
        });
    }
}

#[cfg(test)]
mod tests {
    use super::{choose, RmaPeers};

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn auto_uses_rma_only_with_an_rdma_network() {
        let here = names(&["self", "tcp", "sysv", "posix", "cma"]);
        assert_eq!(choose("auto", &here).peers, RmaPeers::SameHost);
        assert!(choose("auto", &here).why.contains("tcp, sysv"));
        assert_eq!(choose("on", &here).peers, RmaPeers::All);
        let cluster = names(&["self", "tcp", "rc_mlx5", "dc_mlx5"]);
        let chosen = choose("auto", &cluster);
        assert_eq!(chosen.peers, RmaPeers::All);
        assert!(chosen.why.contains("rc_mlx5, dc_mlx5"), "{}", chosen.why);
        assert_eq!(choose("off", &cluster).peers, RmaPeers::None);
    }
}

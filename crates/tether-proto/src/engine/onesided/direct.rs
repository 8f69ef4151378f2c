//! Puts and gets straight into or out of the target's window, where the
//! transport reaches the target's memory by address (cross-memory attach
//! on one host): the same remote memory operations as the zero-copy
//! rendezvous (`engine/remote.rs`), keyed by the window, and no target
//! involvement at all, so a target that computes serves them too.
//!
//! The runtime passes each member's window address on
//! ([`Engine::win_set_address`]) and the size from which this path is
//! worth its system call ([`Engine::set_window_direct_bytes`]: below it,
//! a frame through the ring to a target that is making progress is
//! faster). A put or get of at least that size to such a target becomes
//! an [`RmaOp`]; when it is done, the operation is complete at the target
//! (the copy is synchronous), so it is answered at once. When the system
//! refuses the access, the operation goes as the frame it would have
//! been, and that peer's memory is not asked for again.
//!
//! A transport that registers window memory itself (UCX RMA, keys
//! exchanged at window creation) takes window puts and gets of every
//! size it asks for ([`Engine::set_window_rma`]) and may report them done
//! later, once they are complete at the target (a flush of its own).

use super::super::{Engine, Transmit, TransmitPayload};
use super::{RmaError, RmaTarget, TargetBook};
use crate::request::{Region, ReqId};
use crate::rma::{Atomic, PutSource, RemoteKey, RmaKind, RmaOp, RmaOwner, RmaStatus};
use crate::wire::onesided::{RmaCode, RmaRequest};

/// What a direct operation becomes if the system refuses it.
#[derive(Debug)]
pub(in crate::engine) struct Fallback {
    /// The target, whose loss drops it.
    pub(super) peer: u32,
    frame: RmaRequest,
    payload: TransmitPayload,
    /// An rput's request, which the frame completes when handed over.
    rput: Option<ReqId>,
    copy_if_blocked: bool,
}

impl Engine {
    /// `rank`'s part of window `win` starts at `address` in its process.
    /// Ignored for an unknown window or member.
    pub fn win_set_address(&mut self, win: u32, rank: u32, address: u64) {
        if let Some(book) = self
            .onesided
            .windows
            .get_mut(&win)
            .and_then(|w| w.targets.get_mut(&rank))
        {
            book.address = Some(address);
        }
    }

    /// Puts and gets of at least `bytes` go straight into the target's
    /// memory where the transport reaches it (0: never).
    pub fn set_window_direct_bytes(&mut self, bytes: u64) {
        self.onesided.direct_bytes = bytes;
    }

    /// `peer`'s transport carries window puts and gets of at least `from`
    /// bytes by the window's key (it registered the windows' memory
    /// itself: UCX RMA), whatever the general threshold and the peer's
    /// remote memory say; `None`: they follow those. A refused operation
    /// ends it for the peer.
    pub fn set_window_rma(&mut self, peer: u32, from: Option<u64>) {
        match from {
            Some(from) => self.onesided.keyed_from.insert(peer, from),
            None => self.onesided.keyed_from.remove(&peer),
        };
    }

    /// Queues operation `id` (`frame`) as a remote memory operation when
    /// it may go so; otherwise gives the payload back for the frame.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn try_direct(
        &mut self,
        at: RmaTarget,
        frame: RmaRequest,
        payload: TransmitPayload,
        result: Option<Region>,
        rput: Option<ReqId>,
        copy_if_blocked: bool,
    ) -> Result<(), TransmitPayload> {
        let threshold = self.onesided.direct_bytes;
        let len = frame.len;
        let wanted = match self.onesided.keyed_from.get(&at.rank) {
            Some(&from) => len >= from,
            None => threshold > 0 && len >= threshold && len <= self.remote_memory(at.rank),
        };
        let book: Option<&TargetBook> = self
            .onesided
            .windows
            .get(&at.win)
            .and_then(|w| w.targets.get(&at.rank));
        let (Some(address), Some(size)) = (book.and_then(|b| b.address), book.map(|b| b.size))
        else {
            return Err(payload);
        };
        // An extent that wraps around the address space names no memory
        // (a member announced it; `RemoteKey::decode` refuses such a key).
        if !wanted || address.checked_add(size).is_none() {
            return Err(payload);
        }
        let kind = match (frame.code, &payload, result) {
            (RmaCode::Put, TransmitPayload::Borrowed(source), _) => {
                RmaKind::Put(PutSource::Region(*source))
            }
            (RmaCode::Get, _, Some(dest)) => RmaKind::Get(dest),
            _ => return Err(payload),
        };
        let fallback = Fallback {
            peer: at.rank,
            frame,
            payload,
            rput,
            copy_if_blocked,
        };
        self.queue_keyed(at, address, size, kind, fallback);
        Ok(())
    }

    /// Queues `kind` on `at` as the remote memory operation of one-sided
    /// operation `fallback.frame.origin_op`, by the window's key (the
    /// member's part at `address`, `size` bytes), keeping the frame it
    /// becomes if the transport refuses it.
    fn queue_keyed(
        &mut self,
        at: RmaTarget,
        address: u64,
        size: u64,
        kind: RmaKind,
        fallback: Fallback,
    ) {
        let id = fallback.frame.origin_op;
        self.rma.push_back(RmaOp {
            owner: RmaOwner::Window(id),
            peer: at.rank,
            key: RemoteKey {
                id: u64::from(at.win),
                addr: address,
                len: size,
            },
            offset: at.offset,
            kind,
        });
        self.onesided.direct.insert(id, fallback);
    }

    /// Every member of window `win` agreed that its native atomics go to
    /// the transport ([`Engine::win_native_atomic`]).
    pub fn win_set_native_atomics(&mut self, win: u32) {
        if let Some(window) = self.onesided.windows.get_mut(&win) {
            window.native_atomics = true;
        }
    }

    /// Queues operation `frame.origin_op` as the transport's atomic
    /// `native` when its window agreed to that; otherwise gives the
    /// payload back for the frame.
    pub(super) fn try_native(
        &mut self,
        at: RmaTarget,
        frame: RmaRequest,
        payload: TransmitPayload,
        native: Option<Atomic>,
    ) -> Result<(), TransmitPayload> {
        let Some(atomic) = native else {
            return Err(payload);
        };
        let Some(window) = self.onesided.windows.get(&at.win) else {
            return Err(payload);
        };
        let address = if at.rank == self.config.me {
            Some(window.local.ptr as u64)
        } else {
            window.targets.get(&at.rank).and_then(|b| b.address)
        };
        let size = window.targets.get(&at.rank).map(|b| b.size);
        let (true, Some(address), Some(size)) = (window.native_atomics, address, size) else {
            return Err(payload);
        };
        let fallback = Fallback {
            peer: at.rank,
            frame,
            payload,
            rput: None,
            copy_if_blocked: false,
        };
        self.queue_keyed(at, address, size, RmaKind::Atomic(atomic), fallback);
        Ok(())
    }

    /// The transport carried out (or could not) the remote memory
    /// operation of one-sided operation `id`.
    pub(in crate::engine) fn window_rma_done(&mut self, id: u64, op: &RmaOp, status: RmaStatus) {
        let Some(fallback) = self.onesided.direct.remove(&id) else {
            return;
        };
        match status {
            RmaStatus::Done => {
                let put = matches!(op.kind, RmaKind::Put(_));
                self.counters.remote(op.peer, put, op.len() as u64);
                self.answered(id, Ok(()));
            }
            RmaStatus::Refused if op.peer == self.config.me => {
                self.apply_local(fallback.frame, fallback.payload);
            }
            RmaStatus::Refused => {
                self.set_remote_memory(op.peer, 0);
                self.set_window_rma(op.peer, None);
                self.outbox.push_back(Transmit {
                    peer: op.peer,
                    header: fallback.frame.to_header(),
                    payload: fallback.payload,
                    completes: fallback.rput,
                    copy_if_blocked: fallback.copy_if_blocked,
                });
            }
            // This process is never lost to itself: an operation on its
            // own window that the transport could not complete fails now.
            RmaStatus::Failed if op.peer == self.config.me => {
                self.answered(id, Err(RmaError::Transport));
            }
            // The transport reports the peer lost, which fails the
            // operation (it is still outstanding).
            RmaStatus::Failed => {}
        }
    }
}

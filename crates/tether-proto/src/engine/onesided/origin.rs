//! The origin's side of one-sided operations: checks, the `RmaRequest`
//! frames, and what a reply means for the operation, its request and the
//! flushes that wait for it.
//!
//! Every call checks the access against the target's window size before
//! anything happens, and returns the error with nothing sent. Memory
//! passed in is borrowed until the operation's flush returns or its
//! request completes (DESIGN 3.7); fetch-and-op and compare-and-swap copy
//! their one-element operands into the frame, so only their result
//! buffer is borrowed.

use super::{inside, Pending, Reduction, RmaError, RmaTarget};
use crate::engine::{
    Engine, Kind, PayloadSink, Request, SinkToken, Token, Transmit, TransmitPayload,
};
use crate::request::{Completion, Region, ReqId};
use crate::rma::{Atomic, AtomicCode};
use crate::wire::onesided::{ReplyStatus, RmaCode, RmaReply, RmaRequest, MAX_ATOMIC_BYTES};
use crate::wire::{FrameHeader, FrameKind, WireError};

/// What one operation sends and where its answer goes.
struct Issue {
    code: RmaCode,
    len: u64,
    reduction: Reduction,
    payload: TransmitPayload,
    result: Option<Region>,
    request: bool,
    /// The same operation as the transport's atomic, taken on a window
    /// whose members agreed to it.
    native: Option<Atomic>,
}

impl Engine {
    /// Writes `source` into `at`'s window. `source` is borrowed until the
    /// flush that covers the operation returns.
    pub fn win_put(&mut self, at: RmaTarget, source: Region) -> Result<(), RmaError> {
        self.issue(at, put(source, false)).map(|_| ())
    }

    /// [`Engine::win_put`] with a request that completes once `source`
    /// may be reused (remote completion still needs a flush).
    pub fn win_rput(&mut self, at: RmaTarget, source: Region) -> Result<ReqId, RmaError> {
        self.issue(at, put(source, true)).map(expect_request)
    }

    /// Reads `at`'s window into `dest`, which is borrowed (and undefined)
    /// until the flush that covers the operation returns.
    pub fn win_get(&mut self, at: RmaTarget, dest: Region) -> Result<(), RmaError> {
        self.issue(at, get(dest, false)).map(|_| ())
    }

    /// [`Engine::win_get`] with a request that completes once the data is
    /// in `dest`.
    pub fn win_rget(&mut self, at: RmaTarget, dest: Region) -> Result<ReqId, RmaError> {
        self.issue(at, get(dest, true)).map(expect_request)
    }

    /// Combines `source` into `at`'s window with `reduction`, applied at
    /// the target after every accumulate-family operation this process
    /// issued to it before. `source` is borrowed until the flush.
    pub fn win_accumulate(
        &mut self,
        at: RmaTarget,
        source: Region,
        reduction: Reduction,
    ) -> Result<(), RmaError> {
        let issue = Issue {
            code: RmaCode::Accumulate,
            len: source.len as u64,
            reduction,
            payload: TransmitPayload::Borrowed(source),
            result: None,
            request: false,
            native: None,
        };
        self.issue(at, issue).map(|_| ())
    }

    /// Combines the one element `operand` into `at`'s window and fetches
    /// the element's value before into `result` (borrowed until the
    /// flush). `operand` and `result` are one element, of equal length.
    pub fn win_fetch_and_op(
        &mut self,
        at: RmaTarget,
        operand: Region,
        result: Region,
        reduction: Reduction,
    ) -> Result<(), RmaError> {
        atomic(at, operand, result)?;
        // SAFETY: the caller's operand is valid for reads during the call.
        let payload = unsafe { operand.as_slice() }.to_vec();
        let issue = Issue {
            code: RmaCode::FetchAndOp,
            len: operand.len as u64,
            reduction,
            payload: TransmitPayload::Owned(payload),
            result: Some(result),
            request: false,
            native: None,
        };
        self.issue(at, issue).map(|_| ())
    }

    /// Replaces the element at `at` with `value` if it equals `compare`,
    /// and fetches its value before into `result` (borrowed until the
    /// flush). The three are one element of `datatype`, of equal length.
    pub fn win_compare_and_swap(
        &mut self,
        at: RmaTarget,
        value: Region,
        compare: Region,
        result: Region,
        datatype: u8,
    ) -> Result<(), RmaError> {
        atomic(at, value, result)?;
        if compare.len != value.len {
            return Err(RmaError::OutOfRange);
        }
        let mut payload = Vec::with_capacity(2 * value.len);
        // SAFETY: the caller's value and compare are valid for reads
        // during the call.
        unsafe {
            payload.extend_from_slice(value.as_slice());
            payload.extend_from_slice(compare.as_slice());
        }
        let issue = Issue {
            code: RmaCode::CompareAndSwap,
            len: value.len as u64,
            reduction: Reduction { datatype, op: 0 },
            payload: TransmitPayload::Owned(payload),
            result: Some(result),
            request: false,
            native: None,
        };
        self.issue(at, issue).map(|_| ())
    }

    /// One fetch-and-op, compare-and-swap or one-element accumulate that
    /// the transport may carry out as its own atomic (`atomic`, whose
    /// `result` is the fetch's result buffer, borrowed until the flush):
    /// on a window whose members agreed to it
    /// ([`Engine::win_set_native_atomics`]) it goes so, this process's
    /// own window included; elsewhere, and where the transport refuses,
    /// it is the frame of the same operation with `reduction`.
    pub fn win_native_atomic(
        &mut self,
        at: RmaTarget,
        atomic: Atomic,
        reduction: Reduction,
    ) -> Result<(), RmaError> {
        let size = usize::from(atomic.size);
        if size != 4 && size != 8 || !at.offset.is_multiple_of(size as u64) {
            return Err(RmaError::OutOfRange);
        }
        let operand = &atomic.operand[..size];
        let (code, payload) = match (atomic.code, atomic.result) {
            (AtomicCode::CompareSwap, _) => {
                let mut payload = atomic.swap[..size].to_vec();
                payload.extend_from_slice(operand);
                (RmaCode::CompareAndSwap, payload)
            }
            (_, Some(_)) => (RmaCode::FetchAndOp, operand.to_vec()),
            (_, None) => (RmaCode::Accumulate, operand.to_vec()),
        };
        if let Some(result) = atomic.result {
            if result.len != size {
                return Err(RmaError::OutOfRange);
            }
        }
        let issue = Issue {
            code,
            len: size as u64,
            reduction,
            payload: TransmitPayload::Owned(payload),
            result: atomic.result,
            request: false,
            native: Some(atomic),
        };
        self.issue(at, issue).map(|_| ())
    }

    /// Checks, books and sends (or, to this process, applies) one
    /// operation.
    fn issue(&mut self, at: RmaTarget, issue: Issue) -> Result<Option<ReqId>, RmaError> {
        let window = self
            .onesided
            .windows
            .get(&at.win)
            .ok_or(RmaError::NoWindow)?;
        let book = window.targets.get(&at.rank).ok_or(RmaError::NotMember)?;
        if !inside(book.size, at.offset, issue.len) {
            return Err(RmaError::OutOfRange);
        }
        let request = issue.request.then(|| {
            self.requests.insert(Request {
                kind: Kind::OneSided {
                    target: at.rank,
                    bytes: issue.len,
                },
                done: None,
                user: 0,
                ordinal: super::super::NO_ORDINAL,
            })
        });
        if self.is_lost(at.rank) {
            match request {
                Some(req) => self.fail(req, RmaError::PeerLost.completion()),
                None => self.book_error(at.win, at.rank, RmaError::PeerLost),
            }
            return Ok(request);
        }
        let id = self.onesided.next_op;
        self.onesided.next_op += 1;
        if let Some(book) = self
            .onesided
            .windows
            .get_mut(&at.win)
            .and_then(|w| w.targets.get_mut(&at.rank))
        {
            book.outstanding.insert(id);
        }
        self.onesided.ops.insert(
            id,
            Pending {
                win: at.win,
                target: at.rank,
                code: issue.code,
                len: issue.len,
                result: issue.result,
                request,
                awaiting: false,
            },
        );
        let frame = RmaRequest {
            window: at.win,
            code: issue.code,
            datatype: issue.reduction.datatype,
            op: issue.reduction.op,
            offset: at.offset,
            len: issue.len,
            origin_op: id,
        };
        let payload = match self.try_native(at, frame, issue.payload, issue.native) {
            Ok(()) => return Ok(request),
            Err(payload) => payload,
        };
        if at.rank == self.config.me {
            self.apply_local(frame, payload);
            return Ok(request);
        }
        // An rput completes when its frame is handed over; a small one
        // may be copied by a blocked transport, as an eager send is.
        let rput = request.filter(|_| issue.code == RmaCode::Put);
        let copy_if_blocked = rput.is_some() && issue.len <= self.eager_limit(at.rank);
        let payload = match self.try_direct(at, frame, payload, issue.result, rput, copy_if_blocked)
        {
            Ok(()) => return Ok(request),
            Err(payload) => payload,
        };
        self.outbox.push_back(Transmit {
            peer: at.rank,
            header: frame.to_header(),
            payload,
            completes: rput,
            copy_if_blocked,
        });
        Ok(request)
    }

    /// Records a failure of an operation without a request, for the next
    /// flush of its target.
    fn book_error(&mut self, win: u32, target: u32, error: RmaError) {
        if let Some(book) = self
            .onesided
            .windows
            .get_mut(&win)
            .and_then(|w| w.targets.get_mut(&target))
        {
            book.error.get_or_insert(error);
        }
    }

    /// An `RmaReply` from `peer`: the data it carries lands in the
    /// operation's result buffer; a reply without data ends the
    /// operation at once. A reply for no outstanding operation of that
    /// peer, or with other data than the operation returns, is a
    /// protocol error.
    pub(in crate::engine) fn on_rma_reply(
        &mut self,
        peer: u32,
        header: &FrameHeader,
    ) -> Result<PayloadSink, WireError> {
        let reply = RmaReply::from_header(header)?;
        let unknown = WireError::UnknownHandle {
            kind: FrameKind::RmaReply,
            handle: reply.origin_op,
        };
        let Some(pending) = self.onesided.ops.get(&reply.origin_op) else {
            return Err(unknown);
        };
        // A reply to a request not sent (still queued, or gone by remote
        // memory), or a second one, could end the operation while its
        // memory is still borrowed: only a hostile peer sends one.
        if pending.target != peer || pending.win != reply.window || !pending.awaiting {
            return Err(unknown);
        }
        if reply.status != ReplyStatus::Done {
            self.answered(reply.origin_op, Err(refusal(reply.status)));
            return Ok(PayloadSink::None);
        }
        let expected = pending.code.reply_len(pending.len);
        if reply.len != expected {
            return Err(WireError::DataLength {
                expected,
                got: reply.len,
            });
        }
        match pending.result {
            Some(region) if expected > 0 => {
                if let Some(pending) = self.onesided.ops.get_mut(&reply.origin_op) {
                    pending.awaiting = false;
                }
                Ok(PayloadSink::Region {
                    region: region.prefix(expected as usize),
                    discard: 0,
                    token: SinkToken(Token::RmaResult(reply.origin_op)),
                })
            }
            _ => {
                self.answered(reply.origin_op, Ok(()));
                Ok(PayloadSink::None)
            }
        }
    }

    /// The `RmaRequest` of operation `op` was handed to the transport.
    pub(in crate::engine) fn rma_request_sent(&mut self, op: u64) {
        if let Some(pending) = self.onesided.ops.get_mut(&op) {
            pending.awaiting = true;
        }
    }

    /// The data of a reply is in the result buffer.
    pub(in crate::engine) fn rma_result_done(&mut self, op: u64) {
        self.answered(op, Ok(()));
    }

    /// An operation to this process: its reply, handled here without a
    /// frame. `data` is copied into the result buffer.
    pub(super) fn answered_locally(&mut self, op: u64, status: ReplyStatus, data: &[u8]) {
        if status != ReplyStatus::Done {
            return self.answered(op, Err(refusal(status)));
        }
        if let Some(Pending {
            result: Some(region),
            ..
        }) = self.onesided.ops.get(&op)
        {
            // SAFETY: the result buffer is borrowed until the operation
            // ends (below); `copy` allows a get from this process's own
            // window into itself.
            unsafe { std::ptr::copy(data.as_ptr(), region.ptr, data.len().min(region.len)) };
        }
        self.answered(op, Ok(()))
    }

    /// Operation `op` was answered: it is no longer outstanding, and its
    /// request completes, or its failure waits for the flush. Nothing for
    /// an operation that is gone (its peer was lost meanwhile).
    pub(super) fn answered(&mut self, op: u64, outcome: Result<(), RmaError>) {
        let Some(pending) = self.onesided.ops.remove(&op) else {
            return;
        };
        if let Some(book) = self
            .onesided
            .windows
            .get_mut(&pending.win)
            .and_then(|w| w.targets.get_mut(&pending.target))
        {
            book.outstanding.remove(&op);
        }
        let open = pending
            .request
            .filter(|&req| matches!(self.requests.get(req), Some(r) if r.done.is_none()));
        match (open, outcome) {
            (Some(req), outcome) => self.complete(
                req,
                Completion {
                    source: pending.target,
                    tag: 0,
                    bytes: if outcome.is_ok() { pending.len } else { 0 },
                    error: outcome.err().map(RmaError::completion),
                },
            ),
            (None, Err(error)) => self.book_error(pending.win, pending.target, error),
            (None, Ok(())) => {}
        }
    }

    /// The frame of rput `req` was handed to the transport: its buffer
    /// may be reused.
    pub(in crate::engine) fn rput_handed_over(&mut self, req: ReqId, target: u32, bytes: u64) {
        self.complete(
            req,
            Completion {
                source: target,
                tag: 0,
                bytes,
                error: None,
            },
        );
    }
}

fn put(source: Region, request: bool) -> Issue {
    Issue {
        code: RmaCode::Put,
        len: source.len as u64,
        reduction: Reduction { datatype: 0, op: 0 },
        payload: TransmitPayload::Borrowed(source),
        result: None,
        request,
        native: None,
    }
}

fn get(dest: Region, request: bool) -> Issue {
    Issue {
        code: RmaCode::Get,
        len: dest.len as u64,
        reduction: Reduction { datatype: 0, op: 0 },
        payload: TransmitPayload::None,
        result: Some(dest),
        request,
        native: None,
    }
}

fn expect_request(request: Option<ReqId>) -> ReqId {
    request.expect("an operation issued with a request has one")
}

/// Checks the one element of an atomic operation: 1 to 16 bytes, as long
/// as its result, at an offset aligned to its size.
fn atomic(at: RmaTarget, operand: Region, result: Region) -> Result<(), RmaError> {
    let len = operand.len as u64;
    let element = (1..=MAX_ATOMIC_BYTES).contains(&len) && result.len == operand.len;
    if !element || !at.offset.is_multiple_of(len) {
        return Err(RmaError::OutOfRange);
    }
    Ok(())
}

/// The error of a refused operation.
fn refusal(status: ReplyStatus) -> RmaError {
    match status {
        ReplyStatus::OutOfRange => RmaError::OutOfRange,
        ReplyStatus::NoWindow => RmaError::TargetNoWindow,
        ReplyStatus::Refused | ReplyStatus::Done => RmaError::Refused,
    }
}

//! The target's side of one-sided operations: every `RmaRequest` is
//! checked against this process's window, then applied (put, get) or
//! queued for the runtime (the accumulate family), and always answered
//! with one `RmaReply`.
//!
//! A refused request leaves the window untouched: its status goes back at
//! once and its payload is read and dropped, never written anywhere. A
//! put's payload is read straight into the window and acknowledged once
//! it is there; a get is answered with the window's bytes, borrowed: they
//! stay valid until the window is freed, which no member does before every
//! origin's operations are answered (the free is collective and flushes).

use super::{inside, slice, Apply, ApplyStatus};
use crate::engine::{Engine, PayloadSink, SinkToken, Token, Transmit, TransmitPayload};
use crate::request::Region;
use crate::wire::onesided::{ReplyStatus, RmaCode, RmaReply, RmaRequest};
use crate::wire::{FrameHeader, WireError};

/// The data a reply carries.
enum ReplyData {
    None,
    /// The window's own bytes (a get).
    Window(Region),
    /// The value before an atomic operation.
    Old(Vec<u8>),
}

impl Engine {
    /// An `RmaRequest` from `origin`: where its payload goes (the window,
    /// a buffer for the runtime, or nowhere when refused). An error means
    /// the frame itself is malformed.
    pub(in crate::engine) fn on_rma_request(
        &mut self,
        origin: u32,
        header: &FrameHeader,
    ) -> Result<PayloadSink, WireError> {
        let request = RmaRequest::from_header(header)?;
        let region = match self.window_slice(&request) {
            Ok(region) => region,
            Err(status) => {
                self.reply(origin, &request, status, ReplyData::None);
                return Ok(discard(header.payload_len));
            }
        };
        Ok(match request.code {
            RmaCode::Put if request.len == 0 => {
                self.reply(origin, &request, ReplyStatus::Done, ReplyData::None);
                PayloadSink::None
            }
            RmaCode::Put => {
                // Until it is in (or its origin lost), the window stays.
                if let Some(window) = self.onesided.windows.get_mut(&request.window) {
                    window.writing.push(origin);
                }
                PayloadSink::Region {
                    region,
                    discard: 0,
                    token: SinkToken(Token::RmaPut { origin, request }),
                }
            }
            RmaCode::Get => {
                self.reply(
                    origin,
                    &request,
                    ReplyStatus::Done,
                    ReplyData::Window(region),
                );
                PayloadSink::None
            }
            // Nothing to combine: no need to wait for the runtime.
            RmaCode::Accumulate if request.len == 0 => {
                self.reply(origin, &request, ReplyStatus::Done, ReplyData::None);
                PayloadSink::None
            }
            RmaCode::Accumulate | RmaCode::FetchAndOp | RmaCode::CompareAndSwap => {
                let slot = self.queue_apply(origin, request, region, None);
                PayloadSink::Owned {
                    buf: vec![0; header.payload_len as usize],
                    token: SinkToken(Token::RmaOperand(slot)),
                }
            }
        })
    }

    /// A put's payload is in the window: acknowledged.
    pub(in crate::engine) fn rma_put_done(&mut self, origin: u32, request: RmaRequest) {
        if let Some(window) = self.onesided.windows.get_mut(&request.window) {
            if let Some(at) = window.writing.iter().position(|&o| o == origin) {
                window.writing.swap_remove(at);
            }
        }
        self.reply(origin, &request, ReplyStatus::Done, ReplyData::None);
    }

    /// An accumulate-family payload was read: the apply queued for it in
    /// `slot` may go to the runtime once those before it went. Nothing if
    /// it was dropped meanwhile (its origin was lost).
    pub(in crate::engine) fn rma_operand_done(&mut self, slot: u64, payload: Vec<u8>) {
        let queued = self.onesided.applies.iter_mut().find(|q| q.slot == slot);
        if let Some(queued) = queued {
            queued.apply.payload = payload;
            queued.ready = true;
        }
    }

    /// An operation this process issued to itself: the target's part,
    /// without frames. `payload` is the request's.
    pub(super) fn apply_local(&mut self, request: RmaRequest, payload: TransmitPayload) {
        let me = self.config.me;
        let region = match self.window_slice(&request) {
            Ok(region) => region,
            Err(status) => return self.reply(me, &request, status, ReplyData::None),
        };
        let bytes = match payload {
            TransmitPayload::Borrowed(source) if request.code == RmaCode::Put => {
                // SAFETY: the source is borrowed until the operation ends
                // and the window is valid until freed; `copy` allows a put
                // from this process's window into itself.
                unsafe { std::ptr::copy(source.ptr, region.ptr, region.len.min(source.len)) };
                return self.reply(me, &request, ReplyStatus::Done, ReplyData::None);
            }
            // SAFETY: borrowed until the operation ends.
            TransmitPayload::Borrowed(source) => unsafe { source.as_slice() }.to_vec(),
            TransmitPayload::Owned(bytes) => bytes,
            TransmitPayload::None | TransmitPayload::Gathered(_) => Vec::new(),
        };
        match request.code {
            RmaCode::Get => self.reply(me, &request, ReplyStatus::Done, ReplyData::Window(region)),
            RmaCode::Put | RmaCode::Accumulate if request.len == 0 => {
                self.reply(me, &request, ReplyStatus::Done, ReplyData::None)
            }
            _ => {
                self.queue_apply(me, request, region, Some(bytes));
            }
        }
    }

    /// Queues an apply behind every one before it, with its payload, or
    /// waiting for it (`None`); returns its slot.
    fn queue_apply(
        &mut self,
        origin: u32,
        request: RmaRequest,
        region: Region,
        payload: Option<Vec<u8>>,
    ) -> u64 {
        if let Some(window) = self.onesided.windows.get_mut(&request.window) {
            window.applies += 1;
        }
        let slot = self.onesided.next_slot;
        self.onesided.next_slot += 1;
        let ready = payload.is_some();
        let old = match request.code {
            RmaCode::FetchAndOp | RmaCode::CompareAndSwap => vec![0; region.len],
            _ => Vec::new(),
        };
        let apply = Apply {
            window: request.window,
            origin,
            code: request.code,
            reduction: super::Reduction {
                datatype: request.datatype,
                op: request.op,
            },
            target: region,
            payload: payload.unwrap_or_default(),
            old,
            origin_op: request.origin_op,
        };
        self.onesided
            .applies
            .push_back(super::Queued { apply, slot, ready });
        slot
    }

    /// Answers the origin of an apply the runtime handed back.
    pub(super) fn applied(&mut self, apply: Apply, status: ApplyStatus) {
        let request = RmaRequest {
            window: apply.window,
            code: apply.code,
            datatype: apply.reduction.datatype,
            op: apply.reduction.op,
            offset: 0,
            len: apply.target.len as u64,
            origin_op: apply.origin_op,
        };
        let (status, data) = match status {
            ApplyStatus::Refused => (ReplyStatus::Refused, ReplyData::None),
            ApplyStatus::Done if apply.old.is_empty() => (ReplyStatus::Done, ReplyData::None),
            ApplyStatus::Done => (ReplyStatus::Done, ReplyData::Old(apply.old)),
        };
        self.reply(apply.origin, &request, status, data);
    }

    /// The part of this process's window `request` accesses, or why it is
    /// refused.
    fn window_slice(&self, request: &RmaRequest) -> Result<Region, ReplyStatus> {
        let window = self
            .onesided
            .windows
            .get(&request.window)
            .ok_or(ReplyStatus::NoWindow)?;
        let size = window.local.len as u64;
        let aligned = !matches!(request.code, RmaCode::FetchAndOp | RmaCode::CompareAndSwap)
            || request.offset.is_multiple_of(request.len.max(1));
        if !aligned || !inside(size, request.offset, request.len) {
            return Err(ReplyStatus::OutOfRange);
        }
        Ok(slice(window.local, request.offset, request.len))
    }

    /// Answers `request` of `origin`: a frame, or for this process itself
    /// the origin's side at once. Nothing for a lost origin.
    fn reply(&mut self, origin: u32, request: &RmaRequest, status: ReplyStatus, data: ReplyData) {
        if origin == self.config.me {
            let bytes: &[u8] = match &data {
                ReplyData::None => &[],
                // SAFETY: the window is valid until freed.
                ReplyData::Window(region) => unsafe { region.as_slice() },
                ReplyData::Old(old) => old,
            };
            return self.answered_locally(request.origin_op, status, bytes);
        }
        if self.is_lost(origin) {
            return;
        }
        let (len, payload) = match data {
            ReplyData::None => (0, TransmitPayload::None),
            ReplyData::Window(region) => (region.len as u64, TransmitPayload::Borrowed(region)),
            ReplyData::Old(old) => (old.len() as u64, TransmitPayload::Owned(old)),
        };
        let reply = RmaReply {
            window: request.window,
            status,
            origin_op: request.origin_op,
            len,
        };
        // A get's reply borrows the window: written in place, never copied.
        self.outbox.push_back(Transmit {
            peer: origin,
            header: reply.to_header(),
            payload,
            completes: None,
            copy_if_blocked: false,
        });
    }
}

/// Reads and drops a refused request's payload.
fn discard(len: u64) -> PayloadSink {
    if len == 0 {
        return PayloadSink::None;
    }
    PayloadSink::Region {
        region: Region {
            ptr: std::ptr::NonNull::<u8>::dangling().as_ptr(),
            len: 0,
        },
        discard: len,
        token: SinkToken(Token::RmaDiscard),
    }
}

//! The frames of one-sided operations: how an `RmaRequest` and an
//! `RmaReply` use the fields of the common [`FrameHeader`].
//!
//! These frames carry one-sided operations wherever the origin cannot
//! reach the target's memory itself (tcp, files, and shared memory when
//! cross-memory attach is refused): the target's engine applies them.
//!
//! `RmaRequest` (origin to target):
//!
//! | field | meaning |
//! |---|---|
//! | context | window id (the same at every member of the window) |
//! | tag | byte 0: operation ([`RmaCode`]); byte 1: datatype code; byte 2: reduction op code; byte 3: 0 |
//! | message size | bytes of the target's window the operation accesses |
//! | sender handle | the origin's operation id, echoed by the reply |
//! | receiver handle | offset in bytes from the start of the target's window |
//! | payload | put, accumulate, fetch-and-op: the origin's data (message size bytes); compare-and-swap: the new value then the compare value (twice message size); get: none |
//!
//! `RmaReply` (target to origin), one for every request:
//!
//! | field | meaning |
//! |---|---|
//! | context | window id |
//! | tag | [`ReplyStatus`] |
//! | message size | bytes of data that follow (0 unless the status is `Done`) |
//! | sender handle | the origin's operation id of the request answered |
//! | receiver handle | 0 |
//! | payload | get: the bytes read; fetch-and-op, compare-and-swap: the element's value before the operation; put, accumulate: none (the reply is the acknowledgement a flush counts) |
//!
//! Datatype and op codes are the runtime's (`TETHER_INT64`, `TETHER_SUM`,
//! ...): the engine only carries them to the target's runtime, which
//! computes the accumulate family. The element count of an operation is
//! its message size divided by the datatype's size, which the target's
//! runtime checks.

use super::{FrameHeader, FrameKind, WireError};

/// The largest element a fetch-and-op or compare-and-swap takes (the
/// largest basic datatype: a double complex).
pub const MAX_ATOMIC_BYTES: u64 = 16;

/// What a one-sided request asks the target to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RmaCode {
    /// Write the payload into the window.
    Put = 1,
    /// Read from the window; the reply carries the bytes.
    Get = 2,
    /// Combine the payload into the window element-wise.
    Accumulate = 3,
    /// Combine one element, replying with its value before.
    FetchAndOp = 4,
    /// Replace one element if it equals the compare value, replying with
    /// its value before.
    CompareAndSwap = 5,
}

impl RmaCode {
    fn from_u8(value: u8) -> Option<RmaCode> {
        Some(match value {
            1 => RmaCode::Put,
            2 => RmaCode::Get,
            3 => RmaCode::Accumulate,
            4 => RmaCode::FetchAndOp,
            5 => RmaCode::CompareAndSwap,
            _ => return None,
        })
    }

    /// Whether the target's runtime computes it (the accumulate family,
    /// applied in issue order), rather than the engine moving bytes.
    pub fn is_accumulate(self) -> bool {
        matches!(
            self,
            RmaCode::Accumulate | RmaCode::FetchAndOp | RmaCode::CompareAndSwap
        )
    }

    /// Whether the reply to a successful operation carries data, and how
    /// much for an access of `len` bytes.
    pub fn reply_len(self, len: u64) -> u64 {
        match self {
            RmaCode::Get | RmaCode::FetchAndOp | RmaCode::CompareAndSwap => len,
            RmaCode::Put | RmaCode::Accumulate => 0,
        }
    }
}

/// A decoded `RmaRequest` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmaRequest {
    pub window: u32,
    pub code: RmaCode,
    pub datatype: u8,
    pub op: u8,
    pub offset: u64,
    /// Bytes of the window accessed.
    pub len: u64,
    /// The origin's operation id.
    pub origin_op: u64,
}

impl RmaRequest {
    /// The payload that follows the header: see the module table.
    pub fn payload_len(&self) -> Option<u64> {
        match self.code {
            RmaCode::Get => Some(0),
            RmaCode::Put | RmaCode::Accumulate | RmaCode::FetchAndOp => Some(self.len),
            RmaCode::CompareAndSwap => self.len.checked_mul(2),
        }
    }

    /// The frame header (payload length filled in).
    pub fn to_header(&self) -> FrameHeader {
        let mut header = FrameHeader::new(FrameKind::RmaRequest);
        header.context = self.window;
        header.tag = i32::from_le_bytes([self.code as u8, self.datatype, self.op, 0]);
        header.msg_size = self.len;
        header.sender_req = self.origin_op;
        header.receiver_req = self.offset;
        header.payload_len = self.payload_len().unwrap_or(0);
        header
    }

    /// Reads a request from `header`, checking its operation and that its
    /// payload is what the operation carries; any other header is an
    /// error (the peer broke the protocol).
    pub fn from_header(header: &FrameHeader) -> Result<RmaRequest, WireError> {
        let [code, datatype, op, reserved] = header.tag.to_le_bytes();
        let bad = |why| Err(WireError::BadRma { why });
        let Some(code) = RmaCode::from_u8(code) else {
            return bad("unknown operation");
        };
        if reserved != 0 {
            return bad("reserved bits of the tag set");
        }
        let request = RmaRequest {
            window: header.context,
            code,
            datatype,
            op,
            offset: header.receiver_req,
            len: header.msg_size,
            origin_op: header.sender_req,
        };
        if matches!(code, RmaCode::FetchAndOp | RmaCode::CompareAndSwap)
            && !(1..=MAX_ATOMIC_BYTES).contains(&request.len)
        {
            return bad("an atomic operation takes one element of 1 to 16 bytes");
        }
        if request.payload_len() != Some(header.payload_len) {
            return bad("payload length does not fit the operation");
        }
        Ok(request)
    }
}

/// How the target answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum ReplyStatus {
    /// Applied; the data the operation returns follows.
    Done = 0,
    /// The access lies outside the target's window: nothing was touched.
    OutOfRange = 1,
    /// The target has no window with that id.
    NoWindow = 2,
    /// The target's runtime refused the (datatype, op) pair or a length
    /// that is not a whole number of elements: nothing was touched.
    Refused = 3,
}

impl ReplyStatus {
    fn from_i32(value: i32) -> Option<ReplyStatus> {
        Some(match value {
            0 => ReplyStatus::Done,
            1 => ReplyStatus::OutOfRange,
            2 => ReplyStatus::NoWindow,
            3 => ReplyStatus::Refused,
            _ => return None,
        })
    }
}

/// A decoded `RmaReply` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmaReply {
    pub window: u32,
    pub status: ReplyStatus,
    /// The origin's operation id of the request answered.
    pub origin_op: u64,
    /// Bytes of data that follow.
    pub len: u64,
}

impl RmaReply {
    /// The frame header (payload length filled in).
    pub fn to_header(&self) -> FrameHeader {
        let mut header = FrameHeader::new(FrameKind::RmaReply);
        header.context = self.window;
        header.tag = self.status as i32;
        header.msg_size = self.len;
        header.sender_req = self.origin_op;
        header.payload_len = self.len;
        header
    }

    /// Reads a reply from `header`: a known status, data only with
    /// `Done`, and a payload of exactly the announced size. Whether the
    /// size is what the operation returns is the origin engine's check.
    pub fn from_header(header: &FrameHeader) -> Result<RmaReply, WireError> {
        let bad = |why| Err(WireError::BadRma { why });
        let Some(status) = ReplyStatus::from_i32(header.tag) else {
            return bad("unknown reply status");
        };
        if header.receiver_req != 0 {
            return bad("a reply names no receiver handle");
        }
        if header.payload_len != header.msg_size {
            return bad("payload length differs from the announced size");
        }
        if status != ReplyStatus::Done && header.msg_size != 0 {
            return bad("a refusal carries no data");
        }
        Ok(RmaReply {
            window: header.context,
            status,
            origin_op: header.sender_req,
            len: header.msg_size,
        })
    }
}

/// Checks the fields of a one-sided frame before its payload is
/// allocated or read ([`FrameHeader::decode`]).
pub(super) fn check(header: &FrameHeader) -> Result<(), WireError> {
    match header.kind {
        FrameKind::RmaRequest => RmaRequest::from_header(header).map(|_| ()),
        FrameKind::RmaReply => RmaReply::from_header(header).map(|_| ()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(code: RmaCode, len: u64) -> RmaRequest {
        RmaRequest {
            window: 9,
            code,
            datatype: 6,
            op: 1,
            offset: 1 << 40,
            len,
            origin_op: 0xfeed,
        }
    }

    #[test]
    fn requests_round_trip_through_the_header() {
        for code in [
            RmaCode::Put,
            RmaCode::Get,
            RmaCode::Accumulate,
            RmaCode::FetchAndOp,
            RmaCode::CompareAndSwap,
        ] {
            let r = request(code, 8);
            let h = r.to_header();
            assert_eq!(RmaRequest::from_header(&h), Ok(r));
            assert_eq!(
                FrameHeader::decode(&h.encode(), 0, 0).map(|d| d.kind),
                Ok(h.kind)
            );
        }
        let cas = request(RmaCode::CompareAndSwap, 8).to_header();
        assert_eq!(cas.payload_len, 16);
        assert_eq!(request(RmaCode::Get, 1 << 30).to_header().payload_len, 0);
    }

    #[test]
    fn a_request_whose_payload_does_not_fit_its_operation_is_refused() {
        let mut get = request(RmaCode::Get, 8).to_header();
        get.payload_len = 8;
        assert!(matches!(
            FrameHeader::decode(&get.encode(), 0, 0),
            Err(WireError::BadRma { .. })
        ));
        let mut put = request(RmaCode::Put, 8).to_header();
        put.payload_len = 7;
        assert!(RmaRequest::from_header(&put).is_err());
        let big_atomic = request(RmaCode::FetchAndOp, 17).to_header();
        assert!(RmaRequest::from_header(&big_atomic).is_err());
        let empty_atomic = request(RmaCode::CompareAndSwap, 0).to_header();
        assert!(RmaRequest::from_header(&empty_atomic).is_err());
        let mut unknown = request(RmaCode::Put, 0).to_header();
        unknown.tag = 6;
        assert!(RmaRequest::from_header(&unknown).is_err());
        unknown.tag = i32::from_le_bytes([1, 0, 0, 1]);
        assert!(RmaRequest::from_header(&unknown).is_err());
    }

    #[test]
    fn replies_carry_data_only_when_done() {
        let done = RmaReply {
            window: 3,
            status: ReplyStatus::Done,
            origin_op: 77,
            len: 4096,
        };
        assert_eq!(RmaReply::from_header(&done.to_header()), Ok(done));
        let mut refused = done;
        refused.status = ReplyStatus::OutOfRange;
        assert!(RmaReply::from_header(&refused.to_header()).is_err());
        refused.len = 0;
        assert_eq!(RmaReply::from_header(&refused.to_header()), Ok(refused));
        let mut h = done.to_header();
        h.payload_len = 1;
        assert!(RmaReply::from_header(&h).is_err());
        let mut h = done.to_header();
        h.tag = 4;
        assert!(RmaReply::from_header(&h).is_err());
        let mut h = done.to_header();
        h.receiver_req = 1;
        assert!(RmaReply::from_header(&h).is_err());
    }
}

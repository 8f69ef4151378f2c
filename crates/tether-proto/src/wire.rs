//! The wire format: one fixed-size little-endian frame header, optionally
//! followed by a payload, and the handshake message.
//!
//! Layout of a header ([`HEADER_LEN`] bytes, all fields little-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `b"TTHR"` |
//! | 4 | 2 | protocol version |
//! | 6 | 1 | frame kind |
//! | 7 | 1 | flags: [`FLAG_PAYLOAD_IN_FILE`], [`FLAG_REMOTE_KEY`], [`FLAG_SPLIT`], [`FLAG_WRITTEN`], each on the kinds it names; other bits reserved, 0 |
//! | 8 | 8 | sequence number, per connection and direction, from 0 |
//! | 16 | 8 | payload length in bytes |
//! | 24 | 4 | communication context |
//! | 28 | 4 | tag |
//! | 32 | 8 | message size (the whole message, for `Rts`) |
//! | 40 | 8 | sender's request handle |
//! | 48 | 8 | receiver's request handle |
//!
//! Decoding checks magic, version, sequence number and the payload length
//! allowed for the kind *before* anything is allocated, so a peer cannot
//! make the receiver allocate from a length it chose.
//!
//! The one-sided frames (`RmaRequest`, `RmaReply`) give the fields
//! meanings of their own: see [`onesided`].

use thiserror::Error;

use crate::rma::RemoteKey;

pub mod onesided;

/// The four bytes every frame starts with.
pub const MAGIC: [u8; 4] = *b"TTHR";
/// The protocol version this build speaks; a peer with another version is refused.
pub const VERSION: u16 = 2;
/// Size of an encoded [`FrameHeader`].
pub const HEADER_LEN: usize = 56;
/// The largest payload of a control frame (handshake, reject reason).
pub const MAX_CONTROL_PAYLOAD: u64 = 4096;
/// Capability bit of a [`Hello`]: the sender holds the run's key and
/// authenticates (its nonce follows the `Hello` in the same payload).
pub const CAP_AUTH: u64 = 1;
/// Flag of a `Data` frame whose payload is not on this connection but in
/// a file (the `hybrid` transport): `payload_len` is 0 and `msg_size`
/// bytes wait in the file the receiver derives from the header.
pub const FLAG_PAYLOAD_IN_FILE: u8 = 1;
/// Flag of an `Rts` or `Cts` whose payload is a [`RemoteKey`] to the
/// memory it announces (the send buffer) or grants (the receive buffer):
/// the zero-copy rendezvous of `engine.rs`.
///
/// [`RemoteKey`]: crate::rma::RemoteKey
pub const FLAG_REMOTE_KEY: u8 = 2;
/// Flag of a keyed `Cts`: the receiver reads the part of the data from
/// [`split_point`](crate::rma::split_point) on itself through the
/// sender's key, and says so with a `ReadDone`.
pub const FLAG_SPLIT: u8 = 4;
/// Flag of a `Data` frame whose bytes the sender already wrote into the
/// granted buffer through the receiver's key: no payload follows.
pub const FLAG_WRITTEN: u8 = 8;
/// Flag of a `Data` frame that carries one chunk of the granted data, not
/// all of it: the striped rendezvous of rails (`engine/striped.rs`).
/// `sender_req` then holds the chunk's offset in the granted data instead
/// of the sender's handle, `msg_size` the granted size, `payload_len` the
/// chunk's length; chunks may arrive in any order, on any link to the
/// sender.
pub const FLAG_CHUNK: u8 = 16;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// Connector's handshake: payload is an encoded [`Hello`].
    Hello = 1,
    /// Acceptor's positive answer: payload is the acceptor's [`Hello`].
    HelloAck = 2,
    /// Acceptor refuses the connection: payload is a UTF-8 reason.
    HelloReject = 3,
    /// A whole small message: envelope in the header, data in the payload.
    Eager = 4,
    /// Request to send a large message of `msg_size` bytes; no payload.
    Rts = 5,
    /// Clear to send: the receiver accepts `msg_size` bytes into `receiver_req`.
    Cts = 6,
    /// The data of a rendezvous message, for `receiver_req`.
    Data = 7,
    /// The sender finalized: it sends nothing more on this connection.
    Bye = 8,
    /// The sender aborts the universe with exit code `tag`.
    Abort = 9,
    /// The receiver of a split rendezvous (a `Cts` with [`FLAG_SPLIT`])
    /// has finished reading its part of `sender_req`'s buffer through the
    /// sender's key (`tag` 0), or could not read it (`tag` 1: the sender
    /// writes that part too). The sender's buffer is in use until then.
    ReadDone = 10,
    /// A one-sided operation on the receiver's window ([`onesided`]):
    /// window id in `context`, operation, datatype and op in `tag`,
    /// offset in `receiver_req`, bytes accessed in `msg_size`.
    RmaRequest = 11,
    /// The target's answer to an `RmaRequest` ([`onesided`]): status in
    /// `tag`, the origin's operation id in `sender_req`, and the data a
    /// get, fetch-and-op or compare-and-swap returns.
    RmaReply = 12,
    /// Acceptor of an authenticated handshake, after the connector's
    /// `Hello`: payload is the acceptor's nonce, its proof of the key and
    /// its own [`Hello`] (see `link`'s authentication).
    Challenge = 13,
    /// Connector of an authenticated handshake, answering a `Challenge`:
    /// payload is its proof of the key.
    Proof = 14,
    /// The receiver of striped data (`Data` frames flagged
    /// [`FLAG_CHUNK`]) has all of it in its buffer: `receiver_req` names
    /// the receive. The sender may reuse its buffer (it keeps it until
    /// then, to send chunks again after a rail failed).
    Landed = 15,
}

impl FrameKind {
    fn from_u8(value: u8) -> Option<FrameKind> {
        Some(match value {
            1 => FrameKind::Hello,
            2 => FrameKind::HelloAck,
            3 => FrameKind::HelloReject,
            4 => FrameKind::Eager,
            5 => FrameKind::Rts,
            6 => FrameKind::Cts,
            7 => FrameKind::Data,
            8 => FrameKind::Bye,
            9 => FrameKind::Abort,
            10 => FrameKind::ReadDone,
            11 => FrameKind::RmaRequest,
            12 => FrameKind::RmaReply,
            13 => FrameKind::Challenge,
            14 => FrameKind::Proof,
            15 => FrameKind::Landed,
            _ => return None,
        })
    }
}

/// A decoded frame header. Fields that a kind does not use are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub kind: FrameKind,
    pub flags: u8,
    pub seq: u64,
    pub payload_len: u64,
    pub context: u32,
    pub tag: i32,
    pub msg_size: u64,
    pub sender_req: u64,
    pub receiver_req: u64,
}

impl FrameHeader {
    /// A header of `kind` with every other field zero.
    pub fn new(kind: FrameKind) -> FrameHeader {
        FrameHeader {
            kind,
            flags: 0,
            seq: 0,
            payload_len: 0,
            context: 0,
            tag: 0,
            msg_size: 0,
            sender_req: 0,
            receiver_req: 0,
        }
    }

    /// Encodes the header; `seq` is written as given.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        self.encode_into(&mut out);
        out
    }

    /// Encodes the header into `out` (no intermediate copy).
    #[inline]
    pub fn encode_into(&self, out: &mut [u8; HEADER_LEN]) {
        out[0..4].copy_from_slice(&MAGIC);
        out[4..6].copy_from_slice(&VERSION.to_le_bytes());
        out[6] = self.kind as u8;
        out[7] = self.flags;
        out[8..16].copy_from_slice(&self.seq.to_le_bytes());
        out[16..24].copy_from_slice(&self.payload_len.to_le_bytes());
        out[24..28].copy_from_slice(&self.context.to_le_bytes());
        out[28..32].copy_from_slice(&self.tag.to_le_bytes());
        out[32..40].copy_from_slice(&self.msg_size.to_le_bytes());
        out[40..48].copy_from_slice(&self.sender_req.to_le_bytes());
        out[48..56].copy_from_slice(&self.receiver_req.to_le_bytes());
    }

    /// Decodes and validates a header.
    ///
    /// `expected_seq` is the next sequence number this direction of the
    /// connection must carry; `max_eager` bounds the payload of an `Eager`
    /// frame (the largest eager message any sender may use). `Data`
    /// payloads are bounded later, against the receive they are for;
    /// one-sided payloads must fit their operation
    /// ([`onesided::RmaRequest::from_header`]) and are bounded later,
    /// against the window (requests) or the operation (replies).
    pub fn decode(
        bytes: &[u8; HEADER_LEN],
        expected_seq: u64,
        max_eager: u64,
    ) -> Result<FrameHeader, WireError> {
        let magic: [u8; 4] = bytes[0..4].try_into().expect("4 bytes");
        if magic != MAGIC {
            return Err(WireError::BadMagic { got: magic });
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version != VERSION {
            return Err(WireError::BadVersion { got: version });
        }
        let kind = FrameKind::from_u8(bytes[6]).ok_or(WireError::UnknownKind { got: bytes[6] })?;
        let flags = bytes[7];
        let allowed = match kind {
            FrameKind::Data => FLAG_PAYLOAD_IN_FILE | FLAG_WRITTEN | FLAG_CHUNK,
            FrameKind::Rts => FLAG_REMOTE_KEY,
            FrameKind::Cts => FLAG_REMOTE_KEY | FLAG_SPLIT,
            _ => 0,
        };
        // A `Data` frame's payload is in one place: a file, the granted
        // buffer already, or (all or a chunk of it) on the link.
        let exclusive = FLAG_PAYLOAD_IN_FILE | FLAG_WRITTEN | FLAG_CHUNK;
        if flags & !allowed != 0
            || (flags & exclusive).count_ones() > 1
            || (flags & FLAG_SPLIT != 0 && flags & FLAG_REMOTE_KEY == 0)
        {
            return Err(WireError::BadFlags { kind, got: flags });
        }
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let seq = u64_at(8);
        if seq != expected_seq {
            return Err(WireError::BadSequence {
                expected: expected_seq,
                got: seq,
            });
        }
        let payload_len = u64_at(16);
        let max = match kind {
            FrameKind::Hello
            | FrameKind::HelloAck
            | FrameKind::HelloReject
            | FrameKind::Challenge
            | FrameKind::Proof => MAX_CONTROL_PAYLOAD,
            FrameKind::Eager => max_eager,
            FrameKind::Data if flags & FLAG_WRITTEN != 0 => 0,
            FrameKind::Data | FrameKind::RmaRequest | FrameKind::RmaReply => u64::MAX,
            FrameKind::Rts | FrameKind::Cts if flags & FLAG_REMOTE_KEY != 0 => {
                if payload_len != RemoteKey::ENCODED_LEN as u64 {
                    return Err(WireError::BadKeyLength { got: payload_len });
                }
                RemoteKey::ENCODED_LEN as u64
            }
            FrameKind::Rts
            | FrameKind::Cts
            | FrameKind::Bye
            | FrameKind::Abort
            | FrameKind::ReadDone
            | FrameKind::Landed => 0,
        };
        if payload_len > max {
            return Err(WireError::BadLength {
                kind,
                got: payload_len,
                max,
            });
        }
        let header = FrameHeader {
            kind,
            flags,
            seq,
            payload_len,
            context: u32::from_le_bytes(bytes[24..28].try_into().expect("4 bytes")),
            tag: i32::from_le_bytes(bytes[28..32].try_into().expect("4 bytes")),
            msg_size: u64_at(32),
            sender_req: u64_at(40),
            receiver_req: u64_at(48),
        };
        onesided::check(&header)?;
        Ok(header)
    }
}

/// Why a frame was refused. Any of these closes the connection it came on.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    #[error("bad magic: expected {:02x?} (\"TTHR\"), got {got:02x?}", MAGIC)]
    BadMagic { got: [u8; 4] },
    #[error("unsupported protocol version: expected {VERSION}, got {got}")]
    BadVersion { got: u16 },
    #[error("unknown frame kind {got}")]
    UnknownKind { got: u8 },
    #[error("flags {got:#04x} not allowed on a {kind:?} frame")]
    BadFlags { kind: FrameKind, got: u8 },
    #[error("bad sequence number: expected {expected}, got {got}")]
    BadSequence { expected: u64, got: u64 },
    #[error("payload length {got} too large for a {kind:?} frame (at most {max})")]
    BadLength { kind: FrameKind, got: u64, max: u64 },
    #[error("malformed handshake: {0}")]
    BadHello(String),
    #[error("unexpected {got:?} frame {state}")]
    UnexpectedFrame { got: FrameKind, state: &'static str },
    #[error("{kind:?} frame for unknown request handle {handle:#x}")]
    UnknownHandle { kind: FrameKind, handle: u64 },
    #[error("a remote key is {} bytes, got {got}", RemoteKey::ENCODED_LEN)]
    BadKeyLength { got: u64 },
    #[error("remote key of {len} bytes at {addr:#x} wraps around the address space")]
    KeyWraps { addr: u64, len: u64 },
    #[error("data frame of {got} bytes where {expected} were granted")]
    DataLength { expected: u64, got: u64 },
    #[error("malformed one-sided frame: {why}")]
    BadRma { why: &'static str },
}

impl WireError {
    /// A `Data` frame (or its payload) for a receive that is not waiting
    /// for data: the receive was not granted, or already has its data.
    pub fn data_not_awaited() -> WireError {
        WireError::UnexpectedFrame {
            got: FrameKind::Data,
            state: "for a receive that is not waiting for data",
        }
    }
}

/// The handshake: who is connecting, to which universe, with what limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Identifies the universe; processes of another run are refused.
    pub universe_id: u64,
    pub universe_rank: u32,
    /// Capability bits: [`CAP_AUTH`] or nothing.
    pub capabilities: u64,
    pub program: String,
    pub program_rank: u32,
}

impl Hello {
    const FIXED: usize = 8 + 4 + 8 + 4 + 2;

    pub fn encode(&self) -> Vec<u8> {
        let name = self.program.as_bytes();
        let mut out = Vec::with_capacity(Self::FIXED + name.len());
        out.extend_from_slice(&self.universe_id.to_le_bytes());
        out.extend_from_slice(&self.universe_rank.to_le_bytes());
        out.extend_from_slice(&self.capabilities.to_le_bytes());
        out.extend_from_slice(&self.program_rank.to_le_bytes());
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name);
        out
    }

    /// Decodes a whole payload that is one `Hello`.
    pub fn decode(bytes: &[u8]) -> Result<Hello, WireError> {
        let (hello, rest) = Hello::decode_prefix(bytes)?;
        if !rest.is_empty() {
            return Err(WireError::BadHello(format!(
                "{} bytes follow the program name",
                rest.len()
            )));
        }
        Ok(hello)
    }

    /// Decodes the `Hello` at the start of `bytes`; returns it and the
    /// bytes after it (an authenticated connector's nonce follows its
    /// `Hello`, the acceptor's `Hello` follows its proof).
    pub fn decode_prefix(bytes: &[u8]) -> Result<(Hello, &[u8]), WireError> {
        if bytes.len() < Self::FIXED {
            return Err(WireError::BadHello(format!(
                "{} bytes, at least {} expected",
                bytes.len(),
                Self::FIXED
            )));
        }
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let name_len = u16::from_le_bytes([bytes[24], bytes[25]]) as usize;
        let end = Self::FIXED + name_len;
        if bytes.len() < end {
            return Err(WireError::BadHello(format!(
                "program name of {name_len} bytes does not fit a {}-byte handshake",
                bytes.len()
            )));
        }
        let program = std::str::from_utf8(&bytes[Self::FIXED..end])
            .map_err(|_| WireError::BadHello("program name is not UTF-8".into()))?
            .to_owned();
        let hello = Hello {
            universe_id: u64_at(0),
            universe_rank: u32_at(8),
            capabilities: u64_at(12),
            program_rank: u32_at(20),
            program,
        };
        Ok((hello, &bytes[end..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> FrameHeader {
        FrameHeader {
            kind: FrameKind::Rts,
            flags: 0,
            seq: 7,
            payload_len: 0,
            context: 3,
            tag: -5,
            msg_size: 1 << 33,
            sender_req: 0xdead_beef_0000_0001,
            receiver_req: 42,
        }
    }

    #[test]
    fn header_round_trips() {
        let h = sample();
        assert_eq!(FrameHeader::decode(&h.encode(), 7, 1024), Ok(h));
    }

    #[test]
    fn only_data_frames_may_say_their_payload_is_in_a_file() {
        let mut data = sample();
        data.kind = FrameKind::Data;
        data.flags = FLAG_PAYLOAD_IN_FILE;
        assert_eq!(FrameHeader::decode(&data.encode(), 7, 1024), Ok(data));
        let mut rts = sample();
        rts.flags = FLAG_PAYLOAD_IN_FILE;
        assert_eq!(
            FrameHeader::decode(&rts.encode(), 7, 1024),
            Err(WireError::BadFlags {
                kind: FrameKind::Rts,
                got: FLAG_PAYLOAD_IN_FILE
            })
        );
        data.flags = 0x80;
        assert!(FrameHeader::decode(&data.encode(), 7, 1024).is_err());
    }

    #[test]
    fn remote_memory_flags_only_where_the_protocol_has_them() {
        let decode = |h: FrameHeader| FrameHeader::decode(&h.encode(), 7, 1024);
        let mut rts = sample();
        rts.flags = FLAG_REMOTE_KEY;
        rts.payload_len = RemoteKey::ENCODED_LEN as u64;
        assert_eq!(decode(rts), Ok(rts));
        rts.payload_len = 0;
        assert_eq!(decode(rts), Err(WireError::BadKeyLength { got: 0 }));
        let mut cts = sample();
        cts.kind = FrameKind::Cts;
        cts.flags = FLAG_SPLIT;
        assert!(matches!(decode(cts), Err(WireError::BadFlags { .. })));
        cts.flags = FLAG_REMOTE_KEY | FLAG_SPLIT;
        cts.payload_len = RemoteKey::ENCODED_LEN as u64;
        assert_eq!(decode(cts), Ok(cts));
        let mut data = sample();
        data.kind = FrameKind::Data;
        data.flags = FLAG_WRITTEN;
        assert_eq!(decode(data), Ok(data));
        data.payload_len = 1;
        assert!(matches!(decode(data), Err(WireError::BadLength { .. })));
        data.payload_len = 0;
        data.flags = FLAG_WRITTEN | FLAG_PAYLOAD_IN_FILE;
        assert!(matches!(decode(data), Err(WireError::BadFlags { .. })));
        for other in [FLAG_WRITTEN, FLAG_PAYLOAD_IN_FILE] {
            data.flags = FLAG_CHUNK | other;
            assert!(matches!(decode(data), Err(WireError::BadFlags { .. })));
        }
        data.flags = FLAG_CHUNK;
        data.payload_len = 5;
        assert!(decode(data).is_ok());
        let mut eager = sample();
        eager.kind = FrameKind::Eager;
        eager.flags = FLAG_REMOTE_KEY;
        assert!(matches!(decode(eager), Err(WireError::BadFlags { .. })));
    }

    #[test]
    fn wrong_magic_version_kind_and_sequence_are_refused() {
        let good = sample().encode();
        let mut bad = good;
        bad[0] = b'X';
        assert!(matches!(
            FrameHeader::decode(&bad, 7, 0),
            Err(WireError::BadMagic { .. })
        ));
        let mut bad = good;
        bad[4] = 99;
        assert_eq!(
            FrameHeader::decode(&bad, 7, 0),
            Err(WireError::BadVersion { got: 99 })
        );
        let mut bad = good;
        bad[6] = 200;
        assert_eq!(
            FrameHeader::decode(&bad, 7, 0),
            Err(WireError::UnknownKind { got: 200 })
        );
        assert_eq!(
            FrameHeader::decode(&good, 8, 0),
            Err(WireError::BadSequence {
                expected: 8,
                got: 7
            })
        );
    }

    #[test]
    fn absurd_lengths_are_refused_before_allocation() {
        let mut h = FrameHeader::new(FrameKind::Eager);
        h.payload_len = 1 << 40;
        assert!(matches!(
            FrameHeader::decode(&h.encode(), 0, 65536),
            Err(WireError::BadLength { got, max: 65536, .. }) if got == 1 << 40
        ));
        let mut h = FrameHeader::new(FrameKind::Hello);
        h.payload_len = MAX_CONTROL_PAYLOAD + 1;
        assert!(FrameHeader::decode(&h.encode(), 0, 0).is_err());
        let mut h = FrameHeader::new(FrameKind::Cts);
        h.payload_len = 1;
        assert!(FrameHeader::decode(&h.encode(), 0, 0).is_err());
    }

    #[test]
    fn hello_round_trips_and_rejects_garbage() {
        let hello = Hello {
            universe_id: 99,
            universe_rank: 4,
            capabilities: 0,
            program: "ocean".into(),
            program_rank: 1,
        };
        assert_eq!(Hello::decode(&hello.encode()), Ok(hello.clone()));
        let mut bytes = hello.encode();
        bytes.pop();
        assert!(Hello::decode(&bytes).is_err());
        assert!(Hello::decode(&[1, 2, 3]).is_err());
        let mut bytes = hello.encode();
        let last = bytes.len() - 1;
        bytes[last] = 0xff;
        assert!(Hello::decode(&bytes).is_err());
    }
}

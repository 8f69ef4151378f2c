//! The two active messages the UCX transport sends, and their headers.
//!
//! `FRAMES` carries one Tether frame: its 56-byte header, then the sending
//! process's universe rank, the length of a worker address that precedes
//! the payload in the message's data, and flags. Only a connector's
//! `Hello` carries that address, so that the acceptor can answer without a
//! rendezvous lookup; every other frame has length 0 there.
//!
//! `DIAL` asks the lower universe rank of a pair to open the pair's link
//! (`mod.rs`: the lower rank is always the link's connector). Its header
//! is the universe id, the sender's rank and flags, its data the sender's
//! worker address. It carries no frame and no sequence number: asking
//! twice changes nothing, and the handshake that follows authenticates
//! both.
//!
//! The flags of a `Hello` and of a `DIAL` say whether the sender's
//! endpoint uses UCX's peer error handling ([`PEER_ERRORS`]): UCX refuses
//! a pair whose two endpoints differ there, so the side that makes the
//! pair's second endpoint follows the first.

use tether_proto::wire::HEADER_LEN;

/// AM handler id of frames.
pub const FRAMES: u16 = 1;
/// AM handler id of dial requests.
pub const DIAL: u16 = 2;

/// Flag: the sender's endpoint to the receiver uses UCX's peer error
/// handling.
pub const PEER_ERRORS: u16 = 1;

/// Bytes of a `FRAMES` header: the frame header, the sender's rank, the
/// address length and the flags.
pub const FRAME_AM_HEADER: usize = HEADER_LEN + 8;
/// Bytes of a `DIAL` header.
pub const DIAL_AM_HEADER: usize = 16;

/// A `FRAMES` header: `frame` as encoded (stamped), then `from`,
/// `address_len` and `flags`.
pub fn frame_header(
    frame: &[u8; HEADER_LEN],
    from: u32,
    address_len: u16,
    flags: u16,
) -> [u8; FRAME_AM_HEADER] {
    let mut out = [0u8; FRAME_AM_HEADER];
    out[..HEADER_LEN].copy_from_slice(frame);
    out[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&from.to_le_bytes());
    out[HEADER_LEN + 4..HEADER_LEN + 6].copy_from_slice(&address_len.to_le_bytes());
    out[HEADER_LEN + 6..].copy_from_slice(&flags.to_le_bytes());
    out
}

/// A decoded `FRAMES` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameAm {
    pub frame: [u8; HEADER_LEN],
    pub from: u32,
    pub address_len: u16,
    pub flags: u16,
}

impl FrameAm {
    /// The link sequence number the frame header carries (bytes 8..16,
    /// `tether_proto::wire`), read before the link checks the header:
    /// UCX promises no order between active messages, so arrivals are
    /// put back in order by it.
    pub fn seq(&self) -> u64 {
        u64::from_le_bytes(self.frame[8..16].try_into().expect("8 bytes"))
    }
}

/// Splits a `FRAMES` header; `None` when it has the wrong length.
pub fn parse_frame(header: &[u8]) -> Option<FrameAm> {
    if header.len() != FRAME_AM_HEADER {
        return None;
    }
    let u16_at = |at: usize| u16::from_le_bytes(header[at..at + 2].try_into().expect("2 bytes"));
    Some(FrameAm {
        frame: header[..HEADER_LEN].try_into().expect("header length"),
        from: u32::from_le_bytes(
            header[HEADER_LEN..HEADER_LEN + 4]
                .try_into()
                .expect("4 bytes"),
        ),
        address_len: u16_at(HEADER_LEN + 4),
        flags: u16_at(HEADER_LEN + 6),
    })
}

/// A decoded `DIAL` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DialAm {
    pub universe_id: u64,
    pub from: u32,
    pub flags: u16,
}

/// A `DIAL` header.
pub fn dial_header(dial: DialAm) -> [u8; DIAL_AM_HEADER] {
    let mut out = [0u8; DIAL_AM_HEADER];
    out[..8].copy_from_slice(&dial.universe_id.to_le_bytes());
    out[8..12].copy_from_slice(&dial.from.to_le_bytes());
    out[12..14].copy_from_slice(&dial.flags.to_le_bytes());
    out
}

/// Splits a `DIAL` header; `None` when it has the wrong length.
pub fn parse_dial(header: &[u8]) -> Option<DialAm> {
    if header.len() != DIAL_AM_HEADER {
        return None;
    }
    Some(DialAm {
        universe_id: u64::from_le_bytes(header[..8].try_into().expect("8 bytes")),
        from: u32::from_le_bytes(header[8..12].try_into().expect("4 bytes")),
        flags: u16::from_le_bytes(header[12..14].try_into().expect("2 bytes")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_proto::{FrameHeader, FrameKind};

    #[test]
    fn a_frame_header_round_trips_with_its_sequence_number() {
        let mut header = FrameHeader::new(FrameKind::Eager);
        header.seq = 41;
        header.payload_len = 8;
        let am = frame_header(&header.encode(), 7, 96, PEER_ERRORS);
        let parsed = parse_frame(&am).expect("right length");
        assert_eq!(parsed.seq(), 41);
        assert_eq!(
            (parsed.from, parsed.address_len, parsed.flags),
            (7, 96, PEER_ERRORS)
        );
        assert_eq!(parsed.frame, header.encode());
        assert!(parse_frame(&am[1..]).is_none());
    }

    #[test]
    fn a_dial_header_round_trips() {
        let dial = DialAm {
            universe_id: 0xfeed,
            from: 3,
            flags: PEER_ERRORS,
        };
        assert_eq!(parse_dial(&dial_header(dial)), Some(dial));
        assert_eq!(parse_dial(&dial_header(dial)[..15]), None);
    }
}

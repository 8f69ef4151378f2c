//! One-line frames: an eager message of at most [`LINE_PAYLOAD`] bytes
//! written as a single cache line of the ring, which the receiver finds by
//! polling the line itself instead of the ring's cursor.
//!
//! Every frame in a ring starts on a line boundary (frames are padded to
//! whole [`LINE`]s). A one-line frame is, little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | marker: sequence number << 16, low 16 bits `0xA55A` |
//! | 8 | 4 | communication context |
//! | 12 | 4 | tag |
//! | 16 | 4 | payload length, at most [`LINE_PAYLOAD`] |
//! | 20 | 4 | 0 |
//! | 24 | length | payload |
//!
//! The writer stores the marker last, with Release; a receiver that loads
//! the marker of the sequence number it expects, with Acquire, at its read
//! position has the whole frame. The message then crosses between cores
//! as one cache line, where a cursor costs a second one (the cursor's line,
//! then the frame's), and between cores of different dies each line is
//! a few hundred nanoseconds (docs/journal/2026-11-24-shm.md).
//!
//! Every other frame starts with the header's magic, whose low 16 bits
//! (`"TT"`) are never the marker's. A stale word cannot pass for the
//! marker: the writer zeroes the word after every frame before it makes the
//! frame visible, keeping one line of the ring free for it ([`RESERVE`]),
//! so the word at the reader's position is always 0, this frame's first
//! word, or its marker (tether-ring's threads and loom tests check that).
//! For a one-line frame that word is usually zeroed ahead of need, right
//! after the frame before became visible (`Outgoing::zero_ahead`), which
//! measured faster than zeroing it just before the marker.

use tether_proto::{FrameHeader, FrameKind, WireError};

/// The alignment and padding of frames in a ring: a cache line.
pub const LINE: usize = 64;
/// The largest payload of a one-line frame.
pub const LINE_PAYLOAD: usize = LINE - PAYLOAD_AT;
/// Bytes a writer keeps free after its last frame, for the zeroed word.
pub const RESERVE: usize = LINE;
/// Where the payload starts in a one-line frame.
pub const PAYLOAD_AT: usize = 24;
/// The fields between the marker and the payload.
pub const FIELDS: usize = PAYLOAD_AT - 8;
const MARKER_TAG: u64 = 0xA55A;

/// The marker of frame number `seq` (its low 48 bits).
pub fn marker(seq: u64) -> u64 {
    (seq << 16) | MARKER_TAG
}

/// Whether a frame's first word is a one-line frame's marker.
pub fn is_marker(word: u64) -> bool {
    word & 0xFFFF == MARKER_TAG
}

/// The sequence number a marker carries (low 48 bits).
pub fn marker_seq(word: u64) -> u64 {
    word >> 16
}

/// Copies `len <= LINE_PAYLOAD` bytes in a few unaligned moves, without
/// the call into `memcpy` a copy of unknown length compiles to: for a
/// one-line message's payload, the call and its size dispatch were a large
/// share of writing the line (docs/journal/2026-11-24-design-measurements.md).
///
/// # Safety
/// `src` is valid for `len` reads, `dst` for `len` writes, and they do
/// not overlap.
#[inline(always)]
pub unsafe fn copy_small(src: *const u8, dst: *mut u8, len: usize) {
    debug_assert!(len <= LINE_PAYLOAD);
    // Pieces of 8 (the last overlapping the one before), else of 4, else
    // single bytes: every byte is copied, none outside the range. Written
    // out rather than as a loop, which the compiler turns back into a call.
    let piece = |at: usize, size: usize| match size {
        8 => dst
            .add(at)
            .cast::<u64>()
            .write_unaligned(src.add(at).cast::<u64>().read_unaligned()),
        4 => dst
            .add(at)
            .cast::<u32>()
            .write_unaligned(src.add(at).cast::<u32>().read_unaligned()),
        _ => *dst.add(at) = *src.add(at),
    };
    const _: () = assert!(LINE_PAYLOAD <= 40);
    if len >= 8 {
        piece(0, 8);
        if len > 16 {
            piece(8, 8);
        }
        if len > 24 {
            piece(16, 8);
        }
        if len > 32 {
            piece(24, 8);
        }
        if len > 8 {
            piece(len - 8, 8);
        }
    } else if len >= 4 {
        piece(0, 4);
        piece(len - 4, 4);
    } else {
        if len >= 1 {
            piece(0, 1);
        }
        if len >= 2 {
            piece(1, 1);
        }
        if len == 3 {
            piece(2, 1);
        }
    }
}

/// A frame of `len` bytes padded to whole lines.
pub fn padded(len: usize) -> usize {
    len.next_multiple_of(LINE)
}

/// Whether a frame is written as one line: an eager message whose
/// payload fits.
pub fn fits(header: &FrameHeader, len: usize) -> bool {
    header.kind == FrameKind::Eager && len <= LINE_PAYLOAD
}

/// The fields of a one-line frame between its marker and its payload:
/// two little-endian words, (context | tag << 32) and (length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields {
    pub context: u32,
    pub tag: i32,
    /// Payload bytes; at most [`LINE_PAYLOAD`] in a valid frame.
    pub len: u32,
}

impl Fields {
    fn to_words(self) -> [u64; 2] {
        [
            u64::from(self.context) | u64::from(self.tag as u32) << 32,
            u64::from(self.len),
        ]
    }

    fn from_words([first, second]: [u64; 2]) -> Fields {
        Fields {
            context: first as u32,
            tag: (first >> 32) as u32 as i32,
            len: second as u32,
        }
    }

    /// The fields of the [`FIELDS`] bytes after a marker.
    pub fn from_bytes(bytes: &[u8; FIELDS]) -> Fields {
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        Fields::from_words([word(0), word(8)])
    }

    /// The eager message header of one-line frame number `seq` with these
    /// fields, checked.
    pub fn header(self, seq: u64) -> Result<FrameHeader, WireError> {
        let len = u64::from(self.len);
        if len > LINE_PAYLOAD as u64 {
            return Err(WireError::BadLength {
                kind: FrameKind::Eager,
                got: len,
                max: LINE_PAYLOAD as u64,
            });
        }
        let mut header = FrameHeader::new(FrameKind::Eager);
        header.seq = seq;
        header.context = self.context;
        header.tag = self.tag;
        header.payload_len = len;
        header.msg_size = len;
        Ok(header)
    }
}

/// Writes everything of a one-line frame but its marker into `line`: the
/// fields and the payload, in place (two word stores and a few moves; the
/// bytes after the payload keep what they held).
///
/// # Safety
/// `line` is a line of a ring, 8-aligned and valid for [`LINE`] writes;
/// `payload` is valid for `fields.len <= LINE_PAYLOAD` reads.
#[inline]
pub unsafe fn write_body(line: *mut u8, fields: Fields, payload: *const u8) {
    let [first, second] = fields.to_words();
    line.add(8).cast::<u64>().write(first.to_le());
    line.add(16).cast::<u64>().write(second.to_le());
    copy_small(payload, line.add(PAYLOAD_AT), fields.len as usize);
}

/// Reads the fields of the one-line frame at `line`.
///
/// # Safety
/// `line` is a line of a ring, 8-aligned and valid for [`LINE`] reads,
/// whose marker was loaded with Acquire.
#[inline]
pub unsafe fn read_fields(line: *const u8) -> Fields {
    Fields::from_words([
        u64::from_le(line.add(8).cast::<u64>().read()),
        u64::from_le(line.add(16).cast::<u64>().read()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_proto::wire::MAGIC;

    /// Fields written in place read back the same, as words and as the
    /// bytes the engine's path decodes.
    #[test]
    fn fields_round_trip() {
        let fields = Fields {
            context: 7,
            tag: -3,
            len: LINE_PAYLOAD as u32,
        };
        let mut line = [0u64; LINE / 8];
        let payload: Vec<u8> = (1..=LINE_PAYLOAD as u8).collect();
        // SAFETY: `line` is an aligned line; the payload holds `len` bytes.
        let got = unsafe {
            write_body(line.as_mut_ptr().cast(), fields, payload.as_ptr());
            read_fields(line.as_ptr().cast())
        };
        assert_eq!(got, fields);
        let bytes: Vec<u8> = line.iter().flat_map(|w| w.to_ne_bytes()).collect();
        assert_eq!(
            Fields::from_bytes(bytes[8..PAYLOAD_AT].try_into().unwrap()),
            fields
        );
        assert_eq!(&bytes[PAYLOAD_AT..], &payload[..]);
        let header = fields.header(41).unwrap();
        assert_eq!((header.context, header.tag, header.seq), (7, -3, 41));
        assert_eq!((header.payload_len, header.msg_size), (40, 40));
    }

    #[test]
    fn a_length_past_the_line_is_refused() {
        let fields = Fields {
            context: 0,
            tag: 0,
            len: LINE_PAYLOAD as u32 + 1,
        };
        assert!(matches!(
            fields.header(0),
            Err(WireError::BadLength {
                got: 41,
                max: 40,
                ..
            })
        ));
    }

    #[test]
    fn a_header_never_reads_as_a_marker() {
        let first = u64::from_le_bytes([MAGIC[0], MAGIC[1], MAGIC[2], MAGIC[3], 1, 0, 4, 0]);
        assert!(!is_marker(first));
        assert!(!is_marker(0));
        assert!(is_marker(marker(5)));
        assert_eq!(marker_seq(marker(5)), 5);
    }

    #[test]
    fn small_copies_move_exactly_their_bytes() {
        for len in 0..=LINE_PAYLOAD {
            let src: Vec<u8> = (0..LINE_PAYLOAD as u8).map(|b| b + 1).collect();
            let mut dst = [0xEEu8; LINE_PAYLOAD + 2];
            // SAFETY: `src` holds LINE_PAYLOAD bytes, `dst` has room after
            // its first byte for them.
            unsafe { copy_small(src.as_ptr(), dst.as_mut_ptr().add(1), len) };
            assert_eq!(&dst[1..1 + len], &src[..len], "length {len}");
            assert_eq!(dst[0], 0xEE, "byte before, length {len}");
            assert!(
                dst[1 + len..].iter().all(|&b| b == 0xEE),
                "bytes after, length {len}"
            );
        }
    }
}

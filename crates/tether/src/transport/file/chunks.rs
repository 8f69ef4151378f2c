//! Rendezvous data streamed as several files ("chunks"), so that the
//! receiver reads the first part of a large payload while the sender still
//! writes the rest. No I/O here: how a payload is cut, and what a reader
//! accepts as the next part of a message it has begun.
//!
//! A `Data` frame whose payload exceeds [`CHUNK`] bytes is written as
//! files with consecutive sequence numbers, each an ordinary file of the
//! format (`format.rs`: its own prefix, length and CRC32C). Each carries
//! the `Data` frame header unchanged except for its sequence number and
//! `payload_len`, the length of that file's part, smaller than the
//! header's `msg_size` (the whole payload). Parts follow in order: a part
//! lands at the sum of the lengths of the parts before it. A `Data` file
//! whose `payload_len` equals its `msg_size` is a whole payload, as before.
//!
//! The part lengths are the sender's choice (the receiver accepts any
//! length from 1 to what remains), so sender and receiver need not agree
//! on [`CHUNK`].

use tether_proto::{FrameHeader, FrameKind, Region};

/// Payloads of `Data` frames above this many bytes are written as parts
/// of at most this size. Small enough that the reader starts soon after
/// the writer (a part costs about a millisecond to write to page cache),
/// large enough that the per-file costs (create, rename, open, remove,
/// one wake-up of the reader) stay near 1% of a part's copy.
pub const CHUNK: usize = 4 << 20;

/// The byte ranges of the parts of a payload of `len` bytes: one range
/// (the whole payload) up to [`CHUNK`] bytes, else `CHUNK`-sized parts and
/// a shorter last one.
pub fn parts(len: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let count = if len <= CHUNK { 1 } else { len.div_ceil(CHUNK) };
    let step = if len <= CHUNK { len.max(1) } else { CHUNK };
    (0..count).map(move |i| i * step..((i + 1) * step).min(len))
}

/// Whether a `Data` frame read from a file is the first part of a payload
/// sent in several files (its `payload_len` is less than its `msg_size`).
pub fn is_first_part(frame: &FrameHeader) -> bool {
    frame.kind == FrameKind::Data && frame.payload_len > 0 && frame.payload_len < frame.msg_size
}

/// How far a payload that arrives in parts is.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// The first part's frame header (sequence number and length aside,
    /// every part repeats it).
    pub first: FrameHeader,
    /// Bytes received and verified so far.
    pub offset: u64,
}

impl Progress {
    /// Bytes still to come.
    pub fn remaining(&self) -> u64 {
        self.first.msg_size - self.offset
    }

    /// Checks that `frame` (already verified against its file) is the
    /// next part of this payload; says what differs if not.
    pub fn check_next(&self, frame: &FrameHeader) -> Result<(), String> {
        let first = &self.first;
        let same = frame.kind == FrameKind::Data
            && frame.flags == first.flags
            && frame.context == first.context
            && frame.tag == first.tag
            && frame.msg_size == first.msg_size
            && frame.sender_req == first.sender_req
            && frame.receiver_req == first.receiver_req;
        if !same {
            return Err(format!(
                "it is not the next part of the {}-byte payload of receive {:#x} ({} of {} bytes in): a {:?} frame for receive {:#x} of {} bytes",
                first.msg_size, first.receiver_req, self.offset, first.msg_size,
                frame.kind, frame.receiver_req, frame.msg_size
            ));
        }
        if frame.payload_len == 0 || frame.payload_len > self.remaining() {
            return Err(format!(
                "a part of {} bytes where 1 to {} bytes of the {}-byte payload of receive {:#x} remain",
                frame.payload_len,
                self.remaining(),
                first.msg_size,
                first.receiver_req
            ));
        }
        Ok(())
    }

    /// Where in `region` (the granted receive buffer, `msg_size` bytes)
    /// the next part of `len` bytes goes.
    pub fn destination(&self, region: Region, len: u64) -> Region {
        assert!(
            self.offset + len <= region.len as u64,
            "a part beyond the granted buffer"
        );
        Region {
            ptr: region.ptr.wrapping_add(self.offset as usize),
            len: len as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_a_payload_exactly_and_in_order() {
        for len in [
            0,
            1,
            CHUNK - 1,
            CHUNK,
            CHUNK + 1,
            2 * CHUNK - 1,
            2 * CHUNK,
            2 * CHUNK + 1,
            5 * CHUNK + 17,
        ] {
            let parts: Vec<_> = parts(len).collect();
            assert_eq!(parts.len(), len.div_ceil(CHUNK).max(1), "len {len}");
            let mut next = 0;
            for part in &parts {
                assert_eq!(part.start, next, "len {len}");
                assert!(part.len() <= CHUNK && (!part.is_empty() || len == 0));
                next = part.end;
            }
            assert_eq!(next, len);
        }
    }

    fn data(payload_len: u64, msg_size: u64) -> FrameHeader {
        let mut frame = FrameHeader::new(FrameKind::Data);
        frame.payload_len = payload_len;
        frame.msg_size = msg_size;
        frame.sender_req = 0x11;
        frame.receiver_req = 0x22;
        frame.tag = 5;
        frame
    }

    #[test]
    fn only_a_shorter_data_frame_begins_parts() {
        assert!(is_first_part(&data(10, 30)));
        assert!(!is_first_part(&data(30, 30)));
        assert!(!is_first_part(&data(0, 30)));
        let mut eager = data(10, 30);
        eager.kind = FrameKind::Eager;
        assert!(!is_first_part(&eager));
    }

    #[test]
    fn a_part_must_continue_the_same_payload_within_its_size() {
        let mut buffer = [0u8; 30];
        let incoming = Progress {
            first: data(10, 30),
            offset: 10,
        };
        assert_eq!(incoming.remaining(), 20);
        incoming.check_next(&data(20, 30)).unwrap();
        incoming.check_next(&data(1, 30)).unwrap();
        assert!(incoming
            .check_next(&data(21, 30))
            .unwrap_err()
            .contains("1 to 20 bytes"));
        assert!(incoming.check_next(&data(0, 30)).is_err());
        for change in [
            |f: &mut FrameHeader| f.receiver_req = 0x23,
            |f: &mut FrameHeader| f.sender_req = 0x12,
            |f: &mut FrameHeader| f.msg_size = 31,
            |f: &mut FrameHeader| f.tag = 6,
            |f: &mut FrameHeader| f.kind = FrameKind::Eager,
        ] {
            let mut other = data(5, 30);
            change(&mut other);
            assert!(incoming
                .check_next(&other)
                .unwrap_err()
                .contains("not the next part"));
        }
        let region = Region {
            ptr: buffer.as_mut_ptr(),
            len: buffer.len(),
        };
        let at = incoming.destination(region, 20);
        assert_eq!(at.ptr, buffer[10..].as_mut_ptr());
        assert_eq!(at.len, 20);
    }
}

//! The mailbox: the cheap shared path for peers without a ring of their
//! own (`TETHER_MAX_LINKS`; the hint paper's UD). Every process owns one,
//! in its segment (`segment.rs`); any writer attached to the segment may
//! write frames into it, one writer at a time (`tether_ring::MailboxControl`).
//! Frames of up to [`MAX_PAYLOAD`] bytes go there while the writer's ring
//! to that peer is closed; the owner copies each record out as it reads
//! it, so one peer's frame that waits for its place never holds up the
//! others' (`ShmTransport`'s stash).
//!
//! A record: a [`RECORD_HEADER`]-byte header (its length, the writer's
//! universe rank, its kind, the writer's record number), then for a frame
//! the frame's header (`tether-proto`) and payload; padded to 8 bytes.
//!
//! Order between the two paths of one writer. The writer's ring and its
//! records in the mailbox are two streams; MPI order holds because the
//! writer switches between them only at points both sides see:
//! - *ring to mailbox*: a ring is closed only once its reader released
//!   everything in it (`Outgoing::give_back`), so every frame it carried
//!   was read before the first record written after; that record is
//!   [`Kind::RingClosed`], after which the owner stops polling the ring
//!   (and touches none of its pages).
//! - *mailbox to ring*: the writer first writes [`Kind::RingOpen`]; the
//!   owner polls the ring only once it read that record, so after every
//!   record before it, and only while none of the writer's records waits
//!   in the stash for its place.

use std::collections::VecDeque;
use std::ops::Deref;

use tether_proto::wire::HEADER_LEN;
use tether_proto::{FrameHeader, Transmit, WireError};
use tether_ring::{Consumer, MailboxControl, Refused, RingControl};

use super::segment::{FileBytes, Mapping, RingBytes, Shared};
use crate::host;
use crate::settings::MAX_EAGER_LIMIT;

/// The largest payload a frame may carry through the mailbox: a frame
/// with more goes through the writer's ring (opened for it).
pub const MAX_PAYLOAD: usize = 1024;
/// Bytes of a record's own header.
pub const RECORD_HEADER: usize = 24;
const ALIGN: usize = 8;

/// What a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A frame: its header and payload follow.
    Frame = 0,
    /// The writer's frames go through its ring from here on.
    RingOpen = 1,
    /// The writer's ring is drained and closed: its frames come here.
    RingClosed = 2,
}

impl Kind {
    fn from_word(word: u32) -> Option<Kind> {
        match word {
            0 => Some(Kind::Frame),
            1 => Some(Kind::RingOpen),
            2 => Some(Kind::RingClosed),
            _ => None,
        }
    }
}

/// The lock id of writer process (`pid`, `start`): nonzero, and enough
/// to tell whether that process still runs ([`holder_alive`]).
pub fn writer_id(pid: u32, start: u64) -> u64 {
    (u64::from(pid) << 32) | (start & 0xffff_ffff)
}

/// Whether the process a lock id names still runs (the same pid with
/// the same start time).
pub fn holder_alive(id: u64) -> bool {
    let pid = (id >> 32) as u32;
    host::start_time(pid).is_some_and(|start| start & 0xffff_ffff == id & 0xffff_ffff)
}

/// What waits to go through the mailbox, in order.
#[derive(Debug)]
pub enum Pending {
    Frame(Transmit),
    RingOpen,
    RingClosed,
}

/// The writing side: one peer's mailbox, and what waits for it.
pub struct MailboxOut {
    control: Shared<MailboxControl>,
    bytes: FileBytes,
    id: u64,
    rank: u32,
    /// Records written so far.
    seq: u64,
    pub pending: VecDeque<Pending>,
    /// The writer that held the lock at the last refusal.
    pub held_by: Option<u64>,
}

impl MailboxOut {
    /// The mailbox of a peer whose segment is `mapping`, written by
    /// this process (universe rank `rank`, lock id `id`).
    pub fn new(mapping: &Mapping, id: u64, rank: u32) -> Self {
        let (control, bytes) = mapping.mailbox_for_writer();
        MailboxOut {
            control,
            bytes,
            id,
            rank,
            seq: 0,
            pending: VecDeque::new(),
            held_by: None,
        }
    }

    /// Writes one record of `kind`: for a frame, `header` and `payload`.
    /// Returns whether it did (else the mailbox is busy or full: nothing
    /// was written; try again later).
    pub fn write(&mut self, kind: Kind, header: Option<&FrameHeader>, payload: &[u8]) -> bool {
        let mut frame = [0u8; HEADER_LEN];
        let frame: &[u8] = match header {
            Some(header) => {
                let mut header = *header;
                header.seq = self.seq;
                header.payload_len = payload.len() as u64;
                header.encode_into(&mut frame);
                &frame
            }
            None => &[],
        };
        let len = RECORD_HEADER + frame.len() + payload.len();
        let padding = [0u8; ALIGN];
        let padding = &padding[..len.next_multiple_of(ALIGN) - len];
        let mut own = [0u8; RECORD_HEADER];
        own[0..4].copy_from_slice(&(len as u32).to_le_bytes());
        own[4..8].copy_from_slice(&self.rank.to_le_bytes());
        own[8..12].copy_from_slice(&(kind as u32).to_le_bytes());
        own[16..24].copy_from_slice(&self.seq.to_le_bytes());
        // SAFETY: `bytes` is the mailbox's storage, written only through
        // `MailboxControl::write`.
        match unsafe {
            self.control
                .write(&self.bytes, self.id, &[&own, frame, payload, padding])
        } {
            Ok(()) => {
                self.seq += 1;
                self.held_by = None;
                true
            }
            Err(Refused::Held(holder)) => {
                self.held_by = Some(holder);
                false
            }
            Err(Refused::Full) => {
                self.held_by = None;
                false
            }
        }
    }

    /// Frees the mailbox's lock if the writer holding it at the last
    /// refusal is gone (it would never free it).
    pub fn free_if_holder_gone(&mut self) {
        if let Some(holder) = self.held_by.take() {
            if !holder_alive(holder) && self.control.free_from(holder) {
                tracing::warn!(
                    "a shared-memory mailbox's writer (pid {}) died holding its lock: freed",
                    holder >> 32
                );
            }
        }
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.seq
    }

    /// Bytes this direction holds in user space (frames waiting).
    pub fn queued_bytes(&self) -> u64 {
        self.pending
            .iter()
            .map(|p| match p {
                Pending::Frame(t) => (HEADER_LEN + t.payload.len()) as u64,
                _ => 0,
            })
            .sum()
    }
}

/// A record the owner read.
#[derive(Debug)]
pub struct Record {
    /// The writer's record number (its frames' sequence numbers too).
    pub seq: u64,
    pub body: Body,
}

/// What a record said.
#[derive(Debug)]
pub enum Body {
    /// A frame: its header (its sequence number the writer's next) and
    /// payload.
    Frame(FrameHeader, Vec<u8>),
    /// A frame whose header does not decode or does not match its record:
    /// its sender broke the protocol (the record's own framing was sound, so
    /// the mailbox reads on).
    BadFrame(WireError),
    RingOpen,
    RingClosed,
}

/// The ring cursors of the mailbox, for its consumer.
pub struct MailboxRing(Shared<MailboxControl>);

impl Deref for MailboxRing {
    type Target = RingControl;
    fn deref(&self) -> &RingControl {
        self.0.ring()
    }
}

/// The owner's side: reads records, whole.
pub struct MailboxIn {
    consumer: Consumer<MailboxRing, RingBytes>,
}

/// Why the owner stopped reading its mailbox.
#[derive(Debug)]
pub enum Unreadable {
    /// A record does not parse: the mailbox cannot be read past it.
    Corrupt(String),
}

impl MailboxIn {
    /// The reading end of this process's own mailbox.
    pub fn new(control: Shared<MailboxControl>, bytes: RingBytes) -> MailboxIn {
        // SAFETY: the owner creates one consumer of its mailbox.
        let consumer = unsafe { Consumer::new(MailboxRing(control), bytes) };
        MailboxIn { consumer }
    }

    /// Whether records wait (reads the cursor; for a process about to
    /// sleep, after its doorbell says so).
    pub fn has_data(&self) -> bool {
        self.consumer.has_data()
    }

    /// The sender of the next record, without reading it.
    pub fn next_sender(&mut self) -> Option<u32> {
        if self.consumer.readable(RECORD_HEADER) < RECORD_HEADER {
            return None;
        }
        let mut own = [0u8; 8];
        // SAFETY: a local array of 8 bytes.
        unsafe { self.consumer.peek(own.as_mut_ptr(), 8) };
        Some(u32::from_le_bytes(own[4..8].try_into().expect("4 bytes")))
    }

    /// Reads the next record, if one is published. A record is published
    /// whole, so a visible header means all of it is there.
    pub fn next(&mut self) -> Option<Result<Record, Unreadable>> {
        if self.consumer.readable(RECORD_HEADER) < RECORD_HEADER {
            return None;
        }
        let mut own = [0u8; RECORD_HEADER];
        // SAFETY: a local array of RECORD_HEADER bytes.
        unsafe { self.consumer.peek(own.as_mut_ptr(), RECORD_HEADER) };
        let word = |at: usize| u32::from_le_bytes(own[at..at + 4].try_into().expect("4 bytes"));
        let (len, sender) = (word(0) as usize, word(4));
        let seq = u64::from_le_bytes(own[16..24].try_into().expect("8 bytes"));
        let Some(kind) = Kind::from_word(word(8)) else {
            return Some(Err(Unreadable::Corrupt(format!(
                "a record of unknown kind {} from universe rank {sender}",
                word(8)
            ))));
        };
        let body = len.saturating_sub(RECORD_HEADER);
        let most = match kind {
            Kind::Frame => HEADER_LEN + MAX_PAYLOAD,
            Kind::RingOpen | Kind::RingClosed => 0,
        };
        let padded = len.next_multiple_of(ALIGN);
        if len < RECORD_HEADER
            || body > most
            || (kind == Kind::Frame && body < HEADER_LEN)
            || self.consumer.readable(padded) < padded
        {
            return Some(Err(Unreadable::Corrupt(format!(
                "a record of {len} bytes ({kind:?}) from universe rank {sender}"
            ))));
        }
        self.consumer.skip(RECORD_HEADER);
        let body = match kind {
            Kind::Frame => {
                let mut header = [0u8; HEADER_LEN];
                let mut payload = vec![0u8; body - HEADER_LEN];
                // SAFETY: local buffers of the lengths popped; the bytes
                // are published (checked above).
                unsafe {
                    self.consumer.pop(header.as_mut_ptr(), HEADER_LEN);
                    self.consumer.pop(payload.as_mut_ptr(), payload.len());
                }
                self.consumer.skip(padded - len);
                match FrameHeader::decode(&header, seq, MAX_EAGER_LIMIT) {
                    Ok(h) if h.payload_len == payload.len() as u64 => Body::Frame(h, payload),
                    Ok(h) => Body::BadFrame(WireError::UnexpectedFrame {
                        got: h.kind,
                        state: "in a mailbox record that does not match it",
                    }),
                    Err(e) => Body::BadFrame(e),
                }
            }
            Kind::RingOpen | Kind::RingClosed => {
                self.consumer.skip(padded - RECORD_HEADER);
                if kind == Kind::RingOpen {
                    Body::RingOpen
                } else {
                    Body::RingClosed
                }
            }
        };
        Some(Ok(Record { seq, body }))
    }

    /// Returns the room of every record read to the writers.
    pub fn release(&mut self) -> bool {
        self.consumer.release()
    }

    /// The mailbox's bytes, and those resident now.
    pub fn footprint(&self) -> (u64, u64) {
        self.consumer.storage().footprint()
    }
}

#[cfg(test)]
mod tests {
    use tether_proto::FrameKind;

    use super::*;
    use crate::transport::shm::segment::{attach, Segment, Writer};

    /// This process as a writer of its own segment (through /proc, as a
    /// peer writes: the mailbox's bytes through the file).
    fn me() -> Writer {
        Writer {
            pid: std::process::id(),
            start: 1,
            segment_fd: 0,
            ring_open: false,
        }
    }

    /// A fresh segment of universe 1 with three slots, and the reading
    /// end of its mailbox.
    fn own_mailbox() -> (Segment, MailboxIn) {
        let mut segment = Segment::create().unwrap();
        let (control, bytes) = segment.init(1, 0, 3, 4096, false).unwrap().mailbox();
        (segment, MailboxIn::new(control, bytes))
    }

    fn eager(tag: i32) -> FrameHeader {
        let mut header = FrameHeader::new(FrameKind::Eager);
        header.context = 3;
        header.tag = tag;
        header
    }

    /// Two writers' records (frames of 0 to MAX_PAYLOAD bytes and the
    /// ring switches) come out whole, in the order written, numbered per
    /// writer; past the mailbox's room a write is refused, not torn.
    #[test]
    fn records_of_two_writers_come_out_whole_and_numbered() {
        let (segment, mut reader) = own_mailbox();
        let peer = attach(std::process::id(), segment.fd(), 1, 1, me(), None).unwrap();
        let writer = |rank| MailboxOut::new(&peer, writer_id(100 + rank, 1), rank);
        let (mut one, mut two) = (writer(1), writer(2));
        let payload: Vec<u8> = (0..MAX_PAYLOAD).map(|i| i as u8).collect();
        assert!(one.write(Kind::Frame, Some(&eager(5)), &payload[..3]));
        assert!(two.write(Kind::RingClosed, None, &[]));
        assert!(two.write(Kind::Frame, Some(&eager(6)), &payload));
        assert!(one.write(Kind::Frame, Some(&eager(7)), &[]));
        assert!(two.write(Kind::RingOpen, None, &[]));
        let mut got = Vec::new();
        while let Some(record) = reader.next() {
            got.push(record.unwrap());
        }
        assert!(reader.release());
        let summary: Vec<String> = got
            .iter()
            .map(|r| match &r.body {
                Body::Frame(h, p) => format!("{} frame {} {}", r.seq, h.tag, p.len()),
                other => format!("{} {other:?}", r.seq),
            })
            .collect();
        assert_eq!(
            summary,
            [
                "0 frame 5 3",
                "0 RingClosed",
                "1 frame 6 1024",
                "1 frame 7 0",
                "2 RingOpen"
            ]
        );
        let Body::Frame(_, p) = &got[2].body else {
            unreachable!()
        };
        assert_eq!(p, &payload);
        let mut written = 0;
        while one.write(Kind::Frame, Some(&eager(1)), &payload) {
            written += 1;
        }
        assert_eq!(one.held_by, None, "refused for room");
        let mut read = 0;
        while let Some(record) = reader.next() {
            assert!(matches!(record.unwrap().body, Body::Frame(_, ref p) if p == &payload));
            read += 1;
        }
        assert_eq!(read, written);
        let record = RECORD_HEADER + HEADER_LEN + MAX_PAYLOAD;
        assert_eq!(written, super::super::segment::MAILBOX_BYTES / record);
    }

    /// A record whose length cannot be is corrupt: the reader stops
    /// there instead of reading garbage as frames.
    #[test]
    fn a_record_of_impossible_length_is_refused() {
        let (segment, mut reader) = own_mailbox();
        let (control, bytes) = segment.mapping().unwrap().mailbox();
        let mut own = [0u8; RECORD_HEADER];
        own[0..4].copy_from_slice(&100_000u32.to_le_bytes());
        // SAFETY: the mailbox's storage.
        unsafe { control.write(&bytes, 1, &[&own]) }.unwrap();
        assert!(matches!(reader.next(), Some(Err(Unreadable::Corrupt(_)))));
    }

    #[test]
    fn a_lock_id_names_a_living_process_only_with_its_start_time() {
        let pid = std::process::id();
        let start = host::start_time(pid).unwrap();
        assert!(holder_alive(writer_id(pid, start)));
        assert!(!holder_alive(writer_id(pid, start + 1)));
    }
}

//! Framing over the rings. Every frame starts on a 64-byte line and is
//! padded to whole lines. An eager message of up to 40 bytes is one line
//! that the receiver finds by polling it (`line.rs`); every other frame is
//! a frame of `tether-proto` (56-byte header, then the payload) whose
//! header is padded to a 64-byte *prefix*, its last 8 bytes 0 (checked).
//! Rendezvous data that moves by cross-memory attach is the engine's
//! protocol (keys in the `Rts`/`Cts` payloads, `remote.rs`): the ring
//! carries its frames like any other.
//!
//! The ring is a byte stream, so frames larger than the ring (eager
//! messages, or data when cross-memory attach is refused) stream through
//! it while the reader drains it. Payloads are copied once into the ring
//! and once out, straight into the posted buffer when a receive is posted.

use std::collections::VecDeque;
use std::os::unix::net::SocketAddr;

use tether_proto::wire::HEADER_LEN;
use tether_proto::{
    classify, Class, FrameHeader, FrameKind, LinkKind, PayloadSink, Region, ReqId, SinkToken,
    Transmit, TransmitPayload, WireError,
};
use tether_ring::{Consumer, Doorbell, Producer, RingControl};

use tether_ring::Ordering;

use super::bell::Ringer;
use super::line::{self, LINE, RESERVE};
use super::segment::{RingBytes, Shared};
use crate::settings::MAX_EAGER_LIMIT;

/// Bytes of a frame's prefix in the ring: the header, padded to a line's
/// first 64 bytes so that payloads start aligned.
pub const PREFIX: usize = 64;
/// Payloads up to this size are written with their prefix in one copy.
const SMALL_PAYLOAD: usize = 192;
/// How far past the write position [`Outgoing::zero_ahead`] keeps line
/// words zeroed: the line a one-line frame written next ends on.
const ZERO_AHEAD: usize = 2 * LINE;
/// Room of frames the short path took that may stay unreturned to the
/// writer until the next call that reads the ring ([`Incoming::release_taken`]):
/// a one-line frame or a small one. A larger frame's room is returned
/// before the receive returns, so that a writer with more to send is not
/// held up while this process computes.
const LAZY_RELEASE: u64 = 4 * LINE as u64;

struct OutFrame {
    prefix: [u8; PREFIX],
    payload: TransmitPayload,
    /// Bytes of the padded frame written so far.
    written: usize,
    completes: Option<ReqId>,
    copy_if_blocked: bool,
}

impl OutFrame {
    fn total(&self) -> usize {
        PREFIX + self.payload.len()
    }

    fn padded(&self) -> usize {
        line::padded(self.total())
    }
}

/// Writes `len` bytes of `payload` from byte `from` on at the ring's write
/// position; a gathered payload's runs are copied straight from the
/// sender's memory, so a strided message is copied once into the ring.
///
/// # Safety
/// The payload's memory is valid for reads; `len` bytes are writable.
unsafe fn write_payload(
    producer: &mut Producer<Shared<RingControl>, RingBytes>,
    payload: &TransmitPayload,
    from: usize,
    len: usize,
) {
    if let TransmitPayload::Gathered(g) = payload {
        let mut at = 0;
        g.pieces_from(from, |ptr, n| {
            let n = n.min(len - at);
            // SAFETY: as this function's.
            unsafe { producer.write_ahead(at, ptr, n) };
            at += n;
            at < len
        });
    } else {
        // SAFETY: as this function's.
        unsafe { producer.write_ahead(0, payload_ptr(payload).add(from), len) };
    }
}

/// Encodes the prefix of frame number `seq`: `header` with `seq` and
/// `payload_len` filled in, then zeros.
fn encode_prefix(header: &FrameHeader, seq: u64, payload_len: usize, out: &mut [u8; PREFIX]) {
    let mut header = *header;
    header.seq = seq;
    header.payload_len = payload_len as u64;
    let (head, tail) = out.split_at_mut(HEADER_LEN);
    header.encode_into(head.try_into().expect("header length"));
    tail.fill(0);
}

/// The first word of an encoded prefix, which the writer stores as one
/// word (a reader may be polling it for a one-line frame's marker).
fn first_word(prefix: &[u8; PREFIX]) -> u64 {
    u64::from_le_bytes(prefix[..8].try_into().expect("8 bytes"))
}

/// Bytes the ring takes now for a frame, at most `want`, keeping
/// [`RESERVE`] free after them.
fn room(producer: &mut Producer<Shared<RingControl>, RingBytes>, want: usize) -> usize {
    producer
        .writable(want + RESERVE)
        .saturating_sub(RESERVE)
        .min(want)
}

/// Where a frame's payload bytes start (null when it has none).
fn payload_ptr(payload: &TransmitPayload) -> *const u8 {
    match payload {
        TransmitPayload::None => std::ptr::null(),
        TransmitPayload::Borrowed(r) => r.ptr,
        TransmitPayload::Owned(v) => v.as_ptr(),
        TransmitPayload::Gathered(_) => {
            unreachable!("gathered frames are queued (`write_payload`)")
        }
    }
}

/// The sending side of a channel: the ring this process writes in the
/// peer's segment, and the frames waiting for room in it.
pub struct Outgoing {
    producer: Producer<Shared<RingControl>, RingBytes>,
    bell: Shared<Doorbell>,
    bell_addr: SocketAddr,
    /// The peer issues the barrier of `barrier.rs` before it sleeps and this
    /// process receives it (`barrier.rs`): its doorbell is asked unfenced.
    unfenced: bool,
    seq: u64,
    out: VecDeque<OutFrame>,
    /// Where a small frame is assembled before its one copy into the ring.
    small: Box<[u8; PREFIX + SMALL_PAYLOAD]>,
    /// The first word of every line from the write position up to here
    /// (a position in the ring's byte stream) is 0: the zeroed words the
    /// next frames end on, written ahead ([`Outgoing::zero_ahead`]).
    zeroed_to: u64,
    /// The write position when the ring's pages were last given back
    /// ([`Outgoing::give_back`]); it holds pages again once written past.
    given_back_at: Option<u64>,
}

impl Outgoing {
    /// What this direction holds: the ring (bytes, resident bytes) and
    /// its user-space buffers (the small-frame buffer, frames queued
    /// with their own copy of a payload).
    pub fn footprint(&self) -> (u64, u64, u64) {
        let (ring, resident) = self.producer.storage().footprint();
        let queued: usize = self
            .out
            .iter()
            .map(|frame| {
                PREFIX
                    + match &frame.payload {
                        TransmitPayload::Owned(v) => v.capacity(),
                        _ => 0,
                    }
            })
            .sum();
        (ring, resident, (self.small.len() + queued) as u64)
    }

    pub fn new(
        producer: Producer<Shared<RingControl>, RingBytes>,
        bell: Shared<Doorbell>,
        bell_addr: SocketAddr,
        unfenced: bool,
    ) -> Outgoing {
        let zeroed_to = producer.position();
        Outgoing {
            producer,
            bell,
            bell_addr,
            unfenced,
            seq: 0,
            out: VecDeque::new(),
            small: Box::new([0; PREFIX + SMALL_PAYLOAD]),
            zeroed_to,
            given_back_at: None,
        }
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.seq
    }

    /// Marks the ring as given back before it was ever written: a writer
    /// that starts with the peer's mailbox (`mailbox.rs`) holds no page.
    pub fn start_closed(&mut self) {
        self.given_back_at = Some(self.producer.position());
    }

    /// Whether the ring may hold pages this process wrote: it was written
    /// since its pages were last given back.
    pub fn holds_pages(&self) -> bool {
        self.given_back_at != Some(self.producer.position())
    }

    /// Gives the ring's pages back to the system when nothing waits to be
    /// written and the peer has read and released everything (so neither
    /// side touches the ring's bytes until the next frame, whose pages
    /// come back zeroed, the state an empty ring's words are in). The
    /// link cap's retire of a shared-memory link (`TETHER_MAX_LINKS`):
    /// no word with the peer is needed, as only this process writes the
    /// ring. Returns whether it did.
    pub fn give_back(&mut self) -> bool {
        if !self.holds_pages() || !self.out.is_empty() || !self.producer.drained() {
            return false;
        }
        // SAFETY: this process is the ring's one writer and writes
        // nothing during the call; the consumer released every byte
        // written (`drained`, Acquire), so it reads none of them again
        // and polls only the zero word at its position, which stays 0.
        match unsafe { self.producer.storage().give_back() } {
            Ok(()) => {
                self.given_back_at = Some(self.producer.position());
                true
            }
            Err(e) => {
                tracing::debug!("cannot give a ring's pages back: {e}");
                false
            }
        }
    }

    /// Numbers the next frame and encodes its prefix.
    fn prefix(&mut self, header: &FrameHeader, payload_len: usize) -> [u8; PREFIX] {
        let mut prefix = [0u8; PREFIX];
        encode_prefix(header, self.next_seq(), payload_len, &mut prefix);
        prefix
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq - 1
    }

    /// Writes a whole frame into the ring at once, when no frame waits
    /// before it and the ring has room for all of it (a small message,
    /// nearly always): no queueing, and the request it completes is
    /// returned. Otherwise gives `t` back, untouched, for `enqueue`.
    pub fn write_now(&mut self, t: Transmit, ringer: &Ringer) -> Result<Option<ReqId>, Transmit> {
        if matches!(t.payload, TransmitPayload::Gathered(_)) {
            return Err(t);
        }
        let payload = payload_ptr(&t.payload);
        // SAFETY: a borrowed payload is valid until its request completes,
        // after this; an owned one lives in `t`.
        if unsafe { self.write_whole(&t.header, payload, t.payload.len(), ringer) } {
            Ok(t.completes)
        } else {
            Err(t)
        }
    }

    /// Writes the eager message of the short path of a send (`context`,
    /// `tag`, `len` bytes at `payload`) at once, as [`Outgoing::write_now`]
    /// writes an engine frame; returns whether it did (otherwise nothing
    /// was written). Inlined into the send as far as the one-line frame;
    /// a longer message gets its header and goes through
    /// [`Outgoing::write_whole`], out of line.
    ///
    /// # Safety
    /// `payload` is valid for `len` reads (or `len` is 0).
    #[inline(always)]
    pub unsafe fn write_eager(
        &mut self,
        context: u32,
        tag: i32,
        payload: *const u8,
        len: usize,
        ringer: &Ringer,
    ) -> bool {
        if len <= line::LINE_PAYLOAD {
            // SAFETY: as this function's.
            return unsafe { self.write_line(context, tag, payload, len, ringer) };
        }
        let mut header = FrameHeader::new(FrameKind::Eager);
        header.context = context;
        header.tag = tag;
        header.msg_size = len as u64;
        // SAFETY: as this function's.
        unsafe { self.write_whole(&header, payload, len, ringer) }
    }

    /// Writes a whole frame with `header` and `len` bytes at `payload`,
    /// when no frame waits before it and the
    /// ring has room for all of it; returns whether it did (otherwise
    /// nothing was written).
    ///
    /// # Safety
    /// `payload` is valid for `len` reads (or `len` is 0).
    #[inline(never)]
    unsafe fn write_whole(
        &mut self,
        header: &FrameHeader,
        payload: *const u8,
        len: usize,
        ringer: &Ringer,
    ) -> bool {
        if line::fits(header, len) {
            // SAFETY: as this function's.
            return unsafe { self.write_line(header.context, header.tag, payload, len, ringer) };
        }
        if !self.out.is_empty() {
            return false;
        }
        let padded = line::padded(PREFIX + len);
        if room(&mut self.producer, padded) < padded {
            return false;
        }
        let seq = self.next_seq();
        if len <= SMALL_PAYLOAD {
            // One copy into the ring instead of two: a small frame is
            // assembled in `small` first.
            let (prefix, rest) = self.small.split_at_mut(PREFIX);
            let prefix: &mut [u8; PREFIX] = prefix.try_into().expect("prefix length");
            encode_prefix(header, seq, len, prefix);
            let first = first_word(prefix);
            // SAFETY: `payload` is valid for `len <= SMALL_PAYLOAD` reads by
            // contract, `rest` holds SMALL_PAYLOAD bytes; the room was
            // checked above.
            unsafe {
                std::ptr::copy_nonoverlapping(payload, rest.as_mut_ptr(), len);
                self.producer
                    .write_ahead(8, self.small.as_ptr().add(8), PREFIX - 8 + len);
                self.producer.store_word(0, first, Ordering::Relaxed);
            }
        } else {
            let mut prefix = [0u8; PREFIX];
            encode_prefix(header, seq, len, &mut prefix);
            // SAFETY: as above, in two copies.
            unsafe {
                self.producer
                    .write_ahead(8, prefix[8..].as_ptr(), PREFIX - 8);
                self.producer.write_ahead(PREFIX, payload, len);
                self.producer
                    .store_word(0, first_word(&prefix), Ordering::Relaxed);
            }
        }
        // SAFETY: the room was checked above.
        unsafe { self.producer.advance(padded) };
        self.end_frame();
        self.publish(ringer);
        true
    }

    /// Writes an eager message of at most `line::LINE_PAYLOAD` bytes as a
    /// one-line frame (`line.rs`): fields and payload in place, the zeroed
    /// word after the line, then the marker with Release. Returns whether
    /// it did: not when frames wait before it or the ring is full.
    ///
    /// # Safety
    /// `payload` is valid for `len` reads (or `len` is 0).
    #[inline(always)]
    unsafe fn write_line(
        &mut self,
        context: u32,
        tag: i32,
        payload: *const u8,
        len: usize,
        ringer: &Ringer,
    ) -> bool {
        if !self.out.is_empty() || room(&mut self.producer, LINE) < LINE {
            return false;
        }
        let seq = self.next_seq();
        let fields = line::Fields {
            context,
            tag,
            len: len as u32,
        };
        // SAFETY: frames start on lines and a line never wraps (the ring is
        // whole lines), so the line at the write position is inside the
        // ring; the room for it and RESERVE was checked; `payload` is
        // valid for `len <= LINE_PAYLOAD` reads.
        unsafe {
            let at = self.producer.write_offset();
            line::write_body(self.producer.storage().at(at), fields, payload);
            self.zero_word_at(LINE);
            self.producer
                .store_word(0, line::marker(seq), Ordering::Release);
            self.producer.advance(LINE);
        }
        self.publish(ringer);
        self.zero_ahead();
        true
    }

    /// Makes the word `offset` bytes past the write position, a line's
    /// first where a frame ends, 0 before that frame becomes visible
    /// (see `line.rs`): stores it unless [`Outgoing::zero_ahead`] did.
    ///
    /// # Safety
    /// `offset` is a multiple of [`LINE`] within the room checked for the
    /// frame and [`RESERVE`].
    #[inline(always)]
    unsafe fn zero_word_at(&mut self, offset: usize) {
        let at = self.producer.position() + offset as u64;
        if at >= self.zeroed_to {
            // SAFETY: this function's contract.
            unsafe { self.producer.store_word(offset, 0, Ordering::Relaxed) };
            self.zeroed_to = at + LINE as u64;
        }
    }

    /// Ends a frame at the write position: its word there, where the next
    /// frame's first word goes, is 0.
    fn end_frame(&mut self) {
        // SAFETY: frames are padded to lines, and `room` kept RESERVE
        // bytes free after the frame.
        unsafe { self.zero_word_at(0) };
    }

    /// Zeroes ahead of need, within the room the ring has, the first
    /// words of the lines up to [`ZERO_AHEAD`] bytes past the write
    /// position, after the frame before them is visible: the next one-line
    /// frame then has no word to zero before its marker (a store to a line
    /// that must come back from the reader's cache could hold up the marker
    /// behind it; measured, the mechanism not established:
    /// docs/journal/2026-11-24-shm-night.md).
    #[inline(always)]
    fn zero_ahead(&mut self) {
        let head = self.producer.position();
        let free = self.producer.writable(ZERO_AHEAD) as u64 / LINE as u64 * LINE as u64;
        let end = head + free.min(ZERO_AHEAD as u64);
        let mut at = self.zeroed_to.max(head);
        while at < end {
            // SAFETY: `at` is a line start inside the free room.
            unsafe {
                self.producer
                    .store_word((at - head) as usize, 0, Ordering::Relaxed)
            };
            at += LINE as u64;
        }
        self.zeroed_to = self.zeroed_to.max(at);
    }

    /// Queues an engine frame; numbers it.
    pub fn enqueue(&mut self, t: Transmit) {
        let prefix = self.prefix(&t.header, t.payload.len());
        self.out.push_back(OutFrame {
            prefix,
            payload: t.payload,
            written: 0,
            completes: t.completes,
            copy_if_blocked: t.copy_if_blocked,
        });
    }

    /// Queues a frame of the channel itself (goodbye, abort).
    pub fn enqueue_control(&mut self, kind: FrameKind, tag: i32) {
        let mut header = FrameHeader::new(kind);
        header.tag = tag;
        self.enqueue(Transmit {
            peer: 0,
            header,
            payload: TransmitPayload::None,
            completes: None,
            copy_if_blocked: false,
        });
    }

    /// Frames waiting for room in the ring, whole or in part.
    pub fn queued_frames(&self) -> usize {
        self.out.len()
    }

    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Whether frames wait and the ring has room for some of their bytes
    /// (for a process about to sleep: then it must not).
    pub fn can_progress(&mut self) -> bool {
        let Some(front) = self.out.front() else {
            return false;
        };
        let needs = if front.written == 0 { PREFIX } else { 1 };
        room(&mut self.producer, needs) >= needs
    }

    /// Wakes the peer if it sleeps: after this process freed room in the
    /// ring the peer writes to us, which the peer may be waiting for.
    #[inline(always)]
    pub fn wake_peer(&self, ringer: &Ringer) {
        let must_ring = if self.unfenced {
            self.bell.must_ring_unfenced()
        } else {
            self.bell.must_ring()
        };
        if must_ring {
            ringer.ring(&self.bell_addr);
        }
    }

    /// Writes what the ring takes and wakes the peer if it sleeps.
    /// Requests whose frames were handed over (written, or copied because
    /// the ring was full) go to `done`. Returns whether bytes moved.
    pub fn flush(&mut self, ringer: &Ringer, done: &mut Vec<ReqId>) -> bool {
        let before = self.producer.position();
        while let Some(frame) = self.out.front_mut() {
            if frame.written == 0 {
                if room(&mut self.producer, PREFIX) < PREFIX {
                    break;
                }
                // SAFETY: the room was checked; the prefix is a live array.
                unsafe {
                    self.producer
                        .write_ahead(8, frame.prefix[8..].as_ptr(), PREFIX - 8);
                    self.producer
                        .store_word(0, first_word(&frame.prefix), Ordering::Relaxed);
                    self.producer.advance(PREFIX);
                }
                frame.written = PREFIX;
            }
            let (total, padded) = (frame.total(), frame.padded());
            let n = room(&mut self.producer, padded - frame.written);
            let data = n.min(total.saturating_sub(frame.written));
            if data > 0 {
                let from = frame.written - PREFIX;
                // SAFETY: a borrowed payload stays valid until `completes`
                // is reported, which happens only after it is written or
                // copied; owned payloads live in the frame. `n` bytes are
                // writable; the padding after the payload is left as is.
                unsafe { write_payload(&mut self.producer, &frame.payload, from, data) };
            }
            // SAFETY: `n` bytes are writable.
            unsafe { self.producer.advance(n) };
            frame.written += n;
            if frame.written < padded {
                break;
            }
            self.end_frame();
            let frame = self.out.pop_front().expect("front exists");
            done.extend(frame.completes);
        }
        let moved = self.producer.position() != before;
        if moved {
            self.publish(ringer);
        }
        if !self.out.is_empty() {
            self.copy_blocked_eager(done);
        }
        moved
    }

    /// Makes the bytes pushed so far visible to the peer and wakes it if
    /// it sleeps.
    fn publish(&mut self, ringer: &Ringer) {
        self.producer.publish();
        self.wake_peer(ringer);
    }

    /// Eager sends complete locally: what the ring did not take is copied
    /// so the user may reuse the buffer.
    fn copy_blocked_eager(&mut self, done: &mut Vec<ReqId>) {
        for frame in self.out.iter_mut() {
            // SAFETY: valid until `completes` is reported, just after.
            if frame.copy_if_blocked && unsafe { frame.payload.make_owned() } {
                done.extend(frame.completes.take());
            }
        }
    }
}

/// The messages a short-path receive takes: eager messages of `context`
/// with `tag` (`None`: any tag).
#[derive(Debug, Clone, Copy)]
pub struct Wanted {
    pub context: u32,
    pub tag: Option<i32>,
}

impl Wanted {
    #[inline(always)]
    pub fn accepts(self, context: u32, tag: i32) -> bool {
        context == self.context && self.tag.is_none_or(|t| t == tag)
    }
}

/// What `Incoming::take_eager` found.
#[derive(Debug)]
pub enum Direct {
    /// A message with this tag and size was taken into the buffer.
    Taken { tag: i32, bytes: u64 },
    /// Nothing to read yet.
    Empty,
    /// A frame the short path does not take: the engine's path reads it.
    Other,
}

/// What a channel read.
#[derive(Debug)]
pub enum Delivered {
    Bye,
    Abort(i32),
    /// A data-path frame: the ring is read no further until
    /// [`Incoming::place`] says where its payload goes.
    Frame(FrameHeader),
    /// The payload placed last is read: its token, and the buffer of an
    /// owned sink.
    Filled(SinkToken, Option<Vec<u8>>),
}

enum ReadState {
    Prefix,
    /// A data-path frame was reported; waiting for [`Incoming::place`].
    /// `payload` bytes and then `padding` follow it in the ring.
    AwaitPlace {
        payload: u64,
        padding: usize,
        source: Source,
    },
    Region {
        region: Region,
        filled: usize,
        discard: u64,
        token: Option<SinkToken>,
    },
    Owned {
        buf: Vec<u8>,
        filled: usize,
        token: Option<SinkToken>,
    },
    /// The padding after a payload (or a payload nothing takes), to skip.
    Padding {
        left: usize,
    },
}

/// Where the payload of a frame waiting for its place is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Behind the frame, in the ring.
    Ring,
    /// In [`Incoming::line`]: the frame was one line.
    Line,
}

/// The receiving side of a channel: the ring the peer writes in this
/// process's segment.
pub struct Incoming {
    consumer: Consumer<Shared<RingControl>, RingBytes>,
    seq: u64,
    state: ReadState,
    /// The padding after the payload being read.
    padding: usize,
    /// The payload of a one-line frame waiting for its place.
    line: [u8; line::LINE_PAYLOAD],
}

impl Incoming {
    /// Frames read so far.
    pub fn frames(&self) -> u64 {
        self.seq
    }

    /// The ring this direction reads: its bytes, and its resident bytes.
    pub fn footprint(&self) -> (u64, u64) {
        self.consumer.storage().footprint()
    }

    pub fn new(consumer: Consumer<Shared<RingControl>, RingBytes>) -> Incoming {
        Incoming {
            consumer,
            seq: 0,
            state: ReadState::Prefix,
            padding: 0,
            line: [0; line::LINE_PAYLOAD],
        }
    }

    /// Whether the peer has published bytes not read yet (for a process
    /// about to sleep).
    pub fn has_data(&self) -> bool {
        self.consumer.has_data()
    }

    /// Whether a frame is partly read (or waits for its place).
    pub fn mid_frame(&self) -> bool {
        !matches!(self.state, ReadState::Prefix)
    }

    /// Whether a data-path frame waits for [`Incoming::place`].
    pub fn awaits_place(&self) -> bool {
        matches!(self.state, ReadState::AwaitPlace { .. })
    }

    /// Reads complete prefixes and as much payload as the ring holds, up
    /// to the next data-path frame (reported in `delivered`, like the
    /// link's own frames and the payloads filled), and returns the room of
    /// everything read (or taken before) to the writer. Reads nothing
    /// while a frame waits for its place. Returns whether bytes moved or
    /// room was returned (then the writer may need waking); an error
    /// means the peer broke the protocol.
    pub fn read(&mut self, delivered: &mut Vec<Delivered>) -> Result<bool, WireError> {
        let mut moved = false;
        let result = self.read_frames(delivered, &mut moved);
        let released = self.consumer.release();
        result.map(|()| moved || released)
    }

    /// Returns to the writer the room of what [`Incoming::take_eager`]
    /// took (it never does itself): all of it with `all`, else only when
    /// it is more than [`LAZY_RELEASE`] bytes. Whether the cursor was
    /// stored (then the writer may be waiting for the room: wake it).
    ///
    /// Stored right after taking a message, the cursor (and the wake-up
    /// check's fence after it) stood between the message's arrival and
    /// the answer's marker; at the start of the next call it happens
    /// while that call waits for its message (measured faster, why not
    /// established: docs/journal/2026-11-24-shm-night.md).
    #[inline(always)]
    pub fn release_taken(&mut self, all: bool) -> bool {
        (all || self.consumer.unreleased() > LAZY_RELEASE) && self.consumer.release()
    }

    /// Takes the next frame straight into `buf` when it is an `Eager`
    /// frame that `want` accepts, that fits in `buf`, and whose bytes
    /// are all in the ring: the short path of a blocking receive that is
    /// not posted in the engine (`runtime/direct.rs`). Anything else is
    /// left in the ring for [`Incoming::read`] (`Other`), including a
    /// frame that does not decode, so that errors are reported in one place.
    ///
    /// While the ring is empty, polls up to `polls` times (at least
    /// once), calling `pause` between polls; `Empty` after the last.
    ///
    /// Inlined up to the one-line frame (what a poll of an empty ring and
    /// a small message cost); other frames are taken out of line.
    #[inline(always)]
    pub fn take_eager(
        &mut self,
        buf: Region,
        want: Wanted,
        polls: u32,
        mut pause: impl FnMut(),
    ) -> Direct {
        if self.mid_frame() {
            return Direct::Other;
        }
        let expected = line::marker(self.seq);
        // SAFETY: the read position is a frame's start, on a line.
        let word = unsafe { self.consumer.storage().word(self.consumer.read_offset()) };
        // The word at the read position is 0 until a frame's first word
        // replaces it: while it is, the ring's cursor, a line the peer
        // writes at every frame, is not read. Only the load, one compare
        // and the count run between pause hints: the word's address is
        // found once, before the loop, where each poll used to load the
        // ring's pointer, size and read offset first and the word after
        // them, so the frame is seen sooner after it arrives
        // (docs/journal/2026-11-24-shm-night.md).
        let mut left = polls.max(1);
        let first = loop {
            let first = word.load(Ordering::Acquire);
            if first != 0 {
                break first;
            }
            left -= 1;
            if left == 0 {
                return Direct::Empty;
            }
            pause();
        };
        if first == expected {
            self.take_line(word.as_ptr().cast(), buf, want)
        } else {
            self.take_frame(buf, want)
        }
    }

    /// [`Incoming::take_eager`] once a word other than the expected
    /// marker and 0 was found at the read position.
    #[inline(never)]
    fn take_frame(&mut self, buf: Region, want: Wanted) -> Direct {
        if self.consumer.readable(PREFIX) < PREFIX {
            return Direct::Empty;
        }
        // The cursor says a frame is here; a one-line frame's marker was
        // stored before it (and may not have been seen above).
        // SAFETY: as above.
        let first = unsafe { self.consumer.word_at(0) };
        if line::is_marker(first) {
            return if first == line::marker(self.seq) {
                // SAFETY: the read position is on a line, inside the ring.
                let line = unsafe { self.consumer.storage().at(self.consumer.read_offset()) };
                self.take_line(line, buf, want)
            } else {
                Direct::Other
            };
        }
        let mut prefix = [0u8; PREFIX];
        // SAFETY: `prefix` is a local array of PREFIX bytes.
        unsafe { self.consumer.peek(prefix.as_mut_ptr(), PREFIX) };
        let bytes: &[u8; HEADER_LEN] = prefix[..HEADER_LEN].try_into().expect("header length");
        let Ok(header) = FrameHeader::decode(bytes, self.seq, MAX_EAGER_LIMIT) else {
            return Direct::Other;
        };
        let len = header.payload_len as usize;
        let padded = line::padded(PREFIX + len);
        if header.kind != FrameKind::Eager
            || len > buf.len
            || self.consumer.readable(padded) < padded
            || !want.accepts(header.context, header.tag)
        {
            return Direct::Other;
        }
        self.consumer.skip(PREFIX);
        // SAFETY: `buf` is valid for `buf.len >= len` writes (the caller's
        // receive buffer); the bytes are ready, checked above.
        unsafe { self.consumer.pop(buf.ptr, len) };
        self.consumer.skip(padded - PREFIX - len);
        self.seq += 1;
        Direct::Taken {
            tag: header.tag,
            bytes: header.payload_len,
        }
    }

    /// [`Incoming::take_eager`] for the one-line frame whose marker was
    /// loaded at the read position, the `line` there: read in place, the
    /// payload straight into `buf`.
    #[inline(always)]
    fn take_line(&mut self, line: *const u8, buf: Region, want: Wanted) -> Direct {
        // SAFETY: the marker was loaded with Acquire, so the line is written.
        let fields = unsafe { line::read_fields(line) };
        let len = fields.len as usize;
        // A length past the line is the engine path's error to report.
        if len > line::LINE_PAYLOAD || len > buf.len || !want.accepts(fields.context, fields.tag) {
            return Direct::Other;
        }
        // SAFETY: as above; `buf` is valid for `buf.len >= len` writes.
        unsafe {
            line::copy_small(line.add(line::PAYLOAD_AT), buf.ptr, len);
            self.consumer.skip_marked(LINE);
        }
        self.seq += 1;
        Direct::Taken {
            tag: fields.tag,
            bytes: len as u64,
        }
    }

    fn read_frames(
        &mut self,
        delivered: &mut Vec<Delivered>,
        moved: &mut bool,
    ) -> Result<(), WireError> {
        loop {
            match &mut self.state {
                ReadState::AwaitPlace { .. } => return Ok(()),
                ReadState::Prefix => {
                    if self.consumer.readable(PREFIX) < PREFIX {
                        return Ok(());
                    }
                    let mut prefix = [0u8; PREFIX];
                    // SAFETY: `prefix` is a local array of PREFIX bytes.
                    unsafe { self.consumer.pop(prefix.as_mut_ptr(), PREFIX) };
                    *moved = true;
                    let first = first_word(&prefix);
                    if line::is_marker(first) {
                        self.read_line(&prefix, first, delivered)?;
                        continue;
                    }
                    let bytes: &[u8; HEADER_LEN] =
                        prefix[..HEADER_LEN].try_into().expect("header length");
                    let header = FrameHeader::decode(bytes, self.seq, MAX_EAGER_LIMIT)?;
                    self.seq += 1;
                    if prefix[HEADER_LEN..].iter().any(|&b| b != 0) {
                        return Err(WireError::UnexpectedFrame {
                            got: header.kind,
                            state: "with nonzero padding after its header",
                        });
                    }
                    // The prefix is whole lines: the padding depends on
                    // the payload's length modulo a line (a peer's length,
                    // so no arithmetic on it that could overflow).
                    let payload = header.payload_len;
                    let padding = (LINE - (payload % LINE as u64) as usize) % LINE;
                    self.state = Self::state_for(header, padding, delivered)?;
                }
                ReadState::Region {
                    region,
                    filled,
                    discard,
                    token,
                } => {
                    // SAFETY: the region is the posted receive buffer, valid
                    // until its request completes; `filled <= len`.
                    let n = unsafe {
                        self.consumer
                            .pop(region.ptr.add(*filled), region.len - *filled)
                    };
                    *filled += n;
                    let skipped = self
                        .consumer
                        .skip((*discard).min(usize::MAX as u64) as usize);
                    *discard -= skipped as u64;
                    *moved |= n + skipped > 0;
                    if *filled < region.len || *discard > 0 {
                        if n + skipped > 0 {
                            self.consumer.release();
                        }
                        return Ok(());
                    }
                    delivered.push(Delivered::Filled(
                        token.take().expect("token until done"),
                        None,
                    ));
                    self.state = self.after_payload();
                }
                ReadState::Owned { buf, filled, token } => {
                    // SAFETY: `buf` is valid for its length; `filled <= len`.
                    let n = unsafe {
                        self.consumer
                            .pop(buf.as_mut_ptr().add(*filled), buf.len() - *filled)
                    };
                    *filled += n;
                    *moved |= n > 0;
                    if *filled < buf.len() {
                        if n > 0 {
                            self.consumer.release();
                        }
                        return Ok(());
                    }
                    let token = token.take().expect("token until done");
                    delivered.push(Delivered::Filled(token, Some(std::mem::take(buf))));
                    self.state = self.after_payload();
                }
                ReadState::Padding { left } => {
                    let skipped = self.consumer.skip(*left);
                    *left -= skipped;
                    *moved |= skipped > 0;
                    if *left > 0 {
                        return Ok(());
                    }
                    self.state = ReadState::Prefix;
                }
            }
        }
    }

    /// The state after a payload: its padding, if any, then the next frame.
    fn after_payload(&mut self) -> ReadState {
        match std::mem::take(&mut self.padding) {
            0 => ReadState::Prefix,
            left => ReadState::Padding { left },
        }
    }

    /// Reports one-line frame `prefix`, whose first word `marker` was
    /// read (after the cursor said the line is there); its payload waits
    /// in [`Incoming::line`].
    fn read_line(
        &mut self,
        prefix: &[u8; PREFIX],
        marker: u64,
        delivered: &mut Vec<Delivered>,
    ) -> Result<(), WireError> {
        if marker != line::marker(self.seq) {
            return Err(WireError::BadSequence {
                expected: self.seq,
                got: line::marker_seq(marker),
            });
        }
        let fields = prefix[8..line::PAYLOAD_AT].try_into().expect("fields");
        let header = line::Fields::from_bytes(fields).header(self.seq)?;
        self.seq += 1;
        let len = header.payload_len as usize;
        self.line[..len].copy_from_slice(&prefix[line::PAYLOAD_AT..line::PAYLOAD_AT + len]);
        delivered.push(Delivered::Frame(header));
        self.state = ReadState::AwaitPlace {
            payload: header.payload_len,
            padding: 0,
            source: Source::Line,
        };
        Ok(())
    }

    /// The state after a frame followed by `padding` after its payload;
    /// what the frame is, is [`classify`]'s to say.
    fn state_for(
        header: FrameHeader,
        padding: usize,
        delivered: &mut Vec<Delivered>,
    ) -> Result<ReadState, WireError> {
        let in_ring = header.payload_len;
        match classify(&header, LinkKind::Ring, true)? {
            Class::Bye => delivered.push(Delivered::Bye),
            Class::Abort(code) => delivered.push(Delivered::Abort(code)),
            Class::Handshake => {
                return Err(WireError::UnexpectedFrame {
                    got: header.kind,
                    state: "on a shared-memory ring",
                })
            }
            Class::Data => {
                delivered.push(Delivered::Frame(header));
                return Ok(ReadState::AwaitPlace {
                    payload: in_ring,
                    padding,
                    source: Source::Ring,
                });
            }
        }
        // The link's own frames: skip any payload they carry.
        Ok(match (in_ring as usize).saturating_add(padding) {
            0 => ReadState::Prefix,
            left => ReadState::Padding { left },
        })
    }

    /// Says where the payload of the data-path frame this ring reported
    /// goes: read from the ring by the next [`Incoming::read`], or at once
    /// from a one-line frame (reported filled in `delivered`).
    pub fn place(
        &mut self,
        sink: PayloadSink,
        delivered: &mut Vec<Delivered>,
    ) -> Result<(), WireError> {
        let ReadState::AwaitPlace {
            payload,
            padding,
            source,
        } = self.state
        else {
            return Ok(());
        };
        let in_ring = match source {
            Source::Ring => (payload as usize).saturating_add(padding),
            Source::Line => 0,
        };
        self.state = match (source, sink) {
            (_, PayloadSink::None) if in_ring > 0 => ReadState::Padding { left: in_ring },
            (_, PayloadSink::None) => ReadState::Prefix,
            (Source::Line, PayloadSink::Region { region, token, .. }) => {
                // SAFETY: the region is the posted receive buffer, valid
                // until its request completes; it takes at most the
                // payload (the rest is discarded).
                unsafe {
                    std::ptr::copy_nonoverlapping(self.line.as_ptr(), region.ptr, region.len)
                };
                delivered.push(Delivered::Filled(token, None));
                ReadState::Prefix
            }
            (Source::Line, PayloadSink::Owned { mut buf, token }) => {
                buf.copy_from_slice(&self.line[..payload as usize]);
                delivered.push(Delivered::Filled(token, Some(buf)));
                ReadState::Prefix
            }
            (
                Source::Ring,
                PayloadSink::Region {
                    region,
                    discard,
                    token,
                },
            ) => {
                self.padding = padding;
                ReadState::Region {
                    region,
                    filled: 0,
                    discard,
                    token: Some(token),
                }
            }
            (Source::Ring, PayloadSink::Owned { buf, token }) => {
                self.padding = padding;
                ReadState::Owned {
                    buf,
                    filled: 0,
                    token: Some(token),
                }
            }
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::shm::segment::Segment;

    const RING: usize = 4096;

    /// The two ends of one ring of a fresh segment, in this process (the
    /// doorbell is never rung: nobody sleeps).
    fn channel() -> (Segment, Outgoing, Incoming, Ringer) {
        let mut segment = Segment::create().unwrap();
        let mapping = segment.init(1, 0, 1, RING, false).unwrap();
        let (control, bytes) = mapping.ring(0);
        // SAFETY: one producer and one consumer of the ring.
        let producer = unsafe { Producer::new(control, bytes) };
        let (control, bytes) = mapping.ring(0);
        // SAFETY: as above.
        let consumer = unsafe { Consumer::new(control, bytes) };
        let bell_addr = SocketAddr::from_pathname("/nonexistent/tether-test-bell").unwrap();
        let out = Outgoing::new(producer, mapping.doorbell(), bell_addr, false);
        let ringer = Ringer::new().unwrap();
        (segment, out, Incoming::new(consumer), ringer)
    }

    fn eager(tag: i32) -> FrameHeader {
        let mut header = FrameHeader::new(FrameKind::Eager);
        header.context = 3;
        header.tag = tag;
        header
    }

    fn send(out: &mut Outgoing, ringer: &Ringer, tag: i32, payload: &[u8]) {
        // SAFETY: `payload` is valid for its length.
        let written =
            unsafe { out.write_whole(&eager(tag), payload.as_ptr(), payload.len(), ringer) };
        assert!(written, "the ring has room");
    }

    /// Takes as `ShmTransport::take_eager` does: the room of the frame
    /// taken before is returned first.
    fn take(inc: &mut Incoming, buf: &mut [u8]) -> Direct {
        inc.release_taken(true);
        let region = Region {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
        };
        inc.take_eager(
            region,
            Wanted {
                context: 3,
                tag: None,
            },
            1,
            || {},
        )
    }

    /// Writes `word` at every line of the ring from `from` on, as a frame
    /// of an earlier lap could have left it.
    fn leave_stale(segment: &Segment, from: usize, word: impl Fn(usize) -> u64) {
        let (_, bytes) = segment.mapping().unwrap().ring(0);
        for line in from..RING / LINE {
            // SAFETY: a line start inside the ring.
            unsafe {
                tether_ring::Bytes::store_word(&bytes, line * LINE, word(line), Ordering::Relaxed)
            };
        }
    }

    #[test]
    fn messages_of_every_length_arrive_whole_through_the_short_path() {
        let (_segment, mut out, mut inc, ringer) = channel();
        let mut buf = vec![0u8; 300];
        for round in 0..3 {
            for len in 0..300usize {
                let payload: Vec<u8> = (0..len).map(|i| (i * 7 + len + round) as u8).collect();
                send(&mut out, &ringer, len as i32, &payload);
                let got = take(&mut inc, &mut buf);
                assert!(
                    matches!(got, Direct::Taken { tag, bytes } if tag == len as i32 && bytes == len as u64),
                    "{len} bytes: {got:?}"
                );
                assert_eq!(buf[..len], payload[..], "{len} bytes");
                assert!(matches!(take(&mut inc, &mut buf), Direct::Empty));
            }
        }
    }

    /// Ring lines holding the marker a frame of an earlier lap could have
    /// left for the very sequence numbers the reader expects next: the
    /// reader takes only frames written since, because the writer zeroes
    /// the word after each frame before it makes the frame visible.
    #[test]
    fn a_stale_marker_is_never_taken() {
        let (segment, mut out, mut inc, ringer) = channel();
        let mut buf = [0u8; 256];
        // After one-line frames: line k would be frame k's.
        leave_stale(&segment, 1, |line| line::marker(line as u64));
        send(&mut out, &ringer, 1, &[9; 8]);
        assert!(matches!(
            take(&mut inc, &mut buf),
            Direct::Taken { tag: 1, .. }
        ));
        assert!(
            matches!(take(&mut inc, &mut buf), Direct::Empty),
            "stale line 1"
        );
        // After a frame of three lines (frame 1): line 4 would be frame 2's.
        leave_stale(&segment, 5, |_| 0);
        leave_stale(&segment, 4, |_| line::marker(2));
        send(&mut out, &ringer, 2, &[7; 100]);
        assert!(matches!(
            take(&mut inc, &mut buf),
            Direct::Taken { tag: 2, bytes: 100 }
        ));
        assert!(
            matches!(take(&mut inc, &mut buf), Direct::Empty),
            "stale line 4"
        );
        send(&mut out, &ringer, 3, &[5; 40]);
        assert!(matches!(
            take(&mut inc, &mut buf),
            Direct::Taken { tag: 3, bytes: 40 }
        ));
        assert_eq!(buf[..40], [5; 40]);
    }

    /// A frame's payload holding, at the start of each of its lines, the
    /// marker the reader will expect at that line in the next lap: the
    /// one-line frames of the next lap never let the reader take one
    /// (the word after each frame is zeroed before the frame is visible,
    /// ahead of need or just before its marker).
    #[test]
    fn a_payload_forging_the_next_laps_markers_is_never_taken() {
        let (_segment, mut out, mut inc, ringer) = channel();
        let mut buf = vec![0u8; 4096];
        // Frame 0: its prefix on line 0, 61 lines of payload on lines
        // 1..=61. The one-line frames after it land on lines 62, 63, 0,
        // 1, ...: frame s on line (61 + s) % 64, so the reader expects
        // frame L + 3 at line L of the next lap.
        let lines = RING / LINE - 3;
        let mut payload = vec![0u8; lines * LINE];
        for m in 0..lines {
            let line_no = m as u64 + 1;
            payload[m * LINE..m * LINE + 8]
                .copy_from_slice(&line::marker(line_no + 3).to_le_bytes());
        }
        send(&mut out, &ringer, 0, &payload);
        assert!(matches!(
            take(&mut inc, &mut buf),
            Direct::Taken { tag: 0, .. }
        ));
        for tag in 1..2 * (RING / LINE) as i32 {
            send(&mut out, &ringer, tag, &[tag as u8; 8]);
            assert!(
                matches!(take(&mut inc, &mut buf), Direct::Taken { tag: t, bytes: 8 } if t == tag),
                "frame {tag}"
            );
            assert!(
                matches!(take(&mut inc, &mut buf), Direct::Empty),
                "a forged marker after frame {tag}"
            );
        }
    }

    /// The short path returns the room of a one-line frame (or a small
    /// frame) only when asked to, at the next call that reads the ring,
    /// and a larger frame's as soon as the caller checks.
    #[test]
    fn taken_room_returns_to_the_writer_when_released() {
        let (_segment, mut out, mut inc, ringer) = channel();
        let mut buf = [0u8; 512];
        // 63 one-line frames fill the ring (one line stays free).
        for tag in 0..63 {
            send(&mut out, &ringer, tag, &[1; 8]);
        }
        assert!(matches!(
            take(&mut inc, &mut buf),
            Direct::Taken { tag: 0, .. }
        ));
        assert!(
            !inc.release_taken(false),
            "a line's room waits for the next call"
        );
        // SAFETY: a valid payload.
        let full = unsafe { out.write_whole(&eager(63), [1u8; 8].as_ptr(), 8, &ringer) };
        assert!(!full, "the writer does not see the taken line's room yet");
        assert!(inc.release_taken(true));
        assert!(!inc.release_taken(true), "nothing left to return");
        send(&mut out, &ringer, 63, &[1; 8]);
        for tag in 1..64 {
            assert!(matches!(take(&mut inc, &mut buf), Direct::Taken { tag: t, .. } if t == tag));
        }
        assert!(inc.release_taken(true));
        // A frame of 384 bytes (300 bytes of payload) is returned at once.
        send(&mut out, &ringer, 64, &[2; 300]);
        assert!(matches!(
            take(&mut inc, &mut buf),
            Direct::Taken {
                tag: 64,
                bytes: 300
            }
        ));
        assert!(inc.release_taken(false), "more than LAZY_RELEASE bytes");
        // The engine's read returns what the short path left unreturned,
        // and says so (its caller then wakes the writer).
        send(&mut out, &ringer, 65, &[3; 8]);
        assert!(matches!(
            take(&mut inc, &mut buf),
            Direct::Taken { tag: 65, .. }
        ));
        let mut delivered = Vec::new();
        assert_eq!(inc.read(&mut delivered), Ok(true));
        assert!(!inc.release_taken(true));
        assert_eq!(inc.read(&mut delivered), Ok(false));
    }

    /// A sink the engine would give for an unexpected message of `len` bytes.
    fn owned_sink(len: usize) -> PayloadSink {
        let mut engine = tether_proto::Engine::new(tether_proto::EngineConfig {
            me: 0,
            eager_limit: 1 << 20,
        });
        let mut header = eager(0);
        header.payload_len = len as u64;
        engine.on_header(1, &header).expect("an eager frame")
    }

    /// A payload larger than the ring, gathered from short runs: the
    /// writer copies the runs straight into the ring as it drains, and the
    /// reader gets them in order.
    #[test]
    fn a_gathered_payload_streams_through_the_ring_from_its_runs() {
        let (_segment, mut out, mut inc, ringer) = channel();
        let src: Vec<u8> = (0..40_000u32).map(|i| (i * 13 + i / 251) as u8).collect();
        let runs: Vec<Region> = (0..120)
            .map(|i| Region::from_const(src[i * 300 + 7..].as_ptr(), 100 + i % 3))
            .collect();
        // SAFETY: the runs lie in `src`.
        let want: Vec<u8> = runs
            .iter()
            .flat_map(|r| unsafe { r.as_slice() }.to_vec())
            .collect();
        assert!(want.len() > 2 * RING);
        let t = Transmit {
            peer: 0,
            header: eager(9),
            payload: TransmitPayload::Gathered(tether_proto::Gather::new(runs)),
            completes: None,
            copy_if_blocked: false,
        };
        let t = out
            .write_now(t, &ringer)
            .expect_err("a gathered frame is queued");
        out.enqueue(t);
        let mut filled = Vec::new();
        for _ in 0..100 {
            out.flush(&ringer, &mut Vec::new());
            let mut delivered = Vec::new();
            inc.read(&mut delivered).unwrap();
            for d in delivered {
                match d {
                    Delivered::Frame(h) => {
                        assert_eq!(h.payload_len, want.len() as u64);
                        inc.place(owned_sink(want.len()), &mut filled).unwrap();
                    }
                    d @ Delivered::Filled(..) => filled.push(d),
                    other => panic!("unexpected {other:?}"),
                }
            }
            if !filled.is_empty() {
                break;
            }
        }
        assert!(!out.has_output(), "the frame was written");
        match filled.as_slice() {
            [Delivered::Filled(_, Some(bytes))] => assert!(bytes == &want, "the runs in order"),
            other => panic!("expected the payload, got {other:?}"),
        }
    }

    #[test]
    fn a_data_frame_waits_for_its_place_then_fills_it() {
        let (_segment, mut out, mut inc, ringer) = channel();
        send(&mut out, &ringer, 7, &[5; 8]);
        send(&mut out, &ringer, 8, &[6; 300]);
        let mut delivered = Vec::new();
        inc.read(&mut delivered).unwrap();
        assert!(
            matches!(delivered.as_slice(), [Delivered::Frame(h)] if h.tag == 7 && h.payload_len == 8)
        );
        assert!(inc.awaits_place());
        delivered.clear();
        inc.read(&mut delivered).unwrap();
        assert!(delivered.is_empty(), "nothing is read while a frame waits");
        inc.place(owned_sink(8), &mut delivered).unwrap();
        assert!(matches!(delivered.as_slice(), [Delivered::Filled(_, Some(b))] if b == &[5; 8]));
        delivered.clear();
        inc.read(&mut delivered).unwrap();
        assert!(
            matches!(delivered.as_slice(), [Delivered::Frame(h)] if h.tag == 8 && h.payload_len == 300)
        );
        delivered.clear();
        inc.place(owned_sink(300), &mut delivered).unwrap();
        assert!(
            delivered.is_empty(),
            "a ring payload is read by the next read"
        );
        inc.read(&mut delivered).unwrap();
        assert!(matches!(delivered.as_slice(), [Delivered::Filled(_, Some(b))] if b == &[6; 300]));
        assert!(!inc.mid_frame());
    }

    #[test]
    fn frames_are_padded_to_lines_and_leave_a_line_free() {
        let (_segment, mut out, mut inc, ringer) = channel();
        let mut buf = [0u8; 256];
        // 4096 bytes less the reserved line: 63 one-line frames fit, and
        // no 64th.
        for tag in 0..63 {
            send(&mut out, &ringer, tag, &[1; 8]);
        }
        // SAFETY: a valid payload.
        let full = unsafe { out.write_whole(&eager(63), [1u8; 8].as_ptr(), 8, &ringer) };
        assert!(!full, "the last line stays free");
        for tag in 0..63 {
            assert!(matches!(take(&mut inc, &mut buf), Direct::Taken { tag: t, .. } if t == tag));
        }
        // A 41-byte message takes two lines (prefix, then payload).
        send(&mut out, &ringer, 99, &[2; 41]);
        assert_eq!(out.producer.position(), 63 * 64 + 128);
        assert!(matches!(
            take(&mut inc, &mut buf),
            Direct::Taken { tag: 99, bytes: 41 }
        ));
    }

    #[test]
    fn a_ring_given_back_frees_its_pages_only_once_read_and_still_carries_frames() {
        let (_segment, mut out, mut inc, ringer) = channel();
        let mut buf = vec![0u8; 300];
        assert!(out.holds_pages(), "a fresh ring may hold pages");
        let payload = [5u8; 200];
        send(&mut out, &ringer, 1, &payload);
        assert!(!out.give_back(), "the reader has not read it yet");
        assert!(matches!(
            take(&mut inc, &mut buf),
            Direct::Taken { tag: 1, .. }
        ));
        assert!(!out.give_back(), "read, but not released");
        inc.release_taken(true);
        assert!(out.footprint().1 > 0, "the frame's page is resident");
        assert!(out.give_back());
        assert!(
            !out.holds_pages() && !out.give_back(),
            "nothing more to give back"
        );
        assert_eq!(out.footprint().1, 0, "the pages went");
        // The reader polls a zero word, and the next frames come as ever.
        assert!(matches!(take(&mut inc, &mut buf), Direct::Empty));
        for tag in 2..40 {
            let payload: Vec<u8> = (0..tag as usize * 5)
                .map(|i| (i + tag as usize) as u8)
                .collect();
            send(&mut out, &ringer, tag, &payload);
            assert!(out.holds_pages());
            let got = take(&mut inc, &mut buf);
            assert!(
                matches!(got, Direct::Taken { tag: t, bytes } if t == tag && bytes == payload.len() as u64),
                "{tag}: {got:?}"
            );
            assert_eq!(&buf[..payload.len()], &payload[..]);
            if tag % 7 == 0 {
                inc.release_taken(true);
                assert!(out.give_back());
            }
        }
    }
}

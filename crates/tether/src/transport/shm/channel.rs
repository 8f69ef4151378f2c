//! Framing over the rings: the frames of `tether-proto` (56-byte header,
//! then the payload), each preceded in the ring by nothing and followed
//! by nothing, except that every header is padded to a 64-byte *prefix*
//! whose last 8 bytes are a transport word:
//!
//! - `Rts`: the address of the send buffer when the sender offers the
//!   receiver to read part of it (a split copy, `split.rs`), else 0;
//! - `Cts`: the address in the receiver's memory where the granted data
//!   goes (0: send it through the ring), for cross-memory attach, with
//!   bit 63 ([`SPLIT`]) set when the receiver reads the second part itself
//!   and answers with a `PartRead` frame;
//! - `Data`: 1 when the sender already wrote the data there (no payload
//!   follows in the ring), 0 when the payload follows.
//!
//! The ring is a byte stream, so frames larger than the ring (eager
//! messages, or data when cross-memory attach is refused) stream through
//! it while the reader drains it. Payloads are copied once into the ring
//! and once out, straight into the posted buffer when a receive is posted.

use std::collections::VecDeque;
use std::os::unix::net::SocketAddr;

use tether_proto::wire::{FLAG_PAYLOAD_IN_FILE, HEADER_LEN};
use tether_proto::{
    Engine, FrameHeader, FrameKind, PayloadSink, Region, ReqId, SinkToken, Transmit,
    TransmitPayload, WireError,
};
use tether_ring::{Consumer, Doorbell, Producer, RingControl};

use super::bell::Ringer;
use super::segment::{RingBytes, Shared};
use crate::settings::MAX_EAGER_LIMIT;
use crate::transport::file::{self, FilePayload};

/// Bytes of a frame's prefix in the ring: header and transport word.
pub const PREFIX: usize = 64;
/// Transport word of a `Data` frame whose bytes were written by
/// cross-memory attach.
pub const DATA_WRITTEN: u64 = 1;
/// Bit of a `Cts` word: the receiver reads the part of the data from
/// [`split_point`] on itself (user-space addresses never have it set).
pub const SPLIT: u64 = 1 << 63;
/// Payloads up to this size are written with their prefix in one copy.
const SMALL_PAYLOAD: usize = 192;

struct OutFrame {
    prefix: [u8; PREFIX],
    payload: TransmitPayload,
    written: usize,
    completes: Option<ReqId>,
    copy_if_blocked: bool,
}

impl OutFrame {
    fn total(&self) -> usize {
        PREFIX + self.payload.len()
    }

    fn payload_ptr(&self) -> *const u8 {
        payload_ptr(&self.payload)
    }
}

/// Encodes the prefix of frame number `seq`: `header` with `seq` and
/// `payload_len` filled in, then the transport word.
fn encode_prefix(
    header: &FrameHeader,
    seq: u64,
    payload_len: usize,
    word: u64,
    out: &mut [u8; PREFIX],
) {
    let mut header = *header;
    header.seq = seq;
    header.payload_len = payload_len as u64;
    let (head, tail) = out.split_at_mut(HEADER_LEN);
    header.encode_into(head.try_into().expect("header length"));
    tail.copy_from_slice(&word.to_le_bytes());
}

/// Where a frame's payload bytes start (null when it has none).
fn payload_ptr(payload: &TransmitPayload) -> *const u8 {
    match payload {
        TransmitPayload::None => std::ptr::null(),
        TransmitPayload::Borrowed(r) => r.ptr,
        TransmitPayload::Owned(v) => v.as_ptr(),
    }
}

/// The sending side of a channel: the ring this process writes in the
/// peer's segment, and the frames waiting for room in it.
pub struct Outgoing {
    producer: Producer<Shared<RingControl>, RingBytes>,
    bell: Shared<Doorbell>,
    bell_addr: SocketAddr,
    seq: u64,
    out: VecDeque<OutFrame>,
    /// Where a small frame is assembled before its one copy into the ring.
    small: Box<[u8; PREFIX + SMALL_PAYLOAD]>,
}

impl Outgoing {
    pub fn new(
        producer: Producer<Shared<RingControl>, RingBytes>,
        bell: Shared<Doorbell>,
        bell_addr: SocketAddr,
    ) -> Outgoing {
        Outgoing {
            producer,
            bell,
            bell_addr,
            seq: 0,
            out: VecDeque::new(),
            small: Box::new([0; PREFIX + SMALL_PAYLOAD]),
        }
    }

    /// Numbers the next frame and encodes its prefix.
    fn prefix(&mut self, header: &FrameHeader, payload_len: usize, word: u64) -> [u8; PREFIX] {
        let mut prefix = [0u8; PREFIX];
        encode_prefix(header, self.next_seq(), payload_len, word, &mut prefix);
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
    pub fn write_now(
        &mut self,
        t: Transmit,
        word: u64,
        ringer: &Ringer,
    ) -> Result<Option<ReqId>, Transmit> {
        let payload = payload_ptr(&t.payload);
        // SAFETY: a borrowed payload is valid until its request completes,
        // after this; an owned one lives in `t`.
        if unsafe { self.write_whole(&t.header, word, payload, t.payload.len(), ringer) } {
            Ok(t.completes)
        } else {
            Err(t)
        }
    }

    /// [`Outgoing::write_now`] for a frame that is not an engine
    /// [`Transmit`] (the short path's eager message); returns whether it
    /// was written (otherwise nothing was).
    ///
    /// # Safety
    /// `payload` is valid for `len` reads (or `len` is 0).
    pub unsafe fn write_whole(
        &mut self,
        header: &FrameHeader,
        word: u64,
        payload: *const u8,
        len: usize,
        ringer: &Ringer,
    ) -> bool {
        if !self.out.is_empty() || self.producer.writable(PREFIX + len) < PREFIX + len {
            return false;
        }
        if len <= SMALL_PAYLOAD {
            // One copy into the ring instead of two: a small frame is
            // assembled in `small` first.
            let seq = self.next_seq();
            let (prefix, rest) = self.small.split_at_mut(PREFIX);
            encode_prefix(
                header,
                seq,
                len,
                word,
                prefix.try_into().expect("prefix length"),
            );
            // SAFETY: `payload` is valid for `len <= SMALL_PAYLOAD` reads by
            // contract, `rest` holds SMALL_PAYLOAD bytes; the room was
            // checked above, so the push takes the whole frame.
            unsafe {
                std::ptr::copy_nonoverlapping(payload, rest.as_mut_ptr(), len);
                self.producer.push(self.small.as_ptr(), PREFIX + len);
            }
        } else {
            let prefix = self.prefix(header, len, word);
            // SAFETY: as above, in two pushes.
            unsafe {
                self.producer.push(prefix.as_ptr(), PREFIX);
                self.producer.push(payload, len);
            }
        }
        self.publish(ringer);
        true
    }

    /// Queues an engine frame with transport word `word`; numbers it.
    pub fn enqueue(&mut self, t: Transmit, word: u64) {
        let prefix = self.prefix(&t.header, t.payload.len(), word);
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
        self.enqueue(
            Transmit {
                peer: 0,
                header,
                payload: TransmitPayload::None,
                completes: None,
                copy_if_blocked: false,
            },
            0,
        );
    }

    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Whether frames wait and the ring has room for some of their bytes
    /// (for a process about to sleep: then it must not).
    pub fn can_progress(&mut self) -> bool {
        !self.out.is_empty() && self.producer.writable(self.producer.capacity()) > 0
    }

    /// Wakes the peer if it sleeps: after this process freed room in the
    /// ring the peer writes to us, which the peer may be waiting for.
    pub fn wake_peer(&self, ringer: &Ringer) {
        if self.bell.must_ring() {
            ringer.ring(&self.bell_addr);
        }
    }

    /// Writes what the ring takes and wakes the peer if it sleeps.
    /// Requests whose frames were handed over (written, or copied because
    /// the ring was full) go to `done`. Returns whether bytes moved.
    pub fn flush(&mut self, ringer: &Ringer, done: &mut Vec<ReqId>) -> bool {
        let before = self.producer.position();
        while let Some(frame) = self.out.front_mut() {
            if frame.written < PREFIX {
                let rest = &frame.prefix[frame.written..];
                // SAFETY: `rest` is a live slice.
                frame.written += unsafe { self.producer.push(rest.as_ptr(), rest.len()) };
            }
            if frame.written >= PREFIX && frame.written < frame.total() {
                let from = frame.written - PREFIX;
                let len = frame.payload.len() - from;
                // SAFETY: a borrowed payload stays valid until `completes`
                // is reported, which happens only after it is written or
                // copied; owned payloads live in the frame.
                frame.written += unsafe { self.producer.push(frame.payload_ptr().add(from), len) };
            }
            if frame.written < frame.total() {
                break;
            }
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
            if frame.copy_if_blocked {
                if let TransmitPayload::Borrowed(region) = frame.payload {
                    // SAFETY: valid until `completes` is reported, just below.
                    frame.payload = TransmitPayload::Owned(unsafe { region.as_slice() }.to_vec());
                    done.extend(frame.completes.take());
                }
            }
        }
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

/// What a channel delivered besides data-path frames.
#[derive(Debug)]
pub enum Delivered {
    Bye,
    Abort(i32),
    /// A `Data` frame whose payload waits in a file (hybrid).
    FilePayload(FilePayload),
    /// The peer granted `sender_req`'s data at `address` in its memory;
    /// with `split`, it reads the second part itself.
    Grant {
        sender_req: u64,
        address: u64,
        split: bool,
    },
    /// The peer offers the data of its rendezvous `sender_req`, which is
    /// at `address` in its memory, to be read in part.
    Offer {
        sender_req: u64,
        address: u64,
    },
    /// The peer read its part of our `sender_req` (`ok`), or could not.
    PartRead {
        sender_req: u64,
        ok: bool,
    },
}

enum ReadState {
    Prefix,
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
}

/// The receiving side of a channel: the ring the peer writes in this
/// process's segment.
pub struct Incoming {
    consumer: Consumer<Shared<RingControl>, RingBytes>,
    seq: u64,
    state: ReadState,
}

impl Incoming {
    pub fn new(consumer: Consumer<Shared<RingControl>, RingBytes>) -> Incoming {
        Incoming {
            consumer,
            seq: 0,
            state: ReadState::Prefix,
        }
    }

    /// Whether the peer has published bytes not read yet (for a process
    /// about to sleep).
    pub fn has_data(&self) -> bool {
        self.consumer.has_data()
    }

    /// Whether a frame is partly read.
    pub fn mid_frame(&self) -> bool {
        !matches!(self.state, ReadState::Prefix)
    }

    /// Reads every complete prefix and as much payload as the ring holds,
    /// feeding frames of `peer` to `engine`. Returns whether bytes moved;
    /// an error means the peer broke the protocol.
    pub fn read(
        &mut self,
        engine: &mut Engine,
        peer: u32,
        delivered: &mut Vec<Delivered>,
    ) -> Result<bool, WireError> {
        let mut moved = false;
        let result = self.read_frames(engine, peer, delivered, &mut moved);
        if moved {
            self.consumer.release();
        }
        result.map(|()| moved)
    }

    /// Takes the next frame straight into `buf` when it is an `Eager`
    /// frame that `accepts` agrees to, that fits in `buf`, and whose bytes
    /// are all in the ring: the short path of a blocking receive that is
    /// not posted in the engine (`runtime/direct.rs`). Anything else is
    /// left in the ring for [`Incoming::read`] (`Other`), including a
    /// frame that does not decode, so that errors are reported in one place.
    pub fn take_eager(
        &mut self,
        buf: Region,
        accepts: impl FnOnce(&FrameHeader) -> bool,
    ) -> Direct {
        if self.mid_frame() {
            return Direct::Other;
        }
        if self.consumer.readable(PREFIX) < PREFIX {
            return Direct::Empty;
        }
        let mut prefix = [0u8; PREFIX];
        // SAFETY: `prefix` is a local array of PREFIX bytes.
        unsafe { self.consumer.peek(prefix.as_mut_ptr(), PREFIX) };
        let bytes: &[u8; HEADER_LEN] = prefix[..HEADER_LEN].try_into().expect("header length");
        let Ok(header) = FrameHeader::decode(bytes, self.seq, MAX_EAGER_LIMIT) else {
            return Direct::Other;
        };
        let len = header.payload_len as usize;
        if header.kind != FrameKind::Eager
            || len > buf.len
            || self.consumer.readable(PREFIX + len) < PREFIX + len
            || !accepts(&header)
        {
            return Direct::Other;
        }
        self.consumer.skip(PREFIX);
        // SAFETY: `buf` is valid for `buf.len >= len` writes (the caller's
        // receive buffer); the bytes are ready, checked above.
        unsafe { self.consumer.pop(buf.ptr, len) };
        self.consumer.release();
        self.seq += 1;
        Direct::Taken {
            tag: header.tag,
            bytes: header.payload_len,
        }
    }

    fn read_frames(
        &mut self,
        engine: &mut Engine,
        peer: u32,
        delivered: &mut Vec<Delivered>,
        moved: &mut bool,
    ) -> Result<(), WireError> {
        loop {
            match &mut self.state {
                ReadState::Prefix => {
                    if self.consumer.readable(PREFIX) < PREFIX {
                        return Ok(());
                    }
                    let mut prefix = [0u8; PREFIX];
                    // SAFETY: `prefix` is a local array of PREFIX bytes.
                    unsafe { self.consumer.pop(prefix.as_mut_ptr(), PREFIX) };
                    *moved = true;
                    let bytes: &[u8; HEADER_LEN] =
                        prefix[..HEADER_LEN].try_into().expect("header length");
                    let header = FrameHeader::decode(bytes, self.seq, MAX_EAGER_LIMIT)?;
                    self.seq += 1;
                    let word = u64::from_le_bytes(prefix[HEADER_LEN..].try_into().expect("8"));
                    self.state = Self::state_for(header, word, engine, peer, delivered)?;
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
                    engine.payload_done(token.take().expect("token until done"), None);
                    self.state = ReadState::Prefix;
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
                    engine.payload_done(token, Some(std::mem::take(buf)));
                    self.state = ReadState::Prefix;
                }
            }
        }
    }

    fn state_for(
        mut header: FrameHeader,
        word: u64,
        engine: &mut Engine,
        peer: u32,
        delivered: &mut Vec<Delivered>,
    ) -> Result<ReadState, WireError> {
        match header.kind {
            FrameKind::Bye => {
                delivered.push(Delivered::Bye);
                return Ok(ReadState::Prefix);
            }
            FrameKind::Abort => {
                delivered.push(Delivered::Abort(header.tag));
                return Ok(ReadState::Prefix);
            }
            FrameKind::Hello | FrameKind::HelloAck | FrameKind::HelloReject => {
                return Err(WireError::UnexpectedFrame {
                    got: header.kind,
                    state: "on a shared-memory ring",
                })
            }
            FrameKind::PartRead => {
                delivered.push(Delivered::PartRead {
                    sender_req: header.sender_req,
                    ok: header.tag == 0,
                });
                return Ok(ReadState::Prefix);
            }
            FrameKind::Rts if word != 0 => delivered.push(Delivered::Offer {
                sender_req: header.sender_req,
                address: word,
            }),
            FrameKind::Cts if word != 0 => delivered.push(Delivered::Grant {
                sender_req: header.sender_req,
                address: word & !SPLIT,
                split: word & SPLIT != 0,
            }),
            FrameKind::Data if header.flags & FLAG_PAYLOAD_IN_FILE != 0 => {
                delivered.extend(
                    file::expect_payload(engine, peer, header)?.map(Delivered::FilePayload),
                );
                return Ok(ReadState::Prefix);
            }
            FrameKind::Data if word == DATA_WRITTEN => {
                if header.payload_len != 0 {
                    return Err(WireError::DataLength {
                        expected: 0,
                        got: header.payload_len,
                    });
                }
                header.payload_len = header.msg_size;
                return match engine.on_header(peer, &header)? {
                    PayloadSink::None => Ok(ReadState::Prefix),
                    PayloadSink::Region { token, .. } => {
                        engine.payload_done(token, None);
                        Ok(ReadState::Prefix)
                    }
                    PayloadSink::Owned { .. } => Err(WireError::data_not_awaited()),
                };
            }
            _ => {}
        }
        Ok(match engine.on_header(peer, &header)? {
            PayloadSink::None => ReadState::Prefix,
            PayloadSink::Region {
                region,
                discard,
                token,
            } => ReadState::Region {
                region,
                filled: 0,
                discard,
                token: Some(token),
            },
            PayloadSink::Owned { buf, token } => ReadState::Owned {
                buf,
                filled: 0,
                token: Some(token),
            },
        })
    }
}

//! Framing over one TCP stream: a queue of outgoing frames written with
//! vectored writes, and a reader that has each header decoded by the
//! connection's [`Link`] (which checks its sequence number and whether the
//! link's state takes it) and moves payloads where the engine says (large
//! payloads straight into the user buffer). Frames come stamped: the link
//! numbers them, this only writes them.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Read};
use std::net::SocketAddr;

use mio::net::TcpStream;
use tether_proto::link::{ControlFrame, Inbound, Link, LinkError};
use tether_proto::pool::BufferPool;
use tether_proto::wire::HEADER_LEN;
use tether_proto::{
    classify, Class, FrameHeader, Gather, LinkKind, PayloadSink, Region, ReqId, SinkToken,
    Transmit, TransmitPayload, WireError,
};

/// Size of the staging buffer reads go through.
const READ_BUFFER: usize = 256 * 1024;
/// Read buffers and stages a transport keeps for its connections to
/// share ([`SharedBuffers`]): one of each serves every connection whose
/// reads end on a frame's boundary and whose staged bytes were all
/// written; a few more, connections caught in between at once.
const SPARE_BUFFERS: usize = 2;

/// Read buffer of a connection whose handshake has not completed: enough
/// for the handshake's frames, so that a connection that never completes
/// one (idle, dribbling or hostile) holds little memory.
const HANDSHAKE_READ_BUFFER: usize = 4096;
/// Largest frame (header and payload) that [`Conn::flush`] copies into one
/// contiguous buffer when it is alone in the queue.
const SMALL_FRAME: usize = 512;
/// A payload with at least this much left is read straight into its
/// destination instead of through the staging buffer.
const DIRECT_READ_MIN: usize = 32 * 1024;
/// Frames gathered into one `writev`.
const MAX_IOVECS: usize = 64;
/// A gathered payload whose runs average fewer bytes than this is packed
/// into a stage, a piece at a time, and written from there:
/// the kernel copies each iovec on its own, and for 512-byte runs that cost
/// twice the copy of the same bytes in one piece, where the pack into a
/// stage that stays in cache costs little (journal 2026-11-28-fields-gather.md).
const STAGED_RUN: usize = 4096;
/// Bytes packed into the stage at a time: few enough to stay in cache
/// from the pack to the kernel's copy. Measured on the field
/// (512-byte runs): 32 KiB beat 16, 64 and 128 KiB in every round
/// (journal 2026-11-28-fields-gather.md).
const STAGE_BYTES: usize = 32 * 1024;

/// What a stream delivered.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// One of the link's own frames (handshake, goodbye) and its payload,
    /// for [`Link::on_control`].
    Control(FrameHeader, Vec<u8>),
    Abort(i32),
    /// A data-path frame: the stream reads nothing more until
    /// [`Conn::place`] says where its payload goes.
    Frame(FrameHeader),
    /// The payload placed last is read: its token, and the buffer of an
    /// owned sink.
    Filled(SinkToken, Option<Vec<u8>>),
}

/// Why a stream can no longer be used.
#[derive(Debug)]
pub(crate) enum ConnError {
    Io(io::Error),
    Wire(WireError),
    /// The link refused what came, other than by a bad frame (a frame on a
    /// link that already failed).
    Link(LinkError),
    /// The peer closed the stream; `mid_frame` when it stopped inside a frame.
    Eof {
        mid_frame: bool,
    },
}

struct OutFrame {
    header: [u8; HEADER_LEN],
    payload: TransmitPayload,
    /// Bytes of header and payload already written.
    written: usize,
    completes: Option<ReqId>,
    copy_if_blocked: bool,
    /// The payload bytes `[start, end)` packed in the connection's stage
    /// (a gathered payload of short runs; see [`STAGED_RUN`]), while it
    /// holds one.
    staged: Option<(usize, usize)>,
}

impl From<LinkError> for ConnError {
    fn from(error: LinkError) -> ConnError {
        match error {
            LinkError::Wire { error, .. } => ConnError::Wire(error),
            other => ConnError::Link(other),
        }
    }
}

impl OutFrame {
    fn total(&self) -> usize {
        HEADER_LEN + self.payload.len()
    }

    fn payload_bytes(&self) -> &[u8] {
        match &self.payload {
            TransmitPayload::None => &[],
            // SAFETY: a borrowed payload stays valid until `completes` is
            // reported, which happens only after it is written or copied.
            TransmitPayload::Borrowed(r) => unsafe { r.as_slice() },
            TransmitPayload::Owned(v) => v,
            TransmitPayload::Gathered(_) => unreachable!("gathered payloads are written by pieces"),
        }
    }

    /// The stage's range when it holds this frame's payload bytes from
    /// `from` on.
    fn staged_at(&self, from: usize) -> Option<(usize, usize)> {
        self.staged
            .filter(|&(start, end)| start <= from && from < end)
    }

    /// Payload bytes written so far.
    fn payload_written(&self) -> usize {
        self.written.saturating_sub(HEADER_LEN)
    }

    /// The payload's runs when they are short enough to go through the
    /// stage.
    fn staged_runs(&self) -> Option<&Gather> {
        match &self.payload {
            TransmitPayload::Gathered(g) if g.len() < g.runs().saturating_mul(STAGED_RUN) => {
                Some(g)
            }
            _ => None,
        }
    }
}

enum ReadState {
    Header,
    /// A data-path frame was reported; waiting for [`Conn::place`].
    AwaitPlace,
    Control {
        header: FrameHeader,
        buf: Vec<u8>,
        filled: usize,
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
}

/// A connection's read buffer, mapped from the kernel: its pages come
/// when first written and go back when it is dropped. A heap buffer of
/// this size may be recycled memory that `calloc` zeroes by hand,
/// touching every page: under `TETHER_MAX_LINKS`, which closes and opens
/// connections again and again, the heap made every buffer resident
/// whole (a process holding 127 connections at its peak went from 9 to
/// 39 MB). Where the kernel refuses the mapping, the heap serves.
enum ReadBuffer {
    Mapped(memmap2::MmapMut),
    Heap(Box<[u8]>),
}

impl ReadBuffer {
    fn new(len: usize) -> ReadBuffer {
        match memmap2::MmapMut::map_anon(len) {
            Ok(map) => ReadBuffer::Mapped(map),
            Err(_) => ReadBuffer::Heap(vec![0; len].into_boxed_slice()),
        }
    }
}

/// The buffers a transport's connections share, so that the pages they
/// touch are touched once for all connections, not once per connection.
///
/// - Read buffers: a connection holds one only while bytes of an
///   unfinished frame wait in it; when a read ends on a frame's boundary
///   (nearly always, for small messages) the buffer comes back here. With
///   127 connections open for an all-to-all that was about 4 KiB each
///   (journal 2026-11-28-link-cap.md, "TCP connections share their read
///   buffers").
/// - Stages: a connection holds one only while staged bytes wait to be
///   written (the socket took part of a piece).
pub(crate) struct SharedBuffers {
    reads: Vec<ReadBuffer>,
    stages: BufferPool,
}

impl Default for SharedBuffers {
    fn default() -> SharedBuffers {
        SharedBuffers {
            reads: Vec::new(),
            stages: BufferPool::new(SPARE_BUFFERS, STAGE_BYTES),
        }
    }
}

impl SharedBuffers {
    fn take_read(&mut self) -> ReadBuffer {
        self.reads
            .pop()
            .unwrap_or_else(|| ReadBuffer::new(READ_BUFFER))
    }

    fn give_read(&mut self, buffer: ReadBuffer) {
        if buffer.len() == READ_BUFFER && self.reads.len() < SPARE_BUFFERS {
            self.reads.push(buffer);
        }
    }

    /// Bytes the kept buffers span (a read buffer's pages come when first
    /// read into).
    pub fn bytes(&self) -> u64 {
        (self.reads.len() * READ_BUFFER + self.stages.bytes()) as u64
    }
}

impl std::ops::Deref for ReadBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            ReadBuffer::Mapped(map) => map,
            ReadBuffer::Heap(heap) => heap,
        }
    }
}

impl std::ops::DerefMut for ReadBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            ReadBuffer::Mapped(map) => map,
            ReadBuffer::Heap(heap) => heap,
        }
    }
}

/// One framed TCP stream.
pub(crate) struct Conn {
    pub stream: TcpStream,
    pub remote: SocketAddr,
    out: VecDeque<OutFrame>,
    /// The read buffer, held while bytes wait in it (`rstart..rend`),
    /// else back with the transport's [`SharedBuffers`].
    rbuf: Option<ReadBuffer>,
    /// The handshake is done: reads go through the shared, full-size
    /// buffers (before, through a small one of its own).
    grown: bool,
    rstart: usize,
    rend: usize,
    read: ReadState,
    /// The last read emptied the socket's receive queue, and nothing has
    /// said that more arrived since ([`Conn::may_have_data`]). On Linux
    /// every later arrival raises a new edge-triggered event (as nginx
    /// relies on), so the read that would only find EAGAIN is skipped:
    /// one system call less per message, also when reading resumes after
    /// a frame's payload was placed.
    drained: bool,
    /// epoll said the peer closed its side: the end of stream waits behind
    /// the bytes still queued, and a short read no longer means that
    /// nothing follows (the event that announced both came once).
    hung_up: bool,
    /// Bytes read and written so far (a busy poll's sign of movement).
    pub moved: u64,
    /// Where the front gathered payload of short runs is packed, a piece
    /// at a time: held while staged bytes wait to be written.
    stage: Option<Vec<u8>>,
}

impl Conn {
    /// User-space bytes this connection holds: its read buffer, the
    /// buffer of a frame being read into memory of its own, and the
    /// headers and owned payloads of frames waiting to be written
    /// (borrowed payloads are the program's buffers, not counted).
    pub fn user_bytes(&self) -> u64 {
        let reading = match &self.read {
            ReadState::Control { buf, .. } | ReadState::Owned { buf, .. } => buf.capacity(),
            ReadState::Header | ReadState::AwaitPlace | ReadState::Region { .. } => 0,
        };
        let queued: usize = self
            .out
            .iter()
            .map(|frame| {
                HEADER_LEN
                    + match &frame.payload {
                        TransmitPayload::Owned(v) => v.capacity(),
                        _ => 0,
                    }
            })
            .sum();
        let rbuf = self.rbuf.as_deref().map_or(0, <[u8]>::len);
        let stage = self.stage.as_ref().map_or(0, Vec::capacity);
        (rbuf + reading + queued + stage) as u64
    }

    /// Bytes handed to this connection and not yet taken by the peer:
    /// the frames still waiting here, and what the kernel holds unsent
    /// or unacknowledged in the socket's send queue (`SIOCOUTQ`). What a
    /// least-used choice of rails compares.
    pub fn unwritten_bytes(&self) -> u64 {
        use std::os::fd::AsRawFd;
        let here: usize = self.out.iter().map(|f| f.total() - f.written).sum();
        let mut in_kernel: libc::c_int = 0;
        // SAFETY: TIOCOUTQ (SIOCOUTQ) writes one int through the pointer,
        // which points at a live local.
        let ok = unsafe { libc::ioctl(self.stream.as_raw_fd(), libc::TIOCOUTQ, &mut in_kernel) };
        here as u64 + if ok == 0 { in_kernel.max(0) as u64 } else { 0 }
    }

    pub fn new(stream: TcpStream, remote: SocketAddr) -> Conn {
        Conn {
            stream,
            remote,
            out: VecDeque::new(),
            rbuf: None,
            grown: false,
            rstart: 0,
            rend: 0,
            read: ReadState::Header,
            drained: false,
            hung_up: false,
            moved: 0,
            stage: None,
        }
    }

    /// The handshake is done: the read buffer takes its full size, with
    /// what it holds still unread kept.
    pub fn grow(&mut self) {
        if self.grown {
            return;
        }
        self.grown = true;
        if let Some(small) = self.rbuf.take() {
            if self.rstart < self.rend {
                let mut rbuf = ReadBuffer::new(READ_BUFFER);
                let unread = self.rend - self.rstart;
                rbuf[..unread].copy_from_slice(&small[self.rstart..self.rend]);
                self.rbuf = Some(rbuf);
                self.rstart = 0;
                self.rend = unread;
            }
        }
        self.drained = false;
    }

    /// Queues a frame that [`Link::stamp`] numbered.
    pub fn enqueue(&mut self, t: Transmit) {
        let mut header = t.header;
        header.payload_len = t.payload.len() as u64;
        self.out.push_back(OutFrame {
            header: header.encode(),
            payload: t.payload,
            written: 0,
            completes: t.completes,
            copy_if_blocked: t.copy_if_blocked,
            staged: None,
        });
    }

    /// Queues a frame of the link itself (handshake, goodbye), stamped by
    /// [`Link::poll_transmit`].
    pub fn enqueue_control(&mut self, frame: ControlFrame) {
        self.out.push_back(OutFrame {
            header: frame.header.encode(),
            payload: TransmitPayload::Owned(frame.payload),
            written: 0,
            completes: None,
            copy_if_blocked: false,
            staged: None,
        });
    }

    /// Frames waiting to be written, whole or in part.
    pub fn queued_frames(&self) -> usize {
        self.out.len()
    }

    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Writes what the socket takes. Requests whose frames were handed
    /// over (written, or copied because the socket was full) go to `done`.
    pub fn flush(
        &mut self,
        done: &mut Vec<ReqId>,
        shared: &mut SharedBuffers,
    ) -> Result<(), ConnError> {
        let result = self.write_queued(done, shared);
        if self.stage.is_some() && !self.stage_holds_unwritten() {
            if let Some(stage) = self.stage.take() {
                shared.stages.give(stage);
            }
            self.out.iter_mut().for_each(|frame| frame.staged = None);
        }
        result
    }

    /// Whether the stage holds bytes the socket has not taken yet.
    fn stage_holds_unwritten(&self) -> bool {
        self.out.iter().any(|frame| {
            frame.staged_runs().is_some() && frame.staged_at(frame.payload_written()).is_some()
        })
    }

    /// [`Conn::flush`]'s writing, with a stage taken when needed.
    fn write_queued(
        &mut self,
        done: &mut Vec<ReqId>,
        shared: &mut SharedBuffers,
    ) -> Result<(), ConnError> {
        while !self.out.is_empty() {
            match self.write_front(shared) {
                Ok(0) => return Err(ConnError::Eof { mid_frame: true }),
                Ok(mut n) => {
                    self.moved += n as u64;
                    while n > 0 {
                        let frame = self
                            .out
                            .front_mut()
                            .expect("written bytes belong to queued frames");
                        let step = n.min(frame.total() - frame.written);
                        frame.written += step;
                        n -= step;
                        if frame.written == frame.total() {
                            let frame = self.out.pop_front().expect("front exists");
                            done.extend(frame.completes);
                        }
                    }
                    // A frame with an empty payload is complete once its header is.
                    while self.out.front().is_some_and(|f| f.written == f.total()) {
                        let frame = self.out.pop_front().expect("front exists");
                        done.extend(frame.completes);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.copy_blocked_eager(done);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ConnError::Io(e)),
            }
        }
        Ok(())
    }

    /// Writes what the socket takes from the front of the queue. A lone
    /// small frame (a latency-bound message) goes out as one contiguous
    /// write, so that the kernel copies one segment instead of two;
    /// otherwise up to [`MAX_IOVECS`] pieces go out in one vectored write.
    fn write_front(&mut self, shared: &mut SharedBuffers) -> io::Result<usize> {
        if let (1, Some(frame)) = (self.out.len(), self.out.front()) {
            let total = frame.total();
            let gathered = matches!(frame.payload, TransmitPayload::Gathered(_));
            if frame.written == 0 && total <= SMALL_FRAME && !gathered {
                let mut small = [0u8; SMALL_FRAME];
                small[..HEADER_LEN].copy_from_slice(&frame.header);
                small[HEADER_LEN..total].copy_from_slice(frame.payload_bytes());
                return send(&self.stream, &[IoSlice::new(&small[..total])]);
            }
        }
        self.restage(shared);
        let stage: &[u8] = self.stage.as_deref().unwrap_or(&[]);
        let mut slices = [IoSlice::new(&[]); MAX_IOVECS];
        let mut used = 0;
        for frame in self.out.iter() {
            if used + 2 > MAX_IOVECS {
                break;
            }
            let from = frame.payload_written();
            let staged = frame.staged_at(from);
            if frame.staged_runs().is_some() && staged.is_none() && from < frame.payload.len() {
                // The stage holds an earlier frame's bytes.
                break;
            }
            if frame.written < HEADER_LEN {
                slices[used] = IoSlice::new(&frame.header[frame.written..]);
                used += 1;
            }
            if let (Some((start, end)), Some(_)) = (staged, frame.staged_runs()) {
                slices[used] = IoSlice::new(&stage[from - start..end - start]);
                used += 1;
                if end < frame.payload.len() {
                    break;
                }
                continue;
            }
            if let TransmitPayload::Gathered(g) = &frame.payload {
                // The kernel gathers the runs: the sender packs nothing.
                g.pieces_from(from, |ptr, len| {
                    // SAFETY: the runs are valid until `completes` is reported.
                    slices[used] = IoSlice::new(unsafe { std::slice::from_raw_parts(ptr, len) });
                    used += 1;
                    used < MAX_IOVECS
                });
                if used == MAX_IOVECS {
                    break;
                }
                continue;
            }
            let payload = frame.payload_bytes();
            if from < payload.len() {
                slices[used] = IoSlice::new(&payload[from..]);
                used += 1;
            }
        }
        send(&self.stream, &slices[..used])
    }

    /// Packs the next piece of the first gathered payload of short runs
    /// into the stage, unless the stage holds its next bytes already.
    fn restage(&mut self, shared: &mut SharedBuffers) {
        let Conn { out, stage, .. } = self;
        let Some(frame) = out.iter_mut().find(|f| f.staged_runs().is_some()) else {
            return;
        };
        let from = frame.payload_written();
        let covered = frame.staged_at(from).is_some();
        let Some(g) = frame.staged_runs() else {
            return;
        };
        if covered || from >= g.len() {
            return;
        }
        let stage = stage.get_or_insert_with(|| shared.stages.take(STAGE_BYTES));
        stage.clear();
        g.pieces_from(from, |ptr, len| {
            let n = len.min(STAGE_BYTES - stage.len());
            // SAFETY: the runs are valid until `completes` is reported.
            stage.extend_from_slice(unsafe { std::slice::from_raw_parts(ptr, n) });
            stage.len() < STAGE_BYTES
        });
        frame.staged = Some((from, from + stage.len()));
    }

    /// Eager sends complete locally: what the socket did not take is copied
    /// so the user may reuse the buffer.
    fn copy_blocked_eager(&mut self, done: &mut Vec<ReqId>) {
        for frame in self.out.iter_mut() {
            // SAFETY: valid until `completes` is reported, just after.
            if frame.copy_if_blocked && unsafe { frame.payload.make_owned() } {
                done.extend(frame.completes.take());
            }
        }
    }

    /// Reads until the socket is drained, returning what arrived in
    /// `incoming`; `link` decodes the headers. It stops early after a
    /// control frame, which changes the link's state and so how the
    /// frames behind it are read, and after a data-path frame, whose
    /// payload waits for [`Conn::place`]: the caller handles them and calls
    /// again while this returns `Ok(true)`. Reads nothing while a frame
    /// waits for its place.
    pub fn read_ready(
        &mut self,
        link: &mut Link,
        incoming: &mut Vec<Incoming>,
        shared: &mut SharedBuffers,
    ) -> Result<bool, ConnError> {
        let result = self.read_into_buffer(link, incoming, shared);
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
            if let Some(rbuf) = self.rbuf.take() {
                shared.give_read(rbuf);
            }
        }
        result
    }

    /// [`Conn::read_ready`]'s reading, with a read buffer taken when
    /// needed (the caller gives it back when it ends up empty).
    fn read_into_buffer(
        &mut self,
        link: &mut Link,
        incoming: &mut Vec<Incoming>,
        shared: &mut SharedBuffers,
    ) -> Result<bool, ConnError> {
        if matches!(self.read, ReadState::AwaitPlace) {
            return Ok(false);
        }
        loop {
            if self.parse_buffered(link, incoming)? {
                return Ok(true);
            }
            if self.drained && !self.hung_up {
                return Ok(false);
            }
            let result = match &mut self.read {
                ReadState::Region { region, filled, .. }
                    if self.rstart == self.rend && region.len - *filled >= DIRECT_READ_MIN =>
                {
                    // SAFETY: the region is the posted receive buffer, valid
                    // until its request completes; `filled < len`.
                    let dst = unsafe {
                        std::slice::from_raw_parts_mut(
                            region.ptr.add(*filled),
                            region.len - *filled,
                        )
                    };
                    match self.stream.read(dst) {
                        Ok(n) if n > 0 => {
                            self.drained = n < dst.len();
                            self.moved += n as u64;
                            *filled += n;
                            continue;
                        }
                        other => other,
                    }
                }
                _ => {
                    let grown = self.grown;
                    let rbuf = self.rbuf.get_or_insert_with(|| {
                        if grown {
                            shared.take_read()
                        } else {
                            ReadBuffer::new(HANDSHAKE_READ_BUFFER)
                        }
                    });
                    if self.rstart == self.rend {
                        self.rstart = 0;
                        self.rend = 0;
                    } else if self.rend == rbuf.len() {
                        rbuf.copy_within(self.rstart..self.rend, 0);
                        self.rend -= self.rstart;
                        self.rstart = 0;
                    }
                    match self.stream.read(&mut rbuf[self.rend..]) {
                        Ok(n) if n > 0 => {
                            self.drained = self.rend + n < rbuf.len();
                            self.moved += n as u64;
                            self.rend += n;
                            continue;
                        }
                        other => other,
                    }
                }
            };
            match result {
                Ok(_) => {
                    let mid_frame =
                        !matches!(self.read, ReadState::Header) || self.rstart != self.rend;
                    return Err(ConnError::Eof { mid_frame });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ConnError::Io(e)),
            }
        }
    }

    /// Consumes buffered bytes as far as they go, or up to and including a
    /// control or data-path frame (then returns true).
    fn parse_buffered(
        &mut self,
        link: &mut Link,
        incoming: &mut Vec<Incoming>,
    ) -> Result<bool, ConnError> {
        let rbuf: &[u8] = self.rbuf.as_deref().unwrap_or(&[]);
        loop {
            let avail = self.rend - self.rstart;
            match &mut self.read {
                ReadState::Header => {
                    if avail < HEADER_LEN {
                        return Ok(false);
                    }
                    let bytes: [u8; HEADER_LEN] = rbuf[self.rstart..self.rstart + HEADER_LEN]
                        .try_into()
                        .expect("header length");
                    self.rstart += HEADER_LEN;
                    let header = match link.on_header(&bytes)? {
                        Inbound::Control(header) => {
                            // At most MAX_CONTROL_PAYLOAD: the link checked.
                            self.read = ReadState::Control {
                                header,
                                buf: vec![0; header.payload_len as usize],
                                filled: 0,
                            };
                            continue;
                        }
                        Inbound::Deliver(header) => header,
                    };
                    // The link passes on only what an open link carries;
                    // the dispatcher says which of those a stream may.
                    match classify(&header, LinkKind::Stream, true).map_err(ConnError::Wire)? {
                        Class::Abort(code) => incoming.push(Incoming::Abort(code)),
                        Class::Data => {
                            incoming.push(Incoming::Frame(header));
                            self.read = ReadState::AwaitPlace;
                            return Ok(true);
                        }
                        Class::Handshake | Class::Bye => {
                            return Err(ConnError::Wire(WireError::UnexpectedFrame {
                                got: header.kind,
                                state: "on a TCP connection",
                            }))
                        }
                    }
                }
                ReadState::AwaitPlace => return Ok(false),
                ReadState::Control {
                    buf,
                    filled,
                    header,
                } => {
                    let n = avail.min(buf.len() - *filled);
                    buf[*filled..*filled + n].copy_from_slice(&rbuf[self.rstart..self.rstart + n]);
                    *filled += n;
                    self.rstart += n;
                    if *filled < buf.len() {
                        return Ok(false);
                    }
                    incoming.push(Incoming::Control(*header, std::mem::take(buf)));
                    self.read = ReadState::Header;
                    return Ok(true);
                }
                ReadState::Region {
                    region,
                    filled,
                    discard,
                    token,
                } => {
                    let n = avail.min(region.len - *filled);
                    // SAFETY: the region is valid (posted receive buffer) and
                    // `filled + n <= len`.
                    unsafe {
                        region
                            .ptr
                            .add(*filled)
                            .copy_from_nonoverlapping(rbuf[self.rstart..].as_ptr(), n)
                    };
                    *filled += n;
                    self.rstart += n;
                    let skip = ((self.rend - self.rstart) as u64).min(*discard);
                    self.rstart += skip as usize;
                    *discard -= skip;
                    if *filled < region.len || *discard > 0 {
                        return Ok(false);
                    }
                    let token = token.take().expect("token present until done");
                    incoming.push(Incoming::Filled(token, None));
                    self.read = ReadState::Header;
                }
                ReadState::Owned { buf, filled, token } => {
                    let n = avail.min(buf.len() - *filled);
                    buf[*filled..*filled + n].copy_from_slice(&rbuf[self.rstart..self.rstart + n]);
                    *filled += n;
                    self.rstart += n;
                    if *filled < buf.len() {
                        return Ok(false);
                    }
                    let token = token.take().expect("token present until done");
                    incoming.push(Incoming::Filled(token, Some(std::mem::take(buf))));
                    self.read = ReadState::Header;
                }
            }
        }
    }

    /// The socket may hold bytes not read yet: epoll said it is readable,
    /// or a busy poll looks without asking epoll.
    pub fn may_have_data(&mut self) {
        self.drained = false;
    }

    /// epoll said the peer closed its side: every later read goes on to
    /// the end of stream instead of stopping at a short read.
    pub fn hung_up(&mut self) {
        self.hung_up = true;
    }

    /// Says where the payload of the data-path frame this stream
    /// reported goes; reading resumes with the next [`Conn::read_ready`].
    pub fn place(&mut self, sink: PayloadSink) {
        debug_assert!(matches!(self.read, ReadState::AwaitPlace));
        self.read = match sink {
            PayloadSink::None => ReadState::Header,
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
        };
    }
}

/// Writes `slices` to `stream` as `writev` would, but with
/// `MSG_NOSIGNAL`: a peer that died makes the write fail with `EPIPE`
/// (its link is then lost) instead of killing this process with
/// `SIGPIPE`, which a C program does not ignore by default.
fn send(stream: &TcpStream, slices: &[IoSlice<'_>]) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // `IoSlice` is ABI-compatible with `iovec` on Unix.
    msg.msg_iov = slices.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = slices.len() as _;
    // SAFETY: the iovecs point at the slices, valid for the call.
    let n = unsafe { libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    use tether_proto::link::LinkConfig;
    use tether_proto::wire::Hello;

    use super::*;

    fn link_config(rank: u32) -> LinkConfig {
        LinkConfig {
            hello: Hello {
                universe_id: 1,
                universe_rank: rank,
                capabilities: 0,
                program: "a".into(),
                program_rank: rank,
            },
            handshake_timeout: Duration::from_secs(10),
            goodbye_timeout: Duration::from_secs(10),
            max_eager: 1 << 20,
            auth: None,
        }
    }

    fn link() -> Link {
        Link::acceptor(link_config(0), Instant::now())
    }

    /// A connection whose peer wrote 20 bytes and closed, both queued.
    fn cut_after_20_bytes() -> Conn {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (ours, remote) = listener.accept().unwrap();
        ours.set_nonblocking(true).unwrap();
        peer.write_all(&[b'T'; 20]).unwrap();
        peer.shutdown(std::net::Shutdown::Write).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        Conn::new(TcpStream::from_std(ours), remote)
    }

    /// A frame of `payload`, its header as [`Conn::enqueue`] writes it.
    fn frame(payload: TransmitPayload) -> (Transmit, Vec<u8>) {
        let mut header = FrameHeader::new(tether_proto::FrameKind::Data);
        header.payload_len = payload.len() as u64;
        let mut bytes = header.encode().to_vec();
        // SAFETY: the test's buffers outlive the frames.
        bytes.extend(match &payload {
            TransmitPayload::None => Vec::new(),
            TransmitPayload::Borrowed(r) => unsafe { r.as_slice() }.to_vec(),
            TransmitPayload::Owned(v) => v.clone(),
            TransmitPayload::Gathered(g) => unsafe { g.to_vec() },
        });
        let t = Transmit {
            peer: 1,
            header,
            payload,
            completes: None,
            copy_if_blocked: false,
        };
        (t, bytes)
    }

    /// Gathered payloads of short runs go through the stage, a piece at a
    /// time, also when the socket takes only part of a piece; long runs
    /// and contiguous payloads around them keep their order.
    #[test]
    fn gathered_runs_arrive_in_order_through_the_stage() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (ours, remote) = listener.accept().unwrap();
        socket2::SockRef::from(&ours)
            .set_send_buffer_size(4096)
            .unwrap();
        ours.set_nonblocking(true).unwrap();
        let mut conn = Conn::new(TcpStream::from_std(ours), remote);

        let source: Vec<u8> = (0..4 << 20)
            .map(|i: u32| (i * 7 + i / 4093) as u8)
            .collect();
        let runs = |len: usize, stride: usize, count: usize, at: usize| {
            let regions = (0..count)
                .map(|i| Region::from_const(source[at + i * stride..].as_ptr(), len))
                .collect();
            TransmitPayload::Gathered(Gather::new(regions))
        };
        let small = [9u8; 100];
        let payloads = [
            TransmitPayload::Borrowed(Region::from_const(small.as_ptr(), small.len())),
            runs(512, 1536, 700, 3),
            runs(100, 300, 3000, 1),
            runs(8192, 9000, 40, 5),
            TransmitPayload::None,
            runs(1, 2, 5, 0),
        ];
        let mut expected = Vec::new();
        for payload in payloads {
            let (t, bytes) = frame(payload);
            expected.extend(bytes);
            conn.enqueue(t);
        }
        let want = expected.len();
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; want];
            peer.read_exact(&mut got).unwrap();
            got
        });
        let mut done = Vec::new();
        let mut shared = SharedBuffers::default();
        let mut held_while_blocked = false;
        let deadline = Instant::now() + Duration::from_secs(30);
        while conn.has_output() {
            conn.flush(&mut done, &mut shared).unwrap();
            held_while_blocked |= conn.stage.is_some();
            assert!(Instant::now() < deadline, "the frames were not written");
            std::thread::sleep(Duration::from_micros(200));
        }
        let got = reader.join().unwrap();
        assert!(got == expected, "the stream differs from the frames");
        assert!(held_while_blocked, "a stage is held while its bytes wait");
        assert!(conn.stage.is_none(), "and given back once they are written");
        assert_eq!(shared.stages.bytes(), STAGE_BYTES, "one stage kept");
    }

    /// An answering link whose handshake with a dialer is done, and the
    /// dialer, which stamps the frames the test writes.
    fn open_links() -> (Link, Link) {
        let now = Instant::now();
        let mut dialer = Link::connector(link_config(0), 1, now);
        let mut answerer = Link::acceptor(link_config(1), now);
        let pipe = |from: &mut Link, to: &mut Link| {
            while let Some(frame) = from.poll_transmit() {
                match to.on_header(&frame.header.encode()).unwrap() {
                    Inbound::Control(h) => to.on_control(&h, &frame.payload).unwrap(),
                    Inbound::Deliver(h) => panic!("a control frame was delivered: {h:?}"),
                }
            }
        };
        pipe(&mut dialer, &mut answerer);
        while answerer.poll_event().is_some() {}
        answerer.accept_hello();
        pipe(&mut answerer, &mut dialer);
        (dialer, answerer)
    }

    /// A grown connection and the peer's end of its stream.
    fn grown_conn() -> (Conn, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (ours, remote) = listener.accept().unwrap();
        ours.set_nonblocking(true).unwrap();
        let mut conn = Conn::new(TcpStream::from_std(ours), remote);
        conn.grow();
        (conn, peer)
    }

    /// Reads what `conn` has, placing each frame's payload in a buffer of
    /// its own; returns the payloads filled.
    fn read_all(conn: &mut Conn, link: &mut Link, shared: &mut SharedBuffers) -> Vec<Vec<u8>> {
        let mut engine = tether_proto::Engine::new(tether_proto::EngineConfig {
            me: 1,
            eager_limit: 4096,
        });
        let mut filled = Vec::new();
        std::thread::sleep(Duration::from_millis(20));
        conn.may_have_data();
        loop {
            let mut incoming = Vec::new();
            let more = conn.read_ready(link, &mut incoming, shared).unwrap();
            for item in incoming {
                match item {
                    Incoming::Frame(header) => conn.place(engine.on_header(0, &header).unwrap()),
                    Incoming::Filled(_, Some(bytes)) => filled.push(bytes),
                    other => panic!("unexpected {other:?}"),
                }
            }
            if !more && !matches!(conn.read, ReadState::AwaitPlace) {
                return filled;
            }
        }
    }

    /// Connections hold a read buffer only while part of a frame waits in
    /// it; otherwise they share the transport's.
    #[test]
    fn connections_share_read_buffers_between_frames() {
        let (mut dialer_a, mut link_a) = open_links();
        let (mut dialer_b, mut link_b) = open_links();
        let mut buffers = SharedBuffers::default();
        let (mut a, mut peer_a) = grown_conn();
        let (mut b, mut peer_b) = grown_conn();
        let frame = |dialer: &mut Link, payload: &[u8]| {
            let mut header = FrameHeader::new(tether_proto::FrameKind::Eager);
            header.payload_len = payload.len() as u64;
            header.msg_size = payload.len() as u64;
            dialer.stamp(&mut header).unwrap();
            let mut bytes = header.encode().to_vec();
            bytes.extend_from_slice(payload);
            bytes
        };
        peer_a.write_all(&frame(&mut dialer_a, b"one")).unwrap();
        assert_eq!(
            read_all(&mut a, &mut link_a, &mut buffers),
            [b"one".to_vec()]
        );
        assert!(
            a.rbuf.is_none(),
            "a read that ended on a frame's end holds no buffer"
        );
        assert_eq!(buffers.reads.len(), 1);

        let split = frame(&mut dialer_b, b"two halves");
        peer_b.write_all(&split[..HEADER_LEN - 5]).unwrap();
        assert!(read_all(&mut b, &mut link_b, &mut buffers).is_empty());
        assert!(b.rbuf.is_some(), "part of a header waits in the buffer");
        assert!(
            buffers.reads.is_empty(),
            "the shared buffer went to the reader mid-frame"
        );

        peer_a.write_all(&frame(&mut dialer_a, b"three")).unwrap();
        assert_eq!(
            read_all(&mut a, &mut link_a, &mut buffers),
            [b"three".to_vec()]
        );
        assert_eq!(buffers.reads.len(), 1, "another buffer, kept once read");

        peer_b.write_all(&split[HEADER_LEN - 5..]).unwrap();
        assert_eq!(
            read_all(&mut b, &mut link_b, &mut buffers),
            [b"two halves".to_vec()]
        );
        assert!(b.rbuf.is_none());
        assert_eq!(buffers.reads.len(), SPARE_BUFFERS);
    }

    /// Part of a header and the end of stream arrive before the read
    /// (a peer killed mid-write; the fault harness's cut-and-close): one
    /// edge-triggered event announced both, so a short read must not be
    /// taken for an empty socket once epoll said the peer hung up, or the
    /// end of stream is never read and the link waits for ever.
    #[test]
    fn a_short_read_before_the_end_of_stream_does_not_hide_it() {
        let mut link = link();
        let mut incoming = Vec::new();
        // Without the hang-up, the short read ends the round (what a busy
        // poll, which reads again, relies on).
        let mut blind = cut_after_20_bytes();
        assert!(matches!(
            blind.read_ready(&mut link, &mut incoming, &mut SharedBuffers::default()),
            Ok(false)
        ));
        let mut conn = cut_after_20_bytes();
        conn.hung_up();
        match conn.read_ready(&mut link, &mut incoming, &mut SharedBuffers::default()) {
            Err(ConnError::Eof { mid_frame: true }) => {}
            other => panic!("expected the end of stream mid-frame, got {other:?}"),
        }
    }
}

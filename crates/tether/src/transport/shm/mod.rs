//! The shared-memory transport, for peers on the same host.
//!
//! Every process owns one segment (`segment.rs`) with a ring per universe
//! rank; a peer writes its frames into the ring for its rank in this
//! process's segment, and this process writes into the ring for its own
//! rank in the peer's. A *channel* is the pair: the incoming ring (found
//! when the peer attaches to us) and the outgoing one (attached when we
//! first send, or at once when the peer attached to us first, so that
//! goodbyes can always be said). Frames and framing are in `channel.rs`.
//!
//! Large rendezvous data moves with one copy by cross-memory attach: the
//! engine's rendezvous by remote memory (`tether-proto`'s
//! `engine/remote.rs`) asks for writes into the receive buffer and reads
//! from the send buffer through keys, which this transport carries out
//! with `process_vm_writev`/`process_vm_readv` (`remote.rs`, `cma.rs`).
//! When the kernel refuses (or `TETHER_SHM_CMA=0`), the data streams
//! through the ring instead.
//!
//! Waiting: the owner's doorbell flag (`tether_ring::Doorbell`) and its
//! abstract socket (`bell.rs`), registered in the router's reactor, let
//! the runtime sleep on TCP and shared memory at once; see
//! [`ShmTransport::prepare_sleep`]. Writers fence after each message: the
//! variant where they do not and a sleeper issues `membarrier(2)` instead
//! (`barrier.rs`) is switched off, the kernel's barrier can skip a writer.
//!
//! The mailbox (`mailbox.rs`): under `TETHER_MAX_LINKS`, a writer whose
//! ring to a peer is closed (never opened, or retired by the cap) sends
//! its small frames through the peer's one mailbox, which every such
//! writer shares, instead of a ring of its own; a peer used inside
//! `IN_KERNEL` ([`ShmTransport::pin`]) or a larger frame opens the ring.
//! The owner copies each record out into the writer's channel (its
//! *stash*), and reports and places the stashed frames one at a time, in
//! order with what the writer's ring carries.
//!
//! Liveness: each channel knows its peer's pid and start time. A pidfd in
//! the same epoll reports its exit at once; where pidfds are missing, the
//! process table is checked every [`LIVENESS_PERIOD`]. When a peer is
//! gone, what it wrote is still read, then every request that needs it
//! completes with `TETHER_ERR_PEER_LOST`.

mod barrier;
mod bell;
mod channel;
mod cma;
mod line;
mod mailbox;
mod remote;
mod segment;

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use tether_proto::{
    classify, Class, FrameHeader, FrameKind, LinkKind, PayloadSink, Region, ReqId, RmaOp,
    SinkToken, Transmit, TransmitPayload, WireError,
};
use tether_ring::{Consumer, Doorbell, Producer};

use crate::error::{err, ErrorClass};
use crate::host;
use crate::transport::api::{Caps, NoResource, RmaOutcome, Transport, LINK_QUEUE_FRAMES};
use crate::transport::events::{Events, LinkEvent};
use crate::transport::peer_table::PeerTable;
use crate::transport::reactor::SHM_TOKENS;
use crate::transport::resources::{LinkMemory, LinkUse, OpenLink};
use crate::universe::Universe;
use bell::{Bell, Ringer};
use channel::{Delivered, Incoming, Outgoing};
pub use channel::{Direct, Wanted};
use mailbox::{Body, Kind, MailboxIn, MailboxOut, Pending, Unreadable};
pub use segment::AttachError;
use segment::{Segment, Shared, Writer};

/// How often peers without a pidfd are looked up in the process table.
pub const LIVENESS_PERIOD: Duration = Duration::from_millis(200);
/// The doorbell's token in the reactor; a peer's pidfd has `1 + peer`.
const BELL: Token = SHM_TOKENS.token(0);
/// A busy poll reads the clock (for [`LIVENESS_PERIOD`]) once per this
/// many calls, and at the first call after a sleep: a clock read costs
/// more than polling every ring.
const CLOCK_EVERY: u32 = 64;

/// Settings of the transport.
#[derive(Debug, Clone)]
pub struct ShmConfig {
    /// Capacity of each ring this process owns (a power of two).
    pub ring_bytes: usize,
    /// Whether cross-memory attach may be used.
    pub cma: bool,
    /// Whether this process may sleep with the barrier of `barrier.rs` and
    /// write to peers that do without fencing (`barrier.rs`).
    pub membarrier: bool,
    /// The run's key: writers prove it when they attach to a segment,
    /// and the owner reads no ring whose writer did not
    /// (`segment.rs`).
    pub key: Option<Arc<tether_auth::Key>>,
    /// Under `TETHER_MAX_LINKS`: small frames to peers not pinned by a
    /// kernel go through the peer's mailbox while this process's ring to
    /// it is closed (`mailbox.rs`), and a ring's pages come as they are
    /// written. Without a cap a writer faults its whole ring in when it
    /// attaches (`RingBytes::populate_for_writing`): a faster first lap,
    /// but every peer ever written to holds a full ring.
    pub capped: bool,
}

/// What exists before the universe is known: the segment's descriptor and
/// the doorbell, both published with this process's address.
pub struct Prepared {
    segment: Segment,
    bell: Bell,
    me: Writer,
}

impl Prepared {
    pub fn create() -> std::io::Result<Prepared> {
        let pid = std::process::id();
        let start = host::start_time(pid).ok_or_else(|| {
            std::io::Error::other("cannot read this process's start time from /proc")
        })?;
        let segment = Segment::create()?;
        let bell = Bell::bind(pid, start)?;
        let me = Writer {
            pid,
            start,
            segment_fd: segment.fd(),
            ring_open: true,
        };
        Ok(Prepared { segment, bell, me })
    }

    pub fn segment_fd(&self) -> u32 {
        self.me.segment_fd
    }

    pub fn start_time(&self) -> u64 {
        self.me.start
    }
}

/// Whether shared memory works in this process, whether large messages
/// get one copy, and whether writers fence (for `tether info`; it
/// registers the calling process for the sleep barrier).
pub fn availability() -> Result<String, String> {
    Prepared::create().map_err(|e| format!("not usable: {e}"))?;
    let copies = match cma::probe() {
        Ok(()) => "one-copy large messages by cross-memory attach".to_string(),
        Err(e) => format!("large messages are copied through the ring because cross-memory attach is refused ({e})"),
    };
    let fences = match barrier::register() {
        Ok(()) if barrier::RELIABLE => {
            "no fence per message (sleepers call membarrier)".to_string()
        }
        Ok(()) => {
            "a fence per message (membarrier is offered, but its barrier can skip a writer's CPU)"
                .to_string()
        }
        Err(e) => format!("a fence per message because membarrier is refused ({e})"),
    };
    Ok(format!(
        "usable: rings in a memfd segment, {copies}, {fences}"
    ))
}

struct Channel {
    pid: u32,
    start: u64,
    out: Option<Outgoing>,
    /// This process's side of the peer's mailbox (beside `out`), boxed:
    /// the channel stays small for the short path's lookups.
    mail: Option<Box<MailboxOut>>,
    /// This process writes its frames to its ring in the peer's segment
    /// (else to the peer's mailbox).
    ring_open_out: bool,
    /// A kernel (`IN_KERNEL`) used the peer: frames to it take the ring.
    pinned: bool,
    inc: Option<Incoming>,
    /// The peer writes to its ring in this process's segment: read it
    /// (else it writes to this process's mailbox).
    ring_open_in: bool,
    /// What the peer's mailbox records carried, in order, until reported
    /// and placed.
    stash: VecDeque<Stashed>,
    /// The stash's first frame was reported: it waits for its place.
    stash_reported: bool,
    /// The peer's next mailbox record number.
    mailbox_seq: u64,
    pidfd: Option<OwnedFd>,
    bye_sent: bool,
    bye_received: bool,
    lost: bool,
    /// Frames written and read at the link cap's last look: moved
    /// since then, the link is not idle (`ShmTransport::open_links`).
    frames_seen: (u64, u64),
}

/// A frame a mailbox record carried.
enum Stashed {
    Frame(FrameHeader, Vec<u8>),
    Bye,
    Abort(i32),
}

pub struct ShmTransport {
    segment: Segment,
    /// This process's mailbox (`mailbox.rs`).
    mailbox: MailboxIn,
    /// A record in it did not parse: it is read no more.
    mailbox_broken: bool,
    /// Peers pinned before a channel to them existed.
    pinned: Vec<u32>,
    /// Channels whose frames go to their ring (not the mailbox): the
    /// links the cap may have to retire.
    open_rings: usize,
    own_bell: Shared<Doorbell>,
    generation: Shared<AtomicU64>,
    generation_seen: u64,
    /// Slots whose writer did not prove the run's key: never read.
    refused: Vec<u32>,
    bell: Bell,
    ringer: Ringer,
    me: Writer,
    universe: Arc<Universe>,
    config: ShmConfig,
    channels: PeerTable<Channel>,
    /// Peers with an incoming ring, in the order they are polled.
    incoming: Vec<u32>,
    next_check: Instant,
    /// Polls since the clock was last read for the liveness check.
    polls_since_clock: u32,
    /// What happened since the router last drained it.
    pub events: Events,
    /// Peers whose process a failed cross-memory copy says may be gone:
    /// checked at the next poll, which can read what they wrote first.
    suspects: Vec<u32>,
    delivered: Vec<Delivered>,
    /// The sleep barrier failed once (said once in the log).
    barrier_failed: bool,
    /// Outgoing rings whose pages were given back (counters).
    pub retires: u64,
}

impl ShmTransport {
    /// Sizes the segment for the universe and starts listening on the
    /// doorbell.
    pub fn new(
        mut prepared: Prepared,
        universe: Arc<Universe>,
        mut config: ShmConfig,
        registry: &Registry,
    ) -> std::io::Result<ShmTransport> {
        if config.membarrier {
            match barrier::register() {
                Err(e) => {
                    tracing::info!("membarrier refused ({e}): every message to a peer on this host is followed by a fence");
                    config.membarrier = false;
                }
                // Offered, but the kernel's barrier can skip the CPU a
                // writer runs on, and the sleeper then misses its wake-up
                // (`barrier.rs`): writers fence, nobody sleeps with it.
                Ok(()) => config.membarrier = barrier::RELIABLE,
            }
        }
        let mapping = prepared.segment.init(
            universe.id,
            universe.my_universe_rank(),
            universe.size(),
            config.ring_bytes,
            config.membarrier,
        )?;
        let own_bell = mapping.doorbell();
        let generation = mapping.generation();
        let (mailbox_control, mailbox_bytes) = mapping.mailbox();
        let mailbox = MailboxIn::new(mailbox_control, mailbox_bytes);
        registry.register(&mut prepared.bell.socket, BELL, Interest::READABLE)?;
        if config.cma {
            if let Err(e) = cma::probe() {
                tracing::info!("cross-memory attach refused ({e}): large messages go through the shared-memory rings");
                config.cma = false;
            }
        }
        Ok(ShmTransport {
            segment: prepared.segment,
            mailbox,
            mailbox_broken: false,
            pinned: Vec::new(),
            open_rings: 0,
            own_bell,
            generation,
            generation_seen: 0,
            refused: Vec::new(),
            bell: prepared.bell,
            ringer: Ringer::new()?,
            me: prepared.me,
            universe,
            config,
            channels: PeerTable::default(),
            incoming: Vec::new(),
            next_check: Instant::now() + LIVENESS_PERIOD,
            polls_since_clock: 0,
            events: Events::default(),
            suspects: Vec::new(),
            delivered: Vec::new(),
            barrier_failed: false,
            retires: 0,
        })
    }

    /// The channels with a ring either way and what each holds
    /// (`resources.rs`).
    pub fn links(&self, out: &mut Vec<LinkUse>) {
        for (peer, channel) in self.channels.iter() {
            if channel.lost || (channel.out.is_none() && channel.inc.is_none()) {
                continue;
            }
            let mut memory = LinkMemory::default();
            if let Some(outgoing) = &channel.out {
                let (ring, resident, user) = outgoing.footprint();
                memory.ring_bytes += ring;
                memory.ring_resident_bytes += resident;
                memory.user_bytes += user;
            }
            memory.user_bytes += channel.mail.as_deref().map_or(0, MailboxOut::queued_bytes);
            memory.user_bytes += channel
                .stash
                .iter()
                .map(|s| match s {
                    Stashed::Frame(_, payload) => payload.capacity() as u64,
                    _ => 0,
                })
                .sum::<u64>();
            let mut incoming_resident = 0;
            if let Some(incoming) = &channel.inc {
                let (ring, resident) = incoming.footprint();
                memory.ring_bytes += ring;
                memory.ring_resident_bytes += resident;
                incoming_resident = resident;
            }
            // Rings given back both ways (`TETHER_MAX_LINKS`) keep at
            // most the page the reader polls for the next frame.
            let given_back = channel.out.as_ref().is_none_or(|o| !o.holds_pages());
            out.push(LinkUse {
                peer: *peer,
                transport: "shm",
                memory,
                dedicated: !given_back || incoming_resident > segment::PAGE as u64,
            });
        }
    }

    /// This process's mailbox: its bytes, and those resident now.
    pub fn mailbox_footprint(&self) -> (u64, u64) {
        self.mailbox.footprint()
    }

    /// Mailbox records this process wrote to its peers' mailboxes, and
    /// read from its own.
    pub fn mailbox_records(&self) -> (u64, u64) {
        self.channels.values().fold((0, 0), |(sent, read), c| {
            (
                sent + c.mail.as_deref().map_or(0, MailboxOut::records),
                read + c.mailbox_seq,
            )
        })
    }

    /// The channels whose outgoing ring was written since its pages were
    /// last given back (the links `TETHER_MAX_LINKS` counts), each idle
    /// when no frame moved either way since the previous look (whether
    /// the ring is drained is checked when it is retired).
    pub fn open_links(&mut self, out: &mut Vec<OpenLink>) {
        for (&peer, channel) in self.channels.iter_mut() {
            let Some(outgoing) = channel.out.as_ref().filter(|o| o.holds_pages()) else {
                continue;
            };
            if channel.lost {
                continue;
            }
            let frames = (
                outgoing.frames(),
                channel.inc.as_ref().map_or(0, Incoming::frames),
            );
            let moved = frames != channel.frames_seen;
            channel.frames_seen = frames;
            out.push(OpenLink {
                peer,
                idle: !moved,
                kept_by_peer: false,
            });
        }
    }

    /// Under a link cap (`TETHER_MAX_LINKS`) or not, from now on
    /// ([`ShmConfig::capped`]).
    pub fn set_capped(&mut self, capped: bool) {
        self.config.capped = capped;
    }

    /// Frames to `peer` take its ring from now on, whatever the cap: a
    /// kernel (`IN_KERNEL`) uses it.
    pub fn pin(&mut self, peer: u32) {
        match self.channels.get_mut(&peer) {
            Some(channel) => channel.pinned = true,
            None if !self.pinned.contains(&peer) => self.pinned.push(peer),
            None => {}
        }
    }

    /// Channels whose frames go to their ring: an upper bound of
    /// [`ShmTransport::open_links`], which costs a look at each (with
    /// the mailbox, a ring is opened only for a kernel's peers and large
    /// frames, so under the cap this stays small and a kernel's progress
    /// does not check the cap).
    pub fn open_ring_count(&self) -> usize {
        self.open_rings
    }

    /// Channels whose ring this process ever wrote (the most rings it
    /// held at once is at most this).
    pub fn rings_written(&self) -> usize {
        self.channels
            .values()
            .filter(|c| c.out.as_ref().is_some_and(|o| o.frames() > 0))
            .count()
    }

    /// Retires the link to `peer`: gives its outgoing ring's pages back
    /// when the peer has read everything (`Outgoing::give_back`) and
    /// closes it: frames go through the peer's mailbox from now on, the
    /// first of them saying so, until a frame needs the ring again. The
    /// incoming ring is the peer's to give back. Returns whether it did.
    pub fn retire(&mut self, peer: u32) -> bool {
        let Some(channel) = self.channels.get_mut(&peer).filter(|c| !c.lost) else {
            return false;
        };
        let done = channel.out.as_mut().is_some_and(Outgoing::give_back);
        if done {
            if let Some(mail) = channel.mail.as_mut() {
                if channel.ring_open_out {
                    channel.ring_open_out = false;
                    self.open_rings -= 1;
                }
                mail.pending.push_back(Pending::RingClosed);
                self.drain_mail_of(peer);
            }
        }
        self.retires += u64::from(done);
        done
    }

    /// Whether frames for `peer` can be sent now.
    pub fn reaches(&self, peer: u32) -> bool {
        self.channels
            .get(&peer)
            .is_some_and(|c| c.out.is_some() && !c.lost)
    }

    /// Attaches to the segment of `peer`, process (`pid`, `start`) whose
    /// segment descriptor is `fd`.
    pub fn attach(
        &mut self,
        peer: u32,
        pid: u32,
        start: u64,
        fd: u32,
        registry: &Registry,
    ) -> Result<(), AttachError> {
        if self.reaches(peer) {
            return Ok(());
        }
        if !host::is_alive(pid, start) {
            return Err(AttachError::Gone(format!(
                "its process {pid} is not running (any more)"
            )));
        }
        let key = self.config.key.as_deref();
        let pinned = self.pinned.contains(&peer);
        let ring_open = !self.config.capped || pinned;
        let me = Writer {
            ring_open,
            ..self.me
        };
        let mapping = segment::attach(pid, fd, self.universe.id, self.me_rank(), me, key)?;
        if !host::is_alive(pid, start) {
            return Err(AttachError::Gone(format!(
                "its process {pid} ended while attaching"
            )));
        }
        let bell_addr = self
            .ringer
            .reach(pid, start)
            .map_err(|e| AttachError::Unusable(format!("cannot reach its doorbell: {e}")))?;
        let (control, bytes) = mapping.ring(self.me_rank());
        if !self.config.capped {
            bytes.populate_for_writing();
        }
        // SAFETY: the slot was claimed for this process by `attach`, so
        // this is the ring's only producer.
        let producer = unsafe { Producer::new(control, bytes) };
        let unfenced = self.config.membarrier && mapping.owner_sleeps_with_barrier();
        let mut out = Outgoing::new(producer, mapping.doorbell(), bell_addr, unfenced);
        if !ring_open {
            out.start_closed();
            // Claiming the slot mapped its page here, and the first read
            // of the header mapped the pages around it that the owner
            // has in memory (the kernel's fault-around): the mailbox's.
            // A writer without its ring touches neither again (it writes
            // records through the file).
            mapping.slot_page(self.me_rank()).unmap_here();
            mapping.mailbox_pages().unmap_here();
        }
        let id = mailbox::writer_id(self.me.pid, self.me.start);
        let mail = Box::new(MailboxOut::new(&mapping, id, self.me_rank()));
        let channel = self.channel(peer, pid, start, registry);
        channel.out = Some(out);
        channel.mail = Some(mail);
        channel.ring_open_out = ring_open;
        channel.pinned |= pinned;
        self.open_rings += usize::from(ring_open);
        tracing::info!(
            "reaching {} over shm (pid {pid})",
            self.universe.describe(peer)
        );
        Ok(())
    }

    fn me_rank(&self) -> u32 {
        self.universe.my_universe_rank()
    }

    fn channel(&mut self, peer: u32, pid: u32, start: u64, registry: &Registry) -> &mut Channel {
        self.channels.get_or_insert_with(peer, || {
            let pidfd = watch(pid, start, peer, registry);
            Channel {
                pid,
                start,
                out: None,
                mail: None,
                ring_open_out: true,
                pinned: false,
                inc: None,
                ring_open_in: true,
                stash: VecDeque::new(),
                stash_reported: false,
                mailbox_seq: 0,
                pidfd,
                bye_sent: false,
                bye_received: false,
                lost: false,
                frames_seen: (0, 0),
            }
        })
    }

    /// Writes frame `t` into the ring to its peer now, or queues it
    /// behind what waits, unless [`LINK_QUEUE_FRAMES`] wait already. A
    /// frame for a lost peer is dropped.
    fn send_frame(&mut self, mut t: Transmit) -> Result<(), NoResource> {
        let peer = t.peer;
        if let Some(channel) = self
            .channels
            .get_mut(&peer)
            .filter(|c| !c.lost && !c.takes_ring_frames())
        {
            let Some(mail) = channel.mail.as_mut() else {
                return Ok(());
            };
            if let TransmitPayload::Gathered(g) = &t.payload {
                // Mailbox records take contiguous bytes: runs are packed.
                // SAFETY: the runs are valid until `completes` is reported.
                t.payload = TransmitPayload::Owned(unsafe { g.to_vec() });
            }
            if mail.pending.len() >= LINK_QUEUE_FRAMES {
                return Err(NoResource(t));
            }
            mail.pending.push_back(Pending::Frame(t));
            self.drain_mail_of(peer);
            return Ok(());
        }
        let Some(out) = live_out(&mut self.channels, peer) else {
            return Ok(());
        };
        match out.write_now(t, &self.ringer) {
            Ok(completes) => {
                if let Some(req) = completes {
                    self.events.sent.push(req);
                }
            }
            Err(t) if out.queued_frames() >= LINK_QUEUE_FRAMES => return Err(NoResource(t)),
            Err(t) => {
                out.enqueue(t);
                self.flush(peer);
            }
        }
        Ok(())
    }

    /// Writes an eager message with `context` and `tag` and the bytes of
    /// `payload` to `peer` now, if its ring takes the whole frame and
    /// nothing waits before it; returns whether it did (then the send is
    /// complete). Nothing is written otherwise. The short path of a
    /// blocking send.
    #[inline(always)]
    pub fn send_eager(&mut self, peer: u32, context: u32, tag: i32, payload: Region) -> bool {
        let Some(out) = live_out(&mut self.channels, peer) else {
            return false;
        };
        // SAFETY: the caller's buffer is valid during the call.
        unsafe { out.write_eager(context, tag, payload.ptr, payload.len, &self.ringer) }
    }

    /// Takes the next frame from `peer` straight into `buf` if it is an
    /// `Eager` frame that `want` accepts (see `Incoming::take_eager`),
    /// polling the ring up to `polls` times (at least once) while it is
    /// empty, with `pause()` between polls. `Other` also when this process
    /// has frames waiting for room in the ring to `peer`: the peer may
    /// wait for them before it answers, and only the full poll writes
    /// them. The channel is looked up once: nothing that runs between
    /// polls changes it (only the full poll does).
    #[inline(always)]
    pub fn take_eager(
        &mut self,
        peer: u32,
        buf: Region,
        polls: u32,
        pause: impl FnMut(),
        want: Wanted,
    ) -> Direct {
        let Some(channel) = self.channels.get_mut(&peer).filter(|c| !c.lost) else {
            return Direct::Other;
        };
        if channel.out.as_ref().is_some_and(Outgoing::has_output) || !channel.reads_ring() {
            return Direct::Other;
        }
        let Some(inc) = channel.inc.as_mut() else {
            return Direct::Other;
        };
        // The room of what the last call took goes back now, while this
        // one waits for its message (the writer woken if it waits for
        // it); a large frame's right after taking it. Between this
        // message's arrival and the return, only the large frame's case
        // stores to the ring's control words or fences.
        let out = channel.out.as_ref();
        if inc.release_taken(true) {
            wake(out, &self.ringer);
        }
        let found = inc.take_eager(buf, want, polls, pause);
        if inc.release_taken(false) {
            wake(out, &self.ringer);
        }
        found
    }

    fn flush(&mut self, peer: u32) -> bool {
        let Some(out) = self.channels.get_mut(&peer).and_then(|c| c.out.as_mut()) else {
            return false;
        };
        out.flush(&self.ringer, &mut self.events.sent)
    }

    /// Reads every incoming ring and writes what waits for room; finds
    /// peers that attached since the last call; checks liveness when due.
    /// Returns whether bytes moved.
    pub fn poll(&mut self, registry: &Registry) -> bool {
        self.discover(registry);
        let mut moved = self.read_mailbox();
        for i in 0..self.incoming.len() {
            moved |= self.read(self.incoming[i]);
        }
        for channel in self.channels.values_mut().filter(|c| !c.lost) {
            if channel.mail.as_ref().is_some_and(|m| !m.pending.is_empty()) {
                moved |= drain_mail(
                    channel,
                    self.config.capped,
                    &self.ringer,
                    &mut self.events.sent,
                    &mut self.open_rings,
                );
            }
            if let Some(out) = channel.out.as_mut().filter(|o| o.has_output()) {
                moved |= out.flush(&self.ringer, &mut self.events.sent);
            }
        }
        for peer in std::mem::take(&mut self.suspects) {
            self.check_peer(peer);
        }
        self.polls_since_clock += 1;
        if self.polls_since_clock >= CLOCK_EVERY {
            self.polls_since_clock = 0;
            let now = Instant::now();
            if now >= self.next_check {
                self.next_check = now + LIVENESS_PERIOD;
                for mail in self.channels.values_mut().filter_map(|c| c.mail.as_mut()) {
                    mail.free_if_holder_gone();
                }
                let peers: Vec<u32> = self.channels.keys().copied().collect();
                for peer in peers {
                    self.check_peer(peer);
                }
            }
        }
        moved
    }

    /// Reads `peer`'s ring up to its next data-path frame (see
    /// [`Incoming::read`]) and reports what it found.
    fn read(&mut self, peer: u32) -> bool {
        let Some(channel) = self
            .channels
            .get_mut(&peer)
            .filter(|c| !c.lost && c.reads_ring())
        else {
            return false;
        };
        let Some(inc) = channel.inc.as_mut() else {
            return false;
        };
        let result = inc.read(&mut self.delivered);
        self.report(peer);
        let Some(channel) = self.channels.get_mut(&peer) else {
            return false;
        };
        if let (Ok(true), Some(out)) = (&result, channel.out.as_ref()) {
            out.wake_peer(&self.ringer);
        }
        match result {
            Ok(moved) => moved,
            Err(e) => {
                self.broke_protocol(peer, e);
                true
            }
        }
    }

    /// Reports what `peer`'s ring delivered: data-path frames and filled
    /// payloads to the router, the link's own frames here.
    fn report(&mut self, peer: u32) {
        let Some(channel) = self.channels.get_mut(&peer) else {
            self.delivered.clear();
            return;
        };
        for item in self.delivered.drain(..) {
            match item {
                Delivered::Frame(header) => self.events.frames.push_back((peer, header)),
                Delivered::Filled(token, owned) => self.events.filled.push((token, owned)),
                Delivered::Bye => channel.bye_received = true,
                Delivered::Abort(code) => self.events.links.push(LinkEvent::Abort { peer, code }),
            }
        }
    }

    /// Looks for writers that attached to this process's segment since the
    /// last look, and attaches back to them.
    fn discover(&mut self, registry: &Registry) {
        let generation = self.generation.load(Ordering::Acquire);
        if generation == self.generation_seen {
            return;
        }
        self.generation_seen = generation;
        let Some(mapping) = self.segment.mapping() else {
            return;
        };
        let mut found = Vec::new();
        for slot in mapping.attached_slots() {
            if self.channels.get(&slot).is_some_and(|c| c.inc.is_some()) {
                continue;
            }
            if let Some(writer) = mapping.writer(slot) {
                if self.refused.contains(&slot) {
                    continue;
                }
                if let Some(key) = &self.config.key {
                    let attachment = segment::Attachment {
                        owner_nonce: &mapping.owner_nonce(),
                        universe_id: self.universe.id,
                        owner_rank: self.me_rank(),
                        writer_rank: slot,
                        writer: &writer,
                    };
                    if !attachment.checks(key, &mapping.writer_proof(slot)) {
                        tracing::warn!(
                            "refusing the shared-memory writer pid {} as {}: it did not prove this run's key",
                            writer.pid,
                            self.universe.describe(slot)
                        );
                        self.refused.push(slot);
                        continue;
                    }
                }
                let (control, bytes) = mapping.ring(slot);
                // SAFETY: this process owns the segment and creates one
                // consumer per slot.
                let consumer = unsafe { Consumer::new(control, bytes) };
                found.push((slot, writer, Incoming::new(consumer)));
            }
        }
        for (peer, writer, inc) in found {
            let channel = self.channel(peer, writer.pid, writer.start, registry);
            channel.inc = Some(inc);
            channel.ring_open_in = writer.ring_open;
            self.incoming.push(peer);
            if let Err(e) = self.attach(peer, writer.pid, writer.start, writer.segment_fd, registry)
            {
                tracing::debug!(
                    "cannot attach back to {}: {e:?}",
                    self.universe.describe(peer)
                );
            }
        }
    }

    /// A token of this transport was ready in epoll.
    pub fn on_ready(&mut self, token: Token) {
        if token == BELL {
            self.bell.drain();
        } else if let Some(peer) = SHM_TOKENS.index(token).and_then(|i| i.checked_sub(1)) {
            self.check_peer(peer as u32);
        }
    }

    /// Reports `peer` lost if its process is gone, after reading
    /// everything it wrote.
    fn check_peer(&mut self, peer: u32) {
        let Some(channel) = self.channels.get(&peer).filter(|c| !c.lost) else {
            return;
        };
        let (pid, start) = (channel.pid, channel.start);
        if host::is_alive(pid, start) {
            return;
        }
        self.read_mailbox();
        while self.read(peer) {}
        let Some(channel) = self.channels.get(&peer).filter(|c| !c.lost) else {
            return;
        };
        if channel.inc.as_ref().is_some_and(Incoming::awaits_place) || !channel.stash.is_empty() {
            // What it wrote before it went is still being delivered: the
            // next poll looks again.
            self.suspects.push(peer);
            return;
        }
        let who = self.universe.describe(peer);
        let mid_frame = channel.inc.as_ref().is_some_and(Incoming::mid_frame);
        let error = if channel.bye_received && !mid_frame {
            err(ErrorClass::PeerLost, format!("{who} has finalized"))
        } else {
            tracing::warn!("{who} (pid {pid}) exited without finalizing");
            err(
                ErrorClass::PeerLost,
                format!("{who} (pid {pid}, shared memory) exited or was killed without finalizing"),
            )
        };
        self.lose(peer, error);
    }

    /// Gives `peer` up without a word (the router found it silent): its
    /// ring is not read again, nothing more is written to it, and nothing
    /// is reported (the router reports the loss).
    pub fn abandon(&mut self, peer: u32) {
        if let Some(channel) = self.channels.get_mut(&peer) {
            if channel.out.take().is_some() && channel.ring_open_out {
                self.open_rings -= 1;
            }
            channel.lost = true;
            channel.mail = None;
            channel.stash.clear();
            channel.pidfd = None;
        }
    }

    fn lose(&mut self, peer: u32, error: crate::error::Error) {
        if let Some(channel) = self.channels.get_mut(&peer) {
            if channel.lost {
                return;
            }
            if channel.out.take().is_some() && channel.ring_open_out {
                self.open_rings -= 1;
            }
            channel.lost = true;
            channel.mail = None;
            channel.stash.clear();
            channel.pidfd = None;
        }
        self.events.lost(peer, error);
    }

    /// Peers on this host this process has a channel with.
    pub fn local_peers(&self) -> usize {
        self.channels.len()
    }

    /// Announces that this process is about to sleep in epoll. Returns
    /// false (and stays awake) when a ring already holds data for it, or
    /// one it writes has room for frames that wait; after a true, call
    /// [`ShmTransport::awake`] once the sleep ends. Peers wake it both when
    /// they write to it and when they free room in a ring it writes. With
    /// the sleep barrier (`barrier.rs`), false also when the barrier
    /// fails: peers write to it unfenced, so it must not sleep without.
    pub fn prepare_sleep(&mut self) -> bool {
        self.own_bell.prepare_sleep();
        if self.config.membarrier {
            if let Err(e) = barrier::issue() {
                // Peers write without fencing: without the barrier this
                // process could miss their wake-up, so it stays awake.
                if !self.barrier_failed {
                    self.barrier_failed = true;
                    tracing::warn!(
                        "membarrier failed ({e}): this process polls instead of sleeping"
                    );
                }
                self.own_bell.awake();
                return false;
            }
        }
        // A writer waiting for a mailbox's lock or room polls: the owner
        // cannot know whom to wake when it frees room.
        let pending = self.generation.load(Ordering::Relaxed) != self.generation_seen
            || (!self.mailbox_broken && self.mailbox.has_data())
            || self.channels.values_mut().any(|c| {
                !c.lost
                    && (c.inc.as_ref().is_some_and(Incoming::has_data)
                        || c.out.as_mut().is_some_and(Outgoing::can_progress)
                        || c.mail.as_ref().is_some_and(|m| !m.pending.is_empty()))
            });
        if pending {
            self.own_bell.awake();
        }
        !pending
    }

    pub fn awake(&mut self) {
        self.own_bell.awake();
        // After a sleep the liveness clock is due at the next poll.
        self.polls_since_clock = CLOCK_EVERY;
    }
}

impl Transport for ShmTransport {
    fn caps(&self) -> Caps {
        Caps {
            eager_limit: None,
            remote_memory: if self.config.cma { u64::MAX } else { 0 },
            stripe: None,
            window_rma: None,
        }
    }

    fn send(&mut self, t: Transmit) -> Result<(), NoResource> {
        self.send_frame(t)
    }

    fn rma(&mut self, op: &RmaOp) -> RmaOutcome {
        RmaOutcome::Now(self.execute(op))
    }

    /// Says where the payload of the data-path frame reported from
    /// `peer` goes (read from its ring, or copied from its stash), and
    /// reads on.
    fn place(&mut self, peer: u32, sink: PayloadSink) {
        let Some(channel) = self.channels.get_mut(&peer).filter(|c| !c.lost) else {
            return;
        };
        let ring_waits = channel.inc.as_ref().is_some_and(Incoming::awaits_place);
        if !ring_waits && channel.stash_reported {
            channel.stash_reported = false;
            if let Some(Stashed::Frame(_, payload)) = channel.stash.pop_front() {
                fill(sink, &payload, &mut self.events.filled);
            }
            self.report_stash(peer);
            self.read(peer);
            return;
        }
        let Some(inc) = channel.inc.as_mut() else {
            return;
        };
        let placed = inc.place(sink, &mut self.delivered);
        self.report(peer);
        match placed {
            Ok(()) => {
                self.report_stash(peer);
                self.read(peer);
            }
            Err(e) => self.broke_protocol(peer, e),
        }
    }

    /// The peer broke the protocol on its ring: it is lost.
    fn broke_protocol(&mut self, peer: u32, e: WireError) {
        let who = self.universe.describe(peer);
        tracing::error!("protocol error from {who} on its shared-memory ring: {e}");
        let message = format!("{who} broke the protocol on its shared-memory ring: {e}");
        self.lose(peer, err(ErrorClass::Protocol, message));
    }

    fn events(&mut self) -> &mut Events {
        &mut self.events
    }

    /// Whether frames wait for room in a ring or a mailbox.
    fn has_output(&self) -> bool {
        self.channels.values().any(|c| !c.lost && c.has_output())
    }

    /// Queues a goodbye on every channel (once).
    fn say_goodbye(&mut self) {
        let peers: Vec<u32> = self.channels.keys().copied().collect();
        for peer in peers {
            let channel = self.channels.get_mut(&peer).expect("listed");
            if channel.bye_sent || channel.lost || channel.out.is_none() {
                continue;
            }
            channel.bye_sent = true;
            self.send_control(peer, FrameKind::Bye, 0);
        }
    }

    /// Whether every channel has said its goodbye and heard the peer's.
    fn all_goodbyes_heard(&self) -> bool {
        self.channels
            .values()
            .all(|c| c.lost || c.out.is_none() || (c.bye_received && !c.has_output()))
    }

    /// Queues an abort on every channel, best effort.
    fn broadcast_abort(&mut self, code: i32) {
        let peers: Vec<u32> = self.channels.keys().copied().collect();
        for peer in peers {
            if self
                .channels
                .get(&peer)
                .is_some_and(|c| !c.lost && c.out.is_some())
            {
                self.send_control(peer, FrameKind::Abort, code);
            }
        }
    }
}

impl ShmTransport {
    /// Sends a frame of the channel itself (goodbye, abort) the way the
    /// channel's frames go now: never refused for a full queue.
    fn send_control(&mut self, peer: u32, kind: FrameKind, tag: i32) {
        let Some(channel) = self.channels.get_mut(&peer).filter(|c| !c.lost) else {
            return;
        };
        if channel.takes_ring_frames() {
            if let Some(out) = channel.out.as_mut() {
                out.enqueue_control(kind, tag);
            }
            self.flush(peer);
            return;
        }
        let mut header = FrameHeader::new(kind);
        header.tag = tag;
        if let Some(mail) = channel.mail.as_mut() {
            mail.pending.push_back(Pending::Frame(Transmit {
                peer,
                header,
                payload: TransmitPayload::None,
                completes: None,
                copy_if_blocked: false,
            }));
            self.drain_mail_of(peer);
        }
    }

    /// [`drain_mail`] for `peer`'s channel.
    fn drain_mail_of(&mut self, peer: u32) -> bool {
        let Some(channel) = self.channels.get_mut(&peer).filter(|c| !c.lost) else {
            return false;
        };
        drain_mail(
            channel,
            self.config.capped,
            &self.ringer,
            &mut self.events.sent,
            &mut self.open_rings,
        )
    }

    /// Reads this process's mailbox: each record into its writer's
    /// stash (reported from there in order), or the writer's switch
    /// between its ring and the mailbox. Stops at a record from a writer
    /// that attached but is not discovered yet (the next poll discovers
    /// it first). Returns whether records were read.
    fn read_mailbox(&mut self) -> bool {
        if self.mailbox_broken {
            return false;
        }
        let mut moved = false;
        while let Some(sender) = self.mailbox.next_sender() {
            let known = self.channels.get(&sender).is_some_and(|c| c.inc.is_some());
            if !known && self.attached_unseen(sender) {
                break;
            }
            let record = match self.mailbox.next() {
                None => break,
                Some(Err(Unreadable::Corrupt(why))) => {
                    tracing::error!("this process's shared-memory mailbox is corrupt ({why}): it is read no more");
                    self.mailbox_broken = true;
                    break;
                }
                Some(Ok(record)) => record,
            };
            moved = true;
            if !known {
                tracing::warn!(
                    "dropping a shared-memory mailbox record from universe rank {sender}, which did not attach (or prove the run's key)"
                );
                continue;
            }
            let channel = self.channels.get_mut(&sender).expect("known");
            if channel.lost {
                continue;
            }
            if record.seq != channel.mailbox_seq {
                let expected = channel.mailbox_seq;
                self.broke_protocol(
                    sender,
                    WireError::BadSequence {
                        expected,
                        got: record.seq,
                    },
                );
                continue;
            }
            channel.mailbox_seq += 1;
            let stashed = match record.body {
                Body::RingOpen => {
                    channel.ring_open_in = true;
                    None
                }
                Body::RingClosed => {
                    channel.ring_open_in = false;
                    None
                }
                Body::BadFrame(e) => {
                    self.broke_protocol(sender, e);
                    continue;
                }
                Body::Frame(header, payload) => match classify(&header, LinkKind::Ring, true) {
                    Ok(Class::Data) => Some(Stashed::Frame(header, payload)),
                    Ok(Class::Bye) => Some(Stashed::Bye),
                    Ok(Class::Abort(code)) => Some(Stashed::Abort(code)),
                    Ok(Class::Handshake) => {
                        let e = WireError::UnexpectedFrame {
                            got: header.kind,
                            state: "in a shared-memory mailbox",
                        };
                        self.broke_protocol(sender, e);
                        continue;
                    }
                    Err(e) => {
                        self.broke_protocol(sender, e);
                        continue;
                    }
                },
            };
            channel.stash.extend(stashed);
            self.report_stash(sender);
        }
        moved | self.mailbox.release()
    }

    /// Whether `rank`'s writer attached to this segment but this process
    /// has not discovered it yet (nor refused it).
    fn attached_unseen(&self, rank: u32) -> bool {
        rank < self.universe.size()
            && !self.refused.contains(&rank)
            && self
                .segment
                .mapping()
                .is_some_and(|m| m.writer(rank).is_some())
    }

    /// Reports what waits first in `peer`'s stash: its link frames at
    /// once, its next data-path frame unless one from the stash or the
    /// ring waits for its place.
    fn report_stash(&mut self, peer: u32) {
        let Some(channel) = self.channels.get_mut(&peer) else {
            return;
        };
        if channel.stash_reported || channel.inc.as_ref().is_some_and(Incoming::awaits_place) {
            return;
        }
        while let Some(first) = channel.stash.front() {
            match first {
                Stashed::Frame(header, _) => {
                    self.events.frames.push_back((peer, *header));
                    channel.stash_reported = true;
                    return;
                }
                Stashed::Bye => channel.bye_received = true,
                Stashed::Abort(code) => self
                    .events
                    .links
                    .push(LinkEvent::Abort { peer, code: *code }),
            }
            channel.stash.pop_front();
        }
    }
}

impl Channel {
    /// Frames for the peer go straight to the ring: it is open and no
    /// frame waits for the mailbox before them.
    #[inline(always)]
    fn takes_ring_frames(&self) -> bool {
        self.ring_open_out && self.mail.as_ref().is_none_or(|m| m.pending.is_empty())
    }

    /// The peer's ring is read: the peer writes to it, and none of its
    /// mailbox records waits before what the ring holds.
    #[inline(always)]
    fn reads_ring(&self) -> bool {
        self.ring_open_in && self.stash.is_empty()
    }

    fn has_output(&self) -> bool {
        self.out.as_ref().is_some_and(Outgoing::has_output)
            || self.mail.as_ref().is_some_and(|m| !m.pending.is_empty())
    }
}

/// Writes what waits for `channel`'s mailbox, in order, as far as the
/// mailbox takes it; hands the frames after a [`Pending::RingOpen`] to
/// the ring. A frame needs the ring when there is no cap (`capped`
/// false), the peer is pinned, or its payload is over
/// [`mailbox::MAX_PAYLOAD`]: the ring is opened for it. Eager frames
/// left waiting are copied, so their sends complete. Returns whether
/// anything was written; counts a ring opened in `open_rings`.
fn drain_mail(
    channel: &mut Channel,
    capped: bool,
    ringer: &Ringer,
    sent: &mut Vec<ReqId>,
    open_rings: &mut usize,
) -> bool {
    let (Some(out), Some(mail)) = (channel.out.as_mut(), channel.mail.as_mut()) else {
        return false;
    };
    let mut wrote = false;
    while let Some(first) = mail.pending.front() {
        let written = match first {
            Pending::Frame(_) if channel.ring_open_out => {
                let Some(Pending::Frame(t)) = mail.pending.pop_front() else {
                    unreachable!("the first is a frame");
                };
                match out.write_now(t, ringer) {
                    Ok(completes) => sent.extend(completes),
                    Err(t) => out.enqueue(t),
                }
                continue;
            }
            Pending::Frame(t)
                if !capped || channel.pinned || t.payload.len() > mailbox::MAX_PAYLOAD =>
            {
                mail.pending.push_front(Pending::RingOpen);
                continue;
            }
            Pending::Frame(_) => {
                let Some(Pending::Frame(t)) = mail.pending.pop_front() else {
                    unreachable!("the first is a frame");
                };
                // SAFETY: a borrowed payload is valid until its request
                // completes, reported only once the frame is written.
                let payload = unsafe { payload_bytes(&t.payload) };
                let written = mail.write(Kind::Frame, Some(&t.header), payload);
                mail.pending.push_front(Pending::Frame(t));
                written
            }
            Pending::RingOpen => mail.write(Kind::RingOpen, None, &[]),
            Pending::RingClosed => mail.write(Kind::RingClosed, None, &[]),
        };
        if !written {
            // The lock's holder, or the reader that frees room, may be
            // waiting for this core.
            std::thread::yield_now();
            break;
        }
        wrote = true;
        match mail.pending.pop_front() {
            Some(Pending::Frame(t)) => sent.extend(t.completes),
            Some(Pending::RingOpen) => {
                channel.ring_open_out = true;
                *open_rings += 1;
            }
            _ => {}
        }
    }
    if wrote {
        out.wake_peer(ringer);
    }
    if out.has_output() {
        out.flush(ringer, sent);
    }
    for pending in mail.pending.iter_mut() {
        if let Pending::Frame(t) = pending {
            // SAFETY: valid until `completes` is reported, just after.
            if t.copy_if_blocked && unsafe { t.payload.make_owned() } {
                sent.extend(t.completes.take());
            }
        }
    }
    wrote
}

/// The bytes of a frame's payload (packed: gathered runs were packed
/// before the frame was queued).
///
/// # Safety
/// A borrowed payload's memory is valid.
unsafe fn payload_bytes(payload: &TransmitPayload) -> &[u8] {
    match payload {
        TransmitPayload::None => &[],
        // SAFETY: this function's contract.
        TransmitPayload::Borrowed(region) => unsafe { region.as_slice() },
        TransmitPayload::Owned(v) => v,
        TransmitPayload::Gathered(_) => unreachable!("ShmTransport::send_frame packs runs"),
    }
}

/// Copies a stashed frame's payload where the engine placed it.
fn fill(sink: PayloadSink, payload: &[u8], filled: &mut Vec<(SinkToken, Option<Vec<u8>>)>) {
    match sink {
        PayloadSink::None => {}
        PayloadSink::Region { region, token, .. } => {
            let n = region.len.min(payload.len());
            // SAFETY: the region is the posted receive buffer, valid
            // until its request completes; `n` bytes fit both.
            unsafe { std::ptr::copy_nonoverlapping(payload.as_ptr(), region.ptr, n) };
            filled.push((token, None));
        }
        PayloadSink::Owned { mut buf, token } => {
            let n = buf.len().min(payload.len());
            buf[..n].copy_from_slice(&payload[..n]);
            filled.push((token, Some(buf)));
        }
    }
}

/// The ring this process writes to `peer`, unless the peer is lost or
/// its frames go through the peer's mailbox now.
#[inline(always)]
fn live_out(channels: &mut PeerTable<Channel>, peer: u32) -> Option<&mut Outgoing> {
    channels
        .get_mut(&peer)
        .filter(|c| !c.lost && c.takes_ring_frames())
        .and_then(|c| c.out.as_mut())
}

/// Wakes the peer that writes to this process if it sleeps, after room
/// was returned to it; `out` is the ring to that peer, which carries its
/// doorbell (none yet: the peer has not attached, so it cannot wait).
#[inline(always)]
fn wake(out: Option<&Outgoing>, ringer: &Ringer) {
    if let Some(out) = out {
        out.wake_peer(ringer);
    }
}

/// A pidfd for (`pid`, `start`) registered in epoll under the peer's
/// token: it becomes readable when the process exits. `None` where pidfds
/// are not available (the periodic check covers it) or the process is
/// already gone.
fn watch(pid: u32, start: u64, peer: u32, registry: &Registry) -> Option<OwnedFd> {
    let pidfd = host::process_fd(pid, start)?;
    let token = SHM_TOKENS.token(1 + peer as usize);
    registry
        .register(&mut SourceFd(&pidfd.as_raw_fd()), token, Interest::READABLE)
        .ok()?;
    Some(pidfd)
}

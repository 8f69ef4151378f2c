//! The TCP transport: non-blocking sockets on epoll (mio), one connection
//! per peer, opened on first use.
//!
//! Layering. Each connection owns a [`tether_proto::Link`], the protocol
//! state machine of one link: it numbers every frame written
//! ([`Link::stamp`], [`Link::poll_transmit`]), decodes and checks every
//! header read (`conn.rs`), runs the handshake and the goodbye, and says
//! when its next deadline falls. This module does the I/O and the policy
//! around the links: when to connect and retry, which of two simultaneous
//! connections to keep, what a failure means for the peer. It reads the
//! clock and passes the time in; the links never do.
//!
//! Connection life cycle. The first frame for a peer reads the peer's
//! address from the rendezvous and connects (`connect.rs`); frames wait in
//! the peer's queue until the handshake (`Hello` -> `HelloAck`, in
//! `handshake.rs`) is done, then leave in order. When two processes
//! connect to each other at the same moment, the connection opened by the
//! lower universe rank wins ([`tether_proto::link::incoming_wins`]): each
//! side refuses the other's `Hello` or drops its own attempt by the same
//! rule, so both keep the same one connection. A peer that cannot be
//! reached within the connect timeout, a stream that ends without a
//! goodbye, and a peer that breaks the protocol are reported as
//! [`LinkEvent::Lost`] (`failure.rs`); a connection that never completes
//! its handshake is dropped and logged without touching any peer. Under
//! the link cap (`TETHER_MAX_LINKS`) the router may retire an idle
//! connection whose peer stays reachable: a goodbye both sides agree on,
//! after which the next frame dials again (`retire.rs`).

mod conn;
mod connect;
mod failure;
mod handshake;
mod retire;

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpListener;
use mio::{Interest, Registry, Token};
use rustc_hash::FxHashMap as HashMap;
use tether_auth::Key;
use tether_proto::link::{Link, LinkState};
use tether_proto::{FrameHeader, FrameKind, PayloadSink, Transmit, TransmitPayload, WireError};
use tether_rendezvous::Rendezvous;

use crate::addresses::Addresses;

use crate::error::{err, ErrorClass, Result};
use crate::transport::api::{Caps, NoResource, Transport, LINK_QUEUE_FRAMES};
use crate::transport::events::{Events, LinkEvent};
use crate::transport::link_settings::LinkSettings;
use crate::transport::reactor::{Ready, TokenSpace};
use crate::transport::resources::{socket_kernel_bytes, LinkMemory, LinkUse};
use crate::transport::retry::Retry;
use crate::universe::Universe;
use conn::{Conn, ConnError, Incoming, SharedBuffers};

/// The listener's index in the transport's tokens.
const LISTENER: usize = 0;
/// Most connections a busy poll reads directly instead of calling epoll
/// ([`TcpTransport::poll_direct`]): beyond two, a round of reads costs
/// more than one epoll_wait saves.
pub const DIRECT_POLL_MAX: usize = 2;

/// Accepted connections that may wait for their handshake at once, at
/// least (or one per process of the universe, when it has more: every
/// peer may dial at once, as after retires under `TETHER_MAX_LINKS`,
/// where 128 processes on two cores overran 64). One more closes the
/// oldest of them: a legitimate peer's handshake follows its connect at
/// once, so under a flood of connections that never complete one (idle,
/// dribbling, hostile) it still gets through, and the memory they hold
/// stays bounded (each holds a handshake-sized buffer).
pub const MAX_PENDING_HANDSHAKES: usize = 64;

/// The listener, registered in the reactor, before the universe is known.
pub type Bound = (TcpListener, SocketAddr);

/// One connection: the stream and the link that runs over it.
struct Entry {
    conn: Conn,
    link: Link,
    /// Refused or superseded: it is closed once its `HelloReject` is
    /// written, and at this time at the latest.
    closing: Option<Instant>,
}

impl Entry {
    fn new(conn: Conn, link: Link) -> Entry {
        let mut entry = Entry {
            conn,
            link,
            closing: None,
        };
        entry.take_control_frames();
        entry
    }

    /// Queues the link's own frames, stamped in the order they leave.
    fn take_control_frames(&mut self) {
        while let Some(frame) = self.link.poll_transmit() {
            self.conn.enqueue_control(frame);
        }
    }

    /// Numbers a frame of the layer above and queues it. A link that says
    /// no (after our `Bye`, or failed) takes nothing: the peer would not
    /// read it.
    fn push(&mut self, mut t: Transmit) {
        match self.link.stamp(&mut t.header) {
            Ok(()) => self.conn.enqueue(t),
            Err(error) => tracing::debug!("{:?} frame not sent: {error}", t.header.kind),
        }
    }

    /// The handshake is over (or was given up): frames flow or none will.
    fn past_handshake(&self) -> bool {
        self.closing.is_none()
            && !matches!(
                self.link.state(),
                LinkState::AwaitingAck | LinkState::AwaitingHello | LinkState::Verifying
            )
    }

    /// The peer said goodbye: it sends nothing more.
    fn goodbye_heard(&self) -> bool {
        matches!(
            self.link.state(),
            LinkState::ByeReceived | LinkState::Closed
        )
    }
}

/// What this transport knows of one peer.
#[derive(Default)]
struct Peer {
    established: Option<Token>,
    connecting: Option<Token>,
    /// Frames waiting for the handshake.
    queue: VecDeque<Transmit>,
    /// Connect attempts: until when, next try, last problem seen.
    attempt: Option<Attempt>,
    /// Said goodbye or lost: no connection is made to it again.
    finished: bool,
    /// A communication kernel of this process used it: its retires are
    /// refused (`retire.rs`).
    pinned: bool,
    /// It refused our retire (a kernel of its own uses the link): the
    /// link cap leaves it be.
    kept_by_peer: bool,
}

struct Attempt {
    deadline: Instant,
    retry: Retry,
    problem: String,
    /// The peer's published address refused or could not be routed to:
    /// the peer exists but TCP does not reach it (`TETHER_ERR_TRANSPORT`
    /// rather than `TETHER_ERR_TIMEOUT`).
    unreachable: bool,
}

/// Where to listen and how long to wait.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// The run's key: every link authenticates with it (see
    /// `tether_proto::link`), and refuses peers that do not.
    pub key: Option<Arc<Key>>,
    pub listen_ip: String,
    /// `TETHER_TCP_PORT`: 0 for any free port.
    pub listen_port: u16,
    pub connect_timeout: Duration,
    pub handshake_timeout: Duration,
    /// From our `Bye` to the peer's (`TETHER_FINALIZE_TIMEOUT`).
    pub goodbye_timeout: Duration,
}

pub struct TcpTransport {
    /// Which of the process's TCP rails this is (0: the one every peer
    /// has; `transport/rails.rs`): the peer's address of the same rail is
    /// dialled.
    rail: usize,
    /// This rail's part of the TCP tokens.
    tokens: TokenSpace,
    /// This transport's registration in the reactor (its own clone).
    registry: Registry,
    /// The connections of the last direct poll (kept to reuse its memory).
    direct: Vec<Token>,
    listener: TcpListener,
    entries: HashMap<Token, Entry>,
    /// Accepted connections waiting for their handshake, oldest first
    /// (some may have moved on: checked when bounding).
    pending_accepts: VecDeque<Token>,
    next_token: usize,
    peers: HashMap<u32, Peer>,
    universe: Arc<Universe>,
    /// Named in errors about runs that share a rendezvous.
    rendezvous: Arc<Rendezvous>,
    /// Peers' addresses, shared with the router (`addresses.rs`).
    addresses: Addresses,
    /// What each new link says in its `Hello` and how long it waits.
    links: LinkSettings,
    config: TcpConfig,
    /// What happened since the router last drained it.
    pub events: Events,
    /// What the last read delivered (kept to reuse its memory).
    incoming: Vec<Incoming>,
    /// The read buffers and stages the connections share (`conn.rs`).
    shared_buffers: SharedBuffers,
    /// Connect tries after a first one failed (counters).
    pub connect_retries: u64,
    /// Connections closed by a retire (counters).
    pub retires: u64,
    /// The most connections established at once (counters).
    pub links_peak: u64,
}

impl TcpTransport {
    /// Listens on `config.listen_ip` and `config.listen_port` (0: any
    /// free port), the listener registered in `registry` with the first
    /// of `tokens`.
    pub fn bind(config: &TcpConfig, registry: &Registry, tokens: TokenSpace) -> Result<Bound> {
        let ip: std::net::IpAddr = config.listen_ip.parse().map_err(|_| {
            err(
                ErrorClass::Init,
                format!(
                    "TETHER_TCP_INTERFACE={:?} is not an IP address",
                    config.listen_ip
                ),
            )
        })?;
        let at = SocketAddr::new(ip, config.listen_port);
        let mut listener = TcpListener::bind(at)
            .map_err(|e| err(ErrorClass::Transport, format!("cannot listen on {at}: {e}")))?;
        let local = listener
            .local_addr()
            .map_err(|e| err(ErrorClass::Transport, e.to_string()))?;
        registry
            .register(&mut listener, tokens.token(LISTENER), Interest::READABLE)
            .map_err(|e| err(ErrorClass::Transport, e.to_string()))?;
        Ok((listener, local))
    }

    /// The transport on the listener of [`TcpTransport::bind`] (rail
    /// `rail`, with `tokens`), registering its connections through
    /// `registry`, a clone of the reactor's.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        (bound, rail, tokens): (Bound, usize, TokenSpace),
        registry: Registry,
        config: TcpConfig,
        universe: Arc<Universe>,
        rendezvous: Arc<Rendezvous>,
        addresses: Addresses,
    ) -> TcpTransport {
        let links = LinkSettings::new(
            &universe,
            config.key.clone(),
            config.handshake_timeout,
            config.goodbye_timeout,
        );
        let (listener, _) = bound;
        TcpTransport {
            rail,
            tokens,
            registry,
            direct: Vec::new(),
            listener,
            entries: HashMap::default(),
            pending_accepts: VecDeque::new(),
            next_token: 1,
            peers: HashMap::default(),
            universe,
            rendezvous,
            addresses,
            links,
            config,
            events: Events::default(),
            incoming: Vec::new(),
            shared_buffers: SharedBuffers::default(),
            connect_retries: 0,
            retires: 0,
            links_peak: 0,
        }
    }

    /// Bytes of the read buffers and stages the connections share, kept
    /// between uses (a connection holding one counts it as its own).
    pub fn shared_buffer_bytes(&self) -> u64 {
        self.shared_buffers.bytes()
    }

    /// The established links and what each holds (`resources.rs`).
    pub fn links(&self, out: &mut Vec<LinkUse>) {
        use std::os::fd::AsRawFd;
        for (&peer, p) in &self.peers {
            let Some(entry) = p.established.and_then(|t| self.entries.get(&t)) else {
                continue;
            };
            out.push(LinkUse {
                peer,
                transport: "tcp",
                memory: LinkMemory {
                    user_bytes: entry.conn.user_bytes(),
                    kernel_bytes: socket_kernel_bytes(entry.conn.stream.as_raw_fd()),
                    ..LinkMemory::default()
                },
                dedicated: true,
            });
        }
    }

    /// Bytes handed to the link to `peer` that the peer has not taken
    /// yet (waiting here or in the kernel): 0 without a link.
    pub fn unwritten_to(&self, peer: u32) -> u64 {
        self.peers
            .get(&peer)
            .and_then(|p| p.established)
            .and_then(|token| self.entries.get(&token))
            .map_or(0, |entry| entry.conn.unwritten_bytes())
    }

    /// Whether the link to `peer` would write a frame given now at once:
    /// nothing waits for it here (its socket has not pushed back), or,
    /// before the link is up, nothing waits for the handshake yet.
    pub fn has_room(&self, peer: u32) -> bool {
        let Some(p) = self.peers.get(&peer) else {
            return true;
        };
        match p.established.and_then(|token| self.entries.get(&token)) {
            Some(entry) => entry.conn.queued_frames() == 0,
            None => p.queue.is_empty(),
        }
    }

    pub fn connect_timeout(&self) -> Duration {
        self.config.connect_timeout
    }

    /// How many TCP rails `peer` publishes, once its address is known.
    pub fn rails_of(&self, peer: u32) -> Option<usize> {
        self.addresses.get(peer).ok().map(|a| 1 + a.rails.len())
    }

    /// Whether connections exist or are being made (then epoll must be
    /// polled on every round of progress).
    pub fn is_busy(&self) -> bool {
        !self.entries.is_empty() || self.peers.values().any(|p| p.attempt.is_some())
    }

    /// New timeouts, for the links made from now on (and connect
    /// attempts started from now on).
    pub fn set_timeouts(&mut self, connect: Duration, handshake: Duration, goodbye: Duration) {
        self.config.connect_timeout = connect;
        self.config.handshake_timeout = handshake;
        self.config.goodbye_timeout = goodbye;
        self.links.set_timeouts(handshake, goodbye);
    }

    fn me(&self) -> u32 {
        self.universe.my_universe_rank()
    }

    fn new_token(&mut self) -> Token {
        let token = self.tokens.token(self.next_token);
        self.next_token += 1;
        token
    }

    /// One ready descriptor of this transport from the reactor: the
    /// listener accepts, a connection writes what waits and reads what
    /// arrived (feeding the engine, advancing handshakes).
    pub fn on_ready(&mut self, ready: &Ready) {
        if ready.token == self.tokens.token(LISTENER) {
            self.accept_all();
            return;
        }
        if ready.closed {
            if let Some(entry) = self.entries.get_mut(&ready.token) {
                entry.conn.hung_up();
            }
        }
        if ready.writable {
            self.flush(ready.token);
        }
        if ready.readable {
            self.read(ready.token, true);
        }
    }

    /// Whether [`TcpTransport::poll_direct`] can stand in for epoll on a
    /// busy-polling round: every connection is past its handshake, no
    /// connect is in progress, and there are at most [`DIRECT_POLL_MAX`]
    /// of them.
    pub fn can_poll_direct(&self) -> bool {
        self.entries.len() <= DIRECT_POLL_MAX
            && self.entries.values().all(Entry::past_handshake)
            && self.peers.values().all(|p| p.attempt.is_none())
    }

    /// One round of progress without epoll: writes what waits and reads
    /// every connection directly. Busy-polling this way costs one read per
    /// connection and round, like epoll_wait for one; but a message that
    /// arrives costs that read alone instead of epoll_wait and then a
    /// read. The listener and the other transports' descriptors are not
    /// looked at: the caller still waits in the reactor every few rounds
    /// and before sleeping. Returns whether bytes moved.
    pub fn poll_direct(&mut self) -> bool {
        let mut tokens = std::mem::take(&mut self.direct);
        tokens.clear();
        tokens.extend(self.entries.keys().copied());
        let moved_before: u64 = self.entries.values().map(|e| e.conn.moved).sum();
        for &token in &tokens {
            if self
                .entries
                .get(&token)
                .is_some_and(|e| e.conn.has_output())
            {
                self.flush(token);
            }
            self.read(token, true);
        }
        self.direct = tokens;
        let moved_after: u64 = self.entries.values().map(|e| e.conn.moved).sum();
        moved_after != moved_before
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, remote)) => {
                    let token = self.new_token();
                    if let Err(e) = self.registry.register(
                        &mut stream,
                        token,
                        Interest::READABLE | Interest::WRITABLE,
                    ) {
                        tracing::warn!("cannot watch connection from {remote}: {e}");
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let link = Link::acceptor(self.links.new_link(), Instant::now());
                    self.entries
                        .insert(token, Entry::new(Conn::new(stream, remote), link));
                    self.pending_accepts.push_back(token);
                    self.bound_pending_accepts();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    return;
                }
            }
        }
    }

    /// Closes the oldest accepted connections still in their handshake
    /// while more than [`MAX_PENDING_HANDSHAKES`] (or the universe's
    /// size, if larger) are.
    fn bound_pending_accepts(&mut self) {
        let most = MAX_PENDING_HANDSHAKES.max(self.universe.size() as usize);
        let entries = &self.entries;
        self.pending_accepts.retain(|token| {
            entries
                .get(token)
                .is_some_and(|e| e.link.state() == LinkState::AwaitingHello)
        });
        while self.pending_accepts.len() > most {
            let Some(oldest) = self.pending_accepts.pop_front() else {
                break;
            };
            if let Some(entry) = self.entries.get(&oldest) {
                tracing::warn!(
                    "closing the connection from {}: more than {most} connections wait for their handshake, and it waited longest",
                    entry.conn.remote
                );
            }
            self.close(oldest, None);
        }
    }

    fn flush(&mut self, token: Token) {
        let Some(entry) = self.entries.get_mut(&token) else {
            return;
        };
        let result = entry
            .conn
            .flush(&mut self.events.sent, &mut self.shared_buffers);
        match result {
            Ok(()) if entry.closing.is_some() && !entry.conn.has_output() => {
                self.close(token, None)
            }
            Ok(()) => {}
            // The refused peer may have hung up already (it drops its own
            // attempt when it wins a simultaneous connect): routine.
            Err(_) if entry.closing.is_some() => self.close(token, None),
            Err(e) => self.fail_conn(token, e),
        }
    }

    /// Reads what `token`'s connection holds; `fresh`: something says
    /// bytes may have arrived since its last read (see `Conn::drained`).
    /// A connection being closed is not read: its link has failed.
    fn read(&mut self, token: Token, fresh: bool) {
        if fresh {
            if let Some(entry) = self.entries.get_mut(&token) {
                entry.conn.may_have_data();
            }
        }
        loop {
            let Some(entry) = self.entries.get_mut(&token) else {
                return;
            };
            if entry.closing.is_some() {
                return;
            }
            let mut incoming = std::mem::take(&mut self.incoming);
            let result =
                entry
                    .conn
                    .read_ready(&mut entry.link, &mut incoming, &mut self.shared_buffers);
            for item in incoming.drain(..) {
                if self.entries.contains_key(&token) {
                    self.on_incoming(token, item);
                }
            }
            self.incoming = incoming;
            if !self.entries.contains_key(&token) {
                return;
            }
            match result {
                Ok(true) => continue,
                Ok(false) => return,
                Err(e) => {
                    self.fail_conn(token, e);
                    return;
                }
            }
        }
    }

    fn on_incoming(&mut self, token: Token, item: Incoming) {
        let entry = self.entries.get_mut(&token).expect("checked by caller");
        match item {
            Incoming::Abort(code) => {
                if let Some(peer) = entry.link.peer() {
                    self.events.links.push(LinkEvent::Abort { peer, code });
                }
            }
            Incoming::Frame(header) => {
                if let Some(peer) = entry.link.peer() {
                    self.events.frames.push_back((peer, header));
                }
            }
            Incoming::Filled(token, owned) => self.events.filled.push((token, owned)),
            Incoming::Control(header, payload) => self.on_control(token, &header, &payload),
        }
    }

    /// Drops a connection (and the peer's note of it).
    fn close(&mut self, token: Token, peer: Option<u32>) {
        if let Some(mut entry) = self.entries.remove(&token) {
            let _ = self.registry.deregister(&mut entry.conn.stream);
            let peer = peer.or(entry.link.peer());
            if let Some(p) = peer.and_then(|p| self.peers.get_mut(&p)) {
                if p.established == Some(token) {
                    p.established = None;
                }
                if p.connecting == Some(token) {
                    p.connecting = None;
                }
            }
            if let Some(peer) = peer.filter(|_| entry.link.retired()) {
                self.after_retire(peer);
            }
        }
    }
}

impl Transport for TcpTransport {
    fn caps(&self) -> Caps {
        Caps {
            eager_limit: None,
            remote_memory: 0,
            stripe: None,
            window_rma: None,
        }
    }

    /// Sends an engine frame to its peer, connecting first if needed; a
    /// link with [`LINK_QUEUE_FRAMES`] frames waiting (or a connection
    /// with as many waiting for its handshake) takes no more.
    fn send(&mut self, t: Transmit) -> std::result::Result<(), NoResource> {
        let peer = t.peer;
        let p = self.peers.entry(peer).or_default();
        match p.established {
            Some(token) => {
                let entry = self
                    .entries
                    .get_mut(&token)
                    .expect("established link has an entry");
                if entry.link.retiring() || entry.link.retired() {
                    // The next link carries it, after everything this one did.
                    if p.queue.len() >= LINK_QUEUE_FRAMES {
                        return Err(NoResource(t));
                    }
                    p.queue.push_back(t);
                    return Ok(());
                }
                if entry.conn.queued_frames() >= LINK_QUEUE_FRAMES {
                    return Err(NoResource(t));
                }
                entry.push(t);
                self.flush(token);
            }
            None => {
                if p.queue.len() >= LINK_QUEUE_FRAMES {
                    self.start_connect(peer);
                    return Err(NoResource(t));
                }
                p.queue.push_back(t);
                self.start_connect(peer);
            }
        }
        Ok(())
    }

    /// Says where the payload of the data-path frame `peer`'s link
    /// reported goes, and reads on.
    fn place(&mut self, peer: u32, sink: PayloadSink) {
        let Some(token) = self.peers.get(&peer).and_then(|p| p.established) else {
            return;
        };
        if let Some(entry) = self.entries.get_mut(&token) {
            entry.conn.place(sink);
            self.read(token, false);
        }
    }

    /// The engine refused a frame of `peer`'s link: the peer broke the
    /// protocol, and the link is closed.
    fn broke_protocol(&mut self, peer: u32, error: WireError) {
        if let Some(token) = self.peers.get(&peer).and_then(|p| p.established) {
            self.fail_conn(token, ConnError::Wire(error));
        }
    }

    fn events(&mut self) -> &mut Events {
        &mut self.events
    }

    /// Whether any frame is still queued (for finalize).
    fn has_output(&self) -> bool {
        self.entries.values().any(|e| e.conn.has_output())
            || self
                .peers
                .values()
                .any(|p| !p.queue.is_empty() && !p.finished)
    }

    /// Closes every established link: each queues its `Bye` (once) and
    /// from then on waits for the peer's.
    fn say_goodbye(&mut self) {
        let now = Instant::now();
        let tokens: Vec<Token> = self.peers.values().filter_map(|p| p.established).collect();
        for token in tokens {
            if let Some(entry) = self.entries.get_mut(&token) {
                entry.link.close(now);
            }
            self.drive(token);
        }
    }

    /// Whether every established link has both said and heard goodbye.
    fn all_goodbyes_heard(&self) -> bool {
        self.peers.values().all(|p| match p.established {
            Some(token) => self
                .entries
                .get(&token)
                .is_none_or(|e| e.goodbye_heard() && !e.conn.has_output()),
            None => true,
        })
    }

    /// Sends an abort frame on every established link, best effort.
    fn broadcast_abort(&mut self, code: i32) {
        let links: Vec<(u32, Token)> = self
            .peers
            .iter()
            .filter_map(|(peer, p)| p.established.map(|token| (*peer, token)))
            .collect();
        for (peer, token) in links {
            if let Some(entry) = self.entries.get_mut(&token) {
                let mut header = FrameHeader::new(FrameKind::Abort);
                header.tag = code;
                entry.push(Transmit {
                    peer,
                    header,
                    payload: TransmitPayload::None,
                    completes: None,
                    copy_if_blocked: false,
                });
            }
            self.flush(token);
        }
    }
}

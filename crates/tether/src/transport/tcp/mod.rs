//! The TCP transport: non-blocking sockets on epoll (mio), one link per
//! peer, opened on first use.
//!
//! Link life cycle. The first frame for a peer reads the peer's address
//! from the rendezvous and connects; frames wait in the peer's queue until
//! the handshake (`Hello` -> `HelloAck`) is done, then leave in order. When
//! two processes connect to each other at the same moment, the connection
//! opened by the lower universe rank wins: each side refuses the other's
//! `Hello` or drops its own attempt by the same rule, so both keep the same
//! one link. A peer that cannot be reached within the connect timeout, a
//! stream that ends without a goodbye, and a peer that breaks the protocol
//! are reported as [`LinkEvent::Lost`]; a connection that never completes
//! its handshake is dropped and logged without touching any peer.

mod conn;

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};
use rustc_hash::FxHashMap as HashMap;
use tether_proto::{FrameKind, Hello, PayloadSink, Transmit, WireError};
use tether_rendezvous::Rendezvous;

use crate::error::{err, Error, ErrorClass, Result};
use crate::settings::MAX_EAGER_LIMIT;
use crate::transport::api::{Caps, Transport};
use crate::transport::events::{Events, LinkEvent};
use crate::transport::reactor::{Ready, TCP_TOKENS};
use crate::transport::retry::Retry;
use crate::universe::{addr_key, PeerAddress, Universe};
use conn::{Conn, ConnError, Incoming};

const LISTENER: Token = TCP_TOKENS.token(0);
/// Most connections a busy poll reads directly instead of calling epoll
/// ([`TcpTransport::poll_direct`]): beyond two, a round of reads costs
/// more than one epoll_wait saves.
pub const DIRECT_POLL_MAX: usize = 2;
/// Why a `Hello` lost to a simultaneous connection; not an error.
const REJECT_DUPLICATE: &str = "duplicate connection";
/// How a refusal for a hello of another universe begins: no retry can
/// change that, so both sides give the peer up at once.
const REJECT_OTHER_UNIVERSE: &str = "another universe: ";

/// The listener, registered in the reactor, before the universe is known.
pub type Bound = (TcpListener, SocketAddr);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Outgoing, our `Hello` queued; waiting for `HelloAck`.
    AwaitAck,
    /// Incoming; waiting for the peer's `Hello`.
    AwaitHello,
    Established,
    /// Refused or superseded: flush what is queued (a reject), then close.
    Closing,
}

struct Entry {
    conn: Conn,
    stage: Stage,
    /// The peer: known from the start for outgoing, after `Hello` for incoming.
    peer: Option<u32>,
    since: Instant,
    bye_received: bool,
}

/// Per-peer state.
#[derive(Default)]
struct Link {
    established: Option<Token>,
    connecting: Option<Token>,
    /// Frames waiting for the handshake.
    queue: VecDeque<Transmit>,
    /// Connect attempts: until when, next try, last problem seen.
    attempt: Option<Attempt>,
    bye_sent: bool,
    finished: bool,
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
    pub listen_ip: String,
    pub connect_timeout: Duration,
    pub handshake_timeout: Duration,
}

pub struct TcpTransport {
    /// This transport's registration in the reactor (its own clone).
    registry: Registry,
    /// The connections of the last direct poll (kept to reuse its memory).
    direct: Vec<Token>,
    listener: TcpListener,
    entries: HashMap<Token, Entry>,
    next_token: usize,
    links: HashMap<u32, Link>,
    universe: Arc<Universe>,
    rendezvous: Arc<Rendezvous>,
    hello: Vec<u8>,
    config: TcpConfig,
    /// What happened since the router last drained it.
    pub events: Events,
    /// What the last read delivered (kept to reuse its memory).
    incoming: Vec<Incoming>,
    /// Connect tries after a first one failed (counters).
    pub connect_retries: u64,
}

impl TcpTransport {
    /// Listens on `config.listen_ip` (any port), the listener registered
    /// in `registry`.
    pub fn bind(config: TcpConfig, registry: &Registry) -> Result<Bound> {
        let ip: std::net::IpAddr = config.listen_ip.parse().map_err(|_| {
            err(
                ErrorClass::Init,
                format!(
                    "TETHER_TCP_INTERFACE={:?} is not an IP address",
                    config.listen_ip
                ),
            )
        })?;
        let mut listener = TcpListener::bind(SocketAddr::new(ip, 0))
            .map_err(|e| err(ErrorClass::Transport, format!("cannot listen on {ip}: {e}")))?;
        let local = listener
            .local_addr()
            .map_err(|e| err(ErrorClass::Transport, e.to_string()))?;
        registry
            .register(&mut listener, LISTENER, Interest::READABLE)
            .map_err(|e| err(ErrorClass::Transport, e.to_string()))?;
        Ok((listener, local))
    }

    /// The transport on the listener of [`TcpTransport::bind`], registering
    /// its connections through `registry`, a clone of the reactor's.
    pub fn new(
        bound: Bound,
        registry: Registry,
        config: TcpConfig,
        universe: Arc<Universe>,
        rendezvous: Arc<Rendezvous>,
    ) -> TcpTransport {
        let me = &universe.programs[universe.my_program];
        let hello = Hello {
            universe_id: universe.id,
            universe_rank: universe.my_universe_rank(),
            capabilities: 0,
            program: me.name.clone(),
            program_rank: universe.my_rank,
        }
        .encode();
        let (listener, _) = bound;
        TcpTransport {
            registry,
            direct: Vec::new(),
            listener,
            entries: HashMap::default(),
            next_token: 1,
            links: HashMap::default(),
            universe,
            rendezvous,
            hello,
            config,
            events: Events::default(),
            incoming: Vec::new(),
            connect_retries: 0,
        }
    }

    /// Whether connections exist or are being made (then epoll must be
    /// polled on every round of progress).
    pub fn is_busy(&self) -> bool {
        !self.entries.is_empty() || self.links.values().any(|l| l.attempt.is_some())
    }

    pub fn set_timeouts(&mut self, connect: Duration, handshake: Duration) {
        self.config.connect_timeout = connect;
        self.config.handshake_timeout = handshake;
    }

    fn me(&self) -> u32 {
        self.universe.my_universe_rank()
    }

    /// Starts connecting to `peer` unless a link exists or is being made.
    pub fn start_connect(&mut self, peer: u32) {
        let link = self.links.entry(peer).or_default();
        if link.established.is_some() || link.connecting.is_some() || link.finished {
            return;
        }
        if link.attempt.is_none() {
            let now = Instant::now();
            link.attempt = Some(Attempt {
                deadline: now + self.config.connect_timeout,
                retry: Retry::starting(now),
                problem: "its address never appeared in the rendezvous".into(),
                unreachable: false,
            });
        }
        self.try_connect(peer);
    }

    fn try_connect(&mut self, peer: u32) {
        let Some((program, rank)) = self.universe.locate(peer) else {
            return;
        };
        let name = self.universe.programs[program].name.clone();
        let looked_up = self.rendezvous.get(&addr_key(&name, rank));
        let link = self.links.get_mut(&peer).expect("link exists");
        let attempt = link.attempt.as_mut().expect("attempt exists");
        let now = Instant::now();
        let retried = attempt.retry.tries() > 0;
        attempt.retry.tried(now);
        self.connect_retries += u64::from(retried);
        let link = self.links.get_mut(&peer).expect("link exists");
        let attempt = link.attempt.as_mut().expect("attempt exists");
        let address = match looked_up {
            Ok(Some(text)) => {
                match PeerAddress::decode(&text).and_then(|a| a.tcp.parse::<SocketAddr>().ok()) {
                    Some(a) => a,
                    None => {
                        attempt.problem = format!("its rendezvous entry {text:?} is malformed");
                        return;
                    }
                }
            }
            Ok(None) => return,
            Err(e) => {
                attempt.problem = e.to_string();
                return;
            }
        };
        let stream = match TcpStream::connect(address) {
            Ok(s) => s,
            Err(e) => {
                attempt.problem = format!("connect to {address}: {e}");
                attempt.unreachable = refuses(&e);
                return;
            }
        };
        let token = TCP_TOKENS.token(self.next_token);
        self.next_token += 1;
        let mut conn = Conn::new(stream, address);
        if let Err(e) = self.registry.register(
            &mut conn.stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            attempt.problem = format!("register {address}: {e}");
            return;
        }
        let _ = conn.stream.set_nodelay(true);
        conn.enqueue_control(FrameKind::Hello, 0, self.hello.clone());
        attempt.problem = format!("connected to {address}, but the handshake was not answered (is the peer calling into tether?)");
        attempt.unreachable = false;
        link.connecting = Some(token);
        self.entries.insert(
            token,
            Entry {
                conn,
                stage: Stage::AwaitAck,
                peer: Some(peer),
                since: now,
                bye_received: false,
            },
        );
    }

    /// One ready descriptor of this transport from the reactor: the
    /// listener accepts, a connection writes what waits and reads what
    /// arrived (feeding the engine, advancing handshakes).
    pub fn on_ready(&mut self, ready: &Ready) {
        if ready.token == LISTENER {
            self.accept_all();
            return;
        }
        if ready.writable {
            self.flush(ready.token);
        }
        if ready.readable {
            self.read(ready.token, true);
        }
    }

    /// Whether [`TcpTransport::poll_direct`] can stand in for epoll on a
    /// busy-polling round: every connection is established, no connect
    /// is in progress, and there are at most [`DIRECT_POLL_MAX`] of them.
    pub fn can_poll_direct(&self) -> bool {
        self.entries.len() <= DIRECT_POLL_MAX
            && self.entries.values().all(|e| e.stage == Stage::Established)
            && self.links.values().all(|l| l.attempt.is_none())
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

    /// When the earliest timer is due (connect retries, handshake and
    /// connect deadlines), or `None` when none is armed: the caller waits
    /// no longer than that and then calls [`TcpTransport::handle_timers`].
    /// An established link arms none, so its progress reads no clock.
    pub fn timer(&self) -> Option<Instant> {
        let retry = self
            .links
            .values()
            .filter(|l| l.connecting.is_none() && l.established.is_none())
            .filter_map(|l| l.attempt.as_ref())
            .map(|a| a.retry.next_try().min(a.deadline))
            .min();
        let handshake = self
            .entries
            .values()
            .filter(|e| matches!(e.stage, Stage::AwaitHello | Stage::Closing))
            .map(|e| e.since + self.config.handshake_timeout)
            .min();
        let deadline = self
            .links
            .values()
            .filter_map(|l| l.attempt.as_ref())
            .map(|a| a.deadline)
            .min();
        [retry, handshake, deadline].into_iter().flatten().min()
    }

    /// Drops accepted connections that stay silent past the handshake
    /// timeout (a defence against idle or hostile clients), retries
    /// connects that are due, and fails peers whose connect deadline passed.
    /// An outgoing handshake is bounded by the connect timeout, not the
    /// handshake timeout: the peer answers only when it calls into Tether,
    /// and a peer busy computing is not a failure.
    pub fn handle_timers(&mut self) {
        let now = Instant::now();
        let stale: Vec<Token> = self
            .entries
            .iter()
            .filter(|(_, e)| matches!(e.stage, Stage::AwaitHello | Stage::Closing))
            .filter(|(_, e)| now >= e.since + self.config.handshake_timeout)
            .map(|(t, _)| *t)
            .collect();
        for token in stale {
            let remote = self.entries[&token].conn.remote;
            tracing::warn!(
                "dropping connection with {remote}: no handshake within {} s",
                self.config.handshake_timeout.as_secs()
            );
            self.close(token, None);
        }
        let due: Vec<u32> = self
            .links
            .iter()
            .filter(|(_, l)| l.established.is_none() && !l.finished)
            .filter(|(_, l)| {
                l.attempt.as_ref().is_some_and(|a| {
                    now >= a.deadline || (l.connecting.is_none() && a.retry.is_due(now))
                })
            })
            .map(|(p, _)| *p)
            .collect();
        for peer in due {
            let link = &self.links[&peer];
            let attempt = link.attempt.as_ref().expect("filtered");
            if now >= attempt.deadline {
                let (class, what) = if attempt.unreachable {
                    (ErrorClass::Transport, "could not be reached over tcp")
                } else {
                    (ErrorClass::Timeout, "did not accept a connection")
                };
                let message = format!(
                    "peer {} {what} within {} s (TETHER_CONNECT_TIMEOUT): {}",
                    self.universe.describe(peer),
                    self.config.connect_timeout.as_secs(),
                    attempt.problem
                );
                if let Some(token) = link.connecting {
                    self.close(token, Some(peer));
                }
                self.lose(peer, err(class, message));
            } else {
                self.try_connect(peer);
            }
        }
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, remote)) => {
                    let token = TCP_TOKENS.token(self.next_token);
                    self.next_token += 1;
                    if let Err(e) = self.registry.register(
                        &mut stream,
                        token,
                        Interest::READABLE | Interest::WRITABLE,
                    ) {
                        tracing::warn!("cannot watch connection from {remote}: {e}");
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    self.entries.insert(
                        token,
                        Entry {
                            conn: Conn::new(stream, remote),
                            stage: Stage::AwaitHello,
                            peer: None,
                            since: Instant::now(),
                            bye_received: false,
                        },
                    );
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

    fn flush(&mut self, token: Token) {
        let Some(entry) = self.entries.get_mut(&token) else {
            return;
        };
        let result = entry.conn.flush(&mut self.events.sent);
        match result {
            Ok(()) if entry.stage == Stage::Closing && !entry.conn.has_output() => {
                self.close(token, None)
            }
            Ok(()) => {}
            Err(e) => self.fail_conn(token, e),
        }
    }

    /// Reads what `token`'s connection holds; `fresh`: something says
    /// bytes may have arrived since its last read (see `Conn::drained`).
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
            let mut incoming = std::mem::take(&mut self.incoming);
            let open = entry.stage == Stage::Established && entry.peer.is_some();
            let result = entry.conn.read_ready(open, MAX_EAGER_LIMIT, &mut incoming);
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
                    if self.entries.contains_key(&token) {
                        self.fail_conn(token, e);
                    }
                    return;
                }
            }
        }
    }

    fn on_incoming(&mut self, token: Token, item: Incoming) {
        let entry = self.entries.get_mut(&token).expect("checked by caller");
        match item {
            Incoming::Bye => {
                entry.bye_received = true;
                if let Some(peer) = entry.peer {
                    self.links.entry(peer).or_default().finished = true;
                }
            }
            Incoming::Abort(code) => {
                if let Some(peer) = entry.peer {
                    self.events.links.push(LinkEvent::Abort { peer, code });
                }
            }
            Incoming::Frame(header) => {
                if let Some(peer) = entry.peer {
                    self.events.frames.push_back((peer, header));
                }
            }
            Incoming::Filled(token, owned) => self.events.filled.push((token, owned)),
            Incoming::Control(header, payload) => match (header.kind, entry.stage) {
                (FrameKind::Hello, Stage::AwaitHello) => self.on_hello(token, &payload),
                (FrameKind::HelloAck, Stage::AwaitAck) => self.on_ack(token, &payload),
                (FrameKind::HelloReject, Stage::AwaitAck) => {
                    let reason = String::from_utf8_lossy(&payload).into_owned();
                    self.on_reject(token, reason);
                }
                (kind, stage) => {
                    let remote = entry.conn.remote;
                    tracing::error!("protocol error from {remote}: unexpected {kind:?} frame in stage {stage:?}; closing");
                    self.fail_conn(
                        token,
                        ConnError::Wire(tether_proto::WireError::UnexpectedFrame {
                            got: kind,
                            state: "at this point of the handshake",
                        }),
                    );
                }
            },
        }
    }

    /// Checks a peer's handshake against the universe.
    fn check_hello(&self, payload: &[u8]) -> std::result::Result<u32, String> {
        let hello = Hello::decode(payload).map_err(|e| e.to_string())?;
        if hello.universe_id != self.universe.id {
            return Err(format!(
                "{REJECT_OTHER_UNIVERSE}process {}:{} belongs to another universe (id {:#x}, expected {:#x})",
                hello.program, hello.program_rank, hello.universe_id, self.universe.id
            ));
        }
        match self.universe.locate(hello.universe_rank) {
            Some((p, r))
                if self.universe.programs[p].name == hello.program
                    && r == hello.program_rank
                    && hello.universe_rank != self.me() =>
            {
                Ok(hello.universe_rank)
            }
            _ => Err(format!(
                "handshake names {}:{} as universe rank {}, which does not match this universe",
                hello.program, hello.program_rank, hello.universe_rank
            )),
        }
    }

    fn on_hello(&mut self, token: Token, payload: &[u8]) {
        let remote = self.entries[&token].conn.remote;
        let peer = match self.check_hello(payload) {
            Ok(peer) => peer,
            Err(reason) => {
                tracing::warn!("refusing connection from {remote}: {reason}");
                self.reject(token, &reason);
                if reason.starts_with(REJECT_OTHER_UNIVERSE) {
                    if let Some(peer) = Hello::decode(payload)
                        .ok()
                        .and_then(|h| self.universe_rank_of(&h))
                    {
                        self.lose_to_other_universe(peer);
                    }
                }
                return;
            }
        };
        let me = self.me();
        let link = self.links.entry(peer).or_default();
        if link.established.is_some() || (link.connecting.is_some() && me < peer) {
            self.reject(token, REJECT_DUPLICATE);
            return;
        }
        if let Some(mine) = link.connecting.take() {
            self.entries.remove(&mine);
        }
        let entry = self.entries.get_mut(&token).expect("entry exists");
        entry.peer = Some(peer);
        entry
            .conn
            .enqueue_control(FrameKind::HelloAck, 0, self.hello.clone());
        self.establish(token, peer);
    }

    fn on_ack(&mut self, token: Token, payload: &[u8]) {
        let expected = self.entries[&token]
            .peer
            .expect("outgoing entries know their peer");
        match self.check_hello(payload) {
            Ok(peer) if peer == expected => {
                self.links.entry(peer).or_default().connecting = None;
                self.establish(token, peer);
            }
            Ok(other) => self.retry_later(
                token,
                format!(
                    "the process at its address is {}, not {}",
                    self.universe.describe(other),
                    self.universe.describe(expected)
                ),
            ),
            Err(reason) => {
                let other_universe = reason.starts_with(REJECT_OTHER_UNIVERSE);
                self.retry_later(token, reason);
                if other_universe {
                    self.lose_to_other_universe(expected);
                }
            }
        }
    }

    fn on_reject(&mut self, token: Token, reason: String) {
        if reason != REJECT_DUPLICATE {
            let remote = self.entries[&token].conn.remote;
            tracing::warn!("connection to {remote} refused: {reason}");
        }
        let peer = self.entries.get(&token).and_then(|e| e.peer);
        let other_universe = reason.starts_with(REJECT_OTHER_UNIVERSE);
        self.retry_later(token, reason);
        if let (true, Some(peer)) = (other_universe, peer) {
            self.lose_to_other_universe(peer);
        }
    }

    /// The rank in this universe of the process a hello names, if this
    /// universe has one of that name.
    fn universe_rank_of(&self, hello: &Hello) -> Option<u32> {
        let program = self.universe.find(&hello.program)?;
        let p = &self.universe.programs[program];
        (hello.program_rank < p.size).then(|| p.first + hello.program_rank)
    }

    /// Gives `peer` up: it joined from other rendezvous entries than this
    /// process (an earlier run's left behind, or another run's), which no
    /// retry changes; its operations fail now, naming the rendezvous.
    fn lose_to_other_universe(&mut self, peer: u32) {
        if self.links.get(&peer).is_some_and(|l| l.finished) {
            return;
        }
        let mine: Vec<String> = self
            .universe
            .programs
            .iter()
            .map(|p| format!("{} of {}", p.name, p.size))
            .collect();
        let message = format!(
            "{} joined another universe than this process ({}): rendezvous {} holds entries of an earlier run, or another run shares it; \
             start again with a fresh rendezvous (an empty directory, or a new server)",
            self.universe.describe(peer),
            mine.join(", "),
            self.rendezvous.describe()
        );
        if let Some(token) = self.links.get(&peer).and_then(|l| l.connecting) {
            self.close(token, Some(peer));
        }
        self.lose(peer, err(ErrorClass::Init, message));
    }

    /// Drops an outgoing attempt; the link retries (or the winning
    /// connection from the peer arrives) until the connect deadline.
    fn retry_later(&mut self, token: Token, problem: String) {
        let Some(entry) = self.entries.remove(&token) else {
            return;
        };
        if let Some(peer) = entry.peer {
            let link = self.links.entry(peer).or_default();
            if link.connecting == Some(token) {
                link.connecting = None;
            }
            if let Some(attempt) = link.attempt.as_mut() {
                attempt.problem = problem;
            }
        }
    }

    fn reject(&mut self, token: Token, reason: &str) {
        let entry = self.entries.get_mut(&token).expect("entry exists");
        entry
            .conn
            .enqueue_control(FrameKind::HelloReject, 0, reason.as_bytes().to_vec());
        entry.stage = Stage::Closing;
        let mut done = Vec::new();
        if entry.conn.flush(&mut done).is_err() || !entry.conn.has_output() {
            self.entries.remove(&token);
        }
    }

    fn establish(&mut self, token: Token, peer: u32) {
        let link = self.links.entry(peer).or_default();
        link.established = Some(token);
        link.attempt = None;
        let queued: Vec<Transmit> = link.queue.drain(..).collect();
        let entry = self.entries.get_mut(&token).expect("entry exists");
        entry.stage = Stage::Established;
        tracing::debug!(
            "linked with {} at {}",
            self.universe.describe(peer),
            entry.conn.remote
        );
        for t in queued {
            entry.conn.enqueue(t);
        }
        self.flush(token);
    }

    fn fail_conn(&mut self, token: Token, error: ConnError) {
        let Some(entry) = self.entries.get(&token) else {
            return;
        };
        let remote = entry.conn.remote;
        let entry_peer = entry.peer;
        let established_peer = entry
            .peer
            .filter(|p| self.links.get(p).and_then(|l| l.established) == Some(token));
        let Some(peer) = established_peer else {
            let unreachable = matches!(&error, ConnError::Io(e) if refuses(e));
            match &error {
                ConnError::Wire(w) => {
                    tracing::error!("protocol error from {remote}: {w}; connection closed")
                }
                // Retried until the connect deadline, then reported.
                ConnError::Io(e) if unreachable => {
                    tracing::debug!("connect to {remote}: {e}")
                }
                ConnError::Io(e) => {
                    tracing::warn!("connection with {remote} failed during the handshake: {e}")
                }
                // A peer drops its own attempt when it loses a simultaneous
                // connect: an empty connection closing is routine.
                ConnError::Eof { mid_frame: false } => {
                    tracing::debug!("connection from {remote} closed before sending a handshake")
                }
                ConnError::Eof { mid_frame: true } => {
                    tracing::warn!("connection from {remote} closed in the middle of its handshake")
                }
            }
            if let Some(peer_of_attempt) = entry_peer {
                let problem = match &error {
                    ConnError::Io(e) if unreachable => format!("connect to {remote}: {e}"),
                    _ => format!("connection to {remote} ended during the handshake"),
                };
                self.retry_later(token, problem);
                if let Some(attempt) = self
                    .links
                    .get_mut(&peer_of_attempt)
                    .and_then(|l| l.attempt.as_mut())
                {
                    attempt.unreachable = unreachable;
                }
            } else {
                self.close(token, None);
            }
            return;
        };
        let who = self.universe.describe(peer);
        let bye = entry.bye_received;
        let error = match error {
            ConnError::Wire(w) => {
                tracing::error!("protocol error from {who} at {remote}: {w}; connection closed");
                err(
                    ErrorClass::Protocol,
                    format!("{who} at {remote} broke the protocol: {w}"),
                )
            }
            ConnError::Eof { mid_frame: false } if bye => {
                err(ErrorClass::PeerLost, format!("{who} has finalized"))
            }
            ConnError::Eof { mid_frame } => {
                let how = if mid_frame {
                    " in the middle of a frame"
                } else {
                    ""
                };
                tracing::warn!("connection to {who} at {remote} closed{how} without goodbye");
                err(
                    ErrorClass::PeerLost,
                    format!("connection to {who} at {remote} closed{how} without goodbye: the process exited or crashed"),
                )
            }
            ConnError::Io(e) => {
                tracing::warn!("connection to {who} at {remote} failed: {e}");
                err(
                    ErrorClass::PeerLost,
                    format!("connection to {who} at {remote} failed: {e}"),
                )
            }
        };
        self.close(token, Some(peer));
        self.lose(peer, error);
    }

    fn close(&mut self, token: Token, peer: Option<u32>) {
        if let Some(mut entry) = self.entries.remove(&token) {
            let _ = self.registry.deregister(&mut entry.conn.stream);
            let peer = peer.or(entry.peer);
            if let Some(link) = peer.and_then(|p| self.links.get_mut(&p)) {
                if link.established == Some(token) {
                    link.established = None;
                }
                if link.connecting == Some(token) {
                    link.connecting = None;
                }
            }
        }
    }

    fn lose(&mut self, peer: u32, error: Error) {
        let link = self.links.entry(peer).or_default();
        link.finished = true;
        link.attempt = None;
        link.queue.clear();
        self.events.lost(peer, error);
    }
}

impl Transport for TcpTransport {
    fn caps(&self) -> Caps {
        Caps {
            eager_limit: None,
            remote_memory: false,
        }
    }

    /// Sends an engine frame to its peer, connecting first if needed.
    fn send(&mut self, t: Transmit) {
        let peer = t.peer;
        let link = self.links.entry(peer).or_default();
        match link.established {
            Some(token) => {
                let entry = self
                    .entries
                    .get_mut(&token)
                    .expect("established link has an entry");
                entry.conn.enqueue(t);
                self.flush(token);
            }
            None => {
                link.queue.push_back(t);
                self.start_connect(peer);
            }
        }
    }

    /// Says where the payload of the data-path frame `peer`'s link
    /// reported goes, and reads on.
    fn place(&mut self, peer: u32, sink: PayloadSink) {
        let Some(token) = self.links.get(&peer).and_then(|l| l.established) else {
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
        if let Some(token) = self.links.get(&peer).and_then(|l| l.established) {
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
                .links
                .values()
                .any(|l| !l.queue.is_empty() && !l.finished)
    }

    /// Sends a goodbye on every established link (once).
    fn say_goodbye(&mut self) {
        let tokens: Vec<(u32, Token)> = self
            .links
            .iter_mut()
            .filter(|(_, l)| !l.bye_sent)
            .filter_map(|(p, l)| l.established.map(|t| (*p, t)))
            .collect();
        for (peer, token) in tokens {
            self.links.get_mut(&peer).expect("exists").bye_sent = true;
            if let Some(entry) = self.entries.get_mut(&token) {
                entry.conn.enqueue_control(FrameKind::Bye, 0, Vec::new());
            }
            self.flush(token);
        }
    }

    /// Whether every established link has both said and heard goodbye.
    fn all_goodbyes_heard(&self) -> bool {
        self.links.values().all(|l| match l.established {
            Some(token) => self
                .entries
                .get(&token)
                .is_none_or(|e| e.bye_received && !e.conn.has_output()),
            None => true,
        })
    }

    /// Sends an abort frame on every established link, best effort.
    fn broadcast_abort(&mut self, code: i32) {
        let tokens: Vec<Token> = self.links.values().filter_map(|l| l.established).collect();
        for token in tokens {
            if let Some(entry) = self.entries.get_mut(&token) {
                entry
                    .conn
                    .enqueue_control(FrameKind::Abort, code, Vec::new());
            }
            self.flush(token);
        }
    }
}

/// Whether a connect error says that the address cannot be reached (no
/// listener, no route), as opposed to a local or passing problem.
fn refuses(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable
    )
}

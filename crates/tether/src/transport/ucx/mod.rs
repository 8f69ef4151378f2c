//! The UCX transport: Tether's frames as UCP active messages, for the
//! networks Tether's own transports cannot drive (InfiniBand, RoCE, Tofu);
//! UCX picks the network (`UCX_TLS`, `UCX_NET_DEVICES`).
//!
//! UCX is loaded at run time (`crates/tether-ucx`: `dlopen`, nothing
//! links against it), only when `TETHER_TRANSPORTS` lists `ucx` at start:
//! [`Prepared::create`] makes the worker, whose address the rendezvous
//! entry publishes (`ucx=`, hex), before any peer can look it up.
//!
//! Links. Each pair of processes has one link, a [`tether_proto::Link`]
//! (handshake, authentication, sequence numbers, goodbye) over two UCX
//! endpoints, one each way. Its connector is always the lower universe
//! rank, so two processes that reach for each other at once make one
//! link, not two to choose between: the lower rank dials as soon as it
//! has a frame for the higher one (its `Hello` carries its worker
//! address, so the higher rank answers without a rendezvous lookup); the
//! higher rank with a frame for the lower one sends a `DIAL` active
//! message, which makes the lower rank dial (`am.rs`). Frames wait in
//! the peer's queue until the handshake is done, up to
//! `TETHER_CONNECT_TIMEOUT`.
//!
//! Frames. Each frame is one active message to handler `FRAMES`: the
//! stamped 56-byte header (and the sender's rank) as the AM header, the
//! payload as its data, sent from where it lies (user memory for
//! rendezvous data). UCX documents no order between active messages, so
//! arrivals are put back in the order of their link sequence numbers
//! before the link checks them. A data-path frame is reported to the
//! router and the peer's later frames wait until its payload is placed
//! (`receive.rs`): rendezvous payloads (UCX's own rendezvous, chosen by
//! UCX above its threshold) are fetched by UCX straight into the posted
//! buffer (`ucp_am_recv_data_nbx`); eager ones are copied from UCX's
//! buffer.
//!
//! Progress. Every call of the router progresses the worker
//! (`ucp_worker_progress`); before the router sleeps, the worker is armed
//! (`ucp_worker_arm`) and its event fd waits in the router's reactor with
//! the other transports' descriptors.
//!
//! Failure. Endpoints are created in UCX's peer error-handling mode: a
//! peer UCX finds dead fails its link ([`LinkEvent::Lost`], with UCX's
//! reason). Where UCX cannot tell (shared memory without
//! `UCX_POSIX_ERROR_HANDLING=y`), Tether's own liveness (heartbeats,
//! process descriptors) still does, through [`UcxTransport::abandon`].
//!
//! Threads. The worker is created `UCS_THREAD_MODE_SERIALIZED` and this
//! transport owns every UCX object of it (worker, endpoints, held data),
//! so moving the transport moves them all; the runtime calls it under
//! its lock, one thread at a time.

mod am;
mod receive;
mod rma;
mod send;
mod short_path;

pub use rma::{RmaChoice, RmaPeers};
pub use short_path::SHORT_PATH_MAX;

use std::collections::{BTreeMap, VecDeque};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Interest, Registry};
use rustc_hash::FxHashMap as HashMap;
use tether_auth::Key;
use tether_proto::link::{Link, LinkState};
use tether_proto::{
    FrameHeader, FrameKind, PayloadSink, ReqId, RmaOp, SinkToken, Transmit, TransmitPayload,
    WireError,
};
use tether_ucx::{AmData, Context, ContextOptions, Endpoint, RemoteKey, ThreadMode, Worker};

use crate::addresses::{Addresses, NoAddress};
use crate::error::{err, Error, ErrorClass};
use crate::transport::api::{Caps, NoResource, RmaOutcome, Transport, LINK_QUEUE_FRAMES};
use crate::transport::events::Events;
use crate::transport::link_settings::LinkSettings;
use crate::transport::reactor::UCX_TOKENS;
use crate::transport::resources::{LinkMemory, LinkUse};
use crate::transport::retry::Retry;
use crate::universe::Universe;

use am::FrameAm;

/// The worker's event fd in the reactor.
const WORKER: usize = 0;

/// How soon a peer whose rendezvous entry the address book has not read
/// yet is looked up again, to watch its process.
const WATCH_AGAIN: Duration = Duration::from_millis(20);

/// Most rounds of progress taken to drain what a peer sent before its
/// process ended, before its end is taken in.
const DRAIN_ROUNDS: usize = 64;

/// A UCX worker made before the universe is known, so that its address
/// can be published.
pub struct Prepared {
    worker: Worker,
    address: Vec<u8>,
    context: Context,
    /// Whether windows use UCX RMA (`TETHER_UCX_RMA`), and why.
    pub rma: RmaChoice,
}

// SAFETY: the worker is SERIALIZED (any thread, one at a time), and
// `Prepared` holds the only handles of its UCX objects, so they move
// together; it is used by one thread at a time (start-up, then the
// runtime's lock).
unsafe impl Send for Prepared {}

impl Prepared {
    /// Loads UCX, creates a context and a worker with the transport's
    /// handlers, and reads the worker's address; `rma` is
    /// `TETHER_UCX_RMA` (the context asks for UCX's RMA and atomics
    /// unless it is `off`). The error says why UCX is not usable here,
    /// in one line.
    pub fn create(rma: &str) -> std::result::Result<Prepared, String> {
        let ucp = tether_ucx::Ucp::load().map_err(|e| e.reason)?;
        let options = ContextOptions {
            name: Some("tether".into()),
            rma: rma != "off",
            ..ContextOptions::default()
        };
        let context = Context::new(ucp, &options).map_err(|e| e.to_string())?;
        // Only `auto` looks at what UCX drives here.
        let transports = match rma {
            "auto" => context.transports().unwrap_or_else(|e| {
                tracing::warn!(
                    "cannot list UCX's transports ({e}); taking them for no RDMA network"
                );
                Vec::new()
            }),
            _ => Vec::new(),
        };
        let rma = rma::choose(rma, &transports);
        let worker = Worker::with_mode(&context, &[am::FRAMES, am::DIAL], ThreadMode::Serialized)
            .map_err(|e| e.to_string())?;
        let most = worker.max_am_header().map_err(|e| e.to_string())?;
        if most < am::FRAME_AM_HEADER {
            return Err(format!(
                "UCX allows active-message headers of {most} bytes here, {} needed",
                am::FRAME_AM_HEADER
            ));
        }
        let address = worker.address().map_err(|e| e.to_string())?;
        if address.len() > usize::from(u16::MAX) {
            // A Hello's AM header gives the address length in 16 bits.
            return Err(format!(
                "UCX's worker address is {} bytes here, more than a Hello can carry ({})",
                address.len(),
                u16::MAX
            ));
        }
        Ok(Prepared {
            worker,
            address,
            context,
            rma,
        })
    }

    /// The worker's address as the rendezvous entry publishes it.
    pub fn published(&self) -> String {
        encode_address(&self.address)
    }
}

/// A worker address as text (lower-case hex).
pub fn encode_address(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of a worker address published by [`encode_address`].
pub fn decode_address(text: &str) -> Option<Vec<u8>> {
    if text.is_empty() || !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

/// How long links wait, and the run's key.
#[derive(Debug, Clone)]
pub struct UcxConfig {
    pub key: Option<Arc<Key>>,
    /// This host's identity: endpoints to peers of the same host are
    /// made without UCX's peer error handling (see [`error_mode`]).
    pub host: String,
    pub connect_timeout: Duration,
    pub handshake_timeout: Duration,
    pub goodbye_timeout: Duration,
}

/// An arrived frame not yet taken by its link.
struct Arrival {
    am: FrameAm,
    data: AmData,
}

/// What this transport knows of one peer.
#[derive(Default)]
struct Peer {
    /// Its windows' keys, unpacked on `ep` (declared first: dropped
    /// before it), by window.
    keys: HashMap<u32, RemoteKey>,
    /// Our endpoint to the peer's worker.
    ep: Option<Endpoint>,
    /// The pair's link (we are its connector when our rank is the lower).
    link: Option<Link>,
    /// The handshake is done: frames are stamped and sent at once.
    established: bool,
    /// The peer's worker address: from its rendezvous entry, its `Hello`
    /// or its `DIAL`.
    address: Option<Vec<u8>>,
    /// It runs on this host (its rendezvous entry says so).
    same_host: Option<bool>,
    /// Whether the pair's endpoints use UCX's peer error handling: chosen
    /// by whoever makes the pair's first endpoint, told to the other in
    /// the `Hello` or the `DIAL` (UCX refuses a pair that differs).
    peer_errors: Option<bool>,
    /// Frames waiting for the handshake.
    queue: VecDeque<Transmit>,
    /// Sends UCX has not reported done.
    in_flight: usize,
    /// Arrivals not yet taken, by link sequence number.
    arrived: BTreeMap<u64, Arrival>,
    /// The sequence number the link takes next.
    next_seq: u64,
    /// The data of the data-path frame reported to the router, until the
    /// router says where it goes.
    reported: Option<AmData>,
    /// UCX is fetching a payload into its place: the next frames wait.
    receiving: bool,
    /// Setting up the link: until when, when to look for the address
    /// again, and what stands in the way.
    attempt: Option<Attempt>,
    /// We asked the lower rank to dial (`DIAL` sent).
    dialled: bool,
    /// Lost, given up or finalized: no link is made to it again.
    finished: bool,
    /// Its process, when it runs on this host: readable once it exits.
    process: Option<OwnedFd>,
    /// When to look for its rendezvous entry again, to watch its process
    /// (the address book had not read it yet).
    watch_again: Option<Instant>,
    /// Its process has ended: once what it sent is taken in, it is lost
    /// unless it said goodbye.
    exited: bool,
    /// Window operations waiting for the link (`rma.rs`).
    rma_waiting: Vec<RmaOp>,
}

struct Attempt {
    deadline: Instant,
    retry: Retry,
    problem: String,
}

impl Peer {
    fn link_state(&self) -> Option<LinkState> {
        self.link.as_ref().map(Link::state)
    }

    /// Whether its link may take its next arrival now: it has a link, and
    /// no reported frame waits for its place nor payload for UCX.
    fn may_take(&self) -> bool {
        self.link.is_some() && self.reported.is_none() && !self.receiving
    }
}

/// A send UCX has not completed: what it must keep alive and report.
struct InFlight {
    peer: u32,
    completes: Option<ReqId>,
    /// The AM header and an owned payload: UCX reads them until it
    /// reports the send done.
    _header: Box<[u8; am::FRAME_AM_HEADER]>,
    payload: Option<Vec<u8>>,
}

/// Where a payload UCX is fetching goes, once it is there.
enum Landing {
    /// Straight in the posted buffer.
    InPlace,
    /// In the engine's own buffer, handed back with the token.
    Owned,
    /// In a buffer of its own, of which this prefix is wanted (a
    /// truncated receive).
    Prefix(tether_proto::Region),
}

struct Receiving {
    peer: u32,
    token: SinkToken,
    landing: Landing,
}

pub struct UcxTransport {
    /// Dropped before the worker: endpoints close through it.
    peers: HashMap<u32, Peer>,
    sends: HashMap<u64, InFlight>,
    receives: HashMap<u64, Receiving>,
    /// Which peer each endpoint reaches (`EndpointFailed` names the endpoint).
    endpoint_peers: HashMap<u64, u32>,
    address: Vec<u8>,
    worker: Worker,
    /// Registers peers' process descriptors (a clone of the reactor's).
    registry: Registry,
    universe: Arc<Universe>,
    addresses: Addresses,
    /// What each new link says in its `Hello` and how long it waits.
    links: LinkSettings,
    /// Windows whose operations go as UCX RMA (`TETHER_UCX_RMA`).
    windows: Option<rma::Windows>,
    config: UcxConfig,
    /// The earliest deadline of a link or an attempt, if any.
    timer: Option<Instant>,
    /// What happened since the router last drained it.
    pub events: Events,
    /// A short-path receive is polling this peer: its arrivals wait for
    /// the receive to look at (`short_path.rs`), the next in order in
    /// `held`, the others in its map.
    holding: Option<u32>,
    held: Option<Arrival>,
}

// SAFETY: as for `Prepared`: the transport owns every handle of its UCX
// objects (worker, endpoints, held data), SERIALIZED, used under the
// runtime's lock.
unsafe impl Send for UcxTransport {}

impl UcxTransport {
    /// The transport on `prepared`'s worker, its event fd registered in
    /// `registry`.
    pub fn new(
        prepared: Prepared,
        universe: Arc<Universe>,
        addresses: Addresses,
        config: UcxConfig,
        registry: Registry,
    ) -> crate::error::Result<UcxTransport> {
        let Prepared {
            worker,
            address,
            context,
            rma,
        } = prepared;
        let fd: RawFd = worker
            .event_fd()
            .map_err(|e| err(ErrorClass::Transport, e.to_string()))?;
        registry
            .register(
                &mut mio::unix::SourceFd(&fd),
                UCX_TOKENS.token(WORKER),
                Interest::READABLE,
            )
            .map_err(|e| err(ErrorClass::Transport, format!("epoll: {e}")))?;
        let links = LinkSettings::new(
            &universe,
            config.key.clone(),
            config.handshake_timeout,
            config.goodbye_timeout,
        );
        Ok(UcxTransport {
            peers: HashMap::default(),
            sends: HashMap::default(),
            receives: HashMap::default(),
            endpoint_peers: HashMap::default(),
            address,
            worker,
            registry,
            universe,
            addresses,
            links,
            windows: rma::Windows::new(&rma, context),
            config,
            timer: None,
            events: Events::default(),
            holding: None,
            held: None,
        })
    }

    fn me(&self) -> u32 {
        self.universe.my_universe_rank()
    }

    /// New timeouts, for the links made from now on.
    pub fn set_timeouts(&mut self, connect: Duration, handshake: Duration, goodbye: Duration) {
        self.config.connect_timeout = connect;
        self.config.handshake_timeout = handshake;
        self.config.goodbye_timeout = goodbye;
        self.links.set_timeouts(handshake, goodbye);
    }

    /// One round of progress: UCX runs, and what its callbacks recorded
    /// is taken in; links' deadlines are checked when one is due.
    /// Returns whether anything happened.
    pub fn poll(&mut self) -> bool {
        self.flush_issued();
        let mut moved = self.worker.progress() > 0;
        while let Some(event) = self.worker.next_event() {
            moved = true;
            self.on_event(event);
        }
        if self.timer.is_some_and(|at| Instant::now() >= at) {
            self.handle_timers();
        }
        moved
    }

    /// Whether the router may sleep: nothing is left to progress and the
    /// worker's event fd is armed to wake it. Takes in what progress found.
    pub fn prepare_sleep(&mut self) -> bool {
        if self.poll() {
            return false;
        }
        match self.worker.arm() {
            Ok(tether_ucx::Arm::Armed) => true,
            Ok(tether_ucx::Arm::Busy) => false,
            Err(e) => {
                tracing::warn!("cannot arm the UCX worker for sleep: {e}");
                false
            }
        }
    }

    /// The earliest deadline of a handshake, a goodbye or a connect attempt.
    pub fn timer(&self) -> Option<Instant> {
        self.timer
    }

    /// Whether a link to `peer` is up.
    pub fn is_linked(&self, peer: u32) -> bool {
        self.peers.get(&peer).is_some_and(|p| p.established)
    }

    /// The established links (UCX holds their buffers: what this
    /// transport holds is the sends it keeps payload copies of).
    /// Established links (none is ever retired).
    pub fn link_count(&self) -> usize {
        self.peers.values().filter(|p| p.established).count()
    }

    pub fn links(&self, out: &mut Vec<LinkUse>) {
        for (&peer, p) in &self.peers {
            if p.established {
                let user_bytes = self
                    .sends
                    .values()
                    .filter(|s| s.peer == peer)
                    .map(|s| s.payload.as_ref().map_or(0, |v| v.len() as u64))
                    .sum();
                out.push(LinkUse {
                    peer,
                    transport: "ucx",
                    memory: LinkMemory {
                        user_bytes,
                        ..LinkMemory::default()
                    },
                    dedicated: true,
                });
            }
        }
    }

    /// Starts setting up the link to `peer` unless it exists, is being
    /// set up, or the peer is finished.
    pub fn start_connect(&mut self, peer: u32) {
        let now = Instant::now();
        let deadline = now + self.config.connect_timeout;
        let p = self.peers.entry(peer).or_default();
        if p.link.is_some() || p.dialled || p.finished {
            return;
        }
        if p.attempt.is_none() {
            p.attempt = Some(Attempt {
                deadline,
                retry: Retry::starting(now),
                problem: "its UCX address never appeared in the rendezvous".into(),
            });
        }
        self.try_connect(peer, now);
        self.rearm();
    }

    /// Dials `peer` (lower rank than it) or asks it to dial, once its
    /// worker address is known.
    fn try_connect(&mut self, peer: u32, now: Instant) {
        if self.peers[&peer].address.is_none() {
            let found = match self.addresses.get(peer) {
                Ok(address) => match address.ucx.as_deref().map(decode_address) {
                    Some(Some(bytes)) => Ok((bytes, address.host == self.config.host)),
                    Some(None) => Err((true, "its rendezvous entry gives a malformed UCX address".to_string())),
                    None => Err((true, "it publishes no UCX address (ucx is not in its TETHER_TRANSPORTS, or UCX did not load there)".to_string())),
                },
                Err(NoAddress::NotYet(why)) => Err((false, why)),
                Err(NoAddress::Malformed(why)) => Err((true, why)),
            };
            if let Ok((_, true)) = &found {
                self.watch_process(peer);
            }
            let p = self.peers.get_mut(&peer).expect("peer exists");
            match found {
                Ok((bytes, same_host)) => {
                    p.address = Some(bytes);
                    p.same_host = Some(same_host);
                }
                Err((fatal, why)) => {
                    if let Some(attempt) = p.attempt.as_mut() {
                        attempt.retry.tried(now);
                        attempt.problem = why.clone();
                    }
                    if fatal {
                        let who = self.universe.describe(peer);
                        self.lose(
                            peer,
                            err(
                                ErrorClass::Transport,
                                format!("UCX cannot reach {who}: {why}"),
                            ),
                        );
                    }
                    return;
                }
            }
        }
        if self.me() < peer {
            self.dial(peer, now);
        } else {
            self.ask_to_dial(peer);
        }
    }

    /// Opens the link to `peer` as its connector: the `Hello` goes.
    fn dial(&mut self, peer: u32, now: Instant) {
        let config = self.links.new_link();
        let p = self.peers.get_mut(&peer).expect("peer exists");
        let deadline = p
            .attempt
            .as_ref()
            .map_or(now + self.config.connect_timeout, |a| a.deadline);
        p.link = Some(Link::connector_until(config, peer, now, deadline));
        self.drive(peer);
    }

    /// Checks the deadlines of links and attempts, and looks again for
    /// addresses that were not published yet.
    fn handle_timers(&mut self) {
        let now = Instant::now();
        let peers: Vec<u32> = self.peers.keys().copied().collect();
        for peer in peers {
            let Some(p) = self.peers.get_mut(&peer) else {
                continue;
            };
            if p.finished {
                continue;
            }
            if p.watch_again.is_some_and(|at| now >= at) {
                self.watch_process(peer);
            }
            let Some(p) = self.peers.get_mut(&peer) else {
                continue;
            };
            if let Some(link) = p.link.as_mut() {
                if let Err(error) = link.handle_timeout(now) {
                    self.link_failed(peer, error);
                    continue;
                }
            }
            let Some(attempt) = p.attempt.as_ref() else {
                continue;
            };
            if now >= attempt.deadline && !p.established {
                let who = self.universe.describe(peer);
                let message = format!(
                    "{who} could not be reached over UCX within {} s (TETHER_CONNECT_TIMEOUT): {}",
                    self.config.connect_timeout.as_secs(),
                    attempt.problem
                );
                self.lose(peer, err(ErrorClass::Timeout, message));
            } else if p.address.is_none() && attempt.retry.is_due(now) {
                self.try_connect(peer, now);
            }
        }
        self.rearm();
    }

    /// Watches the process of `peer`, on this host by its rendezvous
    /// entry, through a pidfd in the reactor (UCX does not report a dead
    /// peer of this host: `send.rs`, `ensure_endpoint`). Where the entry
    /// is not in the address book yet, or pidfds are missing, Tether's
    /// heartbeats still find the peer gone, later.
    fn watch_process(&mut self, peer: u32) {
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        p.watch_again = None;
        if p.process.is_some() || p.finished {
            return;
        }
        let address = match self.addresses.get(peer) {
            Ok(address) => address,
            Err(NoAddress::NotYet(_)) => {
                p.watch_again = Some(Instant::now() + WATCH_AGAIN);
                return;
            }
            Err(NoAddress::Malformed(_)) => return,
        };
        let Some(start) = address.start.filter(|_| address.host == self.config.host) else {
            return;
        };
        let Some(pidfd) = crate::host::process_fd(address.pid, start) else {
            if !crate::host::is_alive(address.pid, start) {
                self.process_ended(peer);
            }
            return;
        };
        let token = UCX_TOKENS.token(1 + peer as usize);
        let registered = self.registry.register(
            &mut mio::unix::SourceFd(&pidfd.as_raw_fd()),
            token,
            Interest::READABLE,
        );
        if registered.is_ok() {
            self.peers.get_mut(&peer).expect("checked").process = Some(pidfd);
        }
    }

    /// One ready descriptor of this transport: the worker's (the caller
    /// progresses it next) or a peer's process, which has ended. What the
    /// peer sent before it ended is taken in first; if it did not say
    /// goodbye, it is lost.
    pub fn on_ready(&mut self, token: mio::Token) {
        let Some(index) = UCX_TOKENS.index(token).filter(|&i| i != WORKER) else {
            return;
        };
        let peer = (index - 1) as u32;
        for _ in 0..DRAIN_ROUNDS {
            if !self.poll() {
                break;
            }
        }
        if !self.peers.contains_key(&peer) {
            return;
        }
        self.unwatch(peer);
        self.process_ended(peer);
    }

    /// `peer`'s process has ended: it is lost (unless it said goodbye)
    /// once what it sent before is taken in, now or when the router has
    /// placed the frame its link waits on ([`UcxTransport::check_exited`]).
    fn process_ended(&mut self, peer: u32) {
        if let Some(p) = self.peers.get_mut(&peer) {
            p.exited = true;
        }
        self.check_exited(peer);
    }

    /// Loses `peer` if its process ended, it did not say goodbye, and its
    /// link waits on nothing of the router's: what is left of its frames
    /// follows a gap that nothing will fill. A payload UCX is still
    /// fetching from it will never come, and UCX 1.13 cannot cancel the
    /// fetch: the peer is lost anyway, its endpoint force-closed first
    /// (`forget`), so that with the sender gone and its connection closed
    /// nothing more can land in the receive's buffer.
    pub(super) fn check_exited(&mut self, peer: u32) {
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        if !p.exited || p.finished || p.reported.is_some() {
            return;
        }
        let who = self.universe.describe(peer);
        let message =
            format!("{who} exited or was killed without saying goodbye (its process ended)");
        tracing::warn!("{message}");
        self.lose(peer, err(ErrorClass::PeerLost, message));
    }

    /// Recomputes the earliest deadline.
    fn rearm(&mut self) {
        self.timer = self
            .peers
            .values()
            .filter(|p| !p.finished)
            .flat_map(|p| {
                let link = p.link.as_ref().and_then(Link::poll_timeout);
                let attempt = p.attempt.as_ref().filter(|_| !p.established).map(|a| {
                    if p.address.is_none() {
                        a.retry.next_try().min(a.deadline)
                    } else {
                        a.deadline
                    }
                });
                link.into_iter().chain(attempt).chain(p.watch_again)
            })
            .min();
    }

    /// What the transport can do with `peer` (its window operations may
    /// go as UCX RMA: `rma.rs`).
    pub fn caps_for(&self, peer: u32) -> Caps {
        Caps {
            window_rma: self.window_rma(peer),
            ..self.caps()
        }
    }

    /// Gives `peer` up: its endpoint is closed, what waits for it is
    /// dropped, and its loss is reported with `error`.
    fn lose(&mut self, peer: u32, error: Error) {
        if self.forget(peer) {
            self.events.lost(peer, error);
        }
    }

    /// [`UcxTransport::lose`] with an error of `class` whose message
    /// `message` writes, given the peer's name.
    fn lose_with(&mut self, peer: u32, class: ErrorClass, message: impl FnOnce(&str) -> String) {
        let who = self.universe.describe(peer);
        self.lose(peer, err(class, message(&who)));
    }

    /// Stops watching the process of `peer` (it ended, or the peer is
    /// dropped).
    fn unwatch(&mut self, peer: u32) {
        let Some(pidfd) = self.peers.get_mut(&peer).and_then(|p| p.process.take()) else {
            return;
        };
        let _ = self
            .registry
            .deregister(&mut mio::unix::SourceFd(&pidfd.as_raw_fd()));
    }

    /// Drops everything of `peer` (without a word to it); returns whether
    /// it was not finished before.
    fn forget(&mut self, peer: u32) -> bool {
        let Some(p) = self.peers.get_mut(&peer) else {
            return false;
        };
        let was = !p.finished;
        p.finished = true;
        p.established = false;
        p.link = None;
        p.attempt = None;
        p.queue.clear();
        p.arrived.clear();
        p.reported = None;
        p.receiving = false;
        p.rma_waiting.clear();
        p.keys.clear();
        if let Some(ep) = p.ep.take() {
            self.endpoint_peers.remove(&ep.id().0);
            drop(ep);
        }
        self.unwatch(peer);
        was
    }

    /// Drops `peer` without a word: the router gave it up (silent, or its
    /// process ended) and reports the loss itself.
    pub fn abandon(&mut self, peer: u32) {
        self.forget(peer);
        self.rearm();
    }

    fn broke_protocol_error(&self, peer: u32, problem: &dyn std::fmt::Display) -> Error {
        let who = self.universe.describe(peer);
        tracing::error!("protocol error from {who} over UCX: {problem}; link closed");
        err(
            ErrorClass::Protocol,
            format!("{who} broke the protocol over UCX: {problem}"),
        )
    }
}

impl Transport for UcxTransport {
    fn caps(&self) -> Caps {
        Caps::NONE
    }

    fn rma(&mut self, op: &RmaOp) -> RmaOutcome {
        self.start_rma(op)
    }

    /// Sends an engine frame to its peer, setting up the link first if
    /// needed; a peer with [`LINK_QUEUE_FRAMES`] sends in flight (or as
    /// many frames waiting for the handshake) takes no more.
    fn send(&mut self, t: Transmit) -> std::result::Result<(), NoResource> {
        let peer = t.peer;
        let p = self.peers.entry(peer).or_default();
        if p.finished && !p.established {
            return Ok(());
        }
        if p.established {
            if p.in_flight >= LINK_QUEUE_FRAMES {
                return Err(NoResource(t));
            }
            self.stamp_and_send(t);
        } else {
            if p.queue.len() >= LINK_QUEUE_FRAMES {
                self.start_connect(peer);
                return Err(NoResource(t));
            }
            p.queue.push_back(t);
            self.start_connect(peer);
        }
        Ok(())
    }

    fn place(&mut self, peer: u32, sink: PayloadSink) {
        self.place_payload(peer, sink);
    }

    fn broke_protocol(&mut self, peer: u32, error: WireError) {
        let error = self.broke_protocol_error(peer, &error);
        self.lose(peer, error);
    }

    fn events(&mut self) -> &mut Events {
        &mut self.events
    }

    fn has_output(&self) -> bool {
        self.peers
            .values()
            .any(|p| !p.finished && (!p.queue.is_empty() || p.in_flight > 0))
    }

    /// Every established link says goodbye (once) and from then on waits
    /// for the peer's.
    fn say_goodbye(&mut self) {
        let now = Instant::now();
        let linked: Vec<u32> = self
            .peers
            .iter()
            .filter(|(_, p)| p.established)
            .map(|(&peer, _)| peer)
            .collect();
        for peer in linked {
            if let Some(link) = self.peers.get_mut(&peer).and_then(|p| p.link.as_mut()) {
                link.close(now);
            }
            self.drive(peer);
        }
        self.rearm();
    }

    fn all_goodbyes_heard(&self) -> bool {
        self.peers.values().all(|p| {
            !p.established
                || p.in_flight == 0
                    && matches!(
                        p.link_state(),
                        Some(LinkState::ByeReceived | LinkState::Closed) | None
                    )
        })
    }

    fn broadcast_abort(&mut self, code: i32) {
        let linked: Vec<u32> = self
            .peers
            .iter()
            .filter(|(_, p)| p.established)
            .map(|(&peer, _)| peer)
            .collect();
        for peer in linked {
            let mut header = FrameHeader::new(FrameKind::Abort);
            header.tag = code;
            self.stamp_and_send(Transmit {
                peer,
                header,
                payload: TransmitPayload::None,
                completes: None,
                copy_if_blocked: false,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_through_their_text() {
        let bytes = vec![0u8, 1, 0xab, 0xff, 0x10];
        let text = encode_address(&bytes);
        assert_eq!(text, "0001abff10");
        assert_eq!(decode_address(&text), Some(bytes));
        assert_eq!(decode_address(""), None);
        assert_eq!(decode_address("abc"), None);
        assert_eq!(decode_address("zz"), None);
    }
}

//! The router: which transport reaches which peer, composed as one
//! [`Transport`] over tcp, shm and file.
//!
//! [`Router`] picks for each peer, on first use, the first transport of
//! `TETHER_TRANSPORTS` that reaches it (`shm`: the peer is on this host,
//! by its published host identity, and its segment can be attached;
//! `tcp`: always), and keeps that choice for the rest of the run, so the
//! frames of one direction of a pair never change transport and MPI's
//! order holds. Frames for a peer whose address or segment is not
//! published yet wait in order in its record, up to
//! `TETHER_CONNECT_TIMEOUT`, as do frames a link gave back
//! ([`NoResource`]): the router keeps the one queue per peer and takes
//! every frame it is given. What the router knows of each peer is in its
//! record (`peers.rs`); when and how long it tries to reach a peer is the
//! connection policy's (`policy.rs`). `hybrid` reaches a peer as `shm`
//! or, failing that, `tcp` would, and sends that peer's rendezvous
//! payloads above `TETHER_HYBRID_THRESHOLD` through files: the route's
//! transport wrapped in a [`Hybrid`] with the file transport, which is
//! created on first use.
//!
//! The router reports like any transport, in its own [`Events`], into
//! which it drains the transports it is made of; a peer whose route it
//! settled is reported with the route's [`Caps`] (`Events::reached`).
//! It never calls the engine: the hand-over (`router/hand_over.rs`) does.
//!
//! Progress: shared memory is polled on every call (a few memory loads);
//! epoll, a system call, only when sleeping, when TCP has connections, or
//! every [`TCP_POLL_EVERY`] calls otherwise (to accept connections and
//! see pidfd events), so a busy-polling wait on shared memory does not
//! pay a system call per round. Sleeping happens in the one epoll, the
//! router's reactor (`transport/reactor.rs`), that watches the sockets,
//! the shared-memory doorbell, the peers' pidfds and the file inbox's
//! inotify descriptor (capped by the file transport's polling schedule
//! where there are no events). Each transport registers under tokens of
//! its own space, and the router hands each ready token to its owner: no
//! transport waits, and none sees another's descriptors.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tether_proto::{FileData, PayloadSink, RmaOp, RmaStatus, Transmit, WireError};
use tether_rendezvous::Rendezvous;

use crate::addresses::{Addresses, NoAddress};
use crate::error::{err, Error, ErrorClass, Result};
use crate::host;
use crate::liveness::{self, Liveness, Silent, Verdict};
use crate::peers::{Peers, Pending, Route};
use crate::policy::{ConnectionPolicy, Effect};
use crate::settings::{Key, Settings};
use crate::transport::api::{Caps, NoResource, PayloadFiles, RmaOutcome, Transport};
use crate::transport::events::{Events, LinkEvent};
use crate::transport::file::{self, FileConfig, FileTransport};
use crate::transport::hybrid::Hybrid;
use crate::transport::rails::{MultiRail, RailPolicy};
use crate::transport::reactor::{self, Owner, Reactor, TCP_TOKENS};
use crate::transport::shm::{self, AttachError, ShmConfig, ShmTransport};
pub use crate::transport::shm::{Direct, Wanted};
use crate::transport::tcp::{self, TcpConfig, TcpTransport};
use crate::transport::ucx::{self, UcxConfig, UcxTransport};
use crate::universe::{PeerAddress, Universe};

mod files;
mod hand_over;
mod link_cap;
mod short_path;
mod windows;
use files::FileSettings;
pub use hand_over::Transports;
use link_cap::{choose_retires, Candidate, LinkCap};
pub use short_path::ShortPath;

/// A busy-polling wait calls epoll once per this many progress calls
/// when TCP has no connection, or reads its few connections directly
/// (a power of two).
pub const TCP_POLL_EVERY: u32 = 64;

/// How often progress samples what the links hold, for their peak
/// (`link_bytes_peak`): a sample costs a look at every link (`mincore`
/// per ring, `SO_MEMINFO` per socket).
const BYTES_SAMPLE_PERIOD: Duration = Duration::from_millis(100);

/// What exists before the universe is known: the TCP listener and the
/// shared-memory segment, and the address that publishes them.
pub struct Bound {
    reactor: Reactor,
    /// The listener of each TCP rail, rail 0 first, with the clone of the
    /// reactor's registry its transport registers connections through.
    tcp: Vec<(tcp::Bound, mio::Registry)>,
    tcp_config: TcpConfig,
    policy: ConnectionPolicy,
    shm: Option<shm::Prepared>,
    shm_problem: String,
    /// The UCX worker, when `ucx` was listed at start and UCX loads.
    ucx: Option<ucx::Prepared>,
    ucx_problem: String,
    host: String,
    /// The heartbeat socket, whose port the address publishes.
    beat: Option<std::net::UdpSocket>,
    pub address: PeerAddress,
    /// Random at every start; a program's rank 0 publishes it with the
    /// program's size (see [`crate::universe::SizeEntry`]).
    pub nonce: u64,
}

/// Why shared memory (or UCX) did not reach a peer (yet).
enum Miss {
    /// Not yet: its address or segment is not there; retried.
    NotYet,
    /// It cannot, for this reason; the next transport decides.
    Cannot(String),
    /// Its process has ended.
    Gone(String),
}

pub struct Router {
    reactor: Reactor,
    /// Ready shared-memory tokens of the last wait (kept to reuse its memory).
    shm_ready: Vec<mio::Token>,
    /// Ready UCX tokens of the last wait (likewise).
    ucx_ready: Vec<mio::Token>,
    /// TCP on each rail (one unless `TETHER_RAILS`).
    tcp: MultiRail<TcpTransport>,
    shm: Option<ShmTransport>,
    shm_problem: String,
    ucx: Option<UcxTransport>,
    ucx_problem: String,
    peers: Peers,
    policy: ConnectionPolicy,
    order: Vec<String>,
    host: String,
    universe: Arc<Universe>,
    /// Peers' addresses, shared with TCP (`addresses.rs`).
    addresses: Addresses,
    polls: u32,
    /// Created on first use (see [`Router::file`]).
    file: Option<FileTransport>,
    file_settings: FileSettings,
    hybrid_threshold: u64,
    /// Eager limit of the peers reached through `file`.
    file_eager_limit: u64,
    hybrid_inline_warned: bool,
    /// What the router reports: its transports' events, drained into it.
    events: Events,
    /// The transport each frame of `events.frames` came from, in the same
    /// order: its delivery goes back there.
    origins: VecDeque<Owner>,
    /// Lost peers whose loss waits until the frames they sent before are
    /// delivered (see [`Router::collect`]).
    losing: Vec<(u32, Error)>,
    /// The heartbeat thread: which peers are silent (`liveness.rs`).
    liveness: Liveness,
    /// Lookups of a pending route after its first (counters).
    route_retries: u64,
    /// Routes that waited for their peer (its address or its segment)
    /// instead of settling at their first try (counters).
    route_waits: u64,
    /// Times a settled link gave a frame back as full (counters).
    link_full: u64,
    /// `TETHER_MAX_LINKS` and the epochs of use it retires by.
    cap: LinkCap,
    /// The most bytes the links held at once, as sampled
    /// ([`Router::link_bytes_peak`]).
    link_bytes_peak: std::cell::Cell<u64>,
    /// When the links' bytes are sampled next.
    next_bytes_sample: Instant,
}

/// Runs `$call` on the transport the oldest reported frame came from
/// (its delivery goes back there), statically dispatched.
macro_rules! on_origin {
    ($router:expr, |$t:ident| $call:expr) => {
        match $router.origins.pop_front() {
            Some(Owner::Tcp) => {
                let $t = &mut $router.tcp;
                $call
            }
            Some(Owner::Shm) => {
                if let Some($t) = $router.shm.as_mut() {
                    $call
                }
            }
            Some(Owner::File) => {
                if let Some($t) = $router.file.as_mut() {
                    $call
                }
            }
            Some(Owner::Ucx) => {
                if let Some($t) = $router.ucx.as_mut() {
                    $call
                }
            }
            None => {}
        }
    };
}

/// The addresses of `TETHER_TCP_INTERFACE`: one, or one per NIC for the
/// rails (127.0.0.1 when unset).
fn tcp_interfaces(settings: &Settings) -> Vec<String> {
    let listed: Vec<String> = settings
        .tcp_interface()
        .unwrap_or("127.0.0.1")
        .split(',')
        .map(|ip| ip.trim().to_string())
        .filter(|ip| !ip.is_empty())
        .collect();
    if listed.is_empty() {
        vec!["127.0.0.1".to_string()]
    } else {
        listed
    }
}

/// How rendezvous data is cut for the rails (`TETHER_RAIL_*`).
pub fn rail_stripe(settings: &Settings) -> tether_proto::Stripe {
    tether_proto::Stripe {
        threshold: settings.rail_threshold(),
        chunk: settings.rail_chunk(),
    }
}

/// The TCP address peers are told to connect to: `TETHER_TCP_PUBLISH`
/// when set (a port forward, NAT, or a proxy in front of this process:
/// what dials us reaches the listener through it), else the listener's.
fn published_tcp(settings: &Settings, listening: std::net::SocketAddr) -> Result<String> {
    match settings.tcp_publish() {
        None | Some("") => Ok(listening.to_string()),
        Some(text) => text
            .parse::<std::net::SocketAddr>()
            .map(|a| a.to_string())
            .map_err(|_| {
                err(
                    ErrorClass::Init,
                    format!("TETHER_TCP_PUBLISH={text:?} is not an ip:port address"),
                )
            }),
    }
}

impl Router {
    /// Listens on TCP and creates the shared-memory segment (a failure of
    /// the latter only disables `shm`, with the reason kept for errors).
    pub fn bind(settings: &Settings, key: Option<Arc<tether_auth::Key>>) -> Result<Bound> {
        let policy = ConnectionPolicy::new(settings);
        let interfaces = tcp_interfaces(settings);
        let tcp_config = TcpConfig {
            key,
            listen_ip: interfaces[0].clone(),
            listen_port: settings.tcp_port() as u16,
            connect_timeout: policy.connect_timeout(),
            handshake_timeout: policy.handshake_timeout(),
            goodbye_timeout: policy.goodbye_timeout(),
        };
        let epoll_error = |e: std::io::Error| err(ErrorClass::Transport, format!("epoll: {e}"));
        let reactor = Reactor::new().map_err(epoll_error)?;
        let mut tcp = Vec::new();
        for rail in 0..settings.rails() as usize {
            // Further rails take any free port: TETHER_TCP_PORT and
            // TETHER_TCP_PUBLISH name rail 0's.
            let config = TcpConfig {
                listen_ip: interfaces[rail % interfaces.len()].clone(),
                listen_port: if rail == 0 { tcp_config.listen_port } else { 0 },
                ..tcp_config.clone()
            };
            let registry = reactor.registry().try_clone().map_err(epoll_error)?;
            let listener = TcpTransport::bind(&config, reactor.registry(), TCP_TOKENS.part(rail))?;
            tcp.push((listener, registry));
        }
        let (shm, shm_problem) = match shm::Prepared::create() {
            Ok(p) => (Some(p), String::new()),
            Err(e) => {
                tracing::info!("shared memory is not usable here: {e}");
                (None, format!("not usable in this process: {e}"))
            }
        };
        let (ucx, ucx_problem) = if settings.transports().iter().any(|t| t == "ucx") {
            match ucx::Prepared::create(settings.ucx_rma()) {
                Ok(prepared) => (Some(prepared), String::new()),
                Err(why) => {
                    tracing::warn!("ucx is in TETHER_TRANSPORTS but not usable here: {why}");
                    (None, format!("not usable in this process: {why}"))
                }
            }
        } else {
            let why = "not started: TETHER_TRANSPORTS did not list ucx when this process started";
            (None, why.to_string())
        };
        let host = host::host_id(settings.host_id());
        let beat = liveness::bind(&tcp_config.listen_ip)
            .map_err(|e| tracing::warn!("no heartbeat socket ({e}): silent peers are not detected, and peers that watch this process will give it up"))
            .ok();
        let address = PeerAddress {
            tcp: published_tcp(settings, tcp[0].0 .1)?,
            host: host.clone(),
            pid: std::process::id(),
            start: shm.as_ref().map(shm::Prepared::start_time),
            shm: shm.as_ref().map(shm::Prepared::segment_fd),
            beat: beat
                .as_ref()
                .and_then(|s| s.local_addr().ok())
                .map(|a| a.port()),
            rails: tcp[1..].iter().map(|((_, at), _)| at.to_string()).collect(),
            ucx: ucx.as_ref().map(ucx::Prepared::published),
        };
        Ok(Bound {
            reactor,
            tcp,
            tcp_config,
            policy,
            shm,
            shm_problem,
            ucx,
            ucx_problem,
            host,
            beat,
            address,
            nonce: host::random_u64(),
        })
    }

    pub fn new(
        bound: Bound,
        settings: &Settings,
        universe: Arc<Universe>,
        rendezvous: Arc<Rendezvous>,
    ) -> Router {
        let addresses = Addresses::new(universe.clone(), rendezvous.clone());
        let key = bound.tcp_config.key.clone();
        let rails = bound
            .tcp
            .into_iter()
            .enumerate()
            .map(|(rail, (listener, registry))| {
                TcpTransport::new(
                    (listener, rail, TCP_TOKENS.part(rail)),
                    registry,
                    bound.tcp_config.clone(),
                    universe.clone(),
                    rendezvous.clone(),
                    addresses.clone(),
                )
            })
            .collect();
        let tcp = MultiRail::new(
            rails,
            universe.my_universe_rank(),
            RailPolicy::of(settings.rail_policy()),
            rail_stripe(settings),
        );
        let config = ShmConfig {
            ring_bytes: (settings.shm_ring_bytes() as usize)
                .next_power_of_two()
                .max(4096),
            cma: settings.shm_cma(),
            membarrier: settings.shm_membarrier(),
            key: key.clone(),
            capped: settings.max_links() != 0,
        };
        let mut shm_problem = bound.shm_problem;
        let shm = bound.shm.and_then(|prepared| {
            ShmTransport::new(prepared, universe.clone(), config, bound.reactor.registry())
                .map_err(|e| {
                    tracing::info!("shared memory is not usable here: {e}");
                    shm_problem = format!("not usable in this process: {e}");
                })
                .ok()
        });
        let mut ucx_problem = bound.ucx_problem;
        let ucx_config = UcxConfig {
            key: key.clone(),
            host: bound.host.clone(),
            connect_timeout: bound.tcp_config.connect_timeout,
            handshake_timeout: bound.tcp_config.handshake_timeout,
            goodbye_timeout: bound.tcp_config.goodbye_timeout,
        };
        let ucx = bound.ucx.and_then(|prepared| {
            let registry = bound
                .reactor
                .registry()
                .try_clone()
                .map_err(|e| err(ErrorClass::Transport, format!("epoll: {e}")));
            registry
                .and_then(|registry| {
                    UcxTransport::new(
                        prepared,
                        universe.clone(),
                        addresses.clone(),
                        ucx_config,
                        registry,
                    )
                })
                .map_err(|e| {
                    tracing::warn!("ucx is not usable: {e}");
                    ucx_problem = format!("not usable in this process: {e}");
                })
                .ok()
        });
        let mut file_settings = FileSettings::new(settings, &rendezvous, &universe);
        file_settings.key = key;
        let liveness = match bound.beat {
            Some(socket) => Liveness::start(
                socket,
                Duration::from_secs(settings.peer_timeout()),
                &universe,
                addresses.clone(),
                file_settings.key.clone(),
            ),
            None => Liveness::off(),
        };
        let mut router = Router {
            reactor: bound.reactor,
            shm_ready: Vec::new(),
            ucx_ready: Vec::new(),
            tcp,
            shm,
            shm_problem,
            ucx,
            ucx_problem,
            peers: Peers::default(),
            policy: bound.policy,
            order: settings.transports(),
            host: bound.host,
            universe,
            addresses,
            polls: 0,
            file: None,
            file_settings,
            hybrid_threshold: settings.hybrid_threshold(),
            file_eager_limit: settings.file_eager_limit(),
            hybrid_inline_warned: false,
            events: Events::default(),
            origins: VecDeque::new(),
            losing: Vec::new(),
            liveness,
            route_retries: 0,
            route_waits: 0,
            link_full: 0,
            cap: LinkCap::new(settings.max_links() as usize),
            link_bytes_peak: std::cell::Cell::new(0),
            next_bytes_sample: Instant::now(),
        };
        router.start_file_inbox();
        router
    }

    /// When `file` is a transport of this run, peers may write to this
    /// process before it writes to them: its inbox and heartbeat start now.
    fn start_file_inbox(&mut self) {
        if self.order.iter().any(|t| t == "file") {
            let registry = self.reactor.registry().try_clone();
            let started = registry
                .map_err(|e| err(ErrorClass::File, format!("epoll: {e}")))
                .and_then(|registry| self.file()?.receive_frames(&registry));
            if let Err(e) = started {
                tracing::warn!("the file transport cannot receive: {e}");
            }
        }
    }

    /// The file transport, created on first use.
    fn file(&mut self) -> Result<&mut FileTransport> {
        if self.file.is_none() {
            let (run_name, run_id) = self.file_settings.run.clone()?;
            if self.file_settings.private_root {
                file::ensure_private_dir(&self.file_settings.root)?;
            }
            let config = FileConfig {
                root: self.file_settings.root.clone(),
                run_name,
                run_id,
                fsync: self.file_settings.fsync,
                notify: self.file_settings.notify,
                poll_min: self.file_settings.poll_min,
                poll_max: self.file_settings.poll_max,
                peer_timeout: self.file_settings.peer_timeout,
                silence: self.file_settings.silence,
                connect_timeout: self.policy.connect_timeout(),
                frames: self.order.iter().any(|t| t == "file"),
                eager_limit: self.file_eager_limit,
                key: self.file_settings.key.clone(),
            };
            let transport =
                FileTransport::new(config, self.universe.clone(), self.reactor.registry())?;
            self.file = Some(transport);
        }
        Ok(self.file.as_mut().expect("created above"))
    }

    /// Changes the transport order for peers not reached yet.
    pub fn set_order(&mut self, order: Vec<String>) {
        self.order = order;
        self.start_file_inbox();
    }

    /// The most dedicated links to keep (0: no cap), from the next
    /// check of the cap on; rings attached from now on are faulted in
    /// whole only without a cap.
    pub fn set_max_links(&mut self, max: usize) {
        self.cap.set_max(max);
        if let Some(shm) = self.shm.as_mut() {
            shm.set_capped(max != 0);
        }
    }

    /// Marks `peer` as used inside a communication kernel: connected at
    /// once when the next kernel starts, and its links kept whatever
    /// `TETHER_MAX_LINKS` says (TCP refuses the peer's retires).
    pub fn mark_kernel(&mut self, peer: u32) {
        if !self.peers.is_kernel(peer) {
            self.peers.mark_kernel(peer);
            self.tcp.pin(peer);
            if let Some(shm) = self.shm.as_mut() {
                shm.pin(peer);
            }
        }
    }

    /// Links retired under `TETHER_MAX_LINKS`: TCP connections closed,
    /// shared-memory rings whose pages were given back.
    pub fn retires(&self) -> u64 {
        self.tcp.retires() + self.shm.as_ref().map_or(0, |shm| shm.retires)
    }

    /// The most dedicated links this process held at once: TCP
    /// connections at their peak (per rail), plus the shared-memory
    /// channels it ever wrote to and the UCX links (an upper bound: a
    /// ring given back and written again counts once).
    pub fn links_peak(&self) -> u64 {
        let ucx = self.ucx.as_ref().map_or(0, UcxTransport::link_count);
        let shm = self.shm.as_ref().map_or(0, ShmTransport::rings_written);
        self.tcp.links_peak() + (shm + ucx) as u64
    }

    /// Bytes of the read buffers and stages TCP connections share, kept
    /// between uses.
    pub fn tcp_shared_bytes(&self) -> u64 {
        self.tcp.shared_buffer_bytes()
    }

    /// This process's shared-memory mailbox: bytes mapped and resident
    /// (0 without shared memory).
    pub fn mailbox_footprint(&self) -> (u64, u64) {
        self.shm
            .as_ref()
            .map_or((0, 0), ShmTransport::mailbox_footprint)
    }

    /// Shared-memory mailbox records written and read (0 without shared
    /// memory).
    pub fn mailbox_records(&self) -> (u64, u64) {
        self.shm
            .as_ref()
            .map_or((0, 0), ShmTransport::mailbox_records)
    }

    /// Retires the least recently used idle connections that no kernel
    /// used while there are more than the cap (`router/link_cap.rs`).
    #[cold]
    fn hold_the_cap(&mut self) {
        let open = self.cap.open_links();
        self.tcp.open_links(open);
        if let Some(shm) = self.shm.as_mut() {
            shm.open_links(open);
        }
        let mut candidates: Vec<Candidate> = Vec::with_capacity(open.len());
        for link in open.iter() {
            match candidates.iter_mut().find(|c| c.peer == link.peer) {
                Some(c) => {
                    c.links += 1;
                    c.idle &= link.idle;
                }
                None => candidates.push(Candidate {
                    peer: link.peer,
                    links: 1,
                    idle: link.idle,
                    pinned: link.kept_by_peer || self.peers.is_kernel(link.peer),
                    last_use: self.peers.last_use(link.peer),
                }),
            }
        }
        let epoch = self.cap.epoch();
        for peer in choose_retires(self.cap.max(), epoch, &mut candidates) {
            match self.peers.route(peer) {
                Some(Route::Shm) => {
                    if let Some(shm) = self.shm.as_mut() {
                        shm.retire(peer);
                    }
                }
                _ => {
                    self.tcp.retire(peer);
                }
            }
        }
        self.cap.next_epoch();
    }

    /// Hands TCP the timeouts of a hint ([`Effect::Timeouts`]); the
    /// router's own deadlines read them from the policy.
    /// How chunks are spread from now on, and cut for peers reached from
    /// now on (hints).
    pub fn set_rails(&mut self, policy: RailPolicy, stripe: tether_proto::Stripe) {
        self.tcp.set_policy(policy);
        self.tcp.set_stripe(stripe);
    }

    pub fn set_timeouts(&mut self, connect: Duration, handshake: Duration, goodbye: Duration) {
        self.tcp.set_timeouts(connect, handshake, goodbye);
        if let Some(ucx) = self.ucx.as_mut() {
            ucx.set_timeouts(connect, handshake, goodbye);
        }
    }

    /// The record of every peer this process dealt with.
    #[inline(always)]
    pub fn peers(&self) -> &Peers {
        &self.peers
    }

    #[inline(always)]
    pub fn peers_mut(&mut self) -> &mut Peers {
        &mut self.peers
    }

    #[inline(always)]
    pub fn policy(&self) -> &ConnectionPolicy {
        &self.policy
    }

    /// Takes in a hint that `settings` now holds: the connection policy
    /// changes and says what the runtime must do about it.
    pub fn apply_hint(&mut self, hint: Key, settings: &Settings) -> Option<Effect> {
        self.policy.apply_hint(hint, settings, &self.peers)
    }

    /// The shared-memory short path (`runtime/direct.rs`), borrowed
    /// apart from the rest of the router.
    #[inline(always)]
    pub fn short_path(&mut self) -> ShortPath<'_> {
        ShortPath::new(&self.peers, self.shm.as_mut(), self.ucx.as_mut())
    }

    pub fn has_route(&self, peer: u32) -> bool {
        self.peers.has_route(peer)
    }

    /// Chooses the transport for `peer` and connects, unless a route
    /// exists: a wait for a receive from a peer this process never sent
    /// to links with it, so that its death is seen (a closed connection,
    /// a refused one, a process gone) instead of waited for.
    pub fn reach(&mut self, peer: u32) {
        if !self.peers.has_route(peer) {
            self.resolve(peer, None, None);
        }
        self.collect();
    }

    /// Chooses the transport for `peer` now and connects (eager
    /// connections, kernels).
    pub fn start_connect(&mut self, peer: u32) {
        match self.peers.route(peer) {
            Some(Route::Tcp) => self.tcp.start_connect(peer),
            Some(Route::Ucx) => {
                if let Some(ucx) = self.ucx.as_mut() {
                    ucx.start_connect(peer);
                }
            }
            Some(_) => {}
            None => self.resolve(peer, None, None),
        }
        self.collect();
    }

    /// Hands `t` to the transport of its peer's route (wrapped in a
    /// [`Hybrid`] for a hybrid peer's large payload); gives it back when
    /// the route is not settled or the link cannot take it now. A frame
    /// for a peer without a route (lost) is dropped.
    fn hand_to_route(&mut self, t: Transmit) -> Option<NoResource> {
        let peer = t.peer;
        // The size test first: most frames are small, and it spares them
        // the lookup.
        let hybrid = t.payload.len() as u64 > self.hybrid_threshold && self.peers.is_hybrid(peer);
        let files = self.file.as_mut().filter(|_| hybrid);
        let threshold = self.hybrid_threshold;
        let refused = match self.peers.route(peer) {
            Some(Route::Tcp) => send_on(&mut self.tcp, files, threshold, t),
            Some(Route::Shm) => match self.shm.as_mut() {
                Some(shm) => send_on(shm, files, threshold, t),
                None => None,
            },
            Some(Route::File) => match self.file() {
                Ok(file) => file.send(t).err(),
                Err(e) => {
                    self.fail(peer, e);
                    None
                }
            },
            Some(Route::Ucx) => match self.ucx.as_mut() {
                Some(ucx) => ucx.send(t).err(),
                None => None,
            },
            Some(Route::Pending(_)) => return Some(NoResource(t)),
            None => None,
        };
        self.link_full += u64::from(refused.is_some());
        refused
    }

    /// Keeps `t` in its peer's queue (`front`: where it was taken from).
    /// An eager frame that may be copied and that a link gave back
    /// completes now, as it would have in the transport: its sender's
    /// buffer is free at once, and two processes that send to each other
    /// before receiving cannot wait on each other. While the route is not
    /// settled it does not: a send that completed before its peer was
    /// even reached would let a process exit with its message unsent.
    fn wait(&mut self, mut t: Transmit, front: bool) {
        let settled = !matches!(self.peers.route(t.peer), Some(Route::Pending(_)) | None);
        // SAFETY: the payload is valid until `completes` is reported,
        // which happens only after the copy.
        if t.copy_if_blocked && settled && unsafe { t.payload.make_owned() } {
            if let Some(req) = t.completes.take() {
                self.events.sent.push(req);
            }
        }
        self.peers.wait(t, front);
    }

    /// Offers the frames that wait to their peers' links again.
    pub fn offer_waiting(&mut self) {
        for peer in self.peers.waiting_peers() {
            self.offer_waiting_of(peer);
        }
        self.collect();
    }

    /// Offers the frames that wait for `peer` to its link, in order, until
    /// the link gives one back. The caller offers the frames of a peer
    /// reported `reached` only after taking in its caps (the engine may
    /// revisit them: `peers_mut().waiting_mut`).
    pub fn offer_waiting_of(&mut self, peer: u32) {
        while let Some(t) = self.peers.next_waiting(peer) {
            if let Some(NoResource(t)) = self.hand_to_route(t) {
                self.wait(t, true);
                break;
            }
        }
    }

    /// Chooses the route of `peer` by the transport order; `no_shm` and
    /// `no_ucx` say why shared memory or UCX turned out not to reach it,
    /// when they did not.
    fn resolve(&mut self, peer: u32, no_shm: Option<String>, no_ucx: Option<String>) {
        let mut reasons = Vec::new();
        for name in self.order.clone() {
            match name.as_str() {
                "tcp" => return self.route(peer, Route::Tcp),
                "file" => return self.route(peer, Route::File),
                "ucx" => {
                    if let Some(why) = &no_ucx {
                        reasons.push(format!("ucx: {why}"));
                        continue;
                    }
                    match self.try_ucx(peer) {
                        Ok(()) => return self.route(peer, Route::Ucx),
                        Err(Miss::Cannot(problem) | Miss::Gone(problem)) => {
                            reasons.push(format!("ucx: {problem}"))
                        }
                        Err(Miss::NotYet) => return,
                    }
                }
                "shm" | "hybrid" => {
                    if name == "hybrid" {
                        self.peers.set_hybrid(peer);
                    }
                    if let Some(why) = &no_shm {
                        reasons.push(format!("shm: {why}"));
                    } else {
                        match self.try_shm(peer) {
                            Ok(()) => return self.route(peer, Route::Shm),
                            Err(Miss::Gone(problem)) => return self.lose_gone(peer, &problem),
                            Err(Miss::Cannot(problem)) => reasons.push(format!("shm: {problem}")),
                            Err(Miss::NotYet) => return,
                        }
                    }
                    if name == "hybrid" {
                        return self.route(peer, Route::Tcp);
                    }
                }
                other => reasons.push(format!("{other}: not built in")),
            }
        }
        let message = format!(
            "no transport in TETHER_TRANSPORTS={} reaches {}: {}",
            self.order.join(","),
            self.universe.describe(peer),
            reasons.join("; ")
        );
        self.fail(peer, err(ErrorClass::Transport, message));
    }

    /// No transport reaches a process that ended: `peer` is lost, once
    /// what it wrote before it went is delivered (its ring may not have
    /// been found yet: it attached, wrote and exited since the last poll).
    fn lose_gone(&mut self, peer: u32, problem: &str) {
        if let Some(shm) = self.shm.as_mut() {
            shm.poll(self.reactor.registry());
        }
        self.collect();
        let message = format!(
            "{} exited or was killed: {problem}",
            self.universe.describe(peer)
        );
        self.fail(peer, err(ErrorClass::PeerLost, message));
    }

    /// Attaches to `peer`'s segment. `Err(Miss::Cannot(why))`: shm cannot reach
    /// it; `Err(Miss::NotYet)`: not yet (the route is pending);
    /// `Err(Miss::Gone(why))`: its process ended. The peer's address
    /// comes from the address book, which never waits for the rendezvous
    /// (the first try of a peer is `NotYet` while the book looks).
    fn try_shm(&mut self, peer: u32) -> std::result::Result<(), Miss> {
        let Some(shm) = self.shm.as_mut() else {
            return Err(Miss::Cannot(self.shm_problem.clone()));
        };
        // The peer attached to this process's segment first, and this
        // process attached back: no address to wait for.
        if shm.reaches(peer) {
            return Ok(());
        }
        let problem = match self.addresses.get(peer) {
            Ok(address) => {
                if address.host != self.host {
                    return Err(Miss::Cannot(format!(
                        "it is on another host ({}; this one is {})",
                        address.host, self.host
                    )));
                }
                let (Some(start), Some(fd)) = (address.start, address.shm) else {
                    return Err(Miss::Cannot("it offers no shared memory".into()));
                };
                match shm.attach(peer, address.pid, start, fd, self.reactor.registry()) {
                    Ok(()) => return Ok(()),
                    Err(AttachError::Unusable(why)) => return Err(Miss::Cannot(why)),
                    Err(AttachError::Gone(why)) => return Err(Miss::Gone(why)),
                    Err(AttachError::NotReady) => "its shared segment never became ready".into(),
                }
            }
            Err(NoAddress::Malformed(why)) => return Err(Miss::Cannot(why)),
            Err(NoAddress::NotYet(why)) => why,
        };
        self.set_pending(peer, problem, false);
        Err(Miss::NotYet)
    }

    /// Whether UCX reaches `peer`: this process has a worker and the
    /// peer publishes one. `Err(Miss::NotYet)` while its address is not
    /// there (the route is pending).
    fn try_ucx(&mut self, peer: u32) -> std::result::Result<(), Miss> {
        if self.ucx.is_none() {
            return Err(Miss::Cannot(self.ucx_problem.clone()));
        }
        let problem = match self.addresses.get(peer) {
            Ok(address) if address.ucx.is_some() => return Ok(()),
            Ok(_) => {
                return Err(Miss::Cannot(
                    "it publishes no UCX worker (ucx is not in its TETHER_TRANSPORTS, or UCX did not load there)".into(),
                ))
            }
            Err(NoAddress::Malformed(why)) => return Err(Miss::Cannot(why)),
            Err(NoAddress::NotYet(why)) => why,
        };
        self.set_pending(peer, problem, true);
        Err(Miss::NotYet)
    }

    /// The route of `peer` waits (for its address, or its segment):
    /// tried again on the retry schedule until the connect deadline.
    fn set_pending(&mut self, peer: u32, problem: String, ucx: bool) {
        let now = Instant::now();
        match self.peers.route_mut(peer) {
            Some(Route::Pending(pending)) => {
                pending.problem = problem;
                pending.ucx = ucx;
                pending.retry.tried(now);
                self.route_retries += 1;
            }
            _ => {
                self.route_waits += 1;
                let (retry, deadline) = self.policy.after_first_try(now);
                self.peers.set_route(
                    peer,
                    Route::Pending(Pending {
                        deadline,
                        retry,
                        problem,
                        ucx,
                    }),
                );
            }
        }
    }

    /// Settles the route of `peer` and reports it `reached` with what the
    /// route can do; what waited for it is offered by the caller, once it
    /// has taken that in ([`Router::offer_waiting_of`]).
    fn route(&mut self, peer: u32, route: Route) {
        let caps = match route {
            Route::Tcp => {
                tracing::info!("reaching {} over tcp", self.universe.describe(peer));
                self.tcp.start_connect(peer);
                self.tcp.caps()
            }
            Route::Shm => self.shm.as_ref().map_or(Caps::NONE, ShmTransport::caps),
            // Without the transport, the first send fails the peer.
            Route::File => {
                tracing::info!("reaching {} through files", self.universe.describe(peer));
                self.file().map_or(Caps::NONE, |f| f.caps())
            }
            Route::Ucx => {
                tracing::info!("reaching {} over ucx", self.universe.describe(peer));
                self.ucx.as_mut().map_or(Caps::NONE, |ucx| {
                    ucx.start_connect(peer);
                    ucx.caps_for(peer)
                })
            }
            Route::Pending(_) => unreachable!("a settled route"),
        };
        let linked = matches!(route, Route::Tcp | Route::Shm | Route::Ucx);
        let hybrid = matches!(route, Route::Tcp | Route::Shm) && self.peers.is_hybrid(peer);
        if linked {
            // Peers reached through files only are judged by their
            // heartbeat files (the file transport).
            self.liveness.watch(peer);
        }
        self.peers.set_route(peer, route);
        let caps = if hybrid { self.hybrid_caps(caps) } else { caps };
        self.events.reached.push((peer, caps));
    }

    /// What a hybrid route can do: its link's `caps`, through a
    /// [`Hybrid`] with the file transport, created now. Without one,
    /// large payloads go on the link, with a warning.
    fn hybrid_caps(&mut self, caps: Caps) -> Caps {
        match self.file() {
            Ok(_) => Caps {
                remote_memory: caps.remote_memory.min(self.hybrid_threshold),
                stripe: None,
                ..caps
            },
            Err(e) => {
                if !self.hybrid_inline_warned {
                    self.hybrid_inline_warned = true;
                    tracing::warn!(
                        "hybrid: large payloads go on the socket (or ring), no file transport: {e}"
                    );
                }
                caps
            }
        }
    }

    /// The router gives up on reaching `peer`: its record says why at
    /// once (no send tries it again), the rest of the loss waits for the
    /// frames it sent before ([`Router::collect`]).
    fn fail(&mut self, peer: u32, error: Error) {
        self.peers.remove_route(peer);
        self.peers.lose(peer, error.clone());
        self.losing.push((peer, error));
    }

    /// `peer` is lost, whether a transport or the router found it, and
    /// what it sent before is delivered: the file transport lets go of
    /// what it keeps for the peer's transfers (a payload waiting in a
    /// file), so that it writes into no receive that fails now; its
    /// waiting frames are dropped, its record keeps why (for the
    /// statuses of what failed), and the loss is reported.
    fn lose(&mut self, peer: u32, error: Error) {
        if let Some(file) = self.file.as_mut() {
            file.forget(peer);
        }
        self.liveness.forget(peer);
        self.peers.drop_waiting(peer);
        self.peers.lose(peer, error.clone());
        self.events.links.push(LinkEvent::Lost { peer, error });
    }

    /// Tries again the peers whose route is pending and due for a try;
    /// fails those past their deadline.
    fn retry_pending(&mut self, now: Instant) {
        let due: Vec<u32> = self
            .peers
            .pending()
            .filter(|(_, p)| p.retry.is_due(now) || now >= p.deadline)
            .map(|(peer, _)| peer)
            .collect();
        for peer in due {
            let via_ucx = matches!(self.peers.route(peer), Some(Route::Pending(p)) if p.ucx);
            let tried = if via_ucx {
                self.try_ucx(peer)
            } else {
                self.try_shm(peer)
            };
            let (settled, via) = if via_ucx {
                (Route::Ucx, "UCX")
            } else {
                (Route::Shm, "shared memory")
            };
            match tried {
                Ok(()) => self.route(peer, settled),
                Err(Miss::NotYet) => {
                    if let Some(Route::Pending(Pending {
                        deadline, problem, ..
                    })) = self.peers.route(peer)
                    {
                        if now >= *deadline {
                            let message = format!(
                                "{} could not be reached over {via} within {} s (TETHER_CONNECT_TIMEOUT): {problem}",
                                self.universe.describe(peer),
                                self.policy.connect_timeout().as_secs()
                            );
                            self.fail(peer, err(ErrorClass::Timeout, message));
                        }
                    }
                }
                Err(Miss::Gone(why)) => self.lose_gone(peer, &why),
                Err(Miss::Cannot(why)) => {
                    // Shared memory (or UCX) turned out not to reach it:
                    // the next transport in the order decides, with the
                    // queue kept.
                    self.peers.remove_route(peer);
                    if via_ucx {
                        self.resolve(peer, None, Some(why));
                    } else {
                        self.resolve(peer, Some(why), None);
                    }
                }
            }
        }
    }

    /// When the earliest pending route is due for a try or past its deadline.
    fn next_pending(&self) -> Option<Instant> {
        self.peers
            .pending()
            .map(|(_, p)| p.retry.next_try().min(p.deadline))
            .min()
    }

    /// One round of progress, sleeping up to `timeout` in epoll if nothing
    /// moved (see the module documentation). Returns whether bytes moved.
    /// Frames given back earlier are offered again by the caller
    /// ([`Router::offer_waiting`]), after it took in the routes settled
    /// here.
    pub fn poll(&mut self, timeout: Option<Duration>) -> bool {
        let mut moved = false;
        if self.liveness.has_verdicts() {
            self.take_verdicts();
            moved = true;
        }
        if let Some(shm) = self.shm.as_mut() {
            moved |= shm.poll(self.reactor.registry());
        }
        if let Some(file) = self.file.as_mut() {
            moved |= file.poll();
        }
        if let Some(ucx) = self.ucx.as_mut() {
            moved |= ucx.poll();
        }
        let mut timeout = timeout;
        if self.peers.has_pending() {
            let now = Instant::now();
            self.retry_pending(now);
            if let Some(at) = self.next_pending() {
                let left = at.saturating_duration_since(now);
                timeout = Some(timeout.map_or(left, |t| t.min(left)));
            }
            // A route settled now has frames waiting for it, which the
            // caller offers after this round: sleeping first would hold
            // them back until something else woke this process (up to
            // the caller's longest sleep, 100 ms).
            if !self.events.reached.is_empty() {
                timeout = Some(Duration::ZERO);
            }
        }
        if let Some(by) = self.file.as_ref().and_then(FileTransport::wake_by) {
            let left = by.saturating_duration_since(Instant::now());
            timeout = Some(timeout.map_or(left, |t| t.min(left)));
        }
        let wants_sleep = timeout != Some(Duration::ZERO) && !moved;
        self.polls = self.polls.wrapping_add(1);
        let epoll_round = self.polls & (TCP_POLL_EVERY - 1) == 0;
        let tcp_due = wants_sleep || self.shm.is_none() || self.tcp.is_busy() || epoll_round;
        if tcp_due && !wants_sleep && !epoll_round && self.tcp.can_poll_direct() {
            moved |= self.tcp.poll_direct();
        } else if tcp_due {
            moved |= self.wait_ready(timeout, wants_sleep);
        }
        self.collect();
        // The cap is looked at once per period at most: its clock is read
        // every few rounds of a busy poll and at each round of a wait
        // that may sleep.
        if epoll_round || wants_sleep {
            let now = Instant::now();
            // Inside a kernel (`IN_KERNEL`) nothing is retired: the
            // cap is held between kernels, as the hint paper's library
            // does, so a kernel never pays for a retire.
            if self.cap.active() && !self.policy.in_kernel() {
                let shm = self.shm.as_ref().map_or(0, ShmTransport::open_ring_count);
                if self.cap.may_exceed(self.tcp.connections() + shm) && self.cap.due(now) {
                    self.hold_the_cap();
                }
            }
            if now >= self.next_bytes_sample {
                self.next_bytes_sample = now + BYTES_SAMPLE_PERIOD;
                self.sample_link_bytes();
            }
        }
        moved
    }

    /// Samples what the links hold now into their peak.
    #[cold]
    fn sample_link_bytes(&self) -> u64 {
        let now: u64 = self
            .links()
            .iter()
            .map(|link| {
                let m = &link.memory;
                m.user_bytes + m.kernel_bytes + m.ring_resident_bytes
            })
            .sum();
        self.link_bytes_peak
            .set(self.link_bytes_peak.get().max(now));
        now
    }

    /// The most bytes the links held at once (user-space buffers, the
    /// kernel's socket queues, resident ring pages), as sampled every
    /// [`BYTES_SAMPLE_PERIOD`] of progress and at this call: a peak
    /// between two samples may be missed.
    pub fn link_bytes_peak(&self) -> u64 {
        self.sample_link_bytes();
        self.link_bytes_peak.get()
    }

    /// Gives up the peers the heartbeat thread found silent (or that gave
    /// this process up): their links are dropped without a word (nothing
    /// more is read from them or written to them, so no buffer of a
    /// request that fails now is touched again) and the loss is reported
    /// like any other, once what they sent before is delivered.
    #[cold]
    fn take_verdicts(&mut self) {
        for verdict in self.liveness.take_verdicts() {
            let (Verdict::Silent(Silent { peer, .. }) | Verdict::GaveUpOnMe { peer }) = verdict;
            if self.peers.lost(peer).is_some() {
                continue;
            }
            let who = self.universe.describe(peer);
            let timeout = self.liveness.timeout().as_secs();
            let message = match verdict {
                Verdict::Silent(Silent { silent, .. }) => format!(
                    "no heartbeat from {who} for {:.1} s (TETHER_PEER_TIMEOUT={timeout}): it is stopped or hung, or its host or the network to it is down",
                    silent.as_secs_f64()
                ),
                Verdict::GaveUpOnMe { .. } => format!(
                    "{who} gave this process up: it heard no heartbeat from this process within its TETHER_PEER_TIMEOUT (was this process stopped?)"
                ),
            };
            tracing::warn!("{message}");
            self.tcp.abandon(peer);
            if let Some(shm) = self.shm.as_mut() {
                shm.abandon(peer);
            }
            if let Some(ucx) = self.ucx.as_mut() {
                ucx.abandon(peer);
            }
            self.liveness.give_up(peer);
            self.fail(peer, err(ErrorClass::PeerLost, message));
        }
        self.collect();
    }

    /// Waits in the reactor (`wants_sleep`: up to `timeout`, else not at
    /// all) and hands each ready descriptor to its transport.
    fn wait_ready(&mut self, timeout: Option<Duration>, wants_sleep: bool) -> bool {
        let mut moved = false;
        let sleeping = wants_sleep
            && self.shm.as_mut().is_none_or(|s| s.prepare_sleep())
            && self.ucx.as_mut().is_none_or(UcxTransport::prepare_sleep);
        let mut wait = if sleeping {
            timeout
        } else {
            Some(Duration::ZERO)
        };
        // The clock is read only while a TCP timer is armed (connects
        // and handshakes in progress): an established link needs none.
        let timer = match (
            self.tcp.timer(),
            self.ucx.as_ref().and_then(UcxTransport::timer),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(at) = timer {
            let left = at.saturating_duration_since(Instant::now());
            wait = Some(wait.map_or(left, |t| t.min(left)));
        }
        let mut file_ready = false;
        let mut ucx_ready = false;
        self.shm_ready.clear();
        self.ucx_ready.clear();
        for ready in self.reactor.wait(wait) {
            moved = true;
            match reactor::owner(ready.token) {
                Some(Owner::Tcp) => self.tcp.on_ready(ready),
                Some(Owner::Shm) => self.shm_ready.push(ready.token),
                Some(Owner::File) => file_ready = true,
                Some(Owner::Ucx) => {
                    ucx_ready = true;
                    self.ucx_ready.push(ready.token);
                }
                None => {}
            }
        }
        if timer.is_some() {
            self.tcp.handle_timers();
        }
        if let Some(ucx) = self.ucx.as_mut().filter(|_| ucx_ready || sleeping) {
            moved |= ucx.poll();
            for &token in &self.ucx_ready {
                ucx.on_ready(token);
            }
        }
        if file_ready {
            if let Some(file) = self.file.as_mut() {
                file.notify();
                moved |= file.poll();
            }
        }
        if let Some(shm) = self.shm.as_mut() {
            if sleeping {
                shm.awake();
            }
            for &token in &self.shm_ready {
                shm.on_ready(token);
            }
            if wants_sleep {
                moved |= shm.poll(self.reactor.registry());
            }
        }
        moved
    }

    /// Drains the transports' events into the router's own: what they
    /// sent and filled, their data-path frames (remembering where each
    /// came from) and aborts. A lost peer is taken in ([`Router::lose`])
    /// only once no frame waits for delivery, so that what the peer sent
    /// before it went reaches the engine before its loss does, and no
    /// payload the peer announced is read after its receive failed.
    #[inline]
    fn collect(&mut self) {
        let (events, origins, losing) = (&mut self.events, &mut self.origins, &mut self.losing);
        if !self.tcp.events.is_empty() {
            drain(&mut self.tcp.events, Owner::Tcp, events, origins, losing);
        }
        if let Some(shm) = self.shm.as_mut().filter(|s| !s.events.is_empty()) {
            drain(&mut shm.events, Owner::Shm, events, origins, losing);
        }
        if let Some(file) = self.file.as_mut().filter(|f| !f.events.is_empty()) {
            drain(&mut file.events, Owner::File, events, origins, losing);
        }
        if let Some(ucx) = self.ucx.as_mut().filter(|u| !u.events.is_empty()) {
            drain(&mut ucx.events, Owner::Ucx, events, origins, losing);
        }
        if self.events.frames.is_empty() && !self.losing.is_empty() {
            for (peer, error) in std::mem::take(&mut self.losing) {
                self.lose(peer, error);
            }
        }
    }

    /// Times a link gave a frame back because it was full
    /// (`NoResource`); a frame offered again and refused again counts
    /// again.
    pub fn link_full(&self) -> u64 {
        self.link_full
    }

    /// Every link (TCP connections, shared-memory channels, UCX
    /// endpoints) and what it holds, by peer.
    pub fn links(&self) -> Vec<crate::transport::resources::LinkUse> {
        let mut out = Vec::new();
        self.tcp.links(&mut out);
        if let Some(shm) = &self.shm {
            shm.links(&mut out);
        }
        if let Some(ucx) = &self.ucx {
            ucx.links(&mut out);
        }
        out.sort_by_key(|link| (link.peer, link.transport));
        out
    }

    /// Connection set-up tries that were retries: TCP connects and
    /// lookups of a peer's shared memory or address after the first.
    pub fn connect_retries(&self) -> u64 {
        self.tcp.connect_retries() + self.route_retries
    }

    /// Routes that could not be settled at their first try: the peer's
    /// address was not known yet, or its segment not ready.
    pub fn route_waits(&self) -> u64 {
        self.route_waits
    }

    /// The transport that carries messages to `peer` (`"self"` for this
    /// process), or `None` while none is chosen yet.
    pub fn transport_of(&self, peer: u32, me: u32) -> Option<&'static str> {
        if peer == me {
            return Some("self");
        }
        match self.peers.route(peer)? {
            Route::Tcp | Route::Shm if self.peers.is_hybrid(peer) => Some("hybrid"),
            Route::Tcp => Some("tcp"),
            Route::Shm => Some("shm"),
            Route::File => Some("file"),
            Route::Ucx => Some("ucx"),
            Route::Pending(_) => None,
        }
    }

    /// Peers known to share this host (those reached by shared memory).
    pub fn local_peers(&self) -> usize {
        self.shm.as_ref().map_or(0, ShmTransport::local_peers)
    }
}

/// What the router is to the runtime: one transport that reaches every
/// peer. Its caps are those of the routes, per peer (`Events::reached`).
impl Transport for Router {
    fn caps(&self) -> Caps {
        self.shm.as_ref().map_or(Caps::NONE, ShmTransport::caps)
    }

    /// Takes every frame: a frame its link cannot take now waits in the
    /// peer's record, in order, and a new one goes behind it. A peer not
    /// reached yet is reached first; a frame for a lost peer is dropped.
    fn send(&mut self, t: Transmit) -> std::result::Result<(), NoResource> {
        let peer = t.peer;
        if self.cap.active() {
            self.peers.touch(peer, self.cap.epoch());
        }
        if !self.peers.has_route(peer) && self.peers.lost(peer).is_none() {
            self.resolve(peer, None, None);
        }
        if self.peers.has_waiting(peer) {
            self.wait(t, false);
        } else if let Some(NoResource(t)) = self.hand_to_route(t) {
            self.wait(t, false);
        }
        self.collect();
        Ok(())
    }

    fn rma(&mut self, op: &RmaOp) -> RmaOutcome {
        let me = self.universe.my_universe_rank();
        let outcome = match self.peers.route(op.peer) {
            Some(Route::Shm) => self.shm.as_mut().map(|shm| shm.rma(op)),
            Some(Route::Ucx) => self.ucx.as_mut().map(|ucx| ucx.rma(op)),
            // Atomics on this process's own window, where its members
            // agreed to take them all through UCX.
            _ if op.peer == me => self.ucx.as_mut().map(|ucx| ucx.rma(op)),
            _ => None,
        };
        self.collect();
        outcome.unwrap_or(RmaOutcome::Now(RmaStatus::Refused))
    }

    fn place(&mut self, peer: u32, sink: PayloadSink) {
        if self.cap.active() {
            self.peers.touch(peer, self.cap.epoch());
        }
        on_origin!(self, |t| t.place(peer, sink));
        self.collect();
    }

    /// The file transport reads the payload (created now if need be:
    /// any peer may be a hybrid, whatever this side's order says).
    fn place_in_file(&mut self, data: FileData) {
        let peer = data.peer;
        let added = self.file().map(|file| file.add_payload(data));
        on_origin!(self, |t| t.place(peer, PayloadSink::None));
        if let Err(e) = added {
            self.fail(peer, e);
        }
        self.collect();
    }

    fn broke_protocol(&mut self, peer: u32, error: WireError) {
        on_origin!(self, |t| t.broke_protocol(peer, error));
        self.collect();
    }

    fn events(&mut self) -> &mut Events {
        &mut self.events
    }

    /// Whether any frame is still queued, in a link or in a record.
    fn has_output(&self) -> bool {
        self.tcp.has_output()
            || self.shm.as_ref().is_some_and(ShmTransport::has_output)
            || self.file.as_ref().is_some_and(FileTransport::has_output)
            || self.ucx.as_ref().is_some_and(UcxTransport::has_output)
            || self.peers.has_queued()
    }

    fn say_goodbye(&mut self) {
        self.tcp.say_goodbye();
        if let Some(shm) = self.shm.as_mut() {
            shm.say_goodbye();
        }
        if let Some(file) = self.file.as_mut() {
            file.say_goodbye();
        }
        if let Some(ucx) = self.ucx.as_mut() {
            ucx.say_goodbye();
        }
        self.collect();
    }

    fn all_goodbyes_heard(&self) -> bool {
        self.tcp.all_goodbyes_heard()
            && self
                .shm
                .as_ref()
                .is_none_or(ShmTransport::all_goodbyes_heard)
            && self
                .file
                .as_ref()
                .is_none_or(FileTransport::all_goodbyes_heard)
            && self
                .ucx
                .as_ref()
                .is_none_or(UcxTransport::all_goodbyes_heard)
    }

    fn broadcast_abort(&mut self, code: i32) {
        self.tcp.broadcast_abort(code);
        if let Some(shm) = self.shm.as_mut() {
            shm.broadcast_abort(code);
        }
        if let Some(file) = self.file.as_mut() {
            file.broadcast_abort(code);
        }
        if let Some(ucx) = self.ucx.as_mut() {
            ucx.broadcast_abort(code);
        }
        self.collect();
    }
}

/// Sends `t` on `link`, through a [`Hybrid`] with `files` when given.
#[inline]
fn send_on<L: Transport>(
    link: &mut L,
    files: Option<&mut FileTransport>,
    threshold: u64,
    t: Transmit,
) -> Option<NoResource> {
    match files {
        Some(files) => Hybrid::new(link, files, threshold).send(t).err(),
        None => link.send(t).err(),
    }
}

/// Moves `from`'s events, reported by `owner`, into the router's
/// `events`, the origins of its frames and the losses it has yet to take
/// in.
fn drain(
    from: &mut Events,
    owner: Owner,
    events: &mut Events,
    origins: &mut VecDeque<Owner>,
    losing: &mut Vec<(u32, Error)>,
) {
    events.sent.append(&mut from.sent);
    events.filled.append(&mut from.filled);
    events.rma_done.append(&mut from.rma_done);
    while let Some(frame) = from.frames.pop_front() {
        events.frames.push_back(frame);
        origins.push_back(owner);
    }
    for event in from.links.drain(..) {
        match event {
            LinkEvent::Lost { peer, error } => losing.push((peer, error)),
            other @ (LinkEvent::Abort { .. } | LinkEvent::RailLost { .. }) => {
                events.links.push(other)
            }
        }
    }
}

//! The router: which transport reaches which peer, and the one place
//! that hands what transports report to the engine and the runtime.
//!
//! [`Transports`] is the one interface the runtime sees. For each peer it
//! picks, on first use, the first transport of `TETHER_TRANSPORTS` that
//! reaches it (`shm`: the peer is on this host, by its published host
//! identity, and its segment can be attached; `tcp`: always), and keeps
//! that choice for the rest of the run, so the frames of one direction of
//! a pair never change transport and MPI's order holds. Frames for a peer
//! whose address or segment is not published yet wait in order, up to
//! `TETHER_CONNECT_TIMEOUT`. What the router knows of each peer is in
//! its record (`peers.rs`); when and how long it tries to reach a peer is
//! the connection policy's (`policy.rs`).
//!
//! Progress: shared memory is polled on every call (a few memory loads);
//! epoll, a system call, only when sleeping, when TCP has connections, or
//! every [`TCP_POLL_EVERY`] calls otherwise (to accept connections and
//! see pidfd events), so a busy-polling wait on shared memory does not
//! pay a system call per round. Sleeping happens in the one epoll, the
//! router's reactor (`transport/reactor.rs`), that watches the sockets, the shared-memory
//! doorbell, the peers' pidfds and the file inbox's inotify descriptor
//! (capped by the file transport's polling schedule where there are no
//! events). Each transport registers under tokens of its own space, and
//! the router hands each ready token to its owner: no transport waits,
//! and none sees another's descriptors.
//!
//! `file` reaches every peer (that shares `TETHER_FILE_DIR`); `hybrid`
//! reaches a peer as `shm` or, failing that, `tcp` would, and additionally
//! sends rendezvous payloads above `TETHER_HYBRID_THRESHOLD` through files
//! (`transport/file/mod.rs`). The file transport is created on first use.
//!
//! The router is the only caller of the engine below the runtime: the
//! transports under `transport/` report [`Events`] and never see the
//! engine (`transport/api.rs`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tether_proto::{
    deliver, Delivery, Engine, FileData, FrameKind, PayloadSink, RmaStatus, Transmit,
};
use tether_rendezvous::Rendezvous;

use crate::addresses::{Addresses, NoAddress};
use crate::error::{err, Error, ErrorClass, Result};
use crate::host;
use crate::peers::{Peers, Pending, Route};
use crate::policy::{ConnectionPolicy, Effect};
use crate::settings::{Key, Settings};
use crate::transport::api::{NoResource, Transport};
use crate::transport::events::{Events, LinkEvent};
use crate::transport::file::{self, FileConfig, FileTransport, NotifyMode};
use crate::transport::reactor::{self, Owner, Reactor};
use crate::transport::shm::{self, AttachError, ShmConfig, ShmTransport};
pub use crate::transport::shm::{Direct, Wanted};
use crate::transport::tcp::{self, TcpConfig, TcpTransport};
use crate::universe::{size_key, PeerAddress, Universe};

mod short_path;
pub use short_path::ShortPath;

/// A busy-polling wait calls epoll once per this many progress calls
/// when TCP has no connection, or reads its few connections directly
/// (a power of two).
pub const TCP_POLL_EVERY: u32 = 64;

/// What exists before the universe is known: the TCP listener and the
/// shared-memory segment, and the address that publishes them.
pub struct Bound {
    reactor: Reactor,
    tcp: tcp::Bound,
    /// The TCP transport's clone of the reactor's registry.
    tcp_registry: mio::Registry,
    tcp_config: TcpConfig,
    policy: ConnectionPolicy,
    shm: Option<shm::Prepared>,
    shm_problem: String,
    host: String,
    pub address: PeerAddress,
    /// Random at every start; a program's rank 0 publishes it with the
    /// program's size (see [`crate::universe::SizeEntry`]).
    pub nonce: u64,
}

/// Why shared memory did not reach a peer (yet).
enum ShmMiss {
    /// Not yet: its address or segment is not there; retried.
    NotYet,
    /// It cannot, for this reason; the next transport decides.
    Cannot(String),
    /// Its process has ended.
    Gone(String),
}

pub struct Transports {
    reactor: Reactor,
    /// Payloads that wait in files (`hybrid`), delivered on a socket or
    /// ring, for the file transport.
    in_file: Vec<FileData>,
    /// Ready shared-memory tokens of the last wait (kept to reuse its memory).
    shm_ready: Vec<mio::Token>,
    tcp: TcpTransport,
    shm: Option<ShmTransport>,
    shm_problem: String,
    peers: Peers,
    policy: ConnectionPolicy,
    order: Vec<String>,
    host: String,
    universe: Arc<Universe>,
    /// Peers' addresses, shared with TCP (`addresses.rs`).
    addresses: Addresses,
    polls: u32,
    /// Created on first use (see [`Transports::file`]).
    file: Option<FileTransport>,
    file_settings: FileSettings,
    hybrid_threshold: u64,
    /// Eager limit of the peers reached through `file`.
    file_eager_limit: u64,
    hybrid_inline_warned: bool,
    /// Aborts of the universe that peers sent (peer, code), for the
    /// runtime; a lost peer is in its record instead.
    pub aborts: Vec<(u32, i32)>,
    /// Lookups of a pending route after its first (counters).
    route_retries: u64,
    /// Times a settled link gave a frame back as full (counters).
    link_full: u64,
}

/// What the file transport needs besides the universe, read at start-up.
struct FileSettings {
    root: PathBuf,
    /// Whether `root` is the per-user default, which must be private.
    private_root: bool,
    /// The run's directory name and the run id its files carry, read at
    /// start-up (universe rank 0's rendezvous entry is removed when it
    /// finalizes), or why they cannot be known.
    run: std::result::Result<(String, u64), Error>,
    fsync: bool,
    notify: NotifyMode,
    poll_min: Duration,
    poll_max: Duration,
    peer_timeout: Duration,
}

impl FileSettings {
    fn new(settings: &Settings, rendezvous: &Rendezvous, universe: &Universe) -> FileSettings {
        let (root, private_root) = match (settings.file_dir(), rendezvous) {
            (Some(dir), _) => (PathBuf::from(dir), false),
            (None, Rendezvous::Dir(store)) => (store.path().join("files"), false),
            (None, Rendezvous::Tcp(_)) => {
                // SAFETY: getuid cannot fail.
                let uid = unsafe { libc::getuid() };
                (
                    std::env::temp_dir().join(format!("tether-files-{uid}")),
                    true,
                )
            }
        };
        FileSettings {
            root,
            private_root,
            run: run_identity(settings.run_id(), universe),
            fsync: settings.file_fsync(),
            notify: NotifyMode::parse(settings.file_notify()),
            poll_min: Duration::from_micros(settings.file_poll_us()),
            poll_max: Duration::from_micros(settings.file_poll_max_us()),
            peer_timeout: Duration::from_secs(settings.file_peer_timeout()),
        }
    }
}

impl Transports {
    /// Listens on TCP and creates the shared-memory segment (a failure of
    /// the latter only disables `shm`, with the reason kept for errors).
    pub fn bind(settings: &Settings) -> Result<Bound> {
        let policy = ConnectionPolicy::new(settings);
        let tcp_config = TcpConfig {
            listen_ip: settings.tcp_interface().unwrap_or("127.0.0.1").to_string(),
            connect_timeout: policy.connect_timeout(),
            handshake_timeout: policy.handshake_timeout(),
            goodbye_timeout: policy.goodbye_timeout(),
        };
        let epoll_error = |e: std::io::Error| err(ErrorClass::Transport, format!("epoll: {e}"));
        let reactor = Reactor::new().map_err(epoll_error)?;
        let tcp_registry = reactor.registry().try_clone().map_err(epoll_error)?;
        let tcp = TcpTransport::bind(tcp_config.clone(), reactor.registry())?;
        let (shm, shm_problem) = match shm::Prepared::create() {
            Ok(p) => (Some(p), String::new()),
            Err(e) => {
                tracing::info!("shared memory is not usable here: {e}");
                (None, format!("not usable in this process: {e}"))
            }
        };
        let host = host::host_id(settings.host_id());
        let address = PeerAddress {
            tcp: tcp.1.to_string(),
            host: host.clone(),
            pid: std::process::id(),
            start: shm.as_ref().map(shm::Prepared::start_time),
            shm: shm.as_ref().map(shm::Prepared::segment_fd),
        };
        Ok(Bound {
            reactor,
            tcp,
            tcp_registry,
            tcp_config,
            policy,
            shm,
            shm_problem,
            host,
            address,
            nonce: host::random_u64(),
        })
    }

    pub fn new(
        bound: Bound,
        settings: &Settings,
        universe: Arc<Universe>,
        rendezvous: Arc<Rendezvous>,
    ) -> Transports {
        let addresses = Addresses::new(universe.clone(), rendezvous.clone());
        let tcp = TcpTransport::new(
            bound.tcp,
            bound.tcp_registry,
            bound.tcp_config,
            universe.clone(),
            rendezvous.clone(),
            addresses.clone(),
        );
        let config = ShmConfig {
            ring_bytes: (settings.shm_ring_bytes() as usize)
                .next_power_of_two()
                .max(4096),
            cma: settings.shm_cma(),
            membarrier: settings.shm_membarrier(),
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
        let file_settings = FileSettings::new(settings, &rendezvous, &universe);
        let mut transports = Transports {
            reactor: bound.reactor,
            in_file: Vec::new(),
            shm_ready: Vec::new(),
            tcp,
            shm,
            shm_problem,
            peers: Peers::default(),
            policy: bound.policy,
            order: settings.transports(),
            host: bound.host,
            universe,
            addresses,
            polls: 0,
            file: None,
            file_settings,
            route_retries: 0,
            link_full: 0,
            hybrid_threshold: settings.hybrid_threshold(),
            file_eager_limit: settings.file_eager_limit(),
            hybrid_inline_warned: false,
            aborts: Vec::new(),
        };
        transports.start_file_inbox();
        transports
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
                connect_timeout: self.policy.connect_timeout(),
                frames: self.order.iter().any(|t| t == "file"),
                eager_limit: self.file_eager_limit,
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

    /// Hands TCP the timeouts of a hint ([`Effect::Timeouts`]); the
    /// router's own deadlines read them from the policy.
    pub fn set_timeouts(&mut self, connect: Duration, handshake: Duration, goodbye: Duration) {
        self.tcp.set_timeouts(connect, handshake, goodbye);
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

    /// Sends an engine frame to its peer over the peer's transport,
    /// choosing it first if needed.
    pub fn send(&mut self, mut t: Transmit, engine: &mut Engine) {
        let peer = t.peer;
        if !self.peers.has_route(peer) {
            self.resolve(peer, engine, None);
            // The engine chose the frame's protocol before the route was
            // known: a rendezvous frame may use remote memory after all.
            engine.revisit(&mut t);
        }
        // The size test first: most frames are not large hybrid data, and
        // it spares them the lookups.
        if t.header.kind == FrameKind::Data
            && t.payload.len() as u64 > self.hybrid_threshold
            && self.peers.is_hybrid(peer)
            && matches!(self.peers.route(peer), Some(Route::Tcp | Route::Shm))
        {
            t = match self.file() {
                Ok(file) => file.send_payload(t),
                Err(e) => {
                    if !self.hybrid_inline_warned {
                        self.hybrid_inline_warned = true;
                        tracing::warn!(
                            "hybrid: large payloads go on the socket, no file transport: {e}"
                        );
                    }
                    t
                }
            };
        }
        if self.peers.has_waiting(peer) {
            self.wait(t, false, engine);
        } else if let Some(NoResource(t)) = self.hand_to_route(t, engine) {
            self.wait(t, false, engine);
        }
        self.hand_over(engine);
    }

    /// Hands `t` to the transport of its peer's route; gives it back when
    /// the route is not settled or the link cannot take it now. A frame
    /// for a peer without a route (lost) is dropped.
    fn hand_to_route(&mut self, t: Transmit, engine: &mut Engine) -> Option<NoResource> {
        let peer = t.peer;
        let refused = match self.peers.route(peer) {
            Some(Route::Tcp) => self.tcp.send(t).err(),
            Some(Route::Shm) => self.shm.as_mut().and_then(|shm| shm.send(t).err()),
            Some(Route::File) => match self.file() {
                Ok(file) => file.send(t).err(),
                Err(e) => {
                    self.fail(peer, e, engine);
                    None
                }
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
    fn wait(&mut self, mut t: Transmit, front: bool, engine: &mut Engine) {
        let settled = !matches!(self.peers.route(t.peer), Some(Route::Pending(_)) | None);
        // SAFETY: the payload is valid until `completes` is reported,
        // which happens only after the copy.
        if t.copy_if_blocked && settled && unsafe { t.payload.make_owned() } {
            if let Some(req) = t.completes.take() {
                engine.transmit_done(req);
            }
        }
        self.peers.wait(t, front);
    }

    /// Offers the frames that wait to their peers' links again.
    fn offer_waiting(&mut self, engine: &mut Engine) {
        for peer in self.peers.waiting_peers() {
            self.offer_waiting_of(peer, engine);
        }
    }

    /// Offers the frames that wait for `peer` to its link, in order, until
    /// the link gives one back.
    fn offer_waiting_of(&mut self, peer: u32, engine: &mut Engine) {
        while let Some(t) = self.peers.next_waiting(peer) {
            if let Some(NoResource(t)) = self.hand_to_route(t, engine) {
                self.wait(t, true, engine);
                break;
            }
        }
    }

    /// Hands what the transports reported to the engine and the runtime
    /// (`events.rs`): completed sends and filled payloads; then each
    /// data-path frame to [`deliver`] and its delivery back to the
    /// transport, which reads on and may report more; payloads that wait
    /// in files to the file transport; then lost peers ([`Transports::lose`])
    /// and aborts.
    /// Returns whether frames or payloads moved.
    #[inline]
    fn hand_over(&mut self, engine: &mut Engine) -> bool {
        let mut moved = false;
        loop {
            self.settle(engine);
            let in_file = &mut self.in_file;
            let delivered = deliver_next(&mut self.tcp, engine, in_file)
                || self
                    .shm
                    .as_mut()
                    .is_some_and(|shm| deliver_next(shm, engine, in_file))
                || self
                    .file
                    .as_mut()
                    .is_some_and(|file| deliver_next(file, engine, in_file));
            if !delivered {
                if self.in_file.is_empty() {
                    break;
                }
                let in_file = std::mem::take(&mut self.in_file);
                self.read_file_payloads(in_file, engine);
            }
            moved = true;
        }
        let mut links = std::mem::take(&mut self.tcp.events.links);
        if let Some(shm) = self.shm.as_mut() {
            links.append(&mut shm.events.links);
        }
        if let Some(file) = self.file.as_mut() {
            links.append(&mut file.events.links);
        }
        for event in links {
            match event {
                LinkEvent::Lost { peer, error } => self.lose(peer, error, engine),
                LinkEvent::Abort { peer, code } => self.aborts.push((peer, code)),
            }
        }
        moved
    }

    /// Carries out the engine's remote memory operations on the transport
    /// of each one's peer, then hands over what the transports reported
    /// (a peer lost by a failed copy).
    pub fn run_rma(&mut self, engine: &mut Engine) {
        while let Some(op) = engine.poll_rma() {
            let status = match (self.peers.route(op.peer), self.shm.as_mut()) {
                (Some(Route::Shm), Some(shm)) => shm.rma(&op),
                _ => RmaStatus::Refused,
            };
            engine.rma_done(op, status);
        }
        self.hand_over(engine);
    }

    /// Hands every transport's completed sends and filled payloads to the
    /// engine.
    #[inline]
    fn settle(&mut self, engine: &mut Engine) {
        settle(self.tcp.events(), engine);
        if let Some(shm) = self.shm.as_mut() {
            settle(shm.events(), engine);
        }
        if let Some(file) = self.file.as_mut() {
            settle(file.events(), engine);
        }
    }

    /// The shared-memory short path (`runtime/direct.rs`), borrowed
    /// apart from the rest of the router.
    #[inline(always)]
    pub fn short_path(&mut self) -> ShortPath<'_> {
        ShortPath::new(&self.peers, self.shm.as_mut())
    }

    pub fn has_route(&self, peer: u32) -> bool {
        self.peers.has_route(peer)
    }

    /// Chooses the transport for `peer` and connects, unless a route
    /// exists: a wait for a receive from a peer this process never sent
    /// to links with it, so that its death is seen (a closed connection,
    /// a refused one, a process gone) instead of waited for.
    pub fn reach(&mut self, peer: u32, engine: &mut Engine) {
        if !self.peers.has_route(peer) {
            self.resolve(peer, engine, None);
        }
    }

    /// Chooses the transport for `peer` now and connects (eager
    /// connections, kernels).
    pub fn start_connect(&mut self, peer: u32, engine: &mut Engine) {
        match self.peers.route(peer) {
            Some(Route::Tcp) => self.tcp.start_connect(peer),
            Some(_) => {}
            None => self.resolve(peer, engine, None),
        }
    }

    /// Chooses the route of `peer` by the transport order; `no_shm` is why
    /// shared memory turned out not to reach it, when it did not.
    fn resolve(&mut self, peer: u32, engine: &mut Engine, no_shm: Option<String>) {
        let mut reasons = Vec::new();
        for name in self.order.clone() {
            match name.as_str() {
                "tcp" => return self.route(peer, Route::Tcp, engine),
                "file" => return self.route(peer, Route::File, engine),
                "shm" | "hybrid" => {
                    if name == "hybrid" {
                        self.peers.set_hybrid(peer);
                    }
                    if let Some(why) = &no_shm {
                        reasons.push(format!("shm: {why}"));
                    } else {
                        match self.try_shm(peer) {
                            Ok(()) => return self.route(peer, Route::Shm, engine),
                            Err(ShmMiss::Gone(problem)) => {
                                return self.lose_gone(peer, &problem, engine)
                            }
                            Err(ShmMiss::Cannot(problem)) => {
                                reasons.push(format!("shm: {problem}"))
                            }
                            Err(ShmMiss::NotYet) => return,
                        }
                    }
                    if name == "hybrid" {
                        return self.route(peer, Route::Tcp, engine);
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
        self.fail(peer, err(ErrorClass::Transport, message), engine);
    }

    /// No transport reaches a process that ended: `peer` is lost, once
    /// what it wrote before it went is delivered (its ring may not have
    /// been found yet: it attached, wrote and exited since the last poll).
    fn lose_gone(&mut self, peer: u32, problem: &str, engine: &mut Engine) {
        if let Some(shm) = self.shm.as_mut() {
            shm.poll(self.reactor.registry());
        }
        self.hand_over(engine);
        let message = format!(
            "{} exited or was killed: {problem}",
            self.universe.describe(peer)
        );
        self.fail(peer, err(ErrorClass::PeerLost, message), engine);
    }

    /// Attaches to `peer`'s segment. `Err(ShmMiss::Cannot(why))`: shm cannot reach
    /// it; `Err(ShmMiss::NotYet)`: not yet (the route is pending);
    /// `Err(ShmMiss::Gone(why))`: its process ended. The peer's address
    /// comes from the address book, which never waits for the rendezvous
    /// (the first try of a peer is `NotYet` while the book looks).
    fn try_shm(&mut self, peer: u32) -> std::result::Result<(), ShmMiss> {
        let Some(shm) = self.shm.as_mut() else {
            return Err(ShmMiss::Cannot(self.shm_problem.clone()));
        };
        let problem = match self.addresses.get(peer) {
            Ok(address) => {
                if address.host != self.host {
                    return Err(ShmMiss::Cannot(format!(
                        "it is on another host ({}; this one is {})",
                        address.host, self.host
                    )));
                }
                let (Some(start), Some(fd)) = (address.start, address.shm) else {
                    return Err(ShmMiss::Cannot("it offers no shared memory".into()));
                };
                match shm.attach(peer, address.pid, start, fd, self.reactor.registry()) {
                    Ok(()) => return Ok(()),
                    Err(AttachError::Unusable(why)) => return Err(ShmMiss::Cannot(why)),
                    Err(AttachError::Gone(why)) => return Err(ShmMiss::Gone(why)),
                    Err(AttachError::NotReady) => "its shared segment never became ready".into(),
                }
            }
            Err(NoAddress::Malformed(why)) => return Err(ShmMiss::Cannot(why)),
            Err(NoAddress::NotYet(why)) => why,
        };
        let now = Instant::now();
        match self.peers.route_mut(peer) {
            Some(Route::Pending(pending)) => {
                pending.problem = problem;
                pending.retry.tried(now);
                self.route_retries += 1;
            }
            _ => {
                let (retry, deadline) = self.policy.after_first_try(now);
                self.peers.set_route(
                    peer,
                    Route::Pending(Pending {
                        deadline,
                        retry,
                        problem,
                    }),
                );
            }
        }
        Err(ShmMiss::NotYet)
    }

    /// Settles the route of `peer`, sending what waited for it in order.
    fn route(&mut self, peer: u32, route: Route, engine: &mut Engine) {
        let tcp = matches!(route, Route::Tcp);
        let file = matches!(route, Route::File);
        let shm = matches!(route, Route::Shm);
        self.peers.set_route(peer, route);
        if tcp {
            tracing::info!("reaching {} over tcp", self.universe.describe(peer));
            self.tcp.start_connect(peer);
        }
        if shm {
            let remote = match self.shm.as_ref().map(|shm| shm.caps().remote_memory) {
                Some(true) if self.peers.is_hybrid(peer) => self.hybrid_threshold,
                Some(true) => u64::MAX,
                _ => 0,
            };
            engine.set_remote_memory(peer, remote);
        }
        if file {
            tracing::info!("reaching {} through files", self.universe.describe(peer));
            // Without the transport, the first send fails the peer.
            if let Some(limit) = self.file().ok().and_then(|f| f.caps().eager_limit) {
                engine.set_peer_eager_limit(peer, limit);
            }
        }
        for t in self.peers.waiting_mut(peer) {
            engine.revisit(t);
        }
        self.offer_waiting_of(peer, engine);
    }

    /// The router gives up on reaching `peer`.
    fn fail(&mut self, peer: u32, error: Error, engine: &mut Engine) {
        self.peers.remove_route(peer);
        self.lose(peer, error, engine);
    }

    /// `peer` is lost, whether a transport or the router found it: the
    /// file transport lets go of what it keeps for the peer's transfers (a
    /// payload waiting in a file), so that it writes into no receive that
    /// fails now; then the engine fails what needs the peer (and drops its
    /// remote memory operations), and the peer's record keeps why, for
    /// the statuses of what failed.
    fn lose(&mut self, peer: u32, error: Error, engine: &mut Engine) {
        if let Some(file) = self.file.as_mut() {
            file.forget(peer);
        }
        self.peers.drop_waiting(peer);
        engine.peer_lost(peer);
        self.peers.lose(peer, error);
    }

    /// Tries again the peers whose route is pending and due for a try;
    /// fails those past their deadline.
    fn retry_pending(&mut self, now: Instant, engine: &mut Engine) {
        let due: Vec<u32> = self
            .peers
            .pending()
            .filter(|(_, p)| p.retry.is_due(now) || now >= p.deadline)
            .map(|(peer, _)| peer)
            .collect();
        for peer in due {
            match self.try_shm(peer) {
                Ok(()) => self.route(peer, Route::Shm, engine),
                Err(ShmMiss::NotYet) => {
                    if let Some(Route::Pending(Pending {
                        deadline, problem, ..
                    })) = self.peers.route(peer)
                    {
                        if now >= *deadline {
                            let message = format!(
                                "{} could not be reached over shared memory within {} s (TETHER_CONNECT_TIMEOUT): {problem}",
                                self.universe.describe(peer),
                                self.policy.connect_timeout().as_secs()
                            );
                            self.fail(peer, err(ErrorClass::Timeout, message), engine);
                        }
                    }
                }
                Err(ShmMiss::Gone(why)) => self.lose_gone(peer, &why, engine),
                Err(ShmMiss::Cannot(why)) => {
                    // Shared memory turned out not to reach it: the next
                    // transport in the order decides, with the queue kept.
                    self.peers.remove_route(peer);
                    self.resolve(peer, engine, Some(why));
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
    pub fn poll(&mut self, timeout: Option<Duration>, engine: &mut Engine) -> bool {
        let mut moved = false;
        if let Some(shm) = self.shm.as_mut() {
            moved |= shm.poll(self.reactor.registry());
        }
        if let Some(file) = self.file.as_mut() {
            moved |= file.poll();
        }
        let mut timeout = timeout;
        if self.peers.has_pending() {
            let now = Instant::now();
            self.retry_pending(now, engine);
            if let Some(at) = self.next_pending() {
                let left = at.saturating_duration_since(now);
                timeout = Some(timeout.map_or(left, |t| t.min(left)));
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
            let sleeping = wants_sleep && self.shm.as_mut().is_none_or(|s| s.prepare_sleep());
            let mut wait = if sleeping {
                timeout
            } else {
                Some(Duration::ZERO)
            };
            // The clock is read only while a TCP timer is armed (connects
            // and handshakes in progress): an established link needs none.
            let timer = self.tcp.timer();
            if let Some(at) = timer {
                let left = at.saturating_duration_since(Instant::now());
                wait = Some(wait.map_or(left, |t| t.min(left)));
            }
            let mut file_ready = false;
            self.shm_ready.clear();
            for ready in self.reactor.wait(wait) {
                moved = true;
                match reactor::owner(ready.token) {
                    Some(Owner::Tcp) => self.tcp.on_ready(ready),
                    Some(Owner::Shm) => self.shm_ready.push(ready.token),
                    Some(Owner::File) => file_ready = true,
                    None => {}
                }
            }
            if timer.is_some() {
                self.tcp.handle_timers();
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
        }
        if self.peers.has_queued() {
            self.offer_waiting(engine);
        }
        moved |= self.hand_over(engine);
        moved
    }

    /// Hands payloads announced on a socket to the file transport.
    fn read_file_payloads(&mut self, payloads: Vec<FileData>, engine: &mut Engine) {
        match self.file() {
            Ok(file) => {
                for payload in payloads {
                    file.add_payload(payload);
                }
                file.poll();
            }
            Err(e) => {
                for payload in payloads {
                    self.fail(payload.peer, e.clone(), engine);
                }
            }
        }
    }

    /// Peers known to share this host (those reached by shared memory).
    /// Connection set-up tries that were retries: TCP connects and
    /// lookups of a peer's shared memory or address after the first.
    /// Times a link gave a frame back because it was full
    /// (`NoResource`); a frame offered again and refused again counts
    /// again.
    pub fn link_full(&self) -> u64 {
        self.link_full
    }

    pub fn connect_retries(&self) -> u64 {
        self.tcp.connect_retries + self.route_retries
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
            Route::Pending(_) => None,
        }
    }

    pub fn local_peers(&self) -> usize {
        self.shm.as_ref().map_or(0, ShmTransport::local_peers)
    }

    /// Whether any frame is still queued (for finalize).
    pub fn has_output(&self) -> bool {
        self.tcp.has_output()
            || self.shm.as_ref().is_some_and(ShmTransport::has_output)
            || self.file.as_ref().is_some_and(FileTransport::has_output)
            || self.peers.has_queued()
    }

    /// Says goodbye on every link of every transport (once).
    pub fn say_goodbye(&mut self, engine: &mut Engine) {
        self.tcp.say_goodbye();
        if let Some(shm) = self.shm.as_mut() {
            shm.say_goodbye();
        }
        if let Some(file) = self.file.as_mut() {
            file.say_goodbye();
        }
        self.hand_over(engine);
    }

    /// Whether every link has both said and heard goodbye.
    pub fn all_goodbyes_heard(&self) -> bool {
        self.tcp.all_goodbyes_heard()
            && self
                .shm
                .as_ref()
                .is_none_or(ShmTransport::all_goodbyes_heard)
            && self
                .file
                .as_ref()
                .is_none_or(FileTransport::all_goodbyes_heard)
    }

    /// Sends an abort on every link, best effort.
    pub fn broadcast_abort(&mut self, code: i32, engine: &mut Engine) {
        self.tcp.broadcast_abort(code);
        if let Some(shm) = self.shm.as_mut() {
            shm.broadcast_abort(code);
        }
        if let Some(file) = self.file.as_mut() {
            file.broadcast_abort(code);
        }
        self.hand_over(engine);
    }
}

/// Hands `events`' completed transmissions and filled payloads to `engine`.
#[inline]
fn settle(events: &mut Events, engine: &mut Engine) {
    for req in events.sent.drain(..) {
        engine.transmit_done(req);
    }
    for (token, owned) in events.filled.drain(..) {
        engine.payload_done(token, owned);
    }
}

/// Delivers the next data-path frame `transport` reported, if any, to the
/// engine and its payload's place back to the transport, which reads on;
/// a payload that waits in a file goes to `in_file`. Whether there was one.
fn deliver_next<T: Transport>(
    transport: &mut T,
    engine: &mut Engine,
    in_file: &mut Vec<FileData>,
) -> bool {
    let Some((peer, header)) = transport.events().frames.pop_front() else {
        return false;
    };
    match deliver(engine, peer, &header) {
        Ok(Delivery::Payload(sink)) => transport.place(peer, sink),
        Ok(Delivery::InFile(data)) => {
            in_file.push(data);
            transport.place(peer, PayloadSink::None);
        }
        Err(e) => transport.broke_protocol(peer, e),
    }
    true
}

/// The run's directory name and run id, the same in every process of the
/// run and different in every run. The name is `TETHER_RUN_ID` when set
/// (by `tether run` or the user), else universe rank 0's random start-up
/// nonce and the universe id; the id hashes the name with that nonce, so
/// even a rerun under the same `TETHER_RUN_ID` refuses the files an
/// earlier run left behind. The nonce comes from rank 0's size entry,
/// which every process read while joining: rank 0's address, removed when
/// it finalizes, may already be gone when a slow process gets here.
fn run_identity(
    run_id: Option<&str>,
    universe: &Universe,
) -> std::result::Result<(String, u64), Error> {
    let nonce = universe.run_nonce;
    let name = match (run_id, nonce) {
        (Some(id), _) if file::is_safe_run_name(id) => id.to_string(),
        (Some(id), _) => format!("{:016x}", file::format::run_id(id)),
        (None, Some(nonce)) => format!("{nonce:016x}{:016x}", universe.id),
        (None, None) => {
            let message = format!(
                "cannot name the run: universe rank 0's rendezvous entry {} has no start-up nonce (written by an older Tether); set TETHER_RUN_ID",
                size_key(&universe.programs[0].name)
            );
            return Err(err(ErrorClass::File, message));
        }
    };
    let salted = match nonce {
        Some(nonce) => format!("{name}/{nonce:016x}"),
        None => name.clone(),
    };
    Ok((name, file::format::run_id(&salted)))
}

//! Transports: how bytes move between two processes, and which one is
//! used for which peer.
//!
//! [`Transports`] is the one interface the runtime sees. For each peer it
//! picks, on first use, the first transport of `TETHER_TRANSPORTS` that
//! reaches it (`shm`: the peer is on this host, by its published host
//! identity, and its segment can be attached; `tcp`: always), and keeps
//! that choice for the rest of the run, so the frames of one direction of
//! a pair never change transport and MPI's order holds. Frames for a peer
//! whose address or segment is not published yet wait in order, up to
//! `TETHER_CONNECT_TIMEOUT`.
//!
//! Progress: shared memory is polled on every call (a few memory loads);
//! epoll, a system call, only when sleeping, when TCP has connections, or
//! every [`TCP_POLL_EVERY`] calls otherwise (to accept connections and
//! see pidfd events), so a busy-polling wait on shared memory does not
//! pay a system call per round. Sleeping happens in the one epoll that
//! watches the sockets, the shared-memory doorbell and the peers' pidfds.

pub mod shm;
pub mod tcp;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tether_proto::{Engine, Transmit};
use tether_rendezvous::Rendezvous;

use crate::error::{err, Error, ErrorClass, Result};
use crate::host;
use crate::settings::Settings;
use crate::universe::{addr_key, PeerAddress, Universe};
use shm::{AttachError, ShmConfig, ShmTransport};
use tcp::{TcpConfig, TcpTransport};

/// A busy-polling wait calls epoll once per this many progress calls
/// when TCP has no connection (a power of two).
pub const TCP_POLL_EVERY: u32 = 64;
/// Longest sleep while a peer's route is still undecided.
const PENDING_RETRY: Duration = Duration::from_millis(2);

/// What happened to a peer, for the runtime.
#[derive(Debug)]
pub enum LinkEvent {
    /// The peer can no longer be reached; pending work with it fails with `error`.
    Lost { peer: u32, error: Error },
    /// The peer aborted the universe.
    Abort { peer: u32, code: i32 },
}

/// What exists before the universe is known: the TCP listener and the
/// shared-memory segment, and the address that publishes them.
pub struct Bound {
    tcp: tcp::Bound,
    tcp_config: TcpConfig,
    shm: Option<shm::Prepared>,
    shm_problem: String,
    host: String,
    pub address: PeerAddress,
}

enum Route {
    Tcp,
    Shm,
    Pending {
        queue: VecDeque<Transmit>,
        deadline: Instant,
        problem: String,
    },
}

pub struct Transports {
    tcp: TcpTransport,
    shm: Option<ShmTransport>,
    shm_problem: String,
    routes: HashMap<u32, Route>,
    order: Vec<String>,
    host: String,
    universe: Arc<Universe>,
    rendezvous: Arc<Rendezvous>,
    connect_timeout: Duration,
    polls: u32,
    pub events_out: Vec<LinkEvent>,
}

impl Transports {
    /// Listens on TCP and creates the shared-memory segment (a failure of
    /// the latter only disables `shm`, with the reason kept for errors).
    pub fn bind(settings: &Settings) -> Result<Bound> {
        let tcp_config = TcpConfig {
            listen_ip: settings
                .get("TCP_INTERFACE")
                .unwrap_or("127.0.0.1")
                .to_string(),
            connect_timeout: Duration::from_secs(settings.number("CONNECT_TIMEOUT")),
            handshake_timeout: Duration::from_secs(settings.number("HANDSHAKE_TIMEOUT")),
        };
        let tcp = TcpTransport::bind(tcp_config.clone())?;
        let (shm, shm_problem) = match shm::Prepared::create() {
            Ok(p) => (Some(p), String::new()),
            Err(e) => {
                tracing::info!("shared memory is not usable here: {e}");
                (None, format!("not usable in this process: {e}"))
            }
        };
        let host = host::host_id(settings.text("HOST_ID"));
        let address = PeerAddress {
            tcp: tcp.2.to_string(),
            host: host.clone(),
            pid: std::process::id(),
            start: shm.as_ref().map(shm::Prepared::start_time),
            shm: shm.as_ref().map(shm::Prepared::segment_fd),
        };
        Ok(Bound {
            tcp,
            tcp_config,
            shm,
            shm_problem,
            host,
            address,
        })
    }

    pub fn new(
        bound: Bound,
        settings: &Settings,
        universe: Arc<Universe>,
        rendezvous: Arc<Rendezvous>,
    ) -> Transports {
        let connect_timeout = bound.tcp_config.connect_timeout;
        let tcp = TcpTransport::new(
            bound.tcp,
            bound.tcp_config,
            universe.clone(),
            rendezvous.clone(),
        );
        let config = ShmConfig {
            ring_bytes: (settings.number("SHM_RING_BYTES") as usize)
                .next_power_of_two()
                .max(4096),
            cma: settings.flag("SHM_CMA"),
        };
        let mut shm_problem = bound.shm_problem;
        let shm = bound.shm.and_then(|prepared| {
            ShmTransport::new(prepared, universe.clone(), config, tcp.registry())
                .map_err(|e| {
                    tracing::info!("shared memory is not usable here: {e}");
                    shm_problem = format!("not usable in this process: {e}");
                })
                .ok()
        });
        Transports {
            tcp,
            shm,
            shm_problem,
            routes: HashMap::new(),
            order: settings.list("TRANSPORTS"),
            host: bound.host,
            universe,
            rendezvous,
            connect_timeout,
            polls: 0,
            events_out: Vec::new(),
        }
    }

    /// Changes the transport order for peers not reached yet.
    pub fn set_order(&mut self, order: Vec<String>) {
        self.order = order;
    }

    pub fn set_timeouts(&mut self, connect: Duration, handshake: Duration) {
        self.connect_timeout = connect;
        self.tcp.set_timeouts(connect, handshake);
    }

    /// Sends an engine frame to its peer over the peer's transport,
    /// choosing it first if needed.
    pub fn send(&mut self, t: Transmit, engine: &mut Engine) {
        let peer = t.peer;
        if !self.routes.contains_key(&peer) {
            self.resolve(peer, engine);
        }
        match self.routes.get_mut(&peer) {
            Some(Route::Tcp) => self.tcp.send(t, engine),
            Some(Route::Shm) => self
                .shm
                .as_mut()
                .expect("a shm route has shm")
                .send(t, engine),
            Some(Route::Pending { queue, .. }) => queue.push_back(t),
            None => {}
        }
    }

    /// Chooses the transport for `peer` now and connects (eager
    /// connections, kernels).
    pub fn start_connect(&mut self, peer: u32, engine: &mut Engine) {
        match self.routes.get(&peer) {
            Some(Route::Tcp) => self.tcp.start_connect(peer),
            Some(_) => {}
            None => self.resolve(peer, engine),
        }
    }

    fn resolve(&mut self, peer: u32, engine: &mut Engine) {
        let mut reasons = Vec::new();
        for name in self.order.clone() {
            match name.as_str() {
                "tcp" => return self.route(peer, Route::Tcp, engine),
                "shm" => match self.try_shm(peer) {
                    Ok(()) => return self.route(peer, Route::Shm, engine),
                    Err(Some(problem)) => reasons.push(format!("shm: {problem}")),
                    Err(None) => return,
                },
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

    /// Attaches to `peer`'s segment. `Err(Some(why))`: shm cannot reach
    /// it; `Err(None)`: not yet (the route is pending).
    fn try_shm(&mut self, peer: u32) -> std::result::Result<(), Option<String>> {
        let Some(shm) = self.shm.as_mut() else {
            return Err(Some(self.shm_problem.clone()));
        };
        let (program, rank) = self.universe.locate(peer).expect("peer in universe");
        let key = addr_key(&self.universe.programs[program].name, rank);
        let problem = match self.rendezvous.get(&key) {
            Ok(Some(text)) => {
                let Some(address) = PeerAddress::decode(&text) else {
                    return Err(Some(format!("its rendezvous entry {text:?} is malformed")));
                };
                if address.host != self.host {
                    return Err(Some(format!(
                        "it is on another host ({}; this one is {})",
                        address.host, self.host
                    )));
                }
                let (Some(start), Some(fd)) = (address.start, address.shm) else {
                    return Err(Some("it offers no shared memory".into()));
                };
                match shm.attach(peer, address.pid, start, fd, self.tcp.registry()) {
                    Ok(()) => return Ok(()),
                    Err(AttachError::Unusable(why)) => return Err(Some(why)),
                    Err(AttachError::NotReady) => "its shared segment never became ready".into(),
                }
            }
            Ok(None) => "its address never appeared in the rendezvous".to_string(),
            Err(e) => e.to_string(),
        };
        match self.routes.get_mut(&peer) {
            Some(Route::Pending { problem: p, .. }) => *p = problem,
            _ => {
                let deadline = Instant::now() + self.connect_timeout;
                self.routes.insert(
                    peer,
                    Route::Pending {
                        queue: VecDeque::new(),
                        deadline,
                        problem,
                    },
                );
            }
        }
        Err(None)
    }

    /// Settles the route of `peer`, sending what waited for it in order.
    fn route(&mut self, peer: u32, route: Route, engine: &mut Engine) {
        let tcp = matches!(route, Route::Tcp);
        let queued = match self.routes.insert(peer, route) {
            Some(Route::Pending { queue, .. }) => queue,
            _ => VecDeque::new(),
        };
        if tcp {
            tracing::info!("reaching {} over tcp", self.universe.describe(peer));
            self.tcp.start_connect(peer);
        }
        for t in queued {
            self.send(t, engine);
        }
    }

    fn fail(&mut self, peer: u32, error: Error, engine: &mut Engine) {
        self.routes.remove(&peer);
        engine.peer_lost(peer);
        self.events_out.push(LinkEvent::Lost { peer, error });
    }

    /// Tries again the peers whose route is pending; fails those past
    /// their deadline.
    fn retry_pending(&mut self, engine: &mut Engine) {
        let pending: Vec<u32> = self
            .routes
            .iter()
            .filter(|(_, r)| matches!(r, Route::Pending { .. }))
            .map(|(p, _)| *p)
            .collect();
        let now = Instant::now();
        for peer in pending {
            match self.try_shm(peer) {
                Ok(()) => self.route(peer, Route::Shm, engine),
                Err(None) => {
                    if let Some(Route::Pending {
                        deadline, problem, ..
                    }) = self.routes.get(&peer)
                    {
                        if now >= *deadline {
                            let message = format!(
                                "{} could not be reached over shared memory within {} s (TETHER_CONNECT_TIMEOUT): {problem}",
                                self.universe.describe(peer),
                                self.connect_timeout.as_secs()
                            );
                            self.fail(peer, err(ErrorClass::Timeout, message), engine);
                        }
                    }
                }
                Err(Some(_)) => {
                    // Shared memory turned out not to reach it: the next
                    // transport in the order decides, with the queue kept.
                    let queue = match self.routes.remove(&peer) {
                        Some(Route::Pending { queue, .. }) => queue,
                        _ => VecDeque::new(),
                    };
                    let order = self.order.clone();
                    self.order.retain(|t| t != "shm");
                    self.resolve(peer, engine);
                    self.order = order;
                    for t in queue {
                        self.send(t, engine);
                    }
                }
            }
        }
    }

    fn has_pending(&self) -> bool {
        self.routes
            .values()
            .any(|r| matches!(r, Route::Pending { .. }))
    }

    /// One round of progress, sleeping up to `timeout` in epoll if nothing
    /// moved (see the module documentation). Returns whether bytes moved.
    pub fn poll(&mut self, timeout: Option<Duration>, engine: &mut Engine) -> bool {
        let mut moved = false;
        if let Some(shm) = self.shm.as_mut() {
            moved |= shm.poll(engine, self.tcp.registry());
        }
        let mut timeout = timeout;
        if self.has_pending() {
            self.retry_pending(engine);
            timeout = timeout.map(|t| t.min(PENDING_RETRY));
        }
        let wants_sleep = timeout != Some(Duration::ZERO) && !moved;
        self.polls = self.polls.wrapping_add(1);
        let tcp_due = wants_sleep
            || self.shm.is_none()
            || self.tcp.is_busy()
            || self.polls & (TCP_POLL_EVERY - 1) == 0;
        if tcp_due {
            let sleeping = wants_sleep && self.shm.as_mut().is_none_or(|s| s.prepare_sleep());
            let wait = if sleeping {
                timeout
            } else {
                Some(Duration::ZERO)
            };
            moved |= self.tcp.poll(wait, engine);
            let ready = std::mem::take(&mut self.tcp.foreign);
            if let Some(shm) = self.shm.as_mut() {
                if sleeping {
                    shm.awake();
                }
                for token in ready {
                    shm.on_ready(token, engine);
                }
                if wants_sleep {
                    moved |= shm.poll(engine, self.tcp.registry());
                }
            }
        }
        self.events_out.append(&mut self.tcp.events_out);
        if let Some(shm) = self.shm.as_mut() {
            self.events_out.append(&mut shm.events_out);
        }
        moved
    }

    /// Whether any frame is still queued (for finalize).
    pub fn has_output(&self) -> bool {
        self.tcp.has_output()
            || self.shm.as_ref().is_some_and(ShmTransport::has_output)
            || self
                .routes
                .values()
                .any(|r| matches!(r, Route::Pending { queue, .. } if !queue.is_empty()))
    }

    /// Says goodbye on every link of every transport (once).
    pub fn say_goodbye(&mut self, engine: &mut Engine) {
        self.tcp.say_goodbye(engine);
        if let Some(shm) = self.shm.as_mut() {
            shm.say_goodbye(engine);
        }
    }

    /// Whether every link has both said and heard goodbye.
    pub fn all_goodbyes_heard(&self) -> bool {
        self.tcp.all_goodbyes_heard()
            && self
                .shm
                .as_ref()
                .is_none_or(ShmTransport::all_goodbyes_heard)
    }

    /// Sends an abort on every link, best effort.
    pub fn broadcast_abort(&mut self, code: i32, engine: &mut Engine) {
        self.tcp.broadcast_abort(code, engine);
        if let Some(shm) = self.shm.as_mut() {
            shm.broadcast_abort(code, engine);
        }
    }
}

/// Whether each transport this build has can be used in this process, and
/// why not (for `tether info`).
pub fn availability() -> Vec<(&'static str, std::result::Result<String, String>)> {
    vec![
        ("shm", shm::availability()),
        (
            "tcp",
            Ok("usable: non-blocking sockets on epoll, on loopback or TETHER_TCP_INTERFACE".into()),
        ),
    ]
}

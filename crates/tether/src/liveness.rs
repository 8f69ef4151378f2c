//! Silent peers: a heartbeat thread per process that asks the peers this
//! process depends on whether they are there, and gives up those that do
//! not answer within `TETHER_PEER_TIMEOUT`.
//!
//! Why a thread and datagrams. A stopped process (SIGSTOP, a suspended
//! job), a host that vanished or a firewall that drops everything leave
//! TCP connections and shared-memory rings silent without closing them,
//! and the kernel's TCP keepalive cannot tell: the kernel answers for a
//! stopped process. A thread inside the peer stops with it, yet runs
//! while the peer's program computes for hours without calling Tether,
//! so its answers say exactly "the process runs". It answers on a UDP
//! socket of its own (published in the process's address as `beat=`),
//! because the links are the application thread's: a heartbeat on them
//! would wait for the program's next call. Datagrams reach every peer a
//! socket transport reaches (tcp, shm, hybrid; on this host over
//! loopback); peers reached only through files keep the file transport's
//! own heartbeat file, rewritten by a thread too (`transport/file/`),
//! judged by the same timeout.
//!
//! The protocol: every timeout/4 the thread pings each watched peer
//! (`wire.rs`), and a peer's thread answers each ping at once. A watched
//! peer whose answers stop for the timeout is given up (`watch.rs` holds
//! the rules and their virtual-time tests): the thread records a verdict
//! and the router, which checks one atomic flag per progress round,
//! abandons the peer's links and fails everything pending with it with
//! `TETHER_ERR_PEER_LOST`. A process that gave a peer up answers that
//! peer's later pings with "given up", so a peer that resumes (SIGCONT)
//! learns it was lost instead of waiting on a link nobody reads. A
//! process that finalizes says goodbye, so that its silence after that is
//! no failure. The engine is not involved: timers and sockets are the
//! runtime's.
//!
//! Cost on the data path: none. Nothing is sent or read per message;
//! the router's check is one relaxed load per progress round; the thread
//! sleeps in `recvfrom` between pings.

mod watch;
mod wire;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::addresses::Addresses;
use crate::universe::{PeerAddress, Universe};
use watch::Watch;
pub use watch::{period, Silent};
use wire::{Beat, Kind};

/// What the thread found about a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No answer for `silent`, at least the timeout.
    Silent(Silent),
    /// `peer` gave this process up: it heard nothing from this process
    /// for its timeout (this process was stopped, or the network dropped
    /// the heartbeats).
    GaveUpOnMe { peer: u32 },
}

#[derive(Default)]
struct Control {
    watch: Vec<u32>,
    forget: Vec<u32>,
    given_up: Vec<u32>,
    verdicts: Vec<Verdict>,
}

struct Shared {
    control: Mutex<Control>,
    /// Verdicts wait in `control`: the one word progress reads.
    verdicts: AtomicBool,
    /// The router asked for a change: the thread takes it in at once.
    changed: AtomicBool,
    stop: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Control> {
        self.control.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Binds the heartbeat socket on `ip` (any port), before the address
/// that publishes its port is written.
pub fn bind(ip: &str) -> std::io::Result<UdpSocket> {
    let ip: IpAddr = ip
        .parse()
        .map_err(|_| std::io::Error::other(format!("{ip:?} is not an IP address")))?;
    UdpSocket::bind(SocketAddr::new(ip, 0))
}

/// Where `address`'s heartbeats are answered, if it publishes a port.
pub fn target(address: &PeerAddress) -> Option<SocketAddr> {
    let port = address.beat?;
    let ip = address.tcp.parse::<SocketAddr>().ok()?.ip();
    let ip = if ip.is_unspecified() {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        ip
    };
    Some(SocketAddr::new(ip, port))
}

/// The tag every heartbeat of this run carries: the universe id mixed
/// with universe rank 0's start-up nonce, so that another run of the
/// same programs is told apart.
fn run_tag(universe: &Universe) -> u64 {
    universe.id ^ universe.run_nonce.unwrap_or(0).rotate_left(29)
}

/// The process's heartbeat thread and what the router asks of it.
pub struct Liveness {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Option<Duration>>>,
    /// The thread's socket, to wake it at the end.
    wake: Option<(UdpSocket, SocketAddr)>,
    /// 0: this process gives nobody up (it still answers).
    timeout: Duration,
    /// Peers handed to the thread (main-thread copy, so that watching
    /// again costs no lock).
    watched: HashSet<u32>,
}

impl Liveness {
    /// A process that answers nothing and watches nobody (no socket).
    pub fn off() -> Liveness {
        Liveness {
            shared: Arc::new(Shared {
                control: Mutex::new(Control::default()),
                verdicts: AtomicBool::new(false),
                changed: AtomicBool::new(false),
                stop: AtomicBool::new(false),
            }),
            thread: None,
            wake: None,
            timeout: Duration::ZERO,
            watched: HashSet::default(),
        }
    }

    /// Starts the thread on `socket`: it answers peers' pings from now
    /// on, and with a non-zero `timeout` watches the peers it is given.
    pub fn start(
        socket: UdpSocket,
        timeout: Duration,
        universe: &Universe,
        addresses: Addresses,
        key: Option<Arc<tether_auth::Key>>,
    ) -> Liveness {
        let mut liveness = Liveness::off();
        liveness.timeout = timeout;
        let wake = socket.try_clone().and_then(|s| {
            let mut at = s.local_addr()?;
            if at.ip().is_unspecified() {
                at.set_ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
            }
            Ok((s, at))
        });
        let state = Thread {
            shared: liveness.shared.clone(),
            socket,
            addresses,
            run: run_tag(universe),
            me: universe.my_universe_rank(),
            size: universe.size(),
            watch: (!timeout.is_zero()).then(|| Watch::new(timeout, Instant::now())),
            timeout,
            address_retry: ADDRESS_RETRY,
            refused: HashSet::default(),
            pingers: HashMap::default(),
            count: 0,
            key,
            last_count: HashMap::default(),
            out: Vec::new(),
        };
        match (
            wake,
            std::thread::Builder::new()
                .name("tether-liveness".into())
                .spawn(move || state.run()),
        ) {
            (Ok(wake), Ok(handle)) => {
                liveness.wake = Some(wake);
                liveness.thread = Some(handle);
            }
            (_, Err(e)) | (Err(e), _) => {
                tracing::warn!("cannot start the heartbeat thread ({e}): silent peers are not detected, and peers that watch this process will give it up");
                liveness.timeout = Duration::ZERO;
            }
        }
        liveness
    }

    /// `TETHER_PEER_TIMEOUT`, or zero when this process watches nobody.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Watches `peer` from now on (a link to it was settled). The
    /// thread is woken, so that its silence is counted from now, not from
    /// the thread's next round.
    pub fn watch(&mut self, peer: u32) {
        if !self.timeout.is_zero() && self.watched.insert(peer) {
            self.shared.lock().watch.push(peer);
            self.wake_thread();
        }
    }

    fn wake_thread(&self) {
        self.shared.changed.store(true, Ordering::Release);
        if let Some((socket, at)) = &self.wake {
            let _ = socket.send_to(b"wake", at);
        }
    }

    /// Stops watching `peer`: lost for another reason, or finalized.
    pub fn forget(&mut self, peer: u32) {
        if self.watched.remove(&peer) {
            self.shared.lock().forget.push(peer);
        }
    }

    /// This process gave `peer` up: its later pings are answered "given
    /// up".
    pub fn give_up(&mut self, peer: u32) {
        self.watched.remove(&peer);
        let mut control = self.shared.lock();
        control.forget.push(peer);
        control.given_up.push(peer);
    }

    /// Whether verdicts wait ([`Liveness::take_verdicts`]): one load.
    #[inline(always)]
    pub fn has_verdicts(&self) -> bool {
        self.shared.verdicts.load(Ordering::Relaxed)
    }

    pub fn take_verdicts(&mut self) -> Vec<Verdict> {
        let mut control = self.shared.lock();
        self.shared.verdicts.store(false, Ordering::Relaxed);
        let verdicts = std::mem::take(&mut control.verdicts);
        for v in &verdicts {
            let (Verdict::Silent(Silent { peer, .. }) | Verdict::GaveUpOnMe { peer }) = *v;
            self.watched.remove(&peer);
        }
        verdicts
    }
}

impl Drop for Liveness {
    /// Stops the thread, which says goodbye to the peers it knows first.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.wake_thread();
        if let Some(thread) = self.thread.take() {
            if let Ok(Some(longest)) = thread.join() {
                tracing::info!(
                    "heartbeats: the longest a watched peer went unheard before it answered was {} ms (pings every {} ms, TETHER_PEER_TIMEOUT={} s)",
                    longest.as_millis(),
                    period(self.timeout).as_millis(),
                    self.timeout.as_secs()
                );
            }
        }
    }
}

/// What the thread owns.
struct Thread {
    shared: Arc<Shared>,
    socket: UdpSocket,
    addresses: Addresses,
    run: u64,
    me: u32,
    size: u32,
    /// `None`: answers only (a zero timeout).
    watch: Option<Watch>,
    timeout: Duration,
    /// How soon to ask the address book again for an address it lacked.
    address_retry: Duration,
    /// Peers this process gave up: their pings are answered so.
    refused: HashSet<u32>,
    /// Where each peer that pinged this process pings from (its goodbye
    /// goes there).
    pingers: HashMap<u32, SocketAddr>,
    count: u64,
    /// The run's key: beats are sealed with it (`wire.rs`).
    key: Option<Arc<tether_auth::Key>>,
    /// The highest count heard from each peer in a ping (`.0`) and
    /// echoed in a pong (`.1`): a beat with a count not above it is a
    /// replay (or came late) and does not count as hearing the peer.
    last_count: HashMap<u32, (u64, u64)>,
    /// The datagram being sent (kept to reuse its memory).
    out: Vec<u8>,
}

/// How soon the thread first asks the address book again for a watched
/// peer's address it did not have (the book has started looking); the
/// interval doubles up to the ping period.
const ADDRESS_RETRY: Duration = Duration::from_millis(5);

/// The longest the thread sleeps in one `recvfrom` (it also checks the
/// stop flag then).
const MAX_SLEEP: Duration = Duration::from_secs(1);

impl Thread {
    /// Answers and pings until stopped; returns the longest a watched
    /// peer went unheard before it answered (when it watched any).
    fn run(mut self) -> Option<Duration> {
        let mut buf = [0u8; 128];
        while !self.shared.stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            let wake = match self.watch.is_some() {
                true => self.round(now),
                false => {
                    self.shared.changed.store(false, Ordering::Relaxed);
                    now + MAX_SLEEP
                }
            };
            loop {
                let left = wake.saturating_duration_since(Instant::now());
                if left.is_zero()
                    || self.shared.stop.load(Ordering::Relaxed)
                    || self.shared.changed.load(Ordering::Acquire)
                {
                    break;
                }
                let _ = self.socket.set_read_timeout(Some(left.min(MAX_SLEEP)));
                match self.socket.recv_from(&mut buf) {
                    Ok((n, from)) => self.on_datagram(&buf[..n], from),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) => {
                        // An ICMP error of an earlier send, on some
                        // systems: nothing to do but go on.
                        tracing::debug!("heartbeat socket: {e}");
                    }
                }
            }
        }
        self.say_goodbye();
        self.watch.as_ref().map(Watch::longest)
    }

    /// Takes in the router's changes, pings, and gives up the silent;
    /// returns when to wake next.
    fn round(&mut self, now: Instant) -> Instant {
        let Some(watch) = self.watch.as_mut() else {
            return now + MAX_SLEEP;
        };
        if watch.tick(now) {
            tracing::info!(
                "the heartbeat thread woke more than {:?} late: this process was stopped or starved; every peer's silence is counted from now",
                watch::period(self.timeout)
            );
        }
        {
            let mut control = self.shared.lock();
            self.shared.changed.store(false, Ordering::Relaxed);
            for peer in control.watch.drain(..) {
                watch.watch(peer, now);
                self.address_retry = ADDRESS_RETRY;
            }
            for peer in control.forget.drain(..) {
                watch.forget(peer);
            }
            self.refused.extend(control.given_up.drain(..));
        }
        let unknown: Vec<u32> = watch.without_target().collect();
        let mut new = Vec::new();
        for peer in unknown {
            match self.addresses.get(peer).ok().map(|a| target(&a)) {
                Some(Some(at)) => {
                    watch.set_target(peer, at, now);
                    new.push((peer, at));
                }
                // An address without a heartbeat port (an older Tether):
                // this process cannot ask it.
                Some(None) => {
                    tracing::info!("universe rank {peer} publishes no heartbeat port: its silence is not watched");
                    watch.forget(peer);
                }
                None => {}
            }
        }
        // A new peer is asked at once: its grace started now.
        new.extend(watch.due_pings(now));
        let gone = watch.expired(now);
        let mut wake = watch.next_wake(now);
        if watch.without_target().next().is_some() {
            // The address book is looking the address up: ask again
            // soon, then less and less often.
            wake = wake.min(now + self.address_retry);
            self.address_retry = (self.address_retry * 2).min(watch::period(self.timeout));
        }
        for (peer, at) in new {
            self.count += 1;
            self.send(Kind::Ping, peer, self.count, at);
        }
        if !gone.is_empty() {
            let mut control = self.shared.lock();
            control
                .verdicts
                .extend(gone.into_iter().map(Verdict::Silent));
            self.shared.verdicts.store(true, Ordering::Relaxed);
        }
        wake
    }

    fn on_datagram(&mut self, bytes: &[u8], from: SocketAddr) {
        let key = self.key.as_deref();
        let Some(beat) = Beat::decode_with(bytes, key, self.run, self.me, self.size) else {
            return;
        };
        if !self.fresh(&beat) {
            return;
        }
        let now = Instant::now();
        match beat.kind {
            Kind::Ping => {
                self.pingers.insert(beat.from, from);
                let kind = if self.refused.contains(&beat.from) {
                    Kind::GivenUp
                } else {
                    Kind::Pong
                };
                self.send(kind, beat.from, beat.count, from);
                if let Some(watch) = self.watch.as_mut() {
                    watch.heard(beat.from, from, now);
                }
            }
            Kind::Pong => {
                if let Some(watch) = self.watch.as_mut() {
                    watch.heard(beat.from, from, now);
                }
            }
            Kind::GivenUp => {
                if let Some(watch) = self.watch.as_mut().filter(|w| w.is_watched(beat.from)) {
                    watch.forget(beat.from);
                    let mut control = self.shared.lock();
                    control
                        .verdicts
                        .push(Verdict::GaveUpOnMe { peer: beat.from });
                    self.shared.verdicts.store(true, Ordering::Relaxed);
                }
            }
            Kind::Goodbye => {
                self.pingers.remove(&beat.from);
                if let Some(watch) = self.watch.as_mut() {
                    watch.forget(beat.from);
                }
            }
        }
    }

    /// Whether a ping or pong carries a count above the last one heard
    /// of its kind from its peer (then noted); other kinds always are.
    fn fresh(&mut self, beat: &Beat) -> bool {
        let last = self.last_count.entry(beat.from).or_default();
        let seen = match beat.kind {
            Kind::Ping => &mut last.0,
            Kind::Pong => &mut last.1,
            Kind::GivenUp | Kind::Goodbye => return true,
        };
        if beat.count <= *seen {
            return false;
        }
        *seen = beat.count;
        true
    }

    fn send(&mut self, kind: Kind, to: u32, count: u64, at: SocketAddr) {
        let beat = Beat {
            kind,
            run: self.run,
            from: self.me,
            to,
            count,
        };
        beat.encode_with(self.key.as_deref(), &mut self.out);
        let _ = self.socket.send_to(&self.out, at);
    }

    /// Tells every peer that pinged this process, and every peer it
    /// watches, that its silence from now on is a finalize.
    fn say_goodbye(&mut self) {
        let mut to: HashMap<u32, SocketAddr> = std::mem::take(&mut self.pingers);
        if let Some(watch) = self.watch.as_ref() {
            to.extend(watch.targets());
        }
        for (peer, at) in to {
            self.send(Kind::Goodbye, peer, 0, at);
        }
    }
}

//! The runtime of one process: start-up, the progress loop, point-to-point
//! operations on communicators, hints, finalize and abort.
//!
//! Threading: a `Runtime` is used from one thread at a time (the C layer
//! serialises calls behind a lock). Progress happens inside calls: every
//! test, wait, probe and send moves the engine and the sockets forward.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap as HashMap;
use tether_proto::{Completion, CompletionError, Engine, EngineConfig, Region, ReqId};
use tether_rendezvous::Rendezvous;

use crate::comm::{Comm, CommTable};

mod active;
mod activities;
mod aliasing;
mod collective_activity;
mod collectives;
mod communicators;
mod direct;
mod fields;
mod stats;
mod traced;
mod windows;

use crate::error::{err, Error, ErrorClass, Result};
use crate::identity::{self, Identity};
use crate::policy::Effect;
use crate::progress::{Polling, SpinPolicy};
use crate::router::Transports;
use crate::settings::Settings;
use crate::trace::Span;
use crate::universe::{self, addr_key, Universe};
pub use active::{AmMessage, AmReply, Handler, AM_IDS};
use activities::{Activities, Progress};
pub use collectives::{Arg, Layout, IN_PLACE};
pub use direct::Arrival;
use direct::RingShortcut;
pub use windows::{NO_OP, REPLACE, WIN_NULL};

/// Wildcard source for receives and probes.
pub const ANY_SOURCE: i32 = -1;
/// Wildcard tag for receives and probes.
pub const ANY_TAG: i32 = -1;
/// The largest valid tag: every non-negative `i32` is one.
pub const TAG_UB: i32 = i32::MAX;

/// How an operation completed. `source` is a rank of the request's
/// communicator; `bytes` the message's true size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub source: i32,
    pub tag: i32,
    pub bytes: u64,
    pub error: Option<Error>,
}

/// Longest single sleep inside a wait: timers (connect retries, handshake
/// deadlines) are checked at least this often.
const MAX_SLEEP: Duration = Duration::from_millis(100);

pub struct Runtime {
    settings: Settings,
    universe: Arc<Universe>,
    /// `universe.my_universe_rank()`, read on every message.
    me: u32,
    rendezvous: Arc<Rendezvous>,
    /// A private rendezvous directory to remove at finalize.
    private_rendezvous: Option<std::path::PathBuf>,
    engine: Engine,
    transport: Transports,
    comms: CommTable,
    spin: SpinPolicy,
    /// What a wait does between polls, decided by `TETHER_WAIT` from the
    /// processes on this host and `cpus`.
    polling: Polling,
    /// CPUs this process may use (affinity and quota).
    cpus: usize,
    /// The local peers `polling` was decided with.
    local_peers_seen: usize,
    /// Work that progress moves across calls: collectives running, and
    /// failed ones with transfers in flight or an error to report.
    activities: Activities,
    /// Scratch buffers of finished collectives, for the next ones.
    scratch: crate::coll::ScratchPool,
    /// One-sided windows (`runtime/windows.rs`).
    windows: windows::Windows,
    /// Active-message handlers and messages in flight (`runtime/active.rs`).
    active: active::Active,
    /// The handle of the last field created.
    next_field: i32,
    /// How many fields of each (producer, name) this process created, to
    /// key the next one apart from them (`field::wire::field_key`).
    field_generations: HashMap<(String, String), u32>,
    /// Time spent in waits that did not complete at once (`blocked_ns`).
    blocked: Duration,
    /// The counters as of the last `snapshot_stats`.
    stats_snapshot: Vec<(String, u64)>,
    /// The trace being recorded (`TETHER_TRACE`).
    trace: Option<Box<crate::trace::Recorder>>,
    /// `TETHER_TRACE_CLOCK_SHIFT_NS`.
    trace_shift: i64,
    /// Universe rank 0's answers to clock exchanges.
    clock_server: traced::ClockServer,
}

impl Runtime {
    /// Joins the universe. `identity` is explicit (`tether_init_as`) or, when
    /// `None`, read from the environment (DESIGN 3.9).
    pub fn init(identity: Option<Identity>) -> Result<Runtime> {
        let (settings, warnings) = Settings::from_env()?;
        let identity = match identity {
            Some(id) => id,
            None => identity::from_env(settings.program(), |k| std::env::var(k).ok())?,
        };
        crate::log::init(&settings, identity.rank);
        crate::output::label_with_rank(settings.output_relay(), identity.rank);
        for w in warnings {
            tracing::warn!("{w}");
        }
        let names = universe::program_names(settings.programs(), &identity)?;
        let key = crate::auth::run_key(&settings)?;
        let (rendezvous, private_rendezvous) = open_rendezvous(&settings, &names, &identity)?;
        let rendezvous = rendezvous.with_key(key.clone());
        let bound = Transports::bind(&settings, key)?;
        let connect_timeout = Duration::from_secs(settings.connect_timeout());
        let universe = Arc::new(universe::join(
            &rendezvous,
            &names,
            &identity,
            &bound.address,
            bound.nonce,
            settings.run_id(),
            connect_timeout,
        )?);
        let rendezvous = Arc::new(rendezvous);
        let me = universe.my_universe_rank();
        let size = universe.size();
        // When `file` comes first, it reaches every peer: its own eager
        // limit applies from the first message on.
        let file_first = settings.transports().first().map(String::as_str) == Some("file");
        let mut engine = Engine::new(EngineConfig {
            me,
            eager_limit: if file_first {
                settings.file_eager_limit()
            } else {
                settings.eager_limit()
            },
        });
        engine.watch_context(crate::comm::AM_CONTEXT);
        // Used only with peers whose memory the transport reaches.
        engine.set_split_bytes(settings.shm_split_bytes());
        engine.set_window_direct_bytes(settings.rma_direct_bytes());
        let transport = Transports::new(bound, &settings, universe.clone(), rendezvous.clone());
        let mut runtime = Runtime {
            me,
            comms: CommTable::with_universe(size, me),
            spin: SpinPolicy::new(Duration::from_micros(settings.poll_spin_us())),
            polling: Polling::Spin,
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            local_peers_seen: 0,
            settings,
            universe,
            rendezvous,
            private_rendezvous,
            engine,
            transport,
            activities: Activities::default(),
            windows: windows::Windows::default(),
            active: active::Active::default(),
            scratch: Default::default(),
            next_field: 0,
            field_generations: HashMap::default(),
            blocked: Duration::ZERO,
            stats_snapshot: Vec::new(),
            trace: None,
            trace_shift: 0,
            clock_server: traced::ClockServer::default(),
        };
        runtime.choose_polling();
        runtime.start_tracing()?;
        if let Some(effect) = runtime.transport.router().policy().at_start() {
            runtime.carry_out(effect);
        }
        tracing::info!(
            "joined universe of {} processes as {} (universe rank {me})",
            runtime.universe.size(),
            runtime.universe.describe(me)
        );
        Ok(runtime)
    }

    pub fn universe(&self) -> &Universe {
        &self.universe
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn comm(&self, handle: i32) -> Result<&Comm> {
        self.comms.get(handle)
    }

    #[inline(always)]
    fn check_tag(tag: i32, wildcard_ok: bool) -> Result<Option<i32>> {
        match tag {
            ANY_TAG if wildcard_ok => Ok(None),
            t if (0..=TAG_UB).contains(&t) => Ok(Some(t)),
            t => Err(bad_tag(t, wildcard_ok)),
        }
    }

    /// Starts a send of `len` bytes at `buf` to rank `dest` of `comm`.
    ///
    /// # Safety
    /// `buf..buf+len` must stay valid and unmodified until the request completes.
    pub unsafe fn isend(
        &mut self,
        buf: *const u8,
        len: usize,
        dest: i32,
        tag: i32,
        comm: i32,
    ) -> Result<ReqId> {
        let (peer, context, tag) = self.destination(dest, tag, comm)?;
        self.note_peer(peer);
        let started = self.trace_now();
        let req = self
            .engine
            .isend(peer, context, tag, Region::from_const(buf, len));
        self.engine.set_user(req, comm_word(comm));
        if let Some(start) = started {
            let mut span = Span::new("send", start);
            (span.peer, span.context, span.tag, span.bytes) =
                (Some(peer), context, tag, len as u64);
            span.ordinal = self.engine.ordinal(req);
            self.trace_open(req, span);
        }
        self.push_transmits();
        self.progress_activities();
        Ok(req)
    }

    /// Posts a receive of at most `len` bytes into `buf`.
    ///
    /// # Safety
    /// `buf..buf+len` must stay valid and untouched until the request completes.
    pub unsafe fn irecv(
        &mut self,
        buf: *mut u8,
        len: usize,
        source: i32,
        tag: i32,
        comm: i32,
    ) -> Result<ReqId> {
        let (source, context, tag) = self.selector(source, tag, comm)?;
        if let Some(peer) = source {
            self.note_peer(peer);
        }
        let started = self.trace_now();
        let req = self
            .engine
            .irecv(source, context, tag, Region { ptr: buf, len });
        self.engine.set_user(req, comm_word(comm));
        if let Some(start) = started {
            let mut span = Span::new("recv", start);
            span.context = context;
            self.trace_open(req, span);
        }
        self.push_transmits();
        self.progress_activities();
        Ok(req)
    }

    /// While activities need progress (non-blocking collectives run), a
    /// point-to-point call makes a round of progress too, so that a
    /// program that only posts sends and receives between starting a
    /// collective and waiting for it does not hold the other members up
    /// (DESIGN 3.5). Costs nothing otherwise.
    fn progress_activities(&mut self) {
        if !self.activities.is_idle() {
            self.progress_once(Some(Duration::ZERO));
        }
    }

    /// Marks `peer` in its record as used inside a communication kernel
    /// while `IN_KERNEL` is set (the connection policy connects such peers
    /// at once when the next kernel starts).
    #[inline(always)]
    fn note_peer(&mut self, peer: u32) {
        if self.transport.router().policy().in_kernel() {
            self.transport.router_mut().mark_kernel(peer);
        }
    }

    /// Completes `req` if it is done (freeing it) after one round of progress.
    pub fn test(&mut self, req: ReqId) -> Result<Option<Status>> {
        self.check_request(req)?;
        self.progress_once(Some(Duration::ZERO));
        Ok(self.take(req))
    }

    /// Waits for `req` and frees it.
    pub fn wait(&mut self, req: ReqId) -> Result<Status> {
        self.check_request(req)?;
        // A request that completed when it started (an eager send handed
        // to the transport at once) returns without a round of progress.
        if let Some(status) = self.take(req) {
            return Ok(status);
        }
        self.wait_until(|rt| rt.engine.completion(req).is_some());
        Ok(self.take(req).expect("completed"))
    }

    /// Waits until one of `reqs` completes; frees it and returns its index.
    /// `None` entries are skipped; all `None` returns `None` at once.
    pub fn wait_any(&mut self, reqs: &[Option<ReqId>]) -> Result<Option<(usize, Status)>> {
        for req in reqs.iter().flatten() {
            self.check_request(*req)?;
        }
        if reqs.iter().all(Option::is_none) {
            return Ok(None);
        }
        let mut found = None;
        self.wait_until(|rt| {
            found = reqs
                .iter()
                .position(|r| r.is_some_and(|r| rt.engine.completion(r).is_some()));
            found.is_some()
        });
        let index = found.expect("wait_until returned");
        Ok(Some((
            index,
            self.take(reqs[index].expect("some")).expect("completed"),
        )))
    }

    /// Whether every request is complete, after one round of progress;
    /// frees none.
    pub fn all_complete(&mut self, reqs: &[ReqId]) -> Result<bool> {
        for req in reqs {
            self.check_request(*req)?;
        }
        self.progress_once(Some(Duration::ZERO));
        Ok(reqs.iter().all(|r| self.engine.completion(*r).is_some()))
    }

    /// Frees a completed request and returns its status; `None` if pending.
    /// The status carries the detailed error of a failed activity's
    /// request (a collective's: which member failed it and why).
    pub fn take(&mut self, req: ReqId) -> Option<Status> {
        let ordinal = self.trace.as_ref().and_then(|_| self.engine.ordinal(req));
        let (completion, word) = self.engine.take_completion_with_user(req)?;
        self.am_taken(req);
        if self.trace.is_some() {
            self.trace_close(
                req,
                completion.source,
                completion.bytes,
                ordinal,
                completion.tag,
            );
        }
        let mut status = self.status(completion, comm_of(word));
        if let Some(error) = self.activities.take_error(req) {
            status.error = Some(error);
        }
        Some(status)
    }

    fn check_request(&self, req: ReqId) -> Result<()> {
        if self.engine.is_live(req) {
            Ok(())
        } else {
            Err(err(
                ErrorClass::Request,
                "not an active request (already completed and freed, or never started)",
            ))
        }
    }

    fn status(&self, c: Completion, comm: i32) -> Status {
        let comm_ref = self.comms.get(comm).ok();
        let source = comm_ref
            .and_then(|cm| cm.rank_of(c.source))
            .map_or(ANY_SOURCE, |r| r as i32);
        // Named only when an error needs it: a success formats nothing.
        let who = || {
            if c.source == u32::MAX {
                "any source".to_string()
            } else {
                self.universe.describe(c.source)
            }
        };
        let error = c.error.map(|e| match e {
            CompletionError::Truncated => err(
                ErrorClass::Truncate,
                format!(
                    "message of {} bytes from {} (tag {}) is longer than the receive buffer",
                    c.bytes,
                    who(),
                    c.tag
                ),
            ),
            CompletionError::Cancelled => err(ErrorClass::Cancelled, "the receive was cancelled"),
            CompletionError::RmaRange => err(
                ErrorClass::RmaRange,
                format!("{} refused a one-sided access outside its window", who()),
            ),
            CompletionError::PeerLost => self
                .transport
                .router()
                .peers()
                .lost(c.source)
                .cloned()
                .unwrap_or_else(|| {
                    err(
                        ErrorClass::PeerLost,
                        format!("{} is no longer reachable", who()),
                    )
                }),
        });
        Status {
            source,
            tag: c.tag,
            bytes: c.bytes,
            error,
        }
    }

    /// The envelope of a message that a receive with these arguments would
    /// take now, without receiving it.
    pub fn iprobe(&mut self, source: i32, tag: i32, comm: i32) -> Result<Option<Status>> {
        let (source, context, tag) = self.selector(source, tag, comm)?;
        self.progress_once(Some(Duration::ZERO));
        Ok(self.probe_now(source, context, tag, comm))
    }

    /// Waits until [`Runtime::iprobe`] would find a message.
    pub fn probe(&mut self, source: i32, tag: i32, comm: i32) -> Result<Status> {
        let (source_sel, context, tag_sel) = self.selector(source, tag, comm)?;
        // A message that arrived before its sender was lost (or said
        // goodbye) is still there to probe.
        if let Some(status) = self.probe_now(source_sel, context, tag_sel, comm) {
            return Ok(status);
        }
        let lost = |rt: &Runtime, peer: Option<u32>| {
            peer.and_then(|p| rt.transport.router().peers().lost(p))
                .cloned()
        };
        if let Some(e) = lost(self, source_sel) {
            return Err(e);
        }
        let mut found = None;
        self.wait_until(|rt| {
            found = rt.probe_now(source_sel, context, tag_sel, comm);
            found.is_some() || lost(rt, source_sel).is_some()
        });
        match found {
            Some(status) => Ok(status),
            None => Err(lost(self, source_sel).expect("lost peer")),
        }
    }

    /// The universe rank, context and tag a send to rank `dest` of `comm`
    /// with `tag` goes with, checked.
    #[inline(always)]
    fn destination(&self, dest: i32, tag: i32, comm: i32) -> Result<(u32, u32, i32)> {
        let c = self.comms.get(comm)?;
        let peer = c.universe_rank(dest)?;
        let tag = Self::check_tag(tag, false)?.expect("not a wildcard");
        Ok((peer, c.context, tag))
    }

    /// What a receive or probe from `source` with `tag` on `comm` accepts
    /// (`None`: any), checked.
    #[inline(always)]
    fn selector(
        &self,
        source: i32,
        tag: i32,
        comm: i32,
    ) -> Result<(Option<u32>, u32, Option<i32>)> {
        let c = self.comms.get(comm)?;
        let source = match source {
            ANY_SOURCE => None,
            s => Some(c.universe_rank(s)?),
        };
        Ok((source, c.context, Self::check_tag(tag, true)?))
    }

    fn probe_now(
        &self,
        source: Option<u32>,
        context: u32,
        tag: Option<i32>,
        comm: i32,
    ) -> Option<Status> {
        let (envelope, size) = self.engine.iprobe(source, context, tag)?;
        let rank = self
            .comms
            .get(comm)
            .ok()
            .and_then(|c| c.rank_of(envelope.source));
        Some(Status {
            source: rank.map_or(ANY_SOURCE, |r| r as i32),
            tag: envelope.tag,
            bytes: size,
            error: None,
        })
    }

    /// Cancels a receive that has not matched yet; the request then
    /// completes with a `Cancelled` status. A request that already matched
    /// or is a send is left to complete normally.
    pub fn cancel(&mut self, req: ReqId) -> Result<()> {
        self.check_request(req)?;
        self.engine.cancel(req);
        Ok(())
    }

    /// One round of progress without waiting.
    pub fn progress(&mut self) {
        self.progress_once(Some(Duration::ZERO));
    }

    /// Sends the engine's frames, then carries out its remote memory
    /// operations (after the frames: a receiver's read follows its
    /// `Cts`, so that both sides copy at once), until neither is left.
    fn push_transmits(&mut self) {
        loop {
            while let Some(t) = self.engine.poll_transmit() {
                self.transport.send(t, &mut self.engine);
            }
            if !self.engine.has_rma() {
                break;
            }
            self.transport.run_rma(&mut self.engine);
        }
        self.absorb_link_events();
    }

    /// One round of progress; returns whether any socket was ready.
    fn progress_once(&mut self, timeout: Option<Duration>) -> bool {
        self.push_transmits();
        let active = self.transport.poll(timeout, &mut self.engine);
        self.serve_applies();
        self.serve_active();
        // Activities that find a transfer failed name the peer's error.
        self.absorb_link_events();
        // Handing frames to the transport can complete sends, which can
        // complete a collective's round and start its next: go on until a
        // round of that posts nothing new.
        loop {
            if !self.activities.is_idle() {
                self.advance_activities();
            }
            if !self.engine.has_transmit() && !self.engine.has_rma() {
                break;
            }
            self.push_transmits();
        }
        self.absorb_link_events();
        if self.me == 0 {
            self.serve_clock();
        }
        active
    }

    /// Moves every activity as far as it goes now.
    fn advance_activities(&mut self) {
        let path = self.transport.router_mut().short_path();
        let peers = path.peers();
        let mut shortcut = RingShortcut { transport: path };
        let mut progress = Progress {
            engine: &mut self.engine,
            shortcut: &mut shortcut,
            scratch: &mut self.scratch,
            universe: &self.universe,
            peers,
        };
        self.activities.advance(&mut progress);
    }

    /// Takes in what the transports reported for the runtime: a peer that
    /// aborted the universe (a lost peer is in its record already).
    /// Called after every handing of frames, so that an abort is acted on
    /// at once.
    fn absorb_link_events(&mut self) {
        if let Some(&(peer, code)) = self.transport.aborts.first() {
            eprintln!(
                "tether: {} aborted the universe with code {code}; exiting",
                self.universe.describe(peer)
            );
            std::process::exit(code);
        }
    }

    /// Progresses until `done` holds: polls while bytes are moving and for
    /// the spin window after they last moved, then sleeps in epoll (see
    /// [`SpinPolicy`]). The policy learns from the idle tail of each wait:
    /// the time from the last movement to completion.
    fn wait_until(&mut self, mut done: impl FnMut(&mut Runtime) -> bool) {
        self.progress_once(Some(Duration::ZERO));
        if done(self) {
            return;
        }
        let window = if self.transport.router().policy().in_kernel() {
            Duration::from_micros(self.settings.poll_spin_us()).max(Duration::from_millis(1))
        } else {
            self.spin.window()
        };
        if self.transport.router().local_peers() != self.local_peers_seen {
            self.choose_polling();
        }
        let mut idle = IdleClock::default();
        let blocked_since = Instant::now();
        let traced_since = self.trace_now();
        let mut reached = false;
        loop {
            let timeout = if idle.past(window) {
                if !reached {
                    reached = true;
                    self.reach_awaited();
                }
                MAX_SLEEP
            } else {
                Duration::ZERO
            };
            let moved = self.progress_once(Some(timeout));
            if done(self) {
                self.spin.record(idle.tail());
                self.blocked += blocked_since.elapsed();
                if let Some(start) = traced_since {
                    self.trace_wait(start);
                }
                return;
            }
            if moved {
                idle = IdleClock::default();
            } else if timeout.is_zero() {
                self.polling.pause();
            }
        }
    }

    /// Links with every peer a posted receive waits for by name, before a
    /// wait sleeps: a peer that died before it ever sent to this process
    /// is then seen (its left address refuses, its process is gone)
    /// instead of waited for. Only before sleeping: by then the polls
    /// took in whatever such a peer sent before it died (a ring needs no
    /// route to be read, and a failed route loses the peer).
    fn reach_awaited(&mut self) {
        let awaited = self.engine.awaited_sources();
        if awaited
            .iter()
            .all(|&peer| peer == self.me || self.transport.router().has_route(peer))
        {
            return;
        }
        // One more round first, so that what arrived since the last one
        // is taken before a peer found gone is given up.
        self.progress_once(Some(Duration::ZERO));
        for peer in self.engine.awaited_sources() {
            if peer != self.me {
                self.transport.reach(peer, &mut self.engine);
            }
        }
    }

    /// Decides how waits poll (`TETHER_WAIT`): the processes of the
    /// universe on this host are those `tether run` started here or, if
    /// more, this one and the peers found through shared memory.
    fn choose_polling(&mut self) {
        self.local_peers_seen = self.transport.router().local_peers();
        let processes = (self.settings.local_processes() as usize).max(1 + self.local_peers_seen);
        let polling = Polling::choose(self.settings.wait(), processes, self.cpus);
        if polling != self.polling {
            tracing::debug!(
                "waits {}: {processes} processes here, {} CPUs",
                if polling == Polling::Yield {
                    "yield between polls"
                } else {
                    "spin"
                },
                self.cpus
            );
        }
        self.polling = polling;
    }

    /// Applies a hint (DESIGN 3.6): the connection policy says what the
    /// change asks for, and the runtime carries it out.
    pub fn hint(&mut self, key: &str, value: &str) -> Result<()> {
        let hint = self.settings.set_hint(key, value)?;
        if let Some(effect) = self.transport.router_mut().apply_hint(hint, &self.settings) {
            self.carry_out(effect);
        }
        Ok(())
    }

    fn carry_out(&mut self, effect: Effect) {
        match effect {
            Effect::EagerLimit(limit) => self.engine.set_eager_limit(limit),
            Effect::ChoosePolling => self.choose_polling(),
            Effect::SpinMax(max) => self.spin.set_max(max),
            Effect::TransportOrder(order) => self.transport.router_mut().set_order(order),
            Effect::MaxLinks(max) => self.transport.router_mut().set_max_links(max),
            Effect::Rails { policy, stripe } => {
                self.transport.router_mut().set_rails(policy, stripe)
            }
            Effect::Timeouts {
                connect,
                handshake,
                goodbye,
            } => self
                .transport
                .router_mut()
                .set_timeouts(connect, handshake, goodbye),
            Effect::ConnectAll => {
                let me = self.me;
                for peer in (0..self.universe.size()).filter(|p| *p != me) {
                    self.transport.start_connect(peer, &mut self.engine);
                }
            }
            Effect::Connect(peers) => {
                for peer in peers {
                    self.transport.start_connect(peer, &mut self.engine);
                }
            }
        }
    }

    /// Leaves the universe: sends what is queued, says goodbye to every
    /// connected peer and waits (up to `TETHER_FINALIZE_TIMEOUT`) for theirs,
    /// so no data in flight is lost by closing early.
    pub fn finalize(mut self) -> Result<()> {
        self.free_fields();
        self.finish_trace();
        if self.settings.stats() {
            self.print_stats();
        }
        let deadline = Instant::now() + Duration::from_secs(self.settings.finalize_timeout());
        self.answer_final_clocks(deadline);
        while self.transport.has_output() && Instant::now() < deadline {
            self.progress_once(Some(Duration::from_millis(10)));
        }
        self.transport.say_goodbye(&mut self.engine);
        while (self.transport.has_output() || !self.transport.all_goodbyes_heard())
            && Instant::now() < deadline
        {
            self.progress_once(Some(Duration::from_millis(10)));
        }
        let unfinished = !self.transport.all_goodbyes_heard();
        let me = &self.universe.programs[self.universe.my_program];
        let _ = self
            .rendezvous
            .remove(&addr_key(&me.name, self.universe.my_rank));
        if let Some(dir) = &self.private_rendezvous {
            let _ = std::fs::remove_dir_all(dir);
        }
        if unfinished {
            tracing::warn!(
                "finalize: some peers did not say goodbye within TETHER_FINALIZE_TIMEOUT={} s",
                self.settings.finalize_timeout()
            );
        }
        crate::repeats::report_hidden();
        Ok(())
    }

    /// Ends every process of the universe: tells every connected peer, then
    /// exits this process with `code`.
    pub fn abort(&mut self, code: i32) -> ! {
        self.transport.broadcast_abort(code, &mut self.engine);
        let until = Instant::now() + Duration::from_millis(200);
        while self.transport.has_output() && Instant::now() < until {
            self.transport
                .poll(Some(Duration::from_millis(5)), &mut self.engine);
        }
        std::process::exit(code);
    }
}

/// The word a request of communicator `comm` carries in the engine
/// ([`Engine::set_user`]), for its status. Every request the runtime hands
/// out is given its word when it starts.
#[inline(always)]
fn comm_word(comm: i32) -> u64 {
    u64::from(comm as u32)
}

/// The communicator [`comm_word`] wrote.
#[inline(always)]
fn comm_of(word: u64) -> i32 {
    word as u32 as i32
}

/// How long a wait has gone without movement, read from the clock only
/// every [`IdleClock::POLLS_PER_READ`] idle polls: a clock read costs about
/// as much as a poll of every shared-memory ring, so reading it per poll
/// would double the cost of a busy wait. The idle time is therefore
/// counted from the first read, a few polls after the last movement.
#[derive(Default)]
struct IdleClock {
    since: Option<Instant>,
    polls: u32,
    expired: bool,
}

impl IdleClock {
    /// A power of two.
    const POLLS_PER_READ: u32 = 16;

    /// Whether the wait has been idle for at least `window` (once true,
    /// true until the clock is replaced after a movement). A zero window
    /// is past at once, and the clock starts then, so that the tail of a
    /// wait that sleeps at once counts its sleep.
    fn past(&mut self, window: Duration) -> bool {
        if self.expired {
            return true;
        }
        if window.is_zero() {
            self.since.get_or_insert_with(Instant::now);
            self.expired = true;
            return true;
        }
        self.polls += 1;
        if self.polls & (Self::POLLS_PER_READ - 1) == 0 {
            match self.since {
                None => self.since = Some(Instant::now()),
                Some(since) => self.expired = since.elapsed() >= window,
            }
        }
        self.expired
    }

    /// The idle time so far (zero when the clock was never read).
    fn tail(&self) -> Duration {
        self.since.map_or(Duration::ZERO, |since| since.elapsed())
    }
}

/// Opens `TETHER_RENDEZVOUS`; a universe of one process needs none and
/// gets a private directory.
fn open_rendezvous(
    settings: &Settings,
    names: &[String],
    me: &Identity,
) -> Result<(Rendezvous, Option<std::path::PathBuf>)> {
    if let Some(spec) = settings.rendezvous() {
        let rdv = Rendezvous::open(spec)
            .map_err(|e| err(ErrorClass::Init, format!("rendezvous {spec:?}: {e}")))?;
        return Ok((rdv, None));
    }
    if names.len() == 1 && me.size == 1 {
        let dir = std::env::temp_dir().join(format!("tether-solo-{}", std::process::id()));
        let rdv = Rendezvous::open(&dir.to_string_lossy())
            .map_err(|e| err(ErrorClass::Init, e.to_string()))?;
        return Ok((rdv, Some(dir)));
    }
    Err(err(
        ErrorClass::Init,
        "TETHER_RENDEZVOUS is not set: start the programs with `tether run`, or set it to a shared directory or tcp://host:port of `tether rendezvous serve`",
    ))
}

#[cold]
fn bad_tag(tag: i32, wildcard_ok: bool) -> crate::error::Error {
    err(
        ErrorClass::Tag,
        format!(
            "tag {tag} is invalid: tags are 0 to TETHER_TAG_UB ({}){}",
            TAG_UB,
            if wildcard_ok {
                " or TETHER_ANY_TAG"
            } else {
                ""
            }
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_clock_reads_no_clock_before_its_first_read_round() {
        let mut idle = IdleClock::default();
        for _ in 1..IdleClock::POLLS_PER_READ {
            assert!(!idle.past(Duration::from_secs(60)));
        }
        assert_eq!(idle.tail(), Duration::ZERO, "no clock read yet");
        assert!(!idle.past(Duration::from_secs(60)));
        assert!(idle.since.is_some(), "read at the POLLS_PER_READ-th poll");
    }

    #[test]
    fn a_zero_window_is_past_at_once_and_its_tail_counts_the_sleep() {
        let mut idle = IdleClock::default();
        assert!(idle.past(Duration::ZERO));
        std::thread::sleep(Duration::from_millis(2));
        assert!(idle.past(Duration::from_secs(60)), "stays past");
        // The spin policy must see a long tail here (and keep the window
        // closed), not zero.
        assert!(idle.tail() >= Duration::from_millis(2));
    }
}

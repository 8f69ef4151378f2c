//! The hand-over: the one place below the runtime that calls the engine
//! with what the router reports.
//!
//! [`Transports`] is what the runtime holds: the [`Router`] (one
//! transport reaching every peer) and the engine-facing steps around each
//! call into it. After every call it hands the router's events on:
//! completed sends to the engine's `transmit_done`, filled payloads to
//! its `payload_done`, each data-path frame to [`deliver`] and its
//! delivery back to the router (which reads on and may report more),
//! settled routes to the engine's per-peer choices (remote memory, eager
//! limit; the frames that waited for the route are revisited with them
//! before they are offered), lost peers to `peer_lost`, and aborts to
//! the runtime. Filled payloads go over before the next frame, so the
//! engine sees each link's frames and payloads in the order they came.

use std::sync::Arc;
use std::time::Duration;

use tether_proto::{deliver, Engine, Transmit};
use tether_rendezvous::Rendezvous;

use super::{Bound, Router};
use crate::error::Result;
use crate::settings::Settings;
use crate::transport::api::{self, NoResource, RmaOutcome, Transport};
use crate::transport::events::LinkEvent;
use crate::universe::Universe;

pub struct Transports {
    router: Router,
    /// Aborts of the universe that peers sent (peer, code), for the
    /// runtime; a lost peer is in its record instead.
    pub aborts: Vec<(u32, i32)>,
}

impl Transports {
    /// Listens on TCP and creates the shared-memory segment (a failure of
    /// the latter only disables `shm`, with the reason kept for errors).
    /// `key`: the run's key, with which every link authenticates.
    pub fn bind(settings: &Settings, key: Option<Arc<tether_auth::Key>>) -> Result<Bound> {
        Router::bind(settings, key)
    }

    pub fn new(
        bound: Bound,
        settings: &Settings,
        universe: Arc<Universe>,
        rendezvous: Arc<Rendezvous>,
    ) -> Transports {
        Transports {
            router: Router::new(bound, settings, universe, rendezvous),
            aborts: Vec::new(),
        }
    }

    /// The router, for what needs no engine: routes, peer records,
    /// policy, counters, the short path.
    #[inline(always)]
    pub fn router(&self) -> &Router {
        &self.router
    }

    #[inline(always)]
    pub fn router_mut(&mut self) -> &mut Router {
        &mut self.router
    }

    /// Sends an engine frame to its peer, reaching the peer first if
    /// need be: the engine chose the frame's protocol before the route
    /// was known, so it takes another look with the route's caps.
    pub fn send(&mut self, mut t: Transmit, engine: &mut Engine) {
        if !self.router.has_route(t.peer) {
            self.router.reach(t.peer);
            self.take_reached(engine);
            engine.revisit(&mut t);
        }
        if let Err(NoResource(t)) = self.router.send(t) {
            unreachable!("the router takes every frame (peer {})", t.peer);
        }
        self.hand_over(engine);
    }

    /// Chooses the transport for `peer` and connects, unless a route
    /// exists (see [`Router::reach`]).
    pub fn reach(&mut self, peer: u32, engine: &mut Engine) {
        self.router.reach(peer);
        self.hand_over(engine);
    }

    /// Chooses the transport for `peer` now and connects (eager
    /// connections, kernels).
    pub fn start_connect(&mut self, peer: u32, engine: &mut Engine) {
        self.router.start_connect(peer);
        self.hand_over(engine);
    }

    /// One round of progress ([`Router::poll`]), then the frames that
    /// waited are offered again and what happened is handed over.
    /// Returns whether bytes moved.
    pub fn poll(&mut self, timeout: Option<Duration>, engine: &mut Engine) -> bool {
        let mut moved = self.router.poll(timeout);
        self.take_reached(engine);
        if self.router.peers().has_queued() {
            self.router.offer_waiting();
        }
        moved |= self.hand_over(engine);
        moved
    }

    /// Carries out the engine's remote memory operations through the
    /// router, then hands over what they caused (a peer lost by a failed
    /// copy).
    pub fn run_rma(&mut self, engine: &mut Engine) {
        while let Some(op) = engine.poll_rma() {
            if let RmaOutcome::Now(status) = self.router.rma(&op) {
                engine.rma_done(op, status);
            }
        }
        self.hand_over(engine);
    }

    /// Whether any frame is still queued (for finalize).
    pub fn has_output(&self) -> bool {
        self.router.has_output()
    }

    /// Says goodbye on every link of every transport (once).
    pub fn say_goodbye(&mut self, engine: &mut Engine) {
        self.router.say_goodbye();
        self.hand_over(engine);
    }

    /// Whether every link has both said and heard goodbye.
    pub fn all_goodbyes_heard(&self) -> bool {
        self.router.all_goodbyes_heard()
    }

    /// Sends an abort on every link, best effort.
    pub fn broadcast_abort(&mut self, code: i32, engine: &mut Engine) {
        self.router.broadcast_abort(code);
        self.hand_over(engine);
    }

    /// Takes in the routes the router settled: the engine learns what
    /// each can do and revisits the frames that waited for it, which are
    /// then offered.
    fn take_reached(&mut self, engine: &mut Engine) {
        if self.router.events().reached.is_empty() {
            return;
        }
        for (peer, caps) in std::mem::take(&mut self.router.events().reached) {
            engine.set_remote_memory(peer, caps.remote_memory);
            engine.set_window_rma(peer, caps.window_rma);
            engine.set_stripe(peer, caps.stripe);
            if let Some(limit) = caps.eager_limit {
                engine.set_peer_eager_limit(peer, limit);
            }
            for t in self.router.peers_mut().waiting_mut(peer) {
                engine.revisit(t);
            }
            self.router.offer_waiting_of(peer);
        }
    }

    /// Hands what the router reported to the engine and the runtime (see
    /// the module documentation). Returns whether frames or payloads
    /// moved.
    #[inline]
    fn hand_over(&mut self, engine: &mut Engine) -> bool {
        let mut moved = false;
        loop {
            self.take_reached(engine);
            let events = self.router.events();
            for req in events.sent.drain(..) {
                engine.transmit_done(req);
            }
            for (token, owned) in events.filled.drain(..) {
                engine.payload_done(token, owned);
            }
            for (op, status) in events.rma_done.drain(..) {
                engine.rma_done(op, status);
            }
            let Some((peer, header)) = events.frames.pop_front() else {
                break;
            };
            match deliver(engine, peer, &header) {
                Ok(delivery) => api::place(&mut self.router, peer, delivery),
                Err(e) => self.router.broke_protocol(peer, e),
            }
            moved = true;
        }
        for event in std::mem::take(&mut self.router.events().links) {
            match event {
                LinkEvent::Lost { peer, .. } => engine.peer_lost(peer),
                LinkEvent::Abort { peer, code } => self.aborts.push((peer, code)),
                LinkEvent::RailLost { peer, rail, error } => {
                    tracing::warn!(
                        "rail {rail} to universe rank {peer} failed ({error}); its chunks go again on the other rails"
                    );
                    engine.rail_lost(peer);
                }
            }
        }
        moved
    }
}

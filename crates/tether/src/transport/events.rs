//! What transports report: they never call the engine or the runtime.
//!
//! A transport records what happened in its own [`Events`] while it sends,
//! flushes and reads; the router (`crate::router`) drains them after every
//! call into the transport: completed transmissions go to the engine's
//! `transmit_done`, filled payloads to its `payload_done`, data-path
//! frames to [`tether_proto::deliver`] (and their delivery back to the
//! transport, whose link reads nothing more until then), lost peers to
//! the engine's `peer_lost` and the peer's record (`crate::peers`), and
//! aborts to the runtime. Each list keeps the order things happened, and
//! the router hands the filled payloads over before the next frame, so
//! the engine sees a link's frames and payloads in the order they
//! arrived.
//!
//! A composite transport (the router) drains the transports it is made
//! of into events of its own, so that its caller sees one transport.

use std::collections::VecDeque;

use tether_proto::{FrameHeader, ReqId, RmaOp, RmaStatus, SinkToken};

use super::api::Caps;
use crate::error::Error;

/// What happened to a peer, for the router.
#[derive(Debug)]
pub enum LinkEvent {
    /// The peer can no longer be reached; pending work with it fails with `error`.
    Lost { peer: u32, error: Error },
    /// The peer aborted the universe.
    Abort { peer: u32, code: i32 },
    /// One of several rails to the peer failed (`rails.rs`); the peer is
    /// still reached on the others. Chunks it may have lost go again.
    RailLost {
        peer: u32,
        rail: usize,
        error: Error,
    },
}

/// A transport's reports since the router last drained them.
#[derive(Debug, Default)]
pub struct Events {
    /// Requests whose frame was handed to the link, or whose data was
    /// written into the peer's memory: their buffers may be reused.
    pub sent: Vec<ReqId>,
    /// Payloads read where their delivery said: the token, and the buffer
    /// of an owned sink.
    pub filled: Vec<(SinkToken, Option<Vec<u8>>)>,
    /// Data-path frames (peer, header) whose links wait for their
    /// delivery: at most one per link.
    pub frames: VecDeque<(u32, FrameHeader)>,
    /// Lost peers and aborts.
    pub links: Vec<LinkEvent>,
    /// Peers a composite transport (the router) found its route to, with
    /// what the route can do: the engine chooses their protocols from it.
    /// Frames that waited for the route are offered once the caller has
    /// taken this in (the router's `offer_waiting_of`).
    pub reached: Vec<(u32, Caps)>,
    /// Remote memory operations the transport took earlier
    /// ([`RmaOutcome::Reported`](super::api::RmaOutcome)) that ended, with
    /// their outcome, for the engine's `rma_done`.
    pub rma_done: Vec<(RmaOp, RmaStatus)>,
}

impl Events {
    /// Whether nothing was reported since the last drain (what a drain
    /// checks first: most calls report nothing).
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
            && self.filled.is_empty()
            && self.frames.is_empty()
            && self.links.is_empty()
            && self.reached.is_empty()
            && self.rma_done.is_empty()
    }

    pub fn lost(&mut self, peer: u32, error: Error) {
        self.links.push(LinkEvent::Lost { peer, error });
    }
}

//! What transports report: they never call the engine or the runtime.
//!
//! A transport records what happened in its own [`Events`] while it sends,
//! flushes and reads; the router drains them after every call into the
//! transport ([`Events::hand_over`]): completed transmissions go to
//! [`Engine::transmit_done`], lost peers to [`Engine::peer_lost`] and then,
//! with aborts, to the runtime. Each list keeps the order things happened.

use tether_proto::{Engine, ReqId};

use crate::error::Error;

/// What happened to a peer, for the runtime.
#[derive(Debug)]
pub enum LinkEvent {
    /// The peer can no longer be reached; pending work with it fails with `error`.
    Lost { peer: u32, error: Error },
    /// The peer aborted the universe.
    Abort { peer: u32, code: i32 },
}

/// A transport's reports since the router last drained them.
#[derive(Debug, Default)]
pub struct Events {
    /// Requests whose frame was handed to the link, or whose data was
    /// written into the peer's memory: their buffers may be reused.
    pub sent: Vec<ReqId>,
    /// Lost peers and aborts.
    pub links: Vec<LinkEvent>,
}

impl Events {
    pub fn lost(&mut self, peer: u32, error: Error) {
        self.links.push(LinkEvent::Lost { peer, error });
    }

    /// Hands the reports over: transmissions and losses to `engine`, then
    /// the link events to `out` for the runtime.
    #[inline]
    pub fn hand_over(&mut self, engine: &mut Engine, out: &mut Vec<LinkEvent>) {
        for req in self.sent.drain(..) {
            engine.transmit_done(req);
        }
        if self.links.is_empty() {
            return;
        }
        for event in self.links.drain(..) {
            if let LinkEvent::Lost { peer, .. } = event {
                engine.peer_lost(peer);
            }
            out.push(event);
        }
    }
}

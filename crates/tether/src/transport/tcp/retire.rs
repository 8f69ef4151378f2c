//! Retiring a connection whose peer stays reachable (`TETHER_MAX_LINKS`,
//! chosen by the router's link cap): the link's retiring `Bye` goes both
//! ways (`tether_proto::link`), what either side queued before its `Bye`
//! arrives first, and the connection closes. A peer that a kernel of
//! this process used is pinned: its retire is refused, the link stays
//! open at both ends, and the peer's link cap leaves it be from then on. Frames for the peer from
//! then on wait in its queue, and the first of them dials a new
//! connection; the peer may dial first, and a `Hello` that arrives while
//! the old connection is still retiring is refused as a duplicate and
//! retried, so that a peer's frames never overtake each other across the
//! two connections.

use std::time::Instant;

use mio::Token;

use super::TcpTransport;
use crate::transport::resources::OpenLink;

impl TcpTransport {
    /// The established connections that are open (not retiring, not
    /// saying goodbye), one per peer.
    pub fn open_links(&self, out: &mut Vec<OpenLink>) {
        for (&peer, p) in &self.peers {
            let Some(entry) = p.established.and_then(|t| self.entries.get(&t)) else {
                continue;
            };
            if entry.link.state() == tether_proto::link::LinkState::Open {
                out.push(OpenLink {
                    peer,
                    idle: !entry.conn.has_output() && p.queue.is_empty(),
                    kept_by_peer: p.kept_by_peer,
                });
            }
        }
    }

    /// Connections in any state (handshake, open, retiring).
    #[inline]
    pub fn connections(&self) -> usize {
        self.entries.len()
    }

    /// Starts retiring the connection to `peer`: returns whether it did
    /// (it is open and nothing waits to be written on it).
    pub fn retire(&mut self, peer: u32) -> bool {
        let Some(token) = self.peers.get(&peer).and_then(|p| p.established) else {
            return false;
        };
        let Some(entry) = self.entries.get_mut(&token) else {
            return false;
        };
        if entry.conn.has_output() || !entry.link.retire() {
            return false;
        }
        tracing::debug!("retiring the link to {}", self.universe.describe(peer));
        self.drive(token);
        true
    }

    /// Pins `peer`: a kernel of this process used it, so its link is
    /// kept (the peer's retires refused).
    pub fn pin(&mut self, peer: u32) {
        self.peers.entry(peer).or_default().pinned = true;
    }

    /// The peer on `token` asks to retire the link: agreed unless pinned.
    pub(super) fn answer_retire(&mut self, token: Token) {
        let Some(entry) = self.entries.get_mut(&token) else {
            return;
        };
        let pinned = entry
            .link
            .peer()
            .and_then(|peer| self.peers.get(&peer))
            .is_some_and(|p| p.pinned);
        if pinned {
            entry.link.refuse_retire();
        } else {
            entry.link.retire();
        }
    }

    /// The peer refused our retire: the link is open again, and what
    /// waited for the next link goes on it, in order.
    pub(super) fn retire_refused(&mut self, token: Token) {
        let Some(entry) = self.entries.get_mut(&token) else {
            return;
        };
        let Some(p) = entry.link.peer().and_then(|peer| self.peers.get_mut(&peer)) else {
            return;
        };
        p.kept_by_peer = true;
        entry.take_control_frames();
        for t in std::mem::take(&mut p.queue) {
            entry.push(t);
        }
    }

    /// The link on `token` closed by a retire both sides agreed on: the
    /// connection goes once our `Bye` is written (within the goodbye
    /// timeout, should the peer stop reading).
    pub(super) fn link_retired(&mut self, token: Token) {
        let deadline = Instant::now() + self.config.goodbye_timeout;
        if let Some(entry) = self.entries.get_mut(&token) {
            entry.closing = Some(deadline);
        }
    }

    /// A retired connection was dropped: counted, and the frames that
    /// waited for the next link dial it.
    pub(super) fn after_retire(&mut self, peer: u32) {
        self.retires += 1;
        let waiting = self.peers.get(&peer).is_some_and(|p| !p.queue.is_empty());
        if waiting {
            self.start_connect(peer);
        }
    }
}

//! What a broken connection means: a connection still in its handshake
//! is dropped (an outgoing one retried until the connect deadline); an
//! established one takes its peer with it, reported lost with an error
//! that says how it ended.

use mio::Token;
use tether_proto::wire::VERSION;
use tether_proto::WireError;

use super::conn::ConnError;
use super::connect::refuses;
use super::TcpTransport;
use crate::error::{err, Error, ErrorClass};

impl TcpTransport {
    pub(super) fn fail_conn(&mut self, token: Token, error: ConnError) {
        let Some(entry) = self.entries.get(&token) else {
            return;
        };
        let remote = entry.conn.remote;
        let entry_peer = entry.link.peer();
        let established_peer =
            entry_peer.filter(|p| self.peers.get(p).and_then(|p| p.established) == Some(token));
        let Some(peer) = established_peer else {
            self.fail_handshake(token, entry_peer, error);
            return;
        };
        let who = self.universe.describe(peer);
        let bye = entry.goodbye_heard();
        let error = match error {
            ConnError::Wire(w) => self.broke_protocol_error(&who, remote, &w),
            ConnError::Link(l) => self.broke_protocol_error(&who, remote, &l),
            ConnError::Eof { mid_frame: false } if bye => {
                err(ErrorClass::PeerLost, format!("{who} has finalized"))
            }
            ConnError::Eof { mid_frame } => {
                let how = if mid_frame {
                    " in the middle of a frame"
                } else {
                    ""
                };
                tracing::warn!("connection to {who} at {remote} closed{how} without goodbye");
                err(
                    ErrorClass::PeerLost,
                    format!("connection to {who} at {remote} closed{how} without goodbye: the process exited or crashed"),
                )
            }
            ConnError::Io(e) => {
                tracing::warn!("connection to {who} at {remote} failed: {e}");
                err(
                    ErrorClass::PeerLost,
                    format!("connection to {who} at {remote} failed: {e}"),
                )
            }
        };
        self.close(token, Some(peer));
        self.lose(peer, error);
    }

    fn broke_protocol_error(
        &self,
        who: &str,
        remote: std::net::SocketAddr,
        problem: &dyn std::fmt::Display,
    ) -> Error {
        tracing::error!("protocol error from {who} at {remote}: {problem}; connection closed");
        err(
            ErrorClass::Protocol,
            format!("{who} at {remote} broke the protocol: {problem}"),
        )
    }

    /// A connection broke before its handshake ended: logged and dropped;
    /// an outgoing one (`dialled` its peer) is retried.
    fn fail_handshake(&mut self, token: Token, dialled: Option<u32>, error: ConnError) {
        let remote = self.entries[&token].conn.remote;
        let unreachable = matches!(&error, ConnError::Io(e) if refuses(e));
        // The peer dials us while we dial it (after a retire, both sides
        // may have frames waiting): the loser drops its own attempt, with
        // our `Challenge` unread when we authenticate, which resets it.
        // An incoming connection reset before its handshake ended is the
        // same race seen from the winner's side (its dialler kept ours):
        // routine under `TETHER_MAX_LINKS`, and nothing is lost with it.
        let lost_a_race = dialled.is_none_or(|peer| {
            self.peers.get(&peer).is_some_and(|p| {
                p.connecting.is_some_and(|t| t != token) || p.established.is_some()
            })
        }) && matches!(&error, ConnError::Io(e) if e.kind() == std::io::ErrorKind::ConnectionReset);
        match &error {
            ConnError::Io(e) if lost_a_race => {
                tracing::debug!(
                    "connection with {remote} reset: {e}; the peer dropped it for another"
                )
            }
            ConnError::Wire(w) => {
                tracing::error!("protocol error from {remote}: {w}; connection closed")
            }
            ConnError::Link(l) => {
                tracing::error!("protocol error from {remote}: {l}; connection closed")
            }
            // Retried until the connect deadline, then reported.
            ConnError::Io(e) if unreachable => {
                tracing::debug!("connect to {remote}: {e}")
            }
            ConnError::Io(e) => {
                tracing::warn!("connection with {remote} failed during the handshake: {e}")
            }
            // A peer drops its own attempt when it loses a simultaneous
            // connect: an empty connection closing is routine.
            ConnError::Eof { mid_frame: false } => {
                tracing::debug!("connection from {remote} closed before sending a handshake")
            }
            ConnError::Eof { mid_frame: true } => {
                tracing::warn!("connection from {remote} closed in the middle of its handshake")
            }
        }
        let outgoing =
            dialled.filter(|p| self.peers.get(p).and_then(|p| p.connecting) == Some(token));
        let other_version = match &error {
            ConnError::Wire(WireError::BadVersion { got }) => Some(*got),
            _ => None,
        };
        let Some(peer) = outgoing else {
            if other_version.is_some() {
                // The link queued a `HelloReject` that says our version.
                self.start_closing(token);
                self.drive(token);
            } else {
                self.close(token, None);
            }
            return;
        };
        if let Some(got) = other_version {
            // No retry changes the peer's version.
            let message = format!(
                "{} at {remote} speaks protocol version {got}, this process version {VERSION}: build both programs with the same Tether version",
                self.universe.describe(peer)
            );
            self.close(token, Some(peer));
            self.lose(peer, err(ErrorClass::Protocol, message));
            return;
        }
        let problem = match &error {
            ConnError::Io(e) if unreachable => format!("connect to {remote}: {e}"),
            _ => format!("connection to {remote} ended during the handshake"),
        };
        self.retry_later(token, problem);
        if let Some(attempt) = self.peers.get_mut(&peer).and_then(|p| p.attempt.as_mut()) {
            attempt.unreachable = unreachable;
        }
    }

    /// Gives `peer` up: it joined from other rendezvous entries than this
    /// process (an earlier run's left behind, or another run's), which no
    /// retry changes; its operations fail now, naming the rendezvous.
    pub(super) fn lose_to_other_universe(&mut self, peer: u32) {
        if self.peers.get(&peer).is_some_and(|p| p.finished) {
            return;
        }
        let mine: Vec<String> = self
            .universe
            .programs
            .iter()
            .map(|p| format!("{} of {}", p.name, p.size))
            .collect();
        let message = format!(
            "{} joined another universe than this process ({}): rendezvous {} holds entries of an earlier run, or another run shares it; \
             start again with a fresh rendezvous (an empty directory, or a new server)",
            self.universe.describe(peer),
            mine.join(", "),
            self.rendezvous.describe()
        );
        if let Some(token) = self.peers.get(&peer).and_then(|p| p.connecting) {
            self.close(token, Some(peer));
        }
        self.lose(peer, err(ErrorClass::Init, message));
    }

    /// Gives `peer` up: the process at its address did not prove our key
    /// or refused ours (`reason` says which).
    pub(super) fn lose_unauthenticated(&mut self, token: Token, peer: u32, reason: &str) {
        let remote = self.entries[&token].conn.remote;
        let message = format!(
            "cannot authenticate with {} at {remote}: {reason}",
            self.universe.describe(peer)
        );
        self.close(token, Some(peer));
        self.lose(peer, err(ErrorClass::Auth, message));
    }

    /// Gives `peer` up without a word (the router found it silent): its
    /// connections close, what waits for it is dropped, nothing is read
    /// from it again, and nothing is reported (the router reports the
    /// loss).
    pub fn abandon(&mut self, peer: u32) {
        // Finished before its connections close, so that closing one it
        // was retiring dials nothing again.
        let p = self.peers.entry(peer).or_default();
        p.finished = true;
        p.attempt = None;
        p.queue.clear();
        let tokens: Vec<_> = p.established.into_iter().chain(p.connecting).collect();
        for token in tokens {
            self.close(token, Some(peer));
        }
    }

    pub(super) fn lose(&mut self, peer: u32, error: Error) {
        let p = self.peers.entry(peer).or_default();
        p.finished = true;
        p.attempt = None;
        p.queue.clear();
        self.events.lost(peer, error);
    }
}

//! Driving a connection's link through its handshake and goodbye: what
//! this transport decides when the link asks (whom to accept, which of
//! two simultaneous connections to keep) and what a refusal means for
//! the peer. The link does the protocol: the frames, their order and the
//! checks it can make alone.

use std::time::Instant;

use mio::Token;
use tether_proto::link::{incoming_wins, LinkError, LinkEvent, DUPLICATE_REASON};
use tether_proto::{FrameHeader, Hello};

use super::conn::ConnError;
use super::TcpTransport;

impl TcpTransport {
    /// Writes what `token`'s link queued and answers its events, until it
    /// has neither; then flushes. Call after every input to a link.
    pub(super) fn drive(&mut self, token: Token) {
        loop {
            let Some(entry) = self.entries.get_mut(&token) else {
                return;
            };
            // Before any event is answered: answering may stamp engine
            // frames, which follow the link's own in its numbering.
            entry.take_control_frames();
            let Some(event) = entry.link.poll_event() else {
                break;
            };
            match event {
                LinkEvent::HelloReceived(hello) => self.on_hello(token, &hello),
                LinkEvent::Established { peer } => self.establish(token, peer),
                LinkEvent::PeerClosing => {
                    if let Some(peer) = entry.link.peer() {
                        self.peers.entry(peer).or_default().finished = true;
                    }
                }
                LinkEvent::PeerRetiring => self.answer_retire(token),
                LinkEvent::RetireRefused => self.retire_refused(token),
                LinkEvent::Closed if entry.link.retired() => self.link_retired(token),
                // Both goodbyes passed: the peer closes the stream when it
                // exits, which reports it finalized.
                LinkEvent::Closed => {}
            }
        }
        self.flush(token);
    }

    /// A control frame read on `token`'s connection, with its payload.
    pub(super) fn on_control(&mut self, token: Token, header: &FrameHeader, payload: &[u8]) {
        let Some(entry) = self.entries.get_mut(&token) else {
            return;
        };
        match entry.link.on_control(header, payload) {
            Ok(()) => self.drive(token),
            Err(error) => self.handshake_failed(token, error, payload),
        }
    }

    /// The link ended on a control frame: a refusal either way, an answer
    /// from the wrong process, or a frame out of place.
    fn handshake_failed(&mut self, token: Token, error: LinkError, payload: &[u8]) {
        let entry = self.entries.get(&token).expect("checked by caller");
        let remote = entry.conn.remote;
        let dialled = entry.link.peer();
        match error {
            // We refused the peer's Hello; the link queued the HelloReject.
            LinkError::Refused { reason, .. } => {
                tracing::warn!("refusing connection from {remote}: {reason}");
                self.start_closing(token);
                self.drive(token);
                let foreign = Hello::decode(payload)
                    .ok()
                    .filter(|hello| hello.universe_id != self.universe.id);
                if let Some(peer) = foreign.and_then(|hello| self.universe_rank_of(&hello)) {
                    self.lose_to_other_universe(peer);
                }
            }
            LinkError::Superseded { .. } => self.retry_later(token, DUPLICATE_REASON.into()),
            LinkError::Rejected { reason, .. } => {
                tracing::warn!("connection to {remote} refused: {reason}");
                self.retry_later(token, reason);
            }
            LinkError::OtherUniverse { reason, .. } => {
                tracing::warn!("connection to {remote} refused: {reason}");
                self.retry_later(token, reason);
                if let Some(peer) = dialled {
                    self.lose_to_other_universe(peer);
                }
            }
            // Our key and the peer's differ, or one of us has none: no
            // retry changes that, so the peer's operations fail now.
            LinkError::Unauthenticated { reason, .. } => {
                tracing::error!("cannot authenticate with the process at {remote}: {reason}");
                let ours =
                    dialled.filter(|p| self.peers.get(p).and_then(|p| p.connecting) == Some(token));
                match ours {
                    Some(peer) => self.lose_unauthenticated(token, peer, &reason),
                    None => self.close(token, None),
                }
            }
            LinkError::WrongPeer { expected, got } if got.universe_id != self.universe.id => {
                let reason = format!(
                    "process {}:{} belongs to another universe (id {:#x}, expected {:#x})",
                    got.program, got.program_rank, got.universe_id, self.universe.id
                );
                self.retry_later(token, reason);
                self.lose_to_other_universe(expected);
            }
            LinkError::WrongPeer { expected, got } => {
                let problem = format!(
                    "the process at its address is {}, not {}",
                    self.universe.describe(got.universe_rank),
                    self.universe.describe(expected)
                );
                self.retry_later(token, problem);
            }
            other => self.fail_conn(token, ConnError::from(other)),
        }
    }

    /// A `Hello` that passed the link's own checks: accepted unless it
    /// names no process of this universe, or a connection to its peer is
    /// kept instead (one exists, or ours wins a simultaneous connect).
    fn on_hello(&mut self, token: Token, hello: &Hello) {
        let remote = self.entries[&token].conn.remote;
        if let Err(reason) = self.check_member(hello) {
            tracing::warn!("refusing connection from {remote}: {reason}");
            self.entries
                .get_mut(&token)
                .expect("driven")
                .link
                .reject_hello(&reason);
            self.start_closing(token);
            return;
        }
        let peer = hello.universe_rank;
        let me = self.me();
        let p = self.peers.entry(peer).or_default();
        let keep_ours =
            p.established.is_some() || (p.connecting.is_some() && !incoming_wins(me, peer));
        if keep_ours {
            self.entries
                .get_mut(&token)
                .expect("driven")
                .link
                .reject_duplicate();
            self.start_closing(token);
            return;
        }
        if let Some(mine) = p.connecting.take() {
            self.close(mine, Some(peer));
        }
        self.entries
            .get_mut(&token)
            .expect("driven")
            .link
            .accept_hello();
    }

    /// Whether a `Hello` names a process of this universe's layout (the
    /// link has checked the universe id, and that it is not this process).
    fn check_member(&self, hello: &Hello) -> Result<(), String> {
        match self.universe.locate(hello.universe_rank) {
            Some((p, r))
                if self.universe.programs[p].name == hello.program && r == hello.program_rank =>
            {
                Ok(())
            }
            _ => Err(format!(
                "handshake names {}:{} as universe rank {}, which does not match this universe",
                hello.program, hello.program_rank, hello.universe_rank
            )),
        }
    }

    /// The handshake is done: the queued frames leave, stamped in order.
    fn establish(&mut self, token: Token, peer: u32) {
        let p = self.peers.entry(peer).or_default();
        p.established = Some(token);
        p.connecting = None;
        p.attempt = None;
        let queued = std::mem::take(&mut p.queue);
        let open = self
            .peers
            .values()
            .filter(|p| p.established.is_some())
            .count();
        self.links_peak = self.links_peak.max(open as u64);
        let entry = self.entries.get_mut(&token).expect("driven");
        entry.conn.grow();
        tracing::debug!(
            "linked with {} at {}",
            self.universe.describe(peer),
            entry.conn.remote
        );
        for t in queued {
            entry.push(t);
        }
    }

    /// A refused connection: closed once its `HelloReject` is out, and
    /// within the handshake timeout even if the peer does not read it.
    pub(super) fn start_closing(&mut self, token: Token) {
        let deadline = Instant::now() + self.config.handshake_timeout;
        if let Some(entry) = self.entries.get_mut(&token) {
            entry.closing = Some(deadline);
        }
    }

    /// The rank in this universe of the process a hello names, if this
    /// universe has one of that name.
    fn universe_rank_of(&self, hello: &Hello) -> Option<u32> {
        let program = self.universe.find(&hello.program)?;
        let p = &self.universe.programs[program];
        (hello.program_rank < p.size).then(|| p.first + hello.program_rank)
    }
}

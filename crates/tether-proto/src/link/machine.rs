//! [`Link`]: the state machine of one link (handshake, sequence numbers,
//! goodbye) with its deadlines.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::auth::{self, LinkAuth, Transcript, PEER_HAS_NO_KEY, WE_HAVE_NO_KEY};
use super::{LinkError, PeerName, RejectCode, DUPLICATE_REASON};
use crate::wire::{
    FrameHeader, FrameKind, Hello, WireError, CAP_AUTH, HEADER_LEN, MAX_CONTROL_PAYLOAD, VERSION,
};

/// Settings of one link.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// What this side says in its handshake. Its `universe_id` is also
    /// the one a peer must name.
    pub hello: Hello,
    /// From the link's creation to `HelloAck` (connector, unless it was
    /// given its own deadline: [`Link::connector_until`]) or to the
    /// caller's verdict on the peer's `Hello` (acceptor).
    pub handshake_timeout: Duration,
    /// From sending our `Bye` to receiving the peer's.
    pub goodbye_timeout: Duration,
    /// The largest `Eager` payload accepted (passed to the header decoder).
    pub max_eager: u64,
    /// This side's key and this link's nonce: with them the handshake
    /// authenticates both sides (`auth.rs`), without them neither, and a
    /// peer that does the other is refused.
    pub auth: Option<LinkAuth>,
}

/// The tag of a `Bye`: the process finalizes, or only retires this link
/// (its peer stays reachable, over a link opened again on demand), or
/// refuses the peer's retire (the link stays open, as if neither `Bye`
/// had passed).
pub const BYE_FINAL: i32 = 0;
pub const BYE_RETIRE: i32 = 1;
pub const BYE_STAY: i32 = 2;

/// Where a link is. `Open` and `ByeReceived` may send engine frames
/// (`ByeReceived` only after a final `Bye`); `Open` and `ByeSent` may
/// receive them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Connector: `Hello` queued or sent, waiting for the answer.
    AwaitingAck,
    /// Acceptor: waiting for the connector's `Hello`.
    AwaitingHello,
    /// Acceptor of an authenticated handshake: our `Challenge` is out,
    /// waiting for the connector's `Proof`.
    AwaitingProof,
    /// Acceptor: the peer's `Hello` passed the link's checks (and the
    /// peer proved the key, where there is one); the caller decides
    /// ([`Link::accept_hello`] / [`Link::reject_hello`]).
    Verifying,
    Open,
    /// Our `Bye` is out; the peer may still send until its own.
    ByeSent,
    /// The peer sends nothing more; we may, until we close.
    ByeReceived,
    /// Both `Bye`s passed, or closed before the handshake ended.
    Closed,
    /// An error ended the link; see the `Err` that said so.
    Failed,
}

/// A frame of the link's own (handshake or goodbye), already stamped:
/// write `header` then `payload`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlFrame {
    pub header: FrameHeader,
    pub payload: Vec<u8>,
}

/// What the caller does with a decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inbound {
    /// A frame for the layer above (engine or runtime): its payload of
    /// `payload_len` bytes follows on this link.
    Deliver(FrameHeader),
    /// One of the link's own frames: read its `payload_len` bytes (at most
    /// [`crate::wire::MAX_CONTROL_PAYLOAD`], checked) and pass them to
    /// [`Link::on_control`].
    Control(FrameHeader),
}

/// Progress the caller should know about (failures come back as `Err`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEvent {
    /// Acceptor: the peer's `Hello`; answer with [`Link::accept_hello`] or
    /// [`Link::reject_hello`] before the handshake deadline.
    HelloReceived(Hello),
    /// The handshake finished; engine frames may flow.
    Established { peer: u32 },
    /// The peer's `Bye` came: it sends nothing more. Call [`Link::close`]
    /// once this side has nothing more to send either.
    PeerClosing,
    /// The peer's retiring `Bye` came: it sends nothing more on this link
    /// and waits for this side's. Call [`Link::retire`] at once: what is
    /// queued on the link before it still goes, and what comes after
    /// waits for the next link. Or refuse with [`Link::refuse_retire`].
    PeerRetiring,
    /// The peer refused our retire: the link is open again, and what
    /// waited for the next link may go on this one.
    RetireRefused,
    /// Both sides said goodbye; the connection may be dropped.
    Closed,
}

/// One link to one peer. Owns the link's sequence numbers, handshake and
/// goodbye state and their deadlines; owns no buffers of the caller's and
/// no connection. Never blocks and never reads a clock: every method that
/// depends on time takes `now`, which must not go backwards.
#[derive(Debug)]
pub struct Link {
    config: LinkConfig,
    state: LinkState,
    /// Dialled (connector) or named in the `Hello` (acceptor).
    peer: Option<u32>,
    /// The next sequence number to stamp, and the next one to accept.
    send_seq: u64,
    recv_seq: u64,
    /// The one deadline of the current state (handshake or goodbye).
    /// Heartbeats will add an idle deadline beside it.
    deadline: Option<Instant>,
    /// Control frames not yet stamped (kind, tag, payload): stamping
    /// happens when they are handed out, so the caller writes every frame
    /// in stamping order.
    control: VecDeque<(FrameKind, i32, Vec<u8>)>,
    events: VecDeque<LinkEvent>,
    /// Our `Hello` as sent (with [`CAP_AUTH`] when we authenticate).
    own_hello: Vec<u8>,
    /// Authenticated handshakes: the peer's nonce and `Hello` as it sent
    /// them, once they came; the acceptor keeps the decoded `Hello` for
    /// its caller until the peer has proved the key.
    peer_nonce: Vec<u8>,
    peer_hello: Vec<u8>,
    unproved_hello: Option<Hello>,
    /// Connector: the acceptor proved the key (its `Challenge` checked).
    acceptor_proved: bool,
    /// The tags of our `Bye` and of the peer's, once each passed.
    our_bye: Option<i32>,
    peer_bye: Option<i32>,
}

impl Link {
    /// A link we dialled to universe rank `peer`: its `Hello` is queued,
    /// and the handshake must end by `now + handshake_timeout`.
    pub fn connector(config: LinkConfig, peer: u32, now: Instant) -> Link {
        let mut link = Link::new(config, LinkState::AwaitingAck, Some(peer), now);
        let mut hello = link.own_hello.clone();
        if let Some(auth) = &link.config.auth {
            hello.extend_from_slice(&auth.nonce);
        }
        link.control.push_back((FrameKind::Hello, 0, hello));
        link
    }

    /// [`Link::connector`] whose handshake must end by `deadline` instead:
    /// for a connector whose caller bounds the whole connection set-up
    /// (several tries, each a new link) by one deadline of its own.
    pub fn connector_until(config: LinkConfig, peer: u32, now: Instant, deadline: Instant) -> Link {
        let mut link = Link::connector(config, peer, now);
        link.deadline = Some(deadline);
        // What a timeout reports as the time waited.
        link.config.handshake_timeout = deadline.saturating_duration_since(now);
        link
    }

    /// A link a peer dialled: it waits for the peer's `Hello` until
    /// `now + handshake_timeout`.
    pub fn acceptor(config: LinkConfig, now: Instant) -> Link {
        Link::new(config, LinkState::AwaitingHello, None, now)
    }

    fn new(config: LinkConfig, state: LinkState, peer: Option<u32>, now: Instant) -> Link {
        let deadline = Some(now + config.handshake_timeout);
        let mut hello = config.hello.clone();
        if config.auth.is_some() {
            hello.capabilities |= CAP_AUTH;
        }
        Link {
            own_hello: hello.encode(),
            peer_nonce: Vec::new(),
            peer_hello: Vec::new(),
            unproved_hello: None,
            acceptor_proved: false,
            our_bye: None,
            peer_bye: None,
            config,
            state,
            peer,
            send_seq: 0,
            recv_seq: 0,
            deadline,
            control: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    pub fn state(&self) -> LinkState {
        self.state
    }

    /// The universe rank at the other end, once known.
    pub fn peer(&self) -> Option<u32> {
        self.peer
    }

    fn name(&self) -> PeerName {
        PeerName(self.peer)
    }

    /// Whether [`Link::stamp`] takes an engine frame now: the link is open,
    /// or the peer said its final goodbye and this side has not yet.
    pub fn takes_frames(&self) -> bool {
        match self.state {
            LinkState::Open => true,
            LinkState::ByeReceived => self.peer_bye != Some(BYE_RETIRE),
            _ => false,
        }
    }

    /// Whether the link ended by a retire both sides agreed on: every
    /// frame either side sent on it has arrived, and the peer stays
    /// reachable over a new link. (A retire crossed by the peer's final
    /// `Bye` is not: the peer finalizes.)
    pub fn retired(&self) -> bool {
        self.state == LinkState::Closed
            && self.our_bye == Some(BYE_RETIRE)
            && self.peer_bye == Some(BYE_RETIRE)
    }

    /// Whether this side has asked to retire the link (or answered the
    /// peer's retire) and the link is not closed yet.
    pub fn retiring(&self) -> bool {
        self.our_bye == Some(BYE_RETIRE) && self.state == LinkState::ByeSent
    }

    /// Stamps an engine frame with this link's next sequence number. The
    /// caller writes the frame before stamping the next one. Fails (and
    /// stamps nothing) unless [`Link::takes_frames`].
    pub fn stamp(&mut self, header: &mut FrameHeader) -> Result<(), LinkError> {
        match self.state {
            LinkState::Open | LinkState::ByeReceived if self.takes_frames() => {
                header.seq = self.next_send_seq();
                Ok(())
            }
            state => Err(LinkError::NotOpen {
                peer: self.name(),
                state,
            }),
        }
    }

    fn next_send_seq(&mut self) -> u64 {
        let seq = self.send_seq;
        self.send_seq += 1;
        seq
    }

    /// The next control frame to write, stamped now.
    pub fn poll_transmit(&mut self) -> Option<ControlFrame> {
        let (kind, tag, payload) = self.control.pop_front()?;
        let mut header = FrameHeader::new(kind);
        header.tag = tag;
        header.seq = self.next_send_seq();
        header.payload_len = payload.len() as u64;
        Some(ControlFrame { header, payload })
    }

    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<LinkEvent> {
        self.events.pop_front()
    }

    /// When [`Link::handle_timeout`] must next be called; `None` while no
    /// deadline runs (open, closed or failed links).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    /// Fails the link if its deadline is at or before `now`; otherwise
    /// does nothing (calling early or often is harmless).
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), LinkError> {
        match self.deadline {
            Some(deadline) if deadline <= now => {}
            _ => return Ok(()),
        }
        self.deadline = None;
        let error = match self.state {
            LinkState::AwaitingAck
            | LinkState::AwaitingHello
            | LinkState::AwaitingProof
            | LinkState::Verifying => LinkError::HandshakeTimeout {
                peer: self.name(),
                timeout: self.config.handshake_timeout,
            },
            LinkState::ByeSent => LinkError::GoodbyeTimeout {
                peer: self.name(),
                timeout: self.config.goodbye_timeout,
            },
            LinkState::Open | LinkState::ByeReceived | LinkState::Closed | LinkState::Failed => {
                return Ok(())
            }
        };
        Err(self.fail(error))
    }

    /// Decodes a header read from the link, checking its sequence number,
    /// and says what to do with it. A frame that this state cannot take
    /// fails the link.
    pub fn on_header(&mut self, bytes: &[u8; HEADER_LEN]) -> Result<Inbound, LinkError> {
        if self.state == LinkState::Failed {
            return Err(LinkError::NotOpen {
                peer: self.name(),
                state: self.state,
            });
        }
        let header = match FrameHeader::decode(bytes, self.recv_seq, self.config.max_eager) {
            Ok(header) => header,
            // A connector of another version: it cannot read a reason in
            // our frames, but it can read that our version is not its own.
            Err(error @ WireError::BadVersion { got })
                if self.state == LinkState::AwaitingHello =>
            {
                let reason = format!(
                    "this process speaks protocol version {VERSION}, the connecting one version {got}: build both programs with the same Tether version"
                );
                self.queue_reject(RejectCode::Refused, &reason);
                return Err(self.wire_error(error));
            }
            Err(error) => return Err(self.wire_error(error)),
        };
        self.recv_seq += 1;
        match header.kind {
            FrameKind::Hello
            | FrameKind::HelloAck
            | FrameKind::HelloReject
            | FrameKind::Challenge
            | FrameKind::Proof
            | FrameKind::Bye => Ok(Inbound::Control(header)),
            _ => match self.state {
                LinkState::Open | LinkState::ByeSent => Ok(Inbound::Deliver(header)),
                _ => Err(self.unexpected(header.kind)),
            },
        }
    }

    /// Handles a control frame announced by [`Link::on_header`] with its
    /// whole payload. An `Err` ends the link; a refusal of the peer's
    /// `Hello` has queued a `HelloReject` for [`Link::poll_transmit`].
    pub fn on_control(&mut self, header: &FrameHeader, payload: &[u8]) -> Result<(), LinkError> {
        match (header.kind, self.state) {
            (FrameKind::Hello, LinkState::AwaitingHello) => self.on_hello(payload),
            (FrameKind::Challenge, LinkState::AwaitingAck) => self.on_challenge(payload),
            (FrameKind::Proof, LinkState::AwaitingProof) => self.on_proof(payload),
            (FrameKind::HelloAck, LinkState::AwaitingAck) => self.on_ack(payload),
            (FrameKind::HelloReject, LinkState::AwaitingAck) => {
                let reason = String::from_utf8_lossy(payload).into_owned();
                let peer = self.name();
                let error = match RejectCode::from_tag(header.tag) {
                    RejectCode::Refused => LinkError::Rejected { peer, reason },
                    RejectCode::Duplicate => LinkError::Superseded { peer },
                    RejectCode::OtherUniverse => LinkError::OtherUniverse { peer, reason },
                    RejectCode::Unauthenticated => LinkError::Unauthenticated { peer, reason },
                };
                Err(self.fail(error))
            }
            (FrameKind::Bye, LinkState::Open) => {
                self.state = LinkState::ByeReceived;
                self.peer_bye = Some(header.tag);
                self.events.push_back(match header.tag {
                    BYE_RETIRE => LinkEvent::PeerRetiring,
                    _ => LinkEvent::PeerClosing,
                });
                Ok(())
            }
            (FrameKind::Bye, LinkState::ByeSent)
                if header.tag == BYE_STAY && self.our_bye == Some(BYE_RETIRE) =>
            {
                if self.deadline.is_some() {
                    // This side began to finalize while its retire waited:
                    // the goodbye goes now, its deadline as it was.
                    self.say_bye(BYE_FINAL);
                } else {
                    self.state = LinkState::Open;
                    self.our_bye = None;
                    self.events.push_back(LinkEvent::RetireRefused);
                }
                Ok(())
            }
            (FrameKind::Bye, LinkState::ByeSent) => {
                self.peer_bye = Some(header.tag);
                self.finish_goodbye();
                Ok(())
            }
            (kind, _) => Err(self.unexpected(kind)),
        }
    }

    /// The acceptor's own checks of a `Hello`; a refusal is answered with
    /// a `HelloReject` (a malformed one too, so that a connector of
    /// another version learns why).
    fn on_hello(&mut self, payload: &[u8]) -> Result<(), LinkError> {
        let (hello, nonce) = match Hello::decode_prefix(payload) {
            Ok(split) => split,
            Err(error) => return Err(self.refuse(RejectCode::Refused, error.to_string())),
        };
        // Named from here on, refused or not.
        self.peer = Some(hello.universe_rank);
        let authenticates = hello.capabilities & CAP_AUTH != 0;
        let nonce_len = if authenticates {
            tether_auth::NONCE_LEN
        } else {
            0
        };
        if nonce.len() != nonce_len {
            let reason = format!(
                "{} bytes follow the handshake's program name, {nonce_len} expected",
                nonce.len()
            );
            return Err(self.refuse(RejectCode::Refused, reason));
        }
        let mine = &self.config.hello;
        let refusal = if hello.universe_id != mine.universe_id {
            Some((
                RejectCode::OtherUniverse,
                format!(
                    "process {}:{} belongs to another universe (id {:#x}, expected {:#x})",
                    hello.program, hello.program_rank, hello.universe_id, mine.universe_id
                ),
            ))
        } else if authenticates && self.config.auth.is_none() {
            Some((RejectCode::Unauthenticated, WE_HAVE_NO_KEY.to_owned()))
        } else if !authenticates && self.config.auth.is_some() {
            Some((RejectCode::Unauthenticated, PEER_HAS_NO_KEY.to_owned()))
        } else if hello.universe_rank == mine.universe_rank {
            Some((
                RejectCode::Refused,
                format!(
                    "handshake names universe rank {}, which is the accepting process",
                    hello.universe_rank
                ),
            ))
        } else {
            None
        };
        if let Some((code, reason)) = refusal {
            return Err(self.refuse(code, reason));
        }
        let Some(auth) = &self.config.auth else {
            self.state = LinkState::Verifying;
            self.events.push_back(LinkEvent::HelloReceived(hello));
            return Ok(());
        };
        let hello_len = payload.len() - nonce.len();
        let transcript = Transcript {
            connector_nonce: nonce,
            acceptor_nonce: &auth.nonce,
            connector_hello: &payload[..hello_len],
            acceptor_hello: &self.own_hello,
        };
        let proof = transcript.acceptor_proof(&auth.key);
        let challenge = auth::challenge(&auth.nonce, &proof, &self.own_hello);
        self.control.push_back((FrameKind::Challenge, 0, challenge));
        self.peer_nonce = nonce.to_vec();
        self.peer_hello = payload[..hello_len].to_vec();
        self.unproved_hello = Some(hello);
        self.state = LinkState::AwaitingProof;
        Ok(())
    }

    /// Connector: the acceptor's `Challenge`. Its `Hello` must name the
    /// process dialled and its proof must check; then our `Proof` goes.
    fn on_challenge(&mut self, payload: &[u8]) -> Result<(), LinkError> {
        let peer = self.name();
        let Some(auth) = self.config.auth.clone() else {
            return Err(self.fail(LinkError::Unauthenticated {
                peer,
                reason: "it requires a key and this process has none (set TETHER_KEY_FILE, or TETHER_KEY, as the peer does)".into(),
            }));
        };
        if self.acceptor_proved {
            return Err(self.unexpected(FrameKind::Challenge));
        }
        let Some((nonce, proof, hello_bytes)) = auth::split_challenge(payload) else {
            let error = WireError::BadHello(format!(
                "a challenge of {} bytes is too short",
                payload.len()
            ));
            return Err(self.wire_error(error));
        };
        let hello = Hello::decode(hello_bytes).map_err(|error| self.wire_error(error))?;
        self.check_answering(hello)?;
        let transcript = Transcript {
            connector_nonce: &auth.nonce,
            acceptor_nonce: nonce,
            connector_hello: &self.own_hello,
            acceptor_hello: hello_bytes,
        };
        if !transcript.check_acceptor(&auth.key, proof) {
            return Err(self.fail(LinkError::Unauthenticated {
                peer,
                reason: "its proof of the key does not check: it holds another key".into(),
            }));
        }
        let answer = transcript.connector_proof(&auth.key).to_vec();
        self.control.push_back((FrameKind::Proof, 0, answer));
        self.acceptor_proved = true;
        Ok(())
    }

    /// Acceptor: the connector's `Proof`. If it checks, the caller gets
    /// the `Hello` to decide on; if not, the connector is refused.
    fn on_proof(&mut self, payload: &[u8]) -> Result<(), LinkError> {
        let auth = self
            .config
            .auth
            .as_ref()
            .expect("only authenticating acceptors challenge");
        let transcript = Transcript {
            connector_nonce: &self.peer_nonce,
            acceptor_nonce: &auth.nonce,
            connector_hello: &self.peer_hello,
            acceptor_hello: &self.own_hello,
        };
        if !transcript.check_connector(&auth.key, payload) {
            let reason = "authentication failed: the connecting process's proof does not check against this run's key (another key, or a replayed handshake)";
            return Err(self.refuse(RejectCode::Unauthenticated, reason.into()));
        }
        let hello = self.unproved_hello.take().expect("kept until the proof");
        self.state = LinkState::Verifying;
        self.events.push_back(LinkEvent::HelloReceived(hello));
        Ok(())
    }

    /// Connector: the answering process's `Hello` must name the universe
    /// and the rank dialled.
    fn check_answering(&mut self, hello: Hello) -> Result<(), LinkError> {
        let expected = self.peer.expect("a connector knows whom it dialled");
        if hello.universe_id != self.config.hello.universe_id || hello.universe_rank != expected {
            return Err(self.fail(LinkError::WrongPeer {
                expected,
                got: hello,
            }));
        }
        Ok(())
    }

    fn refuse(&mut self, code: RejectCode, reason: String) -> LinkError {
        self.queue_reject(code, &reason);
        self.fail(LinkError::Refused {
            peer: self.name(),
            reason,
        })
    }

    fn on_ack(&mut self, payload: &[u8]) -> Result<(), LinkError> {
        let hello = Hello::decode(payload).map_err(|error| self.wire_error(error))?;
        let expected = self.peer.expect("a connector knows whom it dialled");
        self.check_answering(hello)?;
        if self.config.auth.is_some() && !self.acceptor_proved {
            return Err(self.fail(LinkError::Unauthenticated {
                peer: self.name(),
                reason: "it accepted without proving the key: it has none (TETHER_KEY_FILE and TETHER_KEY are unset there)".into(),
            }));
        }
        self.open(expected);
        Ok(())
    }

    /// Acceptor in `Verifying`: answers `HelloAck` and opens the link.
    /// Does nothing in any other state.
    pub fn accept_hello(&mut self) {
        if self.state != LinkState::Verifying {
            return;
        }
        let ack = self.own_hello.clone();
        self.control.push_back((FrameKind::HelloAck, 0, ack));
        let peer = self.peer.expect("a verified Hello named its peer");
        self.open(peer);
    }

    /// Acceptor in `Verifying`: answers `HelloReject` with `reason` (its
    /// first [`MAX_CONTROL_PAYLOAD`] bytes at most) and fails the link
    /// (drain [`Link::poll_transmit`] before dropping the connection).
    /// Does nothing in any other state.
    pub fn reject_hello(&mut self, reason: &str) {
        self.reject_with(RejectCode::Refused, reason);
    }

    /// Acceptor in `Verifying`: refuses the peer's link because another
    /// one to the same peer is kept (see [`super::incoming_wins`]); the
    /// connector sees [`LinkError::Superseded`]. As [`Link::reject_hello`]
    /// otherwise.
    pub fn reject_duplicate(&mut self) {
        self.reject_with(RejectCode::Duplicate, DUPLICATE_REASON);
    }

    fn reject_with(&mut self, code: RejectCode, reason: &str) {
        if self.state != LinkState::Verifying {
            return;
        }
        self.queue_reject(code, reason);
        self.state = LinkState::Failed;
        self.deadline = None;
    }

    /// Queues a `HelloReject` the peer can read: the peer's decoder
    /// refuses a control payload over [`MAX_CONTROL_PAYLOAD`] bytes, and
    /// a reason may quote the peer's own program name, which alone may
    /// be nearly that long. Cut at a character boundary, so that the
    /// reason stays UTF-8.
    fn queue_reject(&mut self, code: RejectCode, reason: &str) {
        let mut end = reason.len().min(MAX_CONTROL_PAYLOAD as usize);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        self.control.push_back((
            FrameKind::HelloReject,
            code.tag(),
            reason.as_bytes()[..end].to_vec(),
        ));
    }

    fn open(&mut self, peer: u32) {
        self.state = LinkState::Open;
        self.deadline = None;
        self.events.push_back(LinkEvent::Established { peer });
    }

    /// This side sends nothing more: queues our `Bye`. From `Open`, the
    /// peer's `Bye` must come by `now + goodbye_timeout`; from
    /// `ByeReceived` the link is closed at once; from a retire in
    /// progress, the peer's answer must come by then. A link still in its
    /// handshake closes without a `Bye`; closed and failed links are left
    /// as they are.
    pub fn close(&mut self, now: Instant) {
        match self.state {
            LinkState::Open => {
                self.say_bye(BYE_FINAL);
                self.state = LinkState::ByeSent;
                self.deadline = Some(now + self.config.goodbye_timeout);
            }
            LinkState::ByeReceived => {
                self.say_bye(BYE_FINAL);
                self.finish_goodbye();
            }
            LinkState::AwaitingAck
            | LinkState::AwaitingHello
            | LinkState::AwaitingProof
            | LinkState::Verifying => {
                self.state = LinkState::Closed;
                self.deadline = None;
            }
            // A retire in progress: the peer's answer is now awaited as a
            // goodbye is, within the goodbye timeout.
            LinkState::ByeSent if self.deadline.is_none() => {
                self.deadline = Some(now + self.config.goodbye_timeout);
            }
            LinkState::ByeSent | LinkState::Closed | LinkState::Failed => {}
        }
    }

    /// Retires an open link, or answers the peer's retire: queues our
    /// retiring `Bye`, after which this side stamps nothing more on the
    /// link. Once both retiring `Bye`s passed ([`Link::retired`]) the
    /// connection may be dropped, and a new link carries what follows, in
    /// order after everything this one carried. Returns whether it did
    /// either; any other state is left as it is (a link in its handshake
    /// is not retired: it has not carried anything yet).
    ///
    /// No deadline runs: the peer answers when it next makes progress,
    /// which a peer busy computing may not do for a long time, and which
    /// is not a failure. A peer that is gone is found by the liveness
    /// checks (heartbeats, the stream's end), as on an open link.
    pub fn retire(&mut self) -> bool {
        match self.state {
            LinkState::Open => {
                self.say_bye(BYE_RETIRE);
                self.state = LinkState::ByeSent;
                true
            }
            LinkState::ByeReceived if self.peer_bye == Some(BYE_RETIRE) => {
                self.say_bye(BYE_RETIRE);
                self.finish_goodbye();
                true
            }
            _ => false,
        }
    }

    /// Refuses the peer's retire ([`LinkEvent::PeerRetiring`]): the link
    /// is open again at both ends once our answer arrives, and no frame
    /// either side sent is affected. Returns whether there was a retire
    /// to refuse.
    pub fn refuse_retire(&mut self) -> bool {
        if self.state != LinkState::ByeReceived || self.peer_bye != Some(BYE_RETIRE) {
            return false;
        }
        self.control
            .push_back((FrameKind::Bye, BYE_STAY, Vec::new()));
        self.state = LinkState::Open;
        self.peer_bye = None;
        true
    }

    fn say_bye(&mut self, tag: i32) {
        self.control.push_back((FrameKind::Bye, tag, Vec::new()));
        self.our_bye = Some(tag);
    }

    fn finish_goodbye(&mut self) {
        self.state = LinkState::Closed;
        self.deadline = None;
        self.events.push_back(LinkEvent::Closed);
    }

    fn unexpected(&mut self, got: FrameKind) -> LinkError {
        let state = match self.state {
            LinkState::AwaitingAck
            | LinkState::AwaitingHello
            | LinkState::AwaitingProof
            | LinkState::Verifying => "before the handshake completed",
            LinkState::Open => "on an open link",
            LinkState::ByeSent => "after our Bye",
            LinkState::ByeReceived | LinkState::Closed => "after the peer's Bye",
            LinkState::Failed => "on a failed link",
        };
        let error = WireError::UnexpectedFrame { got, state };
        self.wire_error(error)
    }

    fn wire_error(&mut self, error: WireError) -> LinkError {
        self.fail(LinkError::Wire {
            peer: self.name(),
            error,
        })
    }

    fn fail(&mut self, error: LinkError) -> LinkError {
        self.state = LinkState::Failed;
        self.deadline = None;
        error
    }
}

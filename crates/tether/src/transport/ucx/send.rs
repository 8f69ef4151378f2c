//! The sending half of the UCX transport and the link's handshake: frames
//! stamped by the link and sent as active messages from where their
//! payload lies, the endpoints they go on, and what this transport
//! decides when the link asks (whom to accept).

use tether_proto::link::{LinkError, LinkEvent};
use tether_proto::{FrameHeader, FrameKind, Hello, ReqId, Transmit, TransmitPayload};
use tether_ucx::{Completion, ErrorMode, SendMode};

use super::{am, InFlight, UcxTransport};
use crate::error::{err, ErrorClass};

/// `Data` payloads from this size on are sent with UCX's rendezvous
/// flag: below it a copy costs less than the extra round trip.
const RENDEZVOUS_FROM: usize = 64 * 1024;

impl UcxTransport {
    /// Stamps an engine frame with its link's next sequence number and
    /// sends it. A link that says no (after our `Bye`, or failed) takes
    /// nothing: the peer would not read it.
    pub(super) fn stamp_and_send(&mut self, t: Transmit) {
        let Transmit {
            peer,
            mut header,
            payload,
            completes,
            ..
        } = t;
        let Some(link) = self.peers.get_mut(&peer).and_then(|p| p.link.as_mut()) else {
            return;
        };
        match link.stamp(&mut header) {
            Ok(()) => {
                self.send_frame(peer, &header, payload, completes);
            }
            Err(error) => tracing::debug!("{:?} frame not sent: {error}", header.kind),
        }
    }

    /// Sends one stamped frame as a `FRAMES` active message. A connector's
    /// `Hello` carries this worker's address in front of its payload.
    /// Returns the send's token while UCX has not finished it.
    pub(super) fn send_frame(
        &mut self,
        peer: u32,
        header: &FrameHeader,
        payload: TransmitPayload,
        completes: Option<ReqId>,
    ) -> Option<u64> {
        if !self.ensure_endpoint(peer) {
            return None;
        }
        let mut header = *header;
        header.payload_len = payload.len() as u64;
        let mut address_len = 0u16;
        let mut flags = 0;
        let payload = if header.kind == FrameKind::Hello {
            address_len = self.address.len() as u16;
            flags = self.error_flags(peer);
            let mut data = self.address.clone();
            if let TransmitPayload::Owned(hello) = payload {
                data.extend_from_slice(&hello);
            }
            TransmitPayload::Owned(data)
        } else {
            payload
        };
        let am_header = Box::new(am::frame_header(
            &header.encode(),
            self.me(),
            address_len,
            flags,
        ));
        let (data, len, owned) = match payload {
            TransmitPayload::None => (std::ptr::null(), 0, None),
            TransmitPayload::Borrowed(region) => (region.ptr as *const u8, region.len, None),
            TransmitPayload::Owned(bytes) => (bytes.as_ptr(), bytes.len(), Some(bytes)),
            TransmitPayload::Gathered(runs) => {
                // SAFETY: the runs are user memory valid until the request
                // they belong to completes, which is after this copy.
                let bytes = unsafe { runs.to_vec() };
                (bytes.as_ptr(), bytes.len(), Some(bytes))
            }
        };
        // Rendezvous data goes by UCX's rendezvous whatever its size, so
        // that it lands in the posted buffer without a copy through UCX's
        // buffers; the rest as UCX sees fit by size.
        let mode = if header.kind == FrameKind::Data && len >= RENDEZVOUS_FROM {
            SendMode::Rendezvous
        } else {
            SendMode::Auto
        };
        let p = self.peers.get_mut(&peer).expect("peer exists");
        let ep = p.ep.as_ref().expect("ensured above");
        // SAFETY: the header is boxed and the payload either user memory
        // valid until `completes` is reported (which happens only when
        // UCX says the send is done) or a Vec owned by the in-flight
        // record; both stay put until the send is done.
        let sent = unsafe {
            ep.am_send_raw(
                am::FRAMES,
                am_header.as_ptr(),
                am_header.len(),
                data,
                len,
                mode,
            )
        };
        match sent {
            Ok(Completion::Done(())) => {
                if let Some(req) = completes {
                    self.events.sent.push(req);
                }
                None
            }
            Ok(Completion::Pending(token)) => {
                p.in_flight += 1;
                self.sends.insert(
                    token.0,
                    InFlight {
                        peer,
                        completes,
                        _header: am_header,
                        payload: owned,
                    },
                );
                Some(token.0)
            }
            Err(e) => {
                self.lose_with(peer, ErrorClass::PeerLost, |who| {
                    format!("UCX cannot send to {who}: {e}")
                });
                None
            }
        }
    }

    /// Makes the endpoint to `peer`'s worker if there is none; false (and
    /// the peer lost) when UCX cannot.
    ///
    /// A peer on another host gets UCX's peer error handling, so that UCX
    /// reports its death. A peer on this host does not: that mode bars
    /// UCX's shared-memory transports unless `UCX_POSIX_ERROR_HANDLING=y`
    /// (UCX would pick TCP over loopback, or fail with `UCX_TLS=sm`), and
    /// Tether's own liveness (its process descriptor) reports such a
    /// peer's death anyway. Where the peer's host is not known yet, peer
    /// error handling is tried first.
    pub(super) fn ensure_endpoint(&mut self, peer: u32) -> bool {
        let p = self.peers.get_mut(&peer).expect("peer exists");
        if p.ep.is_some() {
            return true;
        }
        let Some(address) = p.address.as_deref() else {
            return false;
        };
        let peer_errors = p.peer_errors.unwrap_or_else(|| {
            let same_host = p.same_host.unwrap_or_else(|| {
                self.addresses
                    .get(peer)
                    .is_ok_and(|a| a.host == self.config.host)
            });
            !same_host
        });
        let made = match (peer_errors, p.peer_errors) {
            (false, _) => self
                .worker
                .connect(address, ErrorMode::None)
                .map(|ep| (ep, false)),
            // Told by the peer: no other choice.
            (true, Some(_)) => self
                .worker
                .connect(address, ErrorMode::Peer)
                .map(|ep| (ep, true)),
            (true, None) => self
                .worker
                .connect(address, ErrorMode::Peer)
                .map(|ep| (ep, true))
                .or_else(|e| {
                    tracing::debug!(
                        "a UCX endpoint with peer error handling failed ({e}); trying without"
                    );
                    self.worker
                        .connect(address, ErrorMode::None)
                        .map(|ep| (ep, false))
                }),
        };
        match made {
            Ok((ep, peer_errors)) => {
                self.endpoint_peers.insert(ep.id().0, peer);
                p.ep = Some(ep);
                p.peer_errors = Some(peer_errors);
                true
            }
            Err(e) => {
                self.lose_with(peer, ErrorClass::Transport, |who| {
                    format!("UCX cannot make an endpoint to {who}: {e}")
                });
                false
            }
        }
    }

    /// Asks `peer`, the lower rank of the pair, to dial (once).
    pub(super) fn ask_to_dial(&mut self, peer: u32) {
        if !self.ensure_endpoint(peer) {
            return;
        }
        let header = am::dial_header(am::DialAm {
            universe_id: self.universe.id,
            from: self.me(),
            flags: self.error_flags(peer),
        })
        .to_vec();
        let p = self.peers.get_mut(&peer).expect("peer exists");
        let ep = p.ep.as_ref().expect("ensured above");
        match ep.am_send(am::DIAL, header, self.address.clone(), SendMode::Auto) {
            Ok(_) => p.dialled = true,
            Err(e) => {
                self.lose_with(peer, ErrorClass::PeerLost, |who| {
                    format!("UCX cannot send to {who}: {e}")
                });
            }
        }
    }

    /// The flags that tell `peer` how our endpoint to it was made.
    fn error_flags(&self, peer: u32) -> u16 {
        let peer_errors = self.peers.get(&peer).and_then(|p| p.peer_errors);
        if peer_errors == Some(true) {
            am::PEER_ERRORS
        } else {
            0
        }
    }

    /// Sends the frames `peer`'s link queued (handshake, goodbye).
    fn send_control_frames(&mut self, peer: u32) {
        let Some(link) = self.peers.get_mut(&peer).and_then(|p| p.link.as_mut()) else {
            return;
        };
        let mut control = Vec::new();
        while let Some(frame) = link.poll_transmit() {
            control.push(frame);
        }
        for frame in control {
            let payload = TransmitPayload::Owned(frame.payload);
            self.send_frame(peer, &frame.header, payload, None);
        }
    }

    /// Sends what `peer`'s link queued and answers its events, until it
    /// has neither. Call after every input to the link.
    pub(super) fn drive(&mut self, peer: u32) {
        loop {
            // Before any event is answered: answering may stamp engine
            // frames, which follow the link's own in its numbering.
            self.send_control_frames(peer);
            let event = self
                .peers
                .get_mut(&peer)
                .and_then(|p| p.link.as_mut())
                .and_then(|link| link.poll_event());
            let Some(event) = event else {
                break;
            };
            match event {
                LinkEvent::HelloReceived(hello) => self.on_hello(peer, &hello),
                LinkEvent::Established { .. } => self.establish(peer),
                // The peer's Bye, before ours or after it. No Tether
                // retires a UCX link (the link cap retires TCP's), so a
                // retiring Bye ends the link as a goodbye does.
                LinkEvent::PeerClosing | LinkEvent::PeerRetiring | LinkEvent::Closed => {
                    self.peer_closing(peer)
                }
                // Only an answer to a retire of ours, which UCX never sends.
                LinkEvent::RetireRefused => {}
            }
        }
        self.rearm();
    }

    /// A `Hello` that passed the link's checks: accepted when it names
    /// the process that sent it, as this universe knows it.
    fn on_hello(&mut self, peer: u32, hello: &Hello) {
        let member = self
            .universe
            .locate(hello.universe_rank)
            .is_some_and(|(p, r)| {
                self.universe.programs[p].name == hello.program && r == hello.program_rank
            });
        let Some(link) = self.peers.get_mut(&peer).and_then(|p| p.link.as_mut()) else {
            return;
        };
        if member && hello.universe_rank == peer {
            link.accept_hello();
            return;
        }
        let reason = format!(
            "handshake names {}:{} as universe rank {}, which does not match this universe or the sender (rank {peer})",
            hello.program, hello.program_rank, hello.universe_rank
        );
        tracing::warn!("refusing a UCX link: {reason}");
        link.reject_hello(&reason);
        // The refusal goes; the link is dropped after it, and the peer is
        // not given up (whoever sent this is not that peer).
        self.send_control_frames(peer);
        if let Some(p) = self.peers.get_mut(&peer) {
            p.link = None;
            p.arrived.clear();
            p.next_seq = 0;
        }
    }

    /// The handshake is done: the queued frames leave, stamped in order.
    fn establish(&mut self, peer: u32) {
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        p.established = true;
        p.attempt = None;
        self.watch_process(peer);
        let p = self.peers.get_mut(&peer).expect("checked above");
        let queued = std::mem::take(&mut p.queue);
        tracing::debug!("linked with {} over UCX", self.universe.describe(peer));
        for t in queued {
            self.stamp_and_send(t);
        }
        self.issue_waiting_rma(peer);
    }

    /// The peer's `Bye` came: it sends nothing more, so what waits for it
    /// fails now ("has finalized"); our own goodbye still goes when this
    /// process finalizes.
    fn peer_closing(&mut self, peer: u32) {
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        if !p.finished {
            p.finished = true;
            p.attempt = None;
            let who = self.universe.describe(peer);
            self.events.lost(
                peer,
                err(ErrorClass::PeerLost, format!("{who} has finalized")),
            );
        }
    }

    /// The link ended on an error: before its handshake ended, the peer
    /// could not be linked (refused, another key, too slow); after, it
    /// broke the protocol or went silent in its goodbye.
    pub(super) fn link_failed(&mut self, peer: u32, error: LinkError) {
        // A refusal the link queued (HelloReject) still goes.
        self.send_control_frames(peer);
        let who = self.universe.describe(peer);
        let error = match error {
            LinkError::Unauthenticated { reason, .. } => err(
                ErrorClass::Auth,
                format!("cannot authenticate with {who} over UCX: {reason}"),
            ),
            LinkError::Refused { reason, .. } | LinkError::Rejected { reason, .. } => {
                tracing::warn!("UCX link with {who} refused: {reason}");
                err(
                    ErrorClass::Transport,
                    format!("the UCX link with {who} was refused: {reason}"),
                )
            }
            LinkError::HandshakeTimeout { timeout, .. } => err(
                ErrorClass::Timeout,
                format!(
                    "{who} did not complete the UCX handshake within {:.1} s",
                    timeout.as_secs_f64()
                ),
            ),
            LinkError::GoodbyeTimeout { timeout, .. } => err(
                ErrorClass::PeerLost,
                format!(
                    "{who} did not answer this process's goodbye over UCX within {:.1} s",
                    timeout.as_secs_f64()
                ),
            ),
            other => self.broke_protocol_error(peer, &other),
        };
        self.lose(peer, error);
    }
}

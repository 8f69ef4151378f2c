//! The receiving half of the UCX transport: what the worker's callbacks
//! recorded (arrived messages, finished sends and receives, failed
//! endpoints), arrivals put back in link order and fed to the link, and
//! payloads placed where the engine says.

use std::time::Instant;

use tether_proto::link::{Inbound, Link};
use tether_proto::{classify, Class, LinkKind, PayloadSink, WireError};
use tether_ucx::{AmData, AmMessage, Completion, Event};

use super::{am, Arrival, Landing, Receiving, UcxTransport};
use crate::error::{err, ErrorClass};
use crate::transport::events::LinkEvent;

/// The bytes of a small payload (a control frame's), whatever UCX kept
/// it in; `None` for data UCX left on the sender (rendezvous).
fn small_bytes(data: AmData) -> Option<Vec<u8>> {
    match data {
        AmData::Bytes(bytes) => Some(bytes),
        other => other.bytes().map(<[u8]>::to_vec),
    }
}

impl UcxTransport {
    pub(super) fn on_event(&mut self, event: Event) {
        match event {
            Event::Am(message) if message.id == am::FRAMES => self.on_frame(message),
            Event::Am(message) => self.on_dial(message),
            Event::SendDone { token, result, .. } => {
                let Some(send) = self.sends.remove(&token.0) else {
                    self.flushed(token.0, result);
                    return;
                };
                if let Some(p) = self.peers.get_mut(&send.peer) {
                    p.in_flight -= 1;
                }
                match result {
                    Ok(()) => self.events.sent.extend(send.completes),
                    Err(e) => {
                        self.lose_with(send.peer, ErrorClass::PeerLost, |who| {
                            format!("UCX could not send to {who}: {e}")
                        });
                    }
                }
            }
            Event::RecvDone {
                token,
                result,
                buffer,
            } => self.on_received(token.0, result, buffer),
            Event::EndpointFailed { ep, error } => {
                let Some(&peer) = self.endpoint_peers.get(&ep.0) else {
                    return;
                };
                let who = self.universe.describe(peer);
                let message = format!(
                    "UCX reports the endpoint to {who} failed ({error}): the process exited or crashed, or the network to it is down"
                );
                tracing::warn!("{message}");
                self.lose(peer, err(ErrorClass::PeerLost, message));
            }
        }
    }

    /// A `FRAMES` message: kept by its sequence number, and the peer's
    /// arrivals fed to its link in order. Only a connector's `Hello` (a
    /// lower rank's, number 0, carrying its address) opens a link here.
    fn on_frame(&mut self, message: AmMessage) {
        let Some(frame) = am::parse_frame(&message.header) else {
            tracing::warn!(
                "a UCX frame with a header of {} bytes was dropped",
                message.header.len()
            );
            return;
        };
        let from = frame.from;
        let me = self.me();
        if from == me || self.universe.locate(from).is_none() {
            tracing::warn!("a UCX frame naming universe rank {from} was dropped");
            return;
        }
        let opens = from < me && frame.seq() == 0 && frame.address_len > 0;
        let p = self.peers.entry(from).or_default();
        if p.finished && p.link.is_none() {
            return;
        }
        if p.link.is_none() {
            if !opens {
                tracing::warn!(
                    "a UCX frame from universe rank {from} came before its link's Hello and was dropped"
                );
                return;
            }
            let link = Link::acceptor(self.links.new_link(), Instant::now());
            let p = self.peers.get_mut(&from).expect("entered above");
            p.link = Some(link);
            p.peer_errors
                .get_or_insert(frame.flags & am::PEER_ERRORS != 0);
        }
        let mut data = message.data;
        if frame.address_len > 0 {
            let split = small_bytes(data)
                .filter(|bytes| bytes.len() >= frame.address_len as usize)
                .map(|mut bytes| {
                    let rest = bytes.split_off(frame.address_len as usize);
                    (bytes, rest)
                });
            let Some((address, rest)) = split else {
                let error = self.broke_protocol_error(
                    from,
                    &"a frame announces a worker address its data does not hold",
                );
                self.lose(from, error);
                return;
            };
            let p = self.peers.get_mut(&from).expect("entered above");
            if p.address.is_none() {
                p.address = Some(address);
            }
            data = AmData::Bytes(rest);
        }
        let p = self.peers.get_mut(&from).expect("entered above");
        let arrival = Arrival { am: frame, data };
        if self.holding == Some(from) {
            // A short-path receive looks at it first (`short_path.rs`);
            // the next in order waits beside the map, which would
            // allocate a node for it.
            if frame.seq() == p.next_seq && self.held.is_none() {
                self.held = Some(arrival);
            } else {
                p.arrived.insert(frame.seq(), arrival);
            }
            return;
        }
        // The usual case, a frame in order that the link may take now,
        // skips the map.
        if frame.seq() == p.next_seq && p.arrived.is_empty() && p.may_take() {
            p.next_seq += 1;
            if !self.feed(from, arrival) {
                return;
            }
        } else {
            p.arrived.insert(frame.seq(), arrival);
        }
        self.advance(from);
    }

    /// A `DIAL`: a higher rank has frames for this process; the link is
    /// opened from here (its `Hello` authenticates both).
    fn on_dial(&mut self, message: AmMessage) {
        let Some(am::DialAm {
            universe_id: universe,
            from,
            flags,
        }) = am::parse_dial(&message.header)
        else {
            return;
        };
        let me = self.me();
        if universe != self.universe.id || from <= me || self.universe.locate(from).is_none() {
            tracing::warn!("a UCX dial from universe {universe:#x} rank {from} was ignored");
            return;
        }
        let p = self.peers.entry(from).or_default();
        if p.link.is_some() || p.finished {
            return;
        }
        if p.address.is_none() {
            p.address = small_bytes(message.data).filter(|a| !a.is_empty());
        }
        p.peer_errors.get_or_insert(flags & am::PEER_ERRORS != 0);
        self.start_connect(from);
    }

    /// Feeds `peer`'s arrivals to its link in order, until one is a
    /// data-path frame (reported, and waiting for its place), the next
    /// has not arrived, or a payload is still being fetched.
    pub(super) fn advance(&mut self, peer: u32) {
        while let Some(arrival) = self.next_arrival(peer) {
            if !self.feed(peer, arrival) {
                return;
            }
        }
    }

    /// The arrival `peer`'s link takes next, if it may take one now.
    fn next_arrival(&mut self, peer: u32) -> Option<Arrival> {
        if self.holding == Some(peer) {
            return None;
        }
        let p = self.peers.get_mut(&peer)?;
        if !p.may_take() {
            return None;
        }
        let arrival = p.arrived.remove(&p.next_seq)?;
        p.next_seq += 1;
        Some(arrival)
    }

    /// Hands the link of `peer` its next arrival (the one numbered
    /// `next_seq - 1`); returns whether the next may follow at once.
    fn feed(&mut self, peer: u32, arrival: Arrival) -> bool {
        let Some(link) = self.peers.get_mut(&peer).and_then(|p| p.link.as_mut()) else {
            return false;
        };
        let Arrival { am, data } = arrival;
        let header = match link.on_header(&am.frame) {
            Ok(Inbound::Control(header)) => {
                let payload =
                    small_bytes(data).filter(|bytes| bytes.len() as u64 == header.payload_len);
                let Some(payload) = payload else {
                    let error = self.broke_protocol_error(
                        peer,
                        &"a control frame's data does not match its header",
                    );
                    self.lose(peer, error);
                    return false;
                };
                return match link.on_control(&header, &payload) {
                    Ok(()) => {
                        self.drive(peer);
                        true
                    }
                    Err(error) => {
                        self.link_failed(peer, error);
                        false
                    }
                };
            }
            Ok(Inbound::Deliver(header)) => header,
            Err(error) => {
                self.link_failed(peer, error);
                return false;
            }
        };
        if data.len() as u64 != header.payload_len {
            let problem = format!(
                "a {:?} frame announces {} bytes and brings {}",
                header.kind,
                header.payload_len,
                data.len()
            );
            let error = self.broke_protocol_error(peer, &problem);
            self.lose(peer, error);
            return false;
        }
        match classify(&header, LinkKind::Stream, true) {
            Ok(Class::Data) => {
                if let Some(p) = self.peers.get_mut(&peer) {
                    p.reported = Some(data);
                }
                self.events.frames.push_back((peer, header));
                false
            }
            Ok(Class::Abort(code)) => {
                self.events.links.push(LinkEvent::Abort { peer, code });
                true
            }
            Ok(Class::Handshake | Class::Bye) => {
                let error = self.broke_protocol_error(
                    peer,
                    &WireError::UnexpectedFrame {
                        got: header.kind,
                        state: "on a UCX link",
                    },
                );
                self.lose(peer, error);
                false
            }
            Err(wire) => {
                let error = self.broke_protocol_error(peer, &wire);
                self.lose(peer, error);
                false
            }
        }
    }

    /// Puts the payload of the frame reported for `peer` where `sink`
    /// says, and reads on.
    pub(super) fn place_payload(&mut self, peer: u32, sink: PayloadSink) {
        let Some(data) = self.peers.get_mut(&peer).and_then(|p| p.reported.take()) else {
            return;
        };
        self.fill(peer, data, sink);
        self.advance(peer);
        self.check_exited(peer);
    }

    fn fill(&mut self, peer: u32, data: AmData, sink: PayloadSink) {
        let fetched = match (sink, data) {
            (PayloadSink::None, _) => return,
            (PayloadSink::Region { region, token, .. }, AmData::Held(desc))
                if desc.is_rendezvous() =>
            {
                if region.len >= desc.len() {
                    let len = desc.len();
                    // SAFETY: a receive's posted or granted buffer is
                    // reserved for it until it completes, which is after
                    // UCX reports this receive done (or the peer lost).
                    let done = unsafe { self.worker.recv_data_raw(desc, region.ptr, len) };
                    done.map(|c| match c {
                        Completion::Done(_) => {
                            self.events.filled.push((token, None));
                            None
                        }
                        Completion::Pending(t) => Some((t.0, token, Landing::InPlace)),
                    })
                } else {
                    let whole = vec![0u8; desc.len()];
                    self.worker.recv_data(desc, whole).map(|c| match c {
                        Completion::Done((whole, _)) => {
                            land_prefix(region, &whole);
                            self.events.filled.push((token, None));
                            None
                        }
                        Completion::Pending(t) => Some((t.0, token, Landing::Prefix(region))),
                    })
                }
            }
            (PayloadSink::Owned { buf, token }, AmData::Held(desc)) if desc.is_rendezvous() => {
                self.worker.recv_data(desc, buf).map(|c| match c {
                    Completion::Done((buf, _)) => {
                        self.events.filled.push((token, Some(buf)));
                        None
                    }
                    Completion::Pending(t) => Some((t.0, token, Landing::Owned)),
                })
            }
            (PayloadSink::Region { region, token, .. }, data) => {
                let bytes = small_bytes(data).unwrap_or_default();
                land_prefix(region, &bytes);
                self.events.filled.push((token, None));
                Ok(None)
            }
            (PayloadSink::Owned { mut buf, token }, data) => {
                let bytes = small_bytes(data).unwrap_or_default();
                let n = bytes.len().min(buf.len());
                buf[..n].copy_from_slice(&bytes[..n]);
                self.events.filled.push((token, Some(buf)));
                Ok(None)
            }
        };
        match fetched {
            Ok(None) => {}
            Ok(Some((ucx_token, token, landing))) => {
                self.receives.insert(
                    ucx_token,
                    Receiving {
                        peer,
                        token,
                        landing,
                    },
                );
                if let Some(p) = self.peers.get_mut(&peer) {
                    p.receiving = true;
                }
            }
            Err(e) => {
                self.lose_with(peer, ErrorClass::PeerLost, |who| {
                    format!("UCX could not receive a payload from {who}: {e}")
                });
            }
        }
    }

    /// A payload UCX fetched (or failed to) landed: its receive is
    /// reported filled and the peer's next frames are read.
    fn on_received(
        &mut self,
        ucx_token: u64,
        result: tether_ucx::Result<usize>,
        buffer: Option<Vec<u8>>,
    ) {
        let Some(Receiving {
            peer,
            token,
            landing,
        }) = self.receives.remove(&ucx_token)
        else {
            return;
        };
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        p.receiving = false;
        if p.finished && p.link.is_none() {
            return;
        }
        if let Err(e) = result {
            let who = self.universe.describe(peer);
            let why = if p.exited {
                "its process ended".to_string()
            } else {
                e.to_string()
            };
            let error = err(
                ErrorClass::PeerLost,
                format!("UCX could not receive a payload from {who}: {why}"),
            );
            self.lose(peer, error);
            return;
        }
        match landing {
            Landing::InPlace => self.events.filled.push((token, None)),
            Landing::Owned => self.events.filled.push((token, buffer)),
            Landing::Prefix(region) => {
                land_prefix(region, buffer.as_deref().unwrap_or_default());
                self.events.filled.push((token, None));
            }
        }
        self.advance(peer);
        self.check_exited(peer);
    }
}

/// Copies the start of `bytes` into `region` (all of it, or what fits:
/// a truncated receive keeps the start of the message).
fn land_prefix(region: tether_proto::Region, bytes: &[u8]) {
    let n = region.len.min(bytes.len());
    // SAFETY: the region is a receive's buffer, reserved for it until it
    // completes; `n` fits both.
    unsafe { region.ptr.copy_from_nonoverlapping(bytes.as_ptr(), n) };
}

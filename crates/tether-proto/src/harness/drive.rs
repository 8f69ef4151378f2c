//! One step of the world at the current instant: what each side of each
//! link does with its input, output and deadlines, as a runtime would.

use super::wire_model::InFlight;
use super::{Arrival, Failure, RailChoice, World};
use crate::engine::{Engine, PayloadSink, Transmit, TransmitPayload};
use crate::link::{Inbound, LinkError, LinkEvent, PeerName};
use crate::wire::{WireError, FLAG_CHUNK, HEADER_LEN};

impl World {
    /// Does everything that can be done at `now`; false when nothing was.
    pub(super) fn step(&mut self) -> bool {
        let sent = self.transmit();
        let delivered = self.deliver_arrived();
        let fired = self.fire_deadlines();
        sent || delivered || fired
    }

    /// Engine frames onto links (or into `pending` until one is open), and
    /// link control frames onto their wires.
    fn transmit(&mut self) -> bool {
        let mut moved = false;
        for rank in 0..self.engines.len() {
            while let Some(t) = self.engines[rank].poll_transmit() {
                moved = true;
                let to = t.peer as usize;
                let end = self.ends[rank][to].as_mut().expect("no frames to self");
                end.pending.push_back(t);
            }
            if self.remote.is_some() {
                moved |= self.run_rma(rank);
            }
            moved |= self.run_applies(rank);
            for peer in 0..self.engines.len() {
                if peer != rank {
                    moved |= self.reopen_retired(rank, peer);
                    moved |= self.write_control(rank, peer);
                    moved |= self.write_pending(rank, peer);
                }
            }
        }
        moved
    }

    fn write_control(&mut self, rank: usize, peer: usize) -> bool {
        let mut moved = false;
        let end = self.ends[rank][peer].as_mut().expect("not the diagonal");
        for (rail, link) in end.links.iter_mut().enumerate() {
            while let Some(frame) = link.poll_transmit() {
                moved = true;
                let mut bytes = frame.header.encode().to_vec();
                bytes.extend_from_slice(&frame.payload);
                self.wires[rank][peer][rail].write(self.now, &mut self.rng, None, bytes);
            }
        }
        moved
    }

    /// Links that both sides retired are replaced by new ones, the lower
    /// rank dialling. Nothing is in flight on them: each side's `Bye`
    /// was the last frame it wrote, and both arrived.
    fn reopen_retired(&mut self, rank: usize, peer: usize) -> bool {
        if rank > peer {
            return false;
        }
        let mut moved = false;
        for rail in 0..self.wires[rank][peer].len() {
            let retired = |end: &Option<super::PeerEnd>| {
                end.as_ref()
                    .is_some_and(|end| !end.lost && end.links[rail].retired())
            };
            if !retired(&self.ends[rank][peer]) || !retired(&self.ends[peer][rank]) {
                continue;
            }
            assert!(
                self.wires[rank][peer][rail].next_arrival().is_none()
                    && self.wires[peer][rank][rail].next_arrival().is_none(),
                "a frame followed a retiring Bye"
            );
            let (dialler, answerer) = (
                self.link_configs[rank].clone(),
                self.link_configs[peer].clone(),
            );
            let end = self.ends[rank][peer].as_mut().expect("not the diagonal");
            end.links[rail] = crate::link::Link::connector(dialler, peer as u32, self.now);
            let end = self.ends[peer][rank].as_mut().expect("not the diagonal");
            end.links[rail] = crate::link::Link::acceptor(answerer, self.now);
            self.reopened += 1;
            moved = true;
        }
        moved
    }

    fn write_pending(&mut self, rank: usize, peer: usize) -> bool {
        let mut moved = false;
        loop {
            let end = self.ends[rank][peer].as_mut().expect("not the diagonal");
            if end.lost {
                end.pending.clear();
                return moved;
            }
            let open: Vec<usize> = (0..end.links.len())
                .filter(|&rail| end.links[rail].takes_frames())
                .collect();
            let rail = match self.rail_choice {
                RailChoice::Random if !open.is_empty() => {
                    open[self.rng.below(open.len() as u64) as usize]
                }
                RailChoice::Fixed(rail) if open.contains(&rail) => rail,
                _ => return moved,
            };
            let Some(t) = end.pending.pop_front() else {
                return moved;
            };
            moved = true;
            let mut header = t.header;
            end.links[rail]
                .stamp(&mut header)
                .expect("the rail was chosen among open links");
            header.payload_len = t.payload.len() as u64;
            // Chunks of striped data keep no order among the peer's
            // frames (`engine/striped.rs`): they go around the resequencer.
            let peer_seq = (header.flags & FLAG_CHUNK == 0).then(|| end.order.stamp());
            let bytes = encode(&t, header);
            if let Some(req) = t.completes {
                self.engines[rank].transmit_done(req);
            }
            self.wires[rank][peer][rail].write(self.now, &mut self.rng, peer_seq, bytes);
        }
    }

    /// Every frame whose arrival time has come, to its link.
    fn deliver_arrived(&mut self) -> bool {
        let mut moved = false;
        let n = self.engines.len();
        for from in 0..n {
            for to in 0..n {
                for rail in 0..self.wires[from][to].len() {
                    while let Some(frame) = self.wires[from][to][rail].take_arrived(self.now) {
                        moved = true;
                        self.receive(from, to, rail, frame);
                    }
                }
            }
        }
        moved
    }

    fn receive(&mut self, from: usize, to: usize, rail: usize, frame: InFlight) {
        let now = self.now;
        let end = self.ends[to][from].as_mut().expect("not the diagonal");
        if end.lost {
            return;
        }
        let link = &mut end.links[rail];
        let head: &[u8; HEADER_LEN] = frame.bytes[..HEADER_LEN].try_into().expect("a header");
        let payload = &frame.bytes[HEADER_LEN..];
        let result = match link.on_header(head) {
            Ok(Inbound::Control(header)) => link.on_control(&header, payload),
            Ok(Inbound::Deliver(header)) => {
                assert_eq!(payload.len() as u64, header.payload_len);
                let arrival = Arrival {
                    header,
                    payload: payload.to_vec(),
                };
                let Some(seq) = frame.peer_seq else {
                    assert!(header.flags & FLAG_CHUNK != 0, "only chunks go unordered");
                    self.chunk_log
                        .push((to as u32, header.receiver_req, header.sender_req));
                    self.answer_events(to, from, rail);
                    if let Err(error) = feed(&mut self.engines[to], from as u32, arrival) {
                        let error = LinkError::Wire {
                            peer: PeerName(Some(from as u32)),
                            error,
                        };
                        self.fail(to, from, error);
                    }
                    return;
                };
                if end.highest_arrived.is_some_and(|highest| seq < highest) {
                    self.overtaken += 1;
                }
                end.highest_arrived = end.highest_arrived.max(Some(seq));
                end.inbound.push(now, seq, arrival)
            }
            Err(error) => Err(error),
        };
        self.answer_events(to, from, rail);
        if let Err(error) = result {
            self.fail(to, from, error);
            return;
        }
        self.hand_to_engine(to, from);
    }

    /// The acceptor's verdict on a `Hello` (the world accepts everyone the
    /// link's own checks let through) and the event log.
    pub(super) fn answer_events(&mut self, rank: usize, peer: usize, rail: usize) {
        let end = self.ends[rank][peer].as_mut().expect("not the diagonal");
        let link = &mut end.links[rail];
        let pinned = self.pinned.contains(&(rank as u32, peer as u32));
        while let Some(event) = link.poll_event() {
            match event {
                LinkEvent::HelloReceived(_) => link.accept_hello(),
                LinkEvent::PeerRetiring if pinned => {
                    link.refuse_retire();
                }
                LinkEvent::PeerRetiring => {
                    link.retire();
                }
                _ => {}
            }
            self.events.push((rank as u32, peer as u32, rail, event));
        }
    }

    /// The peer's frames that are next in its order, to the engine.
    fn hand_to_engine(&mut self, rank: usize, peer: usize) {
        loop {
            let end = self.ends[rank][peer].as_mut().expect("not the diagonal");
            let Some(arrival) = end.inbound.pop() else {
                return;
            };
            if let Err(error) = feed(&mut self.engines[rank], peer as u32, arrival) {
                let error = LinkError::Wire {
                    peer: PeerName(Some(peer as u32)),
                    error,
                };
                self.fail(rank, peer, error);
                return;
            }
        }
    }

    /// Passes the time to every link and resequencer at every step, as a
    /// runtime's progress loop would: their contract says an early call
    /// does nothing, and this tests it. True when a deadline ended a peer.
    fn fire_deadlines(&mut self) -> bool {
        let now = self.now;
        let n = self.engines.len();
        let mut fired = false;
        for rank in 0..n {
            for peer in (0..n).filter(|&peer| peer != rank) {
                let end = self.ends[rank][peer].as_mut().expect("not the diagonal");
                if end.lost {
                    continue;
                }
                let expired = end
                    .links
                    .iter_mut()
                    .map(|link| link.handle_timeout(now))
                    .chain([end.inbound.handle_timeout(now)])
                    .find_map(Result::err);
                if let Some(error) = expired {
                    fired = true;
                    self.fail(rank, peer, error);
                }
            }
        }
        fired
    }

    /// Records `error` and loses `peer` for `rank`: the engine fails what
    /// needed the peer, and nothing more moves between them.
    fn fail(&mut self, rank: usize, peer: usize, error: LinkError) {
        self.failures.push(Failure {
            rank: rank as u32,
            peer: peer as u32,
            error,
            at: self.now,
        });
        let end = self.ends[rank][peer].as_mut().expect("not the diagonal");
        end.lost = true;
        end.pending.clear();
        self.engines[rank].peer_lost(peer as u32);
        // A refusal queued its HelloReject; the peer should read why.
        self.write_control(rank, peer);
    }
}

fn encode(t: &Transmit, header: crate::wire::FrameHeader) -> Vec<u8> {
    let mut bytes = header.encode().to_vec();
    match &t.payload {
        TransmitPayload::None => {}
        // SAFETY: a transmitted region is valid until its request
        // completes, which `transmit_done` (after this copy) allows.
        TransmitPayload::Borrowed(r) => bytes.extend_from_slice(unsafe { r.as_slice() }),
        TransmitPayload::Owned(v) => bytes.extend_from_slice(v),
        // SAFETY: as for a borrowed region, for every run.
        TransmitPayload::Gathered(g) => bytes.extend_from_slice(&unsafe { g.to_vec() }),
    }
    bytes
}

/// What a transport does with an engine frame and its payload.
fn feed(engine: &mut Engine, from: u32, arrival: Arrival) -> Result<(), WireError> {
    let Arrival { header, payload } = arrival;
    match engine.on_header(from, &header)? {
        PayloadSink::None => {}
        PayloadSink::Region {
            region,
            discard,
            token,
        } => {
            assert_eq!(region.len as u64 + discard, header.payload_len);
            // SAFETY: the region is the posted receive's buffer, valid
            // until `payload_done` completes it; the payload is ours.
            unsafe { region.copy_from(&payload[..region.len]) };
            engine.payload_done(token, None);
        }
        PayloadSink::Owned { mut buf, token } => {
            buf.copy_from_slice(&payload);
            engine.payload_done(token, Some(buf));
        }
    }
    Ok(())
}

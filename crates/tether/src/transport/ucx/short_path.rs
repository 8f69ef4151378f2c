//! The short path of blocking calls over UCX (`runtime/direct.rs`): a
//! small eager message goes from the user's buffer into
//! `ucp_am_send_nbx`, and comes from the next in-order arrival of the
//! peer's link into the user's buffer, without an engine request, the
//! router's queues or a full progress round. The frames are the ones the
//! engine's path makes and takes, stamped and checked by the same link,
//! so neither side can tell which path the other took.
//!
//! While a receive polls, the peer's arrivals stay out of its link (the
//! next in order in `UcxTransport::held`, the others in the peer's map)
//! instead of going to the link at once, so that the short path can
//! look at the next one before the link takes it: an
//! eager message that the receive accepts and that fits its buffer is
//! taken; anything else is left for the engine's path, which the
//! arrivals are handed to as the receive ends. Other peers' arrivals and
//! the worker's other events take their usual way meanwhile, into this
//! transport's events for the router's next drain.

use tether_proto::link::Inbound;
use tether_proto::{FrameHeader, FrameKind, Region, TransmitPayload};

use super::{Peer, UcxTransport};
use crate::transport::api::LINK_QUEUE_FRAMES;
use crate::transport::shm::{Direct, Wanted};

/// Largest payload the short path sends: UCX's short and buffered-copy
/// protocols complete such a send within the call on every transport,
/// so the user's buffer is free when it returns; larger ones may go by
/// zero-copy, which holds the buffer until the peer took it.
pub const SHORT_PATH_MAX: usize = 4096;

impl Peer {
    /// Whether a frame stamped now goes out at once, in order: the link
    /// is open and takes frames, and nothing waits before it.
    fn sends_now(&self) -> bool {
        self.established
            && self.queue.is_empty()
            && self.rma_waiting.is_empty()
            && self.in_flight < LINK_QUEUE_FRAMES
            && self.link.as_ref().is_some_and(|l| l.takes_frames())
    }
}

impl UcxTransport {
    /// Sends an eager message of `payload` with `context` and `tag` to
    /// `peer` now, if its link is open with nothing waiting before it and
    /// the payload is at most [`SHORT_PATH_MAX`]; returns whether it did
    /// (then the buffer may be reused). A send UCX has not finished
    /// within the call is waited for here, progressing the worker. False
    /// also when the peer was lost during the call: the engine's path
    /// then fails the send with the loss.
    pub fn send_eager(&mut self, peer: u32, context: u32, tag: i32, payload: Region) -> bool {
        if payload.len > SHORT_PATH_MAX {
            return false;
        }
        let Some(p) = self.peers.get_mut(&peer).filter(|p| p.sends_now()) else {
            return false;
        };
        let mut header = FrameHeader::new(FrameKind::Eager);
        header.context = context;
        header.tag = tag;
        header.msg_size = payload.len as u64;
        let link = p.link.as_mut().expect("sends_now checked it");
        if link.stamp(&mut header).is_err() {
            return false;
        }
        let pending = self.send_frame(peer, &header, TransmitPayload::Borrowed(payload), None);
        let live = |t: &UcxTransport| t.peers.get(&peer).is_some_and(|p| !p.finished);
        if let Some(token) = pending {
            // The buffer is UCX's until the send is done, or the peer is
            // lost (its endpoint closed, which ends the send too).
            while self.sends.contains_key(&token) && live(self) {
                self.progress_worker();
            }
        }
        // A peer lost meanwhile: the engine's path reports it.
        live(self)
    }

    /// Takes `peer`'s next frame into `buf` when it is an `Eager` frame
    /// that `want` accepts and that fits, progressing the worker up to
    /// `polls` times (at least once) while none has arrived, with
    /// `pause()` between; `Other` when the next frame is anything else,
    /// or the link may not take a frame now.
    pub fn take_eager(
        &mut self,
        peer: u32,
        buf: Region,
        polls: u32,
        mut pause: impl FnMut(),
        want: Wanted,
    ) -> Direct {
        match self.peers.get(&peer) {
            Some(p) if p.established && p.may_take() => {}
            _ => return Direct::Other,
        }
        self.holding = Some(peer);
        // Arrivals before this call are in the map; those during it come
        // to `held` first.
        let mut found = self.take_arrived(peer, buf, want, true);
        for _ in 0..polls.max(1) {
            if !matches!(found, Direct::Empty) {
                break;
            }
            self.progress_worker();
            found = match self.held.is_some() {
                true => self.take_arrived(peer, buf, want, false),
                false => Direct::Empty,
            };
            if matches!(found, Direct::Empty) {
                pause();
            }
        }
        self.holding = None;
        if let Some(arrival) = self.held.take() {
            if let Some(p) = self.peers.get_mut(&peer).filter(|p| !p.finished) {
                p.arrived.insert(arrival.am.seq(), arrival);
            }
        }
        self.advance(peer);
        found
    }

    /// The short path's look at `peer`'s next arrival (see
    /// [`UcxTransport::take_eager`]): the one `held`, or with `in_map`
    /// the one the map holds.
    fn take_arrived(&mut self, peer: u32, buf: Region, want: Wanted, in_map: bool) -> Direct {
        let Some(p) = self.peers.get_mut(&peer).filter(|p| p.may_take()) else {
            return Direct::Other;
        };
        if in_map {
            if let Some(arrival) = p.arrived.remove(&p.next_seq) {
                self.held = Some(arrival);
            }
        }
        let Some(arrival) = self.held.as_ref() else {
            return Direct::Empty;
        };
        let Ok(header) = FrameHeader::decode(&arrival.am.frame, arrival.am.seq(), u64::MAX) else {
            return Direct::Other;
        };
        let takes = header.kind == FrameKind::Eager
            && want.accepts(header.context, header.tag)
            && header.payload_len as usize <= buf.len
            && arrival
                .data
                .bytes()
                .is_some_and(|b| b.len() as u64 == header.payload_len);
        if !takes {
            return Direct::Other;
        }
        let arrival = self.held.take().expect("looked at above");
        p.next_seq += 1;
        let link = p.link.as_mut().expect("may_take checked it");
        match link.on_header(&arrival.am.frame) {
            Ok(Inbound::Deliver(header)) => {
                let bytes = arrival.data.bytes().expect("checked above");
                // SAFETY: the receive's buffer is valid for `buf.len`
                // writes during the call, and the payload fits it.
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.ptr, bytes.len()) };
                Direct::Taken {
                    tag: header.tag,
                    bytes: header.payload_len,
                }
            }
            Ok(Inbound::Control(_)) => unreachable!("an Eager frame is no control frame"),
            Err(error) => {
                self.link_failed(peer, error);
                Direct::Other
            }
        }
    }

    /// One progress of the worker, its events taken in.
    fn progress_worker(&mut self) {
        self.worker.progress();
        while let Some(event) = self.worker.next_event() {
            self.on_event(event);
        }
    }
}

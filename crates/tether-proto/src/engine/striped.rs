//! The striped rendezvous: several links to one peer (rails) carry the
//! data of one large message in chunks, each chunk on whichever link the
//! transport chooses, each landing in place in the granted buffer.
//!
//! A route with rails says so in its caps ([`Stripe`], given to
//! [`Engine::set_stripe`]). Then the granted data of a rendezvous send of
//! at least [`Stripe::threshold`] bytes that does not move by remote
//! memory leaves as `Data` frames flagged [`FLAG_CHUNK`], each
//! [`Stripe::chunk`] bytes (the last one shorter) and carrying its offset.
//! The receiver checks each chunk (its receive waits for data from that
//! peer, the chunk lies inside the granted part), has it read into its
//! place, completes the receive when every chunk has been read, and says
//! so to the sender with a `Landed` frame. The send completes once the
//! transport has taken every chunk *and* the `Landed` came: until then
//! the sender keeps its buffer, so that it can send the chunks again.
//!
//! A rail that fails ([`Engine::rail_lost`]) may have taken chunks with
//! it, on either side of the link. Both sides see it fail, not always at
//! the same moment. The sender sends every chunk of its sends to that
//! peer that have not landed again (the transport puts them on the rails
//! left); the receiver reads a chunk it already has into its place again
//! (the same bytes) and counts it once, and drops a chunk for a receive it
//! has completed: one of its last [`LANDED_KEPT`] striped receives from
//! that peer, or any after it saw a rail to the peer fail itself. Any
//! other chunk for a receive that does not wait is a broken protocol. A
//! link that carries the peer's order (the home rail) cannot fail alone:
//! its loss is the peer's.
//!
//! Order: chunks may arrive in any order and on any link. MPI's order is
//! that of the `Eager` and `Rts` frames, which the transport keeps on the
//! peer's one home link; a chunk only answers the `Cts` of a receive that
//! is already matched, so it can overtake nothing.

use rustc_hash::FxHashSet as HashSet;

use super::{
    data_answering, Engine, FrameHeader, Kind, PayloadSink, RemoteRecv, Request, SendGather,
    SendState, SinkToken, Token, Transmit, TransmitPayload,
};
use crate::request::{Gather, Region, ReqId};
use crate::wire::{FrameKind, WireError, FLAG_CHUNK};

/// Striped receives remembered once complete, for chunks sent again
/// after a rail failed that arrive before this side saw the failure.
pub const LANDED_KEPT: usize = 1024;

/// How a route with rails wants large rendezvous data cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stripe {
    /// Granted data of at least this many bytes goes in chunks.
    pub threshold: u64,
    /// Bytes per chunk (at least 1).
    pub chunk: u64,
}

/// A send whose data went in chunks.
#[derive(Debug, Clone)]
pub(super) struct StripedSend {
    peer: u32,
    /// The receiver's `Cts`, which every chunk answers.
    cts: FrameHeader,
    chunk: u64,
    /// Chunk frames the transport has neither taken nor dropped yet.
    unsent: u64,
    /// The receiver said it has all the data.
    landed: bool,
}

/// What a striped receive has read of its chunks.
#[derive(Debug, Default, Clone)]
pub(super) struct ChunksReceived {
    /// Offsets of the chunks read (a chunk sent again counts once).
    offsets: HashSet<u64>,
    /// Their bytes.
    read: u64,
}

impl Engine {
    /// Gives sends to `peer` from now on `stripe` (`None`: one `Data`
    /// frame per rendezvous, the default).
    pub fn set_stripe(&mut self, peer: u32, stripe: Option<Stripe>) {
        match stripe {
            Some(stripe) if stripe.chunk > 0 => {
                self.stripes.insert(peer, stripe);
            }
            _ => {
                self.stripes.remove(&peer);
            }
        }
    }

    /// A rail to `peer` failed: chunks it carried may be lost. The
    /// chunks of every send to `peer` that has not landed go again (the
    /// transport spreads them over the rails left), and chunks from
    /// `peer` for receives already complete are dropped from now on.
    pub fn rail_lost(&mut self, peer: u32) {
        self.rails_failed.insert(peer);
        let again: Vec<(ReqId, StripedSend)> = self
            .striped_sends
            .iter()
            .filter(|(_, s)| s.peer == peer && !s.landed)
            .map(|(req, s)| (*req, s.clone()))
            .collect();
        for (req, send) in again {
            let data = match self.requests.get(req) {
                Some(Request {
                    kind: Kind::Send { region, gather, .. },
                    done: None,
                    ..
                }) => (
                    *region,
                    match gather {
                        Some(SendGather::Runs(g)) => Some(g.clone()),
                        _ => None,
                    },
                ),
                _ => continue,
            };
            let sent = self.push_chunks(peer, req, &send.cts, data, send.chunk);
            if let Some(s) = self.striped_sends.get_mut(&req) {
                s.unsent += sent;
            }
        }
    }

    /// The chunk size for `bytes` of granted data to `peer`, if they go
    /// in chunks (more than one).
    #[inline]
    pub(super) fn chunk_size(&self, peer: u32, bytes: u64) -> Option<u64> {
        if self.stripes.is_empty() {
            return None;
        }
        let stripe = self.stripes.get(&peer)?;
        (bytes >= stripe.threshold && bytes > stripe.chunk).then_some(stripe.chunk)
    }

    /// Sends the granted part of a send's data in chunks of `chunk`
    /// bytes.
    pub(super) fn send_chunks(
        &mut self,
        peer: u32,
        req: ReqId,
        cts: &FrameHeader,
        data: (Region, Option<Gather>),
        chunk: u64,
    ) {
        self.set_send_state(req, SendState::Data);
        let unsent = self.push_chunks(peer, req, cts, data, chunk);
        self.striped_sends.insert(
            req,
            StripedSend {
                peer,
                cts: *cts,
                chunk,
                unsent,
                landed: false,
            },
        );
    }

    /// Queues the chunks of the data `cts` granted; returns how many.
    fn push_chunks(
        &mut self,
        peer: u32,
        req: ReqId,
        cts: &FrameHeader,
        (region, runs): (Region, Option<Gather>),
        chunk: u64,
    ) -> u64 {
        let granted = cts.msg_size;
        let mut offset = 0;
        let mut count = 0;
        while offset < granted {
            let len = chunk.min(granted - offset);
            let mut header = data_answering(cts);
            header.flags = FLAG_CHUNK;
            header.sender_req = offset;
            header.payload_len = len;
            let (from, len) = (offset as usize, len as usize);
            self.outbox.push_back(Transmit {
                peer,
                header,
                payload: match &runs {
                    Some(g) => TransmitPayload::Gathered(g.slice(from, len)),
                    None => TransmitPayload::Borrowed(region.slice(from, len)),
                },
                completes: Some(req),
                copy_if_blocked: false,
            });
            offset += len as u64;
            count += 1;
        }
        count
    }

    /// The transport took (or, with a failed rail, dropped) one of
    /// `req`'s frames: whether the send may complete now (always, for a
    /// send that did not go in chunks).
    #[inline]
    pub(super) fn striped_handed_over(&mut self, req: ReqId) -> bool {
        if self.striped_sends.is_empty() {
            return true;
        }
        let Some(send) = self.striped_sends.get_mut(&req) else {
            return true;
        };
        send.unsent = send.unsent.saturating_sub(1);
        if send.unsent > 0 || !send.landed {
            return false;
        }
        self.striped_sends.remove(&req);
        true
    }

    /// The receiver of a striped send says all its data landed.
    pub(super) fn on_landed(
        &mut self,
        peer: u32,
        header: &FrameHeader,
    ) -> Result<PayloadSink, WireError> {
        let found = self.striped_sends.iter_mut().find(|(_, s)| {
            s.peer == peer && s.cts.receiver_req == header.receiver_req && !s.landed
        });
        let Some((&req, send)) = found else {
            return Err(WireError::UnknownHandle {
                kind: FrameKind::Landed,
                handle: header.receiver_req,
            });
        };
        send.landed = true;
        if send.unsent == 0 {
            self.striped_sends.remove(&req);
            self.send_complete(req);
        }
        Ok(PayloadSink::None)
    }

    /// A chunk of the data for receive `req`, which waits for `granted`
    /// bytes into `region` (checked by the caller: a matched receive of
    /// the chunk's sender): where it goes.
    pub(super) fn on_chunk(
        &mut self,
        req: ReqId,
        header: &FrameHeader,
        region: Region,
        granted: u64,
        remote: RemoteRecv,
    ) -> Result<PayloadSink, WireError> {
        if !matches!(remote, RemoteRecv::Link { .. } | RemoteRecv::Granted) {
            return Err(WireError::UnexpectedFrame {
                got: FrameKind::Data,
                state: "in chunks, for data that moves by remote memory",
            });
        }
        if header.msg_size != granted {
            return Err(WireError::DataLength {
                expected: granted,
                got: header.msg_size,
            });
        }
        let (offset, len) = (header.sender_req, header.payload_len);
        let inside = offset
            .checked_add(len)
            .is_some_and(|end| end <= granted && len > 0);
        if !inside {
            return Err(WireError::DataLength {
                expected: granted.saturating_sub(offset),
                got: len,
            });
        }
        Ok(PayloadSink::Region {
            region: region.slice(offset as usize, len as usize),
            discard: 0,
            token: SinkToken(Token::Chunk { req, offset, len }),
        })
    }

    /// A chunk for a receive that is not waiting for data: dropped if it
    /// is one sent again after its receive completed (the receive is one
    /// of the last striped ones from `peer`, or a rail to `peer` failed),
    /// else the peer broke the protocol.
    pub(super) fn stray_chunk(&self, peer: u32, header: &FrameHeader) -> Option<PayloadSink> {
        let again =
            self.rails_failed.contains(&peer) || self.landed.contains(&(peer, header.receiver_req));
        (header.flags & FLAG_CHUNK != 0 && again).then_some(PayloadSink::Region {
            region: Region {
                ptr: std::ptr::NonNull::dangling().as_ptr(),
                len: 0,
            },
            discard: header.payload_len,
            token: SinkToken(Token::Stray),
        })
    }

    /// The chunk at `offset` of receive `req` has been read: whether all
    /// its `granted` bytes now have (the receive then completes, and the
    /// sender is told).
    pub(super) fn chunk_read(&mut self, req: ReqId, offset: u64, len: u64, granted: u64) -> bool {
        let received = self.chunks_received.entry(req).or_default();
        if received.offsets.insert(offset) {
            received.read += len;
        }
        if received.read < granted {
            return false;
        }
        self.chunks_received.remove(&req);
        true
    }

    /// Tells `peer` that the striped data of receive `req` has landed,
    /// and remembers the receive for chunks sent again.
    pub(super) fn say_landed(&mut self, peer: u32, req: ReqId) {
        if self.landed.len() == LANDED_KEPT {
            if let Some(oldest) = self.landed_order.pop_front() {
                self.landed.remove(&oldest);
            }
        }
        self.landed.insert((peer, req.to_wire()));
        self.landed_order.push_back((peer, req.to_wire()));
        let mut landed = FrameHeader::new(FrameKind::Landed);
        landed.receiver_req = req.to_wire();
        self.outbox.push_back(Transmit {
            peer,
            header: landed,
            payload: TransmitPayload::None,
            completes: None,
            copy_if_blocked: false,
        });
    }

    /// Forgets what a striped request counted (it completed or failed).
    #[inline]
    pub(super) fn forget_chunks(&mut self, req: ReqId) {
        if !self.striped_sends.is_empty() {
            self.striped_sends.remove(&req);
        }
        if !self.chunks_received.is_empty() {
            self.chunks_received.remove(&req);
        }
    }
}

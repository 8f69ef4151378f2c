//! The striped rendezvous: several links to one peer (rails) carry the
//! data of one large message in chunks, each chunk on whichever link the
//! transport chooses, each landing in place in the granted buffer.
//!
//! A route with rails says so in its caps ([`Stripe`], given to
//! [`Engine::set_stripe`]). Then the granted data of a rendezvous send of
//! at least [`Stripe::threshold`] bytes that does not move by remote
//! memory leaves as `Data` frames flagged [`FLAG_CHUNK`], each
//! [`Stripe::chunk`] bytes (the last one shorter) and carrying its offset;
//! the send completes once the transport has taken every chunk, as a
//! plain send completes once it has taken its one `Data` frame. The
//! receiver checks each chunk (its receive waits for data from that peer,
//! the chunk lies inside the granted part), has it read into its place,
//! and completes the receive when all the granted bytes have landed.
//!
//! Order: chunks may arrive in any order and on any link. MPI's order is
//! that of the `Eager` and `Rts` frames, which the transport keeps on the
//! peer's one link; a chunk only answers the `Cts` of a receive that is
//! already matched, so it can overtake nothing.
//!
//! What the receiver needs from the sender is the same whatever the
//! sender's stripe: any chunk size, any number of chunks, one `Data` frame
//! or many. Chunks that overlap or repeat are refused as a broken protocol
//! only as far as the count of landed bytes shows it (more bytes than
//! granted): a correct sender sends each byte once.

use super::{
    data_answering, Engine, FrameHeader, PayloadSink, RemoteRecv, SendState, SinkToken, Token,
    Transmit, TransmitPayload,
};
use crate::request::{Gather, Region, ReqId};
use crate::wire::{FrameKind, WireError, FLAG_CHUNK};

/// What a striped receive has had of its chunks, in bytes.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ChunksReceived {
    /// Announced by their headers (never more than granted).
    announced: u64,
    /// Read into the buffer.
    read: u64,
}

/// How a route with rails wants large rendezvous data cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stripe {
    /// Granted data of at least this many bytes goes in chunks.
    pub threshold: u64,
    /// Bytes per chunk (at least 1).
    pub chunk: u64,
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
    /// bytes; the send completes once the transport has taken them all.
    pub(super) fn send_chunks(
        &mut self,
        peer: u32,
        req: ReqId,
        cts: &FrameHeader,
        (region, runs): (Region, Option<Gather>),
        chunk: u64,
    ) {
        self.set_send_state(req, SendState::Data);
        let granted = cts.msg_size;
        let chunks = granted.div_ceil(chunk);
        self.chunks_to_hand_over.insert(req, chunks);
        let mut offset = 0;
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
        }
    }

    /// The transport took one of `req`'s frames: whether the send is now
    /// complete (always, for a send that did not go in chunks).
    #[inline]
    pub(super) fn handed_over_all(&mut self, req: ReqId) -> bool {
        if self.chunks_to_hand_over.is_empty() {
            return true;
        }
        match self.chunks_to_hand_over.get_mut(&req) {
            None => true,
            Some(left) => {
                *left -= 1;
                if *left > 0 {
                    return false;
                }
                self.chunks_to_hand_over.remove(&req);
                true
            }
        }
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
        let announced = self.chunks_received.get(&req).map_or(0, |c| c.announced);
        let inside = offset
            .checked_add(len)
            .is_some_and(|end| end <= granted && len > 0 && announced + len <= granted);
        if !inside {
            return Err(WireError::DataLength {
                expected: granted - announced,
                got: len,
            });
        }
        // Counted now, so that a repeat is refused before it is read.
        self.chunks_received.entry(req).or_default().announced += len;
        Ok(PayloadSink::Region {
            region: region.slice(offset as usize, len as usize),
            discard: 0,
            token: SinkToken(Token::Chunk { req, len }),
        })
    }

    /// `len` bytes of receive `req`'s chunks have been read: whether all
    /// its `granted` bytes now have (then the receive completes).
    pub(super) fn chunk_read(&mut self, req: ReqId, len: u64, granted: u64) -> bool {
        let received = self.chunks_received.entry(req).or_default();
        received.read += len;
        if received.read < granted {
            return false;
        }
        self.chunks_received.remove(&req);
        true
    }

    /// Forgets what a striped request counted (it completed or failed).
    #[inline]
    pub(super) fn forget_chunks(&mut self, req: ReqId) {
        if !self.chunks_to_hand_over.is_empty() {
            self.chunks_to_hand_over.remove(&req);
        }
        if !self.chunks_received.is_empty() {
            self.chunks_received.remove(&req);
        }
    }
}

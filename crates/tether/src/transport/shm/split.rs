//! The split copy of large rendezvous data between two processes of one
//! host: the sender writes the first part into the receive buffer
//! (`process_vm_writev`) while the receiver reads the second part from the
//! send buffer (`process_vm_readv`), so that two cores copy at once. A
//! cross-memory copy is bound by the kernel's per-page work, not by memory
//! bandwidth, so two halves in parallel take little more than one half
//! (docs/journal/2026-11-24-shm-split-copy.md has the measurement).
//!
//! The protocol, in the transport words of `channel.rs`:
//! 1. The sender's `Rts` carries the send buffer's address when the
//!    message has at least `split_bytes` (its setting) and cross-memory
//!    attach works: an offer.
//! 2. The receiver's `Cts` carries its buffer's address, with [`SPLIT`]
//!    when it takes the offer (its own `split_bytes`, and reads not
//!    refused before). It then reads the part from [`split_point`] on and
//!    answers `PartRead`: tag 0, or 1 when the kernel refused the read
//!    (the sender then writes that part too).
//! 3. The sender writes the first part at its `Data`, waits for the
//!    `PartRead`, and only then sends `Data` (written) and completes the
//!    send: until the `PartRead`, the receiver may be reading its buffer.
//!
//! The receive completes at the `Data` frame, as without a split: the
//! receiver finished its own part before it read anything more. Whatever
//! the kernel refuses, the data still arrives: a sender that could not
//! write sends the whole payload through the ring after the `PartRead`.

use tether_proto::{FrameHeader, FrameKind, Region, Transmit, TransmitPayload};

use super::channel::SPLIT;
use super::cma::{self, CmaError};
use super::{Granted, ShmTransport};
use crate::error::{err, ErrorClass};

/// A split send whose first part is written (or could not be), waiting
/// for the receiver's `PartRead`.
pub struct Parked {
    data: Transmit,
    address: u64,
    first_written: bool,
}

/// Where the receiver's part of `len` bytes starts: the middle, rounded
/// down to a page.
pub fn split_point(len: usize) -> usize {
    (len / 2) & !4095
}

/// Where a cross-memory copy from or to `peer` failed.
pub(super) enum Failure {
    /// The peer's process is gone: its liveness check reports it.
    Gone,
    /// The peer announced memory it does not have.
    Broken(String),
}

impl ShmTransport {
    /// The transport word of `peer`'s `Rts` `t`: the address of the send
    /// buffer it announces when this process offers a split copy, else 0.
    pub(super) fn offer_word(&self, peer: u32, t: &Transmit) -> u64 {
        let split_bytes = self.config.split_bytes as u64;
        let wanted = split_bytes > 0 && t.header.msg_size >= split_bytes;
        match (self.channels.get(&peer), t.payload.rendezvous()) {
            (Some(channel), Some(region)) if wanted && channel.cma => region.ptr as u64,
            _ => 0,
        }
    }

    /// The transport word of a `Cts` `t` to `peer` and, when this
    /// process takes the sender's offer, what it reads afterwards:
    /// (address of the send buffer, the granted region).
    pub(super) fn grant_word(&mut self, peer: u32, t: &Transmit) -> (u64, Option<(u64, Region)>) {
        let header = &t.header;
        let split_bytes = self.config.split_bytes;
        let Some(channel) = self.channels.get_mut(&peer) else {
            return (0, None);
        };
        let offer = channel.offers.remove(&header.sender_req);
        if !channel.cma {
            return (0, None);
        }
        let Some(region) = t.payload.rendezvous().filter(|r| r.len > 0) else {
            return (0, None);
        };
        let word = region.ptr as u64;
        match offer {
            Some(source)
                if channel.cma_read
                    && split_bytes > 0
                    && region.len >= split_bytes
                    && word & SPLIT == 0 =>
            {
                (word | SPLIT, Some((source, region)))
            }
            _ => (word, None),
        }
    }

    /// Receiver: reads the part of `region` from [`split_point`] on from
    /// `source` in `peer`'s memory, then answers `PartRead` to its
    /// `sender_req`.
    pub(super) fn read_part(&mut self, peer: u32, sender_req: u64, source: u64, region: Region) {
        let Some(channel) = self.channels.get_mut(&peer).filter(|c| !c.lost) else {
            return;
        };
        let at = split_point(region.len);
        let Some(from) = source.checked_add(at as u64) else {
            let what =
                format!("the send buffer it announced at {source:#x} does not fit in memory");
            return self.failed(peer, Failure::Broken(what));
        };
        // SAFETY: `region` is the granted part of a posted receive, valid
        // and untouched by anything else until the receive completes, which
        // needs the sender's `Data`, which follows this `PartRead`.
        let read = unsafe { cma::read(channel.pid, from, region.ptr.add(at), region.len - at) };
        let ok = match read {
            Ok(()) => true,
            Err(CmaError::Refused(e)) => {
                tracing::info!(
                    "reading from {} by cross-memory attach refused ({e}): it writes its data itself",
                    self.universe.describe(peer)
                );
                channel.cma_read = false;
                false
            }
            Err(CmaError::Gone) => return self.failed(peer, Failure::Gone),
            Err(CmaError::BadAddress(e)) => {
                let what = format!(
                    "the send buffer it announced at {source:#x} is not mapped in it ({e})"
                );
                return self.failed(peer, Failure::Broken(what));
            }
        };
        let mut header = FrameHeader::new(FrameKind::PartRead);
        header.sender_req = sender_req;
        header.tag = i32::from(!ok);
        let frame = Transmit {
            peer,
            header,
            payload: TransmitPayload::None,
            completes: None,
            copy_if_blocked: false,
        };
        self.send_frame(frame, 0);
    }

    /// Sender: the `Data` of a grant the receiver splits, at `address` in
    /// its memory. Writes the first part, then finishes at once if the
    /// receiver's `PartRead` came already, or parks it until it comes.
    pub(super) fn send_split(&mut self, data: Transmit, address: u64) {
        let peer = data.peer;
        let Some(channel) = self.channels.get(&peer).filter(|c| !c.lost) else {
            return;
        };
        let mut first_written = false;
        if let (true, TransmitPayload::Borrowed(region)) = (channel.cma, &data.payload) {
            // SAFETY: the send buffer is valid until the request completes,
            // which is after the `PartRead`.
            match unsafe { self.write_granted(peer, region.ptr, address, split_point(region.len)) }
            {
                Granted::Written => first_written = true,
                Granted::Refused => {}
                Granted::Failed => return,
            }
        }
        let sender_req = data.header.sender_req;
        let parked = Parked {
            data,
            address,
            first_written,
        };
        let Some(channel) = self.channels.get_mut(&peer) else {
            return;
        };
        match channel.reads_done.remove(&sender_req) {
            Some(read) => self.finish_split(parked, read),
            None => {
                channel.parked.insert(sender_req, parked);
            }
        }
    }

    /// Sender: `peer` answered `PartRead` for `sender_req`. A peer lost
    /// meanwhile has no parked sends ([`ShmTransport::forget_transfers`]):
    /// its sends completed with the loss, and their buffers may be gone.
    pub(super) fn on_part_read(&mut self, peer: u32, sender_req: u64, ok: bool) {
        let Some(channel) = self.channels.get_mut(&peer).filter(|c| !c.lost) else {
            return;
        };
        match channel.parked.remove(&sender_req) {
            Some(parked) => self.finish_split(parked, ok),
            None => {
                channel.reads_done.insert(sender_req, ok);
            }
        }
    }

    /// Sender: both parts are done (`read`: the receiver read its own);
    /// writes what is missing and sends the `Data` frame, which completes
    /// the send.
    fn finish_split(&mut self, parked: Parked, read: bool) {
        let Parked {
            data,
            address,
            first_written,
        } = parked;
        let peer = data.peer;
        if self.channels.get(&peer).is_none_or(|c| c.lost) {
            return;
        }
        let mut rest_written = read;
        if let (true, false, TransmitPayload::Borrowed(region)) =
            (first_written, read, &data.payload)
        {
            let at = split_point(region.len);
            // SAFETY: as in `send_split`; the request has not completed.
            let src = unsafe { region.ptr.add(at) };
            let to = address.wrapping_add(at as u64);
            // SAFETY: `src` is within the send buffer, `region.len - at`
            // bytes before its end.
            match unsafe { self.write_granted(peer, src, to, region.len - at) } {
                Granted::Written => rest_written = true,
                Granted::Refused => {}
                Granted::Failed => return,
            }
        }
        if first_written && rest_written {
            self.send_written(data);
        } else {
            self.send_frame(data, 0);
        }
    }

    /// A cross-memory copy with `peer` failed. A process that may be gone
    /// is checked at the next poll, which reads what it wrote first.
    pub(super) fn failed(&mut self, peer: u32, failure: Failure) {
        match failure {
            Failure::Gone => self.suspects.push(peer),
            Failure::Broken(what) => {
                let message = format!(
                    "{} broke the protocol: {what}",
                    self.universe.describe(peer)
                );
                self.lose(peer, err(ErrorClass::Protocol, message));
            }
        }
    }
}

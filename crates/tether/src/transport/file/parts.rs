//! Receiving a rendezvous payload that arrives in parts (`chunks.rs`):
//! the first part is delivered as the whole payload (`deliver.rs`), each
//! part is checked to continue
//! the payload, read straight into the granted buffer at its offset and
//! verified before it counts, and the receive completes with the last.
//! A part that fails a check of its file is refused like any file and
//! awaited again; a sound file that is not the next part is a protocol
//! error.

use tether_proto::{Region, SinkToken};

use super::chunks::Progress;
use super::io::Checksum;
use super::{Arrival, FileTransport};

/// A rendezvous payload arriving in parts, and where they go.
pub(super) struct Incoming {
    progress: Progress,
    /// The granted receive buffer; `None` once its receive is gone (the
    /// remaining parts are then checked and consumed but written nowhere).
    region: Option<Region>,
    token: SinkToken,
}

impl Incoming {
    /// A payload of `progress.first.msg_size` bytes arriving in parts into
    /// `region`, for the receive of `token`.
    pub(super) fn new(progress: Progress, region: Region, token: SinkToken) -> Incoming {
        Incoming {
            progress,
            region: Some(region),
            token,
        }
    }

    /// The place of a payload whose first part was refused: awaited again.
    pub(super) fn into_place(self) -> (Region, SinkToken) {
        let region = self.region.expect("a fresh payload has its place");
        (region, self.token)
    }

    /// Its receive is gone: the remaining parts are checked and consumed
    /// but written nowhere.
    pub(super) fn forget_place(&mut self) {
        self.region = None;
    }
}

impl FileTransport {
    /// The next part of the payload arriving from `from`: checked to
    /// continue it, read into the granted buffer at its offset and
    /// verified; the receive completes with the last part.
    pub(super) fn deliver_part(&mut self, arrival: Arrival<'_>) -> bool {
        let Arrival {
            from, frame, path, ..
        } = arrival;
        let mut incoming = self
            .peer(from)
            .incoming
            .take()
            .expect("a payload in parts is arriving");
        if let Err(what) = incoming.progress.check_next(frame) {
            self.broke_protocol_in(from, path, what);
            return true;
        }
        if !self.read_part(arrival, &mut incoming) {
            self.peer(from).incoming = Some(incoming);
            return false;
        }
        if incoming.progress.remaining() > 0 {
            self.peer(from).incoming = Some(incoming);
        } else if incoming.region.is_some() {
            self.events.filled.push((incoming.token, None));
        }
        true
    }

    /// Reads the part in `opened` to its place in `incoming`'s buffer (or
    /// nowhere, its receive gone) and verifies it; advances `incoming` on
    /// success, refuses the file otherwise.
    pub(super) fn read_part(&mut self, arrival: Arrival<'_>, incoming: &mut Incoming) -> bool {
        let len = arrival.frame.payload_len;
        let read = match incoming.region {
            Some(region) => {
                let at = incoming.progress.destination(region, len);
                // SAFETY: within the granted region, reserved for this data
                // until its receive completes (checked above).
                let dst = unsafe { std::slice::from_raw_parts_mut(at.ptr, at.len) };
                arrival.opened.read_checked(dst, Checksum::Inline)
            }
            None => arrival
                .opened
                .read_checked(&mut vec![0u8; len as usize], Checksum::Inline),
        };
        let Err(problem) = read else {
            incoming.progress.offset += len;
            return true;
        };
        let progress = &incoming.progress;
        let what = format!(
            "{problem} (part of {len} bytes at offset {} of a {}-byte payload)",
            progress.offset, progress.first.msg_size
        );
        self.refuse(arrival.from, arrival.frame.seq, arrival.path, what);
        false
    }
}

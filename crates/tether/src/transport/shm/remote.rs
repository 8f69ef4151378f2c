//! A peer's memory on this host: the engine's remote memory operations
//! (`tether_proto::rma`: the writes and reads of its zero-copy
//! rendezvous) carried out by cross-memory attach (`cma.rs`). Which
//! operations to ask for, and what to do when one is refused, is the
//! engine's protocol (`tether-proto/src/engine/remote.rs`); this file only
//! checks each access against its key, copies, and says how it went.

use tether_proto::{PutSource, RmaKind, RmaOp, RmaStatus};

use super::cma::{self, CmaError};
use super::ShmTransport;
use crate::error::{err, ErrorClass};

impl ShmTransport {
    /// Carries out `op` with its peer's process. A peer that is gone is
    /// checked at the next poll (which reads what it wrote first); one
    /// whose key names memory it does not have broke the protocol and is
    /// lost.
    pub(super) fn execute(&mut self, op: &RmaOp) -> RmaStatus {
        let peer = op.peer;
        let Some(channel) = self.channels.get(&peer).filter(|c| !c.lost) else {
            return RmaStatus::Failed;
        };
        let pid = channel.pid;
        let Some(address) = op.remote_address() else {
            let what = format!(
                "its key of {} bytes at {:#x} does not hold {} bytes at offset {}",
                op.key.len,
                op.key.addr,
                op.len(),
                op.offset
            );
            self.broken(peer, what);
            return RmaStatus::Failed;
        };
        // SAFETY: the engine's operation names memory of a live request
        // of this process (a send buffer to read, the granted part of a
        // receive to fill), valid until it hears the outcome; nothing
        // else touches it meanwhile.
        let result = unsafe {
            match &op.kind {
                RmaKind::Put(PutSource::Region(r)) => cma::write(pid, r.ptr, address, r.len),
                RmaKind::Put(PutSource::Gathered(g)) => cma::write_gathered(pid, g, address),
                RmaKind::Get(r) => cma::read(pid, address, r.ptr, r.len),
                // Cross-memory attach copies; it has no atomics.
                RmaKind::Atomic(_) => return RmaStatus::Refused,
            }
        };
        let access = match op.kind {
            RmaKind::Put(_) => "writing to",
            RmaKind::Get(_) | RmaKind::Atomic(_) => "reading from",
        };
        match result {
            Ok(()) => RmaStatus::Done,
            Err(CmaError::Refused(e)) => {
                tracing::info!(
                    "{access} {} by cross-memory attach refused ({e}): that data goes through the ring",
                    self.universe.describe(peer)
                );
                RmaStatus::Refused
            }
            Err(CmaError::Gone) => {
                self.suspects.push(peer);
                RmaStatus::Failed
            }
            Err(CmaError::BadAddress(e)) => {
                let what =
                    format!("the memory its key names at {address:#x} is not mapped in it ({e})");
                self.broken(peer, what);
                RmaStatus::Failed
            }
        }
    }

    fn broken(&mut self, peer: u32, what: String) {
        let message = format!(
            "{} broke the protocol: {what}",
            self.universe.describe(peer)
        );
        self.lose(peer, err(ErrorClass::Protocol, message));
    }
}

//! Why a link (or the frame order of a peer) failed.

use std::fmt;
use std::time::Duration;

use thiserror::Error;

use super::LinkState;
use crate::wire::{Hello, WireError};

/// The process at the other end of a link, as far as the link knows it:
/// a connector knows whom it dialled, an acceptor learns it from the
/// peer's `Hello`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerName(pub Option<u32>);

impl fmt::Display for PeerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(rank) => write!(f, "universe rank {rank}"),
            None => f.write_str("a peer that has not sent its Hello"),
        }
    }
}

/// Why a link ended, or why a peer's frames cannot be delivered in order.
/// Each ends the link (or, from a [`super::Resequencer`], every link of
/// that peer); none is retried here.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LinkError {
    #[error("no handshake with {peer} within {timeout:?}")]
    HandshakeTimeout { peer: PeerName, timeout: Duration },
    /// The peer refused our `Hello` (`HelloReject` with
    /// [`super::RejectCode::Refused`]).
    #[error("{peer} refused the connection: {reason}")]
    Rejected { peer: PeerName, reason: String },
    /// The peer refused our `Hello` because it keeps another link to us
    /// (simultaneous connects): not a failure of the peer.
    #[error("{peer} keeps another link to this process")]
    Superseded { peer: PeerName },
    /// The peer refused our `Hello` as one of another universe.
    #[error("{peer} refused the connection: {reason}")]
    OtherUniverse { peer: PeerName, reason: String },
    /// We refused the peer's `Hello` (its `HelloReject` is queued).
    #[error("refused the handshake of {peer}: {reason}")]
    Refused { peer: PeerName, reason: String },
    /// The answer to our `Hello` came from another process than the one
    /// dialled, or from another universe (`got.universe_id` says which).
    #[error(
        "dialled universe rank {expected}, but the process that answered is universe rank {} ({}:{}) of universe {:#x}",
        got.universe_rank, got.program, got.program_rank, got.universe_id
    )]
    WrongPeer { expected: u32, got: Hello },
    /// The peer did not prove the run's key, or requires one we lack.
    #[error("{peer} failed authentication: {reason}")]
    Unauthenticated { peer: PeerName, reason: String },
    #[error("{peer} sent no Bye within {timeout:?} of ours")]
    GoodbyeTimeout { peer: PeerName, timeout: Duration },
    #[error("bad frame from {peer}: {error}")]
    Wire {
        peer: PeerName,
        #[source]
        error: WireError,
    },
    #[error("cannot send to {peer}: the link is {state:?}")]
    NotOpen { peer: PeerName, state: LinkState },
    #[error("frame {missing} from universe rank {peer} did not arrive within {timeout:?} while {held} later frames waited")]
    GapTimeout {
        peer: u32,
        missing: u64,
        held: usize,
        timeout: Duration,
    },
    #[error(
        "{held} frames from universe rank {peer} wait for frame {missing}, the most that may wait"
    )]
    HoldQueueFull {
        peer: u32,
        missing: u64,
        held: usize,
    },
    #[error("frame {seq} from universe rank {peer} arrived twice")]
    Duplicate { peer: u32, seq: u64 },
}

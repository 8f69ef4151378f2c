//! The short path of blocking calls and collectives (`runtime/direct.rs`)
//! over shared memory and UCX, borrowed apart from the rest of the
//! router: it needs only the peers' routes and those two transports, and
//! borrowing just those lets the caller read the peer records beside it
//! (an activity that names why a peer was lost while it uses the path).

use tether_proto::Region;

use crate::peers::Peers;
use crate::transport::shm::{Direct, ShmTransport, Wanted};
use crate::transport::ucx::UcxTransport;

pub struct ShortPath<'a> {
    peers: &'a Peers,
    shm: Option<&'a mut ShmTransport>,
    ucx: Option<&'a mut UcxTransport>,
}

impl<'a> ShortPath<'a> {
    #[inline(always)]
    pub(super) fn new(
        peers: &'a Peers,
        shm: Option<&'a mut ShmTransport>,
        ucx: Option<&'a mut UcxTransport>,
    ) -> ShortPath<'a> {
        ShortPath { peers, shm, ucx }
    }

    /// The peer records, for as long as the path is borrowed.
    #[inline(always)]
    pub fn peers(&self) -> &'a Peers {
        self.peers
    }

    /// The short path of a blocking send: writes an eager message with
    /// `context` and `tag` to `peer` at once when its route is shared
    /// memory and the ring takes it, or UCX and its link sends it now;
    /// returns whether it did. Nothing is
    /// sent otherwise, and the send takes the engine's path.
    #[inline(always)]
    pub fn send_eager(&mut self, peer: u32, context: u32, tag: i32, payload: Region) -> bool {
        match self.shm.as_deref_mut() {
            Some(shm) if self.peers.shm_idle(peer) => shm.send_eager(peer, context, tag, payload),
            _ => match self.ucx.as_deref_mut() {
                Some(ucx) if self.peers.ucx_idle(peer) => {
                    ucx.send_eager(peer, context, tag, payload)
                }
                _ => false,
            },
        }
    }

    /// The short path of a blocking receive: takes the next frame from
    /// `peer`'s shared-memory ring into `buf` if it is an `Eager` frame
    /// that `want` accepts, polling up to `polls` times while none is
    /// there (`pause()` between polls). A peer writes to this process
    /// through one transport for the whole run, so when it writes through
    /// shared memory its ring holds its frames in order, and `Empty` means
    /// none arrived; `Other` when its route is not shared memory.
    #[inline(always)]
    pub fn take_eager(
        &mut self,
        peer: u32,
        buf: Region,
        polls: u32,
        pause: impl FnMut(),
        want: Wanted,
    ) -> Direct {
        match self.shm.as_deref_mut() {
            Some(shm) if self.peers.shm_idle(peer) => shm.take_eager(peer, buf, polls, pause, want),
            _ => match self.ucx.as_deref_mut() {
                Some(ucx) if self.peers.ucx_idle(peer) => {
                    ucx.take_eager(peer, buf, polls, pause, want)
                }
                _ => Direct::Other,
            },
        }
    }
}

//! Remote memory access for the engine's protocols: typed keys to a
//! peer's memory, and the put and get operations the engine asks a
//! transport to carry out.
//!
//! A transport that reaches a peer's memory by address (cross-memory
//! attach on one host today; RDMA later: `remote_memory` in the runtime's
//! transport capabilities) executes [`RmaOp`]s; the engine decides when to
//! use them (the zero-copy rendezvous of `engine.rs`; one-sided windows
//! later) and never learns how they are carried out.
//!
//! A [`RemoteKey`] names memory of the process that issued it: the owner's
//! handle of it (`id`: the request, later the window, that owns it) and its
//! extent. The owner sends it in a frame's payload ([`FLAG_REMOTE_KEY`]);
//! the peer that uses it checks every access against the extent
//! ([`RemoteKey::address`]) before any byte moves, and the owner checks
//! the `id` of every frame that reports an access done. A key whose extent
//! does not cover what its frame grants is not used: the data then goes
//! through the link, so a wrong key costs speed, never data.
//!
//! [`FLAG_REMOTE_KEY`]: crate::wire::FLAG_REMOTE_KEY

use crate::request::{Gather, Region, ReqId};
use crate::wire::WireError;

/// Memory of one process that a peer may read or write by address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteKey {
    /// The owner's handle of the memory: the request it belongs to.
    pub id: u64,
    /// Where the memory starts in the owner's address space.
    pub addr: u64,
    /// Bytes of memory from `addr`.
    pub len: u64,
}

impl RemoteKey {
    /// Bytes of an encoded key: three little-endian `u64`s (id, address,
    /// length).
    pub const ENCODED_LEN: usize = 24;

    /// The key of `region`, owned by `id`.
    pub fn of(id: u64, region: Region) -> RemoteKey {
        RemoteKey {
            id,
            addr: region.ptr as u64,
            len: region.len as u64,
        }
    }

    pub fn encode(&self) -> [u8; Self::ENCODED_LEN] {
        let mut out = [0u8; Self::ENCODED_LEN];
        out[0..8].copy_from_slice(&self.id.to_le_bytes());
        out[8..16].copy_from_slice(&self.addr.to_le_bytes());
        out[16..24].copy_from_slice(&self.len.to_le_bytes());
        out
    }

    /// Decodes a key; any three words are a key, but one whose extent
    /// wraps around the address space is refused.
    pub fn decode(bytes: &[u8]) -> Result<RemoteKey, WireError> {
        if bytes.len() != Self::ENCODED_LEN {
            return Err(WireError::BadKeyLength {
                got: bytes.len() as u64,
            });
        }
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let key = RemoteKey {
            id: word(0),
            addr: word(8),
            len: word(16),
        };
        if key.addr.checked_add(key.len).is_none() {
            return Err(WireError::KeyWraps {
                addr: key.addr,
                len: key.len,
            });
        }
        Ok(key)
    }

    /// The address of the `len` bytes at `offset` in the key's memory, or
    /// `None` when they do not all lie inside it.
    pub fn address(&self, offset: u64, len: u64) -> Option<u64> {
        let end = offset.checked_add(len)?;
        (end <= self.len).then(|| self.addr + offset)
    }
}

/// Where the part of a rendezvous payload of `len` bytes that the
/// receiver reads itself begins, when both sides copy (the split copy):
/// the middle, rounded down to a page, so each side copies whole pages.
pub fn split_point(len: u64) -> u64 {
    (len / 2) & !4095
}

/// The local memory a put reads.
#[derive(Debug, Clone)]
pub enum PutSource {
    Region(Region),
    /// Runs of user memory, written one after the other.
    Gathered(Gather),
}

impl PutSource {
    pub fn len(&self) -> usize {
        match self {
            PutSource::Region(r) => r.len,
            PutSource::Gathered(g) => g.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An atomic operation on one 4- or 8-byte integer that a transport
/// carries out itself (UCX's `ucp_atomic_op_nbx`), for windows whose
/// members agreed to take every such operation that way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicCode {
    /// `*target += operand`.
    Add,
    /// `*target = operand`.
    Swap,
    /// `if *target == operand { *target = swap }`.
    CompareSwap,
    And,
    Or,
    Xor,
}

/// One atomic operation: what it reads and where its result goes.
#[derive(Debug, Clone, Copy)]
pub struct Atomic {
    pub code: AtomicCode,
    /// Bytes of the integer: 4 or 8.
    pub size: u8,
    /// The operand (a `CompareSwap`'s compare value) in its first `size`
    /// bytes, in this host's byte order.
    pub operand: [u8; 8],
    /// A `CompareSwap`'s new value, likewise.
    pub swap: [u8; 8],
    /// Where the value before the operation goes, if it is fetched
    /// (`size` bytes, borrowed until the operation is done).
    pub result: Option<Region>,
}

/// What an operation does.
#[derive(Debug, Clone)]
pub enum RmaKind {
    /// Writes `PutSource` into the peer's memory at the key's `offset`.
    Put(PutSource),
    /// Reads the peer's memory at the key's `offset` into this local region.
    Get(Region),
    /// An atomic operation on the integer at the key's `offset`.
    Atomic(Atomic),
}

/// An operation for the transport of `peer` ([`crate::Engine::poll_rma`]).
/// The local memory stays valid until the engine hears the outcome
/// ([`crate::Engine::rma_done`]); the transport checks that the access
/// lies inside `key` before it touches anything.
#[derive(Debug, Clone)]
pub struct RmaOp {
    /// What the operation serves.
    pub owner: RmaOwner,
    pub peer: u32,
    pub key: RemoteKey,
    /// Where in the key's memory the access starts.
    pub offset: u64,
    pub kind: RmaKind,
}

impl RmaOp {
    /// Bytes the operation moves.
    pub fn len(&self) -> usize {
        match &self.kind {
            RmaKind::Put(source) => source.len(),
            RmaKind::Get(region) => region.len,
            RmaKind::Atomic(atomic) => usize::from(atomic.size),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The address in the peer's memory the operation starts at, when the
    /// whole access lies inside its key.
    pub fn remote_address(&self) -> Option<u64> {
        self.key.address(self.offset, self.len() as u64)
    }
}

/// What a remote memory operation serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RmaOwner {
    /// A rendezvous transfer: the send or receive request.
    Transfer(ReqId),
    /// A one-sided put or get on a window: the engine's operation id.
    Window(u64),
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RmaStatus {
    /// Every byte moved.
    Done,
    /// The system refused the access (permissions, a security module):
    /// nothing is known to have moved, and the engine stops asking for
    /// this kind of access to the peer; the data goes through the link.
    Refused,
    /// The peer is gone or named memory it does not have: the transport
    /// reports the peer lost (or checks whether it is), which fails the
    /// request; the engine does nothing more for it.
    Failed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_encodes_and_decodes() {
        let key = RemoteKey {
            id: 7,
            addr: 0x7f00_0000_1000,
            len: 1 << 20,
        };
        assert_eq!(RemoteKey::decode(&key.encode()), Ok(key));
    }

    #[test]
    fn a_key_that_wraps_around_is_refused() {
        let key = RemoteKey {
            id: 1,
            addr: u64::MAX - 10,
            len: 11,
        };
        assert!(RemoteKey::decode(&key.encode()).is_err());
        assert!(RemoteKey::decode(&[0u8; 23]).is_err());
    }

    #[test]
    fn accesses_are_checked_against_the_extent() {
        let key = RemoteKey {
            id: 1,
            addr: 4096,
            len: 100,
        };
        assert_eq!(key.address(0, 100), Some(4096));
        assert_eq!(key.address(60, 40), Some(4156));
        assert_eq!(key.address(60, 41), None);
        assert_eq!(key.address(u64::MAX, 2), None);
    }

    #[test]
    fn the_split_point_is_a_page_boundary_in_the_first_half() {
        assert_eq!(split_point(1 << 20), 1 << 19);
        assert_eq!(split_point(3 * 4096 + 5), 4096);
        assert_eq!(split_point(4096), 0);
    }
}

//! Why an acceptor refuses a `Hello`, and which of two links survives
//! when both ends of a pair dial each other at once.

/// The reason code of a `HelloReject`, carried in its header's `tag`
/// beside the reason text, so that the connector acts on it without
/// reading the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectCode {
    /// The acceptor's checks refused the `Hello`; the text says why. A
    /// later try may pass (the cause may be passing).
    Refused = 0,
    /// Both ends dialled at once and the acceptor keeps another link
    /// ([`incoming_wins`]): not an error, the connector waits for that one.
    Duplicate = 1,
    /// The connector belongs to another universe: no retry changes that.
    OtherUniverse = 2,
    /// The connector did not prove the run's key, or one side has a key
    /// and the other none: no retry changes that either.
    Unauthenticated = 3,
}

impl RejectCode {
    /// The code a received `HelloReject` names; an unknown one (a later
    /// version's) reads as a plain refusal.
    pub fn from_tag(tag: i32) -> RejectCode {
        match tag {
            1 => RejectCode::Duplicate,
            2 => RejectCode::OtherUniverse,
            3 => RejectCode::Unauthenticated,
            _ => RejectCode::Refused,
        }
    }

    pub fn tag(self) -> i32 {
        self as i32
    }
}

/// The reason text of [`RejectCode::Duplicate`].
pub const DUPLICATE_REASON: &str = "duplicate connection";

/// The tie-break of simultaneous connects. An acceptor asks it when a
/// peer's `Hello` arrives while its own link to that peer is still in its
/// handshake: true when the peer's link (the incoming one) is to be kept
/// and its own dropped, false when the incoming one is to be refused with
/// [`crate::Link::reject_duplicate`]. The link dialled by the lower
/// universe rank wins, so both ends, each asking with its own rank, keep
/// the same one.
pub fn incoming_wins(me: u32, peer: u32) -> bool {
    peer < me
}

//! Links: the per-connection protocol below the engine, with time.
//!
//! A *link* is one ordered, reliable byte stream to one peer (a TCP
//! connection, a shared-memory ring pair). [`Link`] is its state machine:
//! the handshake (`Hello` → [`Challenge` → `Proof` →] `HelloAck` | `HelloReject` with a
//! [`RejectCode`]), the per-link sequence numbers in every frame header,
//! and the goodbye (`Bye` both ways: final when a process finalizes, or
//! retiring one link whose peer stays reachable over a new one). When two processes dial each other
//! at once, [`incoming_wins`] tells each acceptor which link to keep, so
//! that both keep the same one. The TCP transport drives one `Link` per
//! connection. A peer may be reached over several links at once (multi-rail);
//! [`Resequencer`] puts the frames of one peer taken from all its links
//! back into the order the peer's engine emitted them, numbered by the
//! sender's [`PeerSequence`].
//!
//! Like quinn's `Connection`, nothing here does I/O, reads a clock or
//! blocks: the caller passes the current time in (`now: Instant`) and
//! asks for the next deadline with `poll_timeout()`. Call order, for each
//! link (and the same for each peer's resequencer, where it applies):
//! 1. feed input: [`Link::on_header`] for every 56-byte header read, and
//!    [`Link::on_control`] with the payload of each control frame;
//! 2. answer events: drain [`Link::poll_event`] (an acceptor decides on a
//!    [`LinkEvent::HelloReceived`] with [`Link::accept_hello`] or
//!    [`Link::reject_hello`]);
//! 3. write output: drain [`Link::poll_transmit`] and write each frame,
//!    then stamp engine frames with [`Link::stamp`] and write them, in
//!    the order they were stamped;
//! 4. arm a timer for [`Link::poll_timeout`]; when it fires (or at any
//!    later call) pass the time to [`Link::handle_timeout`].
//!
//! An `Err` from input or from a deadline ends the link (a refused
//! [`Link::stamp`] changes nothing): the caller drains `poll_transmit`
//! once more (a refusal may have queued its `HelloReject`), closes the
//! connection and, if that was the peer's last link, reports the peer
//! lost to the engine. An `Err` from a peer's resequencer ends every link
//! of that peer. Every error names the peer and, for a timeout, the time
//! waited.
//!
//! The multi-rail order needs the sender's peer sequence number on the
//! wire next to the link's own; the version-1 header has one sequence
//! field, used by the link. Until a header carries both, a transport
//! passes the peer sequence to [`Resequencer::push`] however it carries
//! it, and a peer with a single link needs no resequencer (its link's
//! order is the peer's order).
//!
//! With a key ([`LinkConfig::auth`]) the handshake authenticates both
//! sides before the acceptor's caller sees the `Hello`: a `Challenge` and
//! a `Proof` pass between the `Hello` and the `HelloAck` (`auth.rs`).

mod auth;
mod error;
mod machine;
mod reject;
mod resequence;

#[cfg(test)]
mod tests;

pub use auth::LinkAuth;
pub use error::{LinkError, PeerName};
pub use machine::{
    ControlFrame, Inbound, Link, LinkConfig, LinkEvent, LinkState, BYE_FINAL, BYE_RETIRE, BYE_STAY,
};
pub use reject::{incoming_wins, RejectCode, DUPLICATE_REASON};
pub use resequence::{PeerSequence, Resequencer};

//! The sans-IO protocol engine of Tether.
//!
//! Nothing in this crate opens a socket, reads a clock or starts a thread:
//! the runtime hands it decoded frame headers and finished payloads, and it
//! answers with frames to transmit and requests that completed. This keeps
//! every protocol decision (matching order, eager or rendezvous, truncation,
//! what a lost peer means for pending requests) in one deterministic place
//! that is unit-tested in a single thread.
//!
//! The layers, top to bottom:
//! - [`dispatch`]: the one place a decoded frame header is routed;
//! - [`engine::Engine`]: point-to-point requests with MPI semantics, and
//!   one-sided operations on windows (`engine/onesided.rs`);
//! - [`matching`]: the posted-receive and unexpected-message queues;
//! - [`rma`]: remote keys and the put/get operations the engine asks a
//!   transport for;
//! - [`counters`]: messages and bytes moved, per peer;
//! - [`link`]: one link to a peer (handshake, sequence numbers, goodbye,
//!   deadlines) and the order of a peer's frames across several links;
//! - [`wire`]: the frame header and handshake codecs.
//!
//! Time is an input like any other: code that has deadlines takes `now`
//! and answers `poll_timeout()`, so tests run it on a virtual clock.

pub mod counters;
pub mod dispatch;
pub mod engine;
pub mod link;
pub mod matching;
pub mod pool;
pub mod request;
pub mod rma;
pub mod wire;

pub use counters::{Counters, PeerCounters, SendPath};
pub use dispatch::{classify, deliver, Class, Delivery, FileData, LinkKind};
pub use engine::{
    Apply, ApplyStatus, Engine, EngineConfig, FlushMark, PayloadSink, Reduction, RmaError,
    RmaTarget, SinkToken, Stripe, Transmit, TransmitPayload,
};
pub use link::{Link, LinkAuth, LinkConfig, LinkError, LinkEvent, LinkState, Resequencer};
pub use request::{Completion, CompletionError, Gather, Region, ReqId};
pub use rma::{Atomic, AtomicCode, PutSource, RemoteKey, RmaKind, RmaOp, RmaOwner, RmaStatus};
pub use wire::onesided::{ReplyStatus, RmaCode};
pub use wire::{FrameHeader, FrameKind, Hello, WireError, FLAG_CHUNK};

#[cfg(test)]
mod harness;

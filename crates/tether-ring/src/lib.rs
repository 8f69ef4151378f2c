//! A single-producer single-consumer byte ring, the mailbox (a ring that
//! many producers share under a lock word), and the doorbell protocol
//! that lets a consumer sleep, for rings that live in memory shared
//! between processes.
//!
//! The crate holds only the synchronisation: where the ring's bytes and
//! control words live is the caller's business ([`Bytes`], and a
//! [`std::ops::Deref`] to [`RingControl`] / [`Doorbell`]). It has no
//! dependencies so that the loom model check (`RUSTFLAGS="--cfg loom"
//! cargo test -p tether-ring --release`) builds in seconds; under
//! `cfg(loom)` the atomics are loom's and the tests in `tests/loom.rs`
//! explore every interleaving the memory model allows.

mod doorbell;
mod mailbox;
mod ring;
mod sync;

pub use doorbell::Doorbell;
pub use mailbox::{MailboxControl, Refused};
pub use ring::{Bytes, Consumer, Producer, RingControl};
/// The memory orderings of [`Bytes`] word accesses (std's, which loom shares).
pub use std::sync::atomic::Ordering;

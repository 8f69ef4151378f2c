//! The contract every transport implements: tcp, shm and file today; the
//! wrappers and transports of later issues (rails, UCX) the same way.
//!
//! A transport moves frames between this process and its peers over
//! links of one kind. It never calls the engine or the runtime, and no
//! transport knows another: it reports what happened in its [`Events`],
//! which the router drains after every call (`events.rs`), and it is
//! told where a reported frame's payload goes ([`Transport::place`]).
//! No method blocks. Back-pressure is a status: a link that cannot take
//! another frame now (more than [`LINK_QUEUE_FRAMES`] wait in the
//! transport for it, or it is not connected yet) gives the frame back as
//! [`NoResource`], and the router keeps it in the peer's one queue of
//! waiting frames (`peers.rs`) and offers it again after progress. What a
//! transport has taken leaves in order as the link drains. How a
//! transport makes progress (descriptors in the reactor, rings polled,
//! files looked for) is its own and the router's business, outside this
//! contract.
//!
//! Ownership: a [`Transmit`] with a borrowed payload points at user
//! memory that stays valid until the transport reports the frame sent
//! ([`Events::sent`]); a [`PayloadSink`] region stays valid until the
//! transport reports it filled, or the peer lost.

use tether_proto::{
    Delivery, FileData, FrameKind, PayloadSink, RmaOp, RmaStatus, Stripe, Transmit, WireError,
};

use super::events::Events;

/// Frames a transport keeps waiting for one link before it refuses more
/// ([`NoResource`]): enough to write several at once (`writev` of queued
/// frames) without a queue the router cannot see or bound.
pub const LINK_QUEUE_FRAMES: usize = 64;

/// A frame the link could not take now, given back untouched.
#[derive(Debug)]
pub struct NoResource(pub Transmit);

/// What a transport can do, for the router's and the engine's choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// The eager limit the transport wants for its peers, where the
    /// general one does not suit it (`file`: each message is a file, so
    /// a larger eager message saves the rendezvous's two extra files).
    pub eager_limit: Option<u64>,
    /// The largest message whose data the transport moves by the peer's
    /// memory address (cross-memory attach), carrying out the engine's
    /// remote memory operations ([`Transport::rma`]) so that rendezvous
    /// data does not pass through the link: 0 for none, `u64::MAX` for
    /// every size (a hybrid keeps larger payloads for its files).
    pub remote_memory: u64,
    /// Several links reach the peer (rails): rendezvous data from the
    /// stripe's threshold on goes in chunks that the transport spreads
    /// over them (`rails.rs`).
    pub stripe: Option<Stripe>,
    /// Window puts and gets of at least this many bytes go to the
    /// transport as remote memory operations keyed by the window
    /// ([`Transport::rma`], owner `Window`), whatever `remote_memory`
    /// says: the transport registered the windows' memory itself when
    /// they were created (UCX: `Router::window_created`). `None`: window
    /// operations follow `remote_memory` and `TETHER_RMA_DIRECT_BYTES`.
    pub window_rma: Option<u64>,
}

impl Caps {
    /// Nothing beyond frames on links.
    pub const NONE: Caps = Caps {
        eager_limit: None,
        remote_memory: 0,
        stripe: None,
        window_rma: None,
    };
}

/// What became of a remote memory operation handed to a transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RmaOutcome {
    /// Carried out (or not) within the call.
    Now(RmaStatus),
    /// Taken: the transport reports the outcome later, with the
    /// operation, in its events' `rma_done`; the operation's memory stays
    /// borrowed until then.
    Reported,
}

pub trait Transport {
    fn caps(&self) -> Caps;

    /// Hands `t` to the link to its peer, which writes it now or, in
    /// order, once it has room; or gives it back as [`NoResource`] when
    /// the link cannot take it now. A frame that completes a request is
    /// reported sent once its bytes are handed over (or copied, where
    /// `copy_if_blocked` allows). A frame for a peer the transport has
    /// lost is taken and dropped.
    fn send(&mut self, t: Transmit) -> Result<(), NoResource>;

    /// Carries out one of the engine's remote memory operations with
    /// `op.peer` (only where [`Caps::remote_memory`] or
    /// [`Caps::window_rma`]): checks that the access lies inside its key,
    /// then copies, or starts the operation and reports it later
    /// ([`RmaOutcome::Reported`]). Blocks for a copy only, never for the
    /// peer. `Failed` means the transport reported the peer lost, or will
    /// once it has read what the peer wrote; `Refused` that the system
    /// does not allow it (transports without remote memory refuse every
    /// operation).
    fn rma(&mut self, op: &RmaOp) -> RmaOutcome {
        let _ = op;
        RmaOutcome::Now(RmaStatus::Refused)
    }

    /// Says where the payload of the data-path frame `peer`'s link
    /// reported goes (the engine's delivery); the link reads on. Ignored
    /// when no frame of `peer` waits.
    fn place(&mut self, peer: u32, sink: PayloadSink);

    /// The payload of the data-path frame `peer`'s link reported waits in
    /// a file (the sender is a hybrid: `Delivery::InFile`); the link reads
    /// on. Only a transport that reads payload files takes it (the router,
    /// a [`Hybrid`](super::hybrid::Hybrid)); for the others the peer broke
    /// the protocol, which is the default.
    fn place_in_file(&mut self, data: FileData) {
        let error = WireError::UnexpectedFrame {
            got: FrameKind::Data,
            state: "with its payload in a file, on a link that reads no files",
        };
        self.broke_protocol(data.peer, error);
    }

    /// The engine refused the frame `peer`'s link reported: the peer broke
    /// the protocol, and is reported lost with `error` named.
    fn broke_protocol(&mut self, peer: u32, error: WireError);

    /// What happened since the router last drained it.
    fn events(&mut self) -> &mut Events;

    /// Whether frames still wait for their links (for finalize).
    fn has_output(&self) -> bool;

    /// Queues a goodbye on every link (once).
    fn say_goodbye(&mut self);

    /// Whether every link has said its goodbye and heard the peer's.
    fn all_goodbyes_heard(&self) -> bool;

    /// Queues an abort with exit code `code` on every link, best effort.
    fn broadcast_abort(&mut self, code: i32);
}

/// A transport that carries payloads announced on another link: the
/// large-payload half of a [`Hybrid`](super::hybrid::Hybrid) (files).
pub trait PayloadFiles {
    /// Writes the payload of the rendezvous `Data` frame `t` where the
    /// peer will look for it, and returns the frame to send on the link
    /// instead: payload-less, flagged as announcing a payload elsewhere,
    /// its send reported done (the payload is written). When the payload
    /// cannot be written, returns `t` untouched with a warning, so that
    /// the link carries it (nothing is reported; the buffer stays
    /// borrowed).
    fn send_payload(&mut self, t: Transmit) -> Transmit;

    /// Reads a payload another link announced into its receive, once it
    /// is there (reported as filled in this transport's events).
    fn add_payload(&mut self, data: FileData);
}

/// Hands `transport` the delivery of the data-path frame `peer`'s link
/// reported ([`tether_proto::deliver`]'s answer).
#[inline]
pub fn place<T: Transport + ?Sized>(transport: &mut T, peer: u32, delivery: Delivery) {
    match delivery {
        Delivery::Payload(sink) => transport.place(peer, sink),
        Delivery::InFile(data) => transport.place_in_file(data),
    }
}

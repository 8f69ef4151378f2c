//! A hand-written binding of the UCP (UCX) functions Tether needs, loaded
//! at run time with `dlopen("libucp.so.0")`, and a small safe wrapper.
//!
//! # Why this shape
//!
//! No UCX crate builds here (they need bindgen/libclang or build a bundled
//! UCX), and Tether must build and run where UCX is absent. So this crate
//! has no build or link dependency on UCX: [`Ucp::load`] opens the library
//! when asked, checks `ucp_get_version` (>= 1.10) and resolves every
//! function into a table ([`Ucp`]). The raw C types are in [`ffi`], checked
//! against the installed `ucp.h` by `tests/layout.rs`.
//!
//! # Contract
//!
//! * **Errors.** Loading fails with [`Unavailable`] whose `reason` is one
//!   line, e.g. `cannot load libucp.so.0: libucp.so.0: cannot open shared
//!   object file: No such file or directory`, `libucp.so.0 has no symbol X`
//!   or `UCX 1.9.0 (libucp.so.0) is older than 1.10 (needs
//!   ucp_am_send_nbx)`. `TETHER_UCX_LIB` names another file or path.
//!   Every later failure is an [`Error`]: the UCP function and
//!   `ucs_status_string` of its status. Nothing panics on a UCX failure.
//! * **Blocking.** Nothing blocks except [`Worker::wait`] (bounded by its
//!   timeout) and closing: [`Endpoint::close`] and dropping an [`Endpoint`]
//!   progress the worker until UCX has closed it (at most the timeout, 2 s
//!   for a drop); dropping the last handle of a worker cancels what is in
//!   flight and progresses for at most 100 ms. Operations UCX cannot cancel
//!   (sends, rendezvous receives) are then abandoned: their buffers are
//!   leaked rather than freed under UCX, which warns about objects "not
//!   returned to mpool". Wait for completions before dropping to avoid it.
//! * **Callbacks record, callers poll.** UCX runs callbacks inside
//!   [`Worker::progress`] (and inside `close`/drops). The binding's
//!   callbacks never call user code: they append to a queue owned by the
//!   worker, read with [`Worker::next_event`]. AM handlers are registered
//!   in [`Worker::new`], before [`Worker::address`] can be published, so no
//!   message arrives for an id without a handler (UCX would drop it).
//! * **Ownership.** [`Endpoint::am_send`] and [`Worker::recv_data`] take
//!   `Vec<u8>`s and give them back when UCX is done ([`Completion::Done`] at
//!   once, or in [`Event::SendDone`] / [`Event::RecvDone`]). The `_raw`
//!   variants are `unsafe`: the caller keeps its memory valid until the
//!   completion. Rendezvous data lands directly in the buffer given to
//!   [`Worker::recv_data`]. Held AM data ([`AmDesc`]) is released when
//!   dropped. Endpoints and descriptors keep their worker alive; the worker
//!   keeps its context alive.
//! * **Threads.** The worker is created with `UCS_THREAD_MODE_SINGLE`
//!   ([`Worker::with_mode`] makes a `SERIALIZED` one, for a caller that
//!   moves the whole between threads under its own lock):
//!   [`Context`], [`Worker`], [`Endpoint`] and [`AmDesc`] are neither `Send`
//!   nor `Sync` and belong to the thread that created them. The function
//!   table [`Ucp`] is `Send + Sync`. To wake a sleeping worker from another
//!   thread use its event fd's peer (your own eventfd in the same epoll).
//! * **One-sided.** [`Context::map`] registers memory (a context made
//!   with [`ContextOptions::rma`]); [`MemRegion::pack`] gives its key,
//!   which a peer unpacks on its endpoint ([`Endpoint::unpack_key`]).
//!   Puts, gets and atomics on the endpoint are done when a later
//!   [`Endpoint::flush`] is (`rma.rs` says why and who must progress).
//! * **Order.** UCX documents no order for active messages; callers that
//!   need it (Tether) check their own sequence numbers.
//! * **Peer failure.** [`ErrorMode::Peer`] endpoints report a dead peer as
//!   [`Event::EndpointFailed`] (tcp: well under a second). On shared
//!   memory (`sm`) it needs `UCX_POSIX_ERROR_HANDLING=y
//!   UCX_SYSV_ERROR_HANDLING=y` and is detected by keepalive
//!   (`UCX_KEEPALIVE_INTERVAL`, default 20 s); with [`ErrorMode::None`] a
//!   dead `sm` peer is never reported.
//! * **Configuration.** UCX reads `UCX_*` from the environment when a
//!   [`Context`] is created; [`ContextOptions::config`] overrides entries
//!   (`("TLS", "tcp")`) without touching the environment.
//!
//! # Example
//!
//! ```no_run
//! use tether_ucx::{AmData, Completion, Context, ContextOptions, ErrorMode, Event, SendMode, Ucp, Worker};
//!
//! # fn peer_address() -> Vec<u8> { Vec::new() }
//! # fn main() -> Result<(), tether_ucx::Error> {
//! let ucp = Ucp::load()?; // Err(Unavailable { reason }) without UCX
//! let ctx = Context::new(ucp, &ContextOptions::default())?; // UCX_TLS etc. from the environment
//! let worker = Worker::new(&ctx, &[7])?; // AM handler for id 7 exists from here on
//! let _publish = worker.address()?; // give this to the peer
//! let ep = worker.connect(&peer_address(), ErrorMode::Peer)?;
//! ep.am_send(7, b"header".to_vec(), vec![0; 1 << 20], SendMode::Rendezvous)?;
//! loop {
//!     worker.progress();
//!     while let Some(ev) = worker.next_event() {
//!         match ev {
//!             Event::Am(m) => {
//!                 if let AmData::Held(desc) = m.data {
//!                     let buf = vec![0; desc.len()];
//!                     if let Completion::Done((buf, n)) = worker.recv_data(desc, buf)? {
//!                         // n bytes landed in buf
//!                     } // else Event::RecvDone brings buf back later
//!                 }
//!             }
//!             Event::SendDone { .. } | Event::RecvDone { .. } => {}
//!             Event::EndpointFailed { error, .. } => return Err(error),
//!         }
//!     }
//! }
//! # }
//! ```

pub mod ffi;

mod context;
mod error;
mod library;
mod rma;
mod worker;

pub use context::{Context, ContextOptions};
pub use error::{Error, Result};
pub use library::{Ucp, Unavailable, DEFAULT_LIB, LIB_ENV, MIN_VERSION};
pub use rma::{AtomicOp, MemRegion, RemoteKey};
pub use worker::{
    AmBuffers, AmData, AmDesc, AmMessage, Arm, Completion, Endpoint, EpId, ErrorMode, Event,
    RecvToken, SendMode, SendToken, ThreadMode, Worker,
};

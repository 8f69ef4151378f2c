//! The Tether runtime: start-up, transports, progress, settings and the
//! Rust API on which the C, Fortran and Python front ends are built.
//!
//! Data flows down one path: API call -> request in the
//! [`tether_proto::Engine`] -> frames -> transport; completions flow back
//! up the same path. See `docs/ARCHITECTURE.md`.

pub mod addresses;
pub mod auth;
pub mod coll;
pub mod comm;
pub mod datatype;
pub mod error;
pub mod field;
pub mod host;
pub mod identity;
pub mod liveness;
pub mod log;
pub mod membarrier;
pub mod op;
pub mod output;
pub mod peers;
pub mod policy;
pub mod progress;
pub mod repeats;
pub mod router;
pub mod runtime;
pub mod settings;
pub mod stale;
pub mod trace;
pub mod transport;
pub mod universe;

pub use error::{Error, ErrorClass, Result};
pub use runtime::{
    AmMessage, AmReply, Arg, Arrival, Handler, Layout, Runtime, Status, AM_IDS, ANY_SOURCE,
    ANY_TAG, IN_PLACE, NO_OP, REPLACE, TAG_UB, WIN_NULL,
};
pub use tether_proto::{Region, ReqId};

/// This library's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

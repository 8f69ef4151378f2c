//! The C ABI of Tether (DESIGN 3): `libtether.so` / `libtether.a`, declared
//! by the generated and committed header `include/tether.h`.
//!
//! Conventions (after rustls-ffi): every function returns `TETHER_SUCCESS`
//! or an error class; outputs are written only on success, except statuses,
//! which always describe the operation that completed; every pointer is
//! checked; a panic never crosses the boundary (it becomes
//! `TETHER_ERR_INTERNAL` and poisons the library: every later call fails
//! with it, naming the panic); `tether_last_error` gives the calling
//! thread's last detailed message. Calls are serialised by one lock, so a
//! program may call from several threads, one call at a time; a call from
//! inside another on the same thread is refused with `TETHER_ERR_INTERNAL`.

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]
// The C functions take raw pointers by design; each is checked before use.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

mod active;
#[cfg(test)]
mod boundary_tests;
mod collectives;
mod communicators;
mod errors;
mod ffi;
mod fields;
mod hints;
mod lock;
mod onesided;
mod p2p;
mod poison;
mod progress_thread;
mod start;
mod stats;
mod types;

pub use active::*;
pub use collectives::*;
pub use communicators::*;
pub use errors::*;
pub use fields::*;
pub use hints::*;
pub use onesided::*;
pub use p2p::*;
pub use start::*;
pub use stats::*;
pub use types::*;

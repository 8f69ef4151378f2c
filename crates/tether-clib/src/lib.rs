//! `libtether.so` / `libtether.a`: the C functions of `tether-capi`
//! (DESIGN 3), exported from one library.
//!
//! Why a crate of its own: `tether-capi` is also an rlib (the Python
//! module calls its functions directly), and Cargo does not apply
//! link-time optimisation to a crate built as an rlib, not even to its
//! cdylib. Without it, every call from the C entry points into `tether`,
//! `tether-proto` and `tether-ring` stayed an out-of-line call through
//! the GOT; with it they are optimised as one program, which shortens the
//! small-message path (docs/journal/2026-11-24-shm.md).
//! A cdylib exports the `#[no_mangle]` functions of the crates it links,
//! so this crate only has to link `tether-capi`.

use tether_capi as _;

//! `libtether.so` / `libtether.a`: the C functions of `tether-capi`
//! (DESIGN 3), exported from one library.
//!
//! Why a crate of its own: `tether-capi` is also an rlib (the Python
//! module calls its functions directly), and Cargo does not apply
//! link-time optimisation to a crate built as an rlib, not even to its
//! cdylib. Without it, every call from the C entry points into `tether`,
//! `tether-proto` and `tether-ring` stayed an out-of-line call through
//! the GOT; with it they are optimised as one program (the 8 B
//! shared-memory ping-pong: 0.105 -> 0.100 us, docs/PERFORMANCE.md).
//! A cdylib exports the `#[no_mangle]` functions of the crates it links,
//! so this crate only has to link `tether-capi`.

use tether_capi as _;

//! M:N redistribution of a field between a producer and a consumer program.
//!
//! This crate holds the descriptors of DESIGN 3.8: a [`Dist`] splits a
//! global array over the ranks of one side, as a process grid with a
//! [`Kind`] per dimension or as explicit boxes per rank. Descriptors are
//! validated once, cross programs as bytes ([`Dist::encode`],
//! [`Dist::decode`]) and are compared by [`check`] before any data moves.
//! It is a pure crate: no I/O, no clock, no threads, no `unsafe`.

mod check;
mod codec;
mod dim;
mod dist;

pub use check::{check, Mismatch};
pub use dist::{Dist, DistError, Kind, Layout, Order, Region, MAX_DIMS};

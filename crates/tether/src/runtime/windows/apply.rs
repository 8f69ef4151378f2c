//! The target's half of the accumulate family: what the engine hands
//! out as an [`Apply`], computed on this process's window with the
//! reduction operations of `op.rs`.
//!
//! Besides the reductions of collectives, one-sided operations take
//! `TETHER_REPLACE` (the origin's value replaces the target's: an atomic
//! write) and `TETHER_NO_OP` (the target is left as it is: with
//! fetch-and-op, an atomic read), as MPI's `MPI_REPLACE` and `MPI_NO_OP`
//! do; collectives refuse both.

use tether_proto::{Apply, ApplyStatus, RmaCode};

use crate::datatype::{self, Datatype, Family};
use crate::error::{err, ErrorClass, Result};
use crate::op::{self, Op};

/// `TETHER_REPLACE`'s handle (after the reductions of `op.rs`).
pub const REPLACE: i32 = 13;
/// `TETHER_NO_OP`'s handle.
pub const NO_OP: i32 = 14;

/// An operation of the accumulate family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccOp {
    Reduce(Op),
    Replace,
    NoOp,
}

impl AccOp {
    pub fn from_handle(handle: i32) -> Result<AccOp> {
        match handle {
            REPLACE => Ok(AccOp::Replace),
            NO_OP => Ok(AccOp::NoOp),
            other => Op::from_handle(other).map(AccOp::Reduce),
        }
    }

    pub fn handle(self) -> i32 {
        match self {
            AccOp::Reduce(op) => op as i32,
            AccOp::Replace => REPLACE,
            AccOp::NoOp => NO_OP,
        }
    }

    /// `TETHER_ERR_OP` naming both unless `self` may combine `datatype`.
    pub fn check(self, datatype: Datatype) -> Result<()> {
        match self {
            AccOp::Reduce(op) => op::check(op, datatype),
            AccOp::Replace | AccOp::NoOp => Ok(()),
        }
    }

    /// `into = self(into, from)`, element by element (a valid pair).
    fn combine(self, datatype: Datatype, from: &[u8], into: &mut [u8]) {
        match self {
            AccOp::Reduce(op) => op::combine(op, datatype, from, into),
            AccOp::Replace => into.copy_from_slice(from),
            AccOp::NoOp => {}
        }
    }
}

/// Whether fetch-and-op takes `datatype`: one element of an integer or
/// floating type (DESIGN 3.7).
pub fn fetchable(datatype: Datatype) -> bool {
    matches!(
        datatype.family(),
        Family::SignedInteger | Family::UnsignedInteger | Family::Real
    )
}

/// Whether compare-and-swap takes `datatype`: integer types only, whose
/// equality is their bytes' (a float's is not: -0.0 == 0.0, NaN != NaN).
pub fn swappable(datatype: Datatype) -> bool {
    matches!(
        datatype.family(),
        Family::SignedInteger | Family::UnsignedInteger
    )
}

/// `TETHER_ERR_TYPE` for an atomic on a type it does not take.
pub fn atomic_type_error(what: &str, datatype: Datatype, takes: &str) -> crate::error::Error {
    err(
        ErrorClass::Type,
        format!("{what} takes {takes}, not TETHER_{}", datatype.name),
    )
}

/// Computes `apply` on the window (see [`Apply`]); refuses a pair or a
/// length the origin's checks should have stopped, leaving the window
/// untouched.
pub fn compute(apply: &mut Apply) -> ApplyStatus {
    let Ok(datatype) = datatype::lookup(i32::from(apply.reduction.datatype)) else {
        return ApplyStatus::Refused;
    };
    // Compare-and-swap carries no operation.
    let op = match apply.code {
        RmaCode::CompareAndSwap => Ok(AccOp::Replace),
        _ => AccOp::from_handle(i32::from(apply.reduction.op)),
    };
    let Ok(op) = op else {
        return ApplyStatus::Refused;
    };
    let len = apply.target.len;
    let valid = match apply.code {
        RmaCode::CompareAndSwap => swappable(datatype),
        RmaCode::FetchAndOp => fetchable(datatype) && op.check(datatype).is_ok(),
        _ => op.check(datatype).is_ok(),
    };
    if !valid || !len.is_multiple_of(datatype.size) {
        return ApplyStatus::Refused;
    }
    // SAFETY: the engine hands out the window's bytes the operation
    // covers, valid and touched by nothing else until handed back.
    let target = unsafe { std::slice::from_raw_parts_mut(apply.target.ptr, len) };
    match apply.code {
        RmaCode::Accumulate => op.combine(datatype, apply.operand(), target),
        RmaCode::FetchAndOp => {
            apply.old_mut().copy_from_slice(target);
            op.combine(datatype, apply.operand(), target);
        }
        RmaCode::CompareAndSwap => {
            apply.old_mut().copy_from_slice(target);
            if target == apply.compare() {
                target.copy_from_slice(apply.operand());
            }
        }
        _ => return ApplyStatus::Refused,
    }
    ApplyStatus::Done
}

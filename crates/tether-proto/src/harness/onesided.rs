//! The runtime's part of one-sided operations in the test world: each
//! rank computes the accumulate-family operations its engine hands out,
//! with a model of the reduction operations (the real ones live in the
//! tether crate) small enough to check by hand.

use super::World;
use crate::engine::{Apply, ApplyStatus};
use crate::wire::onesided::RmaCode;

/// The one datatype the model knows: little-endian i64 (`TETHER_INT64`).
pub const INT64: u8 = 6;
/// `x + v`.
pub const SUM: u8 = 1;
/// `x * 10 + v`: not commutative, so the result spells the order the
/// operations were applied in.
pub const SHIFT: u8 = 100;

impl World {
    /// Computes `rank`'s applies, unless the test holds them.
    pub(super) fn run_applies(&mut self, rank: usize) -> bool {
        let mut moved = false;
        while !self.hold_applies {
            let Some(mut apply) = self.engines[rank].poll_apply() else {
                break;
            };
            moved = true;
            let status = compute(&mut apply);
            self.engines[rank].apply_done(apply, status);
        }
        moved
    }
}

/// What a runtime does with an apply: refuses what it does not know,
/// else computes it element by element.
pub fn compute(apply: &mut Apply) -> ApplyStatus {
    let len = apply.target.len;
    let known_op =
        apply.code == RmaCode::CompareAndSwap || matches!(apply.reduction.op, SUM | SHIFT);
    if apply.reduction.datatype != INT64 || !len.is_multiple_of(8) || !known_op {
        return ApplyStatus::Refused;
    }
    // SAFETY: the engine hands out the window's bytes the operation
    // covers, valid and untouched by anyone else until handed back.
    let target = unsafe { std::slice::from_raw_parts_mut(apply.target.ptr, len) };
    let old = target.to_vec();
    if apply.code == RmaCode::CompareAndSwap {
        if target == apply.compare() {
            target.copy_from_slice(apply.operand());
        }
    } else {
        let op = apply.reduction.op;
        for (x, v) in target
            .chunks_exact_mut(8)
            .zip(apply.operand().chunks_exact(8))
        {
            let a = i64::from_le_bytes(x.try_into().expect("8 bytes"));
            let b = i64::from_le_bytes(v.try_into().expect("8 bytes"));
            let r = if op == SUM {
                a.wrapping_add(b)
            } else {
                a.wrapping_mul(10).wrapping_add(b)
            };
            x.copy_from_slice(&r.to_le_bytes());
        }
    }
    let fetched = apply.old_mut();
    if !fetched.is_empty() {
        fetched.copy_from_slice(&old);
    }
    ApplyStatus::Done
}

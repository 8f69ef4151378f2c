//! Atomics that the transport carries out itself (UCX's
//! `ucp_atomic_op_nbx`, by the window's key), on windows whose members
//! all agreed to it when the window was created.
//!
//! Why agreement. A NIC's atomics are atomic only among themselves: if
//! one origin's fetch-and-add went through the NIC while another's was
//! applied by the target's CPU, the two could interleave inside one
//! update. So a window takes this path only when every member reaches
//! every other member through UCX with window keys (each member says so
//! for itself; `win_create` gathers the answers), and then every
//! operation the transport can do takes it, each member's operations on
//! its own window included (through an endpoint to itself). What it
//! cannot do (floating types, other sizes, MIN, MAX, PROD and the
//! logical operations) stays with the target's CPU: MPI's default
//! `accumulate_ops` (`same_op_no_op`) lets concurrent accumulate-family
//! operations on one location differ only by `NO_OP`, so those never
//! meet the transport's on the same location in a correct program.

use tether_proto::{Atomic, AtomicCode, Region};

use super::apply::AccOp;
use crate::datatype::{Datatype, Family};
use crate::op::Op;

/// The transport's atomic doing `op` on one element of `datatype`:
/// 4- and 8-byte integers with SUM, BAND, BOR, BXOR, REPLACE (a swap)
/// and NO_OP (adding 0: a fetch).
pub fn code(datatype: Datatype, op: AccOp) -> Option<AtomicCode> {
    let integer = matches!(
        datatype.family(),
        Family::SignedInteger | Family::UnsignedInteger
    );
    if !integer || !matches!(datatype.size, 4 | 8) {
        return None;
    }
    match op {
        AccOp::Reduce(Op::Sum) | AccOp::NoOp => Some(AtomicCode::Add),
        AccOp::Reduce(Op::Band) => Some(AtomicCode::And),
        AccOp::Reduce(Op::Bor) => Some(AtomicCode::Or),
        AccOp::Reduce(Op::Bxor) => Some(AtomicCode::Xor),
        AccOp::Replace => Some(AtomicCode::Swap),
        AccOp::Reduce(_) => None,
    }
}

/// The atomic `code` on `operand` (one element; ignored for NO_OP, which
/// adds 0), fetching into `result` when given.
pub fn atomic(code: AtomicCode, op: AccOp, operand: &[u8], result: Option<Region>) -> Atomic {
    let mut bytes = [0u8; 8];
    if op != AccOp::NoOp {
        bytes[..operand.len()].copy_from_slice(operand);
    }
    Atomic {
        code,
        size: operand.len() as u8,
        operand: bytes,
        swap: [0; 8],
        result,
    }
}

/// A compare-and-swap of one 4- or 8-byte integer: `value` replaces
/// the target's element if it equals `compare`; the element before goes
/// to `result`.
pub fn compare_and_swap(
    datatype: Datatype,
    value: &[u8],
    compare: &[u8],
    result: Region,
) -> Option<Atomic> {
    if !matches!(datatype.size, 4 | 8) {
        return None;
    }
    let mut swap = [0u8; 8];
    swap[..value.len()].copy_from_slice(value);
    let mut operand = [0u8; 8];
    operand[..compare.len()].copy_from_slice(compare);
    Some(Atomic {
        code: AtomicCode::CompareSwap,
        size: datatype.size as u8,
        operand,
        swap,
        result: Some(result),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype;

    #[test]
    fn integers_of_four_and_eight_bytes_with_bitwise_sum_replace_and_no_op() {
        let int64 = datatype::lookup(6).unwrap();
        assert_eq!(int64.size, 8);
        assert_eq!(code(int64, AccOp::Reduce(Op::Sum)), Some(AtomicCode::Add));
        assert_eq!(code(int64, AccOp::NoOp), Some(AtomicCode::Add));
        assert_eq!(code(int64, AccOp::Replace), Some(AtomicCode::Swap));
        assert_eq!(code(int64, AccOp::Reduce(Op::Max)), None);
        let double = datatype::DATATYPES
            .iter()
            .find(|d| d.name == "DOUBLE")
            .copied()
            .unwrap();
        assert_eq!(code(double, AccOp::Reduce(Op::Sum)), None);
        let int16 = datatype::DATATYPES
            .iter()
            .find(|d| d.name == "INT16")
            .copied()
            .unwrap();
        assert_eq!(code(int16, AccOp::Reduce(Op::Sum)), None);
        let no_op = atomic(AtomicCode::Add, AccOp::NoOp, &5u64.to_le_bytes(), None);
        assert_eq!(no_op.operand, [0; 8], "NO_OP adds 0");
    }
}

use super::*;
use crate::datatype::{lookup, DATATYPES};

fn by_name(name: &str) -> Datatype {
    *DATATYPES.iter().find(|t| t.name == name).unwrap()
}

fn bytes<T: Copy>(values: &[T]) -> Vec<u8> {
    let size = std::mem::size_of::<T>();
    let mut out = vec![0u8; std::mem::size_of_val(values)];
    for (chunk, v) in out.chunks_exact_mut(size).zip(values) {
        // SAFETY: the chunk holds one T.
        unsafe { std::ptr::write_unaligned(chunk.as_mut_ptr().cast::<T>(), *v) }
    }
    out
}

fn values<T: Copy>(bytes: &[u8]) -> Vec<T> {
    bytes
        .chunks_exact(std::mem::size_of::<T>())
        // SAFETY: the chunk holds one T.
        .map(|c| unsafe { std::ptr::read_unaligned(c.as_ptr().cast::<T>()) })
        .collect()
}

fn reduce<T: Copy>(op: Op, name: &str, a: &[T], b: &[T]) -> Vec<T> {
    let mut into = bytes(a);
    combine(op, by_name(name), &bytes(b), &mut into);
    values(&into)
}

#[test]
fn valid_pairs_follow_mpi() {
    let valid = |op, name| is_valid(op, by_name(name));
    assert!(valid(Op::Sum, "DOUBLE_COMPLEX"));
    assert!(!valid(Op::Max, "DOUBLE_COMPLEX"));
    assert!(!valid(Op::Sum, "BYTE") && valid(Op::Bxor, "BYTE"));
    assert!(!valid(Op::Band, "DOUBLE"));
    assert!(valid(Op::Lxor, "LOGICAL") && !valid(Op::Sum, "LOGICAL"));
    assert!(valid(Op::MinLoc, "TWO_DOUBLE_PRECISION") && !valid(Op::MinLoc, "INT"));
    assert!(OPS.iter().all(|(op, _)| !valid(*op, "CHAR")));
    let e = check(Op::Max, by_name("FLOAT_COMPLEX")).unwrap_err();
    assert_eq!(e.class, ErrorClass::Op);
    assert!(e.message.contains("TETHER_MAX") && e.message.contains("TETHER_FLOAT_COMPLEX"));
    assert_eq!(Op::from_handle(99).unwrap_err().class, ErrorClass::Op);
    let count = OPS
        .iter()
        .flat_map(|(op, _)| DATATYPES.iter().map(move |t| is_valid(*op, *t)))
        .filter(|v| *v)
        .count();
    // 12 integer types x 10 ops, BYTE x 3, 4 float types x 4, 3 complex x 2,
    // LOGICAL x 3, 6 pair types x 2.
    assert_eq!(count, 160, "valid (type, op) pairs");
}

#[test]
fn max_of_negatives_is_the_largest_negative() {
    assert_eq!(
        reduce(Op::Max, "DOUBLE", &[-5.0f64, -1e300], &[-7.0, -2e300]),
        [-5.0, -1e300]
    );
    assert_eq!(
        reduce(Op::Max, "INT", &[-5i32, i32::MIN], &[-7, i32::MIN + 1]),
        [-5, i32::MIN + 1]
    );
    assert_eq!(
        reduce(Op::Min, "UINT64", &[u64::MAX, 3], &[7u64, 0]),
        [7, 0]
    );
}

#[test]
fn floats_propagate_nan_and_order_signed_zeros() {
    let r = reduce(
        Op::Max,
        "FLOAT",
        &[f32::NAN, 1.0, -0.0, 0.0],
        &[1.0f32, f32::NAN, 0.0, -0.0],
    );
    assert!(r[0].is_nan() && r[1].is_nan());
    assert!(r[2] == 0.0 && r[2].is_sign_positive() && r[3].is_sign_positive());
    let r = reduce(
        Op::Min,
        "DOUBLE",
        &[-0.0, 0.0, f64::INFINITY],
        &[0.0f64, -0.0, f64::NAN],
    );
    assert!(r[0].is_sign_negative() && r[1].is_sign_negative() && r[2].is_nan());
    let r = reduce(
        Op::Sum,
        "DOUBLE",
        &[f64::INFINITY, 1.5],
        &[f64::NEG_INFINITY, 2.25],
    );
    assert!(r[0].is_nan() && r[1] == 3.75);
}

#[test]
fn integers_wrap_and_logic_is_zero_or_one() {
    assert_eq!(
        reduce(Op::Sum, "INT8", &[127i8, -128], &[1i8, -1]),
        [-128, 127]
    );
    assert_eq!(
        reduce(Op::Prod, "UINT16", &[300u16], &[300u16]),
        [300u16.wrapping_mul(300)]
    );
    assert_eq!(
        reduce(Op::Land, "INT", &[5i32, 5, 0], &[-2i32, 0, 0]),
        [1, 0, 0]
    );
    assert_eq!(
        reduce(Op::Lxor, "LOGICAL", &[1i32, 7, 0], &[1i32, 0, 0]),
        [0, 1, 0]
    );
    assert_eq!(reduce(Op::Bxor, "BYTE", &[0xf0u8], &[0xffu8]), [0x0f]);
    assert_eq!(
        reduce(Op::Bor, "INT64", &[1i64 << 40], &[1i64]),
        [(1i64 << 40) | 1]
    );
}

#[test]
fn complex_product_and_sum() {
    let r = reduce(
        Op::Prod,
        "DOUBLE_COMPLEX",
        &[[1.0f64, 2.0]],
        &[[3.0f64, -1.0]],
    );
    assert_eq!(r, [[5.0, 5.0]]);
    let r = reduce(Op::Sum, "COMPLEX", &[[1.0f32, 2.0]], &[[0.5f32, -4.0]]);
    assert_eq!(r, [[1.5, -2.0]]);
}

#[test]
fn minloc_and_maxloc_break_ties_by_lower_index() {
    let a = [(2.0f64, 9i32, 0i32), (1.0, 4, 0), (f64::NAN, 8, 0)];
    let b = [(2.0f64, 3i32, 0i32), (1.0, 6, 0), (f64::NAN, 2, 0)];
    let r = reduce(Op::MinLoc, "DOUBLE_INT", &a, &b);
    assert_eq!((r[0].0, r[0].1), (2.0, 3));
    assert_eq!((r[1].0, r[1].1), (1.0, 4));
    assert!(r[2].0.is_nan() && r[2].1 == 2);
    let r = reduce(
        Op::MaxLoc,
        "TWO_INT",
        &[[-3i32, 5], [4, 1]],
        &[[-3i32, 2], [9, 7]],
    );
    assert_eq!(r, [[-3, 2], [9, 7]]);
    let r = reduce(
        Op::MinLoc,
        "FLOAT_INT",
        &[(1.0f32, 1i32)],
        &[(f32::NAN, 5i32)],
    );
    assert!(r[0].0.is_nan() && r[0].1 == 5, "NaN propagates");
    let r = reduce(Op::MaxLoc, "TWO_REAL", &[[2.0f32, 3.0]], &[[2.0f32, 1.0]]);
    assert_eq!(r, [[2.0, 1.0]]);
}

#[test]
fn every_valid_pair_is_commutative_bitwise() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for (op, _) in OPS {
        for t in DATATYPES.iter().filter(|t| is_valid(*op, **t)) {
            let n = 64 * t.size;
            let a: Vec<u8> = (0..n).map(|_| (next() % 7) as u8).collect();
            let b: Vec<u8> = (0..n).map(|_| (next() % 7) as u8).collect();
            let mut ab = a.clone();
            combine(*op, *t, &b, &mut ab);
            let mut ba = b.clone();
            combine(*op, *t, &a, &mut ba);
            assert_eq!(ab, ba, "{:?} on {}", op, t.name);
        }
    }
    assert_eq!(lookup(19).unwrap().name, "DOUBLE_INT");
}

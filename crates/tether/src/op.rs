//! Reduction operations (DESIGN 3.4): which (datatype, operation) pairs are
//! valid, and combining one buffer of elements into another.
//!
//! Valid pairs follow MPI: arithmetic (`SUM`, `PROD`) on integers, floats
//! and complex; `MIN`/`MAX` on integers and floats; logical operations on
//! integers and `LOGICAL`; bitwise operations on integers and `BYTE`;
//! `MINLOC`/`MAXLOC` on the pair types. `CHAR` takes no operation.
//!
//! Every operation is commutative and associative over the values it can
//! meet, so the result does not depend on the order a collective combines
//! contributions in, and every process of an `allreduce` gets the same bits:
//! - integers wrap on overflow;
//! - `MIN`/`MAX` on floats propagate NaN (IEEE 754-2019 `minimum`/`maximum`)
//!   and order `-0 < +0`;
//! - `MINLOC`/`MAXLOC` pick the lower index on ties; a NaN value beats every
//!   number (so it propagates, with the lowest index among the NaNs);
//! - logical operations treat nonzero as true and produce 1 or 0.

use crate::datatype::Datatype;
use crate::error::{err, ErrorClass, Result};

/// A reduction operation, by its C handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Sum = 1,
    Prod = 2,
    Min = 3,
    Max = 4,
    Land = 5,
    Lor = 6,
    Lxor = 7,
    Band = 8,
    Bor = 9,
    Bxor = 10,
    MinLoc = 11,
    MaxLoc = 12,
}

/// Every operation, with its C name less the `TETHER_` prefix.
pub const OPS: &[(Op, &str)] = &[
    (Op::Sum, "SUM"),
    (Op::Prod, "PROD"),
    (Op::Min, "MIN"),
    (Op::Max, "MAX"),
    (Op::Land, "LAND"),
    (Op::Lor, "LOR"),
    (Op::Lxor, "LXOR"),
    (Op::Band, "BAND"),
    (Op::Bor, "BOR"),
    (Op::Bxor, "BXOR"),
    (Op::MinLoc, "MINLOC"),
    (Op::MaxLoc, "MAXLOC"),
];

impl Op {
    /// Looks up an operation handle.
    pub fn from_handle(handle: i32) -> Result<Op> {
        OPS.iter()
            .find(|(op, _)| *op as i32 == handle)
            .map(|(op, _)| *op)
            .ok_or_else(|| {
                err(
                    ErrorClass::Op,
                    format!("{handle} is not an operation handle"),
                )
            })
    }

    pub fn name(self) -> &'static str {
        OPS.iter().find(|(op, _)| *op == self).expect("listed").1
    }
}

/// How the elements of a datatype combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Signed(usize),
    Unsigned(usize),
    Byte,
    Text,
    Float32,
    Float64,
    Complex32,
    Complex64,
    Logical,
    /// Value and index; the index is an `i32`, or a float of the value's
    /// type for the Fortran pair types.
    Pair(PairKind),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PairKind {
    FloatInt,
    DoubleInt,
    IntInt,
    FloatFloat,
    DoubleDouble,
}

fn class_of(t: Datatype) -> Class {
    match t.name {
        "BYTE" => Class::Byte,
        "CHAR" => Class::Text,
        "INT8" | "INT16" | "INT32" | "INT64" | "INT" | "LONG" | "LONG_LONG" | "INTEGER" => {
            Class::Signed(t.size)
        }
        "UINT8" | "UINT16" | "UINT32" | "UINT64" => Class::Unsigned(t.size),
        "FLOAT" | "REAL" => Class::Float32,
        "DOUBLE" | "DOUBLE_PRECISION" => Class::Float64,
        "FLOAT_COMPLEX" | "COMPLEX" => Class::Complex32,
        "DOUBLE_COMPLEX" => Class::Complex64,
        "LOGICAL" => Class::Logical,
        "FLOAT_INT" => Class::Pair(PairKind::FloatInt),
        "DOUBLE_INT" => Class::Pair(PairKind::DoubleInt),
        "TWO_INT" | "TWO_INTEGER" => Class::Pair(PairKind::IntInt),
        "TWO_REAL" => Class::Pair(PairKind::FloatFloat),
        "TWO_DOUBLE_PRECISION" => Class::Pair(PairKind::DoubleDouble),
        other => unreachable!("datatype {other} has no reduction class"),
    }
}

/// Whether `op` may combine elements of `datatype`.
pub fn is_valid(op: Op, datatype: Datatype) -> bool {
    use Op::*;
    let class = class_of(datatype);
    match op {
        Sum | Prod => matches!(
            class,
            Class::Signed(_)
                | Class::Unsigned(_)
                | Class::Float32
                | Class::Float64
                | Class::Complex32
                | Class::Complex64
        ),
        Min | Max => matches!(
            class,
            Class::Signed(_) | Class::Unsigned(_) | Class::Float32 | Class::Float64
        ),
        Land | Lor | Lxor => matches!(
            class,
            Class::Signed(_) | Class::Unsigned(_) | Class::Logical
        ),
        Band | Bor | Bxor => matches!(class, Class::Signed(_) | Class::Unsigned(_) | Class::Byte),
        MinLoc | MaxLoc => matches!(class, Class::Pair(_)),
    }
}

/// Checks that `op` may combine `datatype`: `TETHER_ERR_OP` names both if not.
pub fn check(op: Op, datatype: Datatype) -> Result<()> {
    if is_valid(op, datatype) {
        Ok(())
    } else {
        Err(err(
            ErrorClass::Op,
            format!(
                "TETHER_{} is not defined on TETHER_{}",
                op.name(),
                datatype.name
            ),
        ))
    }
}

/// `into[i] = op(into[i], from[i])` for every element. Both slices hold the
/// same whole number of elements; neither needs to be aligned. The pair must
/// be valid ([`check`]).
pub fn combine(op: Op, datatype: Datatype, from: &[u8], into: &mut [u8]) {
    assert_eq!(
        from.len(),
        into.len(),
        "reduction operands differ in length"
    );
    assert_eq!(from.len() % datatype.size, 0, "partial element");
    match class_of(datatype) {
        Class::Signed(1) => integer::<i8>(op, from, into),
        Class::Signed(2) => integer::<i16>(op, from, into),
        Class::Signed(4) => integer::<i32>(op, from, into),
        Class::Signed(8) => integer::<i64>(op, from, into),
        Class::Unsigned(1) | Class::Byte => integer::<u8>(op, from, into),
        Class::Unsigned(2) => integer::<u16>(op, from, into),
        Class::Unsigned(4) => integer::<u32>(op, from, into),
        Class::Unsigned(8) => integer::<u64>(op, from, into),
        Class::Logical => integer::<i32>(op, from, into),
        Class::Float32 => float::<f32>(op, from, into),
        Class::Float64 => float::<f64>(op, from, into),
        Class::Complex32 => complex::<f32>(op, from, into),
        Class::Complex64 => complex::<f64>(op, from, into),
        Class::Pair(kind) => pair(op, kind, from, into),
        Class::Signed(_) | Class::Unsigned(_) | Class::Text => {
            unreachable!("{} takes no operation", datatype.name)
        }
    }
}

/// Applies `f` element by element over unaligned little arrays of `T`.
fn each<T: Copy>(from: &[u8], into: &mut [u8], f: impl Fn(T, T) -> T) {
    let size = std::mem::size_of::<T>();
    for (a, b) in into.chunks_exact_mut(size).zip(from.chunks_exact(size)) {
        // SAFETY: each chunk holds exactly one T; unaligned access is used.
        unsafe {
            let x = std::ptr::read_unaligned(a.as_ptr().cast::<T>());
            let y = std::ptr::read_unaligned(b.as_ptr().cast::<T>());
            std::ptr::write_unaligned(a.as_mut_ptr().cast::<T>(), f(x, y));
        }
    }
}

/// The integer operations every integer width shares.
trait Integer: Copy + Ord + Default {
    fn wrapping_add(self, other: Self) -> Self;
    fn wrapping_mul(self, other: Self) -> Self;
    fn and(self, other: Self) -> Self;
    fn or(self, other: Self) -> Self;
    fn xor(self, other: Self) -> Self;
    fn truth(value: bool) -> Self;
}

macro_rules! integer_impl {
    ($($t:ty),*) => {$(
        impl Integer for $t {
            fn wrapping_add(self, other: Self) -> Self { <$t>::wrapping_add(self, other) }
            fn wrapping_mul(self, other: Self) -> Self { <$t>::wrapping_mul(self, other) }
            fn and(self, other: Self) -> Self { self & other }
            fn or(self, other: Self) -> Self { self | other }
            fn xor(self, other: Self) -> Self { self ^ other }
            fn truth(value: bool) -> Self { value as $t }
        }
    )*};
}
integer_impl!(i8, i16, i32, i64, u8, u16, u32, u64);

fn integer<T: Integer>(op: Op, from: &[u8], into: &mut [u8]) {
    let zero = T::default();
    match op {
        Op::Sum => each::<T>(from, into, |a, b| a.wrapping_add(b)),
        Op::Prod => each::<T>(from, into, |a, b| a.wrapping_mul(b)),
        Op::Min => each::<T>(from, into, |a, b| a.min(b)),
        Op::Max => each::<T>(from, into, |a, b| a.max(b)),
        Op::Land => each::<T>(from, into, |a, b| T::truth(a != zero && b != zero)),
        Op::Lor => each::<T>(from, into, |a, b| T::truth(a != zero || b != zero)),
        Op::Lxor => each::<T>(from, into, |a, b| T::truth((a != zero) != (b != zero))),
        Op::Band => each::<T>(from, into, |a, b| a.and(b)),
        Op::Bor => each::<T>(from, into, |a, b| a.or(b)),
        Op::Bxor => each::<T>(from, into, |a, b| a.xor(b)),
        Op::MinLoc | Op::MaxLoc => unreachable!("checked: no MINLOC on integers"),
    }
}

/// The float operations `f32` and `f64` share.
trait Float: Copy + PartialOrd + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> {
    fn is_nan(self) -> bool;
    fn is_sign_negative(self) -> bool;
    fn sub(self, other: Self) -> Self;
}

macro_rules! float_impl {
    ($($t:ty),*) => {$(
        impl Float for $t {
            fn is_nan(self) -> bool { <$t>::is_nan(self) }
            fn is_sign_negative(self) -> bool { <$t>::is_sign_negative(self) }
            fn sub(self, other: Self) -> Self { self - other }
        }
    )*};
}
float_impl!(f32, f64);

/// IEEE 754-2019 `minimum`: NaN propagates, `-0 < +0`.
fn minimum<F: Float>(a: F, b: F) -> F {
    if a.is_nan() || b < a || (b == a && b.is_sign_negative()) {
        if a.is_nan() {
            a
        } else {
            b
        }
    } else if b.is_nan() {
        b
    } else {
        a
    }
}

/// IEEE 754-2019 `maximum`: NaN propagates, `-0 < +0`.
fn maximum<F: Float>(a: F, b: F) -> F {
    if a.is_nan() {
        a
    } else if b.is_nan() || b > a || (b == a && a.is_sign_negative()) {
        b
    } else {
        a
    }
}

fn float<F: Float>(op: Op, from: &[u8], into: &mut [u8]) {
    match op {
        Op::Sum => each::<F>(from, into, |a, b| a + b),
        Op::Prod => each::<F>(from, into, |a, b| a * b),
        Op::Min => each::<F>(from, into, minimum),
        Op::Max => each::<F>(from, into, maximum),
        _ => unreachable!("checked: {op:?} is not defined on floats"),
    }
}

fn complex<F: Float>(op: Op, from: &[u8], into: &mut [u8]) {
    match op {
        Op::Sum => each::<[F; 2]>(from, into, |a, b| [a[0] + b[0], a[1] + b[1]]),
        Op::Prod => each::<[F; 2]>(from, into, |a, b| {
            [(a[0] * b[0]).sub(a[1] * b[1]), a[0] * b[1] + a[1] * b[0]]
        }),
        _ => unreachable!("checked: {op:?} is not defined on complex numbers"),
    }
}

/// `MINLOC`/`MAXLOC` on (value, index): `better(a, b)` says value `a`
/// strictly wins over value `b`; ties go to the lower index.
fn locate<V: Ordered, I: Copy + PartialOrd>(
    from: &[u8],
    into: &mut [u8],
    stride: usize,
    index_at: usize,
    better: fn(V, V) -> bool,
) {
    for (a, b) in into.chunks_exact_mut(stride).zip(from.chunks_exact(stride)) {
        // SAFETY: each chunk is one pair: a V at 0 and an I at `index_at`.
        unsafe {
            let av = std::ptr::read_unaligned(a.as_ptr().cast::<V>());
            let bv = std::ptr::read_unaligned(b.as_ptr().cast::<V>());
            let ai = std::ptr::read_unaligned(a.as_ptr().add(index_at).cast::<I>());
            let bi = std::ptr::read_unaligned(b.as_ptr().add(index_at).cast::<I>());
            let take_b = if better(bv, av) {
                true
            } else if better(av, bv) {
                false
            } else {
                bi < ai
            };
            if take_b {
                a.copy_from_slice(b);
            }
        }
    }
}

/// A value of a `MINLOC`/`MAXLOC` pair.
trait Ordered: Copy + PartialOrd {
    fn is_nan(self) -> bool;
}

impl Ordered for f32 {
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
}

impl Ordered for f64 {
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}

impl Ordered for i32 {
    fn is_nan(self) -> bool {
        false
    }
}

/// A NaN beats every number in both directions; otherwise `<` or `>`.
fn less<V: Ordered>(a: V, b: V) -> bool {
    (a.is_nan() && !b.is_nan()) || a < b
}

fn greater<V: Ordered>(a: V, b: V) -> bool {
    (a.is_nan() && !b.is_nan()) || a > b
}

fn pair(op: Op, kind: PairKind, from: &[u8], into: &mut [u8]) {
    macro_rules! go {
        ($v:ty, $i:ty, $stride:expr, $at:expr) => {{
            let better: fn($v, $v) -> bool = match op {
                Op::MinLoc => less::<$v>,
                Op::MaxLoc => greater::<$v>,
                _ => unreachable!("checked: only MINLOC and MAXLOC on pairs"),
            };
            locate::<$v, $i>(from, into, $stride, $at, better)
        }};
    }
    match kind {
        PairKind::FloatInt => go!(f32, i32, 8, 4),
        PairKind::DoubleInt => go!(f64, i32, std::mem::size_of::<(f64, i32)>(), 8),
        PairKind::IntInt => go!(i32, i32, 8, 4),
        PairKind::FloatFloat => go!(f32, f32, 8, 4),
        PairKind::DoubleDouble => go!(f64, f64, 16, 8),
    }
}

#[cfg(test)]
mod tests;

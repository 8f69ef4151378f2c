//! One dimension of a regular distribution.
//!
//! Arithmetic is done in `i128`: `P*B` can exceed `i64` even though every
//! index and local offset fits in it.

use crate::dist::Kind;

/// One dimension of a regular distribution: extent `n` dealt in blocks of
/// `b` over `p` coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pattern {
    n: i128,
    p: i128,
    b: i128,
}

impl Pattern {
    pub(crate) fn new(n: i64, p: i64, kind: Kind) -> Pattern {
        let b = match kind {
            // MPI darray's BLOCK: n=9, P=4 gives 3,3,3,0.
            Kind::Block => n / p + i64::from(n % p != 0),
            Kind::Cyclic => 1,
            Kind::BlockCyclic(b) => b,
            Kind::None => n,
        };
        // One coordinate, or blocks at least as long as the axis, own
        // `[0, n)` with local index = global index; saying so with `b = n`
        // keeps the walks below at one block instead of n/b of them.
        let b = if p == 1 || b >= n { n.max(1) } else { b };
        Pattern {
            n: i128::from(n),
            p: i128::from(p),
            b: i128::from(b),
        }
    }

    fn period(&self) -> i128 {
        self.p * self.b
    }

    /// How many indices below `x` coordinate `c` owns, which is also the
    /// local index of its first index at or above `x`.
    fn owned_before(&self, c: i128, x: i128) -> i128 {
        let a = self.period();
        (x / a) * self.b + (x % a - c * self.b).clamp(0, self.b)
    }

    /// Local extent of coordinate `c`.
    pub(crate) fn extent(&self, c: i64) -> i64 {
        self.owned_before(i128::from(c), self.n) as i64
    }

    /// The coordinate owning global index `g`.
    pub(crate) fn owner(&self, g: i64) -> i64 {
        ((i128::from(g) / self.b) % self.p) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_is_ceil() {
        let p = Pattern::new(9, 4, Kind::Block);
        let extents: Vec<i64> = (0..4).map(|c| p.extent(c)).collect();
        assert_eq!(extents, [3, 3, 3, 0]);
    }
}

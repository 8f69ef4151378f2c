//! Compatibility of two descriptors, decided before any data moves, and the
//! producer-side rule that boxes must not overlap.

use thiserror::Error;

use crate::dist::{Dist, DistError, Layout, Region};

/// Why a producer and a consumer descriptor cannot be joined. The text
/// names what differs, expected (producer) against received (consumer).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Mismatch {
    #[error("number of dimensions differs: expected {expected} (producer: {producer}), received {received} (consumer: {consumer})")]
    Ndims {
        expected: usize,
        received: usize,
        producer: String,
        consumer: String,
    },
    #[error("global shape differs: expected {expected:?} (producer: {producer}), received {received:?} (consumer: {consumer})")]
    Shape {
        expected: Vec<i64>,
        received: Vec<i64>,
        producer: String,
        consumer: String,
    },
    #[error("coverage differs: consumer rank {consumer_rank} wants element {index:?}, which no producer rank holds (expected: producer {producer}, received: consumer {consumer})")]
    Uncovered {
        consumer_rank: usize,
        index: Vec<i64>,
        producer: String,
        consumer: String,
    },
}

/// Are these two compatible? Compares ndims and shape (the element type is
/// the runtime's business) and coverage: every element a consumer rank
/// wants must be held by some producer rank.
pub fn check(producer: &Dist, consumer: &Dist) -> Result<(), Mismatch> {
    if producer.ndims() != consumer.ndims() {
        return Err(Mismatch::Ndims {
            expected: producer.ndims(),
            received: consumer.ndims(),
            producer: producer.describe(),
            consumer: consumer.describe(),
        });
    }
    if producer.shape() != consumer.shape() {
        return Err(Mismatch::Shape {
            expected: producer.shape().to_vec(),
            received: consumer.shape().to_vec(),
            producer: producer.describe(),
            consumer: consumer.describe(),
        });
    }
    // A grid covers the whole array, so only producer boxes can leave holes.
    let Layout::Boxes(held) = producer.layout() else {
        return Ok(());
    };
    let whole = Region::new(vec![0; producer.ndims()], producer.shape().to_vec());
    let mut holes = vec![whole];
    for region in held.iter().flatten() {
        if holes.is_empty() {
            break;
        }
        holes = holes
            .into_iter()
            .flat_map(|hole| subtract(&hole, region))
            .collect();
    }
    let uncovered = |consumer_rank: usize, index: Vec<i64>| Mismatch::Uncovered {
        consumer_rank,
        index,
        producer: producer.describe(),
        consumer: consumer.describe(),
    };
    match consumer.layout() {
        Layout::Regular { .. } => match first_point(holes.iter().cloned()) {
            Some(index) => {
                let coords: Vec<i64> = index
                    .iter()
                    .enumerate()
                    .map(|(d, &g)| consumer.pattern(d).owner(g))
                    .collect();
                Err(uncovered(consumer.rank_of(&coords), index))
            }
            None => Ok(()),
        },
        Layout::Boxes(wanted) => {
            for (rank, boxes) in wanted.iter().enumerate() {
                for region in boxes {
                    let met = holes.iter().filter_map(|h| intersect(h, region));
                    if let Some(index) = first_point(met) {
                        return Err(uncovered(rank, index));
                    }
                }
            }
            Ok(())
        }
    }
}

/// The lexicographically smallest index in a union of boxes: each box's
/// smallest is its start.
fn first_point(boxes: impl Iterator<Item = Region>) -> Option<Vec<i64>> {
    boxes.filter(|b| !b.is_empty()).map(|b| b.start).min()
}

fn intersect(a: &Region, b: &Region) -> Option<Region> {
    let mut out = Region::new(Vec::with_capacity(a.start.len()), Vec::new());
    for d in 0..a.start.len() {
        let lo = a.start[d].max(b.start[d]);
        let hi = (a.start[d] + a.count[d]).min(b.start[d] + b.count[d]);
        if lo >= hi {
            return None;
        }
        out.start.push(lo);
        out.count.push(hi - lo);
    }
    Some(out)
}

/// `a` minus `b` as disjoint boxes: peel off, dimension by dimension, the
/// slabs of `a` below and above `b`.
fn subtract(a: &Region, b: &Region) -> Vec<Region> {
    if intersect(a, b).is_none() {
        return vec![a.clone()];
    }
    let mut out = Vec::new();
    let mut rest = a.clone();
    for d in 0..a.start.len() {
        let (lo, hi) = (rest.start[d], rest.start[d] + rest.count[d]);
        let (blo, bhi) = (b.start[d], b.start[d] + b.count[d]);
        if blo > lo {
            let mut below = rest.clone();
            below.count[d] = blo - lo;
            out.push(below);
        }
        if bhi < hi {
            let mut above = rest.clone();
            above.start[d] = bhi;
            above.count[d] = hi - bhi;
            out.push(above);
        }
        rest.start[d] = lo.max(blo);
        rest.count[d] = hi.min(bhi) - rest.start[d];
    }
    out
}

/// No two non-empty boxes, of one rank or of two, share an element.
pub(crate) fn disjoint(ranks: &[Vec<Region>]) -> Result<(), DistError> {
    let mut boxes: Vec<(usize, usize, &Region)> = ranks
        .iter()
        .enumerate()
        .flat_map(|(r, list)| list.iter().enumerate().map(move |(i, b)| (r, i, b)))
        .filter(|(_, _, b)| !b.is_empty())
        .collect();
    let Some(&(_, _, first)) = boxes.first() else {
        return Ok(());
    };
    // Sweep along the dimension where the starts differ most, so that a
    // partition into slabs along any one axis stays near linear.
    let ndims = first.start.len();
    let axis = (0..ndims)
        .max_by_key(|&d| {
            let mut starts: Vec<i64> = boxes.iter().map(|(_, _, b)| b.start[d]).collect();
            starts.sort_unstable();
            starts.dedup();
            starts.len()
        })
        .unwrap_or(0);
    boxes.sort_by_key(|(r, i, b)| (b.start[axis], *r, *i));
    for (k, &(ra, ia, a)) in boxes.iter().enumerate() {
        let end = a.start[axis] + a.count[axis];
        for &(rb, ib, b) in &boxes[k + 1..] {
            if b.start[axis] >= end {
                break;
            }
            if let Some(common) = intersect(a, b) {
                let ((rank_a, box_a), (rank_b, box_b)) = if (ra, ia) < (rb, ib) {
                    ((ra, ia), (rb, ib))
                } else {
                    ((rb, ib), (ra, ia))
                };
                return Err(DistError::Overlap {
                    rank_a,
                    box_a,
                    rank_b,
                    box_b,
                    index: common.start,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtract_covers_the_difference() {
        let a = Region::new(vec![0, 0], vec![5, 6]);
        let b = Region::new(vec![1, 2], vec![2, 10]);
        let pieces = subtract(&a, &b);
        for i in 0..5 {
            for j in 0..6 {
                let in_b = (1..3).contains(&i) && (2..12).contains(&j);
                let hits = pieces
                    .iter()
                    .filter(|p| {
                        (p.start[0]..p.start[0] + p.count[0]).contains(&i)
                            && (p.start[1]..p.start[1] + p.count[1]).contains(&j)
                    })
                    .count();
                assert_eq!(hits, usize::from(!in_b), "({i},{j})");
            }
        }
    }
}

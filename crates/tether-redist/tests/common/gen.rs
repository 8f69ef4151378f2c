//! Random descriptors for the property tests: small shapes with the edge
//! cases (extents 0 and 1, blocks not dividing n and larger than n, grids
//! larger than n), both orders, box lists with empty and overlapping boxes.

use proptest::prelude::*;
use tether_redist::{Dist, Kind, Order, Region};

/// Size limits of one generated case.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_extent: i64,
    pub max_grid: i64,
    pub max_box_ranks: usize,
    pub max_boxes: usize,
}

pub const PROPTEST: Limits = Limits {
    max_extent: 12,
    max_grid: 5,
    max_box_ranks: 5,
    max_boxes: 4,
};

/// Smaller, for the loop that runs a hundred thousand cases.
pub const SWEEP: Limits = Limits {
    max_extent: 7,
    max_grid: 3,
    max_box_ranks: 3,
    max_boxes: 3,
};

/// One producer and one consumer over the same shape, and an element size.
#[derive(Debug, Clone)]
pub struct Case {
    pub producer: Dist,
    pub consumer: Dist,
    pub elem_size: usize,
}

fn order() -> impl Strategy<Value = Order> {
    prop_oneof![Just(Order::C), Just(Order::Fortran)]
}

fn kind(max_extent: i64) -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Block),
        Just(Kind::Cyclic),
        (1..=max_extent + 3).prop_map(Kind::BlockCyclic),
        Just(Kind::None),
    ]
}

pub fn shape(l: Limits) -> impl Strategy<Value = Vec<i64>> {
    // Extents 0 and 1 get extra weight: they are where plans go wrong.
    let extent = prop_oneof![1 => Just(0i64), 2 => Just(1i64), 7 => 0..=l.max_extent];
    proptest::collection::vec(extent, 1..=3)
}

pub fn regular(shape: Vec<i64>, l: Limits) -> impl Strategy<Value = Dist> {
    let nd = shape.len();
    (
        proptest::collection::vec((1..=l.max_grid, kind(l.max_extent)), nd),
        order(),
    )
        .prop_map(move |(dims, order)| {
            let grid: Vec<i64> = dims
                .iter()
                .map(|&(g, k)| if k == Kind::None { 1 } else { g })
                .collect();
            let kinds: Vec<Kind> = dims.iter().map(|&(_, k)| k).collect();
            Dist::regular(&shape, &grid, &kinds, order).unwrap()
        })
}

fn region(shape: Vec<i64>) -> impl Strategy<Value = Region> {
    let dims: Vec<_> = shape
        .iter()
        .map(|&n| (0..=n).prop_flat_map(move |s| (Just(s), 0..=n - s)))
        .collect();
    dims.prop_map(|pairs| {
        Region::new(
            pairs.iter().map(|p| p.0).collect(),
            pairs.iter().map(|p| p.1).collect(),
        )
    })
}

/// Consumer boxes: anywhere, overlapping, empty, not covering.
pub fn wanted_boxes(shape: Vec<i64>, l: Limits) -> impl Strategy<Value = Dist> {
    let per_rank = proptest::collection::vec(region(shape.clone()), 0..=l.max_boxes);
    (
        proptest::collection::vec(per_rank, 1..=l.max_box_ranks),
        order(),
    )
        .prop_map(move |(ranks, order)| Dist::boxes(&shape, ranks, order).unwrap())
}

/// Producer boxes: cells of a random partition of the array dealt to
/// ranks in random order, some cells dropped (a hole the check must name)
/// unless `cover`, plus empty boxes.
pub fn held_boxes(shape: Vec<i64>, l: Limits) -> impl Strategy<Value = Dist> {
    let cuts: Vec<_> = shape
        .iter()
        .map(|&n| proptest::collection::vec(0..=n, 0..3))
        .collect();
    (cuts, 1..=l.max_box_ranks, any::<bool>(), order()).prop_flat_map(
        move |(cuts, nranks, cover, order)| {
            let edges: Vec<Vec<i64>> = cuts
                .iter()
                .zip(&shape)
                .map(|(c, &n)| {
                    let mut e = c.clone();
                    e.push(0);
                    e.push(n);
                    e.sort_unstable();
                    e.dedup();
                    e
                })
                .collect();
            let cells: usize = edges.iter().map(|e| e.len().saturating_sub(1)).product();
            let owners = if cover { nranks } else { nranks + 1 };
            let shape = shape.clone();
            (
                proptest::collection::vec((0..owners, any::<u16>()), cells),
                proptest::collection::vec((0..nranks, any::<u16>()), 0..2),
            )
                .prop_map(move |(dealt, empties)| {
                    let mut keyed: Vec<Vec<(u16, Region)>> = vec![Vec::new(); nranks];
                    for (cell, &(owner, key)) in dealt.iter().enumerate() {
                        if owner == nranks {
                            continue;
                        }
                        let mut rest = cell;
                        let mut start = vec![0; shape.len()];
                        let mut count = vec![0; shape.len()];
                        for d in (0..shape.len()).rev() {
                            let spans = edges[d].len() - 1;
                            let i = rest % spans;
                            rest /= spans;
                            start[d] = edges[d][i];
                            count[d] = edges[d][i + 1] - edges[d][i];
                        }
                        keyed[owner].push((key, Region::new(start, count)));
                    }
                    for &(owner, key) in &empties {
                        let count = vec![0; shape.len()];
                        keyed[owner].push((key, Region::new(vec![0; shape.len()], count)));
                    }
                    let ranks = keyed
                        .into_iter()
                        .map(|mut list| {
                            list.sort_by_key(|(k, _)| *k);
                            list.into_iter().map(|(_, r)| r).collect()
                        })
                        .collect();
                    Dist::boxes(&shape, ranks, order).unwrap()
                })
        },
    )
}

pub fn case(l: Limits) -> impl Strategy<Value = Case> {
    shape(l).prop_flat_map(move |shape| {
        let producer = prop_oneof![
            3 => regular(shape.clone(), l),
            1 => held_boxes(shape.clone(), l),
        ];
        let consumer = prop_oneof![
            3 => regular(shape.clone(), l),
            1 => wanted_boxes(shape.clone(), l),
        ];
        (producer, consumer, 1usize..=16).prop_map(|(producer, consumer, elem_size)| Case {
            producer,
            consumer,
            elem_size,
        })
    })
}

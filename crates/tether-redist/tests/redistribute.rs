//! Every element of every case against the element-by-element oracle.

mod common;

use common::gen::{self, Case};
use common::oracle::verify;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use tether_redist::{plan, Dist, Kind, Order, Side};

fn run(case: &Case) -> Result<(), String> {
    verify(&case.producer, &case.consumer, case.elem_size)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn pack_unpack_match_the_oracle(case in gen::case(gen::PROPTEST)) {
        if let Err(e) = run(&case) {
            return Err(TestCaseError::fail(e));
        }
    }

    /// The same grid on both sides: one run per dimension and peer, and in
    /// place in either order (two Fortran sides are planned mirrored, so
    /// their message is in Fortran order too).
    #[test]
    fn identical_grids_are_one_run_per_peer(case in gen::case(gen::PROPTEST)) {
        let dist = &case.producer;
        for rank in 0..dist.ranks() {
            let p = plan(dist, dist, Side::Producer, rank);
            let len = dist.local_len(rank);
            if len == 0 {
                prop_assert!(p.peers().is_empty());
                continue;
            }
            prop_assert_eq!(p.peers().len(), 1);
            prop_assert_eq!(p.peers()[0].peer(), rank);
            prop_assert_eq!(p.peers()[0].elements(), len);
            if matches!(dist.layout(), tether_redist::Layout::Regular { .. }) {
                prop_assert_eq!(p.peers()[0].contiguous(), Some((0, len)));
                prop_assert_eq!(p.stored_runs(), dist.ndims());
            }
        }
        prop_assert!(verify(dist, dist, case.elem_size).is_ok());
    }
}

/// A hundred thousand small cases from a fixed seed, in four parts so that
/// they run in parallel.
fn sweep(seed: u8, cases: usize) {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]),
    );
    let strategy = gen::case(gen::SWEEP);
    for i in 0..cases {
        let case = strategy.new_tree(&mut runner).unwrap().current();
        if let Err(e) = run(&case) {
            panic!("seed {seed} case {i}: {e}\n{case:#?}");
        }
    }
}

#[test]
fn sweep_part_1() {
    sweep(1, 25_000);
}

#[test]
fn sweep_part_2() {
    sweep(2, 25_000);
}

#[test]
fn sweep_part_3() {
    sweep(3, 25_000);
}

#[test]
fn sweep_part_4() {
    sweep(4, 25_000);
}

/// Mixed storage orders on a larger array: the transposing copy.
#[test]
fn transpose_c_to_fortran() {
    let shape = [37, 53, 5];
    let producer = Dist::regular(
        &shape,
        &[2, 3, 1],
        &[Kind::Block, Kind::BlockCyclic(4), Kind::None],
        Order::C,
    )
    .unwrap();
    let consumer = Dist::regular(
        &shape,
        &[3, 1, 2],
        &[Kind::Cyclic, Kind::None, Kind::Block],
        Order::Fortran,
    )
    .unwrap();
    verify(&producer, &consumer, 8).unwrap();
    verify(&consumer, &producer, 3).unwrap();
}

/// Transposes large enough for the copy loop's tiles to be cut, in both
/// directions and for every cell size it special-cases.
#[test]
fn tiled_transposes() {
    let shape = [45, 38];
    let grids: [(&[i64], &[Kind]); 3] = [
        (&[1, 1], &[Kind::Block, Kind::Block]),
        (&[2, 1], &[Kind::Block, Kind::None]),
        (&[1, 2], &[Kind::None, Kind::BlockCyclic(20)]),
    ];
    for (pg, pk) in grids {
        for (cg, ck) in grids {
            let producer = Dist::regular(&shape, pg, pk, Order::C).unwrap();
            let consumer = Dist::regular(&shape, cg, ck, Order::Fortran).unwrap();
            for es in [1, 2, 3, 4, 8, 16, 24] {
                verify(&producer, &consumer, es).unwrap();
                verify(&consumer, &producer, es).unwrap();
            }
        }
    }
}

//! Descriptors: validation, local shapes, text, the codec, and the checks
//! made before any data moves.

mod common;

use common::gen;
use common::oracle::holders;
use proptest::prelude::*;
use tether_redist::{check, Dist, DistError, Kind, Mismatch, Order, Region};

fn grid(shape: &[i64], grid: &[i64], kinds: &[Kind], order: Order) -> Dist {
    Dist::regular(shape, grid, kinds, order).unwrap()
}

fn boxes(shape: &[i64], ranks: &[&[(&[i64], &[i64])]]) -> Dist {
    let ranks = ranks
        .iter()
        .map(|list| {
            list.iter()
                .map(|(s, c)| Region::new(s.to_vec(), c.to_vec()))
                .collect()
        })
        .collect();
    Dist::boxes(shape, ranks, Order::C).unwrap()
}

#[test]
fn regular_validation() {
    use Kind::*;
    let err =
        |shape: &[i64], g: &[i64], k: &[Kind]| Dist::regular(shape, g, k, Order::C).unwrap_err();
    assert_eq!(err(&[], &[], &[]), DistError::NoDims);
    assert!(matches!(
        err(&[4], &[1, 1], &[Block]),
        DistError::Length { what: "grid", .. }
    ));
    assert!(matches!(
        err(&[4], &[1], &[Block, Block]),
        DistError::Length { what: "kinds", .. }
    ));
    assert!(matches!(
        err(&[-1], &[1], &[Block]),
        DistError::NegativeExtent { dim: 0, .. }
    ));
    assert!(matches!(
        err(&[4, 4], &[1, 0], &[Block, Block]),
        DistError::BadGrid { dim: 1, .. }
    ));
    assert!(matches!(
        err(&[4], &[2], &[None]),
        DistError::NoneNeedsGrid1 { dim: 0, extent: 2 }
    ));
    assert!(matches!(
        err(&[4], &[2], &[BlockCyclic(0)]),
        DistError::BadBlock { dim: 0, block: 0 }
    ));
    assert_eq!(
        err(&[1 << 40, 1 << 40], &[1, 1], &[Block, Block]),
        DistError::TooLarge
    );
    assert!(matches!(
        err(&[1; 33], &[1; 33], &[Block; 33]),
        DistError::TooManyDims { ndims: 33 }
    ));
    // Extents may be 0; blocks may exceed the extent.
    assert!(Dist::regular(&[0, 3], &[2, 2], &[Cyclic, BlockCyclic(9)], Order::C).is_ok());
}

#[test]
fn box_validation() {
    let err = |ranks: Vec<Vec<Region>>| Dist::boxes(&[4, 5], ranks, Order::C).unwrap_err();
    let r = |s: &[i64], c: &[i64]| Region::new(s.to_vec(), c.to_vec());
    assert!(matches!(
        err(vec![vec![r(&[0], &[1, 1])]]),
        DistError::BoxDims { what: "start", .. }
    ));
    assert!(matches!(
        err(vec![vec![], vec![r(&[0, 0], &[1])]]),
        DistError::BoxDims {
            rank: 1,
            what: "count",
            ..
        }
    ));
    assert!(matches!(
        err(vec![vec![r(&[0, 0], &[1, -1])]]),
        DistError::NegativeCount { dim: 1, .. }
    ));
    assert!(matches!(
        err(vec![vec![r(&[3, 0], &[2, 1])]]),
        DistError::BoxOutside { dim: 0, .. }
    ));
    assert!(matches!(
        err(vec![vec![r(&[0, -1], &[1, 1])]]),
        DistError::BoxOutside { dim: 1, .. }
    ));
    assert!(matches!(
        err(vec![vec![r(&[0, i64::MAX], &[1, 1])]]),
        DistError::BoxOutside { .. }
    ));
    // Empty boxes and ranks without boxes are legal, at the edge too.
    assert!(Dist::boxes(&[4, 5], vec![vec![r(&[4, 5], &[0, 0])], vec![]], Order::C).is_ok());
}

#[test]
fn local_shapes() {
    let d = grid(&[9], &[4], &[Kind::Block], Order::C);
    let shapes: Vec<Vec<i64>> = (0..4).map(|r| d.local_shape(r)).collect();
    assert_eq!(shapes, [[3], [3], [3], [0]]);
    assert_eq!(d.local_len(3), 0);

    // Rank -> coordinates follows the order: C last fastest, Fortran first.
    let kinds = [Kind::BlockCyclic(1), Kind::BlockCyclic(2)];
    let c = grid(&[3, 7], &[2, 3], &kinds, Order::C);
    let f = grid(&[3, 7], &[2, 3], &kinds, Order::Fortran);
    assert_eq!(c.local_shape(1), [2, 2]); // coordinates (0, 1)
    assert_eq!(f.local_shape(1), [1, 3]); // coordinates (1, 0)
    assert_eq!(c.ranks(), 6);

    let b = boxes(
        &[4, 5],
        &[
            &[],
            &[(&[1, 1], &[2, 3])],
            &[(&[0, 0], &[1, 2]), (&[2, 2], &[2, 2])],
        ],
    );
    assert_eq!(b.ranks(), 3);
    assert_eq!(b.local_shape(0), [0, 0]);
    assert_eq!(b.local_shape(1), [2, 3]);
    assert_eq!(b.local_shape(2).iter().product::<i64>(), 6);
    assert_eq!(b.local_len(2), 6);
}

#[test]
fn describe_is_readable() {
    let d = grid(&[100, 200], &[2, 2], &[Kind::Block, Kind::Cyclic], Order::C);
    assert_eq!(d.describe(), "2-D 100x200 C, grid 2x2 BLOCK x CYCLIC");
    let d = grid(&[8], &[1], &[Kind::None], Order::Fortran);
    assert_eq!(d.describe(), "1-D 8 FORTRAN, grid 1 NONE");
    let d = grid(&[8], &[2], &[Kind::BlockCyclic(3)], Order::C);
    assert_eq!(d.describe(), "1-D 8 C, grid 2 BLOCK_CYCLIC(3)");
    let b = boxes(&[4, 5], &[&[], &[(&[1, 1], &[2, 3]), (&[0, 0], &[1, 1])]]);
    assert_eq!(b.describe(), "2-D 4x5 C, boxes on 2 ranks (2 in all)");
}

#[test]
fn check_names_what_differs() {
    let p = grid(&[10, 20], &[2, 1], &[Kind::Block, Kind::None], Order::C);
    let q = grid(&[10], &[2], &[Kind::Block], Order::C);
    let e = check(&p, &q).unwrap_err();
    assert!(matches!(
        e,
        Mismatch::Ndims {
            expected: 2,
            received: 1,
            ..
        }
    ));
    let text = e.to_string();
    assert!(
        text.contains("expected 2") && text.contains("received 1"),
        "{text}"
    );

    let q = grid(&[10, 21], &[2, 1], &[Kind::Block, Kind::None], Order::C);
    let e = check(&p, &q).unwrap_err();
    assert!(matches!(e, Mismatch::Shape { .. }));
    let text = e.to_string();
    assert!(
        text.contains("[10, 20]") && text.contains("[10, 21]"),
        "{text}"
    );

    // Grids cover everything, whatever the other side.
    let q = grid(
        &[10, 20],
        &[3, 2],
        &[Kind::Cyclic, Kind::BlockCyclic(7)],
        Order::Fortran,
    );
    assert_eq!(check(&p, &q), Ok(()));
    assert_eq!(check(&q, &p), Ok(()));
}

#[test]
fn check_finds_an_uncovered_element() {
    // The producer's boxes leave out row 3, columns 2..4.
    let held = boxes(&[4, 4], &[&[(&[0, 0], &[3, 4])], &[(&[3, 0], &[1, 2])]]);
    let all = grid(&[4, 4], &[2, 2], &[Kind::Block, Kind::Block], Order::C);
    match check(&held, &all).unwrap_err() {
        Mismatch::Uncovered {
            consumer_rank,
            index,
            ..
        } => {
            assert_eq!(index, [3, 2]);
            assert_eq!(consumer_rank, 3);
        }
        other => panic!("{other}"),
    }
    let some = boxes(&[4, 4], &[&[(&[0, 0], &[2, 2])], &[(&[2, 1], &[2, 2])]]);
    match check(&held, &some).unwrap_err() {
        Mismatch::Uncovered {
            consumer_rank,
            index,
            ..
        } => {
            assert_eq!((consumer_rank, index), (1, vec![3, 2]));
        }
        other => panic!("{other}"),
    }
    let fine = boxes(&[4, 4], &[&[(&[0, 0], &[2, 2])], &[(&[2, 0], &[2, 2])]]);
    assert_eq!(check(&held, &fine), Ok(()));
    let text = check(&held, &all).unwrap_err().to_string();
    assert!(
        text.contains("[3, 2]") && text.contains("no producer"),
        "{text}"
    );
}

#[test]
fn overlapping_producer_boxes_are_refused() {
    let touching = boxes(
        &[4, 4],
        &[
            &[(&[0, 0], &[2, 4])],
            &[(&[2, 0], &[2, 4]), (&[1, 1], &[0, 3])],
        ],
    );
    assert_eq!(touching.check_disjoint(), Ok(()));
    let across = boxes(&[4, 4], &[&[(&[0, 0], &[3, 4])], &[(&[2, 1], &[2, 2])]]);
    assert_eq!(
        across.check_disjoint(),
        Err(DistError::Overlap {
            rank_a: 0,
            box_a: 0,
            rank_b: 1,
            box_b: 0,
            index: vec![2, 1]
        })
    );
    let within = boxes(
        &[4, 4],
        &[
            &[],
            &[(&[0, 0], &[1, 1]), (&[0, 3], &[4, 1]), (&[3, 3], &[1, 1])],
        ],
    );
    assert!(matches!(
        within.check_disjoint(),
        Err(DistError::Overlap {
            rank_a: 1,
            box_a: 1,
            rank_b: 1,
            box_b: 2,
            ..
        })
    ));
    assert_eq!(
        grid(&[4], &[2], &[Kind::Cyclic], Order::C).check_disjoint(),
        Ok(())
    );
}

#[test]
fn decode_reports_bad_bytes() {
    let d = grid(
        &[5, 6],
        &[2, 1],
        &[Kind::BlockCyclic(2), Kind::None],
        Order::Fortran,
    );
    let bytes = d.encode();
    assert_eq!(Dist::decode(&bytes), Ok(d));
    assert!(Dist::decode(&bytes[..bytes.len() - 1]).is_err());
    let mut extra = bytes.clone();
    extra.push(0);
    assert_eq!(
        Dist::decode(&extra),
        Err(DistError::Decode("trailing bytes"))
    );
    let mut version = bytes.clone();
    version[4] = 9;
    assert_eq!(
        Dist::decode(&version),
        Err(DistError::Decode("unknown version"))
    );
    assert!(Dist::decode(b"").is_err());
    // A box count far beyond the bytes is refused before anything is allocated.
    let b = boxes(&[4], &[&[(&[0], &[2])]]);
    let mut huge = b.encode();
    let at = huge.len() - 8 * 2 - 8;
    huge[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(Dist::decode(&huge).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = Dist::decode(&bytes);
    }

    /// Valid encodings with bytes changed or cut: the corruptions that get
    /// past the magic and the version.
    #[test]
    fn decode_survives_corruption(
        case in gen::case(gen::PROPTEST),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = case.consumer.encode();
        for (at, v) in flips {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        let _ = Dist::decode(&bytes);
        let _ = Dist::decode(&bytes[..cut.index(bytes.len())]);
    }

    #[test]
    fn encode_round_trips(case in gen::case(gen::PROPTEST)) {
        for d in [&case.producer, &case.consumer] {
            prop_assert_eq!(&Dist::decode(&d.encode()).unwrap(), d);
        }
    }

    /// check() refuses exactly when some wanted element has no holder, and
    /// names a wanted, unheld element and a rank that wants it.
    #[test]
    fn check_agrees_with_the_oracle(case in gen::case(gen::PROPTEST)) {
        let held = holders(&case.producer);
        let wanted = holders(&case.consumer);
        let shape = case.producer.shape();
        let hole = (0..held.len()).find(|&g| held[g].is_empty() && !wanted[g].is_empty());
        match (check(&case.producer, &case.consumer), hole) {
            (Ok(()), None) => {}
            (Err(Mismatch::Uncovered { consumer_rank, index, .. }), Some(_)) => {
                let mut g = 0usize;
                for (d, &i) in index.iter().enumerate() {
                    g = g * shape[d] as usize + i as usize;
                }
                prop_assert!(held[g].is_empty());
                prop_assert!(wanted[g].iter().any(|h| h.rank == consumer_rank));
            }
            (got, hole) => prop_assert!(false, "check {:?}, first hole {:?}", got, hole),
        }
    }

    /// check_disjoint() against counting holders.
    #[test]
    fn disjoint_agrees_with_the_oracle(dist in gen::shape(gen::PROPTEST).prop_flat_map(|s| gen::wanted_boxes(s, gen::PROPTEST))) {
        let overlap = holders(&dist).iter().any(|h| h.len() > 1);
        prop_assert_eq!(dist.check_disjoint().is_err(), overlap);
    }
}

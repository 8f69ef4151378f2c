//! The planner's cost in loop iterations and stored entries, on the large
//! cases of fields.md section 7: bounded by the period, not by the element
//! count or the other side's number of ranks.

use tether_redist::{plan, Dist, Kind, Order, Region, Side};

fn grid(shape: &[i64], grid: &[i64], kinds: &[Kind]) -> Dist {
    Dist::regular(shape, grid, kinds, Order::C).unwrap()
}

/// B0, the fields issue's case: 65536^2, 64x64 BLOCK_CYCLIC(1) to 48x48
/// BLOCK_CYCLIC(7). A per-pair scan needs about 5.6e6 steps per rank.
#[test]
fn issue_case_costs_a_period() {
    let n = 65536;
    let producer = grid(&[n, n], &[64, 64], &[Kind::BlockCyclic(1); 2]);
    let consumer = grid(&[n, n], &[48, 48], &[Kind::BlockCyclic(7); 2]);
    for rank in [0, 1, 2049, 4095] {
        let p = plan(&producer, &consumer, Side::Producer, rank);
        assert!(p.work() < 10_000, "producer {rank}: work {}", p.work());
        // 21 runs a period and 16 in the tail, per dimension (fields.md: 74).
        assert!(
            p.stored_runs() <= 74,
            "producer {rank}: {} runs",
            p.stored_runs()
        );
        assert_eq!(p.peers().len(), 441);
        let total: u64 = p.peers().iter().map(|q| q.elements()).sum();
        assert_eq!(total, producer.local_len(rank));
    }
    for rank in [0, 1, 1000, 2303] {
        let p = plan(&producer, &consumer, Side::Consumer, rank);
        assert!(p.work() < 10_000, "consumer {rank}: work {}", p.work());
        assert!(
            p.stored_runs() < 200,
            "consumer {rank}: {} runs",
            p.stored_runs()
        );
        let total: u64 = p.peers().iter().map(|q| q.elements()).sum();
        assert_eq!(total, consumer.local_len(rank));
    }
}

/// B4: 1-D 2^40 elements, 1000 CYCLIC to 7 BLOCK_CYCLIC(3). Without the
/// period a rank would walk 1.1e9 local elements.
#[test]
fn huge_1d_plans_with_a_few_dozen_runs() {
    let n = 1i64 << 40;
    let producer = grid(&[n], &[1000], &[Kind::Cyclic]);
    let consumer = grid(&[n], &[7], &[Kind::BlockCyclic(3)]);
    for rank in [0, 999] {
        let p = plan(&producer, &consumer, Side::Producer, rank);
        assert!(p.stored_runs() <= 40, "{} runs", p.stored_runs());
        assert!(p.work() < 1_000, "work {}", p.work());
        assert_eq!(p.peers().len(), 7);
        let total: u64 = p.peers().iter().map(|q| q.elements()).sum();
        assert_eq!(total, producer.local_len(rank));
    }
    let p = plan(&producer, &consumer, Side::Consumer, 6);
    assert!(p.work() < 10_000, "work {}", p.work());
    assert_eq!(p.peers().len(), 1000);
    let total: u64 = p.peers().iter().map(|q| q.elements()).sum();
    assert_eq!(total, consumer.local_len(6));
}

/// B5: 8x8 CYCLIC to 64x64 BLOCK; each consumer block holds many producer
/// periods, so both sides store progressions, not runs per element.
#[test]
fn long_blocks_store_progressions() {
    let n = 65536;
    let producer = grid(&[n, n], &[8, 8], &[Kind::Cyclic; 2]);
    let consumer = grid(&[n, n], &[64, 64], &[Kind::Block; 2]);
    let p = plan(&producer, &consumer, Side::Producer, 9);
    assert_eq!(p.peers().len(), 4096);
    assert!(p.stored_runs() <= 2 * 64, "{} runs", p.stored_runs());
    assert!(p.work() < 10_000, "work {}", p.work());
    let q = plan(&producer, &consumer, Side::Consumer, 100);
    assert_eq!(q.peers().len(), 64);
    assert!(q.stored_runs() <= 2 * 8, "{} runs", q.stored_runs());
    assert!(q.work() < 1_000, "work {}", q.work());
}

/// A box against a grid touches only the periods it spans: a box the
/// length of the whole axis costs per remote coordinate, not per block.
#[test]
fn long_box_against_a_cyclic_grid() {
    let n = 1i64 << 40;
    let producer = grid(&[n], &[1000], &[Kind::Cyclic]);
    let consumer = Dist::boxes(
        &[n],
        vec![vec![Region::new(vec![5], vec![n - 10])]],
        Order::C,
    )
    .unwrap();
    let p = plan(&producer, &consumer, Side::Consumer, 0);
    assert_eq!(p.peers().len(), 1000);
    assert!(p.work() < 5_000, "work {}", p.work());
    assert!(p.stored_runs() <= 3 * 1000, "{} runs", p.stored_runs());
    let total: u64 = p.peers().iter().map(|q| q.elements()).sum();
    assert_eq!(total, (n - 10) as u64);
    let q = plan(&producer, &consumer, Side::Producer, 17);
    assert_eq!(q.stored_runs(), 1);
}

/// Identical grids: one run per dimension and peer, sent in place.
#[test]
fn identical_grids_are_one_run() {
    let n = 65536;
    let d = grid(&[n, n], &[64, 64], &[Kind::BlockCyclic(7); 2]);
    let p = plan(&d, &d, Side::Producer, 77);
    assert_eq!(p.peers().len(), 1);
    assert_eq!(p.stored_runs(), 2);
    assert_eq!(p.peers()[0].contiguous(), Some((0, d.local_len(77))));
}

/// Extents near i64::MAX, periods that do not fit an i64, blocks longer
/// than the axis: every rank's messages add up to its local part, and both
/// sides agree on every message's size.
#[test]
fn extreme_extents_do_not_overflow() {
    let max = i64::MAX;
    let sides = [
        grid(&[max], &[3], &[Kind::Block]),
        grid(&[max], &[7], &[Kind::Cyclic]),
        grid(&[max], &[5], &[Kind::BlockCyclic(max / 4)]),
        grid(&[max], &[1 << 10], &[Kind::BlockCyclic(1 << 30)]),
        grid(&[max], &[2], &[Kind::BlockCyclic(max)]),
        Dist::boxes(
            &[max],
            vec![
                vec![Region::new(vec![max / 3], vec![max / 2])],
                vec![Region::new(vec![0], vec![max])],
            ],
            Order::C,
        )
        .unwrap(),
    ];
    let ranks = |d: &Dist| -> Vec<usize> {
        let n = d.ranks();
        let mut r = vec![0, 1, n / 2, n - 1];
        r.retain(|&x| x < n);
        r.dedup();
        r
    };
    for producer in &sides[..5] {
        for consumer in &sides {
            for p in ranks(producer) {
                let plan_p = plan(producer, consumer, Side::Producer, p);
                if matches!(consumer.layout(), tether_redist::Layout::Regular { .. }) {
                    let total: u64 = plan_p.peers().iter().map(|x| x.elements()).sum();
                    assert_eq!(
                        total,
                        producer.local_len(p),
                        "{} -> {}",
                        producer.describe(),
                        consumer.describe()
                    );
                }
                for q in ranks(consumer) {
                    let plan_q = plan(producer, consumer, Side::Consumer, q);
                    let from_p = plan_p
                        .peers()
                        .iter()
                        .find(|x| x.peer() == q)
                        .map(|x| x.elements());
                    let to_q = plan_q
                        .peers()
                        .iter()
                        .find(|x| x.peer() == p)
                        .map(|x| x.elements());
                    assert_eq!(
                        from_p,
                        to_q,
                        "{} -> {}: {p} -> {q}",
                        producer.describe(),
                        consumer.describe()
                    );
                    assert!(plan_q.work() < 100_000);
                }
                assert!(plan_p.work() < 100_000);
            }
        }
    }
}

/// The runtime keeps plans across threads (a progress engine beside the
/// application) and clones peers into requests.
#[test]
fn plans_are_send_sync_and_clone() {
    fn check<T: Send + Sync + Clone + std::fmt::Debug>() {}
    check::<tether_redist::Plan>();
    check::<tether_redist::PeerPlan>();
    check::<Dist>();
}

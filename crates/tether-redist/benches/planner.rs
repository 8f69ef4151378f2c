//! Planner benchmark, fields.md section 7: one rank's complete plan
//! (fastest of 20) and a whole side planned by one process, beside the
//! classical per-pair scan (ScaLAPACK REDIST style, written here) where it
//! is feasible. One thread, std::time only; prints a table, asserts
//! nothing about time.
//!
//! Run with `cargo bench -p tether-redist`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use tether_redist::{plan, Dist, Kind, Layout, Order, PeerPlan, Region, Side};

const N2: i64 = 65536;

struct Case {
    name: &'static str,
    what: &'static str,
    producer: Dist,
    consumer: Dist,
}

fn grid(shape: &[i64], grid: &[i64], kinds: &[Kind]) -> Dist {
    Dist::regular(shape, grid, kinds, Order::C).unwrap()
}

fn cases() -> Vec<Case> {
    use Kind::*;
    let b2_producer = grid(&[N2, N2], &[64, 64], &[BlockCyclic(7); 2]);
    let mut cases = vec![
        Case {
            name: "B0",
            what: "65536^2 64x64 BC(1) -> 48x48 BC(7)",
            producer: grid(&[N2, N2], &[64, 64], &[BlockCyclic(1); 2]),
            consumer: grid(&[N2, N2], &[48, 48], &[BlockCyclic(7); 2]),
        },
        Case {
            name: "B1",
            what: "65536^2 64x64 BLOCK -> 8x8 CYCLIC",
            producer: grid(&[N2, N2], &[64, 64], &[Block; 2]),
            consumer: grid(&[N2, N2], &[8, 8], &[Cyclic; 2]),
        },
        Case {
            name: "B2",
            what: "65536^2 64x64 BC(7) -> 61x67 BC(5)xBC(3)",
            producer: b2_producer.clone(),
            consumer: grid(&[N2, N2], &[61, 67], &[BlockCyclic(5), BlockCyclic(3)]),
        },
        Case {
            name: "B3",
            what: "4096^3 16^3 BLOCK -> 3x5x7 BC(64,32,17)",
            producer: grid(&[4096; 3], &[16; 3], &[Block; 3]),
            consumer: grid(
                &[4096; 3],
                &[3, 5, 7],
                &[BlockCyclic(64), BlockCyclic(32), BlockCyclic(17)],
            ),
        },
        Case {
            name: "B4",
            what: "1-D 2^40 1000 CYCLIC -> 7 BC(3)",
            producer: grid(&[1 << 40], &[1000], &[Cyclic]),
            consumer: grid(&[1 << 40], &[7], &[BlockCyclic(3)]),
        },
        Case {
            name: "B5",
            what: "65536^2 8x8 CYCLIC -> 64x64 BLOCK",
            producer: grid(&[N2, N2], &[8, 8], &[Cyclic; 2]),
            consumer: grid(&[N2, N2], &[64, 64], &[Block; 2]),
        },
        Case {
            name: "B6",
            what: "B2's producer -> 10^4 random boxes, sides 1..4096, on 100 ranks",
            producer: b2_producer.clone(),
            consumer: random_boxes(&[N2, N2], 100, 100, 4096),
        },
        Case {
            name: "B8",
            what: "B2's producer -> itself (trivial plan)",
            producer: b2_producer.clone(),
            consumer: b2_producer,
        },
    ];
    // Growing process counts on the B0 pattern: the plan of one rank must
    // grow with its local blocks, not with the other side's ranks, while
    // the per-pair scan grows with both.
    for (name, p) in [("G8", 8), ("G16", 16), ("G32", 32), ("G64", 64)] {
        let q = p * 3 / 4;
        cases.push(Case {
            name,
            what: "65536^2 PxP BC(1) -> (3P/4)x(3P/4) BC(7), P = 8, 16, 32, 64",
            producer: grid(&[N2, N2], &[p, p], &[BlockCyclic(1); 2]),
            consumer: grid(&[N2, N2], &[q, q], &[BlockCyclic(7); 2]),
        });
    }
    cases
}

/// `ranks x per_rank` boxes with sides up to `max_side`, from a fixed seed.
fn random_boxes(shape: &[i64], ranks: usize, per_rank: usize, max_side: i64) -> Dist {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |bound: i64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as i64
    };
    let lists = (0..ranks)
        .map(|_| {
            (0..per_rank)
                .map(|_| {
                    let count: Vec<i64> =
                        shape.iter().map(|&n| 1 + next(max_side.min(n))).collect();
                    let start = shape
                        .iter()
                        .zip(&count)
                        .map(|(&n, &c)| next(n - c + 1))
                        .collect();
                    Region::new(start, count)
                })
                .collect()
        })
        .collect();
    Dist::boxes(shape, lists, Order::C).unwrap()
}

fn fastest(times: usize, mut f: impl FnMut()) -> Duration {
    (0..times)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap()
}

/// One rank's block sequence on one axis: `(n, P, B, coordinate)`.
type Axis = (i64, i64, i64, i64);

fn axes(dist: &Dist, rank: usize) -> Option<Vec<Axis>> {
    let Layout::Regular { grid, kinds } = dist.layout() else {
        return None;
    };
    let mut coords = vec![0; grid.len()];
    let mut rest = rank as i64;
    for d in (0..grid.len()).rev() {
        coords[d] = rest % grid[d];
        rest /= grid[d];
    }
    let shape = dist.shape();
    Some(
        (0..grid.len())
            .map(|d| {
                let (n, p) = (shape[d], grid[d]);
                let b = match kinds[d] {
                    Kind::Block => (n + p - 1) / p,
                    Kind::Cyclic => 1,
                    Kind::BlockCyclic(b) => b,
                    Kind::None => n,
                };
                (n, p, b.max(1), coords[d])
            })
            .collect(),
    )
}

/// Steps the per-pair scan would take for one rank: per remote rank and
/// dimension, both block sequences over the whole extent.
fn scan_steps(mine: &[Axis], remote: &Dist) -> f64 {
    let theirs = axes(remote, 0).unwrap();
    let pairs = remote.ranks() as f64;
    let per_pair: f64 = mine
        .iter()
        .zip(&theirs)
        .map(|(&(n, p, b, _), &(_, q, b2, _))| (n / (p * b) + n / (q * b2) + 2) as f64)
        .sum();
    pairs * per_pair
}

/// The classical planner: for every remote rank, merge the two block
/// sequences of every dimension over the whole extent into intervals of
/// my local indices (ScaLAPACK's scan_intervals); the message is their
/// product. No period, and a factor in the other side's rank count.
fn per_pair_scan(mine: &[Axis], remote: &Dist, out: &mut Vec<(i64, i64)>) -> u64 {
    let theirs = axes(remote, 0).unwrap();
    let mut elements = 0u64;
    for r in 0..remote.ranks() {
        let coords = axes(remote, r).unwrap();
        let mut product = 1u64;
        for (d, &(n, p, b, c)) in mine.iter().enumerate() {
            let (q, b2, e) = (theirs[d].1, theirs[d].2, coords[d].3);
            out.clear();
            // Block k of mine starts at (k*p + c)*b, block j of theirs at
            // (j*q + e)*b2: advance whichever ends first.
            let (mut k, mut j) = (0i64, 0i64);
            loop {
                let (s1, s2) = ((k * p + c) * b, (j * q + e) * b2);
                if s1 >= n || s2 >= n {
                    break;
                }
                let (e1, e2) = ((s1 + b).min(n), (s2 + b2).min(n));
                let (lo, hi) = (s1.max(s2), e1.min(e2));
                if lo < hi {
                    out.push((k * b + lo - s1, hi - lo));
                }
                if e1 <= e2 {
                    k += 1;
                } else {
                    j += 1;
                }
            }
            product *= out.iter().map(|&(_, l)| l as u64).sum::<u64>();
        }
        elements += product;
    }
    elements
}

struct Row {
    case: String,
    peers: usize,
    pieces: usize,
    runs: usize,
    work: u64,
    one: Duration,
    side: Duration,
    ranks: usize,
    scan: Option<Duration>,
    scan_steps: f64,
}

fn measure(case: &Case, side: Side) -> Row {
    let (mine, remote) = match side {
        Side::Producer => (&case.producer, &case.consumer),
        Side::Consumer => (&case.consumer, &case.producer),
    };
    let rank = mine.ranks() / 2 + 1;
    let p = plan(&case.producer, &case.consumer, side, rank);
    let total: u64 = p.peers().iter().map(PeerPlan::elements).sum();
    if matches!(remote.layout(), Layout::Regular { .. }) {
        assert_eq!(
            total,
            mine.local_len(rank),
            "{}: plan covers the rank",
            case.name
        );
    }
    let one = fastest(20, || {
        black_box(plan(black_box(&case.producer), &case.consumer, side, rank));
    });
    let side_runs = if mine.ranks() > 1000 { 1 } else { 3 };
    let whole = fastest(side_runs, || {
        for r in 0..mine.ranks() {
            black_box(plan(&case.producer, &case.consumer, side, r));
        }
    });
    let axes = axes(mine, rank);
    let steps = match (&axes, remote.layout()) {
        (Some(a), Layout::Regular { .. }) => scan_steps(a, remote),
        _ => f64::NAN,
    };
    let scan = match &axes {
        Some(a) if steps < 2e9 => {
            let mut buf = Vec::new();
            let runs = if steps > 2e7 { 1 } else { 5 };
            let t = fastest(runs, || {
                black_box(per_pair_scan(a, remote, &mut buf));
            });
            assert_eq!(
                per_pair_scan(a, remote, &mut buf),
                total,
                "{}: scan agrees",
                case.name
            );
            Some(t)
        }
        _ => None,
    };
    Row {
        case: format!(
            "{} {}",
            case.name,
            if side == Side::Producer { "P" } else { "C" }
        ),
        peers: p.peers().len(),
        pieces: p.peers().iter().map(PeerPlan::pieces).sum(),
        runs: p.stored_runs(),
        work: p.work(),
        one,
        side: whole,
        ranks: mine.ranks(),
        scan,
        scan_steps: steps,
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Pack and unpack rates of a 2048^2 array of doubles on one rank each
/// side: in order, and transposed (a C side and a Fortran side).
fn copy_rates() {
    let n = 2048i64;
    let es = 8usize;
    let bytes = (n * n) as usize * es;
    let local: Vec<u8> = (0..bytes).map(|i| i as u8).collect();
    println!();
    println!("B7 copy loops, 2048^2 doubles (32 MiB), one rank each side, fastest of 5:");
    println!("| copy | GB/s |");
    println!("|---|---|");
    let mut copy = vec![0u8; bytes];
    let memcpy = fastest(5, || {
        copy.copy_from_slice(black_box(&local));
        black_box(&mut copy);
    });
    let rate = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e9;
    println!("| memcpy | {:.1} |", rate(memcpy));
    let one = |order| Dist::regular(&[n, n], &[1, 1], &[Kind::Block; 2], order).unwrap();
    for (label, from, to) in [
        ("C -> C", Order::C, Order::C),
        ("C -> Fortran", Order::C, Order::Fortran),
        ("Fortran -> C", Order::Fortran, Order::C),
    ] {
        let (src, dst) = (one(from), one(to));
        let p = plan(&src, &dst, Side::Producer, 0);
        let c = plan(&src, &dst, Side::Consumer, 0);
        let mut message = vec![1u8; bytes];
        let pack = fastest(5, || p.peers()[0].pack(black_box(&local), es, &mut message));
        let mut out = vec![1u8; bytes];
        let unpack = fastest(5, || c.peers()[0].unpack(black_box(&message), es, &mut out));
        println!("| {label}: pack | {:.1} |", rate(pack));
        println!("| {label}: unpack | {:.1} |", rate(unpack));
    }
}

fn main() {
    // `cargo bench -p tether-redist -- B2 B6` runs only those cases.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    println!("Planner, one thread; one rank = fastest of 20 (rank ranks/2+1), whole side = every rank planned once (fastest of 3 below 1000 ranks).");
    println!();
    println!("| case | peers | pieces | runs stored | work | one rank (us) | whole side (ms, ranks) | per-pair scan, one rank | scan / plan |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let chosen = |c: &Case| only.is_empty() || only.iter().any(|o| c.name.contains(o.as_str()));
    for case in cases().into_iter().filter(chosen) {
        for side in [Side::Producer, Side::Consumer] {
            let r = measure(&case, side);
            let scan = match r.scan {
                Some(t) => format!("{:.2} ms ({:.1e} steps)", us(t) / 1e3, r.scan_steps),
                None if r.scan_steps.is_nan() => "n/a (boxes)".to_string(),
                None => format!("not run ({:.1e} steps)", r.scan_steps),
            };
            let ratio = r
                .scan
                .map(|t| format!("{:.0}x", t.as_secs_f64() / r.one.as_secs_f64()))
                .unwrap_or_else(|| "-".to_string());
            println!(
                "| {} | {} | {} | {} | {} | {:.2} | {:.2} ({}) | {} | {} |",
                r.case,
                r.peers,
                r.pieces,
                r.runs,
                r.work,
                us(r.one),
                us(r.side) / 1e3,
                r.ranks,
                scan,
                ratio
            );
        }
    }
    println!();
    for case in cases().into_iter().filter(chosen) {
        println!("{}: {}", case.name, case.what);
    }
    if only.is_empty() || only.iter().any(|o| "B7".contains(o.as_str())) {
        copy_rates();
    }
}

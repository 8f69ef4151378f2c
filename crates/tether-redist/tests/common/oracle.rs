//! Element-by-element reference: who holds every global index, at which
//! local offset, and what every message must contain. Written from the
//! contract (DESIGN 3.8, fields.md 4.1) without the planner's code, and
//! deliberately slow and obvious.

use std::collections::BTreeMap;

use tether_redist::{plan, Dist, Kind, Layout, Order, Side};

/// One holder of a global index: rank, piece (box number; 0 for a grid)
/// and element offset in the rank's local buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    pub rank: usize,
    pub piece: usize,
    pub offset: usize,
}

/// Global linear index (C order) -> coordinates.
pub fn unravel(shape: &[i64], mut linear: usize) -> Vec<i64> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        let n = shape[d] as usize;
        idx[d] = (linear % n) as i64;
        linear /= n;
    }
    idx
}

fn dense_offset(order: Order, extents: &[i64], idx: &[i64]) -> usize {
    let dims: Vec<usize> = match order {
        Order::C => (0..extents.len()).collect(),
        Order::Fortran => (0..extents.len()).rev().collect(),
    };
    let mut off = 0i64;
    for d in dims {
        off = off * extents[d] + idx[d];
    }
    off as usize
}

fn block(n: i64, p: i64, kind: Kind) -> i64 {
    match kind {
        Kind::Block => (n + p - 1) / p,
        Kind::Cyclic => 1,
        Kind::BlockCyclic(b) => b,
        Kind::None => n,
    }
}

/// For every global index in C order, every (rank, piece, offset) that
/// holds it.
pub fn holders(dist: &Dist) -> Vec<Vec<Holder>> {
    let shape = dist.shape();
    let total: usize = shape.iter().map(|&n| n as usize).product();
    let mut out = vec![Vec::new(); total];
    match dist.layout() {
        Layout::Regular { grid, kinds } => {
            let nd = shape.len();
            let b: Vec<i64> = (0..nd)
                .map(|d| block(shape[d], grid[d], kinds[d]))
                .collect();
            let owner = |d: usize, g: i64| (g / b[d]) % grid[d];
            let local = |d: usize, g: i64| (g / (grid[d] * b[d])) * b[d] + g % b[d];
            // Local extent of coordinate c in dimension d, by counting.
            let extent =
                |d: usize, c: i64| (0..shape[d]).filter(|&g| owner(d, g) == c).count() as i64;
            for (linear, slot) in out.iter_mut().enumerate() {
                let idx = unravel(shape, linear);
                let coords: Vec<i64> = (0..nd).map(|d| owner(d, idx[d])).collect();
                let rank = dense_offset(dist.order(), grid, &coords);
                let extents: Vec<i64> = (0..nd).map(|d| extent(d, coords[d])).collect();
                let lidx: Vec<i64> = (0..nd).map(|d| local(d, idx[d])).collect();
                slot.push(Holder {
                    rank,
                    piece: 0,
                    offset: dense_offset(dist.order(), &extents, &lidx),
                });
            }
        }
        Layout::Boxes(ranks) => {
            for (rank, boxes) in ranks.iter().enumerate() {
                let mut base = 0usize;
                for (piece, region) in boxes.iter().enumerate() {
                    for (linear, slot) in out.iter_mut().enumerate() {
                        let idx = unravel(shape, linear);
                        let inside = (0..idx.len()).all(|d| {
                            (region.start[d]..region.start[d] + region.count[d]).contains(&idx[d])
                        });
                        if inside {
                            let rel: Vec<i64> =
                                (0..idx.len()).map(|d| idx[d] - region.start[d]).collect();
                            slot.push(Holder {
                                rank,
                                piece,
                                offset: base + dense_offset(dist.order(), &region.count, &rel),
                            });
                        }
                    }
                    base += region.count.iter().product::<i64>() as usize;
                }
            }
        }
    }
    out
}

/// Local buffer length of every rank, from the holders (a rank's buffer
/// may also have length that nothing maps to only when empty).
pub fn local_lens(dist: &Dist) -> Vec<usize> {
    (0..dist.ranks())
        .map(|r| dist.local_len(r) as usize)
        .collect()
}

/// The canonical message (global linear indices in order) from producer p
/// to consumer q, for every pair that exchanges anything. Inside a piece
/// the order is C order, or Fortran order when `fortran` (both sides store
/// that way).
pub fn messages(
    prod: &[Vec<Holder>],
    cons: &[Vec<Holder>],
    shape: &[i64],
    fortran: bool,
) -> BTreeMap<(usize, usize), Vec<usize>> {
    // Each consumer piece's indices in C order...
    let mut wanted: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
    for (g, hs) in cons.iter().enumerate() {
        for h in hs {
            wanted.entry((h.rank, h.piece)).or_default().push(g);
        }
    }
    // ...then, consumer piece ascending, producer piece ascending.
    let mut out: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
    for ((q, _), gs) in wanted {
        let mut by_producer_piece: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
        for g in gs {
            for h in &prod[g] {
                by_producer_piece
                    .entry((h.rank, h.piece))
                    .or_default()
                    .push(g);
            }
        }
        for ((p, _), mut list) in by_producer_piece {
            if fortran {
                list.sort_by_key(|&g| {
                    let idx = unravel(shape, g);
                    dense_offset(Order::Fortran, shape, &idx)
                });
            }
            out.entry((p, q)).or_default().extend(list);
        }
    }
    out
}

/// Byte `k` of the element at global linear index `g`: never 0, which
/// marks an untouched consumer byte.
pub fn value(g: usize, k: usize) -> u8 {
    let mut z = (g as u64).wrapping_add(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(k as u64 / 8 + 1));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    let byte = (z >> ((k % 8) * 8)) as u8;
    if byte == 0 {
        1
    } else {
        byte
    }
}

/// Runs every producer's pack and every consumer's unpack and compares
/// with the oracle: message contents, peers, element counts, in-place
/// ranges, the consumers' final buffers and their untouched bytes.
pub fn verify(producer: &Dist, consumer: &Dist, es: usize) -> Result<(), String> {
    let prod = holders(producer);
    let cons = holders(consumer);
    let fortran = producer.order() == Order::Fortran && consumer.order() == Order::Fortran;
    let expected = messages(&prod, &cons, producer.shape(), fortran);
    let plen = local_lens(producer);
    let clen = local_lens(consumer);

    let mut locals: Vec<Vec<u8>> = plen.iter().map(|&n| vec![0u8; n * es]).collect();
    for (g, hs) in prod.iter().enumerate() {
        for h in hs {
            for k in 0..es {
                locals[h.rank][h.offset * es + k] = value(g, k);
            }
        }
    }

    let mut sent: BTreeMap<(usize, usize), Vec<u8>> = BTreeMap::new();
    for (p, local) in locals.iter().enumerate() {
        let plan = plan(producer, consumer, Side::Producer, p);
        let mut last = None;
        for peer in plan.peers() {
            let q = peer.peer();
            if last.is_some_and(|l| l >= q) {
                return Err(format!("producer {p}: peers not sorted"));
            }
            last = Some(q);
            let want = expected.get(&(p, q)).ok_or_else(|| {
                format!("producer {p} plans a message to {q} the oracle does not have")
            })?;
            if peer.elements() as usize != want.len() {
                return Err(format!(
                    "producer {p} -> {q}: {} elements, oracle {}",
                    peer.elements(),
                    want.len()
                ));
            }
            let mut out = vec![0u8; want.len() * es];
            peer.pack(local, es, &mut out);
            let bytes: Vec<u8> = want
                .iter()
                .flat_map(|&g| (0..es).map(move |k| value(g, k)))
                .collect();
            if out != bytes {
                return Err(format!(
                    "producer {p} -> {q}: message differs from the oracle's"
                ));
            }
            if let Some(runs) = peer.byte_runs(es) {
                let gathered: Vec<u8> = runs
                    .iter()
                    .flat_map(|&(first, len)| local[first..first + len].iter().copied())
                    .collect();
                if gathered != out {
                    return Err(format!(
                        "producer {p} -> {q}: byte_runs() gather differ from pack"
                    ));
                }
            }
            if let Some((first, count)) = peer.contiguous() {
                let (first, count) = (first as usize, count as usize);
                if count != want.len() || local[first * es..(first + count) * es] != out[..] {
                    return Err(format!("producer {p} -> {q}: contiguous() is wrong"));
                }
            }
            sent.insert((p, q), out);
        }
    }
    let planned: Vec<_> = sent.keys().copied().collect();
    let oracle: Vec<_> = expected.keys().copied().collect();
    if planned != oracle {
        return Err(format!("producer pairs {planned:?}, oracle {oracle:?}"));
    }

    for (q, &len) in clen.iter().enumerate() {
        let plan = plan(producer, consumer, Side::Consumer, q);
        let mut local = vec![0u8; len * es];
        let mut peers = Vec::new();
        for peer in plan.peers() {
            let p = peer.peer();
            peers.push(p);
            let message = sent.get(&(p, q)).ok_or_else(|| {
                format!("consumer {q} expects a message from {p} that is not sent")
            })?;
            if peer.elements() as usize * es != message.len() {
                return Err(format!("consumer {q} <- {p}: element counts disagree"));
            }
            peer.unpack(message, es, &mut local);
            if let Some((first, count)) = peer.contiguous() {
                let (first, count) = (first as usize, count as usize);
                let mut fresh = vec![0u8; len * es];
                peer.unpack(message, es, &mut fresh);
                let mut direct = vec![0u8; len * es];
                direct[first * es..(first + count) * es].copy_from_slice(message);
                if fresh != direct {
                    return Err(format!("consumer {q} <- {p}: contiguous() is wrong"));
                }
            }
        }
        let from_oracle: Vec<usize> = expected.keys().filter(|k| k.1 == q).map(|k| k.0).collect();
        if peers != from_oracle {
            return Err(format!(
                "consumer {q}: peers {peers:?}, oracle {from_oracle:?}"
            ));
        }
        let mut want = vec![0u8; len * es];
        for (g, hs) in cons.iter().enumerate() {
            if prod[g].is_empty() {
                continue;
            }
            for h in hs.iter().filter(|h| h.rank == q) {
                for k in 0..es {
                    want[h.offset * es + k] = value(g, k);
                }
            }
        }
        if local != want {
            let at = local.iter().zip(&want).position(|(a, b)| a != b).unwrap() / es;
            return Err(format!(
                "consumer {q}: local element {at} differs from the oracle's"
            ));
        }
    }
    Ok(())
}

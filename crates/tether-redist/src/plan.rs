//! One rank's plan: its peers and, per peer, the pieces of its local buffer
//! that make up the message, in canonical order.
//!
//! A piece is a product of per-dimension run lists ([`Segment`]). Regular
//! against regular gives one piece per peer whose run lists are shared by
//! every peer with the same coordinate in that dimension, so the plan stores
//! a sum over dimensions, never the product (fields.md 4.2).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::dim::{self, Runs};
use crate::dist::{strides, Dist, Layout, Region};

/// Which side of the field the planning rank is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    Producer,
    Consumer,
}

/// Everything one rank moves for one field, computed once.
#[derive(Debug, Clone)]
pub struct Plan {
    peers: Vec<PeerPlan>,
    work: u64,
    stored_runs: usize,
}

/// The message between this rank and one peer.
#[derive(Debug, Clone)]
pub struct PeerPlan {
    peer: usize,
    elements: u64,
    segments: Vec<Segment>,
    contiguous: Option<(u64, u64)>,
}

/// One piece of a message: the product over dimensions of `dims[d]`'s local
/// indices, at local offset `base + sum(index[d] * strides[d])`, enumerated
/// with the last dimension fastest (logical C order of the global index).
#[derive(Debug, Clone)]
pub(crate) struct Segment {
    pub(crate) base: i64,
    pub(crate) strides: Arc<[i64]>,
    pub(crate) dims: Vec<Arc<Runs>>,
}

impl Segment {
    fn elements(&self) -> u64 {
        self.dims.iter().map(|r| r.elements()).product()
    }
}

impl Plan {
    /// Peers with at least one element, sorted by peer rank.
    pub fn peers(&self) -> &[PeerPlan] {
        &self.peers
    }

    /// Planner loop iterations spent: a machine-independent cost measure.
    pub fn work(&self) -> u64 {
        self.work
    }

    /// Run-list entries stored, shared lists counted once.
    pub fn stored_runs(&self) -> usize {
        self.stored_runs
    }
}

impl PeerPlan {
    /// The other side's rank.
    pub fn peer(&self) -> usize {
        self.peer
    }

    /// Elements in the message.
    pub fn elements(&self) -> u64 {
        self.elements
    }

    /// `(first element, count)` when this side of the message is one
    /// contiguous range of the local buffer, in canonical order: the runtime
    /// can then send or receive in place without packing.
    pub fn contiguous(&self) -> Option<(u64, u64)> {
        self.contiguous
    }

    pub(crate) fn segments(&self) -> &[Segment] {
        &self.segments
    }
}

/// Plans `rank` of `side`. Both descriptors must have the same shape (see
/// [`crate::check`]); panics otherwise, or if `rank` is not a rank of that
/// side. A pure function of its arguments: both sides derive the same
/// message order without talking.
pub fn plan(producer: &Dist, consumer: &Dist, side: Side, rank: usize) -> Plan {
    assert_eq!(
        producer.shape(),
        consumer.shape(),
        "plan() needs equal shapes: call check() first"
    );
    let (mine, remote) = match side {
        Side::Producer => (producer, consumer),
        Side::Consumer => (consumer, producer),
    };
    assert!(
        rank < mine.ranks(),
        "rank {rank} is not one of the {} ranks of this side",
        mine.ranks()
    );
    let mut builder = Builder::default();
    if !mine.shape().contains(&0) {
        match (mine.layout(), remote.layout()) {
            (Layout::Regular { .. }, Layout::Regular { .. }) => {
                regular_regular(mine, remote, rank, &mut builder)
            }
            (Layout::Regular { .. }, Layout::Boxes(theirs)) => {
                regular_boxes(mine, theirs, rank, &mut builder)
            }
            (Layout::Boxes(ours), Layout::Regular { .. }) => {
                boxes_regular(mine, &ours[rank], remote, &mut builder)
            }
            (Layout::Boxes(ours), Layout::Boxes(theirs)) => {
                boxes_boxes(mine, &ours[rank], theirs, side, &mut builder)
            }
        }
    }
    builder.finish()
}

#[derive(Default)]
struct Builder {
    peers: BTreeMap<usize, Vec<Segment>>,
    work: u64,
    stored_runs: usize,
}

impl Builder {
    fn runs(&mut self, runs: Runs) -> Arc<Runs> {
        self.stored_runs += runs.stored();
        Arc::new(runs)
    }

    fn finish(self) -> Plan {
        let peers = self
            .peers
            .into_iter()
            .filter_map(|(peer, segments)| {
                let elements: u64 = segments.iter().map(Segment::elements).sum();
                (elements > 0).then(|| PeerPlan {
                    peer,
                    elements,
                    contiguous: crate::copy::contiguous(&segments),
                    segments,
                })
            })
            .collect();
        Plan {
            peers,
            work: self.work,
            stored_runs: self.stored_runs,
        }
    }
}

/// Per dimension, the remote coordinates met and their runs; the peers are
/// the product of those sets, each peer's piece the product of its runs.
fn regular_regular(mine: &Dist, remote: &Dist, rank: usize, b: &mut Builder) {
    let coords = mine.coords(rank);
    let extents: Vec<i64> = (0..mine.ndims())
        .map(|d| mine.pattern(d).extent(coords[d]))
        .collect();
    if extents.contains(&0) {
        return;
    }
    let strides: Arc<[i64]> = strides(mine.order(), &extents).into();
    let mut per_dim: Vec<Vec<(i64, Arc<Runs>)>> = Vec::with_capacity(mine.ndims());
    for (d, &c) in coords.iter().enumerate() {
        let met = dim::regular_pair(&mine.pattern(d), c, &remote.pattern(d), &mut b.work);
        per_dim.push(met.into_iter().map(|(e, r)| (e, b.runs(r))).collect());
    }
    for_each_product(&per_dim, |choice| {
        let remote_coords: Vec<i64> = choice.iter().map(|(e, _)| *e).collect();
        let segment = Segment {
            base: 0,
            strides: strides.clone(),
            dims: choice.iter().map(|(_, r)| Arc::clone(r)).collect(),
        };
        b.work += 1;
        b.peers
            .entry(remote.rank_of(&remote_coords))
            .or_default()
            .push(segment);
    });
}

/// My regular part against every remote box: per dimension one local run.
fn regular_boxes(mine: &Dist, theirs: &[Vec<Region>], rank: usize, b: &mut Builder) {
    let coords = mine.coords(rank);
    let extents: Vec<i64> = (0..mine.ndims())
        .map(|d| mine.pattern(d).extent(coords[d]))
        .collect();
    if extents.contains(&0) {
        return;
    }
    let strides: Arc<[i64]> = strides(mine.order(), &extents).into();
    for (peer, boxes) in theirs.iter().enumerate() {
        // Canonical order puts the box dist's boxes outermost whichever side
        // it is on, since the regular side is a single piece.
        for region in boxes {
            b.work += 1;
            let dims: Option<Vec<Runs>> = (0..mine.ndims())
                .map(|d| {
                    let lo = region.start[d];
                    dim::regular_vs_interval(&mine.pattern(d), coords[d], lo, lo + region.count[d])
                })
                .collect();
            if let Some(dims) = dims {
                let dims = dims.into_iter().map(|r| b.runs(r)).collect();
                b.peers.entry(peer).or_default().push(Segment {
                    base: 0,
                    strides: strides.clone(),
                    dims,
                });
            }
        }
    }
}

/// Each of my boxes against the remote grid: per dimension the runs of the
/// box's interval per remote coordinate, then the product as for grids.
fn boxes_regular(mine: &Dist, ours: &[Region], remote: &Dist, b: &mut Builder) {
    let mut base = 0i64;
    for region in ours {
        if region.is_empty() {
            continue;
        }
        let strides: Arc<[i64]> = strides(mine.order(), &region.count).into();
        let mut per_dim = Vec::with_capacity(mine.ndims());
        for d in 0..mine.ndims() {
            let lo = region.start[d];
            let met = dim::interval_vs_regular(
                lo,
                lo + region.count[d],
                lo,
                &remote.pattern(d),
                &mut b.work,
            );
            per_dim.push(
                met.into_iter()
                    .map(|(e, r)| (e, b.runs(r)))
                    .collect::<Vec<_>>(),
            );
        }
        for_each_product(&per_dim, |choice| {
            let remote_coords: Vec<i64> = choice.iter().map(|(e, _)| *e).collect();
            b.work += 1;
            b.peers
                .entry(remote.rank_of(&remote_coords))
                .or_default()
                .push(Segment {
                    base,
                    strides: strides.clone(),
                    dims: choice.iter().map(|(_, r)| Arc::clone(r)).collect(),
                });
        });
        base += region.len();
    }
}

/// Boxes on both sides: interval intersection per dimension, consumer box
/// outermost and producer box inside it (the canonical order).
fn boxes_boxes(mine: &Dist, ours: &[Region], theirs: &[Vec<Region>], side: Side, b: &mut Builder) {
    let mut bases = Vec::with_capacity(ours.len());
    let mut base = 0i64;
    for region in ours {
        bases.push(base);
        base += region.len();
    }
    let strides: Vec<Arc<[i64]>> = ours
        .iter()
        .map(|r| strides(mine.order(), &r.count).into())
        .collect();
    for (peer, boxes) in theirs.iter().enumerate() {
        let piece = |m: usize, other: &Region, b: &mut Builder| {
            b.work += 1;
            let own = &ours[m];
            let dims: Option<Vec<Runs>> = (0..mine.ndims())
                .map(|d| {
                    let lo = own.start[d].max(other.start[d]);
                    let hi = (own.start[d] + own.count[d]).min(other.start[d] + other.count[d]);
                    (lo < hi).then(|| Runs::single(lo - own.start[d], hi - lo))
                })
                .collect();
            if let Some(dims) = dims {
                let dims = dims.into_iter().map(|r| b.runs(r)).collect();
                b.peers.entry(peer).or_default().push(Segment {
                    base: bases[m],
                    strides: strides[m].clone(),
                    dims,
                });
            }
        };
        match side {
            Side::Producer => {
                for other in boxes {
                    for m in 0..ours.len() {
                        piece(m, other, b);
                    }
                }
            }
            Side::Consumer => {
                for m in 0..ours.len() {
                    for other in boxes {
                        piece(m, other, b);
                    }
                }
            }
        }
    }
}

/// Calls `f` with every combination of one entry per list, the last list
/// varying fastest.
fn for_each_product<T>(lists: &[Vec<T>], mut f: impl FnMut(&[&T])) {
    if lists.iter().any(Vec::is_empty) {
        return;
    }
    let mut index = vec![0usize; lists.len()];
    let mut choice: Vec<&T> = lists.iter().map(|l| &l[0]).collect();
    loop {
        f(&choice);
        let mut d = lists.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < lists[d].len() {
                choice[d] = &lists[d][index[d]];
                break;
            }
            index[d] = 0;
            choice[d] = &lists[d][0];
        }
    }
}

//! One rank's plan: its peers and, per peer, the pieces of its local buffer
//! that make up the message, in canonical order.
//!
//! A piece is a product of per-dimension run lists ([`Segment`]). Regular
//! against regular gives one piece per peer whose run lists are shared by
//! every peer with the same coordinate in that dimension, so the plan stores
//! a sum over dimensions, never the product (fields.md 4.2). Everything
//! lives in one [`Table`] of flat arrays shared by the peers, so a plan with
//! thousands of peers costs a few allocations, not thousands.

use std::fmt;
use std::sync::Arc;

use crate::dim::{Group, Pattern, RunStore, Runs};
use crate::dist::{storage_dims, strides, Dist, Layout, Order, Region};

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
#[derive(Clone)]
pub struct PeerPlan {
    peer: usize,
    elements: u64,
    /// `(first, count)` of the local range; a count of 0 means none (the
    /// message is never empty). Kept small: a plan can have many peers.
    range: (u64, u64),
    first: u32,
    end: u32,
    table: Arc<Table>,
}

impl fmt::Debug for PeerPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerPlan")
            .field("peer", &self.peer)
            .field("elements", &self.elements)
            .field("contiguous", &self.contiguous())
            .field("pieces", &self.pieces())
            .finish()
    }
}

/// The flat arrays behind a plan's pieces.
#[derive(Debug, Default)]
pub(crate) struct Table {
    pub(crate) ndims: usize,
    pub(crate) groups: Vec<Group>,
    pub(crate) runs: Vec<Runs>,
    pub(crate) segments: Vec<SegRec>,
    /// `ndims` indices into `runs` per segment.
    pub(crate) dims: Vec<u32>,
    /// `ndims` element strides per distinct local layout.
    pub(crate) strides: Vec<i64>,
}

/// One piece of a message: the product over dimensions of its runs' local
/// indices, at local offset `base + sum(index[d] * stride[d])`, enumerated
/// with the last dimension fastest (logical C order of the global index).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SegRec {
    base: i64,
    strides: u32,
    dims: u32,
}

/// A [`SegRec`] with the table it indexes.
#[derive(Clone, Copy)]
pub(crate) struct Segment<'a> {
    pub(crate) table: &'a Table,
    rec: SegRec,
}

impl<'a> Segment<'a> {
    pub(crate) fn base(&self) -> i64 {
        self.rec.base
    }

    pub(crate) fn runs(&self, d: usize) -> &'a Runs {
        &self.table.runs[self.table.dims[self.rec.dims as usize + d] as usize]
    }

    pub(crate) fn stride(&self, d: usize) -> i64 {
        self.table.strides[self.rec.strides as usize + d]
    }

    fn elements(&self) -> u64 {
        (0..self.table.ndims)
            .map(|d| self.runs(d).elements())
            .product()
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
        (self.range.1 > 0).then_some(self.range)
    }

    /// Pieces the message is made of: one per (consumer box, producer box)
    /// pair that meets, one for two grids.
    pub fn pieces(&self) -> usize {
        (self.end - self.first) as usize
    }

    pub(crate) fn segments(&self) -> impl Iterator<Item = Segment<'_>> {
        segments(&self.table, self.first as usize, self.end as usize)
    }
}

fn segments(table: &Table, first: usize, end: usize) -> impl Iterator<Item = Segment<'_>> {
    table.segments[first..end]
        .iter()
        .map(move |&rec| Segment { table, rec })
}

/// Plans `rank` of `side`. Both descriptors must have the same shape (see
/// [`crate::check`]); panics otherwise, or if `rank` is not a rank of that
/// side. A pure function of its arguments: both sides derive the same
/// message order without talking.
pub fn plan(producer: &Dist, consumer: &Dist, side: Side, rank: usize) -> Plan {
    if producer.order() == Order::Fortran && consumer.order() == Order::Fortran {
        // Both sides store first-index-fastest: plan the mirrored problem
        // in C order, whose message order (the reversed dimensions in C
        // order) is theirs in Fortran order, so that neither transposes.
        // Both sides see both orders, so they agree on it.
        return plan(&producer.mirrored(), &consumer.mirrored(), side, rank);
    }
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
    let mut b = Builder::new(mine.ndims());
    if !mine.shape().contains(&0) {
        match (mine.layout(), remote.layout()) {
            (Layout::Regular { .. }, Layout::Regular { .. }) => {
                regular_regular(mine, remote, rank, &mut b)
            }
            (Layout::Regular { .. }, Layout::Boxes(theirs)) => {
                regular_boxes(mine, theirs, rank, &mut b)
            }
            (Layout::Boxes(ours), Layout::Regular { .. }) => {
                boxes_regular(mine, &ours[rank], remote, &mut b)
            }
            (Layout::Boxes(ours), Layout::Boxes(theirs)) => {
                boxes_boxes(mine, &ours[rank], theirs, side, &mut b)
            }
        }
    }
    b.finish(remote.ranks())
}

struct Builder {
    ndims: usize,
    store: RunStore,
    runs: Vec<Runs>,
    dims: Vec<u32>,
    strides: Vec<i64>,
    /// Segments and, beside them, their peers, in generation order.
    segments: Vec<SegRec>,
    peers: Vec<usize>,
    stored_runs: usize,
}

impl Builder {
    fn new(ndims: usize) -> Builder {
        Builder {
            ndims,
            store: RunStore::default(),
            runs: Vec::new(),
            dims: Vec::new(),
            strides: Vec::new(),
            segments: Vec::new(),
            peers: Vec::new(),
            stored_runs: 0,
        }
    }

    fn add_runs(&mut self, runs: Runs) -> u32 {
        self.stored_runs += runs.stored();
        self.runs.push(runs);
        (self.runs.len() - 1) as u32
    }

    fn add_strides(&mut self, order: Order, extents: &[i64]) -> u32 {
        let at = self.strides.len() as u32;
        self.strides.extend(strides(order, extents));
        at
    }

    fn reserve(&mut self, segments: usize) {
        self.segments.reserve(segments);
        self.peers.reserve(segments);
        self.dims.reserve(segments * self.ndims);
    }

    /// Adds one piece of the message to `peer`; each is a step of work.
    fn add_segment(&mut self, peer: usize, base: i64, strides: u32, runs: &[u32]) {
        self.store.work += 1;
        let dims = self.dims.len() as u32;
        for &r in runs {
            self.dims.push(r);
        }
        self.segments.push(SegRec {
            base,
            strides,
            dims,
        });
        self.peers.push(peer);
    }

    fn finish(mut self, remote_ranks: usize) -> Plan {
        // The table indexes with u32 to keep a piece at 16 bytes.
        for len in [
            self.segments.len(),
            self.runs.len(),
            self.store.groups.len(),
        ] {
            assert!(
                u32::try_from(len).is_ok(),
                "more than 2^32 entries in one plan"
            );
        }
        if !self.peers.windows(2).all(|w| w[0] <= w[1]) {
            let order = order_by_peer(&self.peers, remote_ranks);
            self.segments = order.iter().map(|&i| self.segments[i]).collect();
            self.peers = order.iter().map(|&i| self.peers[i]).collect();
        }
        let table = Arc::new(Table {
            ndims: self.ndims,
            groups: self.store.groups,
            runs: self.runs,
            segments: self.segments,
            dims: self.dims,
            strides: self.strides,
        });
        let mut peers = Vec::with_capacity(self.peers.len());
        let mut first = 0;
        for (i, &peer) in self.peers.iter().enumerate() {
            if self.peers.get(i + 1) == Some(&peer) {
                continue;
            }
            // Saturating: only overlapping producer boxes, which
            // check_disjoint refuses, could pass u64.
            let elements = segments(&table, first, i + 1)
                .fold(0u64, |sum, s| sum.saturating_add(s.elements()));
            if elements > 0 {
                let range = crate::copy::contiguous(segments(&table, first, i + 1));
                peers.push(PeerPlan {
                    peer,
                    elements,
                    range: range.unwrap_or((0, 0)),
                    first: first as u32,
                    end: (i + 1) as u32,
                    table: Arc::clone(&table),
                });
            }
            first = i + 1;
        }
        Plan {
            peers,
            work: self.store.work,
            stored_runs: self.stored_runs,
        }
    }
}

/// The segment indices in a stable order by peer: counting when the peers
/// are few against the segments, else the library's merge sort.
fn order_by_peer(peers: &[usize], remote_ranks: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..peers.len()).collect();
    if remote_ranks > 2 * peers.len() + 1024 {
        order.sort_by_key(|&i| peers[i]);
        return order;
    }
    let mut next = vec![0usize; remote_ranks + 1];
    for &peer in peers {
        next[peer + 1] += 1;
    }
    for i in 1..next.len() {
        next[i] += next[i - 1];
    }
    for (i, &peer) in peers.iter().enumerate() {
        order[next[peer]] = i;
        next[peer] += 1;
    }
    order
}

/// Local extents of a regular rank, or None when it owns nothing.
fn regular_extents(mine: &Dist, coords: &[i64]) -> Option<Vec<i64>> {
    let extents: Vec<i64> = (0..mine.ndims())
        .map(|d| mine.pattern(d).extent(coords[d]))
        .collect();
    (!extents.contains(&0)).then_some(extents)
}

/// Per dimension, the remote coordinates met and their runs; the peers are
/// the product of those sets, each peer's piece the product of its runs.
fn regular_regular(mine: &Dist, remote: &Dist, rank: usize, b: &mut Builder) {
    let coords = mine.coords(rank);
    let Some(extents) = regular_extents(mine, &coords) else {
        return;
    };
    let strides = b.add_strides(mine.order(), &extents);
    let weights = remote.rank_weights();
    let mut met = Vec::new();
    let mut per_dim: Vec<Vec<(usize, u32)>> = Vec::with_capacity(mine.ndims());
    for (d, &c) in coords.iter().enumerate() {
        met.clear();
        b.store
            .regular_pair(&mine.pattern(d), c, &remote.pattern(d), &mut met);
        let list = met
            .iter()
            .map(|&(e, r)| (e as usize * weights[d], b.add_runs(r)))
            .collect();
        per_dim.push(list);
    }
    b.reserve(per_dim.iter().map(Vec::len).product());
    // Varying the remote side's fastest dimension fastest yields the peers
    // in increasing rank order, so nothing needs sorting.
    let mut runs = Vec::with_capacity(mine.ndims());
    for_each_product(&per_dim, remote.order(), |choice| {
        runs.clear();
        runs.extend(choice.iter().map(|&&(_, r)| r));
        let peer = choice.iter().map(|&&(w, _)| w).sum();
        b.add_segment(peer, 0, strides, &runs);
    });
}

/// My regular part against every remote box: per dimension one local run.
fn regular_boxes(mine: &Dist, theirs: &[Vec<Region>], rank: usize, b: &mut Builder) {
    let coords = mine.coords(rank);
    let Some(extents) = regular_extents(mine, &coords) else {
        return;
    };
    let strides = b.add_strides(mine.order(), &extents);
    let patterns: Vec<Pattern> = (0..mine.ndims()).map(|d| mine.pattern(d)).collect();
    // At most one piece a remote box: reserving that much touches no
    // memory until used, and saves the copies of growing by doubling.
    let boxes: usize = theirs.iter().map(Vec::len).sum();
    b.reserve(boxes);
    b.runs.reserve(boxes * mine.ndims());
    b.store.groups.reserve(boxes * mine.ndims());
    let mut ranges = Vec::with_capacity(mine.ndims());
    let mut runs = Vec::with_capacity(mine.ndims());
    for (peer, boxes) in theirs.iter().enumerate() {
        // Canonical order puts the box dist's boxes outermost whichever side
        // it is on, since the regular side is a single piece.
        for region in boxes {
            b.store.work += 1;
            ranges.clear();
            for (d, pattern) in patterns.iter().enumerate() {
                let lo = region.start[d];
                match pattern.owned_range(coords[d], lo, lo + region.count[d]) {
                    Some(range) => ranges.push(range),
                    None => break,
                }
            }
            if ranges.len() == mine.ndims() {
                runs.clear();
                for &(start, len) in &ranges {
                    let r = b.store.single(start, len);
                    runs.push(b.add_runs(r));
                }
                b.add_segment(peer, 0, strides, &runs);
            }
        }
    }
}

/// Each of my boxes against the remote grid: per dimension the runs of the
/// box's interval per remote coordinate, then the product as for grids.
fn boxes_regular(mine: &Dist, ours: &[Region], remote: &Dist, b: &mut Builder) {
    let mut base = 0i64;
    let weights = remote.rank_weights();
    let (mut met, mut runs) = (Vec::new(), Vec::new());
    for region in ours {
        if region.is_empty() {
            continue;
        }
        let strides = b.add_strides(mine.order(), &region.count);
        let mut per_dim: Vec<Vec<(usize, u32)>> = Vec::with_capacity(mine.ndims());
        for (d, &w) in weights.iter().enumerate() {
            let lo = region.start[d];
            met.clear();
            b.store
                .interval_vs_regular(lo, lo + region.count[d], lo, &remote.pattern(d), &mut met);
            let list = met
                .iter()
                .map(|&(e, r)| (e as usize * w, b.add_runs(r)))
                .collect();
            per_dim.push(list);
        }
        b.reserve(per_dim.iter().map(Vec::len).product());
        for_each_product(&per_dim, remote.order(), |choice| {
            runs.clear();
            runs.extend(choice.iter().map(|&&(_, r)| r));
            let peer = choice.iter().map(|&&(w, _)| w).sum();
            b.add_segment(peer, base, strides, &runs);
        });
        base += region.len();
    }
}

/// Boxes on both sides: interval intersection per dimension, consumer box
/// outermost and producer box inside it (the canonical order).
fn boxes_boxes(mine: &Dist, ours: &[Region], theirs: &[Vec<Region>], side: Side, b: &mut Builder) {
    let mut bases = Vec::with_capacity(ours.len());
    let mut strides = Vec::with_capacity(ours.len());
    let mut base = 0i64;
    for region in ours {
        bases.push(base);
        strides.push(b.add_strides(mine.order(), &region.count));
        base += region.len();
    }
    let mut ranges = Vec::with_capacity(mine.ndims());
    let mut runs = Vec::with_capacity(mine.ndims());
    let mut piece = |peer: usize, m: usize, other: &Region, b: &mut Builder| {
        b.store.work += 1;
        let own = &ours[m];
        ranges.clear();
        for d in 0..mine.ndims() {
            let lo = own.start[d].max(other.start[d]);
            let hi = (own.start[d] + own.count[d]).min(other.start[d] + other.count[d]);
            if lo >= hi {
                return;
            }
            ranges.push((lo - own.start[d], hi - lo));
        }
        runs.clear();
        for &(start, len) in &ranges {
            let r = b.store.single(start, len);
            runs.push(b.add_runs(r));
        }
        b.add_segment(peer, bases[m], strides[m], &runs);
    };
    for (peer, boxes) in theirs.iter().enumerate() {
        match side {
            Side::Producer => {
                for other in boxes {
                    for m in 0..ours.len() {
                        piece(peer, m, other, b);
                    }
                }
            }
            Side::Consumer => {
                for m in 0..ours.len() {
                    for other in boxes {
                        piece(peer, m, other, b);
                    }
                }
            }
        }
    }
}

/// Calls `f` with every combination of one entry per list, the fastest
/// dimension of `order` varying fastest.
fn for_each_product<T>(lists: &[Vec<T>], order: Order, mut f: impl FnMut(&[&T])) {
    if lists.iter().any(Vec::is_empty) {
        return;
    }
    let fastest_first: Vec<usize> = storage_dims(order, lists.len()).collect();
    let mut index = vec![0usize; lists.len()];
    let mut choice: Vec<&T> = lists.iter().map(|l| &l[0]).collect();
    loop {
        f(&choice);
        let mut carried = true;
        for &d in &fastest_first {
            index[d] += 1;
            if index[d] < lists[d].len() {
                choice[d] = &lists[d][index[d]];
                carried = false;
                break;
            }
            index[d] = 0;
            choice[d] = &lists[d][0];
        }
        if carried {
            return;
        }
    }
}

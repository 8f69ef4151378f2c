//! One dimension: which of my local indices meet which remote coordinate.
//!
//! Everything here works on a single axis. A regular pattern repeats with
//! period `P*B`; two of them repeat together with `L = lcm(P*B, Q*B')`, so
//! the runs of one period plus a repeat count and a local shift describe the
//! whole axis however long it is (fields.md 4.3). Inside a block that spans
//! several periods of the other pattern the same argument applies again,
//! which is why a stored entry is an arithmetic progression of runs
//! ([`Group`]) rather than a single run.
//!
//! Indices and local offsets fit an `i64` (validation bounds the shape), so
//! the walks use `i64`; only products that can pass the axis, `P*B` and the
//! joint period, are formed in `i128` or checked.

use crate::dist::Kind;

/// One dimension of a regular distribution: extent `n` dealt in blocks of
/// `b` over `p` coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pattern {
    n: i64,
    p: i64,
    b: i64,
    /// The period `p*b`, when it fits an `i64`; when it does not, it is
    /// longer than the axis and coordinate 0 alone owns anything.
    a: Option<i64>,
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
            n,
            p,
            b,
            a: p.checked_mul(b),
        }
    }

    fn period(&self) -> i128 {
        i128::from(self.p) * i128::from(self.b)
    }

    /// How many indices below `x` (in `0..=n`) coordinate `c` owns, which
    /// is also the local index of its first index at or above `x`.
    fn owned_before(&self, c: i64, x: i64) -> i64 {
        match self.a {
            // `c*b < a` and `x % a < a`, so nothing here overflows.
            Some(a) => (x / a) * self.b + (x % a - c * self.b).clamp(0, self.b),
            None => (i128::from(x) - i128::from(c) * i128::from(self.b))
                .clamp(0, i128::from(self.b)) as i64,
        }
    }

    /// `(first local index, count)` of what coordinate `c` owns in
    /// `[lo, hi)`: one run, since its blocks are consecutive locally.
    pub(crate) fn owned_range(&self, c: i64, lo: i64, hi: i64) -> Option<(i64, i64)> {
        let first = self.owned_before(c, lo);
        let len = self.owned_before(c, hi) - first;
        (len > 0).then_some((first, len))
    }

    /// Local extent of coordinate `c`.
    pub(crate) fn extent(&self, c: i64) -> i64 {
        self.owned_before(c, self.n)
    }

    /// The coordinate owning global index `g`.
    pub(crate) fn owner(&self, g: i64) -> i64 {
        (g / self.b) % self.p
    }
}

/// `count` runs of `len` indices starting at `start + i*stride`. A plain run
/// has `count == 1`; a group always has `stride > len`, so its runs are
/// disjoint, increasing and not contiguous with each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Group {
    pub(crate) start: i64,
    pub(crate) len: i64,
    pub(crate) count: i64,
    pub(crate) stride: i64,
}

impl Group {
    fn run(start: i64, len: i64) -> Group {
        Group {
            start,
            len,
            count: 1,
            stride: len,
        }
    }
}

/// Appends `g` to the list `list[from..]`, kept in increasing order,
/// merging it into the last entry where the two describe one run or one
/// progression: this is what turns identical distributions into one run
/// and NONE dimensions into whole rows.
fn push(list: &mut Vec<Group>, from: usize, g: Group) {
    if g.len == 0 || g.count == 0 {
        return;
    }
    let g = if g.count == 1 || g.stride == g.len {
        Group::run(g.start, g.len * g.count)
    } else {
        g
    };
    if list.len() > from {
        let last = list.last_mut().expect("non-empty");
        if g.count == 1 && last.count == 1 && last.start + last.len == g.start {
            last.len += g.len;
            last.stride = last.len;
            return;
        }
        if g.len == last.len {
            // Runs of one length at one spacing: extend a progression, or
            // start one (the two runs do not touch, so the stride > len).
            let next = last.start + last.count * last.stride;
            if last.count > 1 && g.start == next && (g.count == 1 || g.stride == last.stride) {
                last.count += g.count;
                return;
            }
            if last.count == 1 && g.count == 1 {
                last.stride = g.start - last.start;
                last.count = 2;
                return;
            }
            if last.count == 1 && last.start + g.stride == g.start {
                *last = Group {
                    start: last.start,
                    count: g.count + 1,
                    ..g
                };
                return;
            }
        }
    }
    list.push(g);
}

/// A slice of [`RunStore::groups`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Span {
    start: u32,
    len: u32,
}

impl Span {
    fn slice(self, groups: &[Group]) -> &[Group] {
        &groups[self.start as usize..(self.start + self.len) as usize]
    }
}

/// The runs of my local indices that one remote coordinate meets along one
/// dimension, in increasing global order: `period` repeated `repeats` times,
/// shifted by `shift` local indices each time, then `tail`. The groups live
/// in a [`RunStore`], so a plan with thousands of these allocates once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Runs {
    period: Span,
    repeats: i64,
    shift: i64,
    tail: Span,
    elements: u64,
}

impl Runs {
    /// Entries stored (what the plan's memory grows with).
    pub(crate) fn stored(&self) -> usize {
        (self.period.len + self.tail.len) as usize
    }

    /// Indices covered.
    pub(crate) fn elements(&self) -> u64 {
        self.elements
    }

    /// `(start, len)` when the indices form one contiguous range. Merging in
    /// [`push`] makes this exact: two entries of one list never touch, and
    /// a repeated period always has a gap.
    pub(crate) fn contiguous(&self, groups: &[Group]) -> Option<(i64, i64)> {
        if self.period.len != 0 || self.tail.len != 1 {
            return None;
        }
        let g = groups[self.tail.start as usize];
        (g.count == 1).then_some((g.start, g.len))
    }

    /// The runs one by one, computed as they are needed.
    pub(crate) fn iter<'a>(&self, groups: &'a [Group]) -> RunIter<'a> {
        RunIter {
            period: self.period.slice(groups),
            tail: self.tail.slice(groups),
            repeats: self.repeats,
            shift: self.shift,
            rep: 0,
            group: 0,
            k: 0,
            in_tail: self.repeats == 0,
        }
    }
}

/// Iterator over the `(start, len)` runs of a [`Runs`].
pub(crate) struct RunIter<'a> {
    period: &'a [Group],
    tail: &'a [Group],
    repeats: i64,
    shift: i64,
    rep: i64,
    group: usize,
    k: i64,
    in_tail: bool,
}

impl Iterator for RunIter<'_> {
    type Item = (i64, i64);

    fn next(&mut self) -> Option<(i64, i64)> {
        loop {
            let (list, base) = if self.in_tail {
                (self.tail, 0)
            } else {
                (self.period, self.rep * self.shift)
            };
            let Some(g) = list.get(self.group) else {
                if self.in_tail {
                    return None;
                }
                self.rep += 1;
                self.in_tail = self.rep == self.repeats;
                self.group = 0;
                continue;
            };
            if self.k == g.count {
                self.group += 1;
                self.k = 0;
                continue;
            }
            let start = base + g.start + self.k * g.stride;
            self.k += 1;
            return Some((start, g.len));
        }
    }
}

/// Owns the groups of every [`Runs`] of a plan, the scratch lists the walks
/// fill, and the count of loop iterations spent.
#[derive(Debug, Default)]
pub(crate) struct RunStore {
    pub(crate) groups: Vec<Group>,
    pub(crate) work: u64,
    period: Vec<(i64, Group)>,
    tail: Vec<(i64, Group)>,
    sorted: Vec<(i64, Group)>,
    counts: Vec<usize>,
}

impl RunStore {
    /// One run of `len` indices from `start`.
    pub(crate) fn single(&mut self, start: i64, len: i64) -> Runs {
        let at = self.groups.len();
        self.groups.push(Group::run(start, len));
        Runs {
            period: Span::default(),
            repeats: 0,
            shift: 0,
            tail: Span {
                start: at as u32,
                len: 1,
            },
            elements: len as u64,
        }
    }

    /// Regular against regular: per remote coordinate met (ascending), the
    /// runs of my coordinate `c`'s local indices, as one period plus
    /// repeats plus tail.
    pub(crate) fn regular_pair(
        &mut self,
        mine: &Pattern,
        c: i64,
        remote: &Pattern,
        out: &mut Vec<(i64, Runs)>,
    ) {
        let n = mine.n;
        if n == 0 || mine.extent(c) == 0 {
            return;
        }
        let (a, a2) = (mine.period(), remote.period());
        let mut period = std::mem::take(&mut self.period);
        let mut tail = std::mem::take(&mut self.tail);
        period.clear();
        tail.clear();
        let lcm = (a / gcd(a, a2)).checked_mul(a2);
        let (repeats, shift) = match lcm.filter(|&l| l < i128::from(n)) {
            Some(l) => {
                // Below n, so an i64.
                let l = l as i64;
                let repeats = n / l;
                sweep(mine, c, remote, 0, l, &mut period, &mut self.work);
                sweep(mine, c, remote, repeats * l, n, &mut tail, &mut self.work);
                (repeats, l / mine.p)
            }
            None => {
                sweep(mine, c, remote, 0, n, &mut tail, &mut self.work);
                (0, 0)
            }
        };
        self.by_coordinate(&mut period, remote.p);
        self.by_coordinate(&mut tail, remote.p);
        let (mut p, mut t) = (&period[..], &tail[..]);
        while let Some(e) = match (p.first(), t.first()) {
            (Some(x), Some(y)) => Some(x.0.min(y.0)),
            (Some(x), None) => Some(x.0),
            (None, Some(y)) => Some(y.0),
            (None, None) => None,
        } {
            let np = p.iter().take_while(|x| x.0 == e).count();
            let nt = t.iter().take_while(|x| x.0 == e).count();
            let runs = self.periodic(&p[..np], repeats, shift, &t[..nt]);
            if runs.elements > 0 {
                out.push((e, runs));
            }
            (p, t) = (&p[np..], &t[nt..]);
        }
        self.period = period;
        self.tail = tail;
    }

    /// Orders `items` by remote coordinate, each coordinate's entries kept
    /// in the order they came (global order, which is also local order).
    fn by_coordinate(&mut self, items: &mut Vec<(i64, Group)>, coordinates: i64) {
        if coordinates as usize > 4 * items.len() {
            // Few entries for many coordinates: sorting by (coordinate,
            // local start) is cheaper than counting, and keeps the order.
            items.sort_unstable_by_key(|&(e, g)| (e, g.start));
            return;
        }
        let counts = &mut self.counts;
        counts.clear();
        counts.resize(coordinates as usize + 1, 0);
        for &(e, _) in items.iter() {
            counts[e as usize + 1] += 1;
        }
        for i in 1..counts.len() {
            counts[i] += counts[i - 1];
        }
        let sorted = &mut self.sorted;
        sorted.clear();
        sorted.resize(items.len(), (0, Group::run(0, 0)));
        for &item in items.iter() {
            sorted[counts[item.0 as usize]] = item;
            counts[item.0 as usize] += 1;
        }
        std::mem::swap(items, sorted);
    }

    /// Stores one coordinate's period and tail, without the repeat where it
    /// is not needed: one period is just a list, and a period that is one
    /// run is one progression.
    fn periodic(
        &mut self,
        period: &[(i64, Group)],
        repeats: i64,
        shift: i64,
        tail: &[(i64, Group)],
    ) -> Runs {
        let at = self.groups.len();
        let mut elements = 0u64;
        for &(_, g) in period {
            push(&mut self.groups, at, g);
        }
        let in_period = self.groups.len() - at;
        for g in &self.groups[at..] {
            elements += (g.len * g.count) as u64;
        }
        elements *= repeats as u64;
        let mut runs = Runs {
            period: Span {
                start: at as u32,
                len: in_period as u32,
            },
            repeats,
            shift,
            tail: Span::default(),
            elements,
        };
        let flat_from = match &self.groups[at..] {
            [] => Some(at),
            _ if repeats == 1 => Some(at),
            [g] if g.count == 1 => {
                let g = *g;
                self.groups.truncate(at);
                push(
                    &mut self.groups,
                    at,
                    Group {
                        start: g.start,
                        len: g.len,
                        count: repeats,
                        stride: shift,
                    },
                );
                Some(at)
            }
            _ => None,
        };
        let from = flat_from.unwrap_or(self.groups.len());
        for &(_, g) in tail {
            runs.elements += (g.len * g.count) as u64;
            push(&mut self.groups, from, g);
        }
        if flat_from.is_some() {
            runs.period = Span::default();
            runs.repeats = 0;
            runs.shift = 0;
        }
        runs.tail = Span {
            start: from as u32,
            len: (self.groups.len() - from) as u32,
        };
        runs
    }

    /// My interval `[lo, hi)` (local index 0 at `origin`) against a regular
    /// remote pattern: per remote coordinate met (ascending), the local runs.
    pub(crate) fn interval_vs_regular(
        &mut self,
        lo: i64,
        hi: i64,
        origin: i64,
        remote: &Pattern,
        out: &mut Vec<(i64, Runs)>,
    ) {
        let mut tail = std::mem::take(&mut self.tail);
        tail.clear();
        split(lo, hi, lo - origin, remote, &mut tail, &mut self.work);
        self.by_coordinate(&mut tail, remote.p);
        for list in tail.chunk_by(|x, y| x.0 == y.0) {
            let runs = self.periodic(&[], 0, 0, list);
            if runs.elements > 0 {
                out.push((list[0].0, runs));
            }
        }
        self.tail = tail;
    }
}

/// Splits `[gs, ge)`, whose local indices are `ls ..` in order, by the
/// blocks of `remote`. A stretch longer than a whole remote period gives
/// one progression per remote coordinate instead of one run per block, so
/// the cost is O(min(blocks met, remote coordinates)).
fn split(gs: i64, ge: i64, ls: i64, remote: &Pattern, out: &mut Vec<(i64, Group)>, work: &mut u64) {
    let (q, b) = (remote.p, remote.b);
    let walk = |from: i64, to: i64, out: &mut Vec<(i64, Group)>, work: &mut u64| {
        if from >= to {
            return;
        }
        let first = from / b;
        let mut e = first % q;
        for j in first..=(to - 1) / b {
            let rs = from.max(j * b);
            let re = to.min((j + 1).saturating_mul(b));
            *work += 1;
            out.push((e, Group::run(ls + (rs - gs), re - rs)));
            e = if e + 1 == q { 0 } else { e + 1 };
        }
    };
    let a = match remote.a {
        Some(a) if (ge - gs) / a >= 3 => a,
        _ => {
            walk(gs, ge, out, work);
            return;
        }
    };
    // At least two whole remote periods lie inside.
    let first_full = (gs + a - 1) / a * a;
    let periods = (ge - first_full) / a;
    walk(gs, first_full, out, work);
    for e in 0..q {
        *work += 1;
        let group = Group {
            start: ls + (first_full - gs) + e * b,
            len: b,
            count: periods,
            stride: a,
        };
        out.push((e, group));
    }
    walk(first_full + periods * a, ge, out, work);
}

/// Runs of coordinate `c` of `mine` within `[lo, hi)`, where `lo` is a
/// multiple of both patterns' periods, tagged with the remote coordinate.
fn sweep(
    mine: &Pattern,
    c: i64,
    remote: &Pattern,
    lo: i64,
    hi: i64,
    out: &mut Vec<(i64, Group)>,
    work: &mut u64,
) {
    match mine.a {
        Some(a) if remote.b > a => {
            // Remote blocks longer than my period: each one meets my
            // indices in a single local run (my blocks are consecutive
            // locally), so walk the remote blocks and count what I own in
            // each.
            let rb = remote.b;
            let first = lo / rb;
            let mut e = first % remote.p;
            for j in first..hi / rb + i64::from(hi % rb != 0) {
                let rs = lo.max(j * rb);
                let re = hi.min((j + 1).saturating_mul(rb));
                let start = mine.owned_before(c, rs);
                let len = mine.owned_before(c, re) - start;
                *work += 1;
                if len > 0 {
                    out.push((e, Group::run(start, len)));
                }
                e = if e + 1 == remote.p { 0 } else { e + 1 };
            }
        }
        _ => {
            // Without an i64 period the period is longer than the axis:
            // each coordinate has at most block 0, and `lo` is 0.
            let mut k = mine.a.map_or(0, |a| lo / a);
            loop {
                let gs = (i128::from(k) * i128::from(mine.p) + i128::from(c)) * i128::from(mine.b);
                if gs >= i128::from(hi) {
                    break;
                }
                // Below hi, so an i64.
                let gs = gs as i64;
                *work += 1;
                split(
                    gs,
                    hi.min(gs.saturating_add(mine.b)),
                    k * mine.b,
                    remote,
                    out,
                    work,
                );
                k += 1;
            }
        }
    }
}

fn gcd(mut a: i128, mut b: i128) -> i128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(store: &RunStore, runs: &Runs) -> Vec<i64> {
        runs.iter(&store.groups)
            .flat_map(|(s, l)| s..s + l)
            .collect()
    }

    fn find(store: &RunStore, got: &[(i64, Runs)], e: i64) -> Vec<i64> {
        got.iter()
            .find(|(x, _)| *x == e)
            .map(|(_, r)| expand(store, r))
            .unwrap_or_default()
    }

    /// Element by element: local indices of `c` whose global index the
    /// remote coordinate `e` owns, in global order.
    fn brute(mine: &Pattern, c: i64, remote: &Pattern, e: i64) -> Vec<i64> {
        let n = mine.n;
        let mut out = Vec::new();
        let mut local = 0;
        for g in 0..n {
            if mine.owner(g) == c {
                if remote.owner(g) == e {
                    out.push(local);
                }
                local += 1;
            }
        }
        out
    }

    #[test]
    fn block_is_ceil() {
        let p = Pattern::new(9, 4, Kind::Block);
        let extents: Vec<i64> = (0..4).map(|c| p.extent(c)).collect();
        assert_eq!(extents, [3, 3, 3, 0]);
    }

    #[test]
    fn pairs_match_brute_force() {
        let kinds = [
            Kind::Block,
            Kind::Cyclic,
            Kind::BlockCyclic(2),
            Kind::BlockCyclic(3),
            Kind::BlockCyclic(7),
            Kind::BlockCyclic(40),
        ];
        let mut store = RunStore::default();
        let mut got = Vec::new();
        for n in 0..40 {
            for p in 1..6 {
                for q in 1..6 {
                    for &k1 in &kinds {
                        for &k2 in &kinds {
                            let mine = Pattern::new(n, p, k1);
                            let remote = Pattern::new(n, q, k2);
                            for c in 0..p {
                                got.clear();
                                store.regular_pair(&mine, c, &remote, &mut got);
                                let total: u64 = got.iter().map(|(_, r)| r.elements()).sum();
                                assert_eq!(total, mine.extent(c) as u64);
                                for e in 0..q {
                                    assert_eq!(
                                        find(&store, &got, e),
                                        brute(&mine, c, &remote, e),
                                        "n={n} p={p} q={q} {k1:?} {k2:?} c={c} e={e}"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn huge_axis_plans_with_few_entries() {
        let n = 1i64 << 40;
        let mine = Pattern::new(n, 1000, Kind::Cyclic);
        let remote = Pattern::new(n, 7, Kind::BlockCyclic(3));
        let mut store = RunStore::default();
        let mut got = Vec::new();
        store.regular_pair(&mine, 3, &remote, &mut got);
        let stored: usize = got.iter().map(|(_, r)| r.stored()).sum();
        let elements: u64 = got.iter().map(|(_, r)| r.elements()).sum();
        assert_eq!(elements, mine.extent(3) as u64);
        assert!(stored <= 40, "{stored} entries");
        assert!(store.work < 100, "{} steps", store.work);
    }

    #[test]
    fn identical_patterns_give_one_run() {
        let p = Pattern::new(1000, 7, Kind::BlockCyclic(3));
        let mut store = RunStore::default();
        let mut got = Vec::new();
        store.regular_pair(&p, 2, &p, &mut got);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1.contiguous(&store.groups), Some((0, p.extent(2))));
    }

    #[test]
    fn intervals_match_brute_force() {
        let mut store = RunStore::default();
        let mut got = Vec::new();
        for n in 0..30i64 {
            for q in 1..5 {
                for kind in [Kind::Cyclic, Kind::BlockCyclic(2), Kind::BlockCyclic(5)] {
                    let pattern = Pattern::new(n, q, kind);
                    for lo in 0..=n {
                        for hi in lo..=n {
                            got.clear();
                            store.interval_vs_regular(lo, hi, lo, &pattern, &mut got);
                            for e in 0..q {
                                let want: Vec<i64> = (lo..hi)
                                    .filter(|&g| pattern.owner(g) == e)
                                    .map(|g| g - lo)
                                    .collect();
                                assert_eq!(find(&store, &got, e), want);
                            }
                            for c in 0..q {
                                let have: Vec<i64> = pattern
                                    .owned_range(c, lo, hi)
                                    .map(|(s, l)| (s..s + l).collect())
                                    .unwrap_or_default();
                                assert_eq!(have, brute_interval(&pattern, c, lo, hi));
                            }
                        }
                    }
                }
            }
        }
    }

    fn brute_interval(mine: &Pattern, c: i64, lo: i64, hi: i64) -> Vec<i64> {
        let mut local = 0;
        let mut out = Vec::new();
        for g in 0..mine.n {
            if mine.owner(g) == c {
                if (lo..hi).contains(&g) {
                    out.push(local);
                }
                local += 1;
            }
        }
        out
    }
}

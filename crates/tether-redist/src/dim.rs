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
//! Arithmetic is done in `i128`: `P*B` and the period can exceed `i64` even
//! though every index and local offset fits in it.

use std::collections::BTreeMap;

use crate::dist::Kind;

/// One dimension of a regular distribution: extent `n` dealt in blocks of
/// `b` over `p` coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pattern {
    n: i128,
    p: i128,
    b: i128,
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
            n: i128::from(n),
            p: i128::from(p),
            b: i128::from(b),
        }
    }

    fn period(&self) -> i128 {
        self.p * self.b
    }

    /// How many indices below `x` coordinate `c` owns, which is also the
    /// local index of its first index at or above `x`.
    fn owned_before(&self, c: i128, x: i128) -> i128 {
        let a = self.period();
        (x / a) * self.b + (x % a - c * self.b).clamp(0, self.b)
    }

    /// Local extent of coordinate `c`.
    pub(crate) fn extent(&self, c: i64) -> i64 {
        self.owned_before(i128::from(c), self.n) as i64
    }

    /// The coordinate owning global index `g`.
    pub(crate) fn owner(&self, g: i64) -> i64 {
        ((i128::from(g) / self.b) % self.p) as i64
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

/// Appends `g` to a list in increasing order, merging it into the last
/// entry where the two describe one run or one progression: this is what
/// turns identical distributions into one run and NONE dimensions into
/// whole rows.
fn push(list: &mut Vec<Group>, g: Group) {
    if g.len == 0 || g.count == 0 {
        return;
    }
    let g = if g.count == 1 || g.stride == g.len {
        Group::run(g.start, g.len * g.count)
    } else {
        g
    };
    if let Some(last) = list.last_mut() {
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

/// The runs of my local indices that one remote coordinate meets along one
/// dimension, in increasing global order: `period` repeated `repeats` times,
/// shifted by `shift` local indices each time, then `tail`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Runs {
    period: Vec<Group>,
    repeats: i64,
    shift: i64,
    tail: Vec<Group>,
}

impl Runs {
    fn new(period: Vec<Group>, repeats: i64, shift: i64, tail: Vec<Group>) -> Runs {
        if repeats == 0 || period.is_empty() {
            return Runs::flat(tail);
        }
        // One period, or a period that is a single run, needs no repeat:
        // the first is just a list, the second one progression.
        let flatten = match period.as_slice() {
            _ if repeats == 1 => Some(period.clone()),
            [g] if g.count == 1 => Some(vec![Group {
                start: g.start,
                len: g.len,
                count: repeats,
                stride: shift,
            }]),
            _ => None,
        };
        match flatten {
            Some(head) => {
                let mut list = Vec::with_capacity(head.len() + tail.len());
                for g in head.into_iter().chain(tail) {
                    push(&mut list, g);
                }
                Runs::flat(list)
            }
            None => Runs {
                period,
                repeats,
                shift,
                tail,
            },
        }
    }

    fn flat(tail: Vec<Group>) -> Runs {
        Runs {
            period: Vec::new(),
            repeats: 0,
            shift: 0,
            tail,
        }
    }

    /// One run of `len` indices from `start`.
    pub(crate) fn single(start: i64, len: i64) -> Runs {
        Runs::flat(vec![Group::run(start, len)])
    }

    /// Entries stored (what the plan's memory grows with).
    pub(crate) fn stored(&self) -> usize {
        self.period.len() + self.tail.len()
    }

    /// Indices covered.
    pub(crate) fn elements(&self) -> u64 {
        let sum = |list: &[Group]| -> u64 { list.iter().map(|g| (g.len * g.count) as u64).sum() };
        sum(&self.period) * self.repeats as u64 + sum(&self.tail)
    }

    /// `(start, len)` when the indices form one contiguous range. Merging in
    /// [`push`] makes this exact: two entries never touch.
    pub(crate) fn contiguous(&self) -> Option<(i64, i64)> {
        match (self.period.as_slice(), self.tail.as_slice()) {
            ([], [g]) if g.count == 1 => Some((g.start, g.len)),
            _ => None,
        }
    }

    /// The runs one by one, computed as they are needed.
    pub(crate) fn iter(&self) -> RunIter<'_> {
        RunIter {
            runs: self,
            rep: 0,
            group: 0,
            k: 0,
            in_tail: self.repeats == 0,
        }
    }
}

/// Iterator over the `(start, len)` runs of a [`Runs`].
pub(crate) struct RunIter<'a> {
    runs: &'a Runs,
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
                (&self.runs.tail, 0)
            } else {
                (&self.runs.period, self.rep * self.runs.shift)
            };
            let Some(g) = list.get(self.group) else {
                if self.in_tail {
                    return None;
                }
                self.rep += 1;
                self.in_tail = self.rep == self.runs.repeats;
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

/// Lists of groups per remote coordinate, filled in increasing global order.
#[derive(Default)]
struct Collector {
    lists: BTreeMap<i64, Vec<Group>>,
}

impl Collector {
    fn push(&mut self, remote: i128, g: Group) {
        push(self.lists.entry(remote as i64).or_default(), g);
    }
}

/// Splits `[gs, ge)`, whose local indices are `ls ..` in order, by the
/// blocks of `remote`. A stretch longer than a whole remote period gives
/// one progression per remote coordinate instead of one run per block, so
/// the cost is O(min(blocks met, remote coordinates)).
fn split(gs: i128, ge: i128, ls: i128, remote: &Pattern, out: &mut Collector, work: &mut u64) {
    let (q, b) = (remote.p, remote.b);
    let a = remote.period();
    let walk = |from: i128, to: i128, out: &mut Collector, work: &mut u64| {
        if from >= to {
            return;
        }
        for j in from / b..=(to - 1) / b {
            let rs = from.max(j * b);
            let re = to.min((j + 1) * b);
            *work += 1;
            out.push(j % q, Group::run((ls + rs - gs) as i64, (re - rs) as i64));
        }
    };
    let first_full = (gs + a - 1) / a * a;
    let periods = if ge > first_full {
        (ge - first_full) / a
    } else {
        0
    };
    if periods < 2 {
        walk(gs, ge, out, work);
        return;
    }
    walk(gs, first_full, out, work);
    for e in 0..q {
        *work += 1;
        out.push(
            e,
            Group {
                start: (ls + first_full - gs + e * b) as i64,
                len: b as i64,
                count: periods as i64,
                stride: a as i64,
            },
        );
    }
    walk(first_full + periods * a, ge, out, work);
}

/// Runs of coordinate `c` of `mine` within `[lo, hi)`, where `lo` is a
/// multiple of both patterns' periods, per remote coordinate.
fn sweep(
    mine: &Pattern,
    c: i128,
    remote: &Pattern,
    lo: i128,
    hi: i128,
    work: &mut u64,
) -> Collector {
    let mut out = Collector::default();
    let a = mine.period();
    if remote.b > a {
        // Remote blocks longer than my period: each one meets my indices in
        // a single local run (my blocks are consecutive locally), so walk
        // the remote blocks and count what I own in each.
        for j in lo / remote.b..(hi + remote.b - 1) / remote.b {
            let rs = lo.max(j * remote.b);
            let re = hi.min((j + 1) * remote.b);
            let first = mine.owned_before(c, rs);
            let len = mine.owned_before(c, re) - first;
            *work += 1;
            out.push(j % remote.p, Group::run(first as i64, len as i64));
        }
    } else {
        let mut k = lo / a;
        loop {
            let gs = (k * mine.p + c) * mine.b;
            if gs >= hi {
                break;
            }
            *work += 1;
            split(gs, hi.min(gs + mine.b), k * mine.b, remote, &mut out, work);
            k += 1;
        }
    }
    out
}

/// Regular against regular: per remote coordinate met, the runs of my
/// coordinate `c`'s local indices, as one period plus repeats plus tail.
pub(crate) fn regular_pair(
    mine: &Pattern,
    c: i64,
    remote: &Pattern,
    work: &mut u64,
) -> Vec<(i64, Runs)> {
    let c = i128::from(c);
    let n = mine.n;
    if n == 0 || mine.owned_before(c, n) == 0 {
        return Vec::new();
    }
    let (a, a2) = (mine.period(), remote.period());
    let period = (a / gcd(a, a2)).checked_mul(a2).filter(|&l| l < n);
    let Some(l) = period else {
        let tail = sweep(mine, c, remote, 0, n, work);
        return tail
            .lists
            .into_iter()
            .map(|(e, list)| (e, Runs::flat(list)))
            .collect();
    };
    let repeats = n / l;
    let shift = l / mine.p;
    let mut period = sweep(mine, c, remote, 0, l, work).lists;
    let mut tail = sweep(mine, c, remote, repeats * l, n, work).lists;
    let mut coords: Vec<i64> = period.keys().chain(tail.keys()).copied().collect();
    coords.sort_unstable();
    coords.dedup();
    coords
        .into_iter()
        .map(|e| {
            let runs = Runs::new(
                period.remove(&e).unwrap_or_default(),
                repeats as i64,
                shift as i64,
                tail.remove(&e).unwrap_or_default(),
            );
            (e, runs)
        })
        .collect()
}

/// My interval `[lo, hi)` (local index 0 at `origin`) against a regular
/// remote pattern: per remote coordinate met, the local runs.
pub(crate) fn interval_vs_regular(
    lo: i64,
    hi: i64,
    origin: i64,
    remote: &Pattern,
    work: &mut u64,
) -> Vec<(i64, Runs)> {
    let mut out = Collector::default();
    let lo128 = i128::from(lo);
    split(
        lo128,
        i128::from(hi),
        lo128 - i128::from(origin),
        remote,
        &mut out,
        work,
    );
    out.lists
        .into_iter()
        .map(|(e, list)| (e, Runs::flat(list)))
        .collect()
}

/// My coordinate `c` of a regular pattern against a remote interval: my
/// blocks are consecutive locally, so this is at most one run.
pub(crate) fn regular_vs_interval(mine: &Pattern, c: i64, lo: i64, hi: i64) -> Option<Runs> {
    let c = i128::from(c);
    let first = mine.owned_before(c, i128::from(lo));
    let len = mine.owned_before(c, i128::from(hi)) - first;
    (len > 0).then(|| Runs::single(first as i64, len as i64))
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

    fn expand(runs: &Runs) -> Vec<i64> {
        runs.iter().flat_map(|(s, l)| s..s + l).collect()
    }

    /// Element by element: local indices of `c` whose global index the
    /// remote coordinate `e` owns, in global order.
    fn brute(mine: &Pattern, c: i64, remote: &Pattern, e: i64) -> Vec<i64> {
        let n = mine.n as i64;
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
            Kind::BlockCyclic(1),
            Kind::BlockCyclic(2),
            Kind::BlockCyclic(3),
            Kind::BlockCyclic(7),
            Kind::BlockCyclic(40),
        ];
        for n in 0..40 {
            for p in 1..6 {
                for q in 1..6 {
                    for &k1 in &kinds {
                        for &k2 in &kinds {
                            let mine = Pattern::new(n, p, k1);
                            let remote = Pattern::new(n, q, k2);
                            for c in 0..p {
                                let mut work = 0;
                                let got = regular_pair(&mine, c, &remote, &mut work);
                                for e in 0..q {
                                    let want = brute(&mine, c, &remote, e);
                                    let have = got
                                        .iter()
                                        .find(|(x, _)| *x == e)
                                        .map(|(_, r)| expand(r))
                                        .unwrap_or_default();
                                    assert_eq!(
                                        have, want,
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
        let mut work = 0;
        let runs = regular_pair(&mine, 3, &remote, &mut work);
        let stored: usize = runs.iter().map(|(_, r)| r.stored()).sum();
        let elements: u64 = runs.iter().map(|(_, r)| r.elements()).sum();
        assert_eq!(elements, mine.extent(3) as u64);
        assert!(stored <= 40, "{stored} entries");
        assert!(work < 100, "{work} steps");
    }

    #[test]
    fn identical_patterns_give_one_run() {
        let p = Pattern::new(1000, 7, Kind::BlockCyclic(3));
        let mut work = 0;
        let runs = regular_pair(&p, 2, &p, &mut work);
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].1.contiguous(), Some((0, p.extent(2))));
    }

    #[test]
    fn intervals_match_brute_force() {
        for n in 0..30i64 {
            for q in 1..5 {
                for kind in [Kind::Cyclic, Kind::BlockCyclic(2), Kind::BlockCyclic(5)] {
                    let remote = Pattern::new(n, q, kind);
                    for lo in 0..=n {
                        for hi in lo..=n {
                            let mut work = 0;
                            let got = interval_vs_regular(lo, hi, lo, &remote, &mut work);
                            for e in 0..q {
                                let want: Vec<i64> = (lo..hi)
                                    .filter(|&g| remote.owner(g) == e)
                                    .map(|g| g - lo)
                                    .collect();
                                let have = got
                                    .iter()
                                    .find(|(x, _)| *x == e)
                                    .map(|(_, r)| expand(r))
                                    .unwrap_or_default();
                                assert_eq!(have, want);
                            }
                            let mine = remote;
                            for c in 0..q {
                                let want = brute_interval(&mine, c, lo, hi);
                                let have = regular_vs_interval(&mine, c, lo, hi)
                                    .map(|r| expand(&r))
                                    .unwrap_or_default();
                                assert_eq!(have, want);
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
        for g in 0..mine.n as i64 {
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

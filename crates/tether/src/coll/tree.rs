//! Rooted and tree-shaped algorithms: dissemination barrier, binomial
//! broadcast and scatter-then-ring broadcast, binomial reduce, binomial
//! gather and scatter (direct exchanges with the root for large blocks).
//!
//! Binomial trees work on ranks relative to the root: relative rank `v`
//! with lowest set bit `L` gets its data from `v - L` and serves the
//! subtree `v .. v + L` (clamped to the communicator).

use super::schedule::{Buf, Schedule, Span};
use super::tuning::*;
use super::{pairwise, ring, uniform, Shape};

/// The lowest set bit of relative rank `v`; for the root, the first power
/// of two not below `size`.
fn subtree(v: u32, size: u32) -> u32 {
    if v == 0 {
        size.next_power_of_two()
    } else {
        1 << v.trailing_zeros()
    }
}

/// Children of relative rank `v`, largest subtree first.
fn children(v: u32, size: u32) -> impl Iterator<Item = u32> {
    let mut mask = subtree(v, size) >> 1;
    std::iter::from_fn(move || {
        while mask > 0 {
            let child = v + mask;
            mask >>= 1;
            if child < size {
                return Some(child);
            }
        }
        None
    })
}

/// Dissemination barrier: in round k every process signals `rank + 2^k`
/// and waits for `rank - 2^k`; after ceil(log2 p) rounds everyone has
/// heard from everyone, directly or not.
pub fn barrier(me: Shape) -> Schedule {
    let mut s = Schedule::new();
    let empty = Span::whole(Buf::Recv, 0);
    let mut k = 1i64;
    while k < me.size as i64 {
        s.round().send(me.step(k), empty).recv(me.step(-k), empty);
        k *= 2;
    }
    s
}

/// Broadcast of `len` bytes in the receive buffer from `root`.
pub fn bcast(me: Shape, root: u32, len: usize) -> Schedule {
    if len >= BCAST_SCATTER_MIN_BYTES && me.size >= BCAST_SCATTER_MIN_RANKS {
        bcast_scatter_ring(me, root, len)
    } else if me.size <= BCAST_LINEAR_MAX_RANKS && len < BCAST_LINEAR_MAX_BYTES {
        bcast_linear(me, root, len)
    } else {
        bcast_binomial(me, root, len)
    }
}

/// The root sends to every other process in one round.
fn bcast_linear(me: Shape, root: u32, len: usize) -> Schedule {
    let mut s = Schedule::new();
    let whole = Span::whole(Buf::Recv, len);
    if me.rank == root {
        s.round();
        for v in 1..me.size {
            s.send(me.real(v, root), whole);
        }
    } else {
        s.round().recv(root, whole);
    }
    s
}

fn bcast_binomial(me: Shape, root: u32, len: usize) -> Schedule {
    let mut s = Schedule::new();
    let whole = Span::whole(Buf::Recv, len);
    let v = me.relative(root);
    if v != 0 {
        s.round()
            .recv(me.real(v - subtree(v, me.size), root), whole);
    }
    s.round();
    for child in children(v, me.size) {
        s.send(me.real(child, root), whole);
    }
    s
}

/// Van de Geijn: the root scatters the buffer in `p` blocks down a
/// binomial tree, then a ring allgather completes it everywhere; each link
/// carries about `2 len / p` bytes instead of `len log p`.
fn bcast_scatter_ring(me: Shape, root: u32, len: usize) -> Schedule {
    let mut s = Schedule::new();
    let p = me.size;
    let block = len.div_ceil(p as usize);
    let bytes = |from: u32, to: u32| {
        let start = (from as usize * block).min(len);
        let end = (to as usize * block).min(len);
        Span::new(Buf::Recv, start, end - start)
    };
    let v = me.relative(root);
    let mine = subtree(v, p);
    if v != 0 {
        s.round()
            .recv(me.real(v - mine, root), bytes(v, (v + mine).min(p)));
    }
    s.round();
    for child in children(v, p) {
        let end = (child + subtree(child, p)).min(p);
        s.send(me.real(child, root), bytes(child, end));
    }
    for k in 0..p - 1 {
        let send = (v + p - k) % p;
        let recv = (v + 2 * p - k - 1) % p;
        s.round()
            .send(me.real((v + 1) % p, root), bytes(send, send + 1))
            .recv(me.real((v + p - 1) % p, root), bytes(recv, recv + 1));
    }
    s
}

/// Reduce of `len` bytes (elements of `elem` bytes) to `root`. `input` is
/// this rank's contribution (the send buffer, or the receive buffer in
/// place at the root); the result lands in the root's receive buffer.
pub fn reduce(me: Shape, root: u32, len: usize, elem: usize, input: Span) -> Schedule {
    if ring::use_ring(me, len, elem) {
        ring::reduce(me, root, len, elem, input)
    } else {
        reduce_binomial(me, root, len, input)
    }
}

fn reduce_binomial(me: Shape, root: u32, len: usize, input: Span) -> Schedule {
    let mut s = Schedule::new();
    let v = me.relative(root);
    let acc = if v == 0 { Buf::Recv } else { s.temp(len) };
    let acc = Span::whole(acc, len);
    s.round().copy(input, acc);
    let incoming = Span::whole(s.temp(len), len);
    for child in children(v, me.size).collect::<Vec<_>>().into_iter().rev() {
        s.round()
            .recv(me.real(child, root), incoming)
            .reduce(incoming, acc);
    }
    if v != 0 {
        s.round().send(me.real(v - subtree(v, me.size), root), acc);
    }
    s
}

/// Gather of `block` bytes from every rank into the root's receive buffer
/// (rank order). `input` is this rank's block: the send buffer, or at the
/// root in place its slot of the receive buffer.
pub fn gather(me: Shape, root: u32, block: usize, input: Span) -> Schedule {
    if block * me.size as usize > GATHER_TREE_MAX_BYTES {
        return pairwise::gatherv(me, root, &uniform(me.size, block), input);
    }
    let mut s = Schedule::new();
    let p = me.size;
    let v = me.relative(root);
    let served = (subtree(v, p).min(p - v)) as usize;
    let (collect, rotate) = match (v, root) {
        (0, 0) => (Buf::Recv, false),
        (0, _) => (s.temp(block * p as usize), true),
        _ => (s.temp(block * served), false),
    };
    s.round().copy(input, Span::new(collect, 0, block));
    s.round();
    for child in children(v, p) {
        let n = (subtree(child, p).min(p - child)) as usize;
        let at = (child - v) as usize * block;
        s.recv(me.real(child, root), Span::new(collect, at, n * block));
    }
    if v != 0 {
        s.round().send(
            me.real(v - subtree(v, p), root),
            Span::new(collect, 0, served * block),
        );
    }
    if rotate {
        let head = (p - root) as usize * block;
        s.round()
            .copy(
                Span::new(collect, 0, head),
                Span::new(Buf::Recv, root as usize * block, head),
            )
            .copy(
                Span::new(collect, head, root as usize * block),
                Span::new(Buf::Recv, 0, root as usize * block),
            );
    }
    s
}

/// Scatter of `block` bytes to every rank from the root's send buffer
/// (rank order). `output` is where this rank's block goes; `None` at the
/// root in place (its block stays in the send buffer).
pub fn scatter(me: Shape, root: u32, block: usize, output: Option<Span>) -> Schedule {
    if block * me.size as usize > GATHER_TREE_MAX_BYTES {
        return pairwise::scatterv(me, root, &uniform(me.size, block), output);
    }
    let mut s = Schedule::new();
    let p = me.size;
    let v = me.relative(root);
    let served = (subtree(v, p).min(p - v)) as usize;
    let hold = match (v, root) {
        (0, 0) => Buf::Send,
        _ => s.temp(block * served),
    };
    if v == 0 && root != 0 {
        let head = (p - root) as usize * block;
        s.round()
            .copy(
                Span::new(Buf::Send, root as usize * block, head),
                Span::new(hold, 0, head),
            )
            .copy(
                Span::new(Buf::Send, 0, root as usize * block),
                Span::new(hold, head, root as usize * block),
            );
    }
    if v != 0 {
        s.round().recv(
            me.real(v - subtree(v, p), root),
            Span::new(hold, 0, served * block),
        );
    }
    s.round();
    for child in children(v, p) {
        let n = (subtree(child, p).min(p - child)) as usize;
        let at = (child - v) as usize * block;
        s.send(me.real(child, root), Span::new(hold, at, n * block));
    }
    if let Some(output) = output {
        s.copy(Span::new(hold, 0, block), output);
    }
    s
}

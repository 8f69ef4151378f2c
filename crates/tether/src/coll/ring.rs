//! Reductions and allgathers: recursive doubling (log p rounds, for small
//! messages), the ring reduce-scatter and ring allgather (bandwidth-optimal:
//! each process sends about `2 len (p-1)/p` bytes, for large messages), and
//! Bruck's allgather.

use super::schedule::{Buf, Schedule, Span};
use super::tuning::*;
use super::{chunks, uniform, Shape};

fn at(buf: Buf, (offset, len): (usize, usize)) -> Span {
    Span::new(buf, offset, len)
}

/// Whether a reduction of `len` bytes in elements of `elem` bytes goes
/// around a ring: large, at least one element per process, more than two
/// processes (on two, recursive doubling moves the same bytes in one round).
pub(super) fn use_ring(me: Shape, len: usize, elem: usize) -> bool {
    len >= REDUCE_RING_MIN_BYTES && len / elem.max(1) >= me.size as usize && me.size > 2
}

/// Allreduce of `len` bytes: `input` (the send buffer, or the receive
/// buffer in place) combined over all ranks into every receive buffer.
pub fn allreduce(me: Shape, len: usize, elem: usize, input: Span) -> Schedule {
    let mut s = Schedule::new();
    s.round().copy(input, Span::whole(Buf::Recv, len));
    if use_ring(me, len, elem) {
        let parts = chunks(len / elem, elem, me.size);
        reduce_scatter_ring(&mut s, me, Buf::Recv, &parts);
        allgather_ring(&mut s, me, Buf::Recv, &parts);
    } else {
        recursive_doubling(&mut s, me, Buf::Recv, len);
    }
    s
}

/// Reduce of a large buffer to `root`: ring reduce-scatter, then every rank
/// sends its reduced chunk straight to the root.
pub fn reduce(me: Shape, root: u32, len: usize, elem: usize, input: Span) -> Schedule {
    let mut s = Schedule::new();
    let acc = if me.rank == root {
        Buf::Recv
    } else {
        s.temp(len)
    };
    s.round().copy(input, Span::whole(acc, len));
    let parts = chunks(len / elem, elem, me.size);
    reduce_scatter_ring(&mut s, me, acc, &parts);
    let mine = at(acc, parts[me.rank as usize]);
    if me.rank == root {
        s.round();
        for r in (0..me.size).filter(|r| *r != root) {
            s.recv(r, at(Buf::Recv, parts[r as usize]));
        }
    } else {
        s.round().send(root, mine);
    }
    s
}

/// Reduce-scatter of `block` bytes per rank: `input` holds `p` blocks;
/// rank r gets block r of the combination in its receive buffer.
pub fn reduce_scatter_block(me: Shape, block: usize, elem: usize, input: Span) -> Schedule {
    let mut s = Schedule::new();
    let len = block * me.size as usize;
    let acc = s.temp(len);
    s.round().copy(input, Span::whole(acc, len));
    if len >= REDUCE_RING_MIN_BYTES && block >= elem && me.size > 2 {
        reduce_scatter_ring(&mut s, me, acc, &uniform(me.size, block));
    } else {
        recursive_doubling(&mut s, me, acc, len);
    }
    s.round().copy(
        Span::new(acc, me.rank as usize * block, block),
        Span::whole(Buf::Recv, block),
    );
    s
}

/// Recursive doubling over `acc` (which holds this rank's input). With
/// `p` not a power of two, the first `2 rem` ranks pair up first so that a
/// power of two takes part, and the odd ones hand the result back.
fn recursive_doubling(s: &mut Schedule, me: Shape, acc: Buf, len: usize) {
    let (p, r) = (me.size, me.rank);
    let pof2 = 1u32 << (31 - p.leading_zeros());
    let rem = p - pof2;
    let whole = Span::whole(acc, len);
    let incoming = Span::whole(s.temp(len), len);
    let folded = r < 2 * rem;
    let new_rank = if folded && r % 2 == 0 {
        s.round().send(r + 1, whole);
        None
    } else if folded {
        s.round().recv(r - 1, incoming).reduce(incoming, whole);
        Some(r / 2)
    } else {
        Some(r - rem)
    };
    if let Some(new_rank) = new_rank {
        let mut mask = 1;
        while mask < pof2 {
            let partner = new_rank ^ mask;
            let partner = if partner < rem {
                partner * 2 + 1
            } else {
                partner + rem
            };
            s.round()
                .send(partner, whole)
                .recv(partner, incoming)
                .reduce(incoming, whole);
            mask <<= 1;
        }
    }
    if folded && r % 2 == 0 {
        s.round().recv(r + 1, whole);
    } else if folded {
        s.round().send(r - 1, whole);
    }
}

/// Ring reduce-scatter over `acc`, cut in `parts` (one per rank): after
/// p-1 rounds rank r holds part r combined over all ranks.
fn reduce_scatter_ring(s: &mut Schedule, me: Shape, acc: Buf, parts: &[(usize, usize)]) {
    let p = me.size as i64;
    let largest = parts.iter().map(|(_, l)| *l).max().unwrap_or(0);
    let incoming = s.temp(largest);
    for k in 0..p - 1 {
        let send = parts[me.step(-1 - k) as usize];
        let recv = parts[me.step(-2 - k) as usize];
        let landing = Span::new(incoming, 0, recv.1);
        s.round()
            .send(me.step(1), at(acc, send))
            .recv(me.step(-1), landing)
            .reduce(landing, at(acc, recv));
    }
}

/// Ring allgather over `acc`, where rank r holds part r: after p-1 rounds
/// every rank holds every part.
fn allgather_ring(s: &mut Schedule, me: Shape, acc: Buf, parts: &[(usize, usize)]) {
    for k in 0..me.size as i64 - 1 {
        s.round()
            .send(me.step(1), at(acc, parts[me.step(-k) as usize]))
            .recv(me.step(-1), at(acc, parts[me.step(-k - 1) as usize]));
    }
}

/// Allgather of `block` bytes per rank into the receive buffer (rank
/// order). `input` is this rank's block (in place: its slot of the receive
/// buffer).
pub fn allgather(me: Shape, block: usize, input: Span) -> Schedule {
    let p = me.size as usize;
    if block * p >= ALLGATHER_BRUCK_MAX_BYTES {
        return allgatherv(me, &uniform(me.size, block), input);
    }
    let mut s = Schedule::new();
    let gathered = s.temp(block * p);
    s.round().copy(input, Span::new(gathered, 0, block));
    let mut k = 1;
    while k < p {
        let n = k.min(p - k);
        s.round()
            .send(me.step(-(k as i64)), Span::new(gathered, 0, n * block))
            .recv(me.step(k as i64), Span::new(gathered, k * block, n * block));
        k *= 2;
    }
    let r = me.rank as usize;
    let head = (p - r) * block;
    s.round()
        .copy(
            Span::new(gathered, 0, head),
            Span::new(Buf::Recv, r * block, head),
        )
        .copy(
            Span::new(gathered, head, r * block),
            Span::new(Buf::Recv, 0, r * block),
        );
    s
}

/// Allgather of rank r's `input` into `parts[r]` of every receive buffer,
/// around a ring.
pub fn allgatherv(me: Shape, parts: &[(usize, usize)], input: Span) -> Schedule {
    let mut s = Schedule::new();
    s.round()
        .copy(input, at(Buf::Recv, parts[me.rank as usize]));
    allgather_ring(&mut s, me, Buf::Recv, parts);
    s
}

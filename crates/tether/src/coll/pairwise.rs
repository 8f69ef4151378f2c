//! Direct exchanges: every transfer goes straight to its destination.
//! Linear gatherv and scatterv (the root posts all transfers at once, as
//! MPI libraries do for the v-variants), and all-to-all, posted at once
//! when small and pairwise (one partner a round) when large.
//!
//! Blocks are (byte offset, byte length) per rank.

use super::schedule::{Buf, Schedule, Span};
use super::tuning::ALLTOALL_AT_ONCE_MAX_BYTES;
use super::Shape;

fn at(buf: Buf, (offset, len): (usize, usize)) -> Span {
    Span::new(buf, offset, len)
}

/// Gather of rank r's `input` into `blocks[r]` of the root's receive buffer.
/// At the root in place, `input` is its own block (no copy).
pub fn gatherv(me: Shape, root: u32, blocks: &[(usize, usize)], input: Span) -> Schedule {
    let mut s = Schedule::new();
    if me.rank != root {
        s.round().send(root, input);
        return s;
    }
    s.round();
    for r in (0..me.size).filter(|r| *r != root) {
        s.recv(r, at(Buf::Recv, blocks[r as usize]));
    }
    s.copy(input, at(Buf::Recv, blocks[root as usize]));
    s
}

/// Scatter of `blocks[r]` of the root's send buffer to rank r's `output`;
/// `None` at the root in place.
pub fn scatterv(me: Shape, root: u32, blocks: &[(usize, usize)], output: Option<Span>) -> Schedule {
    let mut s = Schedule::new();
    if me.rank != root {
        s.round()
            .recv(root, output.expect("a non-root rank receives"));
        return s;
    }
    s.round();
    for r in (0..me.size).filter(|r| *r != root) {
        s.send(r, at(Buf::Send, blocks[r as usize]));
    }
    if let Some(output) = output {
        s.copy(at(Buf::Send, blocks[root as usize]), output);
    }
    s
}

/// All-to-all: `send[r]` of the send buffer goes to rank r, and rank r's
/// block lands in `recv[r]` of the receive buffer. `send` is `None` in
/// place: the data to send is in the receive buffer, laid out as `recv`.
pub fn alltoallv(me: Shape, send: Option<&[(usize, usize)]>, recv: &[(usize, usize)]) -> Schedule {
    let mut s = Schedule::new();
    let (source, send) = match send {
        Some(blocks) => (Buf::Send, blocks.to_vec()),
        None => {
            let extent = recv.iter().map(|(o, l)| o + l).max().unwrap_or(0);
            let copy = s.temp(extent);
            s.round()
                .copy(Span::whole(Buf::Recv, extent), Span::whole(copy, extent));
            (copy, recv.to_vec())
        }
    };
    let r = me.rank as usize;
    s.round().copy(at(source, send[r]), at(Buf::Recv, recv[r]));
    let total: usize = send.iter().map(|(_, l)| l).sum();
    let at_once = total <= ALLTOALL_AT_ONCE_MAX_BYTES;
    if at_once {
        s.round();
    }
    for i in 1..me.size as i64 {
        let (to, from) = (me.step(i), me.step(-i));
        if !at_once {
            s.round();
        }
        s.send(to, at(source, send[to as usize]))
            .recv(from, at(Buf::Recv, recv[from as usize]));
    }
    s
}

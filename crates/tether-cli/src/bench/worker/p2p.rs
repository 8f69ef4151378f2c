//! The point-to-point loops: ping-pong, windows one way and both ways, and
//! the message rate of several pairs. Pairs are universe ranks `i` and
//! `i + n` for `n` pairs (program `a` sends, program `b` receives).

use std::time::Instant;

use tether::comm::COMM_UNIVERSE;
use tether::{ReqId, Runtime};

use super::{check, complete, complete_all, elapsed_us, fill, mark, stamp, Counts};

const TAG_DATA: i32 = 100;
const TAG_ACK: i32 = 101;

/// This process's side of a pair.
pub(super) struct Pair {
    pub(super) sender: bool,
    pub(super) peer: i32,
}

/// Checks that the universe splits into pairs and finds this process's.
pub(super) fn pair(rt: &Runtime) -> Result<Pair, String> {
    let size = rt.universe().size();
    if size < 2 || size & 1 != 0 {
        return Err(format!(
            "point-to-point modes need an even number of processes, not {size}"
        ));
    }
    let half = size / 2;
    let me = rt.universe().my_universe_rank();
    Ok(if me < half {
        Pair {
            sender: true,
            peer: (me + half) as i32,
        }
    } else {
        Pair {
            sender: false,
            peer: (me - half) as i32,
        }
    })
}

fn isend(rt: &mut Runtime, buf: &[u8], peer: i32, tag: i32) -> Result<ReqId, String> {
    // SAFETY: every request is completed before its buffer is dropped or
    // written again (each loop waits for its requests).
    unsafe { rt.isend(buf.as_ptr(), buf.len(), peer, tag, COMM_UNIVERSE) }
        .map_err(|e| e.to_string())
}

fn irecv(rt: &mut Runtime, buf: &mut [u8], peer: i32, tag: i32) -> Result<ReqId, String> {
    // SAFETY: as in `isend`; receives into one buffer only overlap in a
    // window, whose contents are checked only after all of it completed.
    unsafe { rt.irecv(buf.as_mut_ptr(), buf.len(), peer, tag, COMM_UNIVERSE) }
        .map_err(|e| e.to_string())
}

/// A blocking send (`Runtime::send`, as `tether_send`).
fn send(rt: &mut Runtime, buf: &[u8], peer: i32, tag: i32) -> Result<(), String> {
    // SAFETY: the buffer outlives the call, which completes the send.
    let status = unsafe { rt.send(buf.as_ptr(), buf.len(), peer, tag, COMM_UNIVERSE) }
        .map_err(|e| e.to_string())?;
    status.error.map_or(Ok(()), |e| Err(e.to_string()))
}

/// A blocking receive (`Runtime::recv`, as `tether_recv`).
fn recv(rt: &mut Runtime, buf: &mut [u8], peer: i32, tag: i32) -> Result<(), String> {
    // SAFETY: as in `send`.
    let status = unsafe { rt.recv(buf.as_mut_ptr(), buf.len(), peer, tag, COMM_UNIVERSE) }
        .map_err(|e| e.to_string())?;
    status.error.map_or(Ok(()), |e| Err(e.to_string()))
}

/// Half the round trip of a blocking send and receive, in microseconds.
pub fn latency(rt: &mut Runtime, size: u64, counts: Counts) -> Result<f64, String> {
    let pair = pair(rt)?;
    let mut sbuf = vec![0u8; size as usize];
    let mut rbuf = vec![0u8; size as usize];
    fill(&mut sbuf, mark(0));
    let total = counts.warmup + counts.iters;
    let mut start = Instant::now();
    for it in 0..total {
        if it == counts.warmup {
            start = Instant::now();
        }
        if pair.sender {
            stamp(&mut sbuf, it);
            send(rt, &sbuf, pair.peer, TAG_DATA)?;
            recv(rt, &mut rbuf, pair.peer, TAG_DATA)?;
        } else {
            recv(rt, &mut rbuf, pair.peer, TAG_DATA)?;
            if it == 0 {
                check(&rbuf, mark(0))?;
            }
            send(rt, &rbuf, pair.peer, TAG_DATA)?;
        }
    }
    let us = elapsed_us(start);
    check(&rbuf, mark(total - 1))?;
    Ok(us / (2.0 * counts.iters as f64))
}

/// How a window's messages move.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// Non-blocking sends one way, answered by an ack (osu_bw).
    OneWay,
    /// Blocking sends one way (`tether_send`), the receiver looping on
    /// blocking receives, answered by an ack.
    OneWayBlocking,
    /// Non-blocking sends both ways at once (osu_bibw).
    BothWays,
}

/// One side of a one-way window: the sender sends `window` messages and
/// waits for the ack, the receiver receives them into one buffer and acks;
/// with `blocking`, each call completes before the next starts.
fn one_way_window(
    rt: &mut Runtime,
    pair: &Pair,
    sbuf: &[u8],
    rbuf: &mut [u8],
    window: u32,
    blocking: bool,
    reqs: &mut Vec<ReqId>,
) -> Result<(), String> {
    let mut ack = [0u8; 4];
    if pair.sender {
        for _ in 0..window {
            if blocking {
                send(rt, sbuf, pair.peer, TAG_DATA)?;
            } else {
                reqs.push(isend(rt, sbuf, pair.peer, TAG_DATA)?);
            }
        }
        complete_all(rt, reqs)?;
        recv(rt, &mut ack, pair.peer, TAG_ACK)
    } else {
        for _ in 0..window {
            if blocking {
                recv(rt, rbuf, pair.peer, TAG_DATA)?;
            } else {
                reqs.push(irecv(rt, rbuf, pair.peer, TAG_DATA)?);
            }
        }
        complete_all(rt, reqs)?;
        send(rt, &ack, pair.peer, TAG_ACK)
    }
}

/// Runs the warm-up and timed windows and returns the timed microseconds
/// (of this process) and checks the data received.
fn windows(
    rt: &mut Runtime,
    pair: &Pair,
    size: u64,
    counts: Counts,
    window: u32,
    flow: Flow,
) -> Result<f64, String> {
    let both_ways = flow == Flow::BothWays;
    let mut sbuf = vec![0u8; size as usize];
    let mut rbuf = vec![0u8; size as usize];
    let mut reqs = Vec::with_capacity(2 * window as usize);
    fill(&mut sbuf, mark(0));
    let total = counts.warmup + counts.iters;
    let mut start = Instant::now();
    for it in 0..total {
        if it == counts.warmup {
            start = Instant::now();
        }
        stamp(&mut sbuf, it);
        if both_ways {
            for _ in 0..window {
                reqs.push(irecv(rt, &mut rbuf, pair.peer, TAG_DATA)?);
            }
            for _ in 0..window {
                reqs.push(isend(rt, &sbuf, pair.peer, TAG_DATA)?);
            }
            complete_all(rt, &mut reqs)?;
        } else {
            let blocking = flow == Flow::OneWayBlocking;
            one_way_window(rt, pair, &sbuf, &mut rbuf, window, blocking, &mut reqs)?;
        }
        if it == 0 && (both_ways || !pair.sender) {
            check(&rbuf, mark(0))?;
        }
    }
    let us = elapsed_us(start);
    if both_ways || !pair.sender {
        check(&rbuf, mark(total - 1))?;
    }
    Ok(us)
}

/// A window of non-blocking sends answered by an ack (as osu_bw), in MB/s.
pub fn bandwidth(rt: &mut Runtime, size: u64, counts: Counts, window: u32) -> Result<f64, String> {
    let pair = pair(rt)?;
    let us = windows(rt, &pair, size, counts, window, Flow::OneWay)?;
    Ok((size * u64::from(window) * counts.iters) as f64 / us)
}

/// A window of blocking sends (`tether_send`) to a receiver looping on
/// blocking receives, then an ack, in MB/s: `bandwidth` without requests
/// in flight, so each send completes before the next one starts.
pub fn blocking_bandwidth(
    rt: &mut Runtime,
    size: u64,
    counts: Counts,
    window: u32,
) -> Result<f64, String> {
    let pair = pair(rt)?;
    let us = windows(rt, &pair, size, counts, window, Flow::OneWayBlocking)?;
    Ok((size * u64::from(window) * counts.iters) as f64 / us)
}

/// Windows in both directions at once (as osu_bibw), both summed, in MB/s.
pub fn bibw(rt: &mut Runtime, size: u64, counts: Counts, window: u32) -> Result<f64, String> {
    let pair = pair(rt)?;
    let us = windows(rt, &pair, size, counts, window, Flow::BothWays)?;
    Ok((2 * size * u64::from(window) * counts.iters) as f64 / us)
}

/// Every pair streams windows at once (as osu_mbw_mr), started together by
/// a barrier; messages per second over all pairs, timed by the slowest
/// sender.
pub fn message_rate(
    rt: &mut Runtime,
    size: u64,
    counts: Counts,
    window: u32,
) -> Result<f64, String> {
    let pair = pair(rt)?;
    let pairs = u64::from(rt.universe().size() / 2);
    let barrier = rt.ibarrier(COMM_UNIVERSE).map_err(|e| e.to_string())?;
    complete(rt, barrier)?;
    let mine = windows(rt, &pair, size, counts, window, Flow::OneWay)?;
    let slowest = super::coll::max_over_all(rt, if pair.sender { mine } else { 0.0 })?;
    Ok((pairs * u64::from(window) * counts.iters) as f64 / (slowest / 1e6))
}

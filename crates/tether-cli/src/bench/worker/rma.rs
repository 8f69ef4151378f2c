//! The one-sided and active-message loops, between the pairs of
//! `p2p.rs`: the sender is the origin, the receiver the target, which
//! waits in a blocking receive (a Tether call, so it serves the
//! operations) until the origin is done with a size.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tether::comm::COMM_UNIVERSE;
use tether::{AmMessage, AmReply, Region, Runtime};

use super::p2p::{pair, Pair};
use super::{complete, elapsed_us, Counts};

const TAG_DONE: i32 = 102;
const BYTE: i32 = 1;
const INT64: i32 = 6;
const SUM: i32 = 1;
const AM_PING: i32 = 1;
const AM_PONG: i32 = 2;

/// The operation a loop times.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Timed {
    /// A put, then a flush of the target (us per operation).
    Put,
    /// A get, then a flush (us).
    Get,
    /// fetch_and_op INT64 SUM, then a flush (us).
    FetchOp,
    /// `window` puts, then one flush (MB/s).
    PutBandwidth,
}

fn text(e: tether::Error) -> String {
    e.to_string()
}

/// Runs `op` on a window of `size` bytes (at least 8) at the target.
pub fn one_sided(
    rt: &mut Runtime,
    op: Timed,
    size: u64,
    counts: Counts,
    window: u32,
) -> Result<f64, String> {
    let pair = pair(rt)?;
    let len = size as usize;
    let mut memory = vec![0u8; len.max(8)];
    // SAFETY: `memory` outlives the window, freed below.
    let win = unsafe { rt.win_create(memory.as_mut_ptr(), memory.len() as i64, COMM_UNIVERSE) }
        .map_err(text)?;
    let value = if pair.sender {
        let value = origin(rt, &pair, op, len, counts, window, win);
        let done = [1u8];
        // SAFETY: the buffer outlives the blocking call.
        unsafe { rt.send(done.as_ptr(), 1, pair.peer, TAG_DONE, COMM_UNIVERSE) }.map_err(text)?;
        value?
    } else {
        let mut done = [0u8];
        // SAFETY: as above.
        unsafe { rt.recv(done.as_mut_ptr(), 1, pair.peer, TAG_DONE, COMM_UNIVERSE) }
            .map_err(text)?;
        0.0
    };
    rt.win_free(win).map_err(text)?;
    Ok(value)
}

fn origin(
    rt: &mut Runtime,
    pair: &Pair,
    op: Timed,
    len: usize,
    counts: Counts,
    window: u32,
    win: i32,
) -> Result<f64, String> {
    let mut buf = vec![7u8; len.max(8)];
    let mut result = [0u8; 8];
    let one = 1i64.to_le_bytes();
    let t = pair.peer;
    let mut start = Instant::now();
    for it in 0..counts.warmup + counts.iters {
        if it == counts.warmup {
            start = Instant::now();
        }
        // SAFETY: every buffer outlives the flush that completes its
        // operation, at the end of each iteration.
        unsafe {
            match op {
                Timed::Put => rt.put(buf.as_ptr(), len as i64, BYTE, t, 0, win),
                Timed::Get => rt.get(buf.as_mut_ptr(), len as i64, BYTE, t, 0, win),
                Timed::FetchOp => {
                    rt.fetch_and_op(one.as_ptr(), result.as_mut_ptr(), INT64, t, 0, SUM, win)
                }
                Timed::PutBandwidth => {
                    (0..window).try_for_each(|_| rt.put(buf.as_ptr(), len as i64, BYTE, t, 0, win))
                }
            }
        }
        .map_err(text)?;
        rt.win_flush(Some(t), win).map_err(text)?;
    }
    let us = elapsed_us(start);
    if op == Timed::FetchOp {
        let total = (counts.warmup + counts.iters) as i64;
        let before = i64::from_le_bytes(result);
        if before != total - 1 {
            return Err(format!(
                "fetch_and_op check failed: the last fetch saw {before}, not {}",
                total - 1
            ));
        }
    }
    Ok(match op {
        Timed::PutBandwidth => (len as f64 * f64::from(window) * counts.iters as f64) / us,
        _ => us / counts.iters as f64,
    })
}

/// Round trip of an active message of `size` bytes of payload answered
/// by the target's handler with the same payload (us).
pub fn active_message(rt: &mut Runtime, size: u64, counts: Counts) -> Result<f64, String> {
    let pair = pair(rt)?;
    let replies = Arc::new(AtomicU64::new(0));
    let seen = replies.clone();
    let pong = move |_: &AmMessage| -> Vec<AmReply> {
        seen.fetch_add(1, Ordering::Relaxed);
        Vec::new()
    };
    let ping = |m: &AmMessage| -> Vec<AmReply> {
        vec![AmReply {
            dest: m.source,
            id: AM_PONG,
            comm: COMM_UNIVERSE,
            header: Vec::new(),
            payload: m.payload.to_vec(),
        }]
    };
    rt.am_register(AM_PING, Some(Box::new(ping)))
        .map_err(text)?;
    rt.am_register(AM_PONG, Some(Box::new(pong)))
        .map_err(text)?;
    rt.barrier(COMM_UNIVERSE).map_err(text)?;
    let payload = vec![3u8; size as usize];
    let mut value = 0.0;
    if pair.sender {
        let mut start = Instant::now();
        for it in 0..counts.warmup + counts.iters {
            if it == counts.warmup {
                start = Instant::now();
            }
            let before = replies.load(Ordering::Relaxed);
            let region = Region::from_const(payload.as_ptr(), payload.len());
            // SAFETY: the payload outlives the request, completed here.
            let req = unsafe { rt.am_send(pair.peer, AM_PING, &[], region, COMM_UNIVERSE) }
                .map_err(text)?;
            complete(rt, req)?;
            while replies.load(Ordering::Relaxed) == before {
                rt.progress();
            }
        }
        value = elapsed_us(start) / counts.iters as f64;
    }
    rt.barrier(COMM_UNIVERSE).map_err(text)?;
    rt.am_register(AM_PING, None).map_err(text)?;
    rt.am_register(AM_PONG, None).map_err(text)?;
    Ok(value)
}

//! `tether bench-worker` (hidden): one process of a Tether benchmark run.
//! The harness starts two or more of them through the `tether run`
//! launcher; each joins the universe through the runtime crate directly,
//! runs the mode's loops, and universe rank 0 writes the figures as JSON
//! (a list of [`Point`]s) to `--out`.

mod coll;
mod p2p;
mod rma;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use serde::{Deserialize, Serialize};
use tether::{ReqId, Runtime};

use super::mode::Mode;
use super::sizes;

/// One figure of one run: the size and the mode's metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub size: u64,
    pub value: f64,
}

/// What one benchmark process runs (set by the harness, not by people).
#[derive(Args, Debug)]
pub struct WorkerArgs {
    #[arg(long)]
    mode: Mode,
    /// Comma-separated sizes in bytes (suffixes as `tether bench --sizes`).
    #[arg(long, value_parser = sizes::parse_list)]
    sizes: ::std::vec::Vec<u64>,
    #[arg(long)]
    iters: Option<u64>,
    #[arg(long)]
    warmup: Option<u64>,
    #[arg(long, default_value_t = 64)]
    window: u32,
    /// Where universe rank 0 writes the figures.
    #[arg(long)]
    out: PathBuf,
}

/// Iteration counts of one size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub warmup: u64,
    pub iters: u64,
}

impl Counts {
    /// The counts of `size` in `mode`: `iters` and `warmup` when given,
    /// else the mode's defaults; at least one timed iteration.
    pub fn new(mode: Mode, iters: Option<u64>, warmup: Option<u64>, size: u64) -> Counts {
        Counts {
            warmup: warmup.unwrap_or_else(|| mode.default_warmup(size)),
            iters: iters.unwrap_or_else(|| mode.default_iters(size)).max(1),
        }
    }
}

pub fn main(args: WorkerArgs) -> ExitCode {
    let mut rt = match Runtime::init(None) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tether bench-worker: cannot join the universe: {e}");
            return ExitCode::FAILURE;
        }
    };
    let me = rt.universe().my_universe_rank();
    match measure(&mut rt, &args).and_then(|points| {
        if me == 0 {
            write(&args.out, &points)?;
        }
        rt.finalize().map_err(|e| e.to_string())
    }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "tether bench-worker ({} at universe rank {me}): {e}",
                args.mode.name()
            );
            ExitCode::FAILURE
        }
    }
}

fn measure(rt: &mut Runtime, args: &WorkerArgs) -> Result<Vec<Point>, String> {
    let mut points = Vec::with_capacity(args.sizes.len());
    for &size in &args.sizes {
        let counts = Counts::new(args.mode, args.iters, args.warmup, size);
        let value = match args.mode {
            Mode::Latency => p2p::latency(rt, size, counts)?,
            Mode::Bw | Mode::MultiRail => p2p::bandwidth(rt, size, counts, args.window)?,
            Mode::BwBlocking => p2p::blocking_bandwidth(rt, size, counts, args.window)?,
            Mode::Bibw => p2p::bibw(rt, size, counts, args.window)?,
            Mode::MbwMr => p2p::message_rate(rt, size, counts, args.window)?,
            Mode::Allreduce => coll::allreduce(rt, size, counts)?,
            Mode::Bcast => coll::bcast(rt, size, counts)?,
            Mode::Barrier => coll::barrier(rt, counts)?,
            Mode::Put => rma::one_sided(rt, rma::Timed::Put, size, counts, args.window)?,
            Mode::Get => rma::one_sided(rt, rma::Timed::Get, size, counts, args.window)?,
            Mode::FetchOp => rma::one_sided(rt, rma::Timed::FetchOp, size, counts, args.window)?,
            Mode::PutBw => rma::one_sided(rt, rma::Timed::PutBandwidth, size, counts, args.window)?,
            Mode::Am => rma::active_message(rt, size, counts)?,
        };
        points.push(Point { size, value });
    }
    Ok(points)
}

fn write(path: &std::path::Path, points: &[Point]) -> Result<(), String> {
    let text = serde_json::to_string(points).map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Waits for `req`; a request that completed in error is an error.
fn complete(rt: &mut Runtime, req: ReqId) -> Result<(), String> {
    let status = rt.wait(req).map_err(|e| e.to_string())?;
    match status.error {
        Some(e) => Err(e.to_string()),
        None => Ok(()),
    }
}

/// Waits for every request in `reqs` and empties it.
fn complete_all(rt: &mut Runtime, reqs: &mut Vec<ReqId>) -> Result<(), String> {
    for req in reqs.drain(..) {
        complete(rt, req)?;
    }
    Ok(())
}

/// Microseconds since `start`.
fn elapsed_us(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e6
}

/// The payload of every message of `size` bytes (depends on the size, so
/// that a message from the wrong step is caught), with `mark` in byte 0:
/// the marker of the iteration that sent it.
fn fill(buf: &mut [u8], mark: u8) {
    let size = buf.len();
    for (i, byte) in buf.iter_mut().enumerate() {
        *byte = (i.wrapping_mul(131).wrapping_add(size.wrapping_mul(7)) + 1) as u8;
    }
    if let Some(first) = buf.first_mut() {
        *first = mark;
    }
}

/// Puts iteration `it`'s marker into byte 0 of a buffer that [`fill`]
/// prepared: all a loop changes per iteration, so that the timed loop does
/// not rewrite whole messages.
fn stamp(buf: &mut [u8], it: u64) {
    if let Some(first) = buf.first_mut() {
        *first = mark(it);
    }
}

/// The marker of iteration `it`.
fn mark(it: u64) -> u8 {
    (it.wrapping_mul(37) + 11) as u8
}

/// Checks that `buf` holds what [`fill`] wrote with `mark`.
fn check(buf: &[u8], mark: u8) -> Result<(), String> {
    let mut want = vec![0; buf.len()];
    fill(&mut want, mark);
    match buf.iter().zip(&want).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(i) => Err(format!(
            "data check failed for a {}-byte message: byte {i} is {:#04x}, expected {:#04x}",
            buf.len(),
            buf[i],
            want[i]
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_checks_catch_a_wrong_byte_or_marker() {
        let mut buf = vec![0; 100];
        fill(&mut buf, mark(0));
        stamp(&mut buf, 3);
        assert!(check(&buf, mark(3)).is_ok());
        assert!(check(&buf, mark(4)).unwrap_err().contains("byte 0"));
        buf[57] ^= 1;
        assert!(check(&buf, mark(3)).unwrap_err().contains("byte 57"));
        assert!(check(&[], 0).is_ok());
    }
}

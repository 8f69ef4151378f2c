//! The collective loops (as osu_allreduce, osu_bcast, osu_barrier): every
//! process of every program takes part; the figure is the slowest
//! process's mean time per operation.

use std::time::Instant;

use tether::comm::COMM_UNIVERSE;
use tether::datatype::DATATYPES;
use tether::op::Op;
use tether::{Arg, Runtime};

use super::{elapsed_us, Counts};

fn datatype(name: &str) -> i32 {
    DATATYPES
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("{name} is a datatype"))
        .handle
}

fn allreduce_doubles(
    rt: &mut Runtime,
    input: &[f64],
    output: &mut [f64],
    op: Op,
) -> Result<(), String> {
    // SAFETY: both buffers outlive the call, which completes the allreduce.
    unsafe {
        rt.allreduce(
            input.as_ptr().cast(),
            output.as_mut_ptr().cast(),
            input.len() as i64,
            datatype("DOUBLE"),
            op as i32,
            COMM_UNIVERSE,
        )
    }
    .map_err(|e| e.to_string())
}

/// The largest of every process's `value`.
pub fn max_over_all(rt: &mut Runtime, value: f64) -> Result<f64, String> {
    let mut out = [0.0];
    allreduce_doubles(rt, &[value], &mut out, Op::Max)?;
    Ok(out[0])
}

fn barrier_once(rt: &mut Runtime) -> Result<(), String> {
    rt.barrier(COMM_UNIVERSE).map_err(|e| e.to_string())
}

/// Runs `op` for the warm-up and then the timed iterations (after a
/// barrier) and returns the slowest process's microseconds per operation.
fn timed(
    rt: &mut Runtime,
    counts: Counts,
    mut op: impl FnMut(&mut Runtime, u64) -> Result<(), String>,
) -> Result<f64, String> {
    for it in 0..counts.warmup {
        op(rt, it)?;
    }
    barrier_once(rt)?;
    let start = Instant::now();
    for it in 0..counts.iters {
        op(rt, it)?;
    }
    let mine = elapsed_us(start) / counts.iters as f64;
    max_over_all(rt, mine)
}

/// Allreduce of `size / 8` doubles with SUM; the result is checked once.
pub fn allreduce(rt: &mut Runtime, size: u64, counts: Counts) -> Result<f64, String> {
    let n = (size / 8) as usize;
    if n == 0 {
        return Err(format!(
            "allreduce needs at least 8 bytes (one double), not {size}"
        ));
    }
    let procs = f64::from(rt.universe().size());
    let me = f64::from(rt.universe().my_universe_rank());
    let input = vec![me + 1.0; n];
    let mut output = vec![0.0; n];
    allreduce_doubles(rt, &input, &mut output, Op::Sum)?;
    let want = procs * (procs + 1.0) / 2.0;
    if let Some(i) = output.iter().position(|v| *v != want) {
        return Err(format!(
            "allreduce result is wrong: element {i} is {}, expected {want}",
            output[i]
        ));
    }
    timed(rt, counts, |rt, _| {
        allreduce_doubles(rt, &input, &mut output, Op::Sum)
    })
}

fn bcast_once(rt: &mut Runtime, buf: &mut [u8], root: i32) -> Result<(), String> {
    let arg = Arg::new(buf.as_mut_ptr(), buf.len() as i64, datatype("BYTE"));
    // SAFETY: the buffer outlives the call, which completes the broadcast.
    unsafe { rt.bcast(arg, root, COMM_UNIVERSE) }.map_err(|e| e.to_string())
}

/// Broadcast of `size` bytes from a root that rotates over the processes
/// (as osu_bcast's default); the data is checked once.
pub fn bcast(rt: &mut Runtime, size: u64, counts: Counts) -> Result<f64, String> {
    let procs = rt.universe().size();
    let me = rt.universe().my_universe_rank();
    let mut buf = vec![if me == 0 { 7u8 } else { 0 }; size as usize];
    bcast_once(rt, &mut buf, 0)?;
    if let Some(i) = buf.iter().position(|b| *b != 7) {
        return Err(format!(
            "bcast result is wrong: byte {i} is {}, expected 7",
            buf[i]
        ));
    }
    timed(rt, counts, |rt, it| {
        bcast_once(rt, &mut buf, (it % u64::from(procs)) as i32)
    })
}

/// Barrier over every process.
pub fn barrier(rt: &mut Runtime, counts: Counts) -> Result<f64, String> {
    timed(rt, counts, |rt, _| barrier_once(rt))
}

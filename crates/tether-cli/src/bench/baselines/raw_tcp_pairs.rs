//! Raw TCP message rate (as osu_mbw_mr): `pairs` TCP connections on
//! 127.0.0.1, each between a sender process and a receiver process, all
//! streaming windows of messages (blocking sockets, a 4-byte ack per window)
//! at once after a barrier in shared memory. Messages per second of all
//! pairs, timed by the slowest sender, as Tether's mbw_mr.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::super::worker::{Counts, Point};
use super::fork::{all_children, spin_until, ChildResult};
use super::mapping::Mapping;

/// The barrier counter, then one elapsed-time slot (f64 bits) per size and
/// sender.
const BARRIER: usize = 0;
const SLOTS: usize = 64;

fn slot(size_index: usize, pairs: usize, sender: usize) -> usize {
    SLOTS + 8 * (size_index * pairs + sender)
}

/// Waits until all `pairs` senders arrived for generation `generation`
/// (1 for the first size, 2 for the second, ...).
fn barrier(counter: &AtomicU64, pairs: u64, generation: u64, deadline: Instant) -> ChildResult {
    counter.fetch_add(1, Ordering::AcqRel);
    spin_until(deadline, || {
        let arrived = counter.load(Ordering::Acquire) >= pairs * generation;
        if !arrived {
            std::thread::yield_now();
        }
        arrived
    })
}

/// What every sender shares.
struct Senders<'a> {
    plan: &'a [(u64, Counts)],
    window: u32,
    pairs: u64,
    counter: &'a AtomicU64,
    deadline: Instant,
}

/// One sender: per size, the barrier, then timed windows; its time goes to
/// `times[size index]`.
fn sender(all: &Senders, stream: &TcpStream, buf: &[u8], times: &[&AtomicU64]) -> ChildResult {
    let mut ack = [0u8; 4];
    for (k, (size, counts)) in all.plan.iter().enumerate() {
        let msg = &buf[..*size as usize];
        barrier(all.counter, all.pairs, k as u64 + 1, all.deadline)?;
        let mut start = Instant::now();
        for it in 0..counts.warmup + counts.iters {
            if it == counts.warmup {
                start = Instant::now();
            }
            for _ in 0..all.window {
                (&*stream)
                    .write_all(msg)
                    .map_err(|_| "raw TCP pairs: write failed")?;
            }
            (&*stream)
                .read_exact(&mut ack)
                .map_err(|_| "raw TCP pairs: no ack")?;
        }
        let us = start.elapsed().as_secs_f64() * 1e6;
        times[k].store(us.to_bits(), Ordering::Release);
    }
    Ok(())
}

fn receiver(
    stream: &TcpStream,
    plan: &[(u64, Counts)],
    window: u32,
    buf: &mut [u8],
) -> ChildResult {
    let ack = [0u8; 4];
    for (size, counts) in plan {
        let msg = &mut buf[..*size as usize];
        for _ in 0..counts.warmup + counts.iters {
            for _ in 0..window {
                (&*stream)
                    .read_exact(msg)
                    .map_err(|_| "raw TCP pairs: read failed")?;
            }
            (&*stream)
                .write_all(&ack)
                .map_err(|_| "raw TCP pairs: ack failed")?;
        }
    }
    Ok(())
}

/// Messages per second of `pairs` pairs per size (0-byte sizes left out).
pub fn message_rate(
    plan: &[(u64, Counts)],
    window: u32,
    pairs: u32,
    limit: Duration,
) -> Result<Vec<Point>, String> {
    let plan: Vec<(u64, Counts)> = plan.iter().copied().filter(|(s, _)| *s > 0).collect();
    let largest = plan.iter().map(|(s, _)| *s as usize).max().unwrap_or(1);
    let n = pairs as usize;
    let io = |e: std::io::Error| format!("raw TCP pairs setup: {e}");
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io)?;
    let mut links = Vec::with_capacity(n);
    for _ in 0..n {
        let out = TcpStream::connect(listener.local_addr().map_err(io)?).map_err(io)?;
        let (inn, _) = listener.accept().map_err(io)?;
        for s in [&out, &inn] {
            s.set_nodelay(true).map_err(io)?;
            s.set_read_timeout(Some(limit)).map_err(io)?;
        }
        links.push((out, inn));
    }
    let mapping = Mapping::new(slot(plan.len(), n, 0))?;
    let counter = mapping.atomic(BARRIER);
    let times: Vec<Vec<&AtomicU64>> = (0..n)
        .map(|i| {
            (0..plan.len())
                .map(|k| mapping.atomic(slot(k, n, i)))
                .collect()
        })
        .collect();
    let out_buf = vec![1u8; largest];
    let in_bufs: Vec<std::cell::RefCell<Vec<u8>>> = (0..n)
        .map(|_| std::cell::RefCell::new(vec![0u8; largest]))
        .collect();
    let senders = Senders {
        plan: &plan,
        window,
        pairs: u64::from(pairs),
        counter,
        deadline: Instant::now() + limit,
    };
    all_children(2 * n, |i| {
        if i < n {
            sender(&senders, &links[i].0, &out_buf, &times[i])
        } else {
            let mut buf = in_bufs[i - n].borrow_mut();
            receiver(&links[i - n].1, &plan, window, &mut buf)
        }
    })?;
    Ok(plan
        .iter()
        .enumerate()
        .map(|(k, (size, counts))| {
            let slowest = (0..n)
                .map(|i| f64::from_bits(times[i][k].load(Ordering::Acquire)))
                .fold(0.0, f64::max);
            let messages = u64::from(pairs) * u64::from(window) * counts.iters;
            Point {
                size: *size,
                value: messages as f64 / (slowest / 1e6),
            }
        })
        .collect())
}

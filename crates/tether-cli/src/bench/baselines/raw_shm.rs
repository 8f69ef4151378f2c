//! Raw shared memory between two processes: a ping-pong through a shared
//! mapping, each side busy-polling a sequence flag. A message is copied
//! into the mapping by its sender and out of it by its receiver (the two
//! copies of any copy-through-memory transport), then the flag is raised.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::super::worker::{Counts, Point};
use super::fork::{spin_until, with_child, ChildResult};

/// Offsets in the mapping: the two flags on their own cache lines, then
/// the ping and pong payload areas.
const PING_FLAG: usize = 0;
const PONG_FLAG: usize = 128;
const PAYLOAD: usize = 256;

/// A shared anonymous mapping, unmapped on drop.
struct Mapping {
    base: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> Result<Mapping, String> {
        // SAFETY: a fresh anonymous mapping; checked for failure.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!(
                "raw shm: mmap of {len} bytes failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Mapping {
            base: base.cast(),
            len,
        })
    }

    fn flag(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: offsets are 8-aligned and inside the mapping, which lives
        // as long as `self`; the memory is only accessed atomically here.
        unsafe { &*self.base.add(offset).cast::<AtomicU64>() }
    }

    /// The payload area of one direction (`0` ping, `1` pong).
    fn area(&self, direction: usize, largest: usize) -> *mut u8 {
        // SAFETY: inside the mapping, sized in `latency`.
        unsafe { self.base.add(PAYLOAD + direction * largest) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps what `new` mapped.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// One hop: copy `msg` into `area` and raise `flag` to `seq`.
fn post(msg: &[u8], area: *mut u8, flag: &AtomicU64, seq: u64) {
    // SAFETY: `area` has room for the largest message; the peer reads it
    // only after seeing `seq`, stored with release ordering after the copy.
    unsafe { std::ptr::copy_nonoverlapping(msg.as_ptr(), area, msg.len()) };
    flag.store(seq, Ordering::Release);
}

/// Waits for `flag` to reach `seq` and copies the message out of `area`.
fn take(
    msg: &mut [u8],
    area: *const u8,
    flag: &AtomicU64,
    seq: u64,
    deadline: Instant,
) -> ChildResult {
    spin_until(deadline, || flag.load(Ordering::Acquire) == seq)?;
    // SAFETY: the acquire load above orders this read after the copy in.
    unsafe { std::ptr::copy_nonoverlapping(area, msg.as_mut_ptr(), msg.len()) };
    Ok(())
}

/// Half the round trip per size, in microseconds.
pub fn latency(plan: &[(u64, Counts)], deadline: Instant) -> Result<Vec<Point>, String> {
    let largest = plan
        .iter()
        .map(|(s, _)| *s as usize)
        .max()
        .unwrap_or(0)
        .max(8);
    let mapping = Mapping::new(PAYLOAD + 2 * largest)?;
    let (ping, pong) = (mapping.flag(PING_FLAG), mapping.flag(PONG_FLAG));
    let (ping_area, pong_area) = (mapping.area(0, largest), mapping.area(1, largest));
    let mut buf = vec![0u8; largest];
    with_child(
        || {
            let mut seq = 0;
            for (size, counts) in plan {
                let msg = &mut buf[..*size as usize];
                for _ in 0..counts.warmup + counts.iters {
                    seq += 1;
                    take(msg, ping_area, ping, seq, deadline)?;
                    post(msg, pong_area, pong, seq);
                }
            }
            Ok(())
        },
        || {
            let mut points = Vec::new();
            let mut mine = vec![1u8; largest];
            let mut seq = 0;
            for (size, counts) in plan {
                let msg = &mut mine[..*size as usize];
                let mut start = Instant::now();
                for it in 0..counts.warmup + counts.iters {
                    if it == counts.warmup {
                        start = Instant::now();
                    }
                    seq += 1;
                    post(msg, ping_area, ping, seq);
                    take(msg, pong_area, pong, seq, deadline)?;
                }
                let us = start.elapsed().as_secs_f64() * 1e6;
                points.push(Point {
                    size: *size,
                    value: us / (2.0 * counts.iters as f64),
                });
            }
            Ok(points)
        },
    )
}

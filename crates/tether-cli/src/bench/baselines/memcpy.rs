//! memcpy bandwidth in one process: the ceiling of any transport that
//! copies a message once through memory.

use std::time::Instant;

use super::super::worker::{Counts, Point};

/// Copies each size `window` times per iteration between two buffers, in
/// MB/s (the same bytes a `bw` run moves).
pub fn bandwidth(plan: &[(u64, Counts)], window: u32) -> Vec<Point> {
    let largest = plan.iter().map(|(s, _)| *s as usize).max().unwrap_or(0);
    let src = vec![1u8; largest];
    let mut dst = vec![0u8; largest];
    plan.iter()
        .filter(|(size, _)| *size > 0)
        .map(|(size, counts)| {
            let n = *size as usize;
            let copies = u64::from(window);
            let mut start = Instant::now();
            for it in 0..counts.warmup + counts.iters {
                if it == counts.warmup {
                    start = Instant::now();
                }
                for _ in 0..copies {
                    dst[..n].copy_from_slice(std::hint::black_box(&src[..n]));
                    std::hint::black_box(&mut dst);
                }
            }
            let us = start.elapsed().as_secs_f64() * 1e6;
            Point {
                size: *size,
                value: (*size * copies * counts.iters) as f64 / us,
            }
        })
        .collect()
}

//! File write-then-read in one process: each message is written to a file
//! in the scratch directory (create, write, close) and read back (open,
//! read, close), as a file transport moves it, without fsync: the figure is
//! the page cache's, the best a shared file system could give.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::Instant;

use super::super::worker::{Counts, Point};

/// MB/s per size, one write and one read of `size` bytes per iteration.
pub fn bandwidth(plan: &[(u64, Counts)], dir: &Path) -> Result<Vec<Point>, String> {
    let path = dir.join("file-baseline.msg");
    let largest = plan.iter().map(|(s, _)| *s as usize).max().unwrap_or(0);
    let data = vec![1u8; largest];
    let mut back = vec![0u8; largest];
    let io = |e: std::io::Error| format!("file baseline on {}: {e}", path.display());
    let mut points = Vec::new();
    for (size, counts) in plan.iter().filter(|(s, _)| *s > 0) {
        let n = *size as usize;
        let mut start = Instant::now();
        for it in 0..counts.warmup + counts.iters {
            if it == counts.warmup {
                start = Instant::now();
            }
            std::fs::write(&path, &data[..n]).map_err(io)?;
            File::open(&path)
                .and_then(|mut f| f.read_exact(&mut back[..n]))
                .map_err(io)?;
        }
        let us = start.elapsed().as_secs_f64() * 1e6;
        points.push(Point {
            size: *size,
            value: (*size * counts.iters) as f64 / us,
        });
    }
    let _ = std::fs::remove_file(&path);
    Ok(points)
}

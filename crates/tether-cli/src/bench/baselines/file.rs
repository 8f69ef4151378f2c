//! File write-then-read in one process: each message is written to a new
//! file in the scratch directory (create, write, close, rename into place)
//! and read back (open, read, close, remove), as the file transport moves
//! it and as `benches/file/raw_file.c` does, without fsync: the figure is
//! the page cache's, the best a shared file system could give. A new file
//! per message, not one file rewritten: truncating a written file first
//! would charge the baseline for freeing its blocks, which no transfer
//! needs.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Instant;

use super::super::worker::{Counts, Point};

/// MB/s per size, one write and one read of `size` bytes per iteration.
pub fn bandwidth(plan: &[(u64, Counts)], dir: &Path) -> Result<Vec<Point>, String> {
    let temp = dir.join(".tmp-file-baseline");
    let path = dir.join("file-baseline.msg");
    let largest = plan.iter().map(|(s, _)| *s as usize).max().unwrap_or(0);
    let data = vec![1u8; largest];
    let mut back = vec![0u8; largest];
    let io = |e: std::io::Error| format!("file baseline in {}: {e}", dir.display());
    let mut points = Vec::new();
    for (size, counts) in plan.iter().filter(|(s, _)| *s > 0) {
        let n = *size as usize;
        let mut start = Instant::now();
        for it in 0..counts.warmup + counts.iters {
            if it == counts.warmup {
                start = Instant::now();
            }
            File::create_new(&temp)
                .and_then(|mut f| f.write_all(&data[..n]))
                .map_err(io)?;
            std::fs::rename(&temp, &path).map_err(io)?;
            File::open(&path)
                .and_then(|mut f| f.read_exact(&mut back[..n]))
                .map_err(io)?;
            std::fs::remove_file(&path).map_err(io)?;
        }
        let us = start.elapsed().as_secs_f64() * 1e6;
        points.push(Point {
            size: *size,
            value: (*size * counts.iters) as f64 / us,
        });
    }
    Ok(points)
}

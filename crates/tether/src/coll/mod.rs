//! Collective operations (DESIGN 3.5), built from point-to-point transfers.
//!
//! Each collective becomes a [`Schedule`] (pure data, built by the functions
//! of [`tree`], [`ring`] and [`pairwise`] from the caller's rank, the
//! communicator size and the sizes in bytes) that [`Running`] executes on
//! the engine whenever the runtime makes progress, so blocking and
//! non-blocking collectives are one mechanism. The algorithm is chosen by
//! message size and communicator size, as MPI libraries do; the thresholds
//! are in [`tuning`]. A communicator keeps the schedules it ran last
//! ([`cache`]), so a collective called in a loop is not planned again.

pub mod cache;
pub mod exec;
pub mod pairwise;
pub mod ring;
pub mod schedule;
pub mod tree;
pub mod tuning;

#[cfg(test)]
mod tests;

pub use exec::{Buffers, Channel, Failure, NoShortcut, Received, Running, ScratchPool, Shortcut};
pub use schedule::{Buf, Schedule, Span};

/// This process's place in the communicator a collective runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub rank: u32,
    pub size: u32,
}

impl Shape {
    /// Rank relative to `root` (the root is 0).
    pub fn relative(self, root: u32) -> u32 {
        (self.rank + self.size - root) % self.size
    }

    /// The real rank of relative rank `v` for `root`.
    pub fn real(self, v: u32, root: u32) -> u32 {
        (v + root) % self.size
    }

    /// `rank + k` around the ring (k may be negative).
    pub fn step(self, k: i64) -> u32 {
        (self.rank as i64 + k).rem_euclid(self.size as i64) as u32
    }
}

/// Splits `count` elements of `elem` bytes into `parts` contiguous chunks
/// as equal as possible: (byte offset, byte length) of each.
pub fn chunks(count: usize, elem: usize, parts: u32) -> Vec<(usize, usize)> {
    let parts = parts as usize;
    let base = count / parts;
    let extra = count % parts;
    let mut offset = 0;
    (0..parts)
        .map(|i| {
            let len = (base + usize::from(i < extra)) * elem;
            let chunk = (offset, len);
            offset += len;
            chunk
        })
        .collect()
}

/// `parts` blocks of `block` bytes, back to back: (byte offset, length).
pub fn uniform(parts: u32, block: usize) -> Vec<(usize, usize)> {
    (0..parts as usize).map(|i| (i * block, block)).collect()
}

//! The buffers a field packs steps into and receives strided parts in,
//! kept from one step to the next in the project's [`BufferPool`]: every
//! step of a field has the same sizes, so after the first step no buffer
//! is allocated, zeroed or faulted in again. This file adds only the
//! field's policy: which buffers are worth keeping.

use tether_proto::pool::BufferPool;

/// Buffers below this size are neither kept nor taken from the pool:
/// control words and small parts cost less to allocate than a large
/// kept buffer would waste.
const SMALLEST_KEPT: usize = 4096;

/// Enough for every part of a few steps in flight.
const KEPT: usize = 64;

/// A field's spare buffers.
pub(super) struct Spares {
    pool: BufferPool,
}

impl Default for Spares {
    fn default() -> Spares {
        Spares {
            pool: BufferPool::new(KEPT, usize::MAX),
        }
    }
}

impl Spares {
    /// A buffer of exactly `len` bytes (their values are whatever the last
    /// user left: callers overwrite all of them).
    pub fn take(&mut self, len: usize) -> Vec<u8> {
        if len < SMALLEST_KEPT {
            return vec![0; len];
        }
        self.pool.take(len)
    }

    /// Keeps `buffer` for a later step.
    pub fn give(&mut self, buffer: Vec<u8>) {
        if buffer.capacity() >= SMALLEST_KEPT {
            self.pool.give(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_buffers_come_back_small_ones_are_not_kept() {
        let mut spares = Spares::default();
        let a = spares.take(10_000);
        let ptr = a.as_ptr();
        spares.give(a);
        let b = spares.take(8_000);
        assert_eq!((b.len(), b.as_ptr()), (8_000, ptr), "the spare is reused");
        spares.give(vec![0; 16]);
        assert_eq!(
            spares.take(16).capacity(),
            16,
            "small buffers are plain allocations"
        );
        spares.give(b);
        assert_eq!(spares.take(12_000).len(), 12_000);
    }
}

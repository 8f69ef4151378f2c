//! The buffers a field packs steps into and receives strided parts in,
//! kept from one step to the next: every step of a field has the same
//! sizes, so after the first step no buffer is allocated, zeroed or
//! faulted in again (a fresh 8 MiB buffer costs about as much in page
//! faults as packing it).

/// Buffers below this size are not kept: control words and small parts
/// cost less to allocate than to look up.
const SMALLEST_KEPT: usize = 4096;

/// Spare buffers, at most [`Spares::LIMIT`] of them.
#[derive(Default)]
pub(super) struct Spares {
    buffers: Vec<Vec<u8>>,
}

impl Spares {
    /// Enough for every part of a few steps in flight.
    const LIMIT: usize = 64;

    /// A buffer of exactly `len` initialized bytes (their values are
    /// whatever the last user left: callers overwrite all of them). The
    /// smallest spare that fits is taken; a smaller one is never grown,
    /// since parts of a step differ in size and growing would reallocate
    /// every step.
    pub fn take(&mut self, len: usize) -> Vec<u8> {
        if len < SMALLEST_KEPT {
            return vec![0; len];
        }
        let best = (0..self.buffers.len())
            .filter(|&i| self.buffers[i].capacity() >= len)
            .min_by_key(|&i| self.buffers[i].capacity());
        let Some(index) = best else {
            return vec![0; len];
        };
        let mut buffer = self.buffers.swap_remove(index);
        if buffer.len() >= len {
            buffer.truncate(len);
        } else {
            buffer.resize(len, 0);
        }
        buffer
    }

    /// Keeps `buffer` for a later step.
    pub fn give(&mut self, buffer: Vec<u8>) {
        if buffer.capacity() >= SMALLEST_KEPT && self.buffers.len() < Self::LIMIT {
            self.buffers.push(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_at_the_size_asked() {
        let mut spares = Spares::default();
        let a = spares.take(10_000);
        let ptr = a.as_ptr();
        spares.give(a);
        let b = spares.take(8_000);
        assert_eq!((b.len(), b.as_ptr()), (8_000, ptr), "the spare is reused");
        spares.give(b);
        spares.give(vec![0; 20_000]);
        let c = spares.take(12_000);
        assert_eq!(
            (c.len(), c.capacity()),
            (12_000, 20_000),
            "the smallest that fits"
        );
        let d = spares.take(30_000);
        assert_eq!(d.len(), 30_000, "none fits: a new one");
        assert_eq!(
            spares.take(16).len(),
            16,
            "small buffers are plain allocations"
        );
    }
}

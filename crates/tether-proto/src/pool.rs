//! Byte buffers kept for reuse: the engine's buffers of eager messages
//! that arrive before their receive, the runtime's scratch buffers of
//! collectives, TCP's stages for gathered runs. All are needed again and
//! again at the same sizes, and an
//! allocation, zeroing and free each time cost about a tenth of a small
//! collective's instructions.

/// Buffers given back, up to a count and a size.
#[derive(Debug)]
pub struct BufferPool {
    free: Vec<Vec<u8>>,
    keep: usize,
    max_bytes: usize,
}

impl BufferPool {
    /// A pool that keeps at most `keep` buffers, none larger than
    /// `max_bytes` (larger ones cost little to allocate next to moving
    /// their bytes, and would hold memory).
    pub fn new(keep: usize, max_bytes: usize) -> BufferPool {
        BufferPool {
            free: Vec::new(),
            keep,
            max_bytes,
        }
    }

    /// A buffer of `len` bytes whose contents are unspecified (old,
    /// initialized bytes of an earlier use, or zeros): for a caller that
    /// writes all of it before it reads any. The smallest kept buffer that
    /// fits is taken, so that buffers of a few sizes used in turn (the
    /// parts of a field's step) each keep finding their own.
    pub fn take(&mut self, len: usize) -> Vec<u8> {
        let best = (0..self.free.len())
            .filter(|&i| self.free[i].capacity() >= len)
            .min_by_key(|&i| self.free[i].capacity());
        match best {
            Some(at) => {
                let mut buf = self.free.swap_remove(at);
                if buf.len() >= len {
                    buf.truncate(len);
                } else {
                    buf.resize(len, 0);
                }
                buf
            }
            None => vec![0; len],
        }
    }

    /// Bytes the kept buffers hold (their capacities).
    pub fn bytes(&self) -> usize {
        self.free.iter().map(Vec::capacity).sum()
    }

    /// Keeps `buf` for a later [`BufferPool::take`], within the bounds.
    pub fn give(&mut self, buf: Vec<u8>) {
        if self.free.len() < self.keep && buf.capacity() <= self.max_bytes {
            self.free.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_at_the_size_asked_and_within_the_bounds() {
        let mut pool = BufferPool::new(2, 64);
        pool.give(vec![7; 32]);
        let buf = pool.take(16);
        assert_eq!(buf.len(), 16);
        assert_eq!(buf.capacity(), 32, "the buffer given back, reused");
        pool.give(buf);
        assert_eq!(pool.take(32).len(), 32, "grown back within its capacity");
        assert_eq!(pool.take(8), vec![0; 8], "none kept: a new, zeroed one");
        pool.give(vec![0; 100]);
        pool.give(vec![0; 10]);
        pool.give(vec![0; 10]);
        pool.give(vec![0; 10]);
        assert_eq!(
            pool.free.len(),
            2,
            "too large and beyond `keep` are dropped"
        );
        let mut pool = BufferPool::new(4, 1 << 20);
        pool.give(vec![0; 3000]);
        pool.give(vec![0; 1000]);
        pool.give(vec![0; 2000]);
        assert_eq!(pool.take(1500).capacity(), 2000, "the smallest that fits");
    }
}

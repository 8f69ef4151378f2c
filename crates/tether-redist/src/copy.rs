//! Pack and unpack: walk a plan's pieces in canonical order and copy
//! between the local buffer and the message.
//!
//! The walk is a nested loop over dimensions that expands the run lists
//! lazily. Trailing dimensions whose indices are contiguous in local memory
//! in message order are fused into one block first, so that a whole row (or
//! a whole piece) is a single `copy_from_slice`; only what remains strided
//! is copied block by block.

use crate::plan::{PeerPlan, Segment};

/// `count` blocks of `block` elements; the first at local element
/// `offset`, each next one `stride` elements further. Consecutive in the
/// message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chunk {
    offset: usize,
    block: usize,
    count: usize,
    stride: usize,
}

impl Segment {
    /// Calls `f` with each chunk in message order until it returns false;
    /// returns false if it was stopped.
    fn for_each_chunk(&self, f: &mut dyn FnMut(Chunk) -> bool) -> bool {
        let strides = &self.strides;
        // Fuse from the message-fastest dimension outwards while each one
        // is one contiguous run laid out right after the inner block.
        let mut block = 1i64;
        let mut offset = self.base;
        let mut open = self.dims.len();
        while open > 0 {
            let d = open - 1;
            let Some((start, len)) = self.dims[d].contiguous() else {
                break;
            };
            if len != 1 && strides[d] != block {
                break;
            }
            offset += start * strides[d];
            if len != 1 {
                block *= len;
            }
            open -= 1;
        }
        if open == 0 {
            return f(Chunk {
                offset: offset as usize,
                block: block as usize,
                count: 1,
                stride: 0,
            });
        }
        self.walk(0, open - 1, offset, block, f)
    }

    /// Dimensions `level..inner` are expanded index by index; `inner` run
    /// by run, each run giving one chunk.
    fn walk(
        &self,
        level: usize,
        inner: usize,
        offset: i64,
        block: i64,
        f: &mut dyn FnMut(Chunk) -> bool,
    ) -> bool {
        let stride = self.strides[level];
        if level == inner {
            for (start, len) in self.dims[level].iter() {
                let offset = (offset + start * stride) as usize;
                let chunk = if stride == block {
                    Chunk {
                        offset,
                        block: (block * len) as usize,
                        count: 1,
                        stride: 0,
                    }
                } else {
                    Chunk {
                        offset,
                        block: block as usize,
                        count: len as usize,
                        stride: stride as usize,
                    }
                };
                if !f(chunk) {
                    return false;
                }
            }
            return true;
        }
        for (start, len) in self.dims[level].iter() {
            for i in start..start + len {
                if !self.walk(level + 1, inner, offset + i * stride, block, f) {
                    return false;
                }
            }
        }
        true
    }
}

/// `(first, count)` when the pieces, in order, are one contiguous range of
/// the local buffer. Stops at the first gap, so it costs little either way.
pub(crate) fn contiguous(segments: &[Segment]) -> Option<(u64, u64)> {
    let mut range: Option<(usize, usize)> = None;
    for segment in segments {
        let whole = segment.for_each_chunk(&mut |c| {
            if c.count != 1 && c.stride != c.block {
                return false;
            }
            let len = c.block * c.count;
            match range {
                None => range = Some((c.offset, len)),
                Some((first, total)) if first + total == c.offset => {
                    range = Some((first, total + len))
                }
                Some(_) => return false,
            }
            true
        });
        if !whole {
            return None;
        }
    }
    range.map(|(first, total)| (first as u64, total as u64))
}

impl PeerPlan {
    /// Gathers my local elements of this message into `out` in canonical
    /// order. `out.len()` must be `elements() * elem_size`; `local` is my
    /// whole local buffer.
    pub fn pack(&self, local: &[u8], elem_size: usize, out: &mut [u8]) {
        assert_eq!(
            out.len() as u64,
            self.elements() * elem_size as u64,
            "pack: the message buffer must hold elements() * elem_size bytes"
        );
        let mut pos = 0;
        for segment in self.segments() {
            segment.for_each_chunk(&mut |c| {
                pos = copy_chunk(c, elem_size, pos, &mut |l, m, n| {
                    out[m..m + n].copy_from_slice(&local[l..l + n]);
                });
                true
            });
        }
    }

    /// Scatters a message in canonical order into my local buffer.
    /// `input.len()` must be `elements() * elem_size`.
    pub fn unpack(&self, input: &[u8], elem_size: usize, local: &mut [u8]) {
        assert_eq!(
            input.len() as u64,
            self.elements() * elem_size as u64,
            "unpack: the message must hold elements() * elem_size bytes"
        );
        let mut pos = 0;
        for segment in self.segments() {
            segment.for_each_chunk(&mut |c| {
                pos = copy_chunk(c, elem_size, pos, &mut |l, m, n| {
                    local[l..l + n].copy_from_slice(&input[m..m + n]);
                });
                true
            });
        }
    }
}

/// Calls `copy(local byte, message byte, bytes)` for each contiguous piece
/// of `chunk`, the message side starting at `pos`; returns the next `pos`.
fn copy_chunk(
    c: Chunk,
    elem_size: usize,
    pos: usize,
    copy: &mut dyn FnMut(usize, usize, usize),
) -> usize {
    let bytes = c.block * elem_size;
    if c.count == 1 || c.stride == c.block {
        let total = bytes * c.count;
        copy(c.offset * elem_size, pos, total);
        return pos + total;
    }
    let mut pos = pos;
    let mut local = c.offset * elem_size;
    for _ in 0..c.count {
        copy(local, pos, bytes);
        local += c.stride * elem_size;
        pos += bytes;
    }
    pos
}

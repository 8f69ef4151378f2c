//! Pack and unpack: walk a plan's pieces in canonical order and copy
//! between the local buffer and the message.
//!
//! The walk is a nested loop over dimensions that expands the run lists
//! lazily. Trailing dimensions whose indices are contiguous in local memory
//! in message order are fused into one block first, so that a whole row (or
//! a whole piece) is a single `copy_from_slice`. What stays strided (a
//! transpose between C and Fortran storage) is copied in square tiles so
//! that both the message and the local buffer are touched a cache line at
//! a time.

use crate::plan::{PeerPlan, Segment};

/// `rows x cols` cells of `block` elements, in the message one after the
/// other (row-major); cell `(r, c)` at local element
/// `offset + r*row_stride + c*col_stride`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tile {
    offset: usize,
    rows: usize,
    row_stride: usize,
    cols: usize,
    col_stride: usize,
    block: usize,
}

impl Tile {
    fn flat(offset: usize, len: usize) -> Tile {
        Tile {
            offset,
            rows: 1,
            row_stride: 0,
            cols: 1,
            col_stride: 0,
            block: len,
        }
    }

    /// The local range when the cells lie back to back.
    fn as_range(&self) -> Option<(usize, usize)> {
        let row_len = if self.cols == 1 || self.col_stride == self.block {
            self.cols * self.block
        } else {
            return None;
        };
        (self.rows == 1 || self.row_stride == row_len).then_some((self.offset, self.rows * row_len))
    }
}

/// How a piece is walked: dimensions `fused..` are one block of `block`
/// elements at local `offset`; `fused == 0` makes the piece one range.
struct Shape {
    offset: i64,
    block: i64,
    fused: usize,
}

fn fuse(s: &Segment<'_>) -> Shape {
    let groups = &s.table.groups;
    let mut shape = Shape {
        offset: s.base(),
        block: 1,
        fused: s.table.ndims,
    };
    // From the message-fastest dimension outwards, while each one is one
    // contiguous run laid out right after the block so far.
    while shape.fused > 0 {
        let d = shape.fused - 1;
        let Some((start, len)) = s.runs(d).contiguous(groups) else {
            break;
        };
        let stride = s.stride(d);
        if len != 1 && stride != shape.block {
            break;
        }
        shape.offset += start * stride;
        shape.block *= len;
        shape.fused = d;
    }
    shape
}

/// Calls `f` with the tiles of a piece in message order until it returns
/// false; returns false if it was stopped.
fn for_each_tile(s: &Segment<'_>, f: &mut impl FnMut(Tile) -> bool) -> bool {
    let shape = fuse(s);
    if shape.fused == 0 {
        return f(Tile::flat(shape.offset as usize, shape.block as usize));
    }
    let inner = shape.fused - 1;
    let groups = &s.table.groups;
    let stride = s.stride(inner);
    // A strided innermost dimension that is one run makes every run of the
    // dimension outside it a 2-D tile: a transpose, copied tile by tile.
    if stride != shape.block && inner > 0 {
        if let Some((start, len)) = s.runs(inner).contiguous(groups) {
            let outer = inner - 1;
            let cols = Tile {
                offset: 0,
                rows: 0,
                row_stride: s.stride(outer) as usize,
                cols: len as usize,
                col_stride: stride as usize,
                block: shape.block as usize,
            };
            let offset = shape.offset + start * stride;
            return walk(s, 0, outer, offset, &mut |offset, (first, rows)| {
                f(Tile {
                    offset: (offset + first * s.stride(outer)) as usize,
                    rows: rows as usize,
                    ..cols
                })
            });
        }
    }
    walk(s, 0, inner, shape.offset, &mut |offset, (first, len)| {
        let offset = (offset + first * stride) as usize;
        f(if stride == shape.block {
            Tile::flat(offset, (shape.block * len) as usize)
        } else {
            Tile {
                offset,
                rows: 1,
                row_stride: 0,
                cols: len as usize,
                col_stride: stride as usize,
                block: shape.block as usize,
            }
        })
    })
}

/// Expands dimensions `level..last` index by index and hands each run of
/// dimension `last`, with the offset reached, to `f`.
fn walk(
    s: &Segment<'_>,
    level: usize,
    last: usize,
    offset: i64,
    f: &mut impl FnMut(i64, (i64, i64)) -> bool,
) -> bool {
    let groups = &s.table.groups;
    if level == last {
        return s.runs(level).iter(groups).all(|run| f(offset, run));
    }
    let stride = s.stride(level);
    for (start, len) in s.runs(level).iter(groups) {
        for i in start..start + len {
            if !walk(s, level + 1, last, offset + i * stride, f) {
                return false;
            }
        }
    }
    true
}

/// `(first, count)` when the pieces, in order, are one contiguous range of
/// the local buffer.
///
/// A piece is one range exactly when all its dimensions fuse: the fused
/// dimensions are the storage-fastest ones, so the first dimension that
/// does not fuse has a stride at least the fused block and either a gap in
/// its indices or a stride above the block; both leave a hole after the
/// first block. So this costs O(dimensions) a piece, with no walk.
pub(crate) fn contiguous<'a>(segments: impl Iterator<Item = Segment<'a>>) -> Option<(u64, u64)> {
    let mut range: Option<(i64, i64)> = None;
    for segment in segments {
        let shape = fuse(&segment);
        if shape.fused != 0 {
            return None;
        }
        range = match range {
            None => Some((shape.offset, shape.block)),
            Some((first, total)) if first + total == shape.offset => {
                Some((first, total + shape.block))
            }
            Some(_) => return None,
        };
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
            for_each_tile(&segment, &mut |t| {
                let bytes = t.rows * t.cols * t.block * elem_size;
                copy_tile::<Gather>(t, elem_size, local, &mut out[pos..pos + bytes]);
                pos += bytes;
                true
            });
        }
    }

    /// The message as ranges of my local buffer, in canonical order:
    /// `(first byte, bytes)` for elements of `elem_size` bytes, adjacent
    /// ranges merged. A transport can then gather them (`writev`,
    /// `process_vm_writev`) instead of packing. `None` when a piece is a
    /// transpose (its cells are not in message order in memory).
    pub fn byte_runs(&self, elem_size: usize) -> Option<Vec<(usize, usize)>> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut ok = true;
        for segment in self.segments() {
            ok = for_each_tile(&segment, &mut |t| {
                let Some((offset, len)) = t.as_range() else {
                    return false;
                };
                let (first, bytes) = (offset * elem_size, len * elem_size);
                match runs.last_mut() {
                    Some((start, n)) if *start + *n == first => *n += bytes,
                    _ => runs.push((first, bytes)),
                }
                true
            });
            if !ok {
                break;
            }
        }
        ok.then_some(runs)
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
            for_each_tile(&segment, &mut |t| {
                let bytes = t.rows * t.cols * t.block * elem_size;
                copy_tile::<Scatter>(t, elem_size, &mut *local, &input[pos..pos + bytes]);
                pos += bytes;
                true
            });
        }
    }
}

/// The direction of a copy, so that one tiling loop serves both.
trait Direction {
    type Local<'a>;
    type Message<'a>;
    fn cell<const N: usize>(
        local: &mut Self::Local<'_>,
        l: usize,
        message: &mut Self::Message<'_>,
        m: usize,
    );
    fn bytes(
        local: &mut Self::Local<'_>,
        l: usize,
        message: &mut Self::Message<'_>,
        m: usize,
        n: usize,
    );
}

/// Local buffer to message (pack).
struct Gather;

/// Message to local buffer (unpack).
struct Scatter;

impl Direction for Gather {
    type Local<'a> = &'a [u8];
    type Message<'a> = &'a mut [u8];

    #[inline(always)]
    fn cell<const N: usize>(local: &mut &[u8], l: usize, message: &mut &mut [u8], m: usize) {
        let cell: [u8; N] = local[l..l + N].try_into().expect("N bytes");
        message[m..m + N].copy_from_slice(&cell);
    }

    #[inline(always)]
    fn bytes(local: &mut &[u8], l: usize, message: &mut &mut [u8], m: usize, n: usize) {
        message[m..m + n].copy_from_slice(&local[l..l + n]);
    }
}

impl Direction for Scatter {
    type Local<'a> = &'a mut [u8];
    type Message<'a> = &'a [u8];

    #[inline(always)]
    fn cell<const N: usize>(local: &mut &mut [u8], l: usize, message: &mut &[u8], m: usize) {
        let cell: [u8; N] = message[m..m + N].try_into().expect("N bytes");
        local[l..l + N].copy_from_slice(&cell);
    }

    #[inline(always)]
    fn bytes(local: &mut &mut [u8], l: usize, message: &mut &[u8], m: usize, n: usize) {
        local[l..l + n].copy_from_slice(&message[m..m + n]);
    }
}

/// Side of the square tiles a transpose is cut into, in cells: 16 cells of
/// up to 16 bytes each way stay within a few KiB.
const TILE: usize = 16;

fn copy_tile<D: Direction>(
    t: Tile,
    es: usize,
    mut local: D::Local<'_>,
    mut message: D::Message<'_>,
) {
    if let Some((offset, len)) = t.as_range() {
        D::bytes(&mut local, offset * es, &mut message, 0, len * es);
        return;
    }
    let cell = t.block * es;
    match cell {
        1 => tiled::<D, 1>(t, es, &mut local, &mut message),
        2 => tiled::<D, 2>(t, es, &mut local, &mut message),
        4 => tiled::<D, 4>(t, es, &mut local, &mut message),
        8 => tiled::<D, 8>(t, es, &mut local, &mut message),
        16 => tiled::<D, 16>(t, es, &mut local, &mut message),
        _ => {
            let row_bytes = t.cols * cell;
            for r in 0..t.rows {
                for c in 0..t.cols {
                    let l = (t.offset + r * t.row_stride + c * t.col_stride) * es;
                    D::bytes(&mut local, l, &mut message, r * row_bytes + c * cell, cell);
                }
            }
        }
    }
}

/// Cells of `N` bytes, square tile by square tile.
fn tiled<D: Direction, const N: usize>(
    t: Tile,
    es: usize,
    local: &mut D::Local<'_>,
    message: &mut D::Message<'_>,
) {
    let row_bytes = t.cols * N;
    for r0 in (0..t.rows).step_by(TILE) {
        let r1 = (r0 + TILE).min(t.rows);
        for c0 in (0..t.cols).step_by(TILE) {
            let c1 = (c0 + TILE).min(t.cols);
            // Inside a tile, run along whichever side is sequential in the
            // local buffer: a transpose's message side is in cache anyway.
            if t.row_stride < t.col_stride {
                for c in c0..c1 {
                    let column = t.offset + c * t.col_stride;
                    for r in r0..r1 {
                        let l = (column + r * t.row_stride) * es;
                        D::cell::<N>(local, l, message, r * row_bytes + c * N);
                    }
                }
            } else {
                for r in r0..r1 {
                    let row = t.offset + r * t.row_stride;
                    for c in c0..c1 {
                        let l = (row + c * t.col_stride) * es;
                        D::cell::<N>(local, l, message, r * row_bytes + c * N);
                    }
                }
            }
        }
    }
}

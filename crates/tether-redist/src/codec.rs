//! The descriptor's bytes, exchanged between programs at field creation.
//!
//! Layout, little-endian: magic `TDST`, version `u8`, order `u8` (0 C,
//! 1 Fortran), layout `u8` (0 regular, 1 boxes), ndims `u32`, shape
//! `i64 x ndims`; then for a grid `i64 x ndims` extents and per dimension a
//! kind tag `u8` (0 BLOCK, 1 CYCLIC, 2 BLOCK_CYCLIC followed by its `i64`
//! block, 3 NONE); for boxes a rank count `u64` and per rank a box count
//! `u64` and per box `i64 x ndims` starts then `i64 x ndims` counts.
//!
//! Decoding reads from a bounds-checked cursor, sizes every allocation by
//! the bytes actually left, and ends in the same validation as the
//! constructors, so no input can make it panic or allocate more than a
//! small multiple of its length.

use crate::dist::{Dist, DistError, Kind, Layout, Order, Region, MAX_DIMS};

const MAGIC: &[u8; 4] = b"TDST";
const VERSION: u8 = 1;

pub(crate) fn encode(dist: &Dist) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.push(match dist.order() {
        Order::C => 0,
        Order::Fortran => 1,
    });
    let i64s = |out: &mut Vec<u8>, values: &[i64]| {
        for v in values {
            out.extend_from_slice(&v.to_le_bytes());
        }
    };
    match dist.layout() {
        Layout::Regular { .. } => out.push(0),
        Layout::Boxes(_) => out.push(1),
    }
    out.extend_from_slice(&(dist.ndims() as u32).to_le_bytes());
    i64s(&mut out, dist.shape());
    match dist.layout() {
        Layout::Regular { grid, kinds } => {
            i64s(&mut out, grid);
            for kind in kinds {
                match *kind {
                    Kind::Block => out.push(0),
                    Kind::Cyclic => out.push(1),
                    Kind::BlockCyclic(b) => {
                        out.push(2);
                        i64s(&mut out, &[b]);
                    }
                    Kind::None => out.push(3),
                }
            }
        }
        Layout::Boxes(ranks) => {
            out.extend_from_slice(&(ranks.len() as u64).to_le_bytes());
            for boxes in ranks {
                out.extend_from_slice(&(boxes.len() as u64).to_le_bytes());
                for region in boxes {
                    i64s(&mut out, &region.start);
                    i64s(&mut out, &region.count);
                }
            }
        }
    }
    out
}

pub(crate) fn decode(bytes: &[u8]) -> Result<Dist, DistError> {
    let mut r = Reader { bytes };
    if r.take(4)? != MAGIC {
        return Err(DistError::Decode("not a distribution descriptor"));
    }
    if r.u8()? != VERSION {
        return Err(DistError::Decode("unknown version"));
    }
    let order = match r.u8()? {
        0 => Order::C,
        1 => Order::Fortran,
        _ => return Err(DistError::Decode("unknown order")),
    };
    let layout = r.u8()?;
    let ndims = r.u32()? as usize;
    // Checked before anything is sized by it: with no dimension a box
    // would take no bytes and the box counts below would be unbounded.
    if ndims == 0 {
        return Err(DistError::NoDims);
    }
    if ndims > MAX_DIMS {
        return Err(DistError::TooManyDims { ndims });
    }
    let shape = r.i64s(ndims)?;
    let dist = match layout {
        0 => {
            let grid = r.i64s(ndims)?;
            let kinds = (0..ndims)
                .map(|_| match r.u8()? {
                    0 => Ok(Kind::Block),
                    1 => Ok(Kind::Cyclic),
                    2 => Ok(Kind::BlockCyclic(r.i64()?)),
                    3 => Ok(Kind::None),
                    _ => Err(DistError::Decode("unknown kind")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Dist::regular(&shape, &grid, &kinds, order)?
        }
        1 => {
            let nranks = r.count(8)?;
            let mut ranks = Vec::with_capacity(nranks);
            for _ in 0..nranks {
                let nboxes = r.count(16 * ndims)?;
                let mut boxes = Vec::with_capacity(nboxes);
                for _ in 0..nboxes {
                    let start = r.i64s(ndims)?;
                    let count = r.i64s(ndims)?;
                    boxes.push(Region::new(start, count));
                }
                ranks.push(boxes);
            }
            Dist::boxes(&shape, ranks, order)?
        }
        _ => return Err(DistError::Decode("unknown layout")),
    };
    if !r.bytes.is_empty() {
        return Err(DistError::Decode("trailing bytes"));
    }
    Ok(dist)
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DistError> {
        if self.bytes.len() < n {
            return Err(DistError::Decode("truncated"));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, DistError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, DistError> {
        let mut b = [0; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }

    fn i64(&mut self) -> Result<i64, DistError> {
        let mut b = [0; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(i64::from_le_bytes(b))
    }

    fn i64s(&mut self, n: usize) -> Result<Vec<i64>, DistError> {
        if self.bytes.len() / 8 < n {
            return Err(DistError::Decode("truncated"));
        }
        (0..n).map(|_| self.i64()).collect()
    }

    /// A `u64` count of items that take at least `each` bytes apiece,
    /// refused when the bytes left cannot hold that many.
    fn count(&mut self, each: usize) -> Result<usize, DistError> {
        let n = self.i64()? as u64;
        if n > (self.bytes.len() / each) as u64 {
            return Err(DistError::Decode("count larger than the bytes left"));
        }
        Ok(n as usize)
    }
}

//! Requests: the user buffers they name, their identities on the wire and
//! how they completed.

/// A user buffer: start and length.
///
/// The engine never dereferences a `Region` itself except to copy between
/// two regions it was given (self-sends, unexpected messages). Whoever
/// creates a region promises what MPI promises: the memory stays valid and
/// is not touched by the program until the request naming it completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub ptr: *mut u8,
    pub len: usize,
}

// SAFETY: a Region is an address and a length; the promise above, not the
// type, is what makes access through it sound, and it holds across threads.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Region {
    /// A region for a buffer the engine will only read from.
    pub fn from_const(ptr: *const u8, len: usize) -> Region {
        Region {
            ptr: ptr as *mut u8,
            len,
        }
    }

    /// The first `len` bytes of this region.
    pub fn prefix(self, len: usize) -> Region {
        Region {
            ptr: self.ptr,
            len: len.min(self.len),
        }
    }

    /// The `len` bytes from `offset` on (cut at the region's end).
    pub fn slice(self, offset: usize, len: usize) -> Region {
        let offset = offset.min(self.len);
        Region {
            // SAFETY: `offset` is within the region (or at its end).
            ptr: unsafe { self.ptr.add(offset) },
            len: len.min(self.len - offset),
        }
    }

    /// Copies as much of `src` as fits; returns the number of bytes copied.
    ///
    /// # Safety
    /// Both regions must be valid as promised at creation and must not overlap.
    pub unsafe fn copy_from(self, src: &[u8]) -> usize {
        let n = src.len().min(self.len);
        if n > 0 {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr, n);
        }
        n
    }

    /// The bytes of the region.
    ///
    /// # Safety
    /// The region must be valid for reads as promised at creation.
    pub unsafe fn as_slice<'a>(self) -> &'a [u8] {
        if self.len == 0 {
            &[]
        } else {
            std::slice::from_raw_parts(self.ptr, self.len)
        }
    }
}

/// A send's data as runs in the sender's memory, in message order: the
/// transport gathers them (one `writev`, one cross-memory copy) instead of
/// the sender packing them into one buffer first. Cheap to clone (the
/// runs are shared); a gather may be a part of its runs (a prefix, or a
/// slice: `start` bytes in, `len` bytes long).
#[derive(Debug, Clone)]
pub struct Gather {
    shared: std::sync::Arc<Runs>,
    start: usize,
    len: usize,
}

/// A gather's runs and where each starts in the message (for finding a
/// position without walking the runs before it).
#[derive(Debug)]
struct Runs {
    runs: Vec<Region>,
    starts: Vec<usize>,
}

impl Gather {
    /// The message made of `runs`, in order. Each run must stay valid for
    /// reads until the send that carries it completes.
    pub fn new(runs: Vec<Region>) -> Gather {
        let mut starts = Vec::with_capacity(runs.len());
        let mut len = 0usize;
        for run in &runs {
            starts.push(len);
            len += run.len;
        }
        Gather {
            shared: std::sync::Arc::new(Runs { runs, starts }),
            start: 0,
            len,
        }
    }

    /// Bytes in the message.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Runs this message's bytes lie in (a slice of a gather counts the
    /// runs it reaches into, not all of the gather's).
    pub fn runs(&self) -> usize {
        if self.len == 0 {
            return 0;
        }
        let starts = &self.shared.starts;
        let first = starts.partition_point(|&s| s <= self.start) - 1;
        let end = starts.partition_point(|&s| s < self.start + self.len);
        end - first
    }

    /// The first `len` bytes of the message.
    pub fn prefix(&self, len: usize) -> Gather {
        self.slice(0, len)
    }

    /// The `len` bytes from `offset` on (cut at the message's end).
    pub fn slice(&self, offset: usize, len: usize) -> Gather {
        let offset = offset.min(self.len);
        Gather {
            shared: self.shared.clone(),
            start: self.start + offset,
            len: len.min(self.len - offset),
        }
    }

    /// The message's pieces from byte `from` on, as `(address, length)`,
    /// in order, until `f` returns false.
    pub fn pieces_from(&self, from: usize, mut f: impl FnMut(*const u8, usize) -> bool) {
        if from >= self.len {
            return;
        }
        // Positions in the runs: this gather is `[self.start, end)` of them.
        let (from, end_of_gather) = (self.start + from, self.start + self.len);
        // The run that holds byte `from`: the last one starting at or before it.
        let Runs { runs, starts } = &*self.shared;
        let first = starts.partition_point(|&s| s <= from) - 1;
        for (run, &start) in runs[first..].iter().zip(&starts[first..]) {
            if start >= end_of_gather {
                return;
            }
            let end = (start + run.len).min(end_of_gather);
            let skip = from.saturating_sub(start);
            if end <= start + skip {
                continue;
            }
            // SAFETY: `skip < run.len`; the run is valid as promised.
            let ptr = unsafe { run.ptr.add(skip) };
            if !f(ptr, end - start - skip) {
                return;
            }
        }
    }

    /// Packs the message into one buffer.
    ///
    /// # Safety
    /// The runs must be valid for reads as promised at creation.
    pub unsafe fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        self.pieces_from(0, |ptr, len| {
            out.extend_from_slice(std::slice::from_raw_parts(ptr, len));
            true
        });
        out
    }
}

/// Identifies a request inside one engine: a slot and the generation of the
/// slot, so that a handle of a freed request is never mistaken for a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReqId {
    pub slot: u32,
    pub generation: u32,
}

impl ReqId {
    /// The 64-bit form carried in frame headers.
    pub fn to_wire(self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.slot)
    }

    pub fn from_wire(value: u64) -> ReqId {
        ReqId {
            slot: value as u32,
            generation: (value >> 32) as u32,
        }
    }
}

/// Why a request completed without (fully) succeeding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionError {
    /// The message was longer than the receive buffer; the buffer holds its prefix.
    Truncated,
    /// The peer went away before the operation could finish.
    PeerLost,
    /// The request was cancelled before it matched anything.
    Cancelled,
    /// A one-sided request (`rput`, `rget`) that the target refused: the
    /// access lies outside its window, or it has no such window. The
    /// target's memory is untouched; `TETHER_ERR_RMA_RANGE`.
    RmaRange,
}

/// How a request ended. For receives `source`, `tag` and `bytes` describe
/// the message (`bytes` is its true size, even when truncated); for sends
/// they describe what was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub source: u32,
    pub tag: i32,
    pub bytes: u64,
    pub error: Option<CompletionError>,
}

/// A slab of values addressed by [`ReqId`], with generations.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<(u32, Option<T>)>,
    free: Vec<u32>,
    live: usize,
}

impl<T> Slab<T> {
    pub(crate) fn new() -> Slab<T> {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
        }
    }

    pub(crate) fn insert(&mut self, value: T) -> ReqId {
        self.live += 1;
        if let Some(slot) = self.free.pop() {
            let entry = &mut self.slots[slot as usize];
            entry.0 = entry.0.wrapping_add(1);
            entry.1 = Some(value);
            ReqId {
                slot,
                generation: entry.0,
            }
        } else {
            let slot = self.slots.len() as u32;
            self.slots.push((0, Some(value)));
            ReqId {
                slot,
                generation: 0,
            }
        }
    }

    pub(crate) fn get(&self, id: ReqId) -> Option<&T> {
        match self.slots.get(id.slot as usize) {
            Some((generation, Some(value))) if *generation == id.generation => Some(value),
            _ => None,
        }
    }

    pub(crate) fn get_mut(&mut self, id: ReqId) -> Option<&mut T> {
        match self.slots.get_mut(id.slot as usize) {
            Some((generation, Some(value))) if *generation == id.generation => Some(value),
            _ => None,
        }
    }

    pub(crate) fn remove(&mut self, id: ReqId) -> Option<T> {
        let entry = self.slots.get_mut(id.slot as usize)?;
        if entry.0 != id.generation || entry.1.is_none() {
            return None;
        }
        self.free.push(id.slot);
        self.live -= 1;
        entry.1.take()
    }

    pub(crate) fn len(&self) -> usize {
        self.live
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (ReqId, &mut T)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(slot, (generation, value))| {
                value.as_mut().map(|v| {
                    (
                        ReqId {
                            slot: slot as u32,
                            generation: *generation,
                        },
                        v,
                    )
                })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_ids_do_not_reach_reused_slots() {
        let mut slab = Slab::new();
        let a = slab.insert(1);
        assert_eq!(slab.remove(a), Some(1));
        let b = slab.insert(2);
        assert_eq!(a.slot, b.slot);
        assert_eq!(slab.get(a), None);
        assert_eq!(slab.get(b), Some(&2));
        assert_eq!(ReqId::from_wire(b.to_wire()), b);
    }
}

#[cfg(test)]
mod gather_tests {
    use super::*;

    #[test]
    fn pieces_resume_anywhere_and_prefixes_cut() {
        let data: Vec<u8> = (0..100).collect();
        let runs = vec![
            Region::from_const(data[10..20].as_ptr(), 10),
            Region::from_const(data[0..0].as_ptr(), 0),
            Region::from_const(data[50..55].as_ptr(), 5),
            Region::from_const(data[70..90].as_ptr(), 20),
        ];
        let g = Gather::new(runs);
        assert_eq!((g.len(), g.runs()), (35, 4));
        assert_eq!(
            g.slice(12, 10).runs(),
            2,
            "bytes 12..22: runs 50.. and 70.."
        );
        assert_eq!(g.slice(0, 10).runs(), 1);
        assert_eq!(g.slice(20, 0).runs(), 0);
        let want: Vec<u8> = (10..20).chain(50..55).chain(70..90).collect();
        // SAFETY: the runs point into `data`, alive throughout.
        assert_eq!(unsafe { g.to_vec() }, want);
        for from in 0..=35 {
            let mut got = Vec::new();
            g.pieces_from(from, |ptr, len| {
                // SAFETY: as above.
                got.extend_from_slice(unsafe { std::slice::from_raw_parts(ptr, len) });
                true
            });
            assert_eq!(got, want[from..], "from {from}");
        }
        for cut in 0..=35 {
            // SAFETY: as above.
            assert_eq!(
                unsafe { g.prefix(cut).to_vec() },
                want[..cut],
                "prefix {cut}"
            );
        }
        // Slices of slices, resumed anywhere: what striped chunks send.
        for offset in 0..=35 {
            for len in 0..=(36 - offset) {
                let slice = g.slice(offset, len);
                let end = (offset + len).min(35);
                assert_eq!(slice.len(), end - offset);
                for from in 0..=slice.len() {
                    let mut got = Vec::new();
                    slice.pieces_from(from, |ptr, n| {
                        // SAFETY: as above.
                        got.extend_from_slice(unsafe { std::slice::from_raw_parts(ptr, n) });
                        true
                    });
                    assert_eq!(got, want[offset + from..end], "{offset}+{len} from {from}");
                }
                let inner = slice.slice(1, 3);
                // SAFETY: as above.
                let inner_bytes = unsafe { inner.to_vec() };
                let inner_want = &want[(offset + 1).min(end)..(offset + 4).min(end)];
                assert_eq!(inner_bytes, inner_want, "slice of {offset}+{len}");
            }
        }
    }

    #[test]
    fn region_slices_stay_inside() {
        let mut data = [0u8; 10];
        let region = Region {
            ptr: data.as_mut_ptr(),
            len: 10,
        };
        assert_eq!(region.slice(4, 3).len, 3);
        assert_eq!(region.slice(8, 5).len, 2);
        assert_eq!(region.slice(12, 5).len, 0);
        // SAFETY: the slice lies inside `data`.
        assert_eq!(region.slice(4, 3).ptr, unsafe { data.as_mut_ptr().add(4) });
    }
}

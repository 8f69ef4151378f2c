//! Fields: M:N redistribution of distributed arrays between programs
//! (DESIGN 3.8).
//!
//! Decisions where DESIGN 3.8 is silent: a `tether_dist` belongs to the
//! process that made it and needs `tether_init` first (a grid is checked
//! against the program's joined processes); a field handle names one
//! field of this process until `tether_field_free`; a blocking put copies
//! what it sends, so it returns once the step is queued, while an iput
//! sends contiguous parts straight from the caller's buffer and completes
//! when they left.

use std::ffi::{c_char, c_int, c_void};

use tether::datatype;
use tether::error::{err, ErrorClass, Result};
use tether::field::{LocalDist, Mode};
use tether_redist::{Kind, Order, Region};

use crate::ffi::{in_str, out, run, state};
use crate::types::*;

pub type tether_dist = c_int;
pub type tether_field = c_int;

/// No distribution: what `tether_dist_free` leaves in the handle.
pub const TETHER_DIST_NULL: tether_dist = 0;
/// No field: what `tether_field_free` leaves in the handle.
pub const TETHER_FIELD_NULL: tether_field = 0;
/// Blocks of ceil(n/P) elements, one per process (MPI darray's BLOCK).
pub const TETHER_DIST_BLOCK: c_int = 1;
/// Elements dealt one at a time, round robin.
pub const TETHER_DIST_CYCLIC: c_int = 2;
/// Blocks of `blocks[d]` elements dealt round robin.
pub const TETHER_DIST_BLOCK_CYCLIC: c_int = 3;
/// Not distributed (the grid has 1 process in this dimension).
pub const TETHER_DIST_NONE: c_int = 4;
/// Last dimension fastest in storage and in rank -> grid coordinates.
pub const TETHER_ORDER_C: c_int = 0;
/// First dimension fastest in storage and in rank -> grid coordinates.
pub const TETHER_ORDER_FORTRAN: c_int = 1;
/// This program produces the field (`peers`: the consumer programs).
pub const TETHER_FIELD_PUT: c_int = 1;
/// This program consumes the field (`peers`: the producer program).
pub const TETHER_FIELD_GET: c_int = 2;
/// `TETHER_FIELD_PUT` under the name Fortran can use (it ignores case).
pub const TETHER_FIELD_MODE_PUT: c_int = TETHER_FIELD_PUT;
/// `TETHER_FIELD_GET` under the name Fortran can use (it ignores case).
pub const TETHER_FIELD_MODE_GET: c_int = TETHER_FIELD_GET;

/// Distributions made by this process; handle = index + 1.
pub(crate) struct Dists {
    slots: Vec<Option<LocalDist>>,
}

impl Dists {
    pub const fn new() -> Dists {
        Dists { slots: Vec::new() }
    }

    fn insert(&mut self, dist: LocalDist) -> tether_dist {
        self.slots.push(Some(dist));
        self.slots.len() as tether_dist
    }

    fn get(&self, handle: tether_dist) -> Result<&LocalDist> {
        usize::try_from(handle)
            .ok()
            .and_then(|h| h.checked_sub(1))
            .and_then(|i| self.slots.get(i))
            .and_then(Option::as_ref)
            .ok_or_else(|| {
                err(
                    ErrorClass::Arg,
                    format!("{handle} is not a live tether_dist"),
                )
            })
    }

    fn remove(&mut self, handle: tether_dist) -> Result<()> {
        self.get(handle)?;
        self.slots[handle as usize - 1] = None;
        Ok(())
    }

    pub fn clear(&mut self) {
        self.slots.clear();
    }
}

fn parse_order(order: c_int) -> Result<Order> {
    match order {
        TETHER_ORDER_C => Ok(Order::C),
        TETHER_ORDER_FORTRAN => Ok(Order::Fortran),
        other => Err(err(
            ErrorClass::Arg,
            format!("order {other} is neither TETHER_ORDER_C nor TETHER_ORDER_FORTRAN"),
        )),
    }
}

fn dims(ndims: c_int) -> Result<usize> {
    usize::try_from(ndims)
        .ok()
        .filter(|n| (1..=32).contains(n))
        .ok_or_else(|| err(ErrorClass::Arg, format!("ndims {ndims} is not in 1..=32")))
}

/// `n` values at `ptr`, checked for NULL.
fn slice<'a, T>(ptr: *const T, n: usize, name: &str) -> Result<&'a [T]> {
    if ptr.is_null() {
        return Err(err(ErrorClass::Arg, format!("argument `{name}` is NULL")));
    }
    // SAFETY: a non-null array argument holds the elements the API says.
    Ok(unsafe { std::slice::from_raw_parts(ptr, n) })
}

/// A regular distribution of a `global_shape` array over a `proc_grid`
/// of this program's joined processes: `kinds[d]` is one of
/// `TETHER_DIST_*`, `blocks[d]` is read for `TETHER_DIST_BLOCK_CYCLIC`
/// only (NULL when there is none). `TETHER_ERR_ARG` names what is wrong.
#[no_mangle]
pub extern "C" fn tether_dist_create(
    ndims: c_int,
    global_shape: *const i64,
    proc_grid: *const c_int,
    kinds: *const c_int,
    blocks: *const i64,
    order: c_int,
    dist: *mut tether_dist,
) -> c_int {
    run("tether_dist_create", || {
        let dist = out(dist, "dist")?;
        let n = dims(ndims)?;
        let shape = slice(global_shape, n, "global_shape")?;
        let grid: Vec<i64> = slice(proc_grid, n, "proc_grid")?
            .iter()
            .map(|&p| i64::from(p))
            .collect();
        let kind_codes = slice(kinds, n, "kinds")?;
        let mut parsed = Vec::with_capacity(n);
        for (d, &code) in kind_codes.iter().enumerate() {
            parsed.push(match code {
                TETHER_DIST_BLOCK => Kind::Block,
                TETHER_DIST_CYCLIC => Kind::Cyclic,
                TETHER_DIST_NONE => Kind::None,
                TETHER_DIST_BLOCK_CYCLIC => {
                    let blocks = slice(blocks, n, "blocks")?;
                    Kind::BlockCyclic(blocks[d])
                }
                other => {
                    return Err(err(
                        ErrorClass::Arg,
                        format!("kinds[{d}] = {other} is not a TETHER_DIST_* kind"),
                    ))
                }
            });
        }
        let order = parse_order(order)?;
        let mut st = state("tether_dist_create")?;
        let universe = st.runtime()?.universe();
        let size = universe.programs[universe.my_program].size;
        let local = LocalDist::regular(shape, &grid, &parsed, order, size)?;
        *dist = st.dists.insert(local);
        Ok(())
    })
}

/// This process's part as `nboxes` boxes: `starts`/`counts` are
/// `nboxes x ndims` (box b, dimension d at `b*ndims + d`), 0-based global
/// indices; the local buffer holds the boxes one after another, each
/// dense in `order`. Local: not collective.
#[no_mangle]
pub extern "C" fn tether_dist_create_boxes(
    ndims: c_int,
    global_shape: *const i64,
    nboxes: c_int,
    starts: *const i64,
    counts: *const i64,
    order: c_int,
    dist: *mut tether_dist,
) -> c_int {
    run("tether_dist_create_boxes", || {
        let dist = out(dist, "dist")?;
        let n = dims(ndims)?;
        let shape = slice(global_shape, n, "global_shape")?;
        let nboxes = usize::try_from(nboxes)
            .map_err(|_| err(ErrorClass::Arg, format!("nboxes {nboxes} is negative")))?;
        let (starts, counts) = if nboxes == 0 {
            (&[][..], &[][..])
        } else {
            (
                slice(starts, nboxes * n, "starts")?,
                slice(counts, nboxes * n, "counts")?,
            )
        };
        let boxes = (0..nboxes)
            .map(|b| Region {
                start: starts[b * n..(b + 1) * n].to_vec(),
                count: counts[b * n..(b + 1) * n].to_vec(),
            })
            .collect();
        let local = LocalDist::boxes(shape, boxes, parse_order(order)?)?;
        let mut st = state("tether_dist_create_boxes")?;
        st.runtime()?;
        *dist = st.dists.insert(local);
        Ok(())
    })
}

/// This process's local extents (`ndims` values): a regular
/// distribution's local shape, a single box's counts, zeros for no box;
/// for several boxes only their product (the element count) is defined.
#[no_mangle]
pub extern "C" fn tether_dist_local_shape(dist: tether_dist, shape: *mut i64) -> c_int {
    run("tether_dist_local_shape", || {
        let mut st = state("tether_dist_local_shape")?;
        let rank = st.runtime()?.universe().my_rank;
        let extents = st.dists.get(dist)?.local_shape(rank);
        if shape.is_null() {
            return Err(err(ErrorClass::Arg, "argument `shape` is NULL"));
        }
        // SAFETY: `shape` holds ndims values by contract.
        unsafe { std::ptr::copy_nonoverlapping(extents.as_ptr(), shape, extents.len()) };
        Ok(())
    })
}

/// Frees a distribution (fields made with it keep their own copy) and
/// sets `*dist` to `TETHER_DIST_NULL`.
#[no_mangle]
pub extern "C" fn tether_dist_free(dist: *mut tether_dist) -> c_int {
    run("tether_dist_free", || {
        let dist = out(dist, "dist")?;
        state("tether_dist_free")?.dists.remove(*dist)?;
        *dist = TETHER_DIST_NULL;
        Ok(())
    })
}

/// Creates field `name` of `datatype` elements laid out by `dist`:
/// `mode` `TETHER_FIELD_PUT` puts it to the comma-separated consumer
/// programs in `peers`, `TETHER_FIELD_GET` gets it from the producer
/// program named there. Collective over this program's joined processes.
/// A disagreement with the other side already known is
/// `TETHER_ERR_FIELD_MISMATCH` here; otherwise the first step reports it.
/// A name may be created again after its field is freed: the n-th field
/// of one (producer, name) pairs with the other program's n-th, and
/// nothing of an earlier one reaches it; a name still live is
/// `TETHER_ERR_ARG`.
#[no_mangle]
pub extern "C" fn tether_field_create(
    name: *const c_char,
    datatype: tether_datatype,
    dist: tether_dist,
    peers: *const c_char,
    mode: c_int,
    field: *mut tether_field,
) -> c_int {
    run("tether_field_create", || {
        let field = out(field, "field")?;
        let name = in_str(name, "name")?;
        let peers = in_str(peers, "peers")?;
        let element = datatype::lookup(datatype)?;
        let mode = match mode {
            TETHER_FIELD_PUT => Mode::Put,
            TETHER_FIELD_GET => Mode::Get,
            other => {
                return Err(err(
                    ErrorClass::Arg,
                    format!("mode {other} is neither TETHER_FIELD_PUT nor TETHER_FIELD_GET"),
                ))
            }
        };
        let mut st = state("tether_field_create")?;
        let local = st.dists.get(dist)?.clone();
        *field = st
            .runtime()?
            .field_create(name, element, &local, peers, mode)?;
        Ok(())
    })
}

/// Puts step `step` from `local` (this process's part; NULL when empty):
/// returns once the step is queued, blocking while `FIELD_QUEUE` steps
/// wait for the slowest consumer program.
#[no_mangle]
pub extern "C" fn tether_field_put(field: tether_field, step: i64, local: *const c_void) -> c_int {
    run("tether_field_put", || {
        let mut st = state("tether_field_put")?;
        // SAFETY: `local` holds this process's part for the call (API contract).
        unsafe { st.runtime()?.field_put(field, step, local.cast()) }
    })
}

/// Starts putting step `step`; `local` belongs to the library until
/// `*req` completes.
#[no_mangle]
pub extern "C" fn tether_field_iput(
    field: tether_field,
    step: i64,
    local: *const c_void,
    req: *mut tether_request,
) -> c_int {
    run("tether_field_iput", || {
        let req = out(req, "req")?;
        let mut st = state("tether_field_iput")?;
        // SAFETY: `local` stays valid and unchanged until the request completes (API contract).
        let id = unsafe { st.runtime()?.field_iput(field, step, local.cast())? };
        *req = st.register(id);
        Ok(())
    })
}

/// Gets step `step` (the producer's next) into `local`.
#[no_mangle]
pub extern "C" fn tether_field_get(field: tether_field, step: i64, local: *mut c_void) -> c_int {
    run("tether_field_get", || {
        let mut st = state("tether_field_get")?;
        // SAFETY: `local` holds this process's part for the call (API contract).
        unsafe { st.runtime()?.field_get(field, step, local.cast()) }
    })
}

/// Starts getting step `step` into `local`, which belongs to the library
/// until `*req` completes.
#[no_mangle]
pub extern "C" fn tether_field_iget(
    field: tether_field,
    step: i64,
    local: *mut c_void,
    req: *mut tether_request,
) -> c_int {
    run("tether_field_iget", || {
        let req = out(req, "req")?;
        let mut st = state("tether_field_iget")?;
        // SAFETY: `local` stays valid until the request completes (API contract).
        let id = unsafe { st.runtime()?.field_iget(field, step, local.cast())? };
        *req = st.register(id);
        Ok(())
    })
}

/// Frees a field and sets `*field` to `TETHER_FIELD_NULL`. A producer
/// returns once every queued step was taken by every consumer still in
/// the field (or fails with the error that ended it); a consumer leaves
/// at once, and the producer stops sending it steps. On an error the
/// field is gone all the same, but `*field` is left as it was.
#[no_mangle]
pub extern "C" fn tether_field_free(field: *mut tether_field) -> c_int {
    run("tether_field_free", || {
        let handle = out(field, "field")?;
        state("tether_field_free")?.runtime()?.field_free(*handle)?;
        *handle = TETHER_FIELD_NULL;
        Ok(())
    })
}

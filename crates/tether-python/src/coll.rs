//! Collectives on buffers (DESIGN 3.5), mpi4py-style: `comm.Bcast(buf,
//! root)`, `comm.Allreduce(sendbuf, recvbuf, op)`, ... and every
//! non-blocking form (`Ibcast`, ...) returning a `Request`.
//!
//! Counts come from the buffers, as in mpi4py: a buffer's elements are its
//! items (numpy: its dtype). Operations that only move data send items as
//! opaque units of the item size, so any dtype works (structured ones
//! too); reductions take the datatype from the buffer's format (or the
//! `datatype` argument, e.g. `tether.DOUBLE_INT` for MINLOC on a
//! structured array). v-collectives take `(buf, counts)` or
//! `(buf, counts, displs)`, in items, where the buffer with per-rank
//! layout goes; displacements default to packed blocks.
//! `tether.IN_PLACE` goes where MPI allows `MPI_IN_PLACE`. A buffer that
//! is not significant (a receive buffer off the root) may be `None`.
//!
//! Every collective is one non-blocking C call; the blocking form waits
//! for its request without the GIL.

use std::ffi::{c_int, c_void};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use tether_capi::*;

use crate::buffer::{Access, Buffer};
use crate::comm::Comm;
use crate::error::check;
use crate::orphans;
use crate::request::Request;

/// The type of `tether.IN_PLACE`.
#[pyclass(module = "tether", frozen, name = "InPlaceType")]
pub struct InPlace;

#[pymethods]
impl InPlace {
    fn __repr__(&self) -> &'static str {
        "tether.IN_PLACE"
    }
}

static IN_PLACE: PyOnceLock<Py<InPlace>> = PyOnceLock::new();

/// `tether.IN_PLACE`, the one instance of `InPlaceType`.
pub fn in_place(py: Python<'_>) -> PyResult<&Py<InPlace>> {
    IN_PLACE.get_or_try_init(py, || Py::new(py, InPlace))
}

/// `TETHER_IN_PLACE`.
const IN_PLACE_PTR: *mut c_void = usize::MAX as *mut c_void;

/// One buffer argument of a collective.
enum Side {
    Buf(Buffer),
    InPlace,
    Absent,
}

impl Side {
    fn get(obj: Option<&Bound<'_, PyAny>>, access: Access, role: &str) -> PyResult<Side> {
        let Some(obj) = obj.filter(|o| !o.is_none()) else {
            return Ok(Side::Absent);
        };
        if obj.is(in_place(obj.py())?.bind(obj.py())) {
            return Ok(Side::InPlace);
        }
        Buffer::get_described(obj, access, role).map(Side::Buf)
    }

    fn buffer(&self) -> Option<&Buffer> {
        match self {
            Side::Buf(b) => Some(b),
            _ => None,
        }
    }

    /// Address, element count and datatype for the C call, in elements
    /// of `unit`; a buffer must hold a whole number of them.
    fn arg(&self, unit: Unit) -> PyResult<(*mut c_void, i64, tether_datatype)> {
        Ok(match self {
            Side::Buf(b) if b.len() % unit.size != 0 => {
                return Err(PyValueError::new_err(format!(
                    "a buffer of {} bytes is not a whole number of the {}-byte \
                     elements the other buffer has",
                    b.len(),
                    unit.size
                )))
            }
            Side::Buf(b) => (b.ptr(), (b.len() / unit.size) as i64, unit.datatype),
            Side::InPlace => (IN_PLACE_PTR, 0, unit.datatype),
            Side::Absent => (std::ptr::null_mut(), 0, unit.datatype),
        })
    }
}

/// The datatype a collective moves and its size in bytes.
#[derive(Clone, Copy)]
struct Unit {
    datatype: tether_datatype,
    size: usize,
}

impl Unit {
    /// The unit a collective that moves items (not combines them) sends:
    /// opaque, of the item size, once the buffers are known to hold one
    /// type ([`crate::pairs::same_items`]).
    fn moved(what: &str, send: Option<&Buffer>, recv: Option<&Buffer>) -> PyResult<Unit> {
        crate::pairs::same_items(what, send, recv)?;
        Ok(Unit::opaque(recv.or(send)))
    }

    /// An opaque type of the buffer's item size (bytes when there is none).
    fn opaque(b: Option<&Buffer>) -> Unit {
        let (datatype, size) = match b.map(Buffer::itemsize) {
            Some(2) => (TETHER_UINT16, 2),
            Some(4) => (TETHER_UINT32, 4),
            Some(8) => (TETHER_UINT64, 8),
            Some(16) => (TETHER_DOUBLE_COMPLEX, 16),
            _ => (TETHER_BYTE, 1),
        };
        Unit { datatype, size }
    }

    /// The type a reduction combines: `datatype` when given, else the
    /// buffers' own, which must be one type — elements of two types
    /// cannot be combined (mpi4py refuses too; a float64 summed into an
    /// int64 buffer would be garbage).
    fn reduced(
        py: Python<'_>,
        what: &str,
        send: &Side,
        recv: &Side,
        datatype: Option<tether_datatype>,
    ) -> PyResult<Unit> {
        crate::pairs::same_items(what, send.buffer(), recv.buffer())?;
        Unit::typed(py, recv.buffer().or(send.buffer()), datatype)
    }

    /// The buffer's own datatype, or `datatype` when given.
    fn typed(
        py: Python<'_>,
        b: Option<&Buffer>,
        datatype: Option<tether_datatype>,
    ) -> PyResult<Unit> {
        let datatype = match (datatype, b) {
            (Some(d), _) => d,
            (None, Some(b)) => b.datatype()?,
            (None, None) => TETHER_BYTE,
        };
        let mut size = 0;
        check(py, tether_type_size(datatype, &mut size))?;
        Ok(Unit {
            datatype,
            size: size as usize,
        })
    }
}

/// A buffer with per-rank counts and displacements, in elements.
struct VSpec {
    side: Side,
    counts: Vec<c_int>,
    displs: Vec<c_int>,
}

impl VSpec {
    /// `(buf, counts)` or `(buf, counts, displs)`; `None` when not significant.
    fn get(obj: Option<&Bound<'_, PyAny>>, access: Access, role: &str) -> PyResult<VSpec> {
        let Some(obj) = obj.filter(|o| !o.is_none()) else {
            return Ok(VSpec {
                side: Side::Absent,
                counts: Vec::new(),
                displs: Vec::new(),
            });
        };
        let parts: Vec<Bound<'_, PyAny>> = obj.extract().map_err(|_| {
            PyValueError::new_err(format!(
                "{role}: expected (buf, counts) or (buf, counts, displs)"
            ))
        })?;
        if !(2..=3).contains(&parts.len()) {
            return Err(PyValueError::new_err(format!(
                "{role}: expected (buf, counts) or (buf, counts, displs), got {} items",
                parts.len()
            )));
        }
        let side = Side::get(Some(&parts[0]), access, role)?;
        let counts: Vec<c_int> = parts[1].extract()?;
        let displs: Vec<c_int> = match parts.get(2) {
            Some(d) if !d.is_none() => d.extract()?,
            _ => packed(&counts, role)?,
        };
        if displs.len() != counts.len() {
            return Err(PyValueError::new_err(format!(
                "{role}: {} counts but {} displacements",
                counts.len(),
                displs.len()
            )));
        }
        Ok(VSpec {
            side,
            counts,
            displs,
        })
    }

    /// Counts and displacements in elements of `unit` instead of the
    /// buffer's items (a factor other than 1 only for item sizes that have
    /// no opaque type of their own).
    fn scale_to(&mut self, unit: Unit, role: &str) -> PyResult<()> {
        let Some(b) = self.side.buffer() else {
            return Ok(());
        };
        let factor = (b.itemsize() / unit.size) as c_int;
        if factor == 1 {
            return Ok(());
        }
        let scale = |v: &mut Vec<c_int>| -> PyResult<()> {
            for x in v.iter_mut() {
                *x = x.checked_mul(factor).ok_or_else(|| {
                    PyValueError::new_err(format!("{role}: counts past 2^31 bytes"))
                })?;
            }
            Ok(())
        };
        scale(&mut self.counts)?;
        scale(&mut self.displs)
    }

    fn counts_ptr(&self) -> *const c_int {
        if self.counts.is_empty() {
            std::ptr::null()
        } else {
            self.counts.as_ptr()
        }
    }

    fn displs_ptr(&self) -> *const c_int {
        if self.displs.is_empty() {
            std::ptr::null()
        } else {
            self.displs.as_ptr()
        }
    }
}

/// Displacements of blocks of `counts` elements laid end to end.
fn packed(counts: &[c_int], role: &str) -> PyResult<Vec<c_int>> {
    let mut at: c_int = 0;
    counts
        .iter()
        .map(|c| {
            let here = at;
            at = at.checked_add(*c).ok_or_else(|| {
                PyValueError::new_err(format!("{role}: counts add up past 2^31 elements"))
            })?;
            Ok(here)
        })
        .collect()
}

/// The number of `size` blocks a buffer of `count` elements splits into.
fn per_rank(count: i64, size: i32, role: &str) -> PyResult<i64> {
    if size <= 0 || count % i64::from(size) != 0 {
        return Err(PyValueError::new_err(format!(
            "{role}: {count} elements do not split into {size} equal blocks"
        )));
    }
    Ok(count / i64::from(size))
}

/// Wraps a started C collective: the request holds every buffer used.
fn started(
    py: Python<'_>,
    code: c_int,
    req: tether_request,
    sides: Vec<Side>,
) -> PyResult<Request> {
    check(py, code)?;
    let keep = sides
        .into_iter()
        .filter_map(|s| match s {
            Side::Buf(b) => Some(b),
            _ => None,
        })
        .collect();
    Ok(Request::new(vec![req], keep, None))
}

impl Comm {
    fn size_of(&self, py: Python<'_>) -> PyResult<i32> {
        let mut size = 0;
        check(py, tether_comm_size(self.handle, &mut size))?;
        Ok(size)
    }

    fn rank_of(&self, py: Python<'_>) -> PyResult<i32> {
        let mut rank = 0;
        check(py, tether_comm_rank(self.handle, &mut rank))?;
        Ok(rank)
    }
}

#[pymethods]
impl Comm {
    /// Non-blocking barrier.
    #[allow(non_snake_case)]
    fn Ibarrier(&self, py: Python<'_>) -> PyResult<Request> {
        orphans::reap();
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_ibarrier(self.handle, &mut req);
        started(py, code, req, Vec::new())
    }

    /// Blocks until every process of the communicator has entered it.
    #[allow(non_snake_case)]
    fn Barrier(&self, py: Python<'_>) -> PyResult<()> {
        self.Ibarrier(py)?.finish(py)
    }

    /// Non-blocking `Bcast`.
    #[allow(non_snake_case)]
    #[pyo3(signature = (buf, root = 0))]
    fn Ibcast(&self, py: Python<'_>, buf: &Bound<'_, PyAny>, root: i32) -> PyResult<Request> {
        orphans::reap();
        // The root only reads its buffer (it may be read-only there).
        let access = if self.rank_of(py)? == root {
            Access::Read
        } else {
            Access::Write
        };
        let side = Side::get(Some(buf), access, "Bcast")?;
        let (ptr, count, datatype) = side.arg(Unit::opaque(side.buffer()))?;
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_ibcast(ptr, count, datatype, root, self.handle, &mut req);
        started(py, code, req, vec![side])
    }

    /// Copies `root`'s `buf` into every other process's `buf`.
    #[allow(non_snake_case)]
    #[pyo3(signature = (buf, root = 0))]
    fn Bcast(&self, py: Python<'_>, buf: &Bound<'_, PyAny>, root: i32) -> PyResult<()> {
        self.Ibcast(py, buf, root)?.finish(py)
    }

    /// Non-blocking `Reduce`.
    #[allow(non_snake_case)]
    #[pyo3(signature = (sendbuf, recvbuf, op = TETHER_SUM, root = 0, datatype = None))]
    fn Ireduce(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        op: tether_op,
        root: i32,
        datatype: Option<tether_datatype>,
    ) -> PyResult<Request> {
        orphans::reap();
        let send = Side::get(Some(sendbuf), Access::Read, "Reduce sendbuf")?;
        let recv = Side::get(recvbuf, Access::Write, "Reduce recvbuf")?;
        let unit = Unit::reduced(py, "Reduce", &send, &recv, datatype)?;
        let (sp, _, _) = send.arg(unit)?;
        let (rp, rcount, _) = recv.arg(unit)?;
        let count = match &send {
            Side::Buf(b) => (b.len() / unit.size) as i64,
            _ => rcount,
        };
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_ireduce(
            sp,
            rp,
            count,
            unit.datatype,
            op,
            root,
            self.handle,
            &mut req,
        );
        started(py, code, req, vec![send, recv])
    }

    /// Combines every process's `sendbuf` with `op` into `root`'s
    /// `recvbuf` (`None` elsewhere); `sendbuf` may be `IN_PLACE` at the root.
    #[allow(non_snake_case)]
    #[pyo3(signature = (sendbuf, recvbuf, op = TETHER_SUM, root = 0, datatype = None))]
    fn Reduce(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        op: tether_op,
        root: i32,
        datatype: Option<tether_datatype>,
    ) -> PyResult<()> {
        self.Ireduce(py, sendbuf, recvbuf, op, root, datatype)?
            .finish(py)
    }

    /// Non-blocking `Allreduce`.
    #[allow(non_snake_case)]
    #[pyo3(signature = (sendbuf, recvbuf, op = TETHER_SUM, datatype = None))]
    fn Iallreduce(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: tether_op,
        datatype: Option<tether_datatype>,
    ) -> PyResult<Request> {
        orphans::reap();
        let send = Side::get(Some(sendbuf), Access::Read, "Allreduce sendbuf")?;
        let recv = Side::get(Some(recvbuf), Access::Write, "Allreduce recvbuf")?;
        let unit = Unit::reduced(py, "Allreduce", &send, &recv, datatype)?;
        let (sp, _, _) = send.arg(unit)?;
        let (rp, count, _) = recv.arg(unit)?;
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_iallreduce(sp, rp, count, unit.datatype, op, self.handle, &mut req);
        started(py, code, req, vec![send, recv])
    }

    /// Combines every process's `sendbuf` (or `recvbuf`, with `IN_PLACE`)
    /// with `op` into every `recvbuf`.
    #[allow(non_snake_case)]
    #[pyo3(signature = (sendbuf, recvbuf, op = TETHER_SUM, datatype = None))]
    fn Allreduce(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: tether_op,
        datatype: Option<tether_datatype>,
    ) -> PyResult<()> {
        self.Iallreduce(py, sendbuf, recvbuf, op, datatype)?
            .finish(py)
    }

    /// Non-blocking `Reduce_scatter_block`.
    #[allow(non_snake_case)]
    #[pyo3(signature = (sendbuf, recvbuf, op = TETHER_SUM, datatype = None))]
    fn Ireduce_scatter_block(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: tether_op,
        datatype: Option<tether_datatype>,
    ) -> PyResult<Request> {
        orphans::reap();
        let send = Side::get(Some(sendbuf), Access::Read, "Reduce_scatter_block sendbuf")?;
        let recv = Side::get(Some(recvbuf), Access::Write, "Reduce_scatter_block recvbuf")?;
        let unit = Unit::reduced(py, "Reduce_scatter_block", &send, &recv, datatype)?;
        let (sp, _, _) = send.arg(unit)?;
        let (rp, count, _) = recv.arg(unit)?;
        let mut req = TETHER_REQUEST_NULL;
        let code =
            tether_ireduce_scatter_block(sp, rp, count, unit.datatype, op, self.handle, &mut req);
        started(py, code, req, vec![send, recv])
    }

    /// Combines every process's `sendbuf` (size blocks of the size of
    /// `recvbuf`) with `op`; rank r gets block r in `recvbuf`.
    #[allow(non_snake_case)]
    #[pyo3(signature = (sendbuf, recvbuf, op = TETHER_SUM, datatype = None))]
    fn Reduce_scatter_block(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: tether_op,
        datatype: Option<tether_datatype>,
    ) -> PyResult<()> {
        self.Ireduce_scatter_block(py, sendbuf, recvbuf, op, datatype)?
            .finish(py)
    }

    /// Non-blocking `Gather`.
    #[allow(non_snake_case)]
    #[pyo3(signature = (sendbuf, recvbuf, root = 0))]
    fn Igather(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        root: i32,
    ) -> PyResult<Request> {
        orphans::reap();
        let send = Side::get(Some(sendbuf), Access::Read, "Gather sendbuf")?;
        let recv = Side::get(recvbuf, Access::Write, "Gather recvbuf")?;
        let unit = Unit::moved("Gather", send.buffer(), recv.buffer())?;
        let (sp, scount, _) = send.arg(unit)?;
        let (rp, rcount, _) = recv.arg(unit)?;
        let rcount = match &recv {
            Side::Buf(_) => per_rank(rcount, self.size_of(py)?, "Gather recvbuf")?,
            _ => 0,
        };
        let (sdt, rdt) = (unit.datatype, unit.datatype);
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_igather(
            sp,
            scount,
            sdt,
            rp,
            rcount,
            rdt,
            root,
            self.handle,
            &mut req,
        );
        started(py, code, req, vec![send, recv])
    }

    /// Collects every process's `sendbuf`, in rank order, into `root`'s
    /// `recvbuf` (`None` elsewhere; `sendbuf` may be `IN_PLACE` at the root).
    #[allow(non_snake_case)]
    #[pyo3(signature = (sendbuf, recvbuf, root = 0))]
    fn Gather(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        root: i32,
    ) -> PyResult<()> {
        self.Igather(py, sendbuf, recvbuf, root)?.finish(py)
    }

    /// Non-blocking `Gatherv`.
    #[allow(non_snake_case)]
    #[pyo3(signature = (sendbuf, recvbuf, root = 0))]
    fn Igatherv(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        root: i32,
    ) -> PyResult<Request> {
        orphans::reap();
        let send = Side::get(Some(sendbuf), Access::Read, "Gatherv sendbuf")?;
        let mut recv = VSpec::get(recvbuf, Access::Write, "Gatherv recvbuf")?;
        let unit = Unit::moved("Gatherv", send.buffer(), recv.side.buffer())?;
        recv.scale_to(unit, "Gatherv recvbuf")?;
        let (sp, scount, dt) = send.arg(unit)?;
        let (rp, _, _) = recv.side.arg(unit)?;
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_igatherv(
            sp,
            scount,
            dt,
            rp,
            recv.counts_ptr(),
            recv.displs_ptr(),
            dt,
            root,
            self.handle,
            &mut req,
        );
        started(py, code, req, vec![send, recv.side])
    }

    /// `Gather` with `recvbuf = (buf, counts[, displs])` at the root:
    /// rank r's `sendbuf` lands at `displs[r]` (items).
    #[allow(non_snake_case)]
    #[pyo3(signature = (sendbuf, recvbuf, root = 0))]
    fn Gatherv(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        root: i32,
    ) -> PyResult<()> {
        self.Igatherv(py, sendbuf, recvbuf, root)?.finish(py)
    }

    /// Non-blocking `Scatter`.
    #[allow(non_snake_case)]
    #[pyo3(signature = (sendbuf, recvbuf, root = 0))]
    fn Iscatter(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: &Bound<'_, PyAny>,
        root: i32,
    ) -> PyResult<Request> {
        orphans::reap();
        let send = Side::get(sendbuf, Access::Read, "Scatter sendbuf")?;
        let recv = Side::get(Some(recvbuf), Access::Write, "Scatter recvbuf")?;
        let unit = Unit::moved("Scatter", send.buffer(), recv.buffer())?;
        let (sp, scount, dt) = send.arg(unit)?;
        let (rp, rcount, _) = recv.arg(unit)?;
        let scount = match &send {
            Side::Buf(_) => per_rank(scount, self.size_of(py)?, "Scatter sendbuf")?,
            _ => 0,
        };
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_iscatter(sp, scount, dt, rp, rcount, dt, root, self.handle, &mut req);
        started(py, code, req, vec![send, recv])
    }

    /// Sends block r of `root`'s `sendbuf` (`None` elsewhere) to rank r's
    /// `recvbuf` (`IN_PLACE` allowed at the root).
    #[allow(non_snake_case)]
    #[pyo3(signature = (sendbuf, recvbuf, root = 0))]
    fn Scatter(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: &Bound<'_, PyAny>,
        root: i32,
    ) -> PyResult<()> {
        self.Iscatter(py, sendbuf, recvbuf, root)?.finish(py)
    }

    /// Non-blocking `Scatterv`.
    #[allow(non_snake_case)]
    #[pyo3(signature = (sendbuf, recvbuf, root = 0))]
    fn Iscatterv(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: &Bound<'_, PyAny>,
        root: i32,
    ) -> PyResult<Request> {
        orphans::reap();
        let mut send = VSpec::get(sendbuf, Access::Read, "Scatterv sendbuf")?;
        let recv = Side::get(Some(recvbuf), Access::Write, "Scatterv recvbuf")?;
        let unit = Unit::moved("Scatterv", send.side.buffer(), recv.buffer())?;
        send.scale_to(unit, "Scatterv sendbuf")?;
        let (sp, _, dt) = send.side.arg(unit)?;
        let (rp, rcount, _) = recv.arg(unit)?;
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_iscatterv(
            sp,
            send.counts_ptr(),
            send.displs_ptr(),
            dt,
            rp,
            rcount,
            dt,
            root,
            self.handle,
            &mut req,
        );
        started(py, code, req, vec![send.side, recv])
    }

    /// `Scatter` with `sendbuf = (buf, counts[, displs])` at the root.
    #[allow(non_snake_case)]
    #[pyo3(signature = (sendbuf, recvbuf, root = 0))]
    fn Scatterv(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: &Bound<'_, PyAny>,
        root: i32,
    ) -> PyResult<()> {
        self.Iscatterv(py, sendbuf, recvbuf, root)?.finish(py)
    }

    /// Non-blocking `Allgather`.
    #[allow(non_snake_case)]
    fn Iallgather(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<Request> {
        orphans::reap();
        let send = Side::get(Some(sendbuf), Access::Read, "Allgather sendbuf")?;
        let recv = Side::get(Some(recvbuf), Access::Write, "Allgather recvbuf")?;
        let unit = Unit::moved("Allgather", send.buffer(), recv.buffer())?;
        let (sp, scount, dt) = send.arg(unit)?;
        let (rp, rcount, _) = recv.arg(unit)?;
        let rcount = per_rank(rcount, self.size_of(py)?, "Allgather recvbuf")?;
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_iallgather(sp, scount, dt, rp, rcount, dt, self.handle, &mut req);
        started(py, code, req, vec![send, recv])
    }

    /// Every process's `sendbuf`, in rank order, into every `recvbuf`
    /// (`sendbuf` may be `IN_PLACE`: the own block is already in place).
    #[allow(non_snake_case)]
    fn Allgather(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.Iallgather(py, sendbuf, recvbuf)?.finish(py)
    }

    /// Non-blocking `Allgatherv`.
    #[allow(non_snake_case)]
    fn Iallgatherv(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<Request> {
        orphans::reap();
        let send = Side::get(Some(sendbuf), Access::Read, "Allgatherv sendbuf")?;
        let mut recv = VSpec::get(Some(recvbuf), Access::Write, "Allgatherv recvbuf")?;
        let unit = Unit::moved("Allgatherv", send.buffer(), recv.side.buffer())?;
        recv.scale_to(unit, "Allgatherv recvbuf")?;
        let (sp, scount, dt) = send.arg(unit)?;
        let (rp, _, _) = recv.side.arg(unit)?;
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_iallgatherv(
            sp,
            scount,
            dt,
            rp,
            recv.counts_ptr(),
            recv.displs_ptr(),
            dt,
            self.handle,
            &mut req,
        );
        started(py, code, req, vec![send, recv.side])
    }

    /// `Allgather` with `recvbuf = (buf, counts[, displs])`.
    #[allow(non_snake_case)]
    fn Allgatherv(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.Iallgatherv(py, sendbuf, recvbuf)?.finish(py)
    }

    /// Non-blocking `Alltoall`.
    #[allow(non_snake_case)]
    fn Ialltoall(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<Request> {
        orphans::reap();
        let send = Side::get(Some(sendbuf), Access::Read, "Alltoall sendbuf")?;
        let recv = Side::get(Some(recvbuf), Access::Write, "Alltoall recvbuf")?;
        let unit = Unit::moved("Alltoall", send.buffer(), recv.buffer())?;
        let size = self.size_of(py)?;
        let (sp, scount, dt) = send.arg(unit)?;
        let (rp, rcount, _) = recv.arg(unit)?;
        let rcount = per_rank(rcount, size, "Alltoall recvbuf")?;
        let scount = match &send {
            Side::Buf(_) => per_rank(scount, size, "Alltoall sendbuf")?,
            _ => scount,
        };
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_ialltoall(sp, scount, dt, rp, rcount, dt, self.handle, &mut req);
        started(py, code, req, vec![send, recv])
    }

    /// Block r of `sendbuf` goes to rank r; block r of `recvbuf` comes
    /// from rank r.
    #[allow(non_snake_case)]
    fn Alltoall(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.Ialltoall(py, sendbuf, recvbuf)?.finish(py)
    }

    /// Non-blocking `Alltoallv`.
    #[allow(non_snake_case)]
    fn Ialltoallv(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<Request> {
        orphans::reap();
        let mut send = VSpec::get(Some(sendbuf), Access::Read, "Alltoallv sendbuf")?;
        let mut recv = VSpec::get(Some(recvbuf), Access::Write, "Alltoallv recvbuf")?;
        let unit = Unit::moved("Alltoallv", send.side.buffer(), recv.side.buffer())?;
        send.scale_to(unit, "Alltoallv sendbuf")?;
        recv.scale_to(unit, "Alltoallv recvbuf")?;
        let (sp, _, dt) = send.side.arg(unit)?;
        let (rp, _, _) = recv.side.arg(unit)?;
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_ialltoallv(
            sp,
            send.counts_ptr(),
            send.displs_ptr(),
            dt,
            rp,
            recv.counts_ptr(),
            recv.displs_ptr(),
            dt,
            self.handle,
            &mut req,
        );
        started(py, code, req, vec![send.side, recv.side])
    }

    /// `Alltoall` with `(buf, counts[, displs])` on both sides.
    #[allow(non_snake_case)]
    fn Alltoallv(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.Ialltoallv(py, sendbuf, recvbuf)?.finish(py)
    }
}

//! `tether.Win`: a window and its one-sided operations (DESIGN 3.7, 3.11).
//!
//! The window's memory is the array given to `Win(array, comm)`, exported
//! (so alive, unresizable and never copied) until `Free`. Target offsets
//! are in bytes, as in C, whatever the window's dtype.
//!
//! `Put`, `Get`, `Accumulate`, `Fetch_and_op` and `Compare_and_swap`
//! return before they complete: the window keeps the buffers they read or
//! write exported until the flush that completes them (`Flush(target)`,
//! `Flush_all`, `Fence`, `Free`), so an origin array dropped right after
//! `Put` stays valid until the data has left. `Rput`/`Rget` return a
//! `Request` that holds the buffer instead.
//!
//! `Put`/`Get` move the buffer's bytes (`TETHER_BYTE`, as `Send`/`Recv`
//! do); the accumulate family takes the datatype from the buffer's format
//! (or `datatype=`). A window dropped without `Free` (a collective call,
//! which a garbage collector cannot make) keeps its array and pending
//! buffers exported for the rest of the process: the other processes may
//! still write into it.

use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use tether_capi::*;

use crate::buffer::{Access, Buffer};
use crate::comm::Comm;
use crate::error::check;
use crate::orphans;
use crate::request::Request;

/// Constants of the one-sided API, added to the module by `register`.
const CONSTANTS: &[(&str, i32)] = &[
    ("WIN_NULL", TETHER_WIN_NULL),
    ("REPLACE", TETHER_REPLACE),
    ("NO_OP", TETHER_NO_OP),
];

/// Adds `Win` and the one-sided constants to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Win>()?;
    for (name, value) in CONSTANTS {
        m.add(*name, *value)?;
    }
    Ok(())
}

/// A buffer that an issued operation still reads or writes, and the
/// target whose flush completes it.
struct Pending {
    target: c_int,
    _buffer: Buffer,
}

struct State {
    handle: tether_win,
    /// The window's memory; `None` once freed.
    memory: Option<Buffer>,
    array: Option<Py<PyAny>>,
    pending: Vec<Pending>,
}

#[pyclass(module = "tether", subclass, frozen)]
pub struct Win {
    state: Mutex<State>,
}

/// An address that may cross `Python::detach`.
#[derive(Clone, Copy)]
struct Addr(usize);

impl Addr {
    fn of(b: &Buffer) -> Addr {
        Addr(b.ptr() as usize)
    }

    fn ptr(self) -> *mut c_void {
        self.0 as *mut c_void
    }
}

impl Win {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn handle(&self) -> tether_win {
        self.lock().handle
    }

    /// Keeps `buffer` until the next flush of `target`.
    fn keep(&self, target: c_int, buffer: Buffer) {
        self.lock().pending.push(Pending {
            target,
            _buffer: buffer,
        });
    }

    /// Runs a blocking completion call without the GIL. The buffers it
    /// completes (those of `target`, or all for `None`) are released when
    /// it succeeds; after a failure they stay until a later completion
    /// succeeds (or for good, after a lost target), never too early.
    fn complete(
        &self,
        py: Python<'_>,
        target: Option<c_int>,
        call: impl FnOnce(tether_win) -> c_int + Send,
    ) -> PyResult<()> {
        orphans::reap();
        let (handle, taken) = {
            let mut state = self.lock();
            let (taken, kept) = std::mem::take(&mut state.pending)
                .into_iter()
                .partition(|p| target.is_none_or(|t| p.target == t));
            state.pending = kept;
            (state.handle, taken)
        };
        let code = py.detach(move || call(handle));
        if code != TETHER_SUCCESS {
            self.lock().pending.extend(taken);
        } else {
            drop(taken);
        }
        check(py, code)
    }
}

/// The datatype of a typed one-sided operation and its size: `datatype`
/// when given, else the buffer's own.
fn typed(
    py: Python<'_>,
    b: &Buffer,
    datatype: Option<tether_datatype>,
) -> PyResult<(tether_datatype, usize)> {
    let datatype = match datatype {
        Some(d) => d,
        None => b.datatype()?,
    };
    let mut size = 0;
    check(py, tether_type_size(datatype, &mut size))?;
    Ok((datatype, size as usize))
}

/// Checks that `b` is exactly one element of `size` bytes and of the
/// same format as `result` (the atomics take one element).
fn one_element(what: &str, role: &str, b: &Buffer, result: &Buffer, size: usize) -> PyResult<()> {
    if b.format() != result.format() || b.itemsize() != result.itemsize() {
        return Err(PyTypeError::new_err(format!(
            "{what}: {role} has items of format {:?} ({} bytes) but result of {:?} ({} bytes); \
             an atomic combines elements of one type",
            b.format(),
            b.itemsize(),
            result.format(),
            result.itemsize()
        )));
    }
    if b.len() != size {
        return Err(PyValueError::new_err(format!(
            "{what}: {role} must be exactly one element ({size} bytes), not {} bytes",
            b.len()
        )));
    }
    Ok(())
}

#[pymethods]
impl Win {
    /// Exposes `array` (any writable, contiguous buffer: a numpy array
    /// first; 0 bytes allowed) to the members of `comm` (default
    /// `tether.UNIVERSE`) for one-sided access; collective over `comm`,
    /// waits without the GIL. The window holds `array` until `Free`.
    #[new]
    #[pyo3(signature = (array, comm = None))]
    fn new(
        py: Python<'_>,
        array: &Bound<'_, PyAny>,
        comm: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        orphans::reap();
        let comm = match comm.filter(|c| !c.is_none()) {
            None => TETHER_COMM_UNIVERSE,
            Some(c) => match c.cast::<Comm>() {
                Ok(c) => c.get().handle,
                Err(_) => {
                    return Err(PyTypeError::new_err(format!(
                        "Win: comm must be a tether.Comm, not {}",
                        c.get_type().name()?
                    )))
                }
            },
        };
        let memory = Buffer::get(array, Access::Write, "Win (the window's memory)")?;
        let (base, bytes) = (Addr::of(&memory), memory.len() as i64);
        let (code, handle) = py.detach(move || {
            let mut win = TETHER_WIN_NULL;
            let code = tether_win_create(base.ptr(), bytes, comm, &mut win);
            (code, win)
        });
        check(py, code)?;
        Ok(Win {
            state: Mutex::new(State {
                handle,
                memory: Some(memory),
                array: Some(array.clone().unbind()),
                pending: Vec::new(),
            }),
        })
    }

    /// Writes the bytes of `origin` into rank `target`'s window at byte
    /// `offset`. Complete (in the target's memory) after the next
    /// `Flush(target)`, `Flush_all` or `Fence`; the window holds `origin`
    /// until then. `RmaRangeError` for an access outside the window.
    #[allow(non_snake_case)]
    #[pyo3(signature = (origin, target, offset = 0))]
    fn Put(
        &self,
        py: Python<'_>,
        origin: &Bound<'_, PyAny>,
        target: c_int,
        offset: i64,
    ) -> PyResult<()> {
        orphans::reap();
        let b = Buffer::get(origin, Access::Read, "Put")?;
        let code = tether_put(
            b.ptr(),
            b.len() as i64,
            TETHER_BYTE,
            target,
            offset,
            self.handle(),
        );
        check(py, code)?;
        self.keep(target, b);
        Ok(())
    }

    /// Reads `len(origin)` bytes of rank `target`'s window at byte
    /// `offset` into `origin`, which holds them after the next flush of
    /// that target (or fence).
    #[allow(non_snake_case)]
    #[pyo3(signature = (origin, target, offset = 0))]
    fn Get(
        &self,
        py: Python<'_>,
        origin: &Bound<'_, PyAny>,
        target: c_int,
        offset: i64,
    ) -> PyResult<()> {
        orphans::reap();
        let b = Buffer::get(origin, Access::Write, "Get")?;
        let code = tether_get(
            b.ptr(),
            b.len() as i64,
            TETHER_BYTE,
            target,
            offset,
            self.handle(),
        );
        check(py, code)?;
        self.keep(target, b);
        Ok(())
    }

    /// `Put` returning a `Request` that completes (and releases `origin`)
    /// once `origin` may be reused; the data is in the target's memory
    /// after the next flush.
    #[allow(non_snake_case)]
    #[pyo3(signature = (origin, target, offset = 0))]
    fn Rput(
        &self,
        py: Python<'_>,
        origin: &Bound<'_, PyAny>,
        target: c_int,
        offset: i64,
    ) -> PyResult<Request> {
        orphans::reap();
        let b = Buffer::get(origin, Access::Read, "Rput")?;
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_rput(
            b.ptr(),
            b.len() as i64,
            TETHER_BYTE,
            target,
            offset,
            self.handle(),
            &mut req,
        );
        check(py, code)?;
        Ok(Request::new(vec![req], vec![b], None))
    }

    /// `Get` returning a `Request` that completes once the data is in
    /// `origin` (`RmaRangeError` from `wait` when the target refuses).
    #[allow(non_snake_case)]
    #[pyo3(signature = (origin, target, offset = 0))]
    fn Rget(
        &self,
        py: Python<'_>,
        origin: &Bound<'_, PyAny>,
        target: c_int,
        offset: i64,
    ) -> PyResult<Request> {
        orphans::reap();
        let b = Buffer::get(origin, Access::Write, "Rget")?;
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_rget(
            b.ptr(),
            b.len() as i64,
            TETHER_BYTE,
            target,
            offset,
            self.handle(),
            &mut req,
        );
        check(py, code)?;
        Ok(Request::new(vec![req], vec![b], None))
    }

    /// Combines the elements of `origin` into rank `target`'s window at
    /// byte `offset` with `op` (a reduction, `REPLACE` or `NO_OP`),
    /// atomically per element; complete after the next flush. The
    /// datatype is `origin`'s (or `datatype`). `OpError` for an invalid
    /// (type, op) pair.
    #[allow(non_snake_case)]
    #[pyo3(signature = (origin, target, offset = 0, op = TETHER_SUM, datatype = None))]
    fn Accumulate(
        &self,
        py: Python<'_>,
        origin: &Bound<'_, PyAny>,
        target: c_int,
        offset: i64,
        op: tether_op,
        datatype: Option<tether_datatype>,
    ) -> PyResult<()> {
        orphans::reap();
        let b = Buffer::get_described(origin, Access::Read, "Accumulate")?;
        let (datatype, size) = typed(py, &b, datatype)?;
        if b.len() % size != 0 {
            return Err(PyValueError::new_err(format!(
                "Accumulate: a buffer of {} bytes is not a whole number of {size}-byte elements",
                b.len()
            )));
        }
        let count = (b.len() / size) as i64;
        let code = tether_accumulate(b.ptr(), count, datatype, target, offset, op, self.handle());
        check(py, code)?;
        self.keep(target, b);
        Ok(())
    }

    /// Combines the one element `origin` into rank `target`'s window at
    /// byte `offset` with `op` and fetches the element's value before
    /// into `result` (a writable buffer of one element of `origin`'s
    /// type), atomically; `result` holds it after the next flush. With
    /// `op=NO_OP` (an atomic read) `origin` may be None. Integer and
    /// floating types; the offset must be aligned to the element size.
    #[allow(non_snake_case)]
    #[pyo3(signature = (origin, result, target, offset = 0, op = TETHER_SUM, datatype = None))]
    #[allow(clippy::too_many_arguments)]
    fn Fetch_and_op(
        &self,
        py: Python<'_>,
        origin: Option<&Bound<'_, PyAny>>,
        result: &Bound<'_, PyAny>,
        target: c_int,
        offset: i64,
        op: tether_op,
        datatype: Option<tether_datatype>,
    ) -> PyResult<()> {
        orphans::reap();
        let r = Buffer::get_described(result, Access::Write, "Fetch_and_op result")?;
        let (datatype, size) = typed(py, &r, datatype)?;
        let origin = match origin.filter(|o| !o.is_none()) {
            Some(o) => Some(Buffer::get_described(
                o,
                Access::Read,
                "Fetch_and_op origin",
            )?),
            None if op == TETHER_NO_OP => None,
            None => {
                return Err(PyValueError::new_err(
                    "Fetch_and_op: origin may be None only with op=tether.NO_OP",
                ))
            }
        };
        one_element("Fetch_and_op", "result", &r, &r, size)?;
        if let Some(o) = &origin {
            one_element("Fetch_and_op", "origin", o, &r, size)?;
        }
        // NO_OP reads nothing of the origin: the result's address stands in.
        let origin_ptr = origin.as_ref().map_or(r.ptr(), Buffer::ptr);
        let code = tether_fetch_and_op(
            origin_ptr,
            r.ptr(),
            datatype,
            target,
            offset,
            op,
            self.handle(),
        );
        check(py, code)?;
        // The origin is read during the call; the result is written later.
        self.keep(target, r);
        Ok(())
    }

    /// Replaces the one element at rank `target`'s window at byte
    /// `offset` with `origin` if it equals `compare`, and fetches its value
    /// before into `result`, atomically; `result` holds it after the next
    /// flush. The three buffers are one element of one integer type.
    #[allow(non_snake_case)]
    #[pyo3(signature = (origin, compare, result, target, offset = 0, datatype = None))]
    #[allow(clippy::too_many_arguments)]
    fn Compare_and_swap(
        &self,
        py: Python<'_>,
        origin: &Bound<'_, PyAny>,
        compare: &Bound<'_, PyAny>,
        result: &Bound<'_, PyAny>,
        target: c_int,
        offset: i64,
        datatype: Option<tether_datatype>,
    ) -> PyResult<()> {
        orphans::reap();
        let r = Buffer::get_described(result, Access::Write, "Compare_and_swap result")?;
        let o = Buffer::get_described(origin, Access::Read, "Compare_and_swap origin")?;
        let c = Buffer::get_described(compare, Access::Read, "Compare_and_swap compare")?;
        let (datatype, size) = typed(py, &r, datatype)?;
        one_element("Compare_and_swap", "result", &r, &r, size)?;
        one_element("Compare_and_swap", "origin", &o, &r, size)?;
        one_element("Compare_and_swap", "compare", &c, &r, size)?;
        let code = tether_compare_and_swap(
            o.ptr(),
            c.ptr(),
            r.ptr(),
            datatype,
            target,
            offset,
            self.handle(),
        );
        check(py, code)?;
        self.keep(target, r);
        Ok(())
    }

    /// Waits (without the GIL) until every operation this process issued
    /// to rank `target` is complete there (and its results here); raises
    /// the first of them that failed (`PeerLostError`, `RmaRangeError`).
    #[allow(non_snake_case)]
    fn Flush(&self, py: Python<'_>, target: c_int) -> PyResult<()> {
        self.complete(py, Some(target), move |w| tether_win_flush(target, w))
    }

    /// `Flush` for every member of the window.
    #[allow(non_snake_case)]
    fn Flush_all(&self, py: Python<'_>) -> PyResult<()> {
        self.complete(py, None, |w| tether_win_flush_all(w))
    }

    /// Completes every member's operations on the window; collective, waits
    /// without the GIL. Afterwards the array holds what others put.
    #[allow(non_snake_case)]
    fn Fence(&self, py: Python<'_>) -> PyResult<()> {
        self.complete(py, None, |w| tether_win_fence(w))
    }

    /// Completes every member's operations and frees the window;
    /// collective, waits without the GIL. The array is released; later
    /// calls raise `ArgError`.
    #[allow(non_snake_case)]
    fn Free(&self, py: Python<'_>) -> PyResult<()> {
        self.complete(py, None, |mut w| tether_win_free(&mut w))?;
        let (memory, array) = {
            let mut state = self.lock();
            state.handle = TETHER_WIN_NULL;
            (state.memory.take(), state.array.take())
        };
        drop((memory, array));
        Ok(())
    }

    /// The C handle (`WIN_NULL` once freed), for passing to C or Fortran.
    #[getter(handle)]
    fn get_handle(&self) -> tether_win {
        self.handle()
    }

    /// The object whose memory the window exposes (None once freed).
    #[getter]
    fn array(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.lock().array.as_ref().map(|a| a.clone_ref(py))
    }

    fn __repr__(&self) -> String {
        let state = self.lock();
        match &state.memory {
            Some(m) => format!("Win(handle={}, bytes={})", state.handle, m.len()),
            None => "Win(freed)".to_string(),
        }
    }
}

impl Drop for Win {
    /// Unfreed: the window still exists for the other processes, so its
    /// memory and the buffers of pending operations stay exported.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        if state.handle != TETHER_WIN_NULL {
            std::mem::forget(state.memory.take());
            std::mem::forget(state.array.take());
            std::mem::forget(std::mem::take(&mut state.pending));
        }
    }
}

//! `tether.Comm`: a communicator, and its point-to-point operations on
//! buffers (DESIGN 3.3).
//!
//! Upper-case methods take any object with the buffer protocol and hand
//! its memory to the C layer as it is: no copy, no conversion. The message
//! is the buffer's bytes (`TETHER_BYTE`, count = size in bytes), so sender
//! and receiver may view them with different types. Blocking calls release
//! the GIL; non-blocking ones return a `Request` that holds the buffer
//! until it completes. The pickling (lower-case) methods are added by the
//! Python class `tether.Comm`, which derives from this one.

use std::ffi::c_int;

use pyo3::prelude::*;

use tether_capi::*;

use crate::buffer::{with_bytes, Access, Buffer};
use crate::error::{check, error};
use crate::orphans;
use crate::request::Request;
use crate::status::Status;

#[pyclass(module = "tether", subclass, frozen, eq, hash)]
#[derive(PartialEq, Eq, Hash)]
pub struct Comm {
    pub handle: tether_comm,
}

/// The point-to-point methods, called by the vectorcall entries of
/// `fastcall` (the docs and signatures Python sees are there).
impl Comm {
    /// Sends `buf` to rank `dest`; returns when `buf` may be reused.
    pub fn send(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        dest: i32,
        tag: i32,
    ) -> PyResult<()> {
        orphans::reap();
        let comm = self.handle;
        let code = with_bytes(buf, Access::Read, "Send", |ptr, len| {
            // A send that completes as it starts (an eager message) never
            // gives the GIL away: releasing and re-taking it would cost
            // more than the send.
            let mut req = TETHER_REQUEST_NULL;
            let code = send_started(ptr, len, TETHER_BYTE, dest, tag, comm, &mut req);
            if req == TETHER_REQUEST_NULL {
                return code;
            }
            py.detach(move || tether_wait(&mut req, std::ptr::null_mut()))
        })?;
        check(py, code)
    }

    /// Receives a message into `buf` and returns its `Status`. A longer
    /// message raises `TruncateError` (its `.status` has the true size).
    pub fn recv(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        source: i32,
        tag: i32,
    ) -> PyResult<Status> {
        orphans::reap();
        let comm = self.handle;
        let (code, status) = with_bytes(buf, Access::Write, "Recv", |ptr, len| {
            // A message already here completes the receive as it is posted,
            // with the GIL held; only a receive that must wait releases it.
            let mut req = TETHER_REQUEST_NULL;
            let mut status = tether_status::default();
            let code = recv_started(
                ptr,
                len,
                TETHER_BYTE,
                source,
                tag,
                comm,
                &mut req,
                &mut status,
            );
            if req == TETHER_REQUEST_NULL {
                return (code, status);
            }
            py.detach(move || {
                let code = tether_wait(&mut req, &mut status);
                (code, status)
            })
        })?;
        if code != TETHER_SUCCESS {
            return Err(error(py, code, Some(Status::new(status))));
        }
        Ok(Status::new(status))
    }

    /// Starts sending `buf` to rank `dest`; the request keeps `buf` alive.
    pub fn isend(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        dest: i32,
        tag: i32,
    ) -> PyResult<Request> {
        orphans::reap();
        let buffer = Buffer::get(buf, Access::Read, "Isend")?;
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_isend(
            buffer.ptr(),
            buffer.len() as i64,
            TETHER_BYTE,
            dest,
            tag,
            self.handle,
            &mut req,
        );
        check(py, code)?;
        Ok(Request::new(vec![req], vec![buffer], None))
    }

    /// Posts a receive into `buf`; the request keeps `buf` alive.
    pub fn irecv(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        source: i32,
        tag: i32,
    ) -> PyResult<Request> {
        orphans::reap();
        let buffer = Buffer::get(buf, Access::Write, "Irecv")?;
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_irecv(
            buffer.ptr(),
            buffer.len() as i64,
            TETHER_BYTE,
            source,
            tag,
            self.handle,
            &mut req,
        );
        check(py, code)?;
        Ok(Request::new(vec![req], vec![buffer], None))
    }

    fn query(&self, py: Python<'_>, f: impl FnOnce(&mut c_int) -> c_int) -> PyResult<i32> {
        let mut value = 0;
        check(py, f(&mut value))?;
        Ok(value)
    }
}

#[pymethods]
impl Comm {
    /// Wraps the C handle `handle` (`tether.UNIVERSE` wraps
    /// `TETHER_COMM_UNIVERSE`); communicators are made by `Comm.create`.
    #[new]
    fn new(handle: tether_comm) -> Self {
        Comm { handle }
    }

    /// The C handle, for passing to C or Fortran code.
    #[getter]
    fn handle(&self) -> tether_comm {
        self.handle
    }

    /// My rank in this communicator.
    #[getter]
    fn rank(&self, py: Python<'_>) -> PyResult<i32> {
        self.query(py, |v| tether_comm_rank(self.handle, v))
    }

    /// Number of processes in this communicator.
    #[getter]
    fn size(&self, py: Python<'_>) -> PyResult<i32> {
        self.query(py, |v| tether_comm_size(self.handle, v))
    }

    #[allow(non_snake_case)]
    fn Get_rank(&self, py: Python<'_>) -> PyResult<i32> {
        self.rank(py)
    }

    #[allow(non_snake_case)]
    fn Get_size(&self, py: Python<'_>) -> PyResult<i32> {
        self.size(py)
    }

    /// Universe rank of rank `rank` of this communicator.
    fn universe_rank(&self, py: Python<'_>, rank: i32) -> PyResult<i32> {
        self.query(py, |v| tether_comm_universe_rank(self.handle, rank, v))
    }

    /// Waits (without the GIL) until a matching message can be received;
    /// returns its `Status` without receiving it.
    #[allow(non_snake_case)]
    #[pyo3(signature = (source = TETHER_ANY_SOURCE, tag = TETHER_ANY_TAG))]
    fn Probe(&self, py: Python<'_>, source: i32, tag: i32) -> PyResult<Status> {
        let comm = self.handle;
        let (code, status) = py.detach(move || {
            let mut status = tether_status::default();
            let code = tether_probe(source, tag, comm, &mut status);
            (code, status)
        });
        check(py, code)?;
        Ok(Status::new(status))
    }

    /// The `Status` of a matching message if one can be received now,
    /// else `None`.
    #[allow(non_snake_case)]
    #[pyo3(signature = (source = TETHER_ANY_SOURCE, tag = TETHER_ANY_TAG))]
    fn Iprobe(&self, py: Python<'_>, source: i32, tag: i32) -> PyResult<Option<Status>> {
        let mut status = tether_status::default();
        let mut flag = 0;
        check(
            py,
            tether_iprobe(source, tag, self.handle, &mut flag, &mut status),
        )?;
        Ok((flag != 0).then(|| Status::new(status)))
    }

    /// Starts sending each of `bufs`, in order, to `dest` with `tag`, as
    /// one request (the parts of a pickled object).
    fn _isend_parts(
        &self,
        py: Python<'_>,
        bufs: Vec<Bound<'_, PyAny>>,
        dest: i32,
        tag: &Bound<'_, PyAny>,
    ) -> PyResult<Request> {
        let tag = crate::error::tag(py, tag)?;
        let buffers = bufs
            .iter()
            .map(|b| Buffer::get(b, Access::Read, "isend"))
            .collect::<PyResult<Vec<_>>>()?;
        let mut handles = Vec::with_capacity(buffers.len());
        for buffer in &buffers {
            let mut req = TETHER_REQUEST_NULL;
            let code = tether_isend(
                buffer.ptr(),
                buffer.len() as i64,
                TETHER_BYTE,
                dest,
                tag,
                self.handle,
                &mut req,
            );
            if code != TETHER_SUCCESS {
                let failure = error(py, code, None);
                // Already started parts must finish before their buffers go.
                Request::new(handles, buffers, None).wait_quietly(py);
                return Err(failure);
            }
            handles.push(req);
        }
        Ok(Request::new(handles, buffers, None))
    }

    /// `Irecv` whose completion calls `finish(status)`; `wait` returns what
    /// `finish` returns (the unpickled object).
    fn _irecv_then(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        source: i32,
        tag: &Bound<'_, PyAny>,
        finish: Py<PyAny>,
    ) -> PyResult<Request> {
        let tag = crate::error::tag(py, tag)?;
        let buffer = Buffer::get(buf, Access::Write, "irecv")?;
        let mut req = TETHER_REQUEST_NULL;
        let code = tether_irecv(
            buffer.ptr(),
            buffer.len() as i64,
            TETHER_BYTE,
            source,
            tag,
            self.handle,
            &mut req,
        );
        check(py, code)?;
        Ok(Request::new(vec![req], vec![buffer], Some(finish)))
    }

    /// Frees this communicator (collective calls already started on it
    /// complete); later use raises `CommError`. `UNIVERSE` cannot be freed.
    fn free(&self, py: Python<'_>) -> PyResult<()> {
        let mut handle = self.handle;
        check(py, tether_comm_free(&mut handle))
    }

    fn __repr__(&self) -> String {
        format!("Comm(handle={})", self.handle)
    }
}

/// The handle of a new communicator of every joined process of the
/// programs `ids` (collective over them; waits without the GIL), or
/// `COMM_NULL` for a process outside them.
#[pyfunction]
pub fn comm_create(py: Python<'_>, ids: Vec<c_int>) -> PyResult<tether_comm> {
    let (code, comm) = py.detach(move || {
        let mut comm = TETHER_COMM_NULL;
        let code = tether_comm_create(ids.len() as c_int, ids.as_ptr(), &mut comm);
        (code, comm)
    });
    check(py, code)?;
    Ok(comm)
}

/// The handle of a new communicator whose rank i is universe rank
/// `ranks[i]`, or `COMM_NULL` for a process outside them.
#[pyfunction]
pub fn comm_create_ranks(py: Python<'_>, ranks: Vec<c_int>) -> PyResult<tether_comm> {
    let (code, comm) = py.detach(move || {
        let mut comm = TETHER_COMM_NULL;
        let code = tether_comm_create_ranks(ranks.len() as c_int, ranks.as_ptr(), &mut comm);
        (code, comm)
    });
    check(py, code)?;
    Ok(comm)
}

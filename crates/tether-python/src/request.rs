//! `tether.Request`: a pending non-blocking operation.
//!
//! A request holds the C request(s) it stands for and the buffers they
//! use: the buffers stay exported, so alive and unresizable, until the
//! request completes, even when the caller dropped every other reference.
//! Waiting releases the GIL. A request completes once; after that `wait`
//! and `test` return at once with an empty status, as for MPI's null
//! request.
//!
//! An operation may span several C requests (a pickled object sent with
//! out-of-band buffers); it completes when all of them have. A `finish`
//! callable, given the status, turns the completion into the value that
//! `wait` returns (the received object); without one `wait` returns the
//! `Status`.

use std::ffi::c_int;

use pyo3::prelude::*;
use pyo3::types::PyList;

use tether_capi::*;

use crate::buffer::Buffer;
use crate::error::{check, error};
use crate::orphans;
use crate::status::Status;

#[pyclass(module = "tether")]
pub struct Request {
    /// Live C requests; empty once complete.
    handles: Vec<tether_request>,
    /// Buffers the C requests read or write, held until completion.
    keep: Vec<Buffer>,
    finish: Option<Py<PyAny>>,
}

impl Request {
    pub fn new(handles: Vec<tether_request>, keep: Vec<Buffer>, finish: Option<Py<PyAny>>) -> Self {
        Request {
            handles,
            keep,
            finish,
        }
    }

    /// Takes the completed C requests' statuses: releases the buffers and
    /// gives `wait`'s value, or the exception for `code` (with the status
    /// of the request that failed as `.status`).
    fn complete(
        &mut self,
        py: Python<'_>,
        code: c_int,
        statuses: &[tether_status],
    ) -> PyResult<Py<PyAny>> {
        self.release();
        let failed = statuses.iter().find(|s| s.error != TETHER_SUCCESS);
        let status = Status::new(
            *failed
                .or(statuses.first())
                .unwrap_or(&Status::empty().inner),
        );
        if code != TETHER_SUCCESS {
            self.finish = None;
            return Err(error(py, code, Some(status)));
        }
        match self.finish.take() {
            Some(finish) => finish.call1(py, (status,)),
            None => Ok(Py::new(py, status)?.into_any()),
        }
    }

    /// Releases the buffers once the C requests completed.
    fn release(&mut self) {
        self.handles.clear();
        self.keep.clear();
    }

    /// Waits (without the GIL) for a request whose value is not needed,
    /// raising its error (the blocking collectives).
    pub fn finish(mut self, py: Python<'_>) -> PyResult<()> {
        self.wait_inner(py).map(drop)
    }

    /// Waits for the C requests, ignoring how they ended (clean-up after
    /// a failure that is reported otherwise).
    pub fn wait_quietly(mut self, py: Python<'_>) {
        let _ = self.wait_inner(py);
    }

    /// The value of an already completed request.
    fn done_value(py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(Py::new(py, Status::empty())?.into_any())
    }

    fn wait_inner(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if self.handles.is_empty() {
            return Request::done_value(py);
        }
        let handles = std::mem::take(&mut self.handles);
        let (code, handles, statuses) = py.detach(move || wait_handles(handles));
        self.handles = handles;
        self.complete(py, code, &statuses)
    }

    fn test_inner(&mut self, py: Python<'_>) -> PyResult<(bool, Option<Py<PyAny>>)> {
        if self.handles.is_empty() {
            return Ok((true, Some(Request::done_value(py)?)));
        }
        let n = self.handles.len();
        let mut statuses = vec![tether_status::default(); n];
        let mut flag = 0;
        let code = tether_testall(
            n as c_int,
            self.handles.as_mut_ptr(),
            &mut flag,
            statuses.as_mut_ptr(),
        );
        if flag == 0 {
            check(py, code)?;
            return Ok((false, None));
        }
        Ok((true, Some(self.complete(py, code, &statuses)?)))
    }
}

impl Drop for Request {
    /// A request dropped while pending leaves its C requests and buffers to
    /// `orphans`, which keeps the buffers until the C requests complete.
    fn drop(&mut self) {
        if !self.handles.is_empty() {
            orphans::adopt(
                std::mem::take(&mut self.handles),
                std::mem::take(&mut self.keep),
            );
        }
    }
}

/// Waits for every C request of `handles` (resetting each to null).
fn wait_handles(
    mut handles: Vec<tether_request>,
) -> (c_int, Vec<tether_request>, Vec<tether_status>) {
    let mut statuses = vec![tether_status::default(); handles.len()];
    let code = if handles.len() == 1 {
        tether_wait(&mut handles[0], &mut statuses[0])
    } else {
        tether_waitall(
            handles.len() as c_int,
            handles.as_mut_ptr(),
            statuses.as_mut_ptr(),
        )
    };
    (code, handles, statuses)
}

#[pymethods]
impl Request {
    /// Waits (without the GIL) until the operation completes; returns its
    /// `Status` (or, for an object receive, the object). Raises the
    /// operation's error (`TruncateError`, `PeerLostError`, ...).
    fn wait(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.wait_inner(py)
    }

    /// `(True, wait())` if the operation has completed, else `(False, None)`.
    fn test(&mut self, py: Python<'_>) -> PyResult<(bool, Option<Py<PyAny>>)> {
        self.test_inner(py)
    }

    /// Asks to cancel a receive that has not matched yet; the request must
    /// still be completed with `wait` or `test` (its status then says
    /// `tether.ERR_CANCELLED`). Sends cannot be cancelled.
    fn cancel(&mut self, py: Python<'_>) -> PyResult<()> {
        for handle in self.handles.iter_mut() {
            check(py, tether_cancel(handle))?;
        }
        Ok(())
    }

    /// True until the request has completed.
    #[getter]
    fn active(&self) -> bool {
        !self.handles.is_empty()
    }

    /// Waits for all `requests` (without the GIL) and returns their values
    /// in order. Every request completes, even when some fail; then the
    /// first failure is raised.
    #[staticmethod]
    fn waitall(py: Python<'_>, requests: &Bound<'_, PyList>) -> PyResult<Vec<Py<PyAny>>> {
        let reqs = requests_of(requests)?;
        let mut group = Group::take(&reqs)?;
        let all = std::mem::take(&mut group.handles);
        let (_, all, statuses) = py.detach(move || {
            if all.is_empty() {
                (TETHER_SUCCESS, all, Vec::new())
            } else {
                wait_handles(all)
            }
        });
        group.handles = all;
        group.complete(py, &statuses)
    }

    /// Waits until one of `requests` completes; returns `(index, value)`,
    /// or `(tether.UNDEFINED, None)` when none is active.
    #[staticmethod]
    fn waitany(py: Python<'_>, requests: &Bound<'_, PyList>) -> PyResult<(i32, Option<Py<PyAny>>)> {
        let reqs = requests_of(requests)?;
        if reqs.iter().all(|r| r.borrow().handles.is_empty()) {
            return Ok((TETHER_UNDEFINED, None));
        }
        if reqs.iter().all(|r| r.borrow().handles.len() <= 1) {
            let handles: Vec<tether_request> = reqs
                .iter()
                .map(|r| {
                    r.borrow()
                        .handles
                        .first()
                        .copied()
                        .unwrap_or(TETHER_REQUEST_NULL)
                })
                .collect();
            let (code, index, status) = py.detach(move || {
                let mut handles = handles;
                let mut index = TETHER_UNDEFINED;
                let mut status = tether_status::default();
                let code = tether_waitany(
                    handles.len() as c_int,
                    handles.as_mut_ptr(),
                    &mut index,
                    &mut status,
                );
                (code, index, status)
            });
            if index == TETHER_UNDEFINED {
                check(py, code)?;
                return Ok((TETHER_UNDEFINED, None));
            }
            let mut req = reqs[index as usize].borrow_mut();
            return Ok((index, Some(req.complete(py, code, &[status])?)));
        }
        loop {
            for (i, r) in reqs.iter().enumerate() {
                let mut req = r.borrow_mut();
                if req.handles.is_empty() {
                    continue;
                }
                if let (true, value) = req.test_inner(py)? {
                    return Ok((i as i32, value));
                }
            }
            py.detach(|| tether_progress());
        }
    }

    /// `(True, [values])` when every request has completed (all are then
    /// freed), else `(False, None)` and none is.
    #[staticmethod]
    fn testall(
        py: Python<'_>,
        requests: &Bound<'_, PyList>,
    ) -> PyResult<(bool, Option<Vec<Py<PyAny>>>)> {
        let reqs = requests_of(requests)?;
        let mut group = Group::take(&reqs)?;
        let mut statuses = vec![tether_status::default(); group.handles.len()];
        let mut flag = 1;
        let code = if group.handles.is_empty() {
            TETHER_SUCCESS
        } else {
            tether_testall(
                group.handles.len() as c_int,
                group.handles.as_mut_ptr(),
                &mut flag,
                statuses.as_mut_ptr(),
            )
        };
        if flag == 0 {
            group.restore();
            check(py, code)?;
            return Ok((false, None));
        }
        group.complete(py, &statuses).map(|v| (true, Some(v)))
    }
}

fn requests_of<'py>(requests: &Bound<'py, PyList>) -> PyResult<Vec<Bound<'py, Request>>> {
    requests
        .iter()
        .map(|r| r.cast_into::<Request>().map_err(PyErr::from))
        .collect()
}

/// The C requests of several Python requests, in one array for one C call.
struct Group<'py> {
    reqs: Vec<PyRefMut<'py, Request>>,
    counts: Vec<usize>,
    handles: Vec<tether_request>,
}

impl<'py> Group<'py> {
    /// Borrows every request and moves its live C requests into one array.
    fn take(reqs: &[Bound<'py, Request>]) -> PyResult<Self> {
        let mut borrowed: Vec<PyRefMut<'py, Request>> = reqs
            .iter()
            .map(|r| r.try_borrow_mut().map_err(PyErr::from))
            .collect::<PyResult<_>>()?;
        let counts = borrowed.iter().map(|r| r.handles.len()).collect();
        let handles = borrowed
            .iter_mut()
            .flat_map(|r| std::mem::take(&mut r.handles))
            .collect();
        Ok(Group {
            reqs: borrowed,
            counts,
            handles,
        })
    }

    /// Gives every request its C requests back (nothing completed).
    fn restore(mut self) {
        let mut all = std::mem::take(&mut self.handles).into_iter();
        for (req, n) in self.reqs.iter_mut().zip(&self.counts) {
            req.handles = all.by_ref().take(*n).collect();
        }
    }

    /// Completes every request from its share of `statuses`; returns the
    /// values in order, or raises the first failure after all completed.
    fn complete(mut self, py: Python<'_>, statuses: &[tether_status]) -> PyResult<Vec<Py<PyAny>>> {
        let mut values = Vec::with_capacity(self.reqs.len());
        let mut first_error = None;
        let mut all = std::mem::take(&mut self.handles).into_iter();
        let mut at = 0;
        for (req, n) in self.reqs.iter_mut().zip(&self.counts) {
            let mine = &statuses[at..at + n];
            at += n;
            req.handles = all.by_ref().take(*n).collect();
            let code = mine
                .iter()
                .map(|s| s.error)
                .find(|e| *e != TETHER_SUCCESS && *e != TETHER_ERR_CANCELLED)
                .unwrap_or(TETHER_SUCCESS);
            let value = if *n == 0 {
                Request::done_value(py)
            } else {
                req.complete(py, code, mine)
            };
            match value {
                Ok(v) => values.push(v),
                Err(e) => {
                    values.push(py.None());
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(values),
        }
    }
}

//! `tether.Status`: how a receive (or any request) completed.

use pyo3::prelude::*;

use tether_capi::*;

use crate::error::check;

/// The source rank (in the communicator), the tag, the error class
/// (`0` or e.g. `tether.ERR_TRUNCATE`) and the message's true size in
/// bytes (`count`), as mpi4py's `Status`.
#[pyclass(module = "tether", frozen, freelist = 64)]
#[derive(Clone, Copy)]
pub struct Status {
    pub inner: tether_status,
}

impl Status {
    pub fn new(inner: tether_status) -> Self {
        Status { inner }
    }

    /// The status of a null request or an ignored status.
    pub fn empty() -> Self {
        Status::new(tether_status {
            source: TETHER_ANY_SOURCE,
            tag: TETHER_ANY_TAG,
            error: TETHER_SUCCESS,
            bytes: 0,
        })
    }
}

#[pymethods]
impl Status {
    #[getter]
    fn source(&self) -> i32 {
        self.inner.source
    }

    #[getter]
    fn tag(&self) -> i32 {
        self.inner.tag
    }

    #[getter]
    fn error(&self) -> i32 {
        self.inner.error
    }

    /// The message's size in bytes.
    #[getter]
    fn count(&self) -> i64 {
        self.inner.bytes
    }

    #[allow(non_snake_case)]
    fn Get_source(&self) -> i32 {
        self.inner.source
    }

    #[allow(non_snake_case)]
    fn Get_tag(&self) -> i32 {
        self.inner.tag
    }

    #[allow(non_snake_case)]
    fn Get_error(&self) -> i32 {
        self.inner.error
    }

    /// Elements of `datatype` in the message; `tether.UNDEFINED` when its
    /// size is not a whole number of them.
    #[allow(non_snake_case)]
    #[pyo3(signature = (datatype = TETHER_BYTE))]
    fn Get_count(&self, py: Python<'_>, datatype: tether_datatype) -> PyResult<i64> {
        let mut count = 0i64;
        check(py, tether_get_count(&self.inner, datatype, &mut count))?;
        Ok(count)
    }

    fn __repr__(&self) -> String {
        format!(
            "Status(source={}, tag={}, error={}, count={})",
            self.inner.source, self.inner.tag, self.inner.error, self.inner.bytes
        )
    }
}

//! C error codes as Python exceptions.
//!
//! The exception classes live in the pure-Python module `tether.errors`
//! (so that a class can also derive from a built-in, as `TimeoutError`
//! does); this module only finds the class for a code there and raises it
//! with the code and the calling thread's detailed message.

use std::ffi::{c_char, c_int};

use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

use tether_capi::*;

use crate::status::Status;

/// `tether.errors.by_code`: code -> exception class.
static CLASSES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// The calling thread's last detailed error message.
fn last_error() -> String {
    let mut buf = vec![0u8; TETHER_MAX_ERROR_STRING as usize];
    if tether_last_error(buf.as_mut_ptr().cast::<c_char>(), buf.len() as c_int) != TETHER_SUCCESS {
        return String::new();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The exception for `code`, carrying the last detailed message (and the
/// status of the operation, where there is one, as `.status`).
pub fn error(py: Python<'_>, code: c_int, status: Option<Status>) -> PyErr {
    match raise(py, code, last_error(), status) {
        Ok(e) | Err(e) => e,
    }
}

/// `ArgError` (TETHER_ERR_ARG) with `message`, for a refusal the
/// binding itself makes.
pub fn arg_error(py: Python<'_>, message: String) -> PyErr {
    match raise(
        py,
        TETHER_ERR_ARG,
        format!("TETHER_ERR_ARG: {message}"),
        None,
    ) {
        Ok(e) | Err(e) => e,
    }
}

/// A tag argument as the C int the C API takes. An integer that does not
/// fit one (above `TAG_UB`, or below every valid value) is a `TagError`
/// naming it, as the C layer's own check gives for other bad tags; what
/// is not an integer keeps the usual `TypeError`.
pub fn tag(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<i32> {
    match value.extract::<i32>() {
        Err(e) if e.is_instance_of::<PyOverflowError>(py) => {
            let message = format!(
                "TETHER_ERR_TAG: tag {value} is invalid: tags are 0 to TAG_UB ({TETHER_TAG_UB}), \
                 or ANY_TAG to receive"
            );
            Err(match raise(py, TETHER_ERR_TAG, message, None) {
                Ok(e) | Err(e) => e,
            })
        }
        other => other,
    }
}

fn raise(py: Python<'_>, code: c_int, message: String, status: Option<Status>) -> PyResult<PyErr> {
    let classes = CLASSES.get_or_try_init(py, || -> PyResult<Py<PyDict>> {
        let dict = py.import("tether.errors")?.getattr("by_code")?;
        Ok(dict.cast_into::<PyDict>()?.unbind())
    })?;
    let classes = classes.bind(py);
    let class = match classes.get_item(code)? {
        Some(c) => c,
        None => py.import("tether.errors")?.getattr("TetherError")?,
    };
    let exc = class.call1((code, message))?;
    if let Some(status) = status {
        exc.setattr("status", Py::new(py, status)?)?;
    }
    Ok(PyErr::from_value(exc))
}

/// `Ok(())` for `TETHER_SUCCESS`, else the exception for `code`.
pub fn check(py: Python<'_>, code: c_int) -> PyResult<()> {
    if code == TETHER_SUCCESS {
        Ok(())
    } else {
        Err(error(py, code, None))
    }
}

//! Fields (DESIGN 3.8, 3.11): the native calls under `tether.Dist` and
//! `tether.Field` (python/tether/fields.py), which check dtypes, orders
//! and sizes before anything reaches here. Blocking steps release the GIL;
//! a non-blocking step's `Request` keeps its array exported until it
//! completes.

use std::ffi::{c_int, CString};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use tether_capi::*;

use crate::buffer::{Access, Buffer};
use crate::error::check;
use crate::orphans;
use crate::request::Request;

fn c_string(text: &str, role: &str) -> PyResult<CString> {
    CString::new(text).map_err(|_| PyValueError::new_err(format!("{role} contains a NUL byte")))
}

#[pyfunction]
#[pyo3(signature = (shape, grid, kinds, blocks, order))]
pub fn dist_create(
    py: Python<'_>,
    shape: Vec<i64>,
    grid: Vec<c_int>,
    kinds: Vec<c_int>,
    blocks: Vec<i64>,
    order: c_int,
) -> PyResult<tether_dist> {
    let n = shape.len();
    if grid.len() != n || kinds.len() != n || blocks.len() != n {
        return Err(PyValueError::new_err(format!(
            "shape has {n} dimensions but grid {}, kinds {} and blocks {}",
            grid.len(),
            kinds.len(),
            blocks.len()
        )));
    }
    let mut dist = TETHER_DIST_NULL;
    check(
        py,
        tether_dist_create(
            n as c_int,
            shape.as_ptr(),
            grid.as_ptr(),
            kinds.as_ptr(),
            blocks.as_ptr(),
            order,
            &mut dist,
        ),
    )?;
    Ok(dist)
}

#[pyfunction]
pub fn dist_create_boxes(
    py: Python<'_>,
    shape: Vec<i64>,
    starts: Vec<Vec<i64>>,
    counts: Vec<Vec<i64>>,
    order: c_int,
) -> PyResult<tether_dist> {
    let n = shape.len();
    if starts.len() != counts.len() || starts.iter().chain(&counts).any(|b| b.len() != n) {
        return Err(PyValueError::new_err(format!(
            "starts and counts must be as many boxes of {n} values each"
        )));
    }
    let flat_starts: Vec<i64> = starts.concat();
    let flat_counts: Vec<i64> = counts.concat();
    let mut dist = TETHER_DIST_NULL;
    check(
        py,
        tether_dist_create_boxes(
            n as c_int,
            shape.as_ptr(),
            starts.len() as c_int,
            flat_starts.as_ptr(),
            flat_counts.as_ptr(),
            order,
            &mut dist,
        ),
    )?;
    Ok(dist)
}

#[pyfunction]
pub fn dist_local_shape(py: Python<'_>, dist: tether_dist, ndims: usize) -> PyResult<Vec<i64>> {
    let mut shape = vec![0i64; ndims];
    check(py, tether_dist_local_shape(dist, shape.as_mut_ptr()))?;
    Ok(shape)
}

#[pyfunction]
pub fn dist_free(py: Python<'_>, dist: tether_dist) -> PyResult<()> {
    let mut handle = dist;
    check(py, tether_dist_free(&mut handle))
}

#[pyfunction]
pub fn field_create(
    py: Python<'_>,
    name: &str,
    datatype: tether_datatype,
    dist: tether_dist,
    peers: &str,
    mode: c_int,
) -> PyResult<tether_field> {
    let name = c_string(name, "the field name")?;
    let peers = c_string(peers, "peers")?;
    let mut field = TETHER_FIELD_NULL;
    let code = py.detach(|| {
        tether_field_create(
            name.as_ptr(),
            datatype,
            dist,
            peers.as_ptr(),
            mode,
            &mut field,
        )
    });
    check(py, code)?;
    Ok(field)
}

/// Puts (`put`) or gets one step, blocking without the GIL.
#[pyfunction]
pub fn field_step(
    py: Python<'_>,
    field: tether_field,
    step: i64,
    array: &Bound<'_, PyAny>,
    put: bool,
) -> PyResult<()> {
    orphans::reap();
    let access = if put { Access::Read } else { Access::Write };
    let buffer = Buffer::get(array, access, if put { "put" } else { "get" })?;
    let ptr = buffer.ptr() as usize;
    let code = py.detach(move || {
        let ptr = ptr as *mut std::ffi::c_void;
        if put {
            tether_field_put(field, step, ptr)
        } else {
            tether_field_get(field, step, ptr)
        }
    });
    drop(buffer);
    check(py, code)
}

/// Starts a step; the `Request` holds `array` until it completes.
#[pyfunction]
pub fn field_istep(
    py: Python<'_>,
    field: tether_field,
    step: i64,
    array: &Bound<'_, PyAny>,
    put: bool,
) -> PyResult<Request> {
    orphans::reap();
    let access = if put { Access::Read } else { Access::Write };
    let buffer = Buffer::get(array, access, if put { "iput" } else { "iget" })?;
    let mut req = TETHER_REQUEST_NULL;
    let code = if put {
        tether_field_iput(field, step, buffer.ptr(), &mut req)
    } else {
        tether_field_iget(field, step, buffer.ptr(), &mut req)
    };
    check(py, code)?;
    Ok(Request::new(vec![req], vec![buffer], None))
}

#[pyfunction]
pub fn field_free(py: Python<'_>, field: tether_field) -> PyResult<()> {
    let mut handle = field;
    let code = py.detach(move || tether_field_free(&mut handle));
    check(py, code)
}

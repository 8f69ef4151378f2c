//! Start-up, the universe and its programs (DESIGN 3.1), hints (3.6) and
//! error names: thin functions over the C API. The Python package wraps
//! `init`/`init_as` (finalize at exit, abort on an uncaught exception).

use std::ffi::{c_char, c_int, CString};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use tether_capi::*;

use crate::error::check;

fn c_string(text: &str, what: &str) -> PyResult<CString> {
    CString::new(text).map_err(|_| PyValueError::new_err(format!("{what} contains a NUL byte")))
}

/// Reads a C string written by `f` into a buffer of `len` bytes.
fn read_str(
    py: Python<'_>,
    len: c_int,
    f: impl FnOnce(*mut c_char, c_int) -> c_int,
) -> PyResult<String> {
    let mut buf = vec![0u8; len as usize];
    check(py, f(buf.as_mut_ptr().cast::<c_char>(), len))?;
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

fn get_int(py: Python<'_>, f: impl FnOnce(&mut c_int) -> c_int) -> PyResult<i32> {
    let mut value = 0;
    check(py, f(&mut value))?;
    Ok(value)
}

/// Joins the universe with the identity from the environment (without the
/// GIL: joining waits for the other processes).
#[pyfunction]
pub fn init(py: Python<'_>) -> PyResult<()> {
    let code = py.detach(|| tether_init(std::ptr::null_mut(), std::ptr::null_mut()));
    check(py, code)
}

/// Joins the universe as rank `rank` of `program`, which has `size`
/// joining processes.
#[pyfunction]
pub fn init_as(py: Python<'_>, program: &str, rank: i32, size: i32) -> PyResult<()> {
    let name = c_string(program, "program")?;
    let code = py.detach(move || tether_init_as(name.as_ptr(), rank, size));
    check(py, code)
}

/// Leaves the universe after delivering what is in flight, including the
/// sends of requests that were dropped before they completed.
#[pyfunction]
pub fn finalize(py: Python<'_>) -> PyResult<()> {
    crate::orphans::settle(py);
    let code = py.detach(|| tether_finalize());
    check(py, code)
}

#[pyfunction]
pub fn initialized(py: Python<'_>) -> PyResult<bool> {
    Ok(get_int(py, |v| tether_initialized(v))? != 0)
}

/// Ends every process of the universe with exit code `code`; does not return.
#[pyfunction]
#[pyo3(signature = (code = 1))]
pub fn abort(py: Python<'_>, code: i32) -> PyResult<()> {
    check(py, tether_abort(code))
}

#[pyfunction]
pub fn universe_rank(py: Python<'_>) -> PyResult<i32> {
    get_int(py, |v| tether_universe_rank(v))
}

#[pyfunction]
pub fn universe_size(py: Python<'_>) -> PyResult<i32> {
    get_int(py, |v| tether_universe_size(v))
}

#[pyfunction]
pub fn program_count(py: Python<'_>) -> PyResult<i32> {
    get_int(py, |v| tether_program_count(v))
}

/// My program's id (its index among the programs ordered by name).
#[pyfunction]
pub fn program_id(py: Python<'_>) -> PyResult<i32> {
    get_int(py, |v| tether_program_id(v))
}

/// My rank inside my program.
#[pyfunction]
pub fn program_rank(py: Python<'_>) -> PyResult<i32> {
    get_int(py, |v| tether_program_rank(v))
}

/// Joined processes of program `id`.
#[pyfunction]
pub fn program_size(py: Python<'_>, id: i32) -> PyResult<i32> {
    get_int(py, |v| tether_program_size(id, v))
}

#[pyfunction]
pub fn program_name(py: Python<'_>, id: i32) -> PyResult<String> {
    read_str(py, TETHER_MAX_PROGRAM_NAME, |buf, len| {
        tether_program_name(id, buf, len)
    })
}

/// This process's counters by name (`tether_stats_count` and
/// `tether_stats_entry`: one snapshot).
#[pyfunction]
pub fn stats(py: Python<'_>) -> PyResult<std::collections::HashMap<String, i64>> {
    let count = get_int(py, |v| tether_stats_count(v))?;
    let mut out = std::collections::HashMap::with_capacity(count as usize);
    for index in 0..count {
        let mut value = 0i64;
        let name = read_str(py, 128, |buf, len| {
            tether_stats_entry(index, buf, len, &mut value)
        })?;
        out.insert(name, value);
    }
    Ok(out)
}

/// Universe rank of rank `rank` of program `id` (`ArgError` for an
/// unknown id, `RankError` for a rank outside the program).
#[pyfunction]
pub fn program_universe_rank(py: Python<'_>, id: i32, rank: i32) -> PyResult<i32> {
    get_int(py, |v| tether_program_universe_rank(id, rank, v))
}

/// Id of the program called `name`; `ArgError` if there is none.
#[pyfunction]
pub fn program_find(py: Python<'_>, name: &str) -> PyResult<i32> {
    let name = c_string(name, "name")?;
    get_int(py, |v| tether_program_find(name.as_ptr(), v))
}

/// Sets hint `key` to `value` (`UnknownHintError`, `HintValueError`).
#[pyfunction]
pub fn hint(py: Python<'_>, key: &str, value: &str) -> PyResult<()> {
    let k = c_string(key, "key")?;
    let v = c_string(value, "value")?;
    // Python handlers cannot run on the progress thread (active.rs): it
    // is refused before it starts, and stopped again should another
    // spelling have started it.
    let progress_thread = key.eq_ignore_ascii_case("PROGRESS_THREAD");
    if progress_thread && value.trim() == "1" && crate::active::any_handler() {
        return Err(crate::active::progress_thread_refused(py, "hint"));
    }
    check(py, tether_hint(k.as_ptr(), v.as_ptr()))?;
    if progress_thread && crate::active::any_handler() && crate::active::progress_thread_on() {
        let off = c_string("0", "value")?;
        check(py, tether_hint(k.as_ptr(), off.as_ptr()))?;
        return Err(crate::active::progress_thread_refused(py, "hint"));
    }
    Ok(())
}

/// The effective value of setting `key`.
#[pyfunction]
pub fn hint_get(py: Python<'_>, key: &str) -> PyResult<String> {
    let k = c_string(key, "key")?;
    read_str(py, TETHER_MAX_ERROR_STRING, |buf, len| {
        tether_hint_get(k.as_ptr(), buf, len)
    })
}

/// The name and meaning of error code `code`.
#[pyfunction]
pub fn error_string(py: Python<'_>, code: i32) -> PyResult<String> {
    read_str(py, TETHER_MAX_ERROR_STRING, |buf, len| {
        tether_error_string(code, buf, len)
    })
}

/// Moves communication forward without waiting for anything, running the
/// active-message handlers whose messages arrived.
#[pyfunction]
pub fn progress(py: Python<'_>) -> PyResult<()> {
    check(py, tether_progress())?;
    crate::active::run_deferred(py);
    Ok(())
}

/// Size in bytes of one element of `datatype`.
#[pyfunction]
pub fn type_size(py: Python<'_>, datatype: tether_datatype) -> PyResult<i32> {
    get_int(py, |v| tether_type_size(datatype, v))
}

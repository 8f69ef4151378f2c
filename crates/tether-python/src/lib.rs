//! `tether._native`: the native half of the `tether` Python package.
//!
//! Every operation calls the C API of `tether-capi` directly (as an rlib:
//! no second copy of the runtime, no dlopen), so Python gets exactly the C
//! semantics. Buffers are exported from Python objects and handed over
//! without copying; blocking calls release the GIL. The pure-Python half
//! (`python/tether/`) adds the pickling methods, the exception classes,
//! finalize-at-exit and abort-on-uncaught-exception.

mod active;
mod buffer;
mod coll;
mod comm;
mod error;
mod fastcall;
mod fields;
mod orphans;
mod pairs;
mod request;
mod status;
mod universe;
mod win;

use pyo3::prelude::*;

use tether_capi::*;

/// Integer constants of the C API, without their `TETHER_` prefix.
const CONSTANTS: &[(&str, i32)] = &[
    ("SUCCESS", TETHER_SUCCESS),
    ("ANY_SOURCE", TETHER_ANY_SOURCE),
    ("ANY_TAG", TETHER_ANY_TAG),
    ("TAG_UB", TETHER_TAG_UB),
    ("UNDEFINED", TETHER_UNDEFINED),
    ("COMM_UNIVERSE", TETHER_COMM_UNIVERSE),
    ("REQUEST_NULL", TETHER_REQUEST_NULL),
    ("ERR_ARG", TETHER_ERR_ARG),
    ("ERR_COUNT", TETHER_ERR_COUNT),
    ("ERR_RANK", TETHER_ERR_RANK),
    ("ERR_TAG", TETHER_ERR_TAG),
    ("ERR_COMM", TETHER_ERR_COMM),
    ("ERR_TYPE", TETHER_ERR_TYPE),
    ("ERR_OP", TETHER_ERR_OP),
    ("ERR_REQUEST", TETHER_ERR_REQUEST),
    ("ERR_TRUNCATE", TETHER_ERR_TRUNCATE),
    ("ERR_NOT_INITIALIZED", TETHER_ERR_NOT_INITIALIZED),
    ("ERR_INIT", TETHER_ERR_INIT),
    ("ERR_TIMEOUT", TETHER_ERR_TIMEOUT),
    ("ERR_PEER_LOST", TETHER_ERR_PEER_LOST),
    ("ERR_PROTOCOL", TETHER_ERR_PROTOCOL),
    ("ERR_AUTH", TETHER_ERR_AUTH),
    ("ERR_TRANSPORT", TETHER_ERR_TRANSPORT),
    ("ERR_UNKNOWN_HINT", TETHER_ERR_UNKNOWN_HINT),
    ("ERR_HINT_VALUE", TETHER_ERR_HINT_VALUE),
    ("ERR_RMA_RANGE", TETHER_ERR_RMA_RANGE),
    ("ERR_FIELD_MISMATCH", TETHER_ERR_FIELD_MISMATCH),
    ("ERR_NO_MEM", TETHER_ERR_NO_MEM),
    ("ERR_FILE", TETHER_ERR_FILE),
    ("ERR_CANCELLED", TETHER_ERR_CANCELLED),
    ("ERR_INTERNAL", TETHER_ERR_INTERNAL),
    ("BYTE", TETHER_BYTE),
    ("CHAR", TETHER_CHAR),
    ("INT8", TETHER_INT8),
    ("INT16", TETHER_INT16),
    ("INT32", TETHER_INT32),
    ("INT64", TETHER_INT64),
    ("UINT8", TETHER_UINT8),
    ("UINT16", TETHER_UINT16),
    ("UINT32", TETHER_UINT32),
    ("UINT64", TETHER_UINT64),
    ("INT", TETHER_INT),
    ("LONG", TETHER_LONG),
    ("LONG_LONG", TETHER_LONG_LONG),
    ("FLOAT", TETHER_FLOAT),
    ("DOUBLE", TETHER_DOUBLE),
    ("FLOAT_COMPLEX", TETHER_FLOAT_COMPLEX),
    ("DOUBLE_COMPLEX", TETHER_DOUBLE_COMPLEX),
    ("FLOAT_INT", TETHER_FLOAT_INT),
    ("DOUBLE_INT", TETHER_DOUBLE_INT),
    ("TWO_INT", TETHER_2INT),
    ("COMM_NULL", TETHER_COMM_NULL),
    ("DIST_BLOCK", TETHER_DIST_BLOCK),
    ("DIST_CYCLIC", TETHER_DIST_CYCLIC),
    ("DIST_BLOCK_CYCLIC", TETHER_DIST_BLOCK_CYCLIC),
    ("DIST_NONE", TETHER_DIST_NONE),
    ("ORDER_C", TETHER_ORDER_C),
    ("ORDER_FORTRAN", TETHER_ORDER_FORTRAN),
    ("FIELD_PUT", TETHER_FIELD_PUT),
    ("FIELD_GET", TETHER_FIELD_GET),
    ("SUM", TETHER_SUM),
    ("PROD", TETHER_PROD),
    ("MIN", TETHER_MIN),
    ("MAX", TETHER_MAX),
    ("LAND", TETHER_LAND),
    ("LOR", TETHER_LOR),
    ("LXOR", TETHER_LXOR),
    ("BAND", TETHER_BAND),
    ("BOR", TETHER_BOR),
    ("BXOR", TETHER_BXOR),
    ("MINLOC", TETHER_MINLOC),
    ("MAXLOC", TETHER_MAXLOC),
];

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<comm::Comm>()?;
    fastcall::add_methods(&m.py().get_type::<comm::Comm>())?;
    m.add_class::<request::Request>()?;
    m.add_class::<status::Status>()?;
    m.add_class::<coll::InPlace>()?;
    m.add("IN_PLACE", coll::in_place(m.py())?.clone_ref(m.py()))?;
    m.add_function(wrap_pyfunction!(comm::comm_create, m)?)?;
    m.add_function(wrap_pyfunction!(comm::comm_create_ranks, m)?)?;
    m.add_function(wrap_pyfunction!(universe::init, m)?)?;
    m.add_function(wrap_pyfunction!(universe::init_as, m)?)?;
    m.add_function(wrap_pyfunction!(universe::finalize, m)?)?;
    m.add_function(wrap_pyfunction!(universe::initialized, m)?)?;
    m.add_function(wrap_pyfunction!(universe::abort, m)?)?;
    m.add_function(wrap_pyfunction!(universe::universe_rank, m)?)?;
    m.add_function(wrap_pyfunction!(universe::stats, m)?)?;
    m.add_function(wrap_pyfunction!(universe::universe_size, m)?)?;
    m.add_function(wrap_pyfunction!(universe::program_count, m)?)?;
    m.add_function(wrap_pyfunction!(universe::program_id, m)?)?;
    m.add_function(wrap_pyfunction!(universe::program_rank, m)?)?;
    m.add_function(wrap_pyfunction!(universe::program_size, m)?)?;
    m.add_function(wrap_pyfunction!(universe::program_name, m)?)?;
    m.add_function(wrap_pyfunction!(universe::program_find, m)?)?;
    m.add_function(wrap_pyfunction!(universe::program_universe_rank, m)?)?;
    m.add_function(wrap_pyfunction!(universe::hint, m)?)?;
    m.add_function(wrap_pyfunction!(universe::hint_get, m)?)?;
    m.add_function(wrap_pyfunction!(universe::error_string, m)?)?;
    m.add_function(wrap_pyfunction!(universe::progress, m)?)?;
    m.add_function(wrap_pyfunction!(active::am_register, m)?)?;
    m.add_function(wrap_pyfunction!(universe::type_size, m)?)?;
    m.add_function(wrap_pyfunction!(fields::dist_create, m)?)?;
    m.add_function(wrap_pyfunction!(fields::dist_create_boxes, m)?)?;
    m.add_function(wrap_pyfunction!(fields::dist_local_shape, m)?)?;
    m.add_function(wrap_pyfunction!(fields::dist_free, m)?)?;
    m.add_function(wrap_pyfunction!(fields::field_create, m)?)?;
    m.add_function(wrap_pyfunction!(fields::field_step, m)?)?;
    m.add_function(wrap_pyfunction!(fields::field_istep, m)?)?;
    m.add_function(wrap_pyfunction!(fields::field_free, m)?)?;
    for (name, value) in CONSTANTS {
        m.add(*name, *value)?;
    }
    win::register(m)?;
    Ok(())
}

//! Vectorcall entry points for the point-to-point methods of `Comm`.
//!
//! A method call costs more than the C call behind it when its arguments
//! travel as a tuple and a dict (`METH_VARARGS | METH_KEYWORDS`), which is
//! all PyO3 can use for an abi3 module that must load on Python 3.9: the
//! fast calling convention (`METH_FASTCALL`) entered the stable ABI only
//! in 3.10. The tuple convention was a large share of what Python added to
//! every `Send` and `Recv` (docs/journal/2026-11-24-python.md), so the
//! four methods that carry messages (`Send`, `Recv`, `Isend`, `Irecv`)
//! are defined here with `METH_FASTCALL | METH_KEYWORDS`: CPython hands the
//! arguments over as the array on its stack, no tuple is built.
//!
//! The convention (PEP 590; `_PyCFunctionFastWithKeywords`) has been part of
//! CPython since 3.7 with the same flag value and signature and is the one
//! 3.10's stable ABI fixed, so the one abi3 module uses it on every Python
//! it supports. Each method is a `method_descriptor` on the `Comm` type
//! with a `__text_signature__`, so `inspect.signature` and the stub check
//! see the same signature as before.

use std::ffi::{c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PySystemError, PyTypeError};
use pyo3::ffi;
use pyo3::panic::PanicException;
use pyo3::prelude::*;
use pyo3::types::PyType;
use pyo3::Borrowed;

use tether_capi::{TETHER_ANY_SOURCE, TETHER_ANY_TAG};

use crate::comm::Comm;

/// `METH_FASTCALL` (Include/methodobject.h; 0x0080 since CPython 3.7).
const METH_FASTCALL: c_int = 0x0080;

/// The arguments of one call, by parameter position; `None` where the
/// caller left a parameter out.
type Arguments<'a, 'py> = [Option<Borrowed<'a, 'py, PyAny>>; 3];

/// What a method does with its bound arguments: the object and the two
/// integers.
type Body =
    for<'py> fn(&Comm, Python<'py>, &Bound<'py, PyAny>, i32, i32) -> PyResult<Bound<'py, PyAny>>;

/// A method with three parameters after `self`: one object and two
/// integers, the shape of every point-to-point call.
struct Method {
    name: &'static str,
    /// `__doc__`, starting with the text signature CPython parses.
    doc: &'static CStr,
    params: [&'static str; 3],
    /// How many leading parameters must be given.
    required: usize,
    /// Defaults of the two integer parameters.
    defaults: [i32; 2],
    body: Body,
}

const METHODS: [Method; 4] = [
    Method {
        name: "Send",
        doc: c"Send($self, /, buf, dest, tag=0)\n--\n\n\
            Sends `buf` to rank `dest`; returns when `buf` may be reused.",
        params: ["buf", "dest", "tag"],
        required: 2,
        defaults: [0, 0],
        body: |comm, py, buf, dest, tag| {
            comm.send(py, buf, dest, tag)?;
            Ok(py.None().into_bound(py))
        },
    },
    Method {
        name: "Recv",
        doc: c"Recv($self, /, buf, source=..., tag=...)\n--\n\n\
            Receives a message into `buf` and returns its `Status`. A longer\n\
            message raises `TruncateError` (its `.status` has the true size).",
        params: ["buf", "source", "tag"],
        required: 1,
        defaults: [TETHER_ANY_SOURCE, TETHER_ANY_TAG],
        body: |comm, py, buf, source, tag| {
            Ok(Bound::new(py, comm.recv(py, buf, source, tag)?)?.into_any())
        },
    },
    Method {
        name: "Isend",
        doc: c"Isend($self, /, buf, dest, tag=0)\n--\n\n\
            Starts sending `buf` to rank `dest`; the request keeps `buf` alive.",
        params: ["buf", "dest", "tag"],
        required: 2,
        defaults: [0, 0],
        body: |comm, py, buf, dest, tag| {
            Ok(Bound::new(py, comm.isend(py, buf, dest, tag)?)?.into_any())
        },
    },
    Method {
        name: "Irecv",
        doc: c"Irecv($self, /, buf, source=..., tag=...)\n--\n\n\
            Posts a receive into `buf`; the request keeps `buf` alive.",
        params: ["buf", "source", "tag"],
        required: 1,
        defaults: [TETHER_ANY_SOURCE, TETHER_ANY_TAG],
        body: |comm, py, buf, source, tag| {
            Ok(Bound::new(py, comm.irecv(py, buf, source, tag)?)?.into_any())
        },
    },
];

/// CPython's `_PyCFunctionFastWithKeywords`.
type FastFunction = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *const *mut ffi::PyObject,
    ffi::Py_ssize_t,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// Adds the methods of `METHODS` to `comm_type` (the `Comm` class).
pub fn add_methods(comm_type: &Bound<'_, PyType>) -> PyResult<()> {
    let entries: [FastFunction; 4] = [entry::<0>, entry::<1>, entry::<2>, entry::<3>];
    let py = comm_type.py();
    for (method, entry) in METHODS.iter().zip(entries) {
        let name = std::ffi::CString::new(method.name).expect("method names have no NUL");
        // CPython keeps a pointer to the definition as long as the type
        // lives (the whole process), so it is leaked.
        let def = Box::leak(Box::new(ffi::PyMethodDef {
            ml_name: name.into_raw(),
            ml_meth: ffi::PyMethodDefPointer {
                // SAFETY: CPython calls a METH_FASTCALL | METH_KEYWORDS
                // function with the `FastFunction` signature; the union's
                // variant of that type exists only for Py_3_10 builds, so the
                // pointer is stored as a `PyCFunctionWithKeywords`, as C
                // code casts it to `PyCFunction`.
                PyCFunctionWithKeywords: unsafe {
                    std::mem::transmute::<FastFunction, ffi::PyCFunctionWithKeywords>(entry)
                },
            },
            ml_flags: METH_FASTCALL | ffi::METH_KEYWORDS,
            ml_doc: method.doc.as_ptr(),
        }));
        // SAFETY: `comm_type` is a live type object and `def` lives forever.
        let descriptor = unsafe {
            Bound::from_owned_ptr_or_err(
                py,
                ffi::PyDescr_NewMethod(comm_type.as_ptr().cast::<ffi::PyTypeObject>(), def),
            )?
        };
        comm_type.setattr(method.name, descriptor)?;
    }
    Ok(())
}

/// The C entry of `METHODS[I]`: runs it with the GIL held (the caller
/// holds it), turns an error into a raised exception and a panic into
/// `PanicException`, so nothing unwinds into CPython.
unsafe extern "C" fn entry<const I: usize>(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls methods with the GIL held.
    let py = unsafe { Python::assume_attached() };
    let method = &METHODS[I];
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the vectorcall contract: `args` holds `nargs` positional
        // arguments followed by one per name in `kwnames`, all borrowed.
        unsafe { call(py, method, slf, args, nargs, kwnames) }
    }));
    let result = outcome.unwrap_or_else(|payload| {
        let text = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        Err(PanicException::new_err(format!("{}: {text}", method.name)))
    });
    match result {
        Ok(value) => value.into_ptr(),
        Err(err) => {
            err.restore(py);
            std::ptr::null_mut()
        }
    }
}

/// Binds the vectorcall arguments to `method`'s parameters and runs it.
///
/// # Safety
/// `slf`, `args`, `nargs` and `kwnames` as CPython passes them to a
/// `METH_FASTCALL | METH_KEYWORDS` method.
unsafe fn call<'py>(
    py: Python<'py>,
    method: &Method,
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: as the function's contract; `self` and the arguments are
    // borrowed for the call.
    let slf = unsafe { Borrowed::from_ptr(py, slf) };
    let comm = slf.cast::<Comm>()?;
    let positional = nargs as usize;
    let keywords = if kwnames.is_null() {
        None
    } else {
        // SAFETY: non-null, so by the METH_FASTCALL | METH_KEYWORDS
        // contract a live tuple of keyword names, borrowed for the call.
        Some(unsafe { Borrowed::from_ptr(py, kwnames) })
    };
    let keyword_count = keywords.map_or(Ok(0), |k| k.len())?;
    // SAFETY: `args` holds `nargs` positional values followed by one per
    // keyword name, live and borrowed for the call; `values` is only asked
    // for i < nargs or nargs + k with k < the number of keyword names.
    let values = |i: usize| unsafe { Borrowed::from_ptr(py, *args.add(i)) };
    let mut bound: Arguments<'_, 'py> = [None, None, None];
    if positional > bound.len() {
        return Err(PyTypeError::new_err(format!(
            "{}() takes at most {} arguments ({positional} given)",
            method.name,
            bound.len()
        )));
    }
    for (i, slot) in bound.iter_mut().enumerate().take(positional) {
        *slot = Some(values(i));
    }
    for k in 0..keyword_count {
        let name = keywords.expect("counted above").get_item(k)?;
        let name: String = name.extract()?;
        let Some(position) = method.params.iter().position(|p| *p == name) else {
            return Err(PyTypeError::new_err(format!(
                "{}() got an unexpected keyword argument '{name}'",
                method.name
            )));
        };
        if bound[position].is_some() {
            return Err(PyTypeError::new_err(format!(
                "{}() got multiple values for argument '{name}'",
                method.name
            )));
        }
        bound[position] = Some(values(positional + k));
    }
    if let Some(missing) = (0..method.required).find(|&i| bound[i].is_none()) {
        return Err(PyTypeError::new_err(format!(
            "{}() missing required argument '{}' (pos {})",
            method.name,
            method.params[missing],
            missing + 1
        )));
    }
    let integer = |i: usize| -> PyResult<i32> {
        match bound[i] {
            Some(value) if method.params[i] == "tag" => crate::error::tag(py, &value),
            Some(value) => value.extract::<i32>().map_err(|e| {
                if !e.is_instance_of::<PyTypeError>(py) {
                    return e;
                }
                PyTypeError::new_err(format!(
                    "{}() argument '{}': {}",
                    method.name,
                    method.params[i],
                    e.value(py)
                ))
            }),
            None => Ok(method.defaults[i - 1]),
        }
    };
    let (first, second) = (integer(1)?, integer(2)?);
    let buf = bound[0].ok_or_else(|| PySystemError::new_err("buf is required"))?;
    (method.body)(comm.get(), py, &buf, first, second)
}

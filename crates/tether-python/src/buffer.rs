//! Buffers: any object with the buffer protocol, held without copying.
//!
//! A [`Buffer`] is an export (`PyObject_GetBuffer`) of a contiguous object;
//! while it lives the object cannot be resized or freed, so the memory the
//! C layer was given stays valid (the "pending request keeps its buffer
//! alive" rule). Dropping it releases the export.
//!
//! The buffer functions and `Py_buffer` joined the limited API only in
//! Python 3.11, but their ABI has not changed since 3.3, so this abi3 module
//! (3.9+) declares them itself, exactly as CPython's `object.h` has them.

use std::ffi::{c_char, c_int, c_void, CStr};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi::{PyObject, Py_ssize_t};
use pyo3::prelude::*;

use tether_capi::*;

/// CPython's `Py_buffer` (Include/pybuffer.h, unchanged since 3.3).
#[repr(C)]
struct PyBufferView {
    buf: *mut c_void,
    obj: *mut PyObject,
    len: Py_ssize_t,
    itemsize: Py_ssize_t,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut Py_ssize_t,
    strides: *mut Py_ssize_t,
    suboffsets: *mut Py_ssize_t,
    internal: *mut c_void,
}

/// `PyBUF_STRIDES`: shape and strides are filled in (for the contiguity
/// check), and exporters that need suboffsets refuse.
const PYBUF_STRIDES: c_int = 0x0018;
/// `PyBUF_FORMAT`: the element format too (which numpy builds anew on
/// every export, so it is asked for only where the datatype matters).
const PYBUF_FORMAT: c_int = 0x0004;

extern "C" {
    fn PyObject_GetBuffer(obj: *mut PyObject, view: *mut PyBufferView, flags: c_int) -> c_int;
    fn PyBuffer_Release(view: *mut PyBufferView);
}

/// What a buffer is used for: read (sent) or written (received into).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Whether the export must describe its elements (format and item size:
/// collectives) or only its bytes (point-to-point).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Items {
    Bytes,
    Described,
}

impl PyBufferView {
    fn empty() -> PyBufferView {
        PyBufferView {
            buf: std::ptr::null_mut(),
            obj: std::ptr::null_mut(),
            len: 0,
            itemsize: 0,
            readonly: 0,
            ndim: 0,
            format: std::ptr::null_mut(),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            suboffsets: std::ptr::null_mut(),
            internal: std::ptr::null_mut(),
        }
    }

    /// Exports `obj` into this (empty) view and checks it. Not a buffer:
    /// `TypeError`; not contiguous, or read-only where `access` is
    /// `Write`: `ValueError` naming `role`, and the view is released again.
    /// The view must not move until it is released.
    fn acquire(
        &mut self,
        obj: &Bound<'_, PyAny>,
        access: Access,
        items: Items,
        role: &str,
    ) -> PyResult<()> {
        let flags = match items {
            Items::Bytes => PYBUF_STRIDES,
            Items::Described => PYBUF_STRIDES | PYBUF_FORMAT,
        };
        // SAFETY: `obj` is a live object (GIL held); `self` is writable.
        if unsafe { PyObject_GetBuffer(obj.as_ptr(), self, flags) } != 0 {
            let cause = PyErr::take(obj.py());
            let err = PyTypeError::new_err(format!(
                "{role}: a {} does not support the buffer protocol with strides \
                 (use a numpy array, bytearray, memoryview, ...)",
                type_name(obj)
            ));
            err.set_cause(obj.py(), cause);
            return Err(err);
        }
        let problem = if !self.is_contiguous() {
            Some(format!(
                "{role}: the buffer is not contiguous; pass a contiguous copy \
                 (numpy.ascontiguousarray) or a contiguous view"
            ))
        } else if access == Access::Write && self.readonly != 0 {
            Some(format!(
                "{role}: the buffer is read-only and cannot receive data"
            ))
        } else {
            None
        };
        match problem {
            Some(message) => {
                // SAFETY: filled by the successful export above, released once.
                unsafe { PyBuffer_Release(self) };
                Err(PyValueError::new_err(message))
            }
            None => Ok(()),
        }
    }

    /// C or Fortran order without gaps (PEP 3118 contiguity).
    fn is_contiguous(&self) -> bool {
        if self.strides.is_null() || self.ndim == 0 || self.len == 0 {
            return true;
        }
        // SAFETY: with PyBUF_STRIDES, shape and strides hold `ndim` entries.
        let (shape, strides) = unsafe {
            (
                std::slice::from_raw_parts(self.shape, self.ndim as usize),
                std::slice::from_raw_parts(self.strides, self.ndim as usize),
            )
        };
        let dense = |dims: &mut dyn Iterator<Item = usize>| {
            let mut expect = self.itemsize;
            for d in dims {
                if shape[d] != 1 && strides[d] != expect {
                    return false;
                }
                expect *= shape[d];
            }
            true
        };
        dense(&mut (0..shape.len()).rev()) || dense(&mut (0..shape.len()))
    }
}

/// Runs `f` on the memory of `obj` (address and size in bytes), exported
/// for the duration of the call only (a blocking operation: no allocation).
/// Errors as `Buffer::get`.
pub fn with_bytes<R>(
    obj: &Bound<'_, PyAny>,
    access: Access,
    role: &str,
    f: impl FnOnce(*mut c_void, i64) -> R,
) -> PyResult<R> {
    let mut view = PyBufferView::empty();
    view.acquire(obj, access, Items::Bytes, role)?;
    let result = f(view.buf, view.len as i64);
    // SAFETY: acquired above, released once, with the GIL held.
    unsafe { PyBuffer_Release(&mut view) };
    Ok(result)
}

/// A held, contiguous export of a Python object.
pub struct Buffer {
    // Boxed: some exporters point `shape` into the view itself.
    view: Box<PyBufferView>,
}

// SAFETY: the export is only touched (released) with the GIL held (see
// Drop); the memory it describes is what the C layer is given.
unsafe impl Send for Buffer {}
unsafe impl Sync for Buffer {}

impl Buffer {
    /// Exports `obj` as bytes (its format is not asked for). Not a buffer:
    /// `TypeError`; not contiguous, or read-only where `access` is `Write`:
    /// `ValueError` naming `role`.
    pub fn get(obj: &Bound<'_, PyAny>, access: Access, role: &str) -> PyResult<Buffer> {
        Buffer::export(obj, access, Items::Bytes, role)
    }

    /// `get`, with the format and item size of the elements described.
    pub fn get_described(obj: &Bound<'_, PyAny>, access: Access, role: &str) -> PyResult<Buffer> {
        Buffer::export(obj, access, Items::Described, role)
    }

    fn export(
        obj: &Bound<'_, PyAny>,
        access: Access,
        items: Items,
        role: &str,
    ) -> PyResult<Buffer> {
        let mut view = Box::new(PyBufferView::empty());
        view.acquire(obj, access, items, role)?;
        Ok(Buffer { view })
    }

    pub fn ptr(&self) -> *mut c_void {
        self.view.buf
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.view.len as usize
    }

    pub fn itemsize(&self) -> usize {
        self.view.itemsize as usize
    }

    /// The buffer's format string (`"B"` when the exporter gives none; only
    /// exports made with `get_described` have one).
    pub fn format(&self) -> &str {
        if self.view.format.is_null() {
            return "B";
        }
        // SAFETY: a non-null format is a NUL-terminated string owned by the export.
        unsafe { CStr::from_ptr(self.view.format) }
            .to_str()
            .unwrap_or("?")
    }

    /// The Tether datatype of the elements, for reductions: from the format
    /// (native byte order only) and the item size.
    pub fn datatype(&self) -> PyResult<tether_datatype> {
        datatype_of(self.format(), self.itemsize()).ok_or_else(|| {
            PyValueError::new_err(format!(
                "buffer format {:?} (item size {}) has no Tether datatype; \
                 use native-order integers, floats or complex numbers",
                self.format(),
                self.itemsize()
            ))
        })
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: the view was filled by a successful PyObject_GetBuffer and
        // is released once, with the GIL held (attach takes it if needed).
        Python::attach(|_| unsafe { PyBuffer_Release(&mut *self.view) });
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".into())
}

/// Maps a PEP 3118 format and item size to a Tether datatype.
fn datatype_of(format: &str, itemsize: usize) -> Option<tether_datatype> {
    let code = match format.as_bytes().first() {
        Some(b'@' | b'=') => &format[1..],
        Some(b'<') if cfg!(target_endian = "little") => &format[1..],
        Some(b'>' | b'!') if cfg!(target_endian = "big") => &format[1..],
        Some(b'<' | b'>' | b'!') => return None,
        _ => format,
    };
    let signed = [TETHER_INT8, TETHER_INT16, TETHER_INT32, TETHER_INT64];
    let unsigned = [TETHER_UINT8, TETHER_UINT16, TETHER_UINT32, TETHER_UINT64];
    let by_size = |table: [tether_datatype; 4]| match itemsize {
        1 => Some(table[0]),
        2 => Some(table[1]),
        4 => Some(table[2]),
        8 => Some(table[3]),
        _ => None,
    };
    match code {
        "b" | "h" | "i" | "l" | "q" | "n" => by_size(signed),
        "B" | "H" | "I" | "L" | "Q" | "N" | "?" => by_size(unsigned),
        "c" => Some(TETHER_CHAR),
        "f" if itemsize == 4 => Some(TETHER_FLOAT),
        "d" if itemsize == 8 => Some(TETHER_DOUBLE),
        "Zf" if itemsize == 8 => Some(TETHER_FLOAT_COMPLEX),
        "Zd" if itemsize == 16 => Some(TETHER_DOUBLE_COMPLEX),
        _ => None,
    }
}

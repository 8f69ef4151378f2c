//! The send and receive buffers of one collective must hold items of one
//! type. Reductions combine items (a float64 summed into an int64 buffer
//! is garbage: 2.0 came back as 4.2e-314); the other collectives move
//! them as opaque units of the item size, so items of two types would be
//! reinterpreted byte for byte, or split across units when the sizes
//! differ. mpi4py's MPI does not catch the second kind; Tether refuses
//! both before anything is sent.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::buffer::Buffer;

/// Refuses `send` and `recv` (when both are buffers) holding items of
/// different types: a `TypeError` naming `what` and both formats and item
/// sizes. Types are compared as Tether datatypes where the formats have
/// one (`"l"` and `"q"` are both int64 on Linux), else as formats without
/// a native byte-order prefix (structured items).
pub fn same_items(what: &str, send: Option<&Buffer>, recv: Option<&Buffer>) -> PyResult<()> {
    let (Some(s), Some(r)) = (send, recv) else {
        return Ok(());
    };
    let same = match (s.datatype(), r.datatype()) {
        (Ok(a), Ok(b)) => a == b,
        _ => s.itemsize() == r.itemsize() && native(s.format()) == native(r.format()),
    };
    if same {
        return Ok(());
    }
    Err(PyTypeError::new_err(format!(
        "{what}: sendbuf has items of format {:?} ({} bytes) but recvbuf of {:?} ({} bytes); \
         the send and receive buffers of a collective hold items of one type",
        s.format(),
        s.itemsize(),
        r.format(),
        r.itemsize()
    )))
}

/// A format without the prefix that says native byte order.
fn native(format: &str) -> &str {
    let trimmed = format.trim_start_matches(['@', '=']);
    if cfg!(target_endian = "little") {
        trimmed.strip_prefix('<').unwrap_or(trimmed)
    } else {
        trimmed.strip_prefix(['>', '!']).unwrap_or(trimmed)
    }
}

#[cfg(test)]
mod tests {
    use super::native;

    #[test]
    fn native_order_prefixes_are_set_aside() {
        assert_eq!(native("d"), "d");
        assert_eq!(native("=d"), "d");
        assert_eq!(native("@T{d:v:i:i:}"), "T{d:v:i:i:}");
        if cfg!(target_endian = "little") {
            assert_eq!(native("<d"), "d");
            assert_eq!(native(">d"), ">d");
        }
    }
}

//! Naming error codes, and the thread's last detailed error.

use std::ffi::{c_char, c_int};

use tether::ErrorClass;

use crate::ffi::{last_error, run_even_if_poisoned, write_str_truncated};
use crate::types::TETHER_SUCCESS;

/// Writes the name and meaning of `code` into `buf` (`len` bytes, truncated
/// to fit). An unknown code is named as such. Works after an internal
/// error too.
#[no_mangle]
pub extern "C" fn tether_error_string(code: c_int, buf: *mut c_char, len: c_int) -> c_int {
    run_even_if_poisoned("tether_error_string", || {
        let text = match ErrorClass::from_code(code) {
            _ if code == TETHER_SUCCESS => "TETHER_SUCCESS: no error".to_string(),
            Some(class) => format!("{}: {}", class.name(), class.describe()),
            None => format!("unknown error code {code}"),
        };
        write_str_truncated(&text, buf, len)
    })
}

/// Writes the calling thread's last detailed error message (which peer,
/// file, size; expected against received), or an empty string. Works
/// after an internal error too: it is how a program learns which panic
/// made every call fail with `TETHER_ERR_INTERNAL`.
#[no_mangle]
pub extern "C" fn tether_last_error(buf: *mut c_char, len: c_int) -> c_int {
    let text = last_error();
    run_even_if_poisoned("tether_last_error", || write_str_truncated(&text, buf, len))
}

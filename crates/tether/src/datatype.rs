//! Basic datatypes (DESIGN 3.4). All are contiguous; a count of elements of
//! a type is `count * size` bytes.

use crate::error::{err, ErrorClass, Result};

/// A basic datatype: its C handle, name and size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datatype {
    pub handle: i32,
    pub name: &'static str,
    pub size: usize,
}

macro_rules! datatypes {
    ($($name:ident = $handle:literal, $size:expr;)*) => {
        /// Every datatype, C names without the `TETHER_` prefix.
        pub const DATATYPES: &[Datatype] = &[
            $(Datatype { handle: $handle, name: stringify!($name), size: $size },)*
        ];
    };
}

datatypes! {
    BYTE = 1, 1;
    CHAR = 2, 1;
    INT8 = 3, 1;
    INT16 = 4, 2;
    INT32 = 5, 4;
    INT64 = 6, 8;
    UINT8 = 7, 1;
    UINT16 = 8, 2;
    UINT32 = 9, 4;
    UINT64 = 10, 8;
    INT = 11, std::mem::size_of::<std::ffi::c_int>();
    LONG = 12, std::mem::size_of::<std::ffi::c_long>();
    LONG_LONG = 13, std::mem::size_of::<std::ffi::c_longlong>();
    FLOAT = 14, 4;
    DOUBLE = 15, 8;
    FLOAT_COMPLEX = 16, 8;
    DOUBLE_COMPLEX = 17, 16;
    FLOAT_INT = 18, std::mem::size_of::<(f32, i32)>();
    DOUBLE_INT = 19, std::mem::size_of::<(f64, i32)>();
    TWO_INT = 20, 8;
    INTEGER = 21, 4;
    REAL = 22, 4;
    DOUBLE_PRECISION = 23, 8;
    COMPLEX = 24, 8;
    LOGICAL = 25, 4;
    TWO_INTEGER = 26, 8;
    TWO_REAL = 27, 8;
    TWO_DOUBLE_PRECISION = 28, 16;
}

/// Looks up a datatype handle: handle `h` is `DATATYPES[h - 1]`.
#[inline]
pub fn lookup(handle: i32) -> Result<Datatype> {
    usize::try_from(handle)
        .ok()
        .and_then(|h| h.checked_sub(1))
        .and_then(|i| DATATYPES.get(i))
        .copied()
        .ok_or_else(|| unknown(handle))
}

/// Bytes of `count` elements of `datatype`, checked.
#[inline]
pub fn byte_len(count: i64, datatype: Datatype) -> Result<usize> {
    u64::try_from(count)
        .ok()
        .and_then(|c| c.checked_mul(datatype.size as u64))
        .filter(|b| *b <= isize::MAX as u64)
        .map(|b| b as usize)
        .ok_or_else(|| bad_count(count, datatype))
}

#[cold]
fn unknown(handle: i32) -> crate::error::Error {
    err(
        ErrorClass::Type,
        format!("{handle} is not a datatype handle"),
    )
}

#[cold]
fn bad_count(count: i64, datatype: Datatype) -> crate::error::Error {
    if count < 0 {
        return err(ErrorClass::Count, format!("count {count} is negative"));
    }
    err(
        ErrorClass::Count,
        format!(
            "{count} elements of {} overflow the address space",
            datatype.name
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_unique_and_sizes_match_c() {
        for (i, t) in DATATYPES.iter().enumerate() {
            assert_eq!(t.handle as usize, i + 1, "{} is found by its index", t.name);
        }
        assert_eq!(lookup(0).unwrap_err().class, ErrorClass::Type);
        assert_eq!(lookup(-3).unwrap_err().class, ErrorClass::Type);
        assert_eq!(
            lookup(19).unwrap().size,
            16,
            "DOUBLE_INT is padded like the C struct"
        );
        assert_eq!(lookup(18).unwrap().size, 8);
        assert_eq!(lookup(99).unwrap_err().class, ErrorClass::Type);
        assert_eq!(
            byte_len(-1, lookup(1).unwrap()).unwrap_err().class,
            ErrorClass::Count
        );
        assert_eq!(byte_len(3 << 30, lookup(1).unwrap()).unwrap(), 3 << 30);
    }
}

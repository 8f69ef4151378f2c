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

/// Looks up a datatype handle.
pub fn lookup(handle: i32) -> Result<Datatype> {
    DATATYPES
        .iter()
        .copied()
        .find(|t| t.handle == handle)
        .ok_or_else(|| {
            err(
                ErrorClass::Type,
                format!("{handle} is not a datatype handle"),
            )
        })
}

/// Bytes of `count` elements of `datatype`, checked.
pub fn byte_len(count: i64, datatype: Datatype) -> Result<usize> {
    if count < 0 {
        return Err(err(ErrorClass::Count, format!("count {count} is negative")));
    }
    (count as u64)
        .checked_mul(datatype.size as u64)
        .and_then(|b| usize::try_from(b).ok())
        .filter(|b| *b <= isize::MAX as usize)
        .ok_or_else(|| {
            err(
                ErrorClass::Count,
                format!(
                    "{count} elements of {} overflow the address space",
                    datatype.name
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_unique_and_sizes_match_c() {
        for (i, a) in DATATYPES.iter().enumerate() {
            assert!(DATATYPES[i + 1..].iter().all(|b| b.handle != a.handle));
        }
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

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

/// What a datatype's bytes mean, apart from their size: fields compare
/// types across programs and languages by family and size, not by name,
/// so DOUBLE equals DOUBLE_PRECISION and INT32 equals INTEGER, while
/// DOUBLE does not equal INT64 (DESIGN 3.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Family {
    /// Raw bytes and characters.
    Byte = 1,
    SignedInteger = 2,
    UnsignedInteger = 3,
    Real = 4,
    Complex = 5,
    Logical = 6,
    /// A real and an integer (MINLOC/MAXLOC pairs).
    RealInteger = 7,
    IntegerPair = 8,
    RealPair = 9,
}

impl Family {
    /// The family with wire code `code`, if any.
    pub fn from_code(code: u8) -> Option<Family> {
        use Family::*;
        [
            Byte,
            SignedInteger,
            UnsignedInteger,
            Real,
            Complex,
            Logical,
            RealInteger,
            IntegerPair,
            RealPair,
        ]
        .into_iter()
        .find(|f| *f as u8 == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            Family::Byte => "byte",
            Family::SignedInteger => "signed integer",
            Family::UnsignedInteger => "unsigned integer",
            Family::Real => "real",
            Family::Complex => "complex",
            Family::Logical => "logical",
            Family::RealInteger => "real-integer pair",
            Family::IntegerPair => "integer pair",
            Family::RealPair => "real pair",
        }
    }
}

impl Datatype {
    /// Its [`Family`].
    pub fn family(&self) -> Family {
        match self.name {
            "BYTE" | "CHAR" => Family::Byte,
            "INT8" | "INT16" | "INT32" | "INT64" | "INT" | "LONG" | "LONG_LONG" | "INTEGER" => {
                Family::SignedInteger
            }
            "UINT8" | "UINT16" | "UINT32" | "UINT64" => Family::UnsignedInteger,
            "FLOAT" | "DOUBLE" | "REAL" | "DOUBLE_PRECISION" => Family::Real,
            "FLOAT_COMPLEX" | "DOUBLE_COMPLEX" | "COMPLEX" => Family::Complex,
            "LOGICAL" => Family::Logical,
            "FLOAT_INT" | "DOUBLE_INT" => Family::RealInteger,
            "TWO_INT" | "TWO_INTEGER" => Family::IntegerPair,
            "TWO_REAL" | "TWO_DOUBLE_PRECISION" => Family::RealPair,
            other => unreachable!("datatype {other} has no family"),
        }
    }
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
        for t in DATATYPES {
            assert_eq!(Family::from_code(t.family() as u8), Some(t.family()));
        }
        let family = |h| lookup(h).unwrap().family();
        assert_eq!(family(15), family(23), "DOUBLE is DOUBLE_PRECISION");
        assert_eq!(family(5), family(21), "INT32 is INTEGER");
        assert_ne!(family(15), family(6), "DOUBLE is not INT64");
        assert_eq!(
            byte_len(-1, lookup(1).unwrap()).unwrap_err().class,
            ErrorClass::Count
        );
        assert_eq!(byte_len(3 << 30, lookup(1).unwrap()).unwrap(), 3 << 30);
    }
}

//! Handles, constants and the status structure of the C API.

use std::ffi::c_int;

pub type tether_comm = c_int;
pub type tether_request = c_int;
pub type tether_datatype = c_int;
pub type tether_op = c_int;

/// How a point-to-point operation completed: the source rank in the
/// communicator, the tag, the error class (`TETHER_SUCCESS` or e.g.
/// `TETHER_ERR_TRUNCATE`), and the message's true size in bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tether_status {
    pub source: c_int,
    pub tag: c_int,
    pub error: c_int,
    pub bytes: i64,
}

pub const TETHER_SUCCESS: c_int = 0;
pub const TETHER_ERR_ARG: c_int = 1;
pub const TETHER_ERR_COUNT: c_int = 2;
pub const TETHER_ERR_RANK: c_int = 3;
pub const TETHER_ERR_TAG: c_int = 4;
pub const TETHER_ERR_COMM: c_int = 5;
pub const TETHER_ERR_TYPE: c_int = 6;
pub const TETHER_ERR_OP: c_int = 7;
pub const TETHER_ERR_REQUEST: c_int = 8;
pub const TETHER_ERR_TRUNCATE: c_int = 9;
pub const TETHER_ERR_NOT_INITIALIZED: c_int = 10;
pub const TETHER_ERR_INIT: c_int = 11;
pub const TETHER_ERR_TIMEOUT: c_int = 12;
pub const TETHER_ERR_PEER_LOST: c_int = 13;
pub const TETHER_ERR_PROTOCOL: c_int = 14;
pub const TETHER_ERR_AUTH: c_int = 15;
pub const TETHER_ERR_TRANSPORT: c_int = 16;
pub const TETHER_ERR_UNKNOWN_HINT: c_int = 17;
pub const TETHER_ERR_HINT_VALUE: c_int = 18;
pub const TETHER_ERR_RMA_RANGE: c_int = 19;
pub const TETHER_ERR_FIELD_MISMATCH: c_int = 20;
pub const TETHER_ERR_NO_MEM: c_int = 21;
pub const TETHER_ERR_FILE: c_int = 22;
pub const TETHER_ERR_CANCELLED: c_int = 23;
pub const TETHER_ERR_INTERNAL: c_int = 24;

pub const TETHER_ANY_SOURCE: c_int = -1;
pub const TETHER_ANY_TAG: c_int = -1;
/// The largest valid tag (MPI's `MPI_TAG_UB`): tags are 0 to
/// `TETHER_TAG_UB`, every non-negative `int`; a negative tag other than
/// `TETHER_ANY_TAG` on a receive is `TETHER_ERR_TAG`.
pub const TETHER_TAG_UB: c_int = 2147483647;
const _: () = assert!(
    TETHER_TAG_UB == tether::TAG_UB,
    "the header's tag bound is the engine's"
);
/// A count or index that is not defined (`tether_get_count` of a size that
/// is not a whole number of elements; `tether_waitany` with no active request).
pub const TETHER_UNDEFINED: c_int = -32766;
pub const TETHER_REQUEST_NULL: tether_request = 0;
pub const TETHER_COMM_UNIVERSE: tether_comm = 1;
/// No communicator: what a process outside a new communicator gets.
pub const TETHER_COMM_NULL: tether_comm = 0;
/// Longest program name, including the terminating NUL.
pub const TETHER_MAX_PROGRAM_NAME: c_int = 65;
/// Longest message `tether_last_error` and `tether_error_string` produce, including the NUL.
pub const TETHER_MAX_ERROR_STRING: c_int = 1024;

pub const TETHER_BYTE: tether_datatype = 1;
pub const TETHER_CHAR: tether_datatype = 2;
pub const TETHER_INT8: tether_datatype = 3;
pub const TETHER_INT16: tether_datatype = 4;
pub const TETHER_INT32: tether_datatype = 5;
pub const TETHER_INT64: tether_datatype = 6;
pub const TETHER_UINT8: tether_datatype = 7;
pub const TETHER_UINT16: tether_datatype = 8;
pub const TETHER_UINT32: tether_datatype = 9;
pub const TETHER_UINT64: tether_datatype = 10;
pub const TETHER_INT: tether_datatype = 11;
pub const TETHER_LONG: tether_datatype = 12;
pub const TETHER_LONG_LONG: tether_datatype = 13;
pub const TETHER_FLOAT: tether_datatype = 14;
pub const TETHER_DOUBLE: tether_datatype = 15;
pub const TETHER_FLOAT_COMPLEX: tether_datatype = 16;
pub const TETHER_DOUBLE_COMPLEX: tether_datatype = 17;
pub const TETHER_FLOAT_INT: tether_datatype = 18;
pub const TETHER_DOUBLE_INT: tether_datatype = 19;
pub const TETHER_2INT: tether_datatype = 20;
pub const TETHER_INTEGER: tether_datatype = 21;
pub const TETHER_REAL: tether_datatype = 22;
pub const TETHER_DOUBLE_PRECISION: tether_datatype = 23;
pub const TETHER_COMPLEX: tether_datatype = 24;
pub const TETHER_LOGICAL: tether_datatype = 25;
pub const TETHER_2INTEGER: tether_datatype = 26;
pub const TETHER_2REAL: tether_datatype = 27;
pub const TETHER_2DOUBLE_PRECISION: tether_datatype = 28;

pub const TETHER_SUM: tether_op = 1;
pub const TETHER_PROD: tether_op = 2;
pub const TETHER_MIN: tether_op = 3;
pub const TETHER_MAX: tether_op = 4;
pub const TETHER_LAND: tether_op = 5;
pub const TETHER_LOR: tether_op = 6;
pub const TETHER_LXOR: tether_op = 7;
pub const TETHER_BAND: tether_op = 8;
pub const TETHER_BOR: tether_op = 9;
pub const TETHER_BXOR: tether_op = 10;
pub const TETHER_MINLOC: tether_op = 11;
pub const TETHER_MAXLOC: tether_op = 12;
/// One-sided accumulate family only: the origin's value replaces the
/// target's (MPI_REPLACE); collectives refuse it with `TETHER_ERR_OP`.
pub const TETHER_REPLACE: tether_op = 13;
/// One-sided accumulate family only: the target is left as it is, so
/// `tether_fetch_and_op` reads atomically (MPI_NO_OP); collectives refuse
/// it with `TETHER_ERR_OP`.
pub const TETHER_NO_OP: tether_op = 14;

#[cfg(test)]
mod tests {
    use super::*;
    use tether::datatype::DATATYPES;
    use tether::ErrorClass;

    #[test]
    fn constants_match_the_runtime() {
        assert_eq!(TETHER_ERR_TRUNCATE, ErrorClass::Truncate.code());
        assert_eq!(TETHER_ERR_INTERNAL, ErrorClass::Internal.code());
        assert_eq!(TETHER_ERR_FILE, ErrorClass::File.code());
        let find = |name: &str| DATATYPES.iter().find(|t| t.name == name).unwrap().handle;
        assert_eq!(TETHER_2INT, find("TWO_INT"));
        assert_eq!(TETHER_DOUBLE_INT, find("DOUBLE_INT"));
        assert_eq!(TETHER_2DOUBLE_PRECISION, find("TWO_DOUBLE_PRECISION"));
        assert_eq!(TETHER_LONG_LONG, find("LONG_LONG"));
        assert_eq!(TETHER_COMM_UNIVERSE, tether::comm::COMM_UNIVERSE);
        assert_eq!(TETHER_ANY_SOURCE, tether::ANY_SOURCE);
        assert_eq!(TETHER_COMM_NULL, tether::comm::COMM_NULL);
        for (op, name) in tether::op::OPS {
            let c = match *name {
                "SUM" => TETHER_SUM,
                "PROD" => TETHER_PROD,
                "MIN" => TETHER_MIN,
                "MAX" => TETHER_MAX,
                "LAND" => TETHER_LAND,
                "LOR" => TETHER_LOR,
                "LXOR" => TETHER_LXOR,
                "BAND" => TETHER_BAND,
                "BOR" => TETHER_BOR,
                "BXOR" => TETHER_BXOR,
                "MINLOC" => TETHER_MINLOC,
                "MAXLOC" => TETHER_MAXLOC,
                other => panic!("operation {other} has no C constant"),
            };
            assert_eq!(c, *op as i32, "TETHER_{name}");
        }
        assert_eq!(TETHER_REPLACE, tether::REPLACE);
        assert_eq!(TETHER_NO_OP, tether::NO_OP);
        assert_eq!(crate::TETHER_WIN_NULL, tether::WIN_NULL);
    }
}

//! The crate's error type.

use std::fmt;

use crate::ffi::ucs_status_t;
use crate::library::{Ucp, Unavailable};

/// What went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// libucp could not be loaded or is unusable (see [`Unavailable`]).
    Unavailable(Unavailable),
    /// A UCP call returned an error status.
    Ucx {
        /// The UCP function, e.g. `"ucp_ep_create"`.
        op: &'static str,
        /// The raw `ucs_status_t` (negative).
        status: ucs_status_t,
        /// `ucs_status_string(status)`.
        message: String,
    },
    /// An argument the binding refuses before calling UCX.
    Invalid(String),
}

impl Error {
    pub(crate) fn ucx(ucp: &Ucp, op: &'static str, status: ucs_status_t) -> Error {
        Error::Ucx {
            op,
            status,
            message: ucp.status_message(status),
        }
    }

    /// The `ucs_status_t` for [`Error::Ucx`], else `None`.
    pub fn status(&self) -> Option<ucs_status_t> {
        match self {
            Error::Ucx { status, .. } => Some(*status),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unavailable(u) => u.fmt(f),
            Error::Ucx {
                op,
                status,
                message,
            } => write!(f, "{op} failed: {message} ({status})"),
            Error::Invalid(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for Error {}

impl From<Unavailable> for Error {
    fn from(u: Unavailable) -> Error {
        Error::Unavailable(u)
    }
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

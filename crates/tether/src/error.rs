//! Error classes (DESIGN 3) and the error type every fallible call returns.

use std::fmt;

/// The error classes of the public API. The numbers are the C codes;
/// `TETHER_SUCCESS` is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ErrorClass {
    Arg = 1,
    Count = 2,
    Rank = 3,
    Tag = 4,
    Comm = 5,
    Type = 6,
    Op = 7,
    Request = 8,
    Truncate = 9,
    NotInitialized = 10,
    Init = 11,
    Timeout = 12,
    PeerLost = 13,
    Protocol = 14,
    Auth = 15,
    Transport = 16,
    UnknownHint = 17,
    HintValue = 18,
    RmaRange = 19,
    FieldMismatch = 20,
    NoMem = 21,
    File = 22,
    Cancelled = 23,
    Internal = 24,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 24] = [
        ErrorClass::Arg,
        ErrorClass::Count,
        ErrorClass::Rank,
        ErrorClass::Tag,
        ErrorClass::Comm,
        ErrorClass::Type,
        ErrorClass::Op,
        ErrorClass::Request,
        ErrorClass::Truncate,
        ErrorClass::NotInitialized,
        ErrorClass::Init,
        ErrorClass::Timeout,
        ErrorClass::PeerLost,
        ErrorClass::Protocol,
        ErrorClass::Auth,
        ErrorClass::Transport,
        ErrorClass::UnknownHint,
        ErrorClass::HintValue,
        ErrorClass::RmaRange,
        ErrorClass::FieldMismatch,
        ErrorClass::NoMem,
        ErrorClass::File,
        ErrorClass::Cancelled,
        ErrorClass::Internal,
    ];

    pub fn code(self) -> i32 {
        self as i32
    }

    pub fn from_code(code: i32) -> Option<ErrorClass> {
        ErrorClass::ALL.iter().copied().find(|c| c.code() == code)
    }

    /// The C name, e.g. `TETHER_ERR_TRUNCATE`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Arg => "TETHER_ERR_ARG",
            ErrorClass::Count => "TETHER_ERR_COUNT",
            ErrorClass::Rank => "TETHER_ERR_RANK",
            ErrorClass::Tag => "TETHER_ERR_TAG",
            ErrorClass::Comm => "TETHER_ERR_COMM",
            ErrorClass::Type => "TETHER_ERR_TYPE",
            ErrorClass::Op => "TETHER_ERR_OP",
            ErrorClass::Request => "TETHER_ERR_REQUEST",
            ErrorClass::Truncate => "TETHER_ERR_TRUNCATE",
            ErrorClass::NotInitialized => "TETHER_ERR_NOT_INITIALIZED",
            ErrorClass::Init => "TETHER_ERR_INIT",
            ErrorClass::Timeout => "TETHER_ERR_TIMEOUT",
            ErrorClass::PeerLost => "TETHER_ERR_PEER_LOST",
            ErrorClass::Protocol => "TETHER_ERR_PROTOCOL",
            ErrorClass::Auth => "TETHER_ERR_AUTH",
            ErrorClass::Transport => "TETHER_ERR_TRANSPORT",
            ErrorClass::UnknownHint => "TETHER_ERR_UNKNOWN_HINT",
            ErrorClass::HintValue => "TETHER_ERR_HINT_VALUE",
            ErrorClass::RmaRange => "TETHER_ERR_RMA_RANGE",
            ErrorClass::FieldMismatch => "TETHER_ERR_FIELD_MISMATCH",
            ErrorClass::NoMem => "TETHER_ERR_NO_MEM",
            ErrorClass::File => "TETHER_ERR_FILE",
            ErrorClass::Cancelled => "TETHER_ERR_CANCELLED",
            ErrorClass::Internal => "TETHER_ERR_INTERNAL",
        }
    }

    /// What the class means, in a few words.
    pub fn describe(self) -> &'static str {
        match self {
            ErrorClass::Arg => "invalid argument",
            ErrorClass::Count => "invalid count",
            ErrorClass::Rank => "invalid rank",
            ErrorClass::Tag => "invalid tag",
            ErrorClass::Comm => "invalid communicator",
            ErrorClass::Type => "invalid datatype",
            ErrorClass::Op => "invalid reduction operation for this datatype",
            ErrorClass::Request => "invalid request",
            ErrorClass::Truncate => "message truncated: longer than the receive buffer",
            ErrorClass::NotInitialized => "tether is not initialized",
            ErrorClass::Init => "start-up failed",
            ErrorClass::Timeout => "timed out",
            ErrorClass::PeerLost => "peer process lost",
            ErrorClass::Protocol => "protocol violation by a peer",
            ErrorClass::Auth => "authentication failed",
            ErrorClass::Transport => "transport failure",
            ErrorClass::UnknownHint => "unknown hint",
            ErrorClass::HintValue => "invalid hint value",
            ErrorClass::RmaRange => "one-sided access out of the window",
            ErrorClass::FieldMismatch => "field definitions disagree between producer and consumer",
            ErrorClass::NoMem => "out of memory",
            ErrorClass::File => "file transport error",
            ErrorClass::Cancelled => "request cancelled",
            ErrorClass::Internal => "internal error",
        }
    }
}

/// An error: its class and a message naming what was wrong (which peer,
/// file, size; expected against received).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub class: ErrorClass,
    pub message: String,
}

impl Error {
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Error {
        Error {
            class,
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.class.name(), self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Shorthand: `Err(err(ErrorClass::Rank, format!(..)))`.
pub fn err(class: ErrorClass, message: impl Into<String>) -> Error {
    Error::new(class, message)
}

/// What happened to a request that completed with `why`, in words for a
/// message (never the enum's debug form).
pub fn completion_words(why: tether_proto::CompletionError) -> &'static str {
    use tether_proto::CompletionError::*;
    match why {
        Truncated => "its message was longer than the buffer",
        PeerLost => "the peer was lost",
        Cancelled => "it was cancelled",
        RmaRange => "the target refused an access outside its window",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_round_trip() {
        for class in ErrorClass::ALL {
            assert_eq!(ErrorClass::from_code(class.code()), Some(class));
            assert!(class.name().starts_with("TETHER_ERR_"));
        }
        assert_eq!(ErrorClass::from_code(0), None);
    }
}

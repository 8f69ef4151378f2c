//! The one error type of the crate.

use std::io;

/// Why a rendezvous operation failed.
///
/// Every variant names the rendezvous it happened on (`rendezvous`: the
/// directory path or `tcp://host:port`) and, where one was involved, the key,
/// so that a message read in a log of thousands of processes says where to
/// look.
#[derive(Debug, thiserror::Error)]
pub enum RendezvousError {
    /// The spec given to [`crate::Rendezvous::open`] or the address given to
    /// [`crate::Server::bind`] cannot be used.
    #[error("rendezvous {rendezvous:?}: {reason}")]
    Spec {
        /// The spec or address as given.
        rendezvous: String,
        /// What is wrong with it.
        reason: String,
    },

    /// An operating-system call that concerns no key failed: creating the
    /// directory, binding the server, connecting to it.
    #[error("rendezvous {rendezvous}: cannot {action}: {source}")]
    Setup {
        /// The rendezvous concerned.
        rendezvous: String,
        /// What was being done ("connect", "bind the server", ...).
        action: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// The key breaks the key rules (see [`crate::MAX_KEY_LEN`]).
    #[error("rendezvous {rendezvous}: invalid key {key:?}: {reason}")]
    InvalidKey {
        /// Where the key was to be used.
        rendezvous: String,
        /// The key, shortened if it is very long.
        key: String,
        /// Which rule it breaks.
        reason: String,
    },

    /// The value breaks the value rules (see [`crate::MAX_VALUE_LEN`]).
    #[error("rendezvous {rendezvous}: invalid value for key {key:?}: {reason}")]
    InvalidValue {
        /// Where the value was to be stored.
        rendezvous: String,
        /// The key it was to be stored under.
        key: String,
        /// Which rule it breaks.
        reason: String,
    },

    /// A stored value cannot be read back as a value (a file written by hand,
    /// or a server that answers outside the protocol).
    #[error("rendezvous {rendezvous}: key {key:?}: {reason}")]
    Corrupt {
        /// Where the value was read.
        rendezvous: String,
        /// The key that was read.
        key: String,
        /// What is wrong with what was read.
        reason: String,
    },

    /// This process has no key, and the entry was sealed with one: the
    /// programs of the run were given a key, and this one was not.
    #[error("rendezvous {rendezvous}: the entry {key:?} is sealed with a key, and this process has none (set TETHER_KEY_FILE as the other programs do)")]
    SealedWithoutKey {
        /// Where the entry was read.
        rendezvous: String,
        /// The entry's key.
        key: String,
    },

    /// An operating-system call failed while handling a key: a file
    /// operation, a connection, or a timeout waiting for the server's answer.
    #[error("rendezvous {rendezvous}: {action} key {key:?}: {source}")]
    Io {
        /// Where it failed.
        rendezvous: String,
        /// The key being handled.
        key: String,
        /// What was being done ("put", "connect for", ...).
        action: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// The server refused a request with `ERR`.
    #[error("rendezvous {rendezvous}: key {key:?}: server answered: {message}")]
    Server {
        /// The server's address.
        rendezvous: String,
        /// The key of the refused request.
        key: String,
        /// The server's message.
        message: String,
    },
}

const SHOWN_KEY_CHARS: usize = 80;

/// Shortens a key for an error message; a rejected key may be arbitrarily long.
pub(crate) fn shown_key(key: &str) -> String {
    match key.char_indices().nth(SHOWN_KEY_CHARS) {
        Some((cut, _)) => format!("{}... ({} bytes)", &key[..cut], key.len()),
        None => key.to_owned(),
    }
}

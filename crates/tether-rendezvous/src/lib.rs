//! Where the processes of a Tether run find each other at start-up: a small
//! key-value store, kept either in a directory that every process sees
//! ([`DirStore`]) or on a TCP server that the launcher runs ([`Server`],
//! reached through [`TcpClient`]). [`Rendezvous`] is either, chosen by the
//! `TETHER_RENDEZVOUS` spec.
//!
//! Keys are 1 to [`MAX_KEY_LEN`] characters of `A-Z a-z 0-9 _ . : / -`
//! (`proc/sim/0`); values are UTF-8 without a newline, at most
//! [`MAX_VALUE_LEN`] bytes. Both backends check these rules before doing
//! anything, and every error names the rendezvous and the key.

mod client;
mod dir;
mod error;
pub mod protocol;
mod rules;
mod server;
mod store;

use std::time::Duration;

pub use client::TcpClient;
pub use dir::DirStore;
pub use error::RendezvousError;
pub use rules::{MAX_KEY_LEN, MAX_VALUE_LEN};
pub use server::{Server, ServerHandle};

const TCP_SCHEME: &str = "tcp://";

/// A rendezvous store, of either backend.
///
/// All methods take `&self` and may be called from several threads; a value
/// `put` by one process is seen by every later `get` of any process.
#[derive(Debug)]
pub enum Rendezvous {
    /// A directory (shared file system).
    Dir(DirStore),
    /// A connection to a rendezvous server.
    Tcp(TcpClient),
}

impl Rendezvous {
    /// Opens the rendezvous that `spec` names: `tcp://host:port` connects to
    /// a [`Server`] (at most 5 s per address); anything else is a directory
    /// path, created with its parents when missing.
    ///
    /// Errors: [`RendezvousError::Spec`] for an empty spec or an address that
    /// does not resolve, [`RendezvousError::Setup`] when the server does
    /// not accept the connection or the directory cannot be created.
    pub fn open(spec: &str) -> Result<Rendezvous, RendezvousError> {
        if spec.is_empty() {
            return Err(RendezvousError::Spec {
                rendezvous: spec.to_owned(),
                reason: "empty (expected a directory or tcp://host:port)".into(),
            });
        }
        match spec.strip_prefix(TCP_SCHEME) {
            Some(address) => TcpClient::connect(address).map(Rendezvous::Tcp),
            None => DirStore::open(spec).map(Rendezvous::Dir),
        }
    }

    /// Stores `value` under `key`, replacing any value; a reader sees the
    /// old or the new value, never a partial one.
    ///
    /// Errors: [`RendezvousError::InvalidKey`], [`RendezvousError::InvalidValue`],
    /// and I/O or server errors of the backend.
    pub fn put(&self, key: &str, value: &str) -> Result<(), RendezvousError> {
        match self {
            Rendezvous::Dir(store) => store.put(key, value),
            Rendezvous::Tcp(client) => client.put(key, value),
        }
    }

    /// The value under `key`, or `None`; never waits for the key to appear.
    ///
    /// Errors: [`RendezvousError::InvalidKey`], a stored value that is not a
    /// valid value ([`RendezvousError::Corrupt`]), and I/O or server errors.
    pub fn get(&self, key: &str) -> Result<Option<String>, RendezvousError> {
        match self {
            Rendezvous::Dir(store) => store.get(key),
            Rendezvous::Tcp(client) => client.get(key),
        }
    }

    /// Blocks until `key` has a value and returns it, or returns `Ok(None)`
    /// once `timeout` has passed. The directory backend polls (1 ms doubling
    /// to 50 ms); the server answers as soon as the key is put.
    ///
    /// Errors: as [`Rendezvous::get`].
    pub fn wait(&self, key: &str, timeout: Duration) -> Result<Option<String>, RendezvousError> {
        match self {
            Rendezvous::Dir(store) => store.wait(key, timeout),
            Rendezvous::Tcp(client) => client.wait(key, timeout),
        }
    }

    /// Removes `key`; a key without a value is not an error.
    ///
    /// Errors: [`RendezvousError::InvalidKey`], and I/O or server errors.
    pub fn remove(&self, key: &str) -> Result<(), RendezvousError> {
        match self {
            Rendezvous::Dir(store) => store.remove(key),
            Rendezvous::Tcp(client) => client.remove(key),
        }
    }

    /// The directory path or `tcp://host:port`, for messages.
    pub fn describe(&self) -> String {
        match self {
            Rendezvous::Dir(store) => store.describe(),
            Rendezvous::Tcp(client) => client.describe(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn handles_can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<super::Rendezvous>();
        shareable::<super::ServerHandle>();
    }
}

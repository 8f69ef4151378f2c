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
pub mod seal;
mod server;
mod store;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use client::TcpClient;
pub use dir::DirStore;
pub use error::RendezvousError;
pub use rules::{MAX_KEY_LEN, MAX_VALUE_LEN};
pub use server::{Server, ServerHandle};
use tether_auth::Key;

const TCP_SCHEME: &str = "tcp://";

/// How often a wait looks again after it found a forged entry.
const FORGED_POLL: Duration = Duration::from_millis(50);

/// Where the entries are kept.
#[derive(Debug)]
pub enum Backend {
    /// A directory (shared file system).
    Dir(DirStore),
    /// A connection to a rendezvous server.
    Tcp(TcpClient),
}

/// A rendezvous store, of either backend, with the run's key when there
/// is one ([`Rendezvous::with_key`]): then every value is sealed when put
/// and checked when read ([`seal`]), and an entry that fails the check
/// reads as absent (logged once per key).
///
/// All methods take `&self` and may be called from several threads; a value
/// `put` by one process is seen by every later `get` of any process.
#[derive(Debug)]
pub struct Rendezvous {
    backend: Backend,
    key: Option<Arc<Key>>,
    /// Keys whose entry, when last read, was not sealed with the key
    /// (`.0`), and keys for which that was logged already (`.1`).
    forged: Mutex<(HashSet<String>, HashSet<String>)>,
}

impl Rendezvous {
    /// Opens the rendezvous that `spec` names: `tcp://host:port` connects to
    /// a [`Server`] (at most 5 s per address); anything else is a directory
    /// path, created with its parents when missing (mode 0700: entries
    /// name the processes' addresses, which other users need not see).
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
        let backend = match spec.strip_prefix(TCP_SCHEME) {
            Some(address) => Backend::Tcp(TcpClient::connect(address)?),
            None => Backend::Dir(DirStore::open(spec)?),
        };
        Ok(Rendezvous {
            backend,
            key: None,
            forged: Mutex::default(),
        })
    }

    /// The same rendezvous, sealing and checking entries with `key`.
    pub fn with_key(mut self, key: Option<Arc<Key>>) -> Rendezvous {
        self.key = key;
        self
    }

    /// The backend, for what depends on it (the file transport puts its
    /// files beside a directory rendezvous).
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Stores `value` under `key`, replacing any value; a reader sees the
    /// old or the new value, never a partial one.
    ///
    /// Errors: [`RendezvousError::InvalidKey`], [`RendezvousError::InvalidValue`],
    /// and I/O or server errors of the backend (a server with the run's
    /// key refuses an entry without the key's seal).
    pub fn put(&self, key: &str, value: &str) -> Result<(), RendezvousError> {
        let sealed;
        let value = match &self.key {
            Some(run_key) => {
                sealed = seal::seal(run_key, key, value);
                sealed.as_str()
            }
            None => value,
        };
        match &self.backend {
            Backend::Dir(store) => store.put(key, value),
            Backend::Tcp(client) => client.put(key, value),
        }
    }

    /// The value under `key`, or `None`; never waits for the key to appear.
    ///
    /// Errors: [`RendezvousError::InvalidKey`], a stored value that is not a
    /// valid value ([`RendezvousError::Corrupt`]), and I/O or server errors.
    pub fn get(&self, key: &str) -> Result<Option<String>, RendezvousError> {
        let stored = match &self.backend {
            Backend::Dir(store) => store.get(key)?,
            Backend::Tcp(client) => client.get(key)?,
        };
        match stored {
            Some(stored) => self.believe(key, stored),
            None => Ok(None),
        }
    }

    /// Blocks until `key` has a value and returns it, or returns `Ok(None)`
    /// once `timeout` has passed. The directory backend polls (1 ms doubling
    /// to 50 ms); the server answers as soon as the key is put.
    ///
    /// Errors: as [`Rendezvous::get`].
    pub fn wait(&self, key: &str, timeout: Duration) -> Result<Option<String>, RendezvousError> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let left = deadline.map_or(timeout, |d| d.saturating_duration_since(Instant::now()));
            let stored = match &self.backend {
                Backend::Dir(store) => store.wait(key, left)?,
                Backend::Tcp(client) => client.wait(key, left)?,
            };
            let Some(stored) = stored else {
                return Ok(None);
            };
            if let Some(value) = self.believe(key, stored)? {
                return Ok(Some(value));
            }
            let left =
                deadline.map_or(FORGED_POLL, |d| d.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                return Ok(None);
            }
            std::thread::sleep(FORGED_POLL.min(left));
        }
    }

    /// Removes `key`; a key without a value is not an error.
    ///
    /// Errors: [`RendezvousError::InvalidKey`], and I/O or server errors.
    pub fn remove(&self, key: &str) -> Result<(), RendezvousError> {
        match &self.backend {
            Backend::Dir(store) => store.remove(key),
            Backend::Tcp(client) => {
                let token = self.key.as_ref().map(|k| seal::delete_token(k, key));
                client.remove(key, token.as_deref())
            }
        }
    }

    /// Whether the entry under `key`, when last read, was there but not
    /// sealed with this rendezvous's key (so it read as absent): what
    /// a timeout waiting for it should say.
    pub fn unsealed(&self, key: &str) -> bool {
        let forged = self.forged.lock().unwrap_or_else(|p| p.into_inner());
        forged.0.contains(key)
    }

    /// The directory path or `tcp://host:port`, for messages.
    pub fn describe(&self) -> String {
        match &self.backend {
            Backend::Dir(store) => store.describe(),
            Backend::Tcp(client) => client.describe(),
        }
    }

    /// A stored value as the value put, when it is believed: with a key,
    /// only when its seal checks (a forged entry is logged once and read
    /// as absent).
    ///
    /// Errors: [`RendezvousError::SealedWithoutKey`] when this process has
    /// no key and the entry is sealed.
    fn believe(&self, key: &str, stored: String) -> Result<Option<String>, RendezvousError> {
        let Some(run_key) = &self.key else {
            if seal::looks_sealed(&stored) {
                return Err(RendezvousError::SealedWithoutKey {
                    rendezvous: self.describe(),
                    key: key.to_owned(),
                });
            }
            return Ok(Some(stored));
        };
        let mut forged = self.forged.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(value) = seal::unseal(run_key, key, &stored) {
            forged.0.remove(key);
            return Ok(Some(value.to_owned()));
        }
        forged.0.insert(key.to_owned());
        if forged.1.insert(key.to_owned()) {
            tracing::warn!(
                "rendezvous {}: the entry {key:?} was not written with this run's key (forged, or left by another run); ignored",
                self.describe()
            );
        }
        Ok(None)
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

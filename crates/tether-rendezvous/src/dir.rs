//! The directory backend: one file per key in a directory that every process
//! sees (a shared file system across hosts).
//!
//! A key becomes one flat file name: each `/` is written `%` and a key that
//! starts with `.` gets a leading `=`. Neither `%` nor `=` is a key character,
//! so the mapping cannot collide, no key file starts with `.`, and the longest
//! key (200 characters) stays far below the usual 255-byte name limit even
//! with the temporary-file prefix (a three-byte escape such as `%2F` would
//! not). A value is published by writing a temporary file whose name starts
//! with `.tmp.` and renaming it over the key's file, so a reader sees either
//! the old or the new value, never a partial one; temporary files are never
//! read as keys.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{shown_key, RendezvousError};
use crate::rules::{check_key, check_value, MAX_VALUE_LEN};

const TEMP_PREFIX: &str = ".tmp.";
const FIRST_POLL: Duration = Duration::from_millis(1);
const LONGEST_POLL: Duration = Duration::from_millis(50);

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A rendezvous in a directory.
#[derive(Debug, Clone)]
pub struct DirStore {
    dir: PathBuf,
    name: String,
}

impl DirStore {
    /// Uses `dir` as the store, creating it and its parents when missing.
    ///
    /// Errors: [`RendezvousError::Spec`] for an empty path,
    /// [`RendezvousError::Setup`] when the directory cannot be created.
    pub fn open(dir: impl AsRef<Path>) -> Result<DirStore, RendezvousError> {
        let dir = dir.as_ref().to_path_buf();
        let name = dir.display().to_string();
        if name.is_empty() {
            return Err(RendezvousError::Spec {
                rendezvous: name,
                reason: "an empty directory path".into(),
            });
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|source| RendezvousError::Setup {
                rendezvous: name.clone(),
                action: "create the directory",
                source,
            })?;
        Ok(DirStore { dir, name })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The directory, as shown in error messages.
    pub fn describe(&self) -> String {
        self.name.clone()
    }

    /// Stores `value` under `key`, replacing any value; readers see the old
    /// or the new value, never a mix.
    ///
    /// Errors: invalid key or value; [`RendezvousError::Io`] when the file
    /// cannot be written or renamed (the temporary file is then removed).
    pub fn put(&self, key: &str, value: &str) -> Result<(), RendezvousError> {
        check_key(&self.name, key)?;
        check_value(&self.name, key, value)?;
        let file = self.dir.join(file_name(key));
        let temp = self.dir.join(temp_name(key));
        let written = write_new(&temp, value.as_bytes()).and_then(|()| fs::rename(&temp, &file));
        written.map_err(|source| {
            let _ = fs::remove_file(&temp);
            self.io_error("put", key, source)
        })
    }

    /// The value under `key`, or `None` when there is none; never blocks
    /// on absence.
    ///
    /// Errors: invalid key; [`RendezvousError::Io`] when the file exists
    /// but cannot be read; [`RendezvousError::Corrupt`] when it does not
    /// hold a valid value (not UTF-8, a newline, too long).
    pub fn get(&self, key: &str) -> Result<Option<String>, RendezvousError> {
        check_key(&self.name, key)?;
        let file = match fs::File::open(self.dir.join(file_name(key))) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io_error("get", key, e)),
        };
        let mut bytes = Vec::new();
        file.take(MAX_VALUE_LEN as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| self.io_error("get", key, e))?;
        let value = String::from_utf8(bytes).map_err(|_| self.corrupt(key, "is not UTF-8"))?;
        if value.len() > MAX_VALUE_LEN {
            return Err(self.corrupt(key, "is longer than the largest value"));
        }
        if value.contains('\n') {
            return Err(self.corrupt(key, "contains a newline"));
        }
        Ok(Some(value))
    }

    /// Waits until `key` has a value and returns it, or `None` once `timeout`
    /// has passed. Polls, sleeping 1 ms at first and doubling up to 50 ms,
    /// because a shared file system offers no portable change notification.
    ///
    /// Errors: those of [`DirStore::get`].
    pub fn wait(&self, key: &str, timeout: Duration) -> Result<Option<String>, RendezvousError> {
        let deadline = Instant::now().checked_add(timeout);
        let mut pause = FIRST_POLL;
        loop {
            if let Some(value) = self.get(key)? {
                return Ok(Some(value));
            }
            let left = match deadline {
                Some(deadline) => deadline.saturating_duration_since(Instant::now()),
                None => pause,
            };
            if left.is_zero() {
                return Ok(None);
            }
            std::thread::sleep(pause.min(left));
            pause = (pause * 2).min(LONGEST_POLL);
        }
    }

    /// Removes `key`; a key without a value is not an error.
    ///
    /// Errors: invalid key; [`RendezvousError::Io`] when the file exists but
    /// cannot be removed.
    pub fn remove(&self, key: &str) -> Result<(), RendezvousError> {
        check_key(&self.name, key)?;
        match fs::remove_file(self.dir.join(file_name(key))) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(self.io_error("remove", key, e)),
            _ => Ok(()),
        }
    }

    fn io_error(&self, action: &'static str, key: &str, source: io::Error) -> RendezvousError {
        RendezvousError::Io {
            rendezvous: self.name.clone(),
            key: shown_key(key),
            action,
            source,
        }
    }

    fn corrupt(&self, key: &str, what: &str) -> RendezvousError {
        RendezvousError::Corrupt {
            rendezvous: self.name.clone(),
            key: shown_key(key),
            reason: format!("the stored value {what}"),
        }
    }
}

/// The file that holds `key` (a valid key).
fn file_name(key: &str) -> String {
    let flat = key.replace('/', "%");
    if flat.starts_with('.') {
        format!("={flat}")
    } else {
        flat
    }
}

/// A temporary file name unique across threads, processes and (through the
/// clock) hosts sharing the directory.
fn temp_name(key: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let count = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "{TEMP_PREFIX}{}.{count}.{nanos:x}.{}",
        std::process::id(),
        file_name(key)
    )
}

fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_flat_and_distinct() {
        assert_eq!(file_name("proc/sim/0"), "proc%sim%0");
        assert_eq!(file_name(".tmp.x"), "=.tmp.x");
        assert_eq!(file_name(".."), "=..");
        assert_ne!(file_name("/.x"), file_name(".x"));
        assert!(!file_name(".tmp.x").starts_with(TEMP_PREFIX));
        assert!(temp_name(&"/".repeat(200)).len() < 255);
    }
}

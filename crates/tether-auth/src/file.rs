//! Key files: `tether key new FILE` writes one, every process of a run
//! that names it (`TETHER_KEY_FILE`) reads it. A key file is refused
//! unless only its owner, who must be the reading user, may read it: a
//! key others can read authenticates nothing.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::Key;

/// Why no key could be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("the key from {origin} has {got} bytes; at least {} are required (make one with `tether key new FILE`)", crate::MIN_KEY_LEN)]
    TooShort { origin: String, got: usize },
    #[error("key file {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("key file {} has mode {mode:04o}; others than its owner may read or change it (run `chmod 600 {}`)", path.display(), path.display())]
    Permissions { path: PathBuf, mode: u32 },
    #[error("key file {} belongs to user {owner}, not to this process's user {user}", path.display())]
    Owner {
        path: PathBuf,
        owner: u32,
        user: u32,
    },
    #[error("key file {} is not a regular file", path.display())]
    NotAFile { path: PathBuf },
    #[error("key file {} exists already; a new key is only written to a new file", path.display())]
    Exists { path: PathBuf },
}

/// Where a process takes its key from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The text itself (`TETHER_KEY`, as `tether run` passes it on).
    Text(String),
    /// A key file (`TETHER_KEY_FILE`).
    File(PathBuf),
}

impl KeySource {
    /// The key, read and checked.
    ///
    /// Errors: [`KeyError::TooShort`]; for a file also [`KeyError::Io`],
    /// [`KeyError::NotAFile`], [`KeyError::Owner`] and
    /// [`KeyError::Permissions`], each naming the file.
    pub fn load(&self) -> Result<Key, KeyError> {
        match self {
            KeySource::Text(text) => Key::new(text.trim().as_bytes(), "TETHER_KEY"),
            KeySource::File(path) => read_key_file(path),
        }
    }
}

/// The key in the file at `path`: its text, without surrounding white
/// space, taken as the secret's bytes.
fn read_key_file(path: &Path) -> Result<Key, KeyError> {
    let io = |source| KeyError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(KeyError::NotAFile {
            path: path.to_owned(),
        });
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let user = unsafe { libc::geteuid() };
    if meta.uid() != user {
        return Err(KeyError::Owner {
            path: path.to_owned(),
            owner: meta.uid(),
            user,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(KeyError::Permissions {
            path: path.to_owned(),
            mode,
        });
    }
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(io)?;
    Key::new(
        text.trim().as_bytes(),
        &format!("key file {}", path.display()),
    )
}

/// Writes a fresh key to a new file at `path`, readable by its owner
/// only (mode 0600 from the start: there is no moment at which others
/// may open it).
///
/// Errors: [`KeyError::Exists`] when `path` exists (a key in use is
/// never overwritten), [`KeyError::Io`] otherwise.
pub fn write_new_key_file(path: &Path) -> Result<(), KeyError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| match source.kind() {
            std::io::ErrorKind::AlreadyExists => KeyError::Exists {
                path: path.to_owned(),
            },
            _ => KeyError::Io {
                path: path.to_owned(),
                source,
            },
        })?;
    let text = Key::generate_text();
    file.write_all(format!("{text}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|source| KeyError::Io {
            path: path.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tether-auth-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_new_key_file_is_private_and_loads() {
        let dir = scratch("new");
        let path = dir.join("key");
        write_new_key_file(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let key = KeySource::File(path.clone()).load().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(key, KeySource::Text(text).load().unwrap());
        assert!(matches!(
            write_new_key_file(&path),
            Err(KeyError::Exists { .. })
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_key_file_others_may_read_is_refused_naming_it() {
        let dir = scratch("open");
        let path = dir.join("key");
        write_new_key_file(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = KeySource::File(path.clone()).load().unwrap_err();
        assert!(matches!(error, KeyError::Permissions { mode: 0o644, .. }));
        let message = error.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains("0644"), "{message}");
        assert!(matches!(
            KeySource::File(dir.join("missing")).load(),
            Err(KeyError::Io { .. })
        ));
        assert!(matches!(
            KeySource::File(dir.clone()).load(),
            Err(KeyError::NotAFile { .. }) | Err(KeyError::Permissions { .. })
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }
}

//! A private directory for one `tether bench` invocation: worker results,
//! compiled baselines and the file baseline's files. Removed when dropped.

use std::path::{Path, PathBuf};

pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// Creates `$TMPDIR/tether-bench-<pid>-<n>`.
    ///
    /// Errors: the directory cannot be created (the message names it).
    pub fn new() -> Result<Scratch, String> {
        let base = std::env::temp_dir();
        for n in 0..100 {
            let dir = base.join(format!("tether-bench-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(Scratch { dir }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
            }
        }
        Err(format!(
            "cannot create a fresh directory under {}",
            base.display()
        ))
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// A path inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

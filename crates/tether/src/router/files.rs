//! What the router's file transport needs, read at start-up: where the
//! files go and the run's name, the same in every process of the run.

use std::path::PathBuf;
use std::time::Duration;

use tether_rendezvous::{Backend, Rendezvous};

use crate::error::{err, Error, ErrorClass};
use crate::settings::Settings;
use crate::transport::file::{self, NotifyMode};
use crate::universe::{size_key, Universe};

/// What the file transport needs besides the universe, read at start-up.
pub(super) struct FileSettings {
    /// The run's key, which seals the files.
    pub(super) key: Option<std::sync::Arc<tether_auth::Key>>,
    pub(super) root: PathBuf,
    /// Whether `root` is the per-user default, which must be private.
    pub(super) private_root: bool,
    /// The run's directory name and the run id its files carry, read at
    /// start-up (universe rank 0's rendezvous entry is removed when it
    /// finalizes), or why they cannot be known.
    pub(super) run: std::result::Result<(String, u64), Error>,
    pub(super) fsync: bool,
    pub(super) notify: NotifyMode,
    pub(super) poll_min: Duration,
    pub(super) poll_max: Duration,
    pub(super) peer_timeout: Duration,
    pub(super) silence: Duration,
}

impl FileSettings {
    pub(super) fn new(
        settings: &Settings,
        rendezvous: &Rendezvous,
        universe: &Universe,
    ) -> FileSettings {
        let (root, private_root) = match (settings.file_dir(), rendezvous.backend()) {
            (Some(dir), _) => (PathBuf::from(dir), false),
            (None, Backend::Dir(store)) => (store.path().join("files"), false),
            (None, Backend::Tcp(_)) => {
                // SAFETY: getuid cannot fail.
                let uid = unsafe { libc::getuid() };
                (
                    std::env::temp_dir().join(format!("tether-files-{uid}")),
                    true,
                )
            }
        };
        FileSettings {
            key: None,
            root,
            private_root,
            run: run_identity(settings.run_id(), universe),
            fsync: settings.file_fsync(),
            notify: NotifyMode::parse(settings.file_notify()),
            poll_min: Duration::from_micros(settings.file_poll_us()),
            poll_max: Duration::from_micros(settings.file_poll_max_us()),
            peer_timeout: Duration::from_secs(settings.file_peer_timeout()),
            silence: Duration::from_secs(settings.peer_timeout()),
        }
    }
}

/// The run's directory name and run id, the same in every process of the
/// run and different in every run. The name is `TETHER_RUN_ID` when set
/// (by `tether run` or the user), else universe rank 0's random start-up
/// nonce and the universe id; the id hashes the name with that nonce, so
/// even a rerun under the same `TETHER_RUN_ID` refuses the files an
/// earlier run left behind. The nonce comes from rank 0's size entry,
/// which every process read while joining: rank 0's address, removed when
/// it finalizes, may already be gone when a slow process gets here.
fn run_identity(
    run_id: Option<&str>,
    universe: &Universe,
) -> std::result::Result<(String, u64), Error> {
    let nonce = universe.run_nonce;
    let name = match (run_id, nonce) {
        (Some(id), _) if file::is_safe_run_name(id) => id.to_string(),
        (Some(id), _) => format!("{:016x}", file::format::run_id(id)),
        (None, Some(nonce)) => format!("{nonce:016x}{:016x}", universe.id),
        (None, None) => {
            let message = format!(
                "cannot name the run: universe rank 0's rendezvous entry {} has no start-up nonce (written by an older Tether); set TETHER_RUN_ID",
                size_key(&universe.programs[0].name)
            );
            return Err(err(ErrorClass::File, message));
        }
    };
    let salted = match nonce {
        Some(nonce) => format!("{name}/{nonce:016x}"),
        None => name.clone(),
    };
    Ok((name, file::format::run_id(&salted)))
}

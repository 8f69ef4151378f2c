//! When to look into the inbox: on an inotify event where the file system
//! is local, on a schedule where it is not (network and parallel file
//! systems such as NFS, Lustre or GPFS report no events for files created
//! on other hosts).
//!
//! The schedule: a look every `poll_min` while messages flow; each look
//! that finds nothing doubles the interval, up to `poll_max`; sending or
//! receiving anything brings it back to `poll_min`. With inotify, the
//! inbox is also looked into every `poll_max` in case events were lost
//! (a queue overflow). Events about temporary files (`.tmp-`, being
//! written, never read) wake the reader but do not make a look due: a
//! file published by a writer costs one look, not three (its temporary's
//! creation and close, then its rename).

use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;
use std::time::{Duration, Instant};

use inotify::{Inotify, WatchMask};

use super::names::TEMP_PREFIX;

/// File systems whose events do not cover other hosts' writes, by
/// `statfs` magic number.
const NETWORK_FILE_SYSTEMS: &[(i64, &str)] = &[
    (0x6969, "nfs"),
    (0x517b, "smb"),
    (0xff53_4d42, "cifs"),
    (0xfe53_4d42, "smb2"),
    (0x0bd0_0bd0, "lustre"),
    (0x4750_4653, "gpfs"),
    (0x00c3_6400, "ceph"),
    (0x0102_1997, "9p"),
    (0x5346_414f, "afs"),
    (0x1983_0326, "beegfs"),
    (0x1998_0122, "orangefs"),
    (0x6573_5546, "fuse"),
];

/// How the inbox is watched (`TETHER_FILE_NOTIFY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifyMode {
    /// inotify where the file system is local, polling otherwise.
    Auto,
    Inotify,
    Poll,
}

impl NotifyMode {
    pub fn parse(text: &str) -> NotifyMode {
        match text {
            "inotify" => NotifyMode::Inotify,
            "poll" => NotifyMode::Poll,
            _ => NotifyMode::Auto,
        }
    }
}

pub struct Watcher {
    inotify: Option<Inotify>,
    poll_min: Duration,
    poll_max: Duration,
    interval: Duration,
    next_look: Instant,
    buffer: Vec<u8>,
    /// epoll reported the inotify descriptor readable.
    notified: bool,
}

/// The name of the network file system `dir` is on, if it is on one.
pub fn network_file_system(dir: &Path) -> Option<&'static str> {
    let path =
        std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str())).ok()?;
    // SAFETY: statfs fills the zeroed struct; the path is NUL-terminated.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    let magic = stat.f_type as i64 & 0xffff_ffff;
    NETWORK_FILE_SYSTEMS
        .iter()
        .find(|(m, _)| *m == magic)
        .map(|(_, name)| *name)
}

impl Watcher {
    /// Watches `inbox` as `mode` says; falls back to polling (with the
    /// reason logged) where inotify is not available.
    pub fn new(inbox: &Path, mode: NotifyMode, poll_min: Duration, poll_max: Duration) -> Watcher {
        let inotify = match (mode, network_file_system(inbox)) {
            (NotifyMode::Poll, _) => None,
            (NotifyMode::Auto, Some(fs)) => {
                tracing::info!(
                    "{} is on {fs}: polling it every {:?} to {:?}",
                    inbox.display(),
                    poll_min,
                    poll_max
                );
                None
            }
            _ => match Inotify::init().and_then(|inotify| {
                inotify.watches().add(
                    inbox,
                    WatchMask::MOVED_TO | WatchMask::CREATE | WatchMask::CLOSE_WRITE,
                )?;
                Ok(inotify)
            }) {
                Ok(inotify) => Some(inotify),
                Err(e) => {
                    tracing::info!(
                        "cannot watch {} with inotify ({e}): polling it",
                        inbox.display()
                    );
                    None
                }
            },
        };
        Watcher {
            inotify,
            poll_min,
            poll_max,
            interval: poll_min,
            next_look: Instant::now(),
            buffer: vec![0; 4096],
            notified: false,
        }
    }

    /// The descriptor to sleep on in epoll, when events are used.
    pub fn fd(&self) -> Option<RawFd> {
        self.inotify.as_ref().map(AsRawFd::as_raw_fd)
    }

    pub fn uses_events(&self) -> bool {
        self.inotify.is_some()
    }

    /// epoll reported the inotify descriptor readable.
    pub fn notify(&mut self) {
        self.notified = true;
    }

    /// Whether the inbox should be looked into now. The inotify descriptor
    /// is read (drained) only after epoll reported it, so that a wait that
    /// busy-polls other transports pays no system call for it.
    pub fn due(&mut self, now: Instant) -> bool {
        let mut due = now >= self.next_look;
        if std::mem::take(&mut self.notified) {
            if let Some(inotify) = self.inotify.as_mut() {
                while let Ok(events) = inotify.read_events(&mut self.buffer) {
                    let mut any = false;
                    for event in events {
                        any = true;
                        due |= !event.name.is_some_and(|n| {
                            n.as_encoded_bytes().starts_with(TEMP_PREFIX.as_bytes())
                        });
                    }
                    if !any {
                        break;
                    }
                }
            }
        }
        due
    }

    /// A look happened; `found` says whether it found anything.
    pub fn looked(&mut self, now: Instant, found: bool) {
        if self.inotify.is_some() {
            self.next_look = now + self.poll_max;
            return;
        }
        self.interval = if found {
            self.poll_min
        } else {
            (self.interval * 2).min(self.poll_max)
        };
        self.next_look = now + self.interval;
    }

    /// Something was sent or received: an answer may come soon.
    pub fn activity(&mut self, now: Instant) {
        if self.inotify.is_none() {
            self.interval = self.poll_min;
            self.next_look = self.next_look.min(now + self.poll_min);
        }
    }

    /// When the next look is due.
    pub fn next_look(&self) -> Instant {
        self.next_look
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_file_does_not_make_a_look_due_and_its_publication_does() {
        let dir = std::env::temp_dir().join(format!("tether-watch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let second = Duration::from_secs(1);
        let mut watcher = Watcher::new(&dir, NotifyMode::Inotify, second, 60 * second);
        assert!(watcher.uses_events(), "inotify is needed for this test");
        let now = Instant::now();
        watcher.looked(now, false);
        let temp = dir.join(format!("{TEMP_PREFIX}0-1-0"));
        std::fs::write(&temp, b"being written").unwrap();
        watcher.notify();
        assert!(!watcher.due(now), "a temporary file made a look due");
        std::fs::rename(&temp, dir.join("0-0.msg")).unwrap();
        watcher.notify();
        assert!(watcher.due(now), "a published file did not make a look due");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Liveness through the file system, for peers that share nothing else.
//!
//! Every process of a run that uses the `file` transport rewrites its
//! heartbeat file (`alive-<rank>`, a counter) every [`period`] (a quarter
//! of `TETHER_PEER_TIMEOUT`, at most a second) from a small thread of its
//! own, so that a program that computes for minutes between calls into
//! Tether still looks alive. A peer whose counter has not changed for
//! `TETHER_PEER_TIMEOUT` seconds is lost (the promise the heartbeat
//! datagrams of `liveness.rs` keep for the other transports: a peer
//! reached only through files may share nothing else); one whose file
//! never appears within
//! `TETHER_CONNECT_TIMEOUT` never joined the directory. Only changes are
//! compared, against this process's own clock, so the hosts' clocks need
//! not agree.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the heartbeat file is rewritten, and peers' files read,
/// for a silence timeout of `silence` (zero: none): a quarter of it, as
/// the heartbeat datagrams, but at least 10 ms and at most a second (a
/// rename per second is nothing to a file system; more would be).
pub fn period(silence: Duration) -> Duration {
    if silence.is_zero() {
        return Duration::from_secs(1);
    }
    (silence / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// The thread that keeps this process's heartbeat file fresh; stopped and
/// the file removed on drop.
pub struct Heartbeat {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
}

impl Heartbeat {
    pub fn start(path: PathBuf, period: Duration) -> std::io::Result<Heartbeat> {
        let temp = path.with_file_name(format!(
            ".tmp-{}-{}",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("alive"),
            std::process::id()
        ));
        beat(&temp, &path, 0)?;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        // The first beat was written above; the thread writes the next ones.
        let thread = {
            let stop = stop.clone();
            let path = path.clone();
            std::thread::Builder::new()
                .name("tether-heartbeat".into())
                .spawn(move || {
                    let (lock, signal) = &*stop;
                    let mut count = 1u64;
                    loop {
                        let stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
                        let (stopped, _) = signal
                            .wait_timeout_while(stopped, period, |s| !*s)
                            .unwrap_or_else(|e| e.into_inner());
                        if *stopped {
                            break;
                        }
                        drop(stopped);
                        // Written without the lock held: a hung file system
                        // delays this beat, not the process's finalize.
                        if let Err(e) = beat(&temp, &path, count) {
                            tracing::warn!("cannot write heartbeat {}: {e}", path.display());
                        }
                        count += 1;
                        if *lock.lock().unwrap_or_else(|e| e.into_inner()) {
                            // Stopped while writing: this beat outlived the
                            // owner's removal of the file.
                            let _ = std::fs::remove_file(&path);
                            break;
                        }
                    }
                })?
        };
        Ok(Heartbeat {
            stop,
            thread: Some(thread),
            path,
        })
    }
}

fn beat(temp: &Path, path: &Path, count: u64) -> std::io::Result<()> {
    std::fs::write(temp, format!("{count} {}\n", std::process::id()))?;
    std::fs::rename(temp, path)
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        *self.stop.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.stop.1.notify_all();
        // Not joined: a beat stuck in a hung file system must not hang
        // finalize; the thread ends at its next wake-up.
        drop(self.thread.take());
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What this process knows of one peer's heartbeat.
#[derive(Debug)]
pub struct Liveness {
    since: Instant,
    last: Option<(String, Instant)>,
}

/// The verdict on a peer.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Alive,
    /// No heartbeat file yet, for this long.
    NeverSeen(Duration),
    /// The heartbeat stopped changing this long ago.
    Silent(Duration),
}

impl Liveness {
    pub fn new(now: Instant) -> Liveness {
        Liveness {
            since: now,
            last: None,
        }
    }

    /// Reads the peer's heartbeat file at `path` and judges it (`silence`
    /// zero: it is never found silent).
    pub fn check(
        &mut self,
        path: &Path,
        now: Instant,
        connect: Duration,
        silence: Duration,
    ) -> Verdict {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                if self.last.as_ref().is_none_or(|(seen, _)| *seen != text) {
                    self.last = Some((text, now));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::debug!("cannot read heartbeat {}: {e}", path.display()),
        }
        match &self.last {
            None if now.duration_since(self.since) >= connect => {
                Verdict::NeverSeen(now.duration_since(self.since))
            }
            None => Verdict::Alive,
            Some((_, changed)) if !silence.is_zero() && now.duration_since(*changed) >= silence => {
                Verdict::Silent(now.duration_since(*changed))
            }
            Some(_) => Verdict::Alive,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_judged_by_changes_of_its_file() {
        let dir = std::env::temp_dir().join(format!("tether-beat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("alive-7");
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        let mut peer = Liveness::new(t0);
        assert_eq!(
            peer.check(&path, t0, 5 * second, 3 * second),
            Verdict::Alive
        );
        assert_eq!(
            peer.check(&path, t0 + 6 * second, 5 * second, 3 * second),
            Verdict::NeverSeen(6 * second)
        );
        std::fs::write(&path, "1").unwrap();
        let t1 = t0 + 7 * second;
        assert_eq!(
            peer.check(&path, t1, 5 * second, 3 * second),
            Verdict::Alive
        );
        assert_eq!(
            peer.check(&path, t1 + 3 * second, 5 * second, 3 * second),
            Verdict::Silent(3 * second)
        );
        std::fs::write(&path, "2").unwrap();
        assert_eq!(
            peer.check(&path, t1 + 4 * second, 5 * second, 3 * second),
            Verdict::Alive
        );
        assert_eq!(
            peer.check(&path, t1 + 60 * second, 5 * second, Duration::ZERO),
            Verdict::Alive,
            "no timeout: never silent"
        );
        assert_eq!(period(Duration::ZERO), second);
        assert_eq!(period(2 * second), second / 2);
        assert_eq!(period(30 * second), second);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_thread_writes_and_removes_the_file() {
        let dir = std::env::temp_dir().join(format!("tether-beat2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("alive-0");
        let beat = Heartbeat::start(path.clone(), period(Duration::ZERO)).unwrap();
        assert!(path.exists());
        drop(beat);
        assert!(!path.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

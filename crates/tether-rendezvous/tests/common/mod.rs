//! Helpers shared by the integration tests: a scratch directory and the
//! checks that every backend must pass.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use tether_rendezvous::{Rendezvous, RendezvousError, MAX_KEY_LEN, MAX_VALUE_LEN};

/// A fresh directory under the system's temporary directory, removed on drop.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    pub fn new() -> ScratchDir {
        static COUNT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "tether-rendezvous-test-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        ScratchDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn put_get_overwrite_remove(rv: &Rendezvous) {
    assert_eq!(rv.get("proc/sim/0").unwrap(), None);
    rv.put("proc/sim/0", "127.0.0.1:4000 shm:/x").unwrap();
    assert_eq!(
        rv.get("proc/sim/0").unwrap().as_deref(),
        Some("127.0.0.1:4000 shm:/x")
    );
    rv.put("proc/sim/0", "127.0.0.1:4001").unwrap();
    assert_eq!(
        rv.get("proc/sim/0").unwrap().as_deref(),
        Some("127.0.0.1:4001")
    );
    rv.put("empty", "").unwrap();
    assert_eq!(rv.get("empty").unwrap().as_deref(), Some(""));
    let big = "v".repeat(MAX_VALUE_LEN);
    rv.put("big", &big).unwrap();
    assert_eq!(rv.get("big").unwrap(), Some(big));
    rv.remove("proc/sim/0").unwrap();
    assert_eq!(rv.get("proc/sim/0").unwrap(), None);
    rv.remove("proc/sim/0").unwrap();
    rv.remove("never-put").unwrap();
}

pub fn wait_times_out(rv: &Rendezvous) {
    let start = Instant::now();
    assert_eq!(rv.wait("absent", Duration::from_millis(150)).unwrap(), None);
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(150), "{waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    assert_eq!(rv.wait("absent", Duration::ZERO).unwrap(), None);
    rv.put("present", "yes").unwrap();
    assert_eq!(
        rv.wait("present", Duration::ZERO).unwrap().as_deref(),
        Some("yes")
    );
}

/// `writer` puts the key 100 ms after `reader` started waiting for it.
pub fn wait_sees_concurrent_put(reader: &Rendezvous, writer: Rendezvous) {
    let writer = Arc::new(writer);
    let put = {
        let writer = Arc::clone(&writer);
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(100));
            writer.put("late/key", "here").unwrap();
        })
    };
    let start = Instant::now();
    let got = reader.wait("late/key", Duration::from_secs(10)).unwrap();
    assert_eq!(got.as_deref(), Some("here"));
    assert!(start.elapsed() < Duration::from_secs(5));
    put.join().unwrap();
}

pub fn bad_keys_and_values_are_rejected(rv: &Rendezvous) {
    let where_ = rv.describe();
    let long_key = "k".repeat(MAX_KEY_LEN + 1);
    for key in [
        "",
        "has space",
        "new\nline",
        "ünï",
        "semi;colon",
        long_key.as_str(),
    ] {
        for result in [
            rv.put(key, "v"),
            rv.get(key).map(drop),
            rv.wait(key, Duration::from_millis(1)).map(drop),
            rv.remove(key),
        ] {
            let error = result.expect_err(key);
            assert!(
                matches!(error, RendezvousError::InvalidKey { .. }),
                "{error}"
            );
            let message = error.to_string();
            assert!(message.contains(&where_), "{message}");
            assert!(message.contains("invalid key"), "{message}");
        }
    }
    rv.put(&"k".repeat(MAX_KEY_LEN), "fine").unwrap();
    let too_big = "v".repeat(MAX_VALUE_LEN + 1);
    for value in ["two\nlines", too_big.as_str()] {
        let error = rv.put("good/key", value).unwrap_err();
        assert!(
            matches!(error, RendezvousError::InvalidValue { .. }),
            "{error}"
        );
        let message = error.to_string();
        assert!(
            message.contains(&where_) && message.contains("good/key"),
            "{message}"
        );
    }
    assert_eq!(rv.get("good/key").unwrap(), None);
}

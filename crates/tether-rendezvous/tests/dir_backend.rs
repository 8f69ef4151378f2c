mod common;

use std::time::Duration;

use common::ScratchDir;
use tether_rendezvous::{Backend, Rendezvous};

fn open(dir: &ScratchDir) -> Rendezvous {
    Rendezvous::open(dir.path().to_str().unwrap()).unwrap()
}

#[test]
fn creates_missing_directories() {
    let scratch = ScratchDir::new();
    let nested = scratch.path().join("a/b/c");
    let rv = Rendezvous::open(nested.to_str().unwrap()).unwrap();
    assert!(nested.is_dir());
    assert!(matches!(rv.backend(), Backend::Dir(_)));
    assert_eq!(rv.describe(), nested.display().to_string());
}

#[test]
fn put_get_overwrite_remove() {
    let scratch = ScratchDir::new();
    common::put_get_overwrite_remove(&open(&scratch));
}

#[test]
fn keys_are_flat_files() {
    let scratch = ScratchDir::new();
    let rv = open(&scratch);
    rv.put("proc/sim/0", "a").unwrap();
    rv.put(".hidden", "b").unwrap();
    let mut names: Vec<String> = std::fs::read_dir(scratch.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["=.hidden", "proc%sim%0"]);
    assert_eq!(rv.get(".hidden").unwrap().as_deref(), Some("b"));
}

#[test]
fn wait_times_out() {
    let scratch = ScratchDir::new();
    common::wait_times_out(&open(&scratch));
}

#[test]
fn wait_sees_a_put_from_another_handle() {
    let scratch = ScratchDir::new();
    common::wait_sees_concurrent_put(&open(&scratch), open(&scratch));
}

#[test]
fn bad_keys_and_values_are_rejected() {
    let scratch = ScratchDir::new();
    common::bad_keys_and_values_are_rejected(&open(&scratch));
}

#[test]
fn temporary_files_are_never_read_as_keys() {
    let scratch = ScratchDir::new();
    let rv = open(&scratch);
    std::fs::write(scratch.path().join(".tmp.123.0.0.k"), "partial").unwrap();
    std::fs::write(scratch.path().join(".tmp.k"), "partial").unwrap();
    assert_eq!(rv.get("k").unwrap(), None);
    assert_eq!(rv.get(".tmp.k").unwrap(), None);
    assert_eq!(rv.wait(".tmp.k", Duration::from_millis(20)).unwrap(), None);
    rv.put(".tmp.k", "real").unwrap();
    assert_eq!(rv.get(".tmp.k").unwrap().as_deref(), Some("real"));
    assert_eq!(
        std::fs::read_to_string(scratch.path().join(".tmp.k")).unwrap(),
        "partial"
    );
}

#[test]
fn a_file_that_is_not_a_value_is_reported() {
    let scratch = ScratchDir::new();
    let rv = open(&scratch);
    std::fs::write(scratch.path().join("bad"), b"\xff\xfe").unwrap();
    std::fs::write(scratch.path().join("lines"), "a\nb").unwrap();
    for key in ["bad", "lines"] {
        let message = rv.get(key).unwrap_err().to_string();
        assert!(
            message.contains(key) && message.contains(&rv.describe()),
            "{message}"
        );
    }
}

#[test]
fn empty_spec_is_refused() {
    let error = Rendezvous::open("").unwrap_err();
    assert!(error.to_string().contains("empty"), "{error}");
}

#[test]
fn a_keyed_directory_is_private_and_forged_entries_read_as_absent() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = ScratchDir::new();
    let dir = scratch.path().join("run");
    let key = |b| {
        Some(std::sync::Arc::new(
            tether_auth::Key::new(&[b; 32], "t").unwrap(),
        ))
    };
    let rv = Rendezvous::open(dir.to_str().unwrap())
        .unwrap()
        .with_key(key(1));
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    rv.put("size/a", "2").unwrap();
    assert_eq!(mode(&dir.join("size%a")), 0o600);
    assert_eq!(rv.get("size/a").unwrap().as_deref(), Some("2"));
    // Written without the key: absent, and a wait for it times out ...
    std::fs::write(dir.join("size%b"), "3").unwrap();
    assert_eq!(rv.get("size/b").unwrap(), None);
    assert_eq!(rv.wait("size/b", Duration::from_millis(200)).unwrap(), None);
    // ... until the genuine entry replaces it.
    let writer = Rendezvous::open(dir.to_str().unwrap())
        .unwrap()
        .with_key(key(1));
    let waiter = std::thread::spawn(move || rv.wait("size/b", Duration::from_secs(10)).unwrap());
    std::thread::sleep(Duration::from_millis(100));
    writer.put("size/b", "4").unwrap();
    assert_eq!(waiter.join().unwrap().as_deref(), Some("4"));
}

//! Loading failures and peer failure, with child processes (the test
//! binary re-run in a child mode chosen by `TETHER_UCX_TEST_CHILD`).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use tether_ucx::{Context, ContextOptions, ErrorMode, Event, SendMode, Ucp, Worker};

const CHILD: &str = "TETHER_UCX_TEST_CHILD";

fn child_mode() -> Option<String> {
    std::env::var(CHILD).ok()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

fn run_child(test: &str, env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", test, "--nocapture", "--test-threads=1"]);
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

#[test]
fn missing_library_is_unavailable() {
    let e = Ucp::load_from("libucp.so.99").expect_err("libucp.so.99 loaded?");
    assert!(
        e.reason.starts_with("cannot load libucp.so.99: "),
        "reason: {}",
        e.reason
    );
    assert!(e.reason.contains("No such file"), "reason: {}", e.reason);
    assert!(e.to_string().starts_with("ucx unavailable: "));
    let e = Ucp::load_from("/nonexistent/dir/libucp.so.0").unwrap_err();
    assert!(e
        .reason
        .starts_with("cannot load /nonexistent/dir/libucp.so.0: "));
}

#[test]
fn library_without_ucp_is_unavailable() {
    let e = Ucp::load_from("libc.so.6").expect_err("libc is not UCX");
    assert_eq!(e.reason, "libc.so.6 has no symbol ucp_get_version");
}

/// Child half of `env_override_is_honoured`.
#[test]
fn child_env_override() {
    if child_mode().as_deref() != Some("env") {
        return;
    }
    let e = Ucp::load().expect_err("TETHER_UCX_LIB=libucp.so.99 must fail");
    assert!(
        e.reason.starts_with("cannot load libucp.so.99: "),
        "{}",
        e.reason
    );
    // A second call answers from the cache, same reason.
    assert_eq!(Ucp::load().unwrap_err(), e);
    println!("CHILD-OK {e}");
}

#[test]
fn env_override_is_honoured() {
    let out = run_child(
        "child_env_override",
        &[(CHILD, "env"), ("TETHER_UCX_LIB", "libucp.so.99")],
    )
    .output()
    .expect("spawn child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("CHILD-OK ucx unavailable: cannot load libucp.so.99"),
        "{stdout}"
    );
}

fn peer_options(tls: &str) -> ContextOptions {
    let mut o = options(tls);
    if tls == "sm" {
        // What UCX_POSIX_ERROR_HANDLING=y UCX_SYSV_ERROR_HANDLING=y do in
        // the environment; through ucp_config_modify the key is the shared
        // mm table's (MM_), "POSIX_ERROR_HANDLING" is refused as invalid.
        for (k, v) in [("MM_ERROR_HANDLING", "y"), ("KEEPALIVE_INTERVAL", "1s")] {
            o.config.push((k.to_owned(), v.to_owned()));
        }
    }
    o
}

/// Child half of the peer-failure tests: connect to the parent, say
/// hello, then progress until killed (or 30 s, to never outlive a test).
#[test]
fn child_peer() {
    let Some(tls) = child_mode().and_then(|m| m.strip_prefix("peer-").map(str::to_owned)) else {
        return;
    };
    let ucp = Ucp::load().expect("load");
    let ctx = Context::new(ucp, &peer_options(&tls)).expect("context");
    let w = Worker::new(&ctx, &[AM_ID]).expect("worker");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let ep = w
        .connect(&unhex(line.trim()), ErrorMode::Peer)
        .expect("connect");
    println!("ADDR {}", hex(&w.address().unwrap()));
    std::io::stdout().flush().unwrap();
    ep.am_send(AM_ID, b"hello".to_vec(), Vec::new(), SendMode::Auto)
        .expect("send");
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end {
        w.progress();
        while w.next_event().is_some() {}
    }
}

/// Kills the child (`kill -9`) once both directions work and waits up to
/// `limit` for the endpoint to fail, sending an 8 B AM every 10 ms when
/// `keep_sending`, else only progressing.
fn peer_failure_is_reported(tls: &str, limit: Duration, keep_sending: bool) {
    let _g = serial();
    let Some(ucp) = ucp() else { return };
    let ctx = Context::new(ucp, &peer_options(tls)).expect("context");
    let w = Worker::new(&ctx, &[AM_ID]).expect("worker");
    let mut child = run_child("child_peer", &[(CHILD, &format!("peer-{tls}"))])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child");
    writeln!(
        child.stdin.as_mut().unwrap(),
        "{}",
        hex(&w.address().unwrap())
    )
    .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // libtest prints "test child_peer ... " without a newline first.
            if let Some(i) = line.find("ADDR ") {
                let _ = tx.send(line[i + 5..].trim().to_owned());
            }
        }
    });
    let Ok(addr) = rx.recv_timeout(Duration::from_secs(20)) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("child gave no address in 20 s");
    };
    let ep = w.connect(&unhex(&addr), ErrorMode::Peer).expect("connect");
    // The child's hello proves the connection works both ways.
    let end = Instant::now() + Duration::from_secs(20);
    let mut hello = false;
    while !hello && Instant::now() < end {
        w.progress();
        while let Some(ev) = w.next_event() {
            hello |= matches!(ev, Event::Am(ref m) if m.header == b"hello");
        }
    }
    ep.am_send(AM_ID, b"x".to_vec(), Vec::new(), SendMode::Auto)
        .ok();
    for _ in 0..100 {
        w.progress();
    }
    // SAFETY-free kill -9: the child gets no chance to close anything.
    child.kill().expect("kill child");
    child.wait().expect("reap child");
    assert!(hello, "no hello from the child");
    let killed = Instant::now();
    let mut detected = None;
    while detected.is_none() && killed.elapsed() < limit {
        if keep_sending
            && ep
                .am_send(AM_ID, b"ping".to_vec(), vec![0; 8], SendMode::Auto)
                .is_err()
            && ep.failure().is_some()
        {
            detected = ep.failure();
        }
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(10) {
            w.progress();
            while let Some(ev) = w.next_event() {
                if let Event::EndpointFailed { ep: id, error } = ev {
                    assert_eq!(id, ep.id());
                    detected = Some(error);
                }
            }
        }
    }
    let error = detected.unwrap_or_else(|| panic!("dead peer not reported within {limit:?}"));
    eprintln!(
        "{tls}: peer failure reported {:.3} s after kill: {error}",
        killed.elapsed().as_secs_f64()
    );
    assert!(ep.failure().is_some());
}

#[test]
fn peer_failure_tcp() {
    peer_failure_is_reported("tcp", Duration::from_secs(10), true);
}

/// Shared memory needs the mm transports' error handling switched on
/// (`UCX_{POSIX,SYSV}_ERROR_HANDLING=y`, here `MM_ERROR_HANDLING=y` through
/// ucp_config_modify) and is detected by keepalive (1 s here). Keepalive
/// checks idle lanes only: while this side kept sending an 8 B AM every
/// 10 ms the dead peer was not reported within 30 s (sends "succeed"), so
/// this test only progresses after the kill.
#[test]
fn peer_failure_sm_with_keepalive() {
    peer_failure_is_reported("sm", Duration::from_secs(15), false);
}

/// Builds a fake libucp with only `ucp_get_version` returning `version`;
/// `None` (with a message) without a C compiler.
fn fake_ucp(name: &str, version: (u32, u32, u32)) -> Option<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("tether-ucx-fake");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join(format!("{name}.c"));
    let lib = dir.join(format!("{name}.so"));
    std::fs::write(
        &src,
        format!(
            "void ucp_get_version(unsigned *a, unsigned *b, unsigned *c)\n\
             {{ *a = {}; *b = {}; *c = {}; }}\n",
            version.0, version.1, version.2
        ),
    )
    .unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    match Command::new(&cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
    {
        Ok(s) if s.success() => Some(lib),
        _ => {
            eprintln!("skipping: cannot build a fake libucp with {cc}");
            None
        }
    }
}

#[test]
fn too_old_ucx_is_unavailable() {
    let Some(lib) = fake_ucp("ucp_1_9", (1, 9, 0)) else {
        return;
    };
    let path = lib.to_str().unwrap();
    let e = Ucp::load_from(path).unwrap_err();
    assert_eq!(
        e.reason,
        format!("UCX 1.9.0 ({path}) is older than 1.10 (needs ucp_am_send_nbx)")
    );
}

#[test]
fn incomplete_ucx_is_unavailable() {
    let Some(lib) = fake_ucp("ucp_1_13_empty", (1, 13, 1)) else {
        return;
    };
    let path = lib.to_str().unwrap();
    let e = Ucp::load_from(path).unwrap_err();
    assert_eq!(
        e.reason,
        format!("{path} has no symbol ucp_get_version_string")
    );
}

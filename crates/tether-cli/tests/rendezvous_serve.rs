//! `tether rendezvous serve` prints a url that clients can use.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use tether_rendezvous::Rendezvous;

/// Kills the server when the test ends, passing or not.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serve_prints_a_usable_url() {
    let mut server = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_tether"))
            .args(["rendezvous", "serve", "--bind", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = server.0.stdout.take().unwrap();
    let (sender, first_line) = mpsc::channel();
    thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = sender.send(line);
    });
    let url = first_line
        .recv_timeout(Duration::from_secs(20))
        .expect("the server printed no url");
    let url = url.trim_end();
    assert!(url.starts_with("tcp://127.0.0.1:"), "{url:?}");

    let writer = Rendezvous::open(url).unwrap();
    let reader = Rendezvous::open(url).unwrap();
    writer.put("proc/sim/0", "127.0.0.1:5000").unwrap();
    assert_eq!(
        reader
            .wait("proc/sim/0", Duration::from_secs(10))
            .unwrap()
            .as_deref(),
        Some("127.0.0.1:5000")
    );
}

#[test]
fn serve_on_a_bad_address_fails() {
    let output = Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(["rendezvous", "serve", "--bind", "not-an-address"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not-an-address"), "{stderr}");
}

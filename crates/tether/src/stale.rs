//! Telling a rendezvous entry of this run from one that an earlier or
//! crashed run left behind. A rendezvous directory or server is often
//! reused (the README's `TETHER_RENDEZVOUS=/lustre/me/run1`), and a size
//! entry believed from a run that is over makes two programs join
//! different universes, or salts the run's name with a nonce of the
//! past: the run then fails half a minute later with an error that says
//! nothing of the cause. An entry names the process that wrote it, so a
//! joining process can check that this process still runs.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long a check of a publisher on another host waits for its
/// listener: a refusal comes back at once; silence proves nothing.
const REMOTE_CHECK: Duration = Duration::from_millis(300);

/// The process that wrote an entry, as the entry names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publisher {
    /// Its host identity ([`crate::host::host_id`]).
    pub host: String,
    pub pid: u32,
    /// Its start time, which tells it from a later process with its pid.
    pub start: Option<u64>,
    /// Its TCP listener, checked when it is on another host.
    pub tcp: Option<String>,
}

impl Publisher {
    /// This process, on `host`, listening on `tcp`.
    pub fn this_process(host: &str, tcp: &str) -> Publisher {
        let pid = std::process::id();
        Publisher {
            host: host.to_string(),
            pid,
            start: crate::host::start_time(pid),
            tcp: Some(tcp.to_string()),
        }
    }

    /// Why the publisher is known to be gone, or `None` while it may
    /// still run. On this host (`my_host`) its pid must run with its start
    /// time. Elsewhere only a refused connection to its listener counts:
    /// a host that does not answer in time may just be behind a firewall
    /// (a run over files alone), and a live publisher taken for gone
    /// would make every process wait for an entry that never changes.
    pub fn gone(&self, my_host: &str) -> Option<String> {
        if self.host == my_host {
            let alive = match self.start {
                Some(start) => crate::host::is_alive(self.pid, start),
                None => crate::host::start_time(self.pid).is_some(),
            };
            return (!alive).then(|| format!("pid {} on this host has ended", self.pid));
        }
        let address: SocketAddr = self.tcp.as_deref()?.parse().ok()?;
        match TcpStream::connect_timeout(&address, REMOTE_CHECK) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Some(format!(
                "pid {} on {} no longer listens on {address}",
                self.pid, self.host
            )),
            _ => None,
        }
    }
}

/// A 64-bit FNV-1a hash of `bytes`: run ids and run tags in entries.
pub fn fingerprint(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |id, byte| {
        (id ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The `run=<16 hex digits>` field of an entry, if it has one.
pub fn run_field(text: &str) -> Option<u64> {
    text.split_whitespace()
        .filter_map(|f| f.strip_prefix("run="))
        .find_map(|v| u64::from_str_radix(v, 16).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_not_gone_and_an_ended_one_is() {
        let me = Publisher::this_process("h", "127.0.0.1:1");
        assert_eq!(me.gone("h"), None);
        let ended = Publisher {
            start: me.start.map(|s| s + 1),
            ..me.clone()
        };
        assert!(ended.gone("h").unwrap().contains("has ended"));
    }

    #[test]
    fn elsewhere_only_a_refusal_is_gone() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let live = listener.local_addr().unwrap().to_string();
        let remote = |tcp: Option<&str>| Publisher {
            host: "elsewhere".into(),
            pid: 1,
            start: Some(1),
            tcp: tcp.map(String::from),
        };
        assert_eq!(remote(Some(&live)).gone("here"), None);
        drop(listener);
        // The port just closed: nothing listens there any more.
        assert!(remote(Some(&live)).gone("here").is_some());
        assert_eq!(remote(None).gone("here"), None, "nothing to check");
    }

    #[test]
    fn run_fields_are_read_among_others() {
        assert_eq!(run_field("tcp=x run=00000000000000ff pid=1"), Some(255));
        assert_eq!(run_field("tcp=x pid=1"), None);
        assert_ne!(fingerprint(*b"a"), fingerprint(*b"b"));
    }
}

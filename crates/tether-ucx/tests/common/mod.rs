//! Helpers shared by the behaviour tests: a pair of workers in one thread,
//! progressed alternately, and bounded waiting.

#![allow(dead_code)]

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tether_ucx::{Context, ContextOptions, Endpoint, ErrorMode, Event, Ucp, Worker};

/// UCX contexts of different tests are kept apart in time: each test holds
/// this while it uses UCX (the tests of one binary run on several threads).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The library, or `None` (with a message) where UCX is not installed.
pub fn ucp() -> Option<&'static Ucp> {
    match Ucp::load_from(tether_ucx::DEFAULT_LIB) {
        Ok(u) => Some(u),
        Err(e) => {
            eprintln!("skipping: {e}");
            None
        }
    }
}

/// Context options for a UCX_TLS value: tcp is pinned to loopback.
pub fn options(tls: &str) -> ContextOptions {
    let mut config = vec![("TLS".to_owned(), tls.to_owned())];
    if tls == "tcp" {
        config.push(("NET_DEVICES".to_owned(), "lo".to_owned()));
    }
    ContextOptions {
        config,
        ..Default::default()
    }
}

pub const AM_ID: u16 = 7;

/// Two workers in this thread, each with an endpoint to the other.
pub struct Pair {
    pub a: Worker,
    pub b: Worker,
    pub a_to_b: Endpoint,
    pub b_to_a: Endpoint,
}

pub fn pair(ucp: &'static Ucp, tls: &str, mode: ErrorMode) -> Pair {
    let opts = options(tls);
    let ca = Context::new(ucp, &opts).expect("context a");
    let cb = Context::new(ucp, &opts).expect("context b");
    let a = Worker::new(&ca, &[AM_ID]).expect("worker a");
    let b = Worker::new(&cb, &[AM_ID]).expect("worker b");
    let addr_a = a.address().expect("address a");
    let addr_b = b.address().expect("address b");
    let a_to_b = a.connect(&addr_b, mode).expect("connect a->b");
    let b_to_a = b.connect(&addr_a, mode).expect("connect b->a");
    Pair {
        a,
        b,
        a_to_b,
        b_to_a,
    }
}

/// Progresses both workers until `pick` accepts an event of `which`
/// (0 = a, 1 = b) or 20 s pass (then panics: no hangs).
pub fn pump<T>(p: &Pair, which: usize, mut pick: impl FnMut(Event) -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        p.a.progress();
        p.b.progress();
        let w = if which == 0 { &p.a } else { &p.b };
        while let Some(ev) = w.next_event() {
            if let Some(t) = pick(ev) {
                return t;
            }
        }
        assert!(Instant::now() < deadline, "no expected event within 20 s");
    }
}

//! The process's book of peers' published addresses: one cache, read by
//! the router (shared memory's attach) and by TCP (its connects), and
//! filled by a lookup thread, so that no rendezvous lookup runs inside
//! progress.
//!
//! A lookup may be a round trip to `tether rendezvous serve` (or a read
//! on a parallel file system): done by the caller, every progress round
//! that retries a peer not there yet would wait for it. Here a caller
//! that finds no address asks for one and is answered `NotYet` at once;
//! it asks again on its retry schedule (`transport/retry.rs`), by which
//! time the thread has usually looked. A found address is kept for the
//! run: a peer publishes once, at start-up. An entry that is absent or
//! malformed is not kept, and is looked up again when asked again; so is
//! one tagged with another run's tag ([`Universe::run_tag`]) whose
//! process is gone: an earlier or crashed run on the same rendezvous left
//! it, and this run's peer has not replaced it yet. An entry without a
//! tag is a peer's that has not finished joining (or an older version's),
//! and one of another run whose process still runs is a process of
//! another universe: both are taken (the handshake refuses the latter,
//! naming the rendezvous).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use tether_rendezvous::Rendezvous;

use crate::stale::Publisher;
use crate::universe::{addr_key, PeerAddress, Universe};

/// Why a peer's address is not known (yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoAddress {
    /// Not there yet, not looked up yet, or the rendezvous could not be
    /// read: ask again later. The text says why, for an error if it never
    /// comes.
    NotYet(String),
    /// Its entry is there but is not an address.
    Malformed(String),
}

#[derive(Default)]
struct Book {
    found: HashMap<u32, PeerAddress>,
    /// Why the last lookup of a peer found no address.
    missing: HashMap<u32, NoAddress>,
    /// Peers to look up.
    asked: HashSet<u32>,
    stop: bool,
}

struct Shared {
    book: Mutex<Book>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Book> {
        // A panic while the lock was held leaves a book that is still
        // consistent (each change is one insert or remove).
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The address book; cheap to clone (one book per process).
#[derive(Clone)]
pub struct Addresses {
    shared: Arc<Shared>,
    /// Joined when the last clone goes.
    _thread: Arc<LookupThread>,
}

struct LookupThread {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

impl Drop for LookupThread {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl Addresses {
    /// A book for the peers of `universe`, looked up in `rendezvous`.
    pub fn new(universe: Arc<Universe>, rendezvous: Arc<Rendezvous>) -> Addresses {
        let shared = Arc::new(Shared {
            book: Mutex::new(Book::default()),
            wake: Condvar::new(),
        });
        let worker = shared.clone();
        let handle = std::thread::Builder::new()
            .name("tether-addresses".into())
            .spawn(move || look_up(&worker, &universe, &rendezvous))
            .ok();
        if handle.is_none() {
            tracing::warn!("cannot start the address lookup thread: peers cannot be found");
        }
        Addresses {
            _thread: Arc::new(LookupThread {
                shared: shared.clone(),
                handle,
            }),
            shared,
        }
    }

    /// `peer`'s address if it is known; otherwise asks the thread to look
    /// it up and says why it is not known yet. Never waits for the
    /// rendezvous.
    pub fn get(&self, peer: u32) -> Result<PeerAddress, NoAddress> {
        let mut book = self.shared.lock();
        if let Some(address) = book.found.get(&peer) {
            return Ok(address.clone());
        }
        let why = book.missing.get(&peer).cloned().unwrap_or_else(|| {
            NoAddress::NotYet("its address never appeared in the rendezvous".into())
        });
        if book.asked.insert(peer) {
            self.shared.wake.notify_one();
        }
        Err(why)
    }
}

/// The thread: looks up the peers asked for, one at a time, until the
/// book is dropped.
fn look_up(shared: &Shared, universe: &Universe, rendezvous: &Rendezvous) {
    loop {
        let peers: Vec<u32> = {
            let mut book = shared.lock();
            while book.asked.is_empty() && !book.stop {
                book = shared.wake.wait(book).unwrap_or_else(|e| e.into_inner());
            }
            if book.stop {
                return;
            }
            book.asked.drain().collect()
        };
        for peer in peers {
            let Some((program, rank)) = universe.locate(peer) else {
                continue;
            };
            let key = addr_key(&universe.programs[program].name, rank);
            let result = match read_address(rendezvous.get(&key), universe) {
                Err(NoAddress::NotYet(_)) if rendezvous.unsealed(&key) => Err(NoAddress::NotYet(
                    "its rendezvous entry was not written with this process's key (give every program the same TETHER_KEY_FILE)".into(),
                )),
                other => other,
            };
            let mut book = shared.lock();
            match result {
                Ok(address) => {
                    book.missing.remove(&peer);
                    book.found.insert(peer, address);
                }
                Err(why) => {
                    book.missing.insert(peer, why);
                }
            }
        }
    }
}

/// The address a rendezvous lookup found, unless another run of
/// `universe`'s rendezvous left it.
fn read_address(
    looked_up: Result<Option<String>, tether_rendezvous::RendezvousError>,
    universe: &Universe,
) -> Result<PeerAddress, NoAddress> {
    match looked_up {
        Ok(Some(text)) => {
            let address = PeerAddress::decode(&text).ok_or_else(|| {
                NoAddress::Malformed(format!("its rendezvous entry {text:?} is malformed"))
            })?;
            let other_run = crate::stale::run_field(&text).filter(|t| *t != universe.run_tag());
            let writer = || Publisher {
                host: address.host.clone(),
                pid: address.pid,
                start: address.start,
                tcp: Some(address.tcp.clone()),
            };
            match other_run.and_then(|_| writer().gone(&universe.my_host)) {
                Some(why) => Err(NoAddress::NotYet(format!(
                    "the rendezvous holds only an address another run left ({why})"
                ))),
                None => Ok(address),
            }
        }
        Ok(None) => Err(NoAddress::NotYet(
            "its address never appeared in the rendezvous".into(),
        )),
        Err(e) => Err(NoAddress::NotYet(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::identity::Identity;

    fn universe() -> Arc<Universe> {
        let me = Identity {
            program: "sim".into(),
            rank: 0,
            size: 3,
        };
        let mut universe = Universe::new(&[("sim".into(), 3)], &me).unwrap();
        universe.my_host = "h".into();
        Arc::new(universe)
    }

    fn address(pid: u32) -> PeerAddress {
        PeerAddress {
            tcp: "127.0.0.1:1".into(),
            host: "h".into(),
            pid,
            start: None,
            shm: None,
            beat: None,
            rails: Vec::new(),
            ucx: None,
        }
    }

    /// Asks until the answer is not the first "not yet" (the thread
    /// looked), within a bound so that a broken thread fails the test
    /// instead of hanging it.
    fn settled(book: &Addresses, peer: u32) -> Result<PeerAddress, NoAddress> {
        let never = NoAddress::NotYet("its address never appeared in the rendezvous".into());
        for _ in 0..2000 {
            match book.get(peer) {
                Err(why) if why == never => std::thread::sleep(Duration::from_millis(1)),
                other => return other,
            }
        }
        book.get(peer)
    }

    #[test]
    fn an_address_is_looked_up_by_the_thread_until_found_then_kept() {
        let dir = std::env::temp_dir().join(format!("tether-addresses-{}", std::process::id()));
        let rendezvous = Arc::new(Rendezvous::open(&dir.to_string_lossy()).unwrap());
        let book = Addresses::new(universe(), rendezvous.clone());
        assert_eq!(
            book.get(1),
            Err(NoAddress::NotYet(
                "its address never appeared in the rendezvous".into()
            )),
            "the first answer never waits"
        );
        rendezvous.put(&addr_key("sim", 1), "garbage").unwrap();
        assert!(matches!(settled(&book, 1), Err(NoAddress::Malformed(_))));
        rendezvous
            .put(&addr_key("sim", 1), &address(11).encode())
            .unwrap();
        let mut found = book.get(1);
        for _ in 0..2000 {
            if found.is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
            found = book.get(1);
        }
        assert_eq!(found, Ok(address(11)));
        // Kept from now on: the entry is not read again.
        rendezvous
            .put(&addr_key("sim", 1), &address(12).encode())
            .unwrap();
        assert_eq!(book.clone().get(1), Ok(address(11)));
        drop(book);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A pid no process has (above the kernel's largest, 2^22).
    const GONE: u32 = 1 << 30;

    #[test]
    fn an_address_another_run_tagged_is_not_taken_until_replaced() {
        let dir = std::env::temp_dir().join(format!("tether-addr-run-{}", std::process::id()));
        let rendezvous = Arc::new(Rendezvous::open(&dir.to_string_lossy()).unwrap());
        let universe = universe();
        let ours = universe.run_tag();
        let tagged = |pid: u32, tag: u64| format!("{} run={tag:016x}", address(pid).encode());
        rendezvous
            .put(&addr_key("sim", 1), &tagged(GONE, ours ^ 1))
            .unwrap();
        let book = Addresses::new(universe, rendezvous.clone());
        match settled(&book, 1) {
            Err(NoAddress::NotYet(why)) => {
                assert!(
                    why.contains(&format!(
                        "another run left (pid {GONE} on this host has ended)"
                    )),
                    "{why}"
                )
            }
            other => panic!("an earlier run's address was taken: {other:?}"),
        }
        rendezvous
            .put(&addr_key("sim", 1), &tagged(12, ours))
            .unwrap();
        let mut found = book.get(1);
        for _ in 0..2000 {
            if found.is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
            found = book.get(1);
        }
        assert_eq!(found, Ok(address(12)));
        // Another run's entry whose process still runs (this test) is a
        // process of another universe: taken, for the handshake to refuse.
        let live = std::process::id();
        rendezvous
            .put(&addr_key("sim", 2), &tagged(live, ours ^ 1))
            .unwrap();
        let mut found = book.get(2);
        for _ in 0..2000 {
            if found.is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
            found = book.get(2);
        }
        assert_eq!(found, Ok(address(live)));
        drop(book);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

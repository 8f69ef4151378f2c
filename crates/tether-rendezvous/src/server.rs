//! The rendezvous server: keys in memory, served over [`crate::protocol`]
//! with one thread per connection (a run has at most a few thousand
//! processes, and most of them hold one connection).

use std::collections::HashMap;
use std::io::{self, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::error::RendezvousError;
use crate::protocol::{read_line, Line, Reply, Request};
use crate::seal;
use crate::store::{Store, MAX_STORE_BYTES};
use tether_auth::Key;

/// A reply that the client does not read within this time ends its
/// connection, so a stuck client cannot hold a server thread.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECTION_STACK: usize = 256 * 1024;
/// Pause after an accept error that is not about one connection (such as
/// running out of file descriptors), to let connections close meanwhile.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

struct Shared {
    store: Store,
    /// The run's key: entries must be sealed with it, deletions carry
    /// its token.
    key: Option<Arc<Key>>,
    /// Open connections, so that stopping can close them; `None` once stopped.
    connections: Mutex<Option<HashMap<u64, TcpStream>>>,
    next_connection: AtomicU64,
}

impl Shared {
    fn connections(&self) -> MutexGuard<'_, Option<HashMap<u64, TcpStream>>> {
        self.connections
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn stopped(&self) -> bool {
        self.connections().is_none()
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Shared")
    }
}

/// A bound rendezvous server that does not serve yet.
pub struct Server {
    listener: TcpListener,
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

impl Server {
    /// Binds to `addr` (`host:port`; port 0 picks a free port).
    ///
    /// Errors: [`RendezvousError::Setup`] when the address cannot be
    /// resolved or bound.
    pub fn bind(addr: &str) -> Result<Server, RendezvousError> {
        let setup = |source| RendezvousError::Setup {
            rendezvous: format!("tcp://{addr}"),
            action: "bind the server",
            source,
        };
        let listener = TcpListener::bind(addr).map_err(setup)?;
        let addr = listener.local_addr().map_err(setup)?;
        let shared = Arc::new(Shared {
            store: Store::default(),
            key: None,
            connections: Mutex::new(Some(HashMap::new())),
            next_connection: AtomicU64::new(0),
        });
        Ok(Server {
            listener,
            addr,
            shared,
        })
    }

    /// The bound address, with the port chosen.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The same server, refusing entries not sealed with `key` and
    /// deletions without its token ([`crate::seal`]): nobody without the
    /// run's key can write or remove an entry, or grow the server.
    pub fn with_key(mut self, key: Option<Arc<Key>>) -> Server {
        Arc::get_mut(&mut self.shared)
            .expect("the server is not serving yet")
            .key = key;
        self
    }

    /// `tcp://host:port` for [`crate::Rendezvous::open`] and
    /// `TETHER_RENDEZVOUS`.
    pub fn url(&self) -> String {
        url_of(self.addr)
    }

    /// Serves on the calling thread until the process ends. Errors of single
    /// connections are logged (tracing) and never end the server.
    pub fn serve_forever(self) -> ! {
        loop {
            self.accept_until_stopped();
        }
    }

    /// Serves on a background thread until the handle is stopped or dropped.
    ///
    /// Errors: [`RendezvousError::Setup`] when the thread cannot be started.
    pub fn spawn(self) -> Result<ServerHandle, RendezvousError> {
        let addr = self.addr;
        let shared = Arc::clone(&self.shared);
        let thread = thread::Builder::new()
            .name("rendezvous-server".into())
            .spawn(move || self.accept_until_stopped())
            .map_err(|source| RendezvousError::Setup {
                rendezvous: url_of(addr),
                action: "start the server thread",
                source,
            })?;
        Ok(ServerHandle {
            addr,
            shared,
            thread: Some(thread),
        })
    }

    fn accept_until_stopped(&self) {
        loop {
            let accepted = self.listener.accept();
            if self.shared.stopped() {
                return;
            }
            match accepted {
                Ok((stream, peer)) => self.start_connection(stream, peer),
                Err(e) if is_per_connection(&e) => {}
                Err(e) => {
                    tracing::warn!(server = %self.addr, error = %e, "accept failed");
                    thread::sleep(ACCEPT_RETRY);
                }
            }
        }
    }

    fn start_connection(&self, stream: TcpStream, peer: SocketAddr) {
        let id = self.shared.next_connection.fetch_add(1, Ordering::Relaxed);
        let registered = stream.try_clone().map(|clone| {
            self.shared
                .connections()
                .as_mut()
                .map(|open| open.insert(id, clone))
                .is_some()
        });
        match registered {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "cannot register connection");
                return;
            }
        }
        let shared = Arc::clone(&self.shared);
        let started = thread::Builder::new()
            .name("rendezvous-connection".into())
            .stack_size(CONNECTION_STACK)
            .spawn(move || {
                match serve_connection(&shared, stream) {
                    // Refused: a request outside the protocol, or one
                    // without the run's key.
                    Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                        tracing::warn!(%peer, "rendezvous request refused: {e}")
                    }
                    Err(e) => tracing::debug!(%peer, error = %e, "connection ended"),
                    Ok(()) => {}
                }
                if let Some(open) = shared.connections().as_mut() {
                    open.remove(&id);
                }
            });
        if let Err(e) = started {
            tracing::warn!(%peer, error = %e, "cannot start a connection thread");
            if let Some(open) = self.shared.connections().as_mut() {
                open.remove(&id);
            }
        }
    }
}

/// A server running on a background thread; dropping it stops the server.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl ServerHandle {
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `tcp://host:port`.
    pub fn url(&self) -> String {
        url_of(self.addr)
    }

    /// Stops accepting, closes every connection (pending `WAIT`s are
    /// answered `ERR`) and joins the accept thread. Blocks at most about a
    /// second beyond the time to close the connections.
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        if let Some(open) = self.shared.connections().take() {
            for stream in open.values() {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        }
        self.shared.store.stop();
        // The accept thread is blocked in accept(); a connection wakes it.
        // When that fails it is left to end with the process.
        if TcpStream::connect_timeout(&wake_addr(self.addr), Duration::from_secs(1)).is_ok() {
            let _ = thread.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Answers requests on `stream` until the client closes it or breaks the
/// protocol (answered `ERR`, then closed).
fn serve_connection(shared: &Shared, stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let reply = match read_line(&mut reader)? {
            Line::Closed => return Ok(()),
            Line::TooLong => Reply::Err("line too long or cut short".into()),
            Line::NotUtf8 => Reply::Err("line is not UTF-8".into()),
            Line::Text(line) => match Request::parse(&line) {
                Ok(request) => answer(shared, request),
                Err(message) => Reply::Err(message),
            },
        };
        writer.write_all(reply.encode().as_bytes())?;
        if let Reply::Err(message) = reply {
            return Err(io::Error::new(io::ErrorKind::InvalidData, message));
        }
    }
}

fn answer(shared: &Shared, request: Request<'_>) -> Reply {
    let store = &shared.store;
    match request {
        Request::Put { key, value } => match &shared.key {
            Some(run_key) if seal::unseal(run_key, key, value).is_none() => Reply::Err(format!(
                "the entry {key:?} is not sealed with this run's key; refused"
            )),
            _ => match store.put(key, value) {
                Ok(()) => Reply::Ok,
                Err(_) => Reply::Err(format!(
                    "the server holds {} MiB of entries, the most it takes; {key:?} refused",
                    MAX_STORE_BYTES >> 20
                )),
            },
        },
        Request::Get { key } => store.get(key).map_or(Reply::None, Reply::Value),
        Request::Wait { key, timeout_ms } => {
            match store.wait(key, Duration::from_millis(timeout_ms)) {
                Ok(value) => value.map_or(Reply::None, Reply::Value),
                Err(_) => Reply::Err("the server is stopping".into()),
            }
        }
        Request::Del { key, token } => match &shared.key {
            Some(run_key) if !token.is_some_and(|t| seal::check_delete_token(run_key, key, t)) => {
                Reply::Err(format!("deleting {key:?} needs this run's key; refused"))
            }
            _ => {
                store.remove(key);
                Reply::Ok
            }
        },
    }
}

fn is_per_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

fn url_of(addr: SocketAddr) -> String {
    format!("tcp://{addr}")
}

/// Where to connect to reach a listener bound to `addr`.
fn wake_addr(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

//! The rendezvous server: keys in memory, served over [`crate::protocol`]
//! by one thread that waits on every connection at once (mio): a run of
//! thousands of processes holds thousands of connections, and a thread
//! per connection would cost a stack each and a scheduler's attention.
//!
//! Each connection's requests are answered in order, one reply each; a
//! `WAIT` parks its connection (nothing more is read from it) until the
//! key is put or its timeout passes. A request the server cannot accept
//! is answered `ERR` and the connection closed once that is written.

use std::collections::{BTreeSet, HashMap};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use tether_auth::Key;

use crate::error::RendezvousError;
use crate::protocol::{Reply, Request, MAX_LINE};
use crate::seal;
use crate::store::{Store, MAX_STORE_BYTES};

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const FIRST_CONNECTION: usize = 2;
/// A client that does not read its replies for this long is dropped, so
/// that its unread bytes do not pile up in the server.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause after an accept error that is not about one connection (such as
/// running out of file descriptors), to let connections close meanwhile.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// A bound rendezvous server that does not serve yet.
pub struct Server {
    listener: TcpListener,
    addr: SocketAddr,
    key: Option<Arc<Key>>,
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
        let std_listener = std::net::TcpListener::bind(addr).map_err(setup)?;
        std_listener.set_nonblocking(true).map_err(setup)?;
        let addr = std_listener.local_addr().map_err(setup)?;
        Ok(Server {
            listener: TcpListener::from_std(std_listener),
            addr,
            key: None,
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
        self.key = key;
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
        let addr = self.addr;
        match Serving::new(self, Arc::new(AtomicBool::new(false))) {
            Ok((mut serving, _)) => loop {
                serving.run();
            },
            Err(e) => {
                eprintln!("rendezvous server {}: cannot serve: {e}", url_of(addr));
                std::process::exit(1);
            }
        }
    }

    /// Serves on a background thread until the handle is stopped or dropped.
    ///
    /// Errors: [`RendezvousError::Setup`] when the thread or its poller
    /// cannot be started.
    pub fn spawn(self) -> Result<ServerHandle, RendezvousError> {
        let addr = self.addr;
        let setup = |action, source| RendezvousError::Setup {
            rendezvous: url_of(addr),
            action,
            source,
        };
        let stopped = Arc::new(AtomicBool::new(false));
        let (mut serving, waker) =
            Serving::new(self, stopped.clone()).map_err(|e| setup("start the poller", e))?;
        let thread = thread::Builder::new()
            .name("rendezvous-server".into())
            .spawn(move || serving.run())
            .map_err(|e| setup("start the server thread", e))?;
        Ok(ServerHandle {
            addr,
            stopped,
            waker,
            thread: Some(thread),
        })
    }
}

/// A server running on a background thread; dropping it stops the server.
pub struct ServerHandle {
    addr: SocketAddr,
    stopped: Arc<AtomicBool>,
    waker: Arc<Waker>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("addr", &self.addr)
            .finish()
    }
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

    /// Stops accepting, answers pending `WAIT`s `ERR`, closes every
    /// connection and joins the server thread.
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stopped.store(true, Ordering::Release);
        if self.waker.wake().is_ok() {
            let _ = thread.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// One client connection.
struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    /// Bytes read, not yet a whole line.
    input: Vec<u8>,
    /// Replies not yet written.
    output: Vec<u8>,
    /// A `WAIT` that parks this connection: its key and deadline.
    waiting: Option<(String, Instant)>,
    /// An `ERR` was queued: close once it is written.
    closing: bool,
    /// Since when written bytes wait for the client to read them.
    stalled_since: Option<Instant>,
}

/// The serving thread's state.
struct Serving {
    poll: Poll,
    listener: TcpListener,
    addr: SocketAddr,
    key: Option<Arc<Key>>,
    store: Store,
    conns: HashMap<Token, Conn>,
    next: usize,
    stopped: Arc<AtomicBool>,
    /// Parked `WAIT`s by key, and by deadline: a `PUT` finds its waiters
    /// and the loop its next timeout without looking at every connection.
    waiters: HashMap<String, Vec<Token>>,
    deadlines: BTreeSet<(Instant, usize)>,
    /// Connections whose replies wait for the client to read them, by the
    /// time they started waiting.
    stalls: BTreeSet<(Instant, usize)>,
}

impl Serving {
    fn new(server: Server, stopped: Arc<AtomicBool>) -> io::Result<(Serving, Arc<Waker>)> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let mut listener = server.listener;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let serving = Serving {
            poll,
            listener,
            addr: server.addr,
            key: server.key,
            store: Store::default(),
            conns: HashMap::new(),
            next: FIRST_CONNECTION,
            stopped,
            waiters: HashMap::new(),
            deadlines: BTreeSet::new(),
            stalls: BTreeSet::new(),
        };
        Ok((serving, waker))
    }

    /// Serves until stopped.
    fn run(&mut self) {
        let mut events = Events::with_capacity(256);
        loop {
            let timeout = self
                .next_deadline()
                .map(|at| at.saturating_duration_since(Instant::now()));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    tracing::warn!(server = %self.addr, error = %e, "poll failed");
                    thread::sleep(ACCEPT_RETRY);
                }
                continue;
            }
            if self.stopped.load(Ordering::Acquire) {
                self.shut_down();
                return;
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept_all(),
                    WAKER => {}
                    token => self.serve(token),
                }
            }
            self.expire(Instant::now());
        }
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, peer)) => {
                    let token = Token(self.next);
                    self.next += 1;
                    let _ = stream.set_nodelay(true);
                    let registered = self.poll.registry().register(
                        &mut stream,
                        token,
                        Interest::READABLE | Interest::WRITABLE,
                    );
                    if let Err(e) = registered {
                        tracing::warn!(%peer, error = %e, "cannot register connection");
                        continue;
                    }
                    let conn = Conn {
                        stream,
                        peer,
                        input: Vec::new(),
                        output: Vec::new(),
                        waiting: None,
                        closing: false,
                        stalled_since: None,
                    };
                    self.conns.insert(token, conn);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if is_per_connection(&e) => {}
                Err(e) => {
                    tracing::warn!(server = %self.addr, error = %e, "accept failed");
                    thread::sleep(ACCEPT_RETRY);
                    return;
                }
            }
        }
    }

    /// Reads what `token`'s client sent, answers its complete requests and
    /// writes what it can.
    fn serve(&mut self, token: Token) {
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        let mut closed = false;
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match conn.stream.read(&mut chunk) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => conn.input.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::debug!(peer = %conn.peer, error = %e, "connection ended");
                    closed = true;
                    break;
                }
            }
        }
        self.answer(token);
        if closed {
            self.close(token);
            return;
        }
        self.flush(token);
    }

    /// Answers the complete requests `token` has sent, in order, until one
    /// parks it (`WAIT`) or fails it (`ERR`).
    fn answer(&mut self, token: Token) {
        loop {
            let Some(conn) = self.conns.get_mut(&token) else {
                return;
            };
            if conn.waiting.is_some() || conn.closing {
                return;
            }
            let line = match conn.input.iter().position(|&b| b == b'\n') {
                Some(end) if end < MAX_LINE => {
                    let line: Vec<u8> = conn.input.drain(..=end).collect();
                    line[..end].to_vec()
                }
                Some(_) => {
                    self.refuse(token, "line too long or cut short".into());
                    return;
                }
                None if conn.input.len() >= MAX_LINE => {
                    self.refuse(token, "line too long or cut short".into());
                    return;
                }
                None => return,
            };
            let Ok(line) = String::from_utf8(line) else {
                self.refuse(token, "line is not UTF-8".into());
                return;
            };
            let reply = match Request::parse(&line) {
                Ok(request) => self.reply(token, request),
                Err(message) => Some(Reply::Err(message)),
            };
            match reply {
                Some(Reply::Err(message)) => {
                    self.refuse(token, message);
                    return;
                }
                Some(reply) => self.send(token, &reply),
                None => {}
            }
        }
    }

    /// The reply to `request` from `token`, or `None` when it parks the
    /// connection (a `WAIT` for a key not there yet).
    fn reply(&mut self, token: Token, request: Request<'_>) -> Option<Reply> {
        match request {
            Request::Put { key, value } => Some(match &self.key {
                Some(run_key) if seal::unseal(run_key, key, value).is_none() => Reply::Err(
                    format!("the entry {key:?} is not sealed with this run's key; refused"),
                ),
                _ => match self.store.put(key, value) {
                    Ok(()) => {
                        self.wake_waiters(key, value);
                        Reply::Ok
                    }
                    Err(_) => Reply::Err(format!(
                        "the server holds {} MiB of entries, the most it takes; {key:?} refused",
                        MAX_STORE_BYTES >> 20
                    )),
                },
            }),
            Request::Get { key } => Some(self.store.get(key).map_or(Reply::None, Reply::Value)),
            Request::Wait { key, timeout_ms } => {
                if let Some(value) = self.store.get(key) {
                    return Some(Reply::Value(value));
                }
                let deadline = Instant::now() + Duration::from_millis(timeout_ms);
                if let Some(conn) = self.conns.get_mut(&token) {
                    conn.waiting = Some((key.to_owned(), deadline));
                    self.waiters.entry(key.to_owned()).or_default().push(token);
                    self.deadlines.insert((deadline, token.0));
                }
                None
            }
            Request::Del { key, token: proof } => Some(match &self.key {
                Some(run_key)
                    if !proof.is_some_and(|t| seal::check_delete_token(run_key, key, t)) =>
                {
                    Reply::Err(format!("deleting {key:?} needs this run's key; refused"))
                }
                _ => {
                    self.store.remove(key);
                    Reply::Ok
                }
            }),
        }
    }

    /// Answers the connections waiting for `key`, which now has `value`,
    /// and goes on with what they sent after their `WAIT`.
    fn wake_waiters(&mut self, key: &str, value: &str) {
        let woken = self.waiters.remove(key).unwrap_or_default();
        for token in woken {
            self.unpark(token, Reply::Value(value.to_owned()));
        }
    }

    /// Answers the `WAIT`s whose timeout passed by `now` with `NONE`.
    fn expire(&mut self, now: Instant) {
        while let Some(&(at, token)) = self.deadlines.first() {
            if at > now {
                break;
            }
            self.deadlines.pop_first();
            self.unpark(Token(token), Reply::None);
        }
        while let Some(&(since, token)) = self.stalls.first() {
            if now.saturating_duration_since(since) < WRITE_TIMEOUT {
                break;
            }
            self.stalls.pop_first();
            let token = Token(token);
            if let Some(conn) = self.conns.get_mut(&token) {
                conn.stalled_since = None;
                tracing::warn!(peer = %conn.peer, "client does not read its replies; dropped");
            }
            self.close(token);
        }
    }

    fn unpark(&mut self, token: Token, reply: Reply) {
        self.forget_wait(token);
        self.send(token, &reply);
        self.answer(token);
        self.flush(token);
    }

    /// Ends `token`'s parked `WAIT`, if any (answered, timed out, or its
    /// connection gone).
    fn forget_wait(&mut self, token: Token) {
        let Some((key, deadline)) = self.conns.get_mut(&token).and_then(|c| c.waiting.take())
        else {
            return;
        };
        self.deadlines.remove(&(deadline, token.0));
        if let Some(tokens) = self.waiters.get_mut(&key) {
            tokens.retain(|&t| t != token);
            if tokens.is_empty() {
                self.waiters.remove(&key);
            }
        }
    }

    /// The earliest deadline the loop must wake for.
    fn next_deadline(&self) -> Option<Instant> {
        let wait = self.deadlines.first().map(|&(at, _)| at);
        let stall = self.stalls.first().map(|&(since, _)| since + WRITE_TIMEOUT);
        wait.into_iter().chain(stall).min()
    }

    fn send(&mut self, token: Token, reply: &Reply) {
        if let Some(conn) = self.conns.get_mut(&token) {
            conn.output.extend_from_slice(reply.encode().as_bytes());
        }
    }

    /// Answers `ERR` and closes the connection once that is written: after
    /// a malformed line the server cannot know where the next request
    /// starts. A refusal is logged with the client's address.
    fn refuse(&mut self, token: Token, message: String) {
        if let Some(conn) = self.conns.get_mut(&token) {
            tracing::warn!(peer = %conn.peer, "rendezvous request refused: {message}");
            conn.closing = true;
        }
        self.send(token, &Reply::Err(message));
    }

    /// Writes what `token` has queued, as far as the socket takes it.
    fn flush(&mut self, token: Token) {
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        while !conn.output.is_empty() {
            match conn.stream.write(&conn.output) {
                Ok(0) => break,
                Ok(n) => {
                    conn.output.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.close(token);
                    return;
                }
            }
        }
        if conn.output.is_empty() {
            if let Some(since) = conn.stalled_since.take() {
                self.stalls.remove(&(since, token.0));
            }
            if conn.closing {
                self.close(token);
            }
        } else if conn.stalled_since.is_none() {
            let now = Instant::now();
            conn.stalled_since = Some(now);
            self.stalls.insert((now, token.0));
        }
    }

    fn close(&mut self, token: Token) {
        self.forget_wait(token);
        if let Some(mut conn) = self.conns.remove(&token) {
            if let Some(since) = conn.stalled_since {
                self.stalls.remove(&(since, token.0));
            }
            let _ = self.poll.registry().deregister(&mut conn.stream);
        }
    }

    /// Stopping: every pending `WAIT` is answered `ERR`, every connection
    /// closed.
    fn shut_down(&mut self) {
        let tokens: Vec<Token> = self.conns.keys().copied().collect();
        for token in tokens {
            let waiting = self.conns.get(&token).is_some_and(|c| c.waiting.is_some());
            if waiting {
                self.send(token, &Reply::Err("the server is stopping".into()));
                self.flush(token);
            }
            if let Some(conn) = self.conns.get(&token) {
                let _ = conn.stream.shutdown(std::net::Shutdown::Both);
            }
            self.close(token);
        }
    }
}

fn is_per_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}

fn url_of(addr: SocketAddr) -> String {
    format!("tcp://{addr}")
}

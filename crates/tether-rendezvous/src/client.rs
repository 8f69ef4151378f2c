//! The client of a [`crate::Server`], speaking [`crate::protocol`].

use std::io::{self, BufReader, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{shown_key, RendezvousError};
use crate::protocol::{read_line, Line, Reply, Request, MAX_WAIT_MS};
use crate::rules::{check_key, check_value};

/// How long to try each of the server's addresses.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a reply may take beyond the time the server may wait on purpose.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest single `WAIT`; longer waits are split so that each one's read
/// timeout stays bounded.
const WAIT_CHUNK_MS: u64 = 30_000;

const _: () = assert!(WAIT_CHUNK_MS <= MAX_WAIT_MS);

struct Connection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// A connection to a rendezvous server.
///
/// Methods take `&self`: requests from several threads are serialized on one
/// connection (a `WAIT` holds it until answered). When the server closed a
/// connection that was idle, the request is sent again once on a new one;
/// every request is safe to repeat.
pub struct TcpClient {
    url: String,
    addrs: Vec<SocketAddr>,
    connection: Mutex<Option<Connection>>,
}

impl std::fmt::Debug for TcpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpClient").field("url", &self.url).finish()
    }
}

impl TcpClient {
    /// Connects to `address` (`host:port`, the part of `tcp://host:port`
    /// after the scheme), trying each address the host name resolves to for
    /// at most 5 s.
    ///
    /// Errors: [`RendezvousError::Spec`] when the address does not resolve,
    /// [`RendezvousError::Setup`] when no address accepts the connection.
    pub fn connect(address: &str) -> Result<TcpClient, RendezvousError> {
        let url = format!("tcp://{address}");
        let addrs: Vec<SocketAddr> = match address.to_socket_addrs() {
            Ok(addrs) => addrs.collect(),
            Err(e) => {
                return Err(RendezvousError::Spec {
                    rendezvous: url,
                    reason: format!("cannot resolve the address (expected tcp://host:port): {e}"),
                })
            }
        };
        if addrs.is_empty() {
            return Err(RendezvousError::Spec {
                rendezvous: url,
                reason: "the host name has no address".into(),
            });
        }
        let client = TcpClient {
            url,
            addrs,
            connection: Mutex::new(None),
        };
        let connection = client.open_connection(None)?;
        *client.lock() = Some(connection);
        Ok(client)
    }

    /// `tcp://host:port` as given to [`TcpClient::connect`].
    pub fn describe(&self) -> String {
        self.url.clone()
    }

    /// Stores `value` under `key`, replacing any value.
    ///
    /// Blocks for one round trip (at most about 10 s plus a reconnection).
    /// Errors: invalid key or value, [`RendezvousError::Io`] when the server
    /// cannot be reached or does not answer in time,
    /// [`RendezvousError::Server`] when it refuses.
    pub fn put(&self, key: &str, value: &str) -> Result<(), RendezvousError> {
        check_key(&self.url, key)?;
        check_value(&self.url, key, value)?;
        let reply = self.call(key, &Request::Put { key, value }, Duration::ZERO)?;
        self.expect_ok(key, reply)
    }

    /// The value under `key`, or `None`; the server answers at once.
    ///
    /// Errors: as [`TcpClient::put`].
    pub fn get(&self, key: &str) -> Result<Option<String>, RendezvousError> {
        check_key(&self.url, key)?;
        let reply = self.call(key, &Request::Get { key }, Duration::ZERO)?;
        self.expect_value(key, reply)
    }

    /// Waits until `key` has a value and returns it, or `None` once
    /// `timeout` has passed. The server holds the answer until then, so the
    /// client does not poll; waits over 30 s are made of several requests.
    ///
    /// Errors: as [`TcpClient::put`].
    pub fn wait(&self, key: &str, timeout: Duration) -> Result<Option<String>, RendezvousError> {
        check_key(&self.url, key)?;
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let left = deadline.map_or(Duration::MAX, |d| {
                d.saturating_duration_since(Instant::now())
            });
            let timeout_ms = ceil_millis(left).min(WAIT_CHUNK_MS);
            let reply = self.call(
                key,
                &Request::Wait { key, timeout_ms },
                Duration::from_millis(timeout_ms),
            )?;
            let value = self.expect_value(key, reply)?;
            let expired = deadline.is_some_and(|d| Instant::now() >= d);
            if value.is_some() || expired || timeout_ms == 0 {
                return Ok(value);
            }
        }
    }

    /// Removes `key`; an absent key is not an error.
    ///
    /// Errors: as [`TcpClient::put`].
    pub fn remove(&self, key: &str, token: Option<&str>) -> Result<(), RendezvousError> {
        check_key(&self.url, key)?;
        let reply = self.call(key, &Request::Del { key, token }, Duration::ZERO)?;
        self.expect_ok(key, reply)
    }

    fn lock(&self) -> MutexGuard<'_, Option<Connection>> {
        // A panic while holding the lock leaves at worst a half-used
        // connection, which the next request replaces.
        self.connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sends `request` and reads its reply, allowing the server `patience`
    /// more than [`REPLY_TIMEOUT`]. A connection that fails is dropped; when
    /// it had been opened earlier (the server may have closed it while it
    /// was idle) the request is tried once more on a new connection.
    fn call(
        &self,
        key: &str,
        request: &Request<'_>,
        patience: Duration,
    ) -> Result<Reply, RendezvousError> {
        let line = request.encode();
        let mut guard = self.lock();
        let reused = guard.is_some();
        let mut connection = match guard.take() {
            Some(connection) => connection,
            None => self.open_connection(Some(key))?,
        };
        let result = match exchange(&mut connection, &line, patience) {
            Err(e) if reused && is_disconnect(&e) => {
                connection = self.open_connection(Some(key))?;
                exchange(&mut connection, &line, patience)
            }
            other => other,
        };
        let text = result.map_err(|e| match e.kind() {
            io::ErrorKind::InvalidData => self.corrupt(key, e.to_string()),
            _ => self.io_error("send request for", key, e),
        })?;
        let reply = Reply::parse(&text).map_err(|reason| self.corrupt(key, reason))?;
        // The server closes the connection after ERR.
        if !matches!(reply, Reply::Err(_)) {
            *guard = Some(connection);
        }
        Ok(reply)
    }

    /// Connects to the first address that accepts; `key` is the one whose
    /// request needs the connection, for the error message.
    fn open_connection(&self, key: Option<&str>) -> Result<Connection, RendezvousError> {
        let mut last_error = io::Error::other("no address to connect to");
        for addr in &self.addrs {
            match TcpStream::connect_timeout(addr, CONNECT_TIMEOUT).and_then(split) {
                Ok(connection) => return Ok(connection),
                Err(e) => last_error = e,
            }
        }
        Err(match key {
            Some(key) => self.io_error("connect for", key, last_error),
            None => RendezvousError::Setup {
                rendezvous: self.url.clone(),
                action: "connect",
                source: last_error,
            },
        })
    }

    fn expect_ok(&self, key: &str, reply: Reply) -> Result<(), RendezvousError> {
        match reply {
            Reply::Ok => Ok(()),
            other => Err(self.unexpected(key, other)),
        }
    }

    fn expect_value(&self, key: &str, reply: Reply) -> Result<Option<String>, RendezvousError> {
        match reply {
            Reply::Value(value) => Ok(Some(value)),
            Reply::None => Ok(None),
            other => Err(self.unexpected(key, other)),
        }
    }

    fn unexpected(&self, key: &str, reply: Reply) -> RendezvousError {
        match reply {
            Reply::Err(message) => RendezvousError::Server {
                rendezvous: self.url.clone(),
                key: shown_key(key),
                message,
            },
            other => self.corrupt(key, format!("unexpected reply {other:?}")),
        }
    }

    fn io_error(&self, action: &'static str, key: &str, source: io::Error) -> RendezvousError {
        RendezvousError::Io {
            rendezvous: self.url.clone(),
            key: shown_key(key),
            action,
            source,
        }
    }

    fn corrupt(&self, key: &str, reason: String) -> RendezvousError {
        RendezvousError::Corrupt {
            rendezvous: self.url.clone(),
            key: shown_key(key),
            reason,
        }
    }
}

fn split(stream: TcpStream) -> io::Result<Connection> {
    stream.set_nodelay(true)?;
    stream.set_write_timeout(Some(REPLY_TIMEOUT))?;
    Ok(Connection {
        reader: BufReader::new(stream.try_clone()?),
        writer: stream,
    })
}

fn exchange(connection: &mut Connection, line: &str, patience: Duration) -> io::Result<String> {
    connection.writer.write_all(line.as_bytes())?;
    let timeout = REPLY_TIMEOUT.saturating_add(patience);
    connection
        .reader
        .get_ref()
        .set_read_timeout(Some(timeout))?;
    match read_line(&mut connection.reader)? {
        Line::Text(text) => Ok(text),
        Line::Closed => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the server closed the connection",
        )),
        Line::TooLong => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the reply is too long or cut short",
        )),
        Line::NotUtf8 => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the reply is not UTF-8",
        )),
    }
}

/// Whether `error` means the server is gone from this connection (rather
/// than slow or refusing).
fn is_disconnect(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::NotConnected
    )
}

fn ceil_millis(duration: Duration) -> u64 {
    let millis = duration.as_nanos().div_ceil(1_000_000);
    u64::try_from(millis).unwrap_or(u64::MAX)
}

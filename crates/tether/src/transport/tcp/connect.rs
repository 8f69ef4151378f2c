//! Connecting to a peer, and time: connect attempts retried on the one
//! retry schedule until the connect deadline, and the links' deadlines.
//!
//! An outgoing handshake is bounded by the connect timeout, not the
//! handshake timeout: the peer answers only when it calls into Tether, and
//! a peer busy computing is not a failure. So a connector's link gets the
//! attempt's deadline ([`Link::connector_until`]), while an accepted
//! connection's link waits the handshake timeout (a defence against idle
//! or hostile clients).

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use mio::net::TcpStream;
use mio::{Interest, Token};
use tether_proto::link::{Link, LinkError, LinkState};

use super::conn::{Conn, ConnError};
use super::{Attempt, Entry, TcpTransport};
use crate::addresses::NoAddress;
use crate::error::{err, ErrorClass};
use crate::transport::retry::Retry;

impl TcpTransport {
    /// Starts connecting to `peer` unless a link exists or is being made.
    pub fn start_connect(&mut self, peer: u32) {
        let p = self.peers.entry(peer).or_default();
        if p.established.is_some() || p.connecting.is_some() || p.finished {
            return;
        }
        if p.attempt.is_none() {
            let now = Instant::now();
            p.attempt = Some(Attempt {
                deadline: now + self.config.connect_timeout,
                retry: Retry::starting(now),
                problem: "its address never appeared in the rendezvous".into(),
                unreachable: false,
            });
        }
        self.try_connect(peer);
    }

    fn try_connect(&mut self, peer: u32) {
        let looked_up = self.addresses.get(peer);
        let link_config = self.links.new_link();
        let p = self.peers.get_mut(&peer).expect("peer exists");
        let attempt = p.attempt.as_mut().expect("attempt exists");
        let now = Instant::now();
        let retried = attempt.retry.tries() > 0;
        attempt.retry.tried(now);
        self.connect_retries += u64::from(retried);
        let rail = self.rail;
        let address = match looked_up {
            Ok(found) => match rail
                .checked_sub(1)
                .map_or(Some(&found.tcp), |r| found.rails.get(r))
            {
                None => {
                    attempt.problem = format!("its rendezvous entry publishes no TCP rail {rail}");
                    attempt.unreachable = true;
                    return;
                }
                Some(text) => match text.parse::<SocketAddr>() {
                    Ok(a) => a,
                    Err(_) => {
                        attempt.problem = format!(
                            "its rendezvous entry gives the TCP address {text:?}, which is malformed"
                        );
                        return;
                    }
                },
            },
            Err(NoAddress::NotYet(why) | NoAddress::Malformed(why)) => {
                attempt.problem = why;
                return;
            }
        };
        let stream = match TcpStream::connect(address) {
            Ok(s) => s,
            Err(e) => {
                attempt.problem = format!("connect to {address}: {e}");
                attempt.unreachable = refuses(&e);
                return;
            }
        };
        let token = self.tokens.token(self.next_token);
        self.next_token += 1;
        let mut conn = Conn::new(stream, address);
        if let Err(e) = self.registry.register(
            &mut conn.stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            attempt.problem = format!("register {address}: {e}");
            return;
        }
        let _ = conn.stream.set_nodelay(true);
        let link = Link::connector_until(link_config, peer, now, attempt.deadline);
        attempt.problem = format!("connected to {address}, but the handshake was not answered (is the peer calling into tether?)");
        attempt.unreachable = false;
        p.connecting = Some(token);
        self.entries.insert(token, Entry::new(conn, link));
    }

    /// When the earliest timer is due (the links' deadlines, connect
    /// retries and deadlines, refused connections still closing), or
    /// `None` when none is armed: the caller waits no longer than that and
    /// then calls [`TcpTransport::handle_timers`]. An open link arms none,
    /// so its progress reads no clock.
    pub fn timer(&self) -> Option<Instant> {
        let links = self
            .entries
            .values()
            .flat_map(|e| [e.link.poll_timeout(), e.closing])
            .flatten()
            .min();
        // While a connection is being made, its link's deadline is the
        // attempt's.
        let attempts = self
            .peers
            .values()
            .filter(|p| p.connecting.is_none() && p.established.is_none())
            .filter_map(|p| p.attempt.as_ref())
            .map(|a| a.retry.next_try().min(a.deadline))
            .min();
        links.into_iter().chain(attempts).min()
    }

    /// Passes the time to every link whose deadline is due, drops refused
    /// connections that could not be told so in time, retries connects
    /// that are due, and fails peers whose connect deadline passed.
    pub fn handle_timers(&mut self) {
        let now = Instant::now();
        let due: Vec<Token> = self
            .entries
            .iter()
            .filter(|(_, e)| {
                [e.link.poll_timeout(), e.closing]
                    .into_iter()
                    .flatten()
                    .any(|at| at <= now)
            })
            .map(|(t, _)| *t)
            .collect();
        for token in due {
            self.link_timeout(token, now);
        }
        let due: Vec<u32> = self
            .peers
            .iter()
            .filter(|(_, p)| p.established.is_none() && !p.finished)
            .filter(|(_, p)| {
                p.attempt.as_ref().is_some_and(|a| {
                    now >= a.deadline || (p.connecting.is_none() && a.retry.is_due(now))
                })
            })
            .map(|(peer, _)| *peer)
            .collect();
        for peer in due {
            let p = &self.peers[&peer];
            let attempt = p.attempt.as_ref().expect("filtered");
            if now >= attempt.deadline {
                let (class, what) = if attempt.unreachable {
                    (ErrorClass::Transport, "could not be reached over tcp")
                } else {
                    (ErrorClass::Timeout, "did not accept a connection")
                };
                let message = format!(
                    "peer {} {what} within {} s (TETHER_CONNECT_TIMEOUT): {}",
                    self.universe.describe(peer),
                    self.config.connect_timeout.as_secs(),
                    attempt.problem
                );
                if let Some(token) = p.connecting {
                    self.close(token, Some(peer));
                }
                self.lose(peer, err(class, message));
            } else {
                self.try_connect(peer);
            }
        }
    }

    /// A deadline of `token`'s connection is due.
    fn link_timeout(&mut self, token: Token, now: Instant) {
        let entry = self.entries.get_mut(&token).expect("due");
        let remote = entry.conn.remote;
        let handshake = self.config.handshake_timeout.as_secs();
        if entry.closing.is_some_and(|at| at <= now) && entry.link.retired() {
            tracing::warn!("dropping the retired connection with {remote}: its goodbye could not be written within {} s", self.config.goodbye_timeout.as_secs());
            self.close(token, None);
            return;
        }
        if entry.closing.is_some_and(|at| at <= now) {
            tracing::warn!("dropping connection with {remote}: no handshake within {handshake} s");
            self.close(token, None);
            return;
        }
        let dialled = entry.link.state() == LinkState::AwaitingAck;
        match entry.link.handle_timeout(now) {
            Ok(()) => {}
            // The attempt, whose deadline this was too, reports the peer
            // with what it last saw.
            Err(LinkError::HandshakeTimeout { .. }) if dialled => self.close(token, None),
            Err(LinkError::HandshakeTimeout { .. }) => {
                tracing::warn!(
                    "dropping connection with {remote}: no handshake within {handshake} s"
                );
                self.close(token, None);
            }
            // This process is finalizing and stops waiting: the peer is
            // not reported lost, as nothing waits for it any more.
            Err(LinkError::GoodbyeTimeout { .. }) => {
                let peer = entry.link.peer();
                tracing::warn!(
                    "{} at {remote} sent no goodbye within {} s of ours (TETHER_FINALIZE_TIMEOUT); connection closed",
                    peer.map_or_else(|| "a peer".into(), |p| self.universe.describe(p)),
                    self.config.goodbye_timeout.as_secs()
                );
                if let Some(p) = peer.and_then(|p| self.peers.get_mut(&p)) {
                    p.finished = true;
                }
                self.close(token, peer);
            }
            Err(other) => self.fail_conn(token, ConnError::from(other)),
        }
    }

    /// Drops an outgoing attempt; the peer is retried (or the winning
    /// connection from the peer arrives) until the connect deadline.
    pub(super) fn retry_later(&mut self, token: Token, problem: String) {
        let Some(entry) = self.entries.remove(&token) else {
            return;
        };
        if let Some(peer) = entry.link.peer() {
            let p = self.peers.entry(peer).or_default();
            if p.connecting == Some(token) {
                p.connecting = None;
            }
            if let Some(attempt) = p.attempt.as_mut() {
                attempt.problem = problem;
            }
        }
    }
}

/// Whether a connect error says that the address cannot be reached (no
/// listener, no route), as opposed to a local or passing problem.
pub(super) fn refuses(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable
    )
}

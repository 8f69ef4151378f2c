//! Starting the children of a run and learning when they end.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::relay::{self, Target};
use super::signals;

const WAITER_STACK: usize = 64 * 1024;

/// How one child ended.
#[derive(Debug)]
pub struct Exit {
    /// The child's index in start order.
    pub index: usize,
    /// Its status, or why it could not be waited for.
    pub status: io::Result<ExitStatus>,
}

/// The started children. Each runs in its own process group (its pid), so
/// that signalling the group also reaches what it started (an `mpiexec`'s
/// ranks). A thread per child waits for it and reports its [`Exit`]; two
/// more relay its stdout and stderr.
pub struct Children {
    labels: Vec<String>,
    groups: Vec<libc::pid_t>,
    exits: Receiver<Exit>,
    exit_sender: Sender<Exit>,
    relays_done: Receiver<()>,
    relay_sender: Sender<()>,
    relays: usize,
    /// Output relays of segments without `-n` ([`Children::listen`]):
    /// how many, each one's end, the flag that ends them, and how many
    /// connections (relays) they started.
    listeners: usize,
    listeners_done: Receiver<()>,
    listener_sender: Sender<()>,
    stop_listening: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
}

impl Children {
    pub fn new() -> Children {
        let (exit_sender, exits) = mpsc::channel();
        let (relay_sender, relays_done) = mpsc::channel();
        let (listener_sender, listeners_done) = mpsc::channel();
        Children {
            labels: Vec::new(),
            groups: Vec::new(),
            exits,
            exit_sender,
            relays_done,
            relay_sender,
            relays: 0,
            listeners: 0,
            listeners_done,
            listener_sender,
            stop_listening: Arc::new(AtomicBool::new(false)),
            accepted: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Opens an output relay for program `name` (a segment without `-n`)
    /// and returns its address for `TETHER_OUTPUT_RELAY`: an abstract Unix
    /// socket on which each process of the program, once it knows its
    /// rank, connects its stdout and stderr (`tether::output`); their lines
    /// are printed as `[name:rank] line`. Connections from other users are
    /// refused.
    ///
    /// Errors: the socket or its thread cannot be set up.
    pub fn listen(&mut self, name: &str) -> io::Result<String> {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_usize(self.listeners);
        let address = format!(
            "tether-output-{}-{}-{:016x}",
            std::process::id(),
            self.listeners,
            hasher.finish()
        );
        let listener = UnixListener::bind_addr(&SocketAddr::from_abstract_name(&address)?)?;
        listener.set_nonblocking(true)?;
        let name = name.to_owned();
        let stop = self.stop_listening.clone();
        let accepted = self.accepted.clone();
        let relays = self.relay_sender.clone();
        let ended = self.listener_sender.clone();
        thread::Builder::new()
            .name(format!("listen {name}"))
            .stack_size(WAITER_STACK)
            .spawn(move || {
                accept_all(&listener, &name, &stop, &accepted, &relays);
                let _ = ended.send(());
            })?;
        self.listeners += 1;
        Ok(format!("@{address}"))
    }

    /// Starts `command` in a new process group with stdin from /dev/null
    /// (children outside the terminal's foreground group must not read it)
    /// and its output relayed with the prefix `[label] `.
    ///
    /// Errors: the command cannot be started (nothing was started then), or
    /// a thread cannot be started: the child is then counted and will be
    /// reported by [`Children::next_exit`], but its output may be lost, and
    /// the caller should end the run.
    pub fn start(&mut self, label: String, mut command: Command) -> io::Result<()> {
        command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn()?;
        let group = child.id() as libc::pid_t;
        let outputs = [
            child
                .stdout
                .take()
                .map(|out| (Box::new(out) as Box<dyn io::Read + Send>, Target::Stdout)),
            child
                .stderr
                .take()
                .map(|err| (Box::new(err) as Box<dyn io::Read + Send>, Target::Stderr)),
        ];
        let index = self.labels.len();
        let exits = self.exit_sender.clone();
        let waiter = thread::Builder::new()
            .name(format!("wait {label}"))
            .stack_size(WAITER_STACK)
            .spawn(move || {
                let status = child.wait();
                let _ = exits.send(Exit { index, status });
            });
        if let Err(e) = waiter {
            // The child was moved into the closure that failed to start
            // and is gone with it; its group can still be killed.
            signals::signal_group(group, libc::SIGKILL);
            return Err(e);
        }
        let prefix = format!("[{label}] ");
        self.labels.push(label);
        self.groups.push(group);
        for (source, target) in outputs.into_iter().flatten() {
            relay::spawn(source, prefix.clone(), target, self.relay_sender.clone())?;
            self.relays += 1;
        }
        Ok(())
    }

    /// How many children were started.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// The label of the child at `index` (`sim:1`, or `sim` for a program
    /// that starts its own ranks).
    pub fn label(&self, index: usize) -> &str {
        &self.labels[index]
    }

    /// Sends `signal` to the process group of every child, also of those
    /// that ended, since what they started may still run.
    pub fn signal_all(&self, signal: i32) {
        for &group in &self.groups {
            signals::signal_group(group, signal);
        }
    }

    /// The next child that ends, waiting at most `timeout`.
    pub fn next_exit(&self, timeout: Duration) -> Option<Exit> {
        self.exits.recv_timeout(timeout).ok()
    }

    /// Waits until every relay has printed its child's last line, at most
    /// `limit`: a process left behind by a child may hold its output open.
    /// The output relays accept the connections still queued, then stop.
    pub fn drain_output(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        self.stop_listening.store(true, Ordering::SeqCst);
        for _ in 0..self.listeners {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.listeners_done.recv_timeout(left).is_err() {
                return;
            }
        }
        let relays = self.relays + self.accepted.load(Ordering::SeqCst);
        for _ in 0..relays {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.relays_done.recv_timeout(left).is_err() {
                return;
            }
        }
    }
}

/// How long an idle output relay waits for a connection before it looks
/// at the stop flag again.
const LISTEN_TICK: libc::c_int = 50;

/// Accepts connections on `listener` (non-blocking) and starts a labelled
/// relay for each, until `stop` is set; then accepts what is still queued
/// (processes that connected before they ended) and returns.
fn accept_all(
    listener: &UnixListener,
    name: &str,
    stop: &AtomicBool,
    accepted: &AtomicUsize,
    relays: &Sender<()>,
) {
    let mut last_sweep = false;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if !same_user(&stream) || stream.set_nonblocking(false).is_err() {
                    continue;
                }
                if relay::spawn_labelled(stream, name.to_owned(), relays.clone()).is_ok() {
                    accepted.fetch_add(1, Ordering::SeqCst);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if last_sweep {
                    return;
                }
                if stop.load(Ordering::SeqCst) {
                    last_sweep = true;
                    continue;
                }
                let mut poll = libc::pollfd {
                    fd: listener.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd; a failure (EINTR) just loops.
                unsafe { libc::poll(&mut poll, 1, LISTEN_TICK) };
            }
            Err(_) if stop.load(Ordering::SeqCst) => return,
            // EMFILE and the like: wait for descriptors to free up.
            Err(_) => thread::sleep(Duration::from_millis(LISTEN_TICK as u64)),
        }
    }
}

/// Whether the process at the other end of `stream` runs as this user.
fn same_user(stream: &UnixStream) -> bool {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` describe a buffer of the size SO_PEERCRED writes.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    // SAFETY: getuid cannot fail.
    rc == 0 && cred.uid == unsafe { libc::getuid() }
}

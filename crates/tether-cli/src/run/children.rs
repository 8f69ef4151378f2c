//! Starting the children of a run and learning when they end.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
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
}

impl Children {
    pub fn new() -> Children {
        let (exit_sender, exits) = mpsc::channel();
        let (relay_sender, relays_done) = mpsc::channel();
        Children {
            labels: Vec::new(),
            groups: Vec::new(),
            exits,
            exit_sender,
            relays_done,
            relay_sender,
            relays: 0,
        }
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
    pub fn drain_output(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        for _ in 0..self.relays {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.relays_done.recv_timeout(left).is_err() {
                return;
            }
        }
    }
}

//! Watching a run until it ends, and ending it when one child fails, the
//! timeout passes, or the launcher is told to stop.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use super::children::{Children, Exit};
use super::signals;

/// Time between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(3);
/// After SIGKILL, how long to wait for children that still do not end
/// (stuck in the kernel) before the launcher leaves without them.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// How often signals and deadlines are checked while no child ends.
const TICK: Duration = Duration::from_millis(50);
/// How long the relays may take to print the last lines after every child
/// ended.
const OUTPUT_DRAIN: Duration = Duration::from_secs(2);

/// Exit code of a run ended by `--timeout`.
pub const TIMEOUT_CODE: u8 = 124;

/// `--timeout S`.
#[derive(Debug, Clone, Copy)]
pub struct Timeout {
    /// S as given, for the message.
    pub seconds: f64,
    pub after: Duration,
}

/// Waits for every child in `children` and returns the run's exit code:
/// 0 when all exited 0; otherwise the code of the failure it names (a child's
/// exit code, 128 + a signal that killed it, 124 for the timeout, 128 + a
/// signal the launcher received, or `failed_start` when the caller could not
/// start every child).
///
/// On the first failure it gathers the failures that follow within 200 ms
/// and prints one line to stderr naming the one a signal killed (else the
/// first seen) and then the others; it sends SIGTERM to every
/// child's process group (the launcher's own SIGINT/SIGTERM/SIGHUP are passed
/// on as they are), and SIGKILL 3 s later, at a second signal, or as soon as
/// every child ended (to reach what they left in their groups). Blocks until
/// every child ended, or 5 s after SIGKILL at most.
pub fn supervise(children: &Children, timeout: Option<Timeout>, failed_start: Option<u8>) -> u8 {
    let start = Instant::now();
    let deadline = timeout.and_then(|t| start.checked_add(t.after));
    let mut ending = Ending::default();
    if let Some(code) = failed_start {
        ending.begin(children, code, libc::SIGTERM);
    }
    let mut running = children.len();
    while running > 0 {
        if let Some(exit) = children.next_exit(TICK) {
            running -= 1;
            if let (None, Some(_)) = (ending.code, failure_code(&exit.status)) {
                let (first, others) = first_failure(children, exit, &mut running);
                let code = failure_code(&first.status).unwrap_or(1);
                let label = children.label(first.index);
                let mut line = format!("tether run: {label} {}", describe(&first.status));
                if !others.is_empty() {
                    let then: Vec<String> = others
                        .iter()
                        .map(|e| format!("{} {}", children.label(e.index), describe(&e.status)))
                        .collect();
                    line += &format!(" (then {})", then.join(", "));
                }
                eprintln!("{line}");
                ending.begin(children, code, libc::SIGTERM);
            }
        }
        if let Some(signal) = signals::take_pending() {
            if ending.code.is_none() {
                eprintln!("tether run: received signal {signal}, passing it on to every program");
                ending.begin(children, signal_code(signal), signal);
            } else {
                ending.kill(children);
            }
        }
        if let (None, Some(deadline), Some(timeout)) = (ending.code, deadline, timeout) {
            if Instant::now() >= deadline {
                eprintln!("tether run: timeout after {} s", timeout.seconds);
                ending.begin(children, TIMEOUT_CODE, libc::SIGTERM);
            }
        }
        if ending.kill_due() {
            ending.kill(children);
        }
        if ending.given_up() {
            eprintln!("tether run: {running} process(es) did not end after SIGKILL; leaving them");
            break;
        }
    }
    if ending.code.is_some() && ending.killed_at.is_none() {
        // Every child ended, but what they started in their groups may have
        // ignored the signal (a shell's background jobs ignore SIGINT).
        ending.kill(children);
    }
    children.drain_output(OUTPUT_DRAIN);
    ending.code.unwrap_or(0)
}

/// How long, after a first failure, the exits that follow it are
/// gathered before one is named: a process killed by a signal takes its
/// peers down with it (they fail on the lost peer within milliseconds),
/// and the order their exits are seen in is the scheduler's.
const BLAME_WINDOW: Duration = Duration::from_millis(200);

/// The failure to name among `exit` and the failures that follow it within
/// [`BLAME_WINDOW`]: one killed by a signal the launcher did not send (the
/// process that died first, whose death failed the others), else the first
/// seen; with the other failures, in the order seen.
fn first_failure(children: &Children, exit: Exit, running: &mut usize) -> (Exit, Vec<Exit>) {
    let until = Instant::now() + BLAME_WINDOW;
    let mut failures = vec![exit];
    while *running > 0 {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let Some(next) = children.next_exit(left) else {
            break;
        };
        *running -= 1;
        if failure_code(&next.status).is_some() {
            failures.push(next);
        }
    }
    blame(failures)
}

/// Of `failures` (in the order seen, at least one), the one to name —
/// the first killed by a signal, else the first — and the others. A
/// SIGPIPE is a symptom, not a cause: a C survivor that writes to the
/// socket of a peer that died gets it (unless it ignores it), so a
/// process killed by another signal is named before it.
fn blame(mut failures: Vec<Exit>) -> (Exit, Vec<Exit>) {
    let signal = |e: &Exit| e.status.as_ref().ok().and_then(|s| s.signal());
    let killed = failures
        .iter()
        .position(|e| signal(e).is_some_and(|s| s != libc::SIGPIPE))
        .or_else(|| failures.iter().position(|e| signal(e).is_some()))
        .unwrap_or(0);
    let first = failures.remove(killed);
    (first, failures)
}

/// Where the ending of a run stands.
#[derive(Default)]
struct Ending {
    /// The exit code, decided by the first failure; `None` while all is well.
    code: Option<u8>,
    kill_at: Option<Instant>,
    killed_at: Option<Instant>,
}

impl Ending {
    fn begin(&mut self, children: &Children, code: u8, signal: i32) {
        self.code = Some(code);
        self.kill_at = Some(Instant::now() + GRACE);
        children.signal_all(signal);
    }

    fn kill_due(&self) -> bool {
        self.kill_at.is_some_and(|at| Instant::now() >= at)
    }

    fn kill(&mut self, children: &Children) {
        children.signal_all(libc::SIGKILL);
        self.kill_at = None;
        self.killed_at.get_or_insert_with(Instant::now);
    }

    fn given_up(&self) -> bool {
        self.killed_at.is_some_and(|at| at.elapsed() >= KILL_WAIT)
    }
}

/// The run's exit code for a child's status, or `None` for success.
fn failure_code(status: &io::Result<ExitStatus>) -> Option<u8> {
    match status {
        Ok(status) if status.success() => None,
        Ok(status) => Some(match (status.code(), status.signal()) {
            (Some(code), _) => u8::try_from(code).unwrap_or(1),
            (None, Some(signal)) => signal_code(signal),
            (None, None) => 1,
        }),
        Err(_) => Some(1),
    }
}

fn signal_code(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(255)
}

fn describe(status: &io::Result<ExitStatus>) -> String {
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => format!("exited with code {code}"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            (None, None) => format!("ended: {status}"),
        },
        Err(e) => format!("cannot be waited for: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_messages() {
        let exited = |code: i32| Ok(ExitStatus::from_raw(code << 8));
        let killed = |signal: i32| Ok(ExitStatus::from_raw(signal));
        assert_eq!(failure_code(&exited(0)), None);
        assert_eq!(failure_code(&exited(3)), Some(3));
        assert_eq!(failure_code(&killed(9)), Some(137));
        assert_eq!(describe(&exited(3)), "exited with code 3");
        assert_eq!(describe(&killed(9)), "killed by signal 9");
        assert_eq!(failure_code(&Err(io::Error::other("x"))), Some(1));
    }

    #[test]
    fn the_process_a_signal_killed_is_named_before_those_it_took_down() {
        let exit = |index: usize, raw: i32| Exit {
            index,
            status: Ok(ExitStatus::from_raw(raw)),
        };
        // The witness's exit (code 1) was seen before the victim's (SIGKILL).
        let (named, others) = blame(vec![exit(1, 1 << 8), exit(0, 9), exit(2, 1 << 8)]);
        assert_eq!(named.index, 0);
        assert_eq!(others.iter().map(|e| e.index).collect::<Vec<_>>(), [1, 2]);
        // The survivor died of SIGPIPE writing to the killed one: a symptom.
        let (named, others) = blame(vec![exit(1, libc::SIGPIPE), exit(0, 9)]);
        assert_eq!((named.index, others[0].index), (0, 1));
        let (named, _) = blame(vec![exit(1, 1 << 8), exit(0, libc::SIGPIPE)]);
        assert_eq!(named.index, 0, "a SIGPIPE alone is still a signal");
        // No signal: the first seen.
        let (named, others) = blame(vec![exit(2, 3 << 8), exit(1, 1 << 8)]);
        assert_eq!((named.index, others.len()), (2, 1));
    }
}

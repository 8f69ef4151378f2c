//! Two-process baselines written here (raw TCP, raw shared memory): the
//! harness forks, the child plays the passive side with buffers and
//! sockets prepared before the fork, and the parent measures.
//!
//! The harness may have threads left from the launcher, so the child must
//! not take locks another thread could hold: it runs only code that does
//! not allocate (system calls, atomics, copies into prepared buffers) and
//! leaves with `_exit`, reporting failure by its exit code.

use std::time::Instant;

/// What a child's failure is called (a static string: the child must not
/// allocate, so it cannot format a message).
pub type ChildResult = Result<(), &'static str>;

/// Runs `child` in a forked process and `parent` in this one; when the
/// parent fails, the child is killed.
///
/// Errors: fork fails, `parent` fails, or the child exits non-zero or is
/// killed.
pub fn with_child<T>(
    child: impl FnOnce() -> ChildResult,
    parent: impl FnOnce() -> Result<T, String>,
) -> Result<T, String> {
    // SAFETY: the child runs only `child` (which, by the contract of this
    // module, does not allocate or lock) and then `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork failed: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        let code = match child() {
            Ok(()) => 0,
            Err(why) => {
                // SAFETY: writes a static string to stderr.
                unsafe {
                    libc::write(2, why.as_ptr().cast(), why.len());
                    libc::write(2, b"\n".as_ptr().cast(), 1);
                }
                1
            }
        };
        // SAFETY: ends the forked child without running the parent's
        // destructors or atexit handlers.
        unsafe { libc::_exit(code) };
    }
    let result = parent();
    if result.is_err() {
        // SAFETY: `pid` is our child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let mut status = 0;
    // SAFETY: reaps our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let value = result?;
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(value)
    } else {
        Err(format!(
            "the baseline's second process failed (wait status {status})"
        ))
    }
}

/// Spins on `ready` until it returns true or `deadline` passes (the clock is
/// read only every few thousand rounds).
pub fn spin_until(deadline: Instant, mut ready: impl FnMut() -> bool) -> ChildResult {
    let mut rounds: u32 = 0;
    while !ready() {
        rounds = rounds.wrapping_add(1);
        if rounds & 4095 == 0 && Instant::now() > deadline {
            return Err("baseline peer did not answer in time");
        }
        std::hint::spin_loop();
    }
    Ok(())
}

//! Signals: the launcher's own (recorded, then forwarded by the supervisor)
//! and those it sends to the children's process groups.

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};

/// Signals that ask the launcher to stop; they are passed on to the children.
const FORWARDED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn record(signal: libc::c_int) {
    PENDING.store(signal, Ordering::SeqCst);
}

/// Replaces the default action of SIGINT, SIGTERM and SIGHUP (ending the
/// launcher and orphaning the children) by recording the signal for
/// [`take_pending`]. Call before starting children.
///
/// Errors: the `sigaction` error.
pub fn install() -> io::Result<()> {
    for signal in FORWARDED {
        // SAFETY: the handler only stores into an atomic, which is
        // async-signal-safe; the sigaction struct is fully initialized.
        let failed = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = record as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut()) != 0
        };
        if failed {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The last stop signal received since the previous call, if any.
pub fn take_pending() -> Option<i32> {
    match PENDING.swap(0, Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// Sends `signal` to every process of the group `pgid`. A group that no
/// longer exists is not an error: its processes are already gone.
/// `pgid` must be a child's pid (> 1): `kill(-1)` would reach every process
/// of the user, so smaller values are ignored.
pub fn signal_group(pgid: i32, signal: i32) {
    if pgid > 1 {
        // SAFETY: kill has no memory-safety preconditions; a negative pid
        // addresses the process group.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

//! Rank-labelled output for processes that `tether run` did not start one
//! by one (DESIGN 3.9).
//!
//! `tether run` labels each line of a process it started with `-n` as
//! `[name:rank]`: it knows the rank. A segment without `-n` (`--name sim
//! mpiexec -n 4 ./sim`) is one child to it, and the ranks behind the MPI
//! launcher share that child's output, so its lines could only be
//! `[name]`. For such a segment the launcher listens on a Unix socket and
//! names it in `TETHER_OUTPUT_RELAY`; once a process knows its rank (at
//! init), it connects there twice, says `out <rank>` and `err <rank>`, and
//! makes the two connections its stdout and stderr (`dup2` onto fds 1 and
//! 2). The launcher prints what arrives on each as `[name:rank] line`.
//!
//! Nothing is buffered in this process beyond what was before: the
//! kernel's socket buffer holds what the launcher has not read yet, and
//! it is read to the end even after this process exits or is killed, so
//! no line is lost and no thread is needed here. Lines written before
//! init (flushed at the switch) keep the `[name]` of the MPI launcher's
//! stream; output after finalize stays labelled.

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::sync::Once;

static SWITCHED: Once = Once::new();

/// Connects stdout and stderr to the launcher's output relay at `address`
/// (`@name`, an abstract Unix socket), labelled with `rank`, the first time
/// it is called with an address; later calls (a second init) do nothing.
/// A relay that cannot be reached is logged and output stays as it was.
pub fn label_with_rank(address: Option<&str>, rank: u32) {
    let Some(address) = address.filter(|a| !a.is_empty()) else {
        return;
    };
    SWITCHED.call_once(|| {
        if let Err(e) = switch(address, rank) {
            tracing::warn!(
                "TETHER_OUTPUT_RELAY={address}: cannot reach tether run's output relay ({e}); \
                 this process's output stays unlabelled"
            );
        }
    });
}

fn switch(address: &str, rank: u32) -> io::Result<()> {
    let name = address.strip_prefix('@').ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "not an abstract socket name (@...)",
        )
    })?;
    let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
    // Both connections first, so that a failure changes nothing.
    let mut streams = Vec::with_capacity(2);
    for (fd, stream) in [(libc::STDOUT_FILENO, "out"), (libc::STDERR_FILENO, "err")] {
        let mut socket = UnixStream::connect_addr(&addr)?;
        socket.write_all(format!("{stream} {rank}\n").as_bytes())?;
        streams.push((fd, socket));
    }
    // What was buffered before goes where it was meant to, in order.
    let _ = io::stdout().flush();
    // SAFETY: fflush(NULL) flushes every C stdio output stream.
    unsafe { libc::fflush(std::ptr::null_mut()) };
    for (fd, socket) in &streams {
        // SAFETY: both are open descriptors; dup2 replaces `fd` atomically
        // (no moment without a stdout), and the new one is not close-on-exec,
        // so children of this process write to the relay too.
        if unsafe { libc::dup2(socket.as_raw_fd(), *fd) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

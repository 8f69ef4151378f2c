//! Cross-memory attach: one copy between this process's buffer and
//! another process's, with `process_vm_writev` (the sender writes into
//! the granted receive buffer) or `process_vm_readv` (the receiver reads
//! its part of a split copy from the send buffer). The kernel allows it
//! when this process could ptrace the other (same user, and no Yama or
//! seccomp rule against it); when it refuses, the data goes through the
//! ring (a write) or the sender writes that part too (a read).

use std::io;

/// How a cross-memory copy failed.
#[derive(Debug)]
pub enum CmaError {
    /// The kernel does not allow it here (permissions, seccomp, no
    /// support): do not try it again with this peer.
    Refused(io::Error),
    /// The other process no longer exists.
    Gone,
    /// The remote range is not mapped in the other process: the peer
    /// announced a region it does not have (a bug or a broken peer).
    BadAddress(io::Error),
}

#[derive(Clone, Copy)]
enum Direction {
    Write,
    Read,
}

/// Writes `len` bytes from `src` to address `dst` of process `pid`.
///
/// # Safety
/// `src..src+len` must be readable.
pub unsafe fn write(pid: u32, src: *const u8, dst: u64, len: usize) -> Result<(), CmaError> {
    copy(Direction::Write, pid, src as *mut u8, dst, len)
}

/// Writes the runs of `gather`, in order, to address `dst` of process
/// `pid`: one `process_vm_writev` per [`IOV_MAX`] runs, so a strided
/// message is copied once, by the kernel, without packing.
///
/// # Safety
/// The runs must be readable.
pub unsafe fn write_gathered(
    pid: u32,
    gather: &tether_proto::Gather,
    dst: u64,
) -> Result<(), CmaError> {
    let len = gather.len();
    let mut done = 0usize;
    let mut local = Vec::with_capacity(IOV_MAX.min(64));
    while done < len {
        local.clear();
        let mut chunk = 0usize;
        gather.pieces_from(done, |ptr, n| {
            local.push(libc::iovec {
                iov_base: ptr as *mut libc::c_void,
                iov_len: n,
            });
            chunk += n;
            local.len() < IOV_MAX
        });
        // A range that wraps is not mapped: the kernel answers EFAULT.
        let remote = libc::iovec {
            iov_base: (dst as usize).wrapping_add(done) as *mut libc::c_void,
            iov_len: chunk,
        };
        let n = libc::process_vm_writev(
            pid as libc::pid_t,
            local.as_ptr(),
            local.len() as libc::c_ulong,
            &remote,
            1,
            0,
        );
        match outcome(n) {
            Ok(moved) => done += moved,
            Err(None) => continue,
            Err(Some(e)) => return Err(e),
        }
    }
    Ok(())
}

/// Most iovecs one `process_vm_writev` takes (the kernel's `UIO_MAXIOV`).
const IOV_MAX: usize = 1024;

/// Reads `len` bytes from address `src` of process `pid` into `dst`.
///
/// # Safety
/// `dst..dst+len` must be writable and used by nothing else meanwhile.
pub unsafe fn read(pid: u32, src: u64, dst: *mut u8, len: usize) -> Result<(), CmaError> {
    copy(Direction::Read, pid, dst, src, len)
}

/// Copies `len` bytes between `local` and `remote` of `pid`, resuming
/// after partial transfers and interruptions.
unsafe fn copy(
    direction: Direction,
    pid: u32,
    local: *mut u8,
    remote: u64,
    len: usize,
) -> Result<(), CmaError> {
    let mut done = 0usize;
    while done < len {
        let local_iov = libc::iovec {
            iov_base: local.add(done).cast(),
            iov_len: len - done,
        };
        // A range that wraps is not mapped: the kernel answers EFAULT.
        let remote_iov = libc::iovec {
            iov_base: (remote as usize).wrapping_add(done) as *mut libc::c_void,
            iov_len: len - done,
        };
        let pid = pid as libc::pid_t;
        let n = match direction {
            Direction::Write => libc::process_vm_writev(pid, &local_iov, 1, &remote_iov, 1, 0),
            Direction::Read => libc::process_vm_readv(pid, &local_iov, 1, &remote_iov, 1, 0),
        };
        match outcome(n) {
            Ok(moved) => done += moved,
            Err(None) => continue,
            Err(Some(e)) => return Err(e),
        }
    }
    Ok(())
}

/// What a `process_vm_writev`/`process_vm_readv` that returned `n` means:
/// bytes moved, a retry (`Err(None)`: interrupted), or why to stop.
fn outcome(n: isize) -> Result<usize, Option<CmaError>> {
    if n > 0 {
        return Ok(n as usize);
    }
    let e = if n == 0 {
        io::Error::from(io::ErrorKind::WriteZero)
    } else {
        io::Error::last_os_error()
    };
    Err(match e.raw_os_error() {
        Some(libc::EINTR) => return Err(None),
        Some(libc::ESRCH) => Some(CmaError::Gone),
        Some(libc::EFAULT) => Some(CmaError::BadAddress(e)),
        _ => Some(CmaError::Refused(e)),
    })
}

/// Whether this process may use cross-memory attach at all: a write to
/// its own memory through `process_vm_writev`, which passes the same
/// permission and seccomp checks as a write to a peer of the same user.
/// Reads are found out at their first use (a seccomp filter may allow
/// one and not the other).
pub fn probe() -> Result<(), io::Error> {
    let src = [1u8; 8];
    let mut dst = [0u8; 8];
    // SAFETY: both ranges are live local arrays of 8 bytes.
    match unsafe { write(std::process::id(), src.as_ptr(), dst.as_mut_ptr() as u64, 8) } {
        Ok(()) if dst == src => Ok(()),
        Ok(()) => Err(io::Error::other("the bytes did not arrive")),
        Err(CmaError::Refused(e) | CmaError::BadAddress(e)) => Err(e),
        Err(CmaError::Gone) => Err(io::Error::other("this process was not found")),
    }
}

//! Cross-memory attach: one copy from this process's buffer straight into
//! another process's, with `process_vm_writev`. The kernel allows it when
//! this process could ptrace the other (same user, and no Yama or seccomp
//! rule against it); when it refuses, the data goes through the ring.

use std::io;

/// How a cross-memory write failed.
#[derive(Debug)]
pub enum CmaError {
    /// The kernel does not allow it here (permissions, seccomp, no
    /// support): use the ring from now on.
    Refused(io::Error),
    /// The target process no longer exists.
    Gone,
    /// The target range is not mapped in the target: the peer granted a
    /// region it does not have (a bug or a broken peer).
    BadAddress(io::Error),
}

/// Writes `len` bytes from `src` to address `dst` of process `pid`.
///
/// # Safety
/// `src..src+len` must be readable.
pub unsafe fn write(pid: u32, src: *const u8, dst: u64, len: usize) -> Result<(), CmaError> {
    let mut done = 0usize;
    while done < len {
        let local = libc::iovec {
            iov_base: src.add(done) as *mut libc::c_void,
            iov_len: len - done,
        };
        let remote = libc::iovec {
            iov_base: (dst as usize + done) as *mut libc::c_void,
            iov_len: len - done,
        };
        let n = libc::process_vm_writev(pid as libc::pid_t, &local, 1, &remote, 1, 0);
        if n > 0 {
            done += n as usize;
            continue;
        }
        let e = if n == 0 {
            io::Error::from(io::ErrorKind::WriteZero)
        } else {
            io::Error::last_os_error()
        };
        return Err(match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ESRCH) => CmaError::Gone,
            Some(libc::EFAULT) => CmaError::BadAddress(e),
            _ => CmaError::Refused(e),
        });
    }
    Ok(())
}

/// Whether this process may use cross-memory attach at all: a read of
/// its own memory through `process_vm_readv`, which passes the same
/// permission and seccomp checks as a write to a peer of the same user.
pub fn probe() -> Result<(), io::Error> {
    let src = [1u8; 8];
    let mut dst = [0u8; 8];
    let local = libc::iovec {
        iov_base: dst.as_mut_ptr().cast(),
        iov_len: 8,
    };
    let remote = libc::iovec {
        iov_base: src.as_ptr() as *mut libc::c_void,
        iov_len: 8,
    };
    // SAFETY: both iovecs describe live local arrays.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    if n == 8 && dst == src {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

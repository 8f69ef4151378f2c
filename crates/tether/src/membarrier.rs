//! Linux's `membarrier(2)`: memory barriers run on other CPUs on request,
//! the heavy side of the asymmetric fences of the shared-memory doorbell
//! (`transport/shm/barrier.rs`) and of the C API's biased lock
//! (`tether-capi`'s `lock.rs`). The commands are the kernel's
//! (`linux/membarrier.h`).

use std::io;

/// The bit mask of the commands the kernel offers.
pub const CMD_QUERY: libc::c_long = 0;
/// A full barrier on every CPU running a thread of a process registered
/// with [`CMD_REGISTER_GLOBAL_EXPEDITED`] (Linux 4.16).
pub const CMD_GLOBAL_EXPEDITED: libc::c_long = 1 << 1;
/// Registers the calling process for [`CMD_GLOBAL_EXPEDITED`].
pub const CMD_REGISTER_GLOBAL_EXPEDITED: libc::c_long = 1 << 2;
/// A full barrier on every CPU running another thread of the calling
/// process, registered with [`CMD_REGISTER_PRIVATE_EXPEDITED`] (Linux 4.14).
pub const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
/// Registers the calling process for [`CMD_PRIVATE_EXPEDITED`].
pub const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// `membarrier(cmd, 0, 0)`: its non-negative result, or why it failed
/// (ENOSYS on old kernels, EPERM under a seccomp filter, EINVAL for a
/// command not offered or not registered for).
pub fn membarrier(cmd: libc::c_long) -> io::Result<libc::c_long> {
    // SAFETY: these commands take no pointers.
    let rc = unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

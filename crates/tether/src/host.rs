//! Who this host and this process are, as other processes can check:
//! the host identity decides which peers share memory with us, and a
//! process's start time tells a live peer from a new process that reused
//! its pid.

/// This host's identity: `TETHER_HOST_ID` when set (tests use it to make
/// processes of one machine look like several hosts), else the host name
/// and the kernel's boot id, which two processes see alike exactly when
/// they run on the same booted kernel (a host name alone is shared by
/// cloned containers and VMs). Whitespace is replaced, since the value is
/// one field of the published address.
pub fn host_id(override_id: Option<&str>) -> String {
    let id = match override_id {
        Some(id) => id.to_string(),
        None => {
            let boot =
                std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
            format!("{}/{}", host_name(), boot.trim())
        }
    };
    id.chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect()
}

fn host_name() -> String {
    let mut name = [0u8; 256];
    // SAFETY: the buffer is writable for its length.
    let rc = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) };
    if rc != 0 {
        return "unknown".to_string();
    }
    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    String::from_utf8_lossy(&name[..end]).into_owned()
}

/// When process `pid` started, in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`); `None` when no such process exists (any more).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces
    // or parentheses itself: fields are counted after its last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process that started as (`pid`, `start`) is still running
/// (a zombie counts as gone: it will never answer again).
pub fn is_alive(pid: u32, start: u64) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some(close) = stat.rfind(')') else {
        return false;
    };
    let mut fields = stat[close + 1..].split_whitespace();
    let state = fields.next();
    let started = fields.nth(18).and_then(|s| s.parse::<u64>().ok());
    started == Some(start) && !matches!(state, Some("Z") | Some("X"))
}

/// A pidfd for the process that started as (`pid`, `start`): readable
/// once it exits. `None` where pidfds are not available or the process is
/// already gone (or the pid was reused before the pidfd was opened).
pub fn process_fd(pid: u32, start: u64) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: a plain system call with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the descriptor was just returned to us and is owned by no one else.
    let pidfd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) };
    // The pid could have been reused before pidfd_open: the start time
    // read now belongs to the process the pidfd refers to.
    is_alive(pid, start).then_some(pidfd)
}

/// 64 random bits from the kernel (`getrandom`), or, should that fail, a
/// mix of the time and the pid, which still differs between two starts.
pub fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: the buffer is writable for its length.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n == bytes.len() as isize {
        return u64::from_ne_bytes(bytes);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    now ^ (u64::from(std::process::id()) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_wrong_start_time_is_not() {
        let pid = std::process::id();
        let start = start_time(pid).expect("own stat");
        assert!(is_alive(pid, start));
        assert!(!is_alive(pid, start + 1));
        assert_eq!(start_time(u32::MAX), None);
    }

    #[test]
    fn host_ids_are_one_field() {
        assert_eq!(host_id(Some("node a")), "node_a");
        let real = host_id(None);
        assert!(!real.contains(char::is_whitespace) && real.contains('/'));
    }
}

//! `tether run --bind-to core`: each process started with `-n` gets one
//! CPU of the launcher's own, round-robin in command-line order (as
//! `mpirun --bind-to core`, which also overloads cores when processes
//! outnumber them).
//!
//! Why: where processes outnumber the CPUs, the scheduler moves them
//! between CPUs as they poll and yield, and which processes share a CPU
//! changes from run to run, so unbound timings spread more than bound ones
//! (docs/journal/2026-11-24-collectives.md). Not the default: a process with threads of its own (OpenMP, PyTorch) would
//! have all of them confined to its one CPU.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// How `tether run` places the processes it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BindTo {
    /// Where the scheduler puts them (the default).
    None,
    /// One CPU each, round-robin over the launcher's CPUs.
    Core,
}

/// The CPUs this process may run on, in increasing order.
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the call writes at
    // most size_of::<cpu_set_t>() bytes into it.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        set
    };
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE.
        .filter(|cpu| unsafe { libc::CPU_ISSET(*cpu, &set) })
        .collect())
}

/// The CPU of the `index`-th bound process (counting from 0).
pub fn cpu_for(cpus: &[usize], index: usize) -> usize {
    cpus[index % cpus.len()]
}

/// Makes `command`'s process run on `cpu` only, from before it executes.
pub fn bind(command: &mut Command, cpu: usize) {
    // SAFETY: the closure runs in the child between fork and exec and
    // calls only sched_setaffinity, which is async-signal-safe; it
    // allocates nothing.
    unsafe {
        command.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_go_round_robin_over_the_cpus() {
        let cpus = [2, 5];
        let placed: Vec<usize> = (0..5).map(|i| cpu_for(&cpus, i)).collect();
        assert_eq!(placed, [2, 5, 2, 5, 2]);
    }

    #[test]
    fn this_process_may_use_some_cpu() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        assert!(cpus.windows(2).all(|w| w[0] < w[1]));
    }
}

//! The machine a report was measured on: CPU model, logical CPUs, kernel,
//! operating system and load, as read from /proc and uname.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub logical_cpus: usize,
    pub kernel: String,
    pub os: String,
    /// The 1-minute load average when the benchmark started.
    pub load_average: Option<f64>,
}

impl Machine {
    pub fn describe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let os_release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
        Machine {
            cpu: field(&cpuinfo, "model name", ':').unwrap_or_else(|| "unknown".into()),
            logical_cpus: std::thread::available_parallelism().map_or(1, usize::from),
            kernel: kernel(),
            os: field(&os_release, "PRETTY_NAME", '=')
                .map(|v| v.trim_matches('"').to_string())
                .unwrap_or_else(|| "unknown".into()),
            load_average: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|t| t.split_whitespace().next()?.parse().ok()),
        }
    }

    /// One line for people.
    pub fn summary(&self) -> String {
        let load = self
            .load_average
            .map_or(String::new(), |l| format!(", load average {l:.2}"));
        format!(
            "{}, {} logical CPUs, Linux {}, {}{load}",
            self.cpu, self.logical_cpus, self.kernel, self.os
        )
    }
}

/// The value of the first `key<sep>value` line of `text`.
fn field(text: &str, key: &str, separator: char) -> Option<String> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(separator)?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

/// The kernel release (`uname -r`).
fn kernel() -> String {
    // SAFETY: uname fills the zeroed struct; its fields are NUL-terminated.
    unsafe {
        let mut name: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut name) != 0 {
            return "unknown".into();
        }
        std::ffi::CStr::from_ptr(name.release.as_ptr())
            .to_string_lossy()
            .into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_this_machine() {
        assert_eq!(
            field("vendor : x\nmodel name\t: EPYC 7\n", "model name", ':'),
            Some("EPYC 7".into())
        );
        assert_eq!(field("A=1", "B", '='), None);
        let m = Machine::describe();
        assert!(m.logical_cpus >= 1 && !m.kernel.is_empty());
    }
}

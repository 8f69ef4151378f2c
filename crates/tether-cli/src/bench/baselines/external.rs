//! Baselines that are separate programs (MPICH, ZeroMQ): finding tools on
//! the PATH, compiling the embedded C sources, running them under a time
//! limit, and reading their `KIND SIZE VALUE` output lines.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::super::worker::Point;

/// The first `name` on the PATH that is an executable file.
pub fn find_program(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Writes `files` (name, contents) into `dir`.
pub fn write_sources(dir: &Path, files: &[(&str, &str)]) -> Result<(), String> {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Runs `command` (a compiler) and returns its combined output as the
/// error when it fails.
pub fn compile(mut command: Command) -> Result<(), String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start {:?}: {e}", command.get_program()))?;
    if output.status.success() {
        Ok(())
    } else {
        let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stdout));
        Err(text.trim().to_string())
    }
}

/// Runs `command` in its own process group with at most `limit` and returns
/// its standard output; the whole group is killed at the limit.
///
/// Errors: it cannot start, exceeds `limit`, or exits non-zero (the message
/// ends with the last lines of its standard error).
pub fn run(mut command: Command, limit: Duration) -> Result<String, String> {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let collect = |mut source: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut text = String::new();
            let _ = source.read_to_string(&mut text);
            text
        })
    };
    let stdout = collect(Box::new(child.stdout.take().expect("piped")));
    let stderr = collect(Box::new(child.stderr.take().expect("piped")));
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() >= deadline => {
                // SAFETY: signals the group of the child started above.
                unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
                let _ = child.wait();
                break Err(format!(
                    "{program} did not finish within {} s",
                    limit.as_secs()
                ));
            }
            Ok(None) => thread::sleep(Duration::from_millis(10)),
            Err(e) => break Err(format!("cannot wait for {program}: {e}")),
        }
    };
    let out = stdout.join().unwrap_or_default();
    let err = stderr.join().unwrap_or_default();
    match status {
        Ok(status) if status.success() => Ok(out),
        Ok(status) => Err(format!("{program} failed ({status}): {}", tail(&err))),
        Err(e) => Err(e),
    }
}

/// The last three lines of `text`, on one line.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" | ")
}

/// The figures of the lines `KIND SIZE VALUE` whose kind is `kind`; other
/// lines (comments, other kinds) are ignored.
pub fn parse_points(output: &str, kind: &str) -> Vec<Point> {
    output
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            if words.next() != Some(kind) {
                return None;
            }
            let size = words.next()?.parse().ok()?;
            let value = words.next()?.parse().ok()?;
            Some(Point { size, value })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_lines_become_points() {
        let out =
            "# mpi_pingpong: 2 ranks\nlatency 8 5.25\nbw 1024 99.5\nlatency 16 x\nlatency 1024 6\n";
        assert_eq!(
            parse_points(out, "latency"),
            vec![
                Point {
                    size: 8,
                    value: 5.25
                },
                Point {
                    size: 1024,
                    value: 6.0
                }
            ]
        );
        assert_eq!(parse_points(out, "bw").len(), 1);
    }

    #[test]
    fn failures_name_the_program_and_its_last_words() {
        let mut command = Command::new("sh");
        command.args(["-c", "echo one >&2; echo two >&2; exit 3"]);
        let e = run(command, Duration::from_secs(10)).unwrap_err();
        assert!(e.contains("sh failed") && e.contains("one | two"), "{e}");
        assert!(find_program("sh").is_some());
        assert!(find_program("no-such-program-tether").is_none());
    }
}

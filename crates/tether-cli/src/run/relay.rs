//! Re-printing a child's output with its `[name:rank] ` prefix.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::mpsc::Sender;
use std::thread;

/// Longer lines are cut into pieces of this size, each printed as a line, so
/// that a child printing without newlines cannot exhaust memory.
const MAX_LINE: u64 = 64 * 1024;
const STACK: usize = 128 * 1024;

/// Where a relay prints.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    Stdout,
    Stderr,
}

/// Starts a thread that reads `source` line by line until its end and prints
/// each line as `prefix` + line + `\n` on `target`, one whole line per write
/// under the target's lock so that lines of different children never mix.
/// A last line without `\n` gets one. Sends on `done` when `source` ends.
///
/// When printing fails (a closed stdout) the thread keeps reading, so that
/// the child never blocks on a full pipe, but prints nothing more.
///
/// Errors: the thread cannot be started.
pub fn spawn(
    source: impl Read + Send + 'static,
    prefix: String,
    target: Target,
    done: Sender<()>,
) -> io::Result<()> {
    thread::Builder::new()
        .name(format!("relay {prefix}"))
        .stack_size(STACK)
        .spawn(move || {
            relay(source, prefix.as_bytes(), target);
            let _ = done.send(());
        })
        .map(drop)
}

fn relay(source: impl Read, prefix: &[u8], target: Target) {
    let mut reader = BufReader::new(source);
    let mut line = Vec::new();
    let mut printing = true;
    loop {
        line.clear();
        line.extend_from_slice(prefix);
        match Read::take(&mut reader, MAX_LINE).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        if printing {
            printing = print(target, &line).is_ok();
        }
    }
}

fn print(target: Target, line: &[u8]) -> io::Result<()> {
    match target {
        Target::Stdout => {
            let mut out = io::stdout().lock();
            out.write_all(line)?;
            out.flush()
        }
        Target::Stderr => io::stderr().lock().write_all(line),
    }
}

//! Re-printing a child's output with its `[name:rank] ` prefix.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
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

/// Starts a thread that relays one connection to an output relay of
/// program `name` (see `tether::output`): its first line says which
/// stream and rank it is (`out 3`, `err 3`), every later line is printed
/// as `[name:3] line` on that stream. A connection without a valid first
/// line is closed. Sends on `done` when the connection ends.
///
/// Errors: the thread cannot be started.
pub fn spawn_labelled(source: UnixStream, name: String, done: Sender<()>) -> io::Result<()> {
    thread::Builder::new()
        .name(format!("relay {name}:?"))
        .stack_size(STACK)
        .spawn(move || {
            let mut reader = BufReader::new(source);
            let mut header = Vec::new();
            let read = Read::take(&mut reader, MAX_HEADER).read_until(b'\n', &mut header);
            match read.ok().and_then(|_| parse_header(&header)) {
                Some((target, rank)) => relay(reader, format!("[{name}:{rank}] ").as_bytes(), target),
                None => eprintln!(
                    "tether run: a connection to {name}'s output relay did not say which rank it is ({:?}); closed",
                    String::from_utf8_lossy(&header)
                ),
            }
            let _ = done.send(());
        })
        .map(drop)
}

/// Longest first line of a labelled connection.
const MAX_HEADER: u64 = 32;

/// `out RANK\n` or `err RANK\n`.
fn parse_header(line: &[u8]) -> Option<(Target, u32)> {
    let line = std::str::from_utf8(line).ok()?.strip_suffix('\n')?;
    let (stream, rank) = line.split_once(' ')?;
    let target = match stream {
        "out" => Target::Stdout,
        "err" => Target::Stderr,
        _ => return None,
    };
    Some((target, rank.parse().ok()?))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_name_a_stream_and_a_rank() {
        assert!(matches!(
            parse_header(b"out 3\n"),
            Some((Target::Stdout, 3))
        ));
        assert!(matches!(
            parse_header(b"err 0\n"),
            Some((Target::Stderr, 0))
        ));
        for bad in [
            &b"out 3"[..],
            b"in 3\n",
            b"out -1\n",
            b"out\n",
            b"",
            b"out 3 4\n",
        ] {
            assert!(parse_header(bad).is_none(), "{bad:?}");
        }
    }
}

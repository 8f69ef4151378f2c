//! ZeroMQ (Debian's `libzmq`): the ping-pong of `benches/zmq/zmq_pingpong.c`
//! (ZMQ_PAIR sockets over tcp://127.0.0.1, two processes), embedded here and
//! compiled at run time with `cc ... -lzmq`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::super::worker::{Counts, Point};
use super::external::{compile, find_program, parse_points, run, write_sources};
use super::Unavailable;

const SOURCE: &str = include_str!("../../../../../benches/zmq/zmq_pingpong.c");

/// The compiled ping-pong.
pub struct Zmq {
    program: PathBuf,
}

/// Compiles the ping-pong into `dir`.
///
/// Errors: [`Unavailable::Skipped`] when there is no C compiler or no
/// libzmq headers and library; [`Unavailable::Failed`] when compiling fails
/// otherwise.
pub fn prepare(dir: &Path) -> Result<Zmq, Unavailable> {
    let Some(cc) = find_program("cc") else {
        return Err(Unavailable::Skipped(
            "no C compiler (cc) to build the ZeroMQ ping-pong".into(),
        ));
    };
    write_sources(dir, &[("zmq_pingpong.c", SOURCE)]).map_err(Unavailable::Failed)?;
    let program = dir.join("zmq_pingpong");
    let mut command = Command::new(cc);
    command
        .arg("-O2")
        .arg(dir.join("zmq_pingpong.c"))
        .arg("-o")
        .arg(&program)
        .arg("-lzmq");
    match compile(command) {
        Ok(()) => Ok(Zmq { program }),
        Err(e) if e.contains("zmq.h") || e.contains("-lzmq") => Err(Unavailable::Skipped(
            "libzmq not installed (no zmq.h or libzmq.so; Debian package libzmq3-dev)".into(),
        )),
        Err(e) => Err(Unavailable::Failed(format!(
            "cc failed on zmq_pingpong.c: {e}"
        ))),
    }
}

impl Zmq {
    /// Half the round trip per size (0-byte messages included: ZeroMQ has
    /// them), in microseconds.
    ///
    /// Errors: the program fails or exceeds `limit`.
    pub fn latency(&self, plan: &[(u64, Counts)], limit: Duration) -> Result<Vec<Point>, String> {
        let mut command = Command::new(&self.program);
        for (size, counts) in plan {
            command.args([
                size.to_string(),
                counts.warmup.to_string(),
                counts.iters.to_string(),
            ]);
        }
        Ok(parse_points(&run(command, limit)?, "latency"))
    }
}

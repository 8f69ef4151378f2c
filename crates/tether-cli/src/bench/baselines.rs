//! The baselines that `tether bench` runs beside Tether in the same
//! invocation, so that every figure reads as a ratio to what this machine
//! can do without Tether. Those written here always run; MPICH and ZeroMQ
//! run when installed and are otherwise reported as skipped, never faked.

mod external;
mod file;
mod fork;
mod mapping;
mod memcpy;
mod mpich;
mod raw_shm;
mod raw_tcp;
mod raw_tcp_pairs;
mod zmq;

use std::time::{Duration, Instant};

use clap::ValueEnum;
use serde::Serialize;

use super::launch::Shape;
use super::mode::Mode;
use super::scratch::Scratch;
use super::worker::{Counts, Point};

/// A reference measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum Baseline {
    RawTcp,
    RawShm,
    Memcpy,
    File,
    Mpich,
    Zmq,
}

pub const ALL: [Baseline; 6] = [
    Baseline::RawTcp,
    Baseline::RawShm,
    Baseline::Memcpy,
    Baseline::File,
    Baseline::Mpich,
    Baseline::Zmq,
];

/// Why a baseline has no figures in this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// Not installed, or not meant for this mode: a note, not an error.
    Skipped(String),
    /// Installed but it did not work: an error worth reading.
    Failed(String),
}

/// `--baselines`: every baseline that has a measurement for the mode, or
/// the ones named (those without one are then reported as skipped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    All,
    Named(Vec<Baseline>),
}

impl Selection {
    /// The baselines to report for `mode`.
    pub fn for_mode(&self, mode: Mode) -> Vec<Baseline> {
        match self {
            Selection::All => ALL.into_iter().filter(|b| b.applies(mode)).collect(),
            Selection::Named(list) => list.clone(),
        }
    }
}

/// Parses `--baselines`: `none`, `all`, or a comma-separated list of
/// names (in the order given, each once).
///
/// Errors: an unknown name (the known ones are listed) or an empty entry.
pub fn parse_selection(text: &str) -> Result<Selection, String> {
    match text.trim() {
        "none" => return Ok(Selection::Named(Vec::new())),
        "all" => return Ok(Selection::All),
        _ => {}
    }
    let mut chosen = Vec::new();
    for name in text.split(',') {
        let baseline = Baseline::from_str(name.trim(), false).map_err(|_| {
            let known: Vec<&str> = ALL.iter().map(|b| b.name()).collect();
            format!(
                "unknown baseline {:?}; use none, all or a list of: {}",
                name.trim(),
                known.join(", ")
            )
        })?;
        if !chosen.contains(&baseline) {
            chosen.push(baseline);
        }
    }
    Ok(Selection::Named(chosen))
}

impl Baseline {
    pub fn name(self) -> &'static str {
        match self {
            Baseline::RawTcp => "raw_tcp",
            Baseline::RawShm => "raw_shm",
            Baseline::Memcpy => "memcpy",
            Baseline::File => "file",
            Baseline::Mpich => "mpich",
            Baseline::Zmq => "zmq",
        }
    }

    /// Whether the baseline has a measurement for `mode`.
    pub fn applies(self, mode: Mode) -> bool {
        match self {
            Baseline::RawTcp => matches!(
                mode,
                Mode::Latency
                    | Mode::Bw
                    | Mode::BwBlocking
                    | Mode::Bibw
                    | Mode::MbwMr
                    | Mode::MultiRail
            ),
            Baseline::RawShm | Baseline::Zmq => mode == Mode::Latency,
            Baseline::Memcpy => matches!(mode, Mode::Bw | Mode::Bibw | Mode::MultiRail),
            Baseline::File => matches!(mode, Mode::Bw | Mode::MultiRail),
            Baseline::Mpich => matches!(
                mode,
                Mode::Latency | Mode::Bw | Mode::Allreduce | Mode::Bcast | Mode::Barrier
            ),
        }
    }

    /// What exactly is measured for `mode`, for the report.
    pub fn describe(self, mode: Mode, tcp: bool) -> String {
        match (self, mode) {
            (Baseline::RawTcp, Mode::Latency) => "raw TCP ping-pong on 127.0.0.1 between two processes, TCP_NODELAY, both sides busy-poll non-blocking read/write".into(),
            (Baseline::RawTcp, Mode::MbwMr) => "raw TCP message rate: one connection on 127.0.0.1 per pair between a sender and a receiver process, blocking streams of windows and a 4-byte ack, started together".into(),
            (Baseline::RawTcp, Mode::Bibw) => "raw TCP on 127.0.0.1 between two processes, TCP_NODELAY: windows both ways at once, both sides busy-poll non-blocking read/write".into(),
            (Baseline::RawTcp, _) => "raw TCP stream on 127.0.0.1 between two processes, blocking sockets: a window of messages, then a 4-byte ack".into(),
            (Baseline::RawShm, _) => "raw shared-memory ping-pong between two processes: copy into a shared mapping, raise a flag the peer busy-polls, copy out".into(),
            (Baseline::Memcpy, _) => "memcpy between two buffers of one process, the same bytes per window".into(),
            (Baseline::File, _) => "write a new file, rename it into place, read it back, remove it (one process, page cache, no fsync), one message per iteration".into(),
            (Baseline::Mpich, m) if m.collective() => format!("benches/coll/coll_bench.c (-DBENCH_MPI) under mpiexec.mpich, one job of all processes; {}", mpich::channel_note(tcp)),
            (Baseline::Mpich, _) => format!("benches/p2p/mpi_pingpong.c under mpiexec.mpich -n 2; {}", mpich::channel_note(tcp)),
            (Baseline::Zmq, _) => "benches/zmq/zmq_pingpong.c: ZeroMQ ZMQ_PAIR ping-pong over tcp://127.0.0.1 between two processes".into(),
        }
    }
}

/// What every baseline run of one invocation shares.
pub struct Context<'a> {
    pub mode: Mode,
    /// Every size with its iteration counts (those of the Tether run).
    pub plan: Vec<(u64, Counts)>,
    pub window: u32,
    pub shape: Shape,
    /// Whether the Tether transports are TCP only (MPICH then uses TCP).
    pub tcp: bool,
    pub limit: Duration,
    pub scratch: &'a Scratch,
}

/// A baseline ready to run: compiled where it needs compiling.
pub enum Ready {
    Builtin(Baseline),
    Mpich(mpich::Mpich),
    Zmq(zmq::Zmq),
}

/// Prepares `baseline` for `ctx.mode` (compiling MPICH and ZeroMQ
/// programs once per invocation).
///
/// Errors: [`Unavailable`], skipped when the baseline does not apply or is
/// not installed, failed when it does not build.
pub fn prepare(baseline: Baseline, ctx: &Context) -> Result<Ready, Unavailable> {
    if !baseline.applies(ctx.mode) {
        return Err(Unavailable::Skipped(format!(
            "{} has no {} measurement",
            baseline.name(),
            ctx.mode.name()
        )));
    }
    match baseline {
        Baseline::Mpich => mpich::prepare(ctx.mode, ctx.scratch.path()).map(Ready::Mpich),
        Baseline::Zmq => zmq::prepare(ctx.scratch.path()).map(Ready::Zmq),
        other => Ok(Ready::Builtin(other)),
    }
}

impl Ready {
    /// One repetition over every size.
    ///
    /// Errors: the measurement failed (the message says how).
    pub fn run(&self, ctx: &Context) -> Result<Vec<Point>, String> {
        let deadline = Instant::now() + ctx.limit;
        let plan = &ctx.plan;
        match self {
            Ready::Builtin(Baseline::RawTcp) if ctx.mode == Mode::Latency => {
                raw_tcp::latency(plan, deadline)
            }
            Ready::Builtin(Baseline::RawTcp) if ctx.mode == Mode::MbwMr => {
                raw_tcp_pairs::message_rate(plan, ctx.window, ctx.shape.procs, ctx.limit)
            }
            Ready::Builtin(Baseline::RawTcp) if ctx.mode == Mode::Bibw => {
                raw_tcp::bidirectional(plan, ctx.window, deadline)
            }
            Ready::Builtin(Baseline::RawTcp) => raw_tcp::stream(plan, ctx.window, ctx.limit),
            Ready::Builtin(Baseline::RawShm) => raw_shm::latency(plan, deadline),
            Ready::Builtin(Baseline::Memcpy) => Ok(memcpy::bandwidth(plan, ctx.window)),
            Ready::Builtin(Baseline::File) => file::bandwidth(plan, ctx.scratch.path()),
            Ready::Builtin(other) => Err(format!("{} is not built in", other.name())),
            Ready::Mpich(m) => m.run(ctx.mode, plan, ctx.window, ctx.shape, ctx.tcp, ctx.limit),
            Ready::Zmq(z) => z.latency(plan, ctx.limit),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selections() {
        assert_eq!(parse_selection("none"), Ok(Selection::Named(vec![])));
        assert_eq!(parse_selection("all"), Ok(Selection::All));
        let named = parse_selection("mpich, raw_tcp,mpich").unwrap();
        assert_eq!(
            named.for_mode(Mode::Bibw),
            vec![Baseline::Mpich, Baseline::RawTcp]
        );
        assert_eq!(
            Selection::All.for_mode(Mode::Bibw),
            vec![Baseline::RawTcp, Baseline::Memcpy]
        );
        let e = parse_selection("raw_tcp,mpi").unwrap_err();
        assert!(e.contains("\"mpi\"") && e.contains("raw_shm"), "{e}");
    }

    #[test]
    fn every_mode_with_a_physical_limit_has_a_baseline() {
        for mode in [
            Mode::Latency,
            Mode::Bw,
            Mode::Bibw,
            Mode::Allreduce,
            Mode::Bcast,
            Mode::Barrier,
        ] {
            assert!(ALL.iter().any(|b| b.applies(mode)), "{}", mode.name());
        }
    }

    #[test]
    fn names_round_trip() {
        for b in ALL {
            assert_eq!(Baseline::from_str(b.name(), false), Ok(b));
        }
    }
}

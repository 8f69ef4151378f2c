//! MPICH (Debian's `mpich`): the OSU-style programs of `benches/`
//! (`p2p/mpi_pingpong.c` for latency and bw, `coll/coll_bench.c` for the
//! collectives), embedded here so that an installed `tether bench` can
//! build them too, compiled with `mpicc.mpich` and run with
//! `mpiexec.mpich` on this host.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::super::launch::Shape;
use super::super::mode::Mode;
use super::super::worker::{Counts, Point};
use super::external::{compile, find_program, parse_points, run, write_sources};
use super::Unavailable;

const COMPILER: &str = "mpicc.mpich";
const LAUNCHER: &str = "mpiexec.mpich";
const SOURCES: [(&str, &str); 3] = [
    (
        "bench_common.h",
        include_str!("../../../../../benches/p2p/bench_common.h"),
    ),
    (
        "mpi_pingpong.c",
        include_str!("../../../../../benches/p2p/mpi_pingpong.c"),
    ),
    (
        "coll_bench.c",
        include_str!("../../../../../benches/coll/coll_bench.c"),
    ),
];

/// The compiled program for one mode, and the launcher.
pub struct Mpich {
    launcher: PathBuf,
    program: PathBuf,
}

/// Whether MPICH runs over TCP on loopback (the `tcp` transport's peer) or
/// on its default channel (UCX shared memory on one host).
pub fn channel_note(tcp: bool) -> &'static str {
    if tcp {
        "MPICH over TCP on lo: UCX_TLS=tcp UCX_NET_DEVICES=lo MPIR_CVAR_NOLOCAL=1 mpiexec.mpich -iface lo"
    } else {
        "MPICH on its default channel (UCX picks shared memory between ranks of one host)"
    }
}

/// Compiles the program `mode` needs into `dir`.
///
/// Errors: [`Unavailable::Skipped`] when mpicc.mpich or mpiexec.mpich is
/// not installed; [`Unavailable::Failed`] when compiling fails.
pub fn prepare(mode: Mode, dir: &Path) -> Result<Mpich, Unavailable> {
    let (Some(compiler), Some(launcher)) = (find_program(COMPILER), find_program(LAUNCHER)) else {
        return Err(Unavailable::Skipped(format!(
            "MPICH not installed ({COMPILER} and {LAUNCHER} not both on the PATH; Debian package mpich)"
        )));
    };
    write_sources(dir, &SOURCES).map_err(Unavailable::Failed)?;
    let source = if mode.collective() {
        "coll_bench.c"
    } else {
        "mpi_pingpong.c"
    };
    let program = dir.join(source.trim_end_matches(".c"));
    let mut command = Command::new(compiler);
    command
        .arg("-O2")
        .arg(dir.join(source))
        .arg("-o")
        .arg(&program);
    if mode.collective() {
        command.arg("-DBENCH_MPI");
    }
    compile(command).map_err(|e| Unavailable::Failed(format!("{COMPILER} failed: {e}")))?;
    Ok(Mpich { launcher, program })
}

/// Consecutive sizes with equal counts, so that one launch measures them.
fn groups(plan: &[(u64, Counts)]) -> Vec<(Counts, Vec<u64>)> {
    let mut out: Vec<(Counts, Vec<u64>)> = Vec::new();
    for (size, counts) in plan {
        match out.last_mut() {
            Some((c, sizes)) if c == counts => sizes.push(*size),
            _ => out.push((*counts, vec![*size])),
        }
    }
    out
}

fn list(sizes: &[u64]) -> String {
    sizes
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

impl Mpich {
    /// Measures `plan` (sizes of 0 bytes are left out: the programs take
    /// positive sizes; warm-ups of 0 become 1, their "default" otherwise).
    ///
    /// Errors: a launch fails or exceeds `limit`.
    pub fn run(
        &self,
        mode: Mode,
        plan: &[(u64, Counts)],
        window: u32,
        shape: Shape,
        tcp: bool,
        limit: Duration,
    ) -> Result<Vec<Point>, String> {
        let plan: Vec<(u64, Counts)> = plan
            .iter()
            .copied()
            .filter(|(s, _)| *s > 0 || mode == Mode::Barrier)
            .collect();
        let processes = if mode.collective() {
            shape.programs * shape.procs
        } else {
            2
        };
        let mut points = Vec::new();
        for (counts, sizes) in groups(&plan) {
            let warmup = counts.warmup.max(1).to_string();
            let iters = counts.iters.to_string();
            let mut command = Command::new(&self.launcher);
            if tcp {
                command
                    .env("UCX_TLS", "tcp")
                    .env("UCX_NET_DEVICES", "lo")
                    .env("MPIR_CVAR_NOLOCAL", "1")
                    .args(["-iface", "lo"]);
            }
            command
                .arg("-n")
                .arg(processes.to_string())
                .arg(&self.program);
            let kind = match mode {
                Mode::Latency => {
                    command.args(["--lat", &list(&sizes), "--bw", ""]);
                    command.args(["--iters", &iters, "--warmup", &warmup]);
                    "latency"
                }
                Mode::Bw => {
                    command.args(["--lat", "", "--bw", &list(&sizes)]);
                    command.args(["--bw-iters", &iters, "--bw-warmup", &warmup]);
                    command.args(["--window", &window.to_string()]);
                    "bw"
                }
                Mode::Allreduce | Mode::Bcast | Mode::Barrier => {
                    command.args(["--sizes", &list(&sizes), "--iters", &iters]);
                    command.args(["--ops", mode.name()]);
                    mode.name()
                }
                other => return Err(format!("MPICH has no {} program", other.name())),
            };
            let output = run(command, limit)?;
            points.extend(parse_points(&output, kind));
        }
        Ok(points)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_counts_share_a_launch() {
        let c = |iters| Counts { warmup: 1, iters };
        let plan = [(8, c(10)), (64, c(10)), (1024, c(5)), (4096, c(10))];
        let g = groups(&plan);
        assert_eq!(g.len(), 3);
        assert_eq!(g[0].1, vec![8, 64]);
        assert_eq!(g[1].1, vec![1024]);
        assert_eq!(list(&g[0].1), "8,64");
    }
}

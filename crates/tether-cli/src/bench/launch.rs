//! Running the Tether side of a benchmark: `bench-worker` processes started
//! by the `tether run` launcher (rendezvous, identities, supervision), one
//! launch per repetition.

use std::path::PathBuf;

use super::mode::Mode;
use super::scratch::Scratch;
use super::worker::Point;
use crate::run::segments::Segment;
use crate::run::{self, Timeout};

/// How many programs, and processes in each, one launch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub programs: u32,
    pub procs: u32,
}

/// What the workers measure.
#[derive(Debug, Clone)]
pub struct Plan {
    pub mode: Mode,
    pub sizes: Vec<u64>,
    pub iters: Option<u64>,
    pub warmup: Option<u64>,
    pub window: u32,
}

/// Program names: a, b, c, ... (`shape.programs` is at most 26).
fn program_name(index: u32) -> String {
    char::from(b'a' + index as u8).to_string()
}

/// The `bench-worker` arguments of `plan`, writing to `out`.
fn worker_args(plan: &Plan, out: &std::path::Path) -> Vec<String> {
    let sizes: Vec<String> = plan.sizes.iter().map(u64::to_string).collect();
    let mut args = vec![
        "bench-worker".to_string(),
        "--mode".into(),
        plan.mode.name().into(),
        "--sizes".into(),
        sizes.join(","),
        "--window".into(),
        plan.window.to_string(),
        "--out".into(),
        out.display().to_string(),
    ];
    for (flag, value) in [("--iters", plan.iters), ("--warmup", plan.warmup)] {
        if let Some(n) = value {
            args.extend([flag.to_string(), n.to_string()]);
        }
    }
    args
}

/// Launches one run of `shape` processes measuring `plan` and returns
/// universe rank 0's figures.
///
/// Errors: this executable cannot be found, the run fails (a worker's
/// message is on stderr) or times out, or its figures cannot be read.
pub fn run_tether(
    plan: &Plan,
    shape: Shape,
    timeout: Timeout,
    scratch: &Scratch,
) -> Result<Vec<Point>, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find the tether executable to start workers: {e}"))?;
    let out: PathBuf = scratch.join("tether-result.json");
    let _ = std::fs::remove_file(&out);
    let mut command = vec![exe.display().to_string()];
    command.extend(worker_args(plan, &out));
    let segments: Vec<Segment> = (0..shape.programs)
        .map(|p| Segment {
            name: program_name(p),
            ranks: Some(shape.procs),
            command: command.clone(),
            env: Vec::new(),
        })
        .collect();
    let code = run::execute(&segments, None, Some(timeout), run::BindTo::None)?;
    if code != 0 {
        return Err(format!(
            "the Tether run of {} exited with code {code} (see the messages above)",
            plan.mode.name()
        ));
    }
    let text = std::fs::read_to_string(&out)
        .map_err(|e| format!("the Tether run left no figures in {}: {e}", out.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("bad figures in {}: {e}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_arguments_carry_the_plan() {
        let plan = Plan {
            mode: Mode::Bw,
            sizes: vec![8, 1024],
            iters: Some(3),
            warmup: None,
            window: 4,
        };
        let args = worker_args(&plan, std::path::Path::new("/x/out.json"));
        assert_eq!(
            args.join(" "),
            "bench-worker --mode bw --sizes 8,1024 --window 4 --out /x/out.json --iters 3"
        );
        assert_eq!(program_name(0), "a");
        assert_eq!(program_name(2), "c");
    }
}

//! `tether run`: start every program of a coupled run on this machine
//! (DESIGN 3.9), relay their output, and end them together.

mod binding;
mod children;
mod environment;
mod relay;
pub(crate) mod segments;
mod signals;
mod supervise;

use std::process::{Command, ExitCode};
use std::time::Duration;

use clap::error::ErrorKind;
use clap::Args;
use tether_rendezvous::{Server, ServerHandle};

pub(crate) use binding::BindTo;
use children::Children;
use environment::{RunEnvironment, RunKey};
use segments::Segment;
pub(crate) use supervise::Timeout;

/// Exit code when a child's command cannot be started, as in a shell.
const START_FAILED: u8 = 127;

/// Start the programs of a coupled run on this machine.
#[derive(Args)]
#[command(
    override_usage = "tether run [--timeout S] [--rendezvous SPEC] [--bind-to core|none] \
                      --name NAME [-n N] [--env K=V]... CMD [ARGS...] [: --name NAME ...]...",
    after_help = "Each program gets TETHER_RENDEZVOUS, TETHER_PROGRAMS, TETHER_PROGRAM and \
                  TETHER_RUN_ID (yours when set, else a fresh one); with -n N it is started N \
                  times with TETHER_RANK and \
                  TETHER_SIZE, without -n once (it starts its own ranks, e.g. through mpiexec). \
                  --env K=V (repeatable, before the command, as mpirun -x K=V) sets K to V in \
                  the environment of that program's processes only; the launcher's own \
                  environment is passed on to every program as it is. \
                  Output lines are prefixed with [name:rank]. Without -n, a process's lines are \
                  [name:rank] from the moment it joins (tether_init: it connects its stdout \
                  and stderr to the launcher through TETHER_OUTPUT_RELAY), [name] before \
                  that and for processes that never join. When one \
                  process fails, the others get SIGTERM, then SIGKILL 3 s later, and the run \
                  exits with the failed process's code."
)]
pub struct RunArgs {
    /// End the run after S seconds and exit with 124.
    #[arg(long, value_name = "S", value_parser = parse_timeout)]
    timeout: Option<Timeout>,

    /// Pass this rendezvous (a directory or tcp://host:port) to the programs
    /// instead of serving one from the launcher.
    #[arg(long, value_name = "SPEC")]
    rendezvous: Option<String>,

    /// Place each process started with -n on one CPU of the launcher's,
    /// round-robin in command-line order (as mpirun --bind-to core); `none`
    /// leaves placement to the scheduler. Programs without -n are not bound.
    #[arg(long, value_enum, value_name = "WHAT", default_value = "none")]
    bind_to: BindTo,

    /// The programs, separated by `:`, each `--name NAME [-n N] [--env K=V]... CMD [ARGS...]`.
    #[arg(
        value_name = "PROGRAMS",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    programs: Vec<String>,
}

pub fn main(args: RunArgs) -> ExitCode {
    let segments = match segments::parse(&args.programs) {
        Ok(segments) => segments,
        Err(e) => usage_error(&e),
    };
    match execute(&segments, args.rendezvous, args.timeout, args.bind_to) {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("tether run: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Starts the rendezvous (unless one is given) and every child, and
/// supervises them; returns the run's exit code. `tether bench` launches
/// its workers through it too.
///
/// Errors: the signal handlers or the rendezvous server cannot be set up
/// (nothing was started then).
pub(crate) fn execute(
    segments: &[Segment],
    rendezvous: Option<String>,
    timeout: Option<Timeout>,
    bind_to: BindTo,
) -> Result<u8, String> {
    let cpus = match bind_to {
        BindTo::Core => Some(
            binding::allowed_cpus()
                .map_err(|e| format!("--bind-to core: cannot read this process's CPUs: {e}"))?,
        ),
        BindTo::None => None,
    };
    signals::install().map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let key = RunKey::for_this_run()?;
    let (spec, _server): (String, Option<ServerHandle>) = match rendezvous {
        Some(spec) => (spec, None),
        None => {
            let server = Server::bind("127.0.0.1:0")
                .and_then(|server| server.with_key(Some(key.key.clone())).spawn())
                .map_err(|e| e.to_string())?;
            (server.url(), Some(server))
        }
    };
    let environment = RunEnvironment::new(spec, segments, &key);
    let mut children = Children::new();
    let failed_start = start_all(segments, &environment, cpus.as_deref(), &mut children).err();
    Ok(supervise::supervise(&children, timeout, failed_start))
}

/// Starts every rank of every segment in command-line order, stopping at the
/// first that cannot be started; with `cpus`, each rank goes on one of
/// them, round-robin.
///
/// Errors: [`START_FAILED`], after printing which child and why.
fn start_all(
    segments: &[Segment],
    environment: &RunEnvironment,
    cpus: Option<&[usize]>,
    children: &mut Children,
) -> Result<(), u8> {
    let mut bound = 0;
    for segment in segments {
        let instances: Vec<(String, Option<(u32, u32)>)> = match segment.ranks {
            Some(size) => (0..size)
                .map(|rank| (format!("{}:{rank}", segment.name), Some((rank, size))))
                .collect(),
            None => vec![(segment.name.clone(), None)],
        };
        // Ranks behind the segment's own launcher label their output
        // through a relay (tether::output); without one, lines are [name].
        let relay = match segment.ranks {
            Some(_) => None,
            None => children
                .listen(&segment.name)
                .map_err(|e| {
                    eprintln!(
                        "tether run: no output relay for {} ({e}); its lines are labelled [{}] only",
                        segment.name, segment.name
                    )
                })
                .ok(),
        };
        for (label, rank) in instances {
            let mut command = Command::new(&segment.command[0]);
            command.args(&segment.command[1..]);
            command.envs(segment.env.iter().map(|(k, v)| (k, v)));
            environment.apply(&mut command, &segment.name, rank, relay.as_deref());
            if let (Some(cpus), Some(_)) = (cpus, rank) {
                binding::bind(&mut command, binding::cpu_for(cpus, bound));
                bound += 1;
            }
            if let Err(e) = children.start(label.clone(), command) {
                eprintln!(
                    "tether run: cannot start {label} ({}): {e}",
                    segment.command[0]
                );
                return Err(START_FAILED);
            }
        }
    }
    Ok(())
}

pub(crate) fn parse_timeout(text: &str) -> Result<Timeout, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    match Duration::try_from_secs_f64(seconds) {
        Ok(after) if seconds > 0.0 => Ok(Timeout { seconds, after }),
        _ => Err(format!(
            "{text:?}: the timeout must be a positive number of seconds"
        )),
    }
}

/// A SIGINT, SIGTERM or SIGHUP received since the last call (after
/// [`execute`] installed the handlers) and not yet passed on to children.
pub(crate) fn take_signal() -> Option<i32> {
    signals::take_pending()
}

/// Prints `error` with the usage of `tether run` and exits with 2.
fn usage_error(error: &dyn std::fmt::Display) -> ! {
    let mut command = RunArgs::augment_args(clap::Command::new("run").bin_name("tether run"));
    command.error(ErrorKind::ValueValidation, error).exit()
}

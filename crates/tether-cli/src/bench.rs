//! `tether bench`: OSU-style benchmarks of Tether, with baselines (raw
//! TCP, raw shared memory, memcpy, file, MPICH, ZeroMQ) measured by the same
//! invocation on the same machine, so that every figure reads as a ratio to
//! what the machine can do without Tether (DESIGN section 6).
//!
//! Each repetition launches the Tether workers once (every size) and then
//! runs each baseline once; figures are medians over the repetitions.

mod baselines;
mod launch;
mod machine;
mod mode;
mod report;
mod scratch;
mod sizes;
mod stats;
pub mod worker;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::ExitCode;

use clap::Args;

use crate::run::{self, Timeout};
use baselines::{Baseline, Context, Ready, Selection, Unavailable};
use launch::{Plan, Shape};
use machine::Machine;
use mode::Mode;
use report::{Report, Series, SeriesPoint, Status};
use scratch::Scratch;
use stats::Summary;
use worker::{Counts, Point};

/// Most programs a collective run may start (they are named a to z).
const MAX_PROGRAMS: u32 = 26;
/// Most processes per program or pairs (the machine's cores are the real
/// limit: beyond them, spinning libraries slow down sharply).
const MAX_PROCS: u32 = 64;

/// Measure Tether against baselines on this machine (OSU-style).
#[derive(Args, Debug)]
#[command(after_help = "\
Modes: latency (ping-pong), bw (window of non-blocking sends), bw_blocking \
(bw with blocking sends and receives), bibw (both directions), mbw_mr \
(several pairs: message rate), multi_rail (bw over TETHER_RAILS rails, \
default 2), allreduce, bcast, barrier. \
Baselines: raw_tcp, raw_shm, memcpy, file (built in), mpich (mpicc.mpich and \
mpiexec.mpich), zmq (cc and libzmq); one that is not installed or has no \
measurement for the mode is reported as skipped. Figures are medians of \
--reps runs with min and max; ratios are Tether / baseline.")]
pub struct BenchArgs {
    /// The benchmark to run.
    #[arg(value_enum)]
    mode: Mode,

    /// TETHER_TRANSPORTS for the Tether processes (e.g. tcp, shm, shm,tcp);
    /// default: the environment's, else the runtime's default.
    #[arg(long, value_name = "LIST")]
    transport: Option<String>,

    /// Message sizes, e.g. 8,1K,64K,1M (suffixes K, M, G are powers of 1024).
    #[arg(long, value_name = "LIST", value_parser = sizes::parse_list, conflicts_with_all = ["min", "max"])]
    sizes: Option<::std::vec::Vec<u64>>,

    /// Smallest size of a power-of-two range (with --max).
    #[arg(long, value_name = "SIZE", value_parser = sizes::parse_size, requires = "max")]
    min: Option<u64>,

    /// Largest size of a power-of-two range (with --min, default 1).
    #[arg(long, value_name = "SIZE", value_parser = sizes::parse_size)]
    max: Option<u64>,

    /// Timed iterations per size (windows for bw, bibw, mbw_mr);
    /// default: by size, OSU-like.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    iters: Option<u64>,

    /// Untimed iterations before the timed ones; default: a tenth of them.
    #[arg(long, value_name = "N")]
    warmup: Option<u64>,

    /// Messages in flight per window (bw, bibw, mbw_mr, multi_rail).
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    window: u32,

    /// Sender/receiver pairs of mbw_mr (default 2).
    #[arg(long, value_name = "N")]
    pairs: Option<u32>,

    /// Programs of a collective run (default 2).
    #[arg(long, value_name = "N")]
    programs: Option<u32>,

    /// Processes per program of a collective run (default 1).
    #[arg(long, value_name = "N")]
    procs: Option<u32>,

    /// TETHER_RAILS of multi_rail (default 2).
    #[arg(long, value_name = "N")]
    rails: Option<u32>,

    /// Repetitions of every measurement (median, min and max are reported).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    reps: u32,

    /// none, all, or a list of raw_tcp, raw_shm, memcpy, file, mpich, zmq.
    #[arg(long, value_name = "LIST", default_value = "all", value_parser = baselines::parse_selection)]
    baselines: Selection,

    /// Print the report as JSON (schema in docs/BENCHMARKS.md).
    #[arg(long)]
    json: bool,

    /// Limit for each launch of Tether or a baseline, in seconds.
    #[arg(long, value_name = "S", default_value = "300", value_parser = run::parse_timeout)]
    timeout: Timeout,
}

pub fn main(args: BenchArgs) -> ExitCode {
    match execute(&args) {
        Ok(report) => {
            let text = if args.json {
                serde_json::to_string_pretty(&report).expect("a report serializes") + "\n"
            } else {
                report.table()
            };
            let _ = std::io::stdout().write_all(text.as_bytes());
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("tether bench: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The launch shape of `args.mode`, with the options that do not apply to
/// it rejected.
fn shape(args: &BenchArgs) -> Result<Shape, String> {
    let only = |given: bool, option: &str, modes: &str| {
        if given {
            Err(format!(
                "{option} applies to {modes} only, not to {}",
                args.mode.name()
            ))
        } else {
            Ok(())
        }
    };
    let collective = args.mode.collective();
    only(
        args.pairs.is_some() && args.mode != Mode::MbwMr,
        "--pairs",
        "mbw_mr",
    )?;
    only(
        args.programs.is_some() && !collective,
        "--programs",
        "allreduce, bcast and barrier",
    )?;
    only(
        args.procs.is_some() && !collective,
        "--procs",
        "allreduce, bcast and barrier",
    )?;
    only(
        args.rails.is_some() && args.mode != Mode::MultiRail,
        "--rails",
        "multi_rail",
    )?;
    let check = |value: u32, option: &str, min: u32, max: u32| {
        if (min..=max).contains(&value) {
            Ok(value)
        } else {
            Err(format!("{option} {value} is out of range {min}..={max}"))
        }
    };
    Ok(if collective {
        Shape {
            programs: check(args.programs.unwrap_or(2), "--programs", 1, MAX_PROGRAMS)?,
            procs: check(args.procs.unwrap_or(1), "--procs", 1, MAX_PROCS)?,
        }
    } else {
        Shape {
            programs: 2,
            procs: check(
                args.pairs
                    .unwrap_or(if args.mode == Mode::MbwMr { 2 } else { 1 }),
                "--pairs",
                1,
                MAX_PROCS,
            )?,
        }
    })
}

/// The sizes to measure, checked against the mode.
fn chosen_sizes(args: &BenchArgs) -> Result<Vec<u64>, String> {
    let sizes = match (&args.sizes, args.min, args.max) {
        (Some(list), _, _) => list.clone(),
        (None, min, Some(max)) => sizes::range(min.unwrap_or(1), max)?,
        (None, _, None) => args.mode.default_sizes(),
    };
    if args.mode == Mode::Barrier {
        return Ok(vec![0]);
    }
    let min = args.mode.min_size();
    match sizes.iter().find(|s| **s < min) {
        Some(s) => Err(format!(
            "{} needs sizes of at least {min} bytes, not {s}",
            args.mode.name()
        )),
        None => Ok(sizes),
    }
}

/// Sets the Tether settings of this benchmark in this process's
/// environment (inherited by the workers) and returns the effective
/// transports. Called before any thread starts.
fn configure(args: &BenchArgs) -> Result<String, String> {
    if let Some(list) = &args.transport {
        tether::settings::validate("TRANSPORTS", list).map_err(|e| format!("--transport: {e}"))?;
        std::env::set_var("TETHER_TRANSPORTS", list);
    }
    if args.mode == Mode::MultiRail {
        let rails = args.rails.unwrap_or(2);
        if rails < 1 {
            return Err("--rails must be at least 1".into());
        }
        std::env::set_var("TETHER_RAILS", rails.to_string());
    }
    let (settings, _) = tether::settings::Settings::from_env().map_err(|e| e.to_string())?;
    Ok(settings.transports().join(","))
}

/// Whether the transports are `tcp` alone: MPICH is then measured over TCP
/// too. (`hybrid` uses shared memory between processes of one host, as
/// MPICH's default channel does.)
fn over_sockets(transports: &str) -> bool {
    transports.split(',').map(str::trim).eq(["tcp"])
}

/// The command line, quoted where needed, to reproduce the run.
fn command_line() -> String {
    let mut words = vec!["tether".to_string()];
    words.extend(std::env::args().skip(1).map(|w| {
        if !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || ",._-=/:".contains(c))
        {
            w
        } else {
            format!("'{}'", w.replace('\'', "'\\''"))
        }
    }));
    words.join(" ")
}

/// Samples per series name and size, in repetition order.
type Samples = BTreeMap<u64, Vec<f64>>;

fn record(samples: &mut Samples, points: &[Point]) {
    for p in points {
        samples.entry(p.size).or_default().push(p.value);
    }
}

fn series(name: &str, description: String, outcome: Result<Samples, Unavailable>) -> Series {
    let (status, note, samples) = match outcome {
        Ok(samples) => (Status::Ran, None, samples),
        Err(Unavailable::Skipped(why)) => (Status::Skipped, Some(why), Samples::new()),
        Err(Unavailable::Failed(why)) => (Status::Failed, Some(why), Samples::new()),
    };
    let points = samples
        .into_iter()
        .filter_map(|(size, values)| {
            Summary::of(&values).map(|summary| SeriesPoint {
                size,
                summary,
                ratio: None,
            })
        })
        .collect();
    Series {
        name: name.into(),
        status,
        note,
        description,
        points,
    }
}

fn progress(line: &str) {
    eprintln!("tether bench: {line}");
}

/// One baseline of this invocation: ready to run or why it has no figures,
/// and its samples so far.
struct Entry {
    baseline: Baseline,
    state: Result<Ready, Unavailable>,
    samples: Samples,
}

fn execute(args: &BenchArgs) -> Result<Report, String> {
    let shape = shape(args)?;
    let sizes = chosen_sizes(args)?;
    let transports = configure(args)?;
    let machine = Machine::describe();
    let scratch = Scratch::new()?;
    let ctx = Context {
        mode: args.mode,
        plan: sizes
            .iter()
            .map(|s| (*s, Counts::new(args.mode, args.iters, args.warmup, *s)))
            .collect(),
        window: args.window,
        shape,
        tcp: over_sockets(&transports),
        limit: args.timeout.after,
        scratch: &scratch,
    };
    let plan = Plan {
        mode: args.mode,
        sizes,
        iters: args.iters,
        warmup: args.warmup,
        window: args.window,
    };
    let mut entries = entries(args, |b| baselines::prepare(b, &ctx));
    let tether = repeat(args, &plan, &ctx, &mut entries)?;
    let description = format!(
        "Tether, TETHER_TRANSPORTS={transports}, {} program(s) of {} process(es)",
        shape.programs, shape.procs
    );
    let mut all = vec![series("tether", description, Ok(tether))];
    all.extend(entries.into_iter().map(|e| {
        let description = e.baseline.describe(args.mode, ctx.tcp);
        series(e.baseline.name(), description, e.state.map(|_| e.samples))
    }));
    let metric = args.mode.metric();
    let mut report = Report {
        schema: 1,
        version: tether::VERSION,
        mode: args.mode,
        metric,
        unit: metric.unit(),
        higher_is_better: metric.higher_is_better(),
        transports,
        programs: shape.programs,
        procs_per_program: shape.procs,
        window: args.mode.windowed().then_some(args.window),
        reps: args.reps,
        iters: args.iters,
        warmup: args.warmup,
        machine,
        command: command_line(),
        series: all,
    };
    report.add_ratios();
    Ok(report)
}

/// The selected baselines of the mode, each in the state `prepare` gives.
fn entries(
    args: &BenchArgs,
    prepare: impl Fn(Baseline) -> Result<Ready, Unavailable>,
) -> Vec<Entry> {
    args.baselines
        .for_mode(args.mode)
        .into_iter()
        .map(|baseline| Entry {
            baseline,
            state: prepare(baseline),
            samples: Samples::new(),
        })
        .collect()
}

/// Runs the repetitions: Tether once for every size, then each ready
/// baseline once (a baseline that fails is not run again). Returns
/// Tether's samples.
///
/// Errors: a Tether run fails, or a signal asks the harness to stop.
fn repeat(
    args: &BenchArgs,
    plan: &Plan,
    ctx: &Context,
    entries: &mut [Entry],
) -> Result<Samples, String> {
    let mut tether = Samples::new();
    for rep in 1..=args.reps {
        let step = |what: &str| {
            progress(&format!(
                "{} repetition {rep}/{}: {what}",
                args.mode.name(),
                args.reps
            ))
        };
        step("tether");
        let points = launch::run_tether(plan, ctx.shape, args.timeout, ctx.scratch)?;
        record(&mut tether, &points);
        for entry in entries.iter_mut() {
            let Ok(ready) = &entry.state else { continue };
            step(entry.baseline.name());
            match ready.run(ctx) {
                Ok(points) => record(&mut entry.samples, &points),
                Err(e) => entry.state = Err(Unavailable::Failed(e)),
            }
            if let Some(signal) = run::take_signal() {
                return Err(format!("stopped by signal {signal}"));
            }
        }
    }
    Ok(tether)
}

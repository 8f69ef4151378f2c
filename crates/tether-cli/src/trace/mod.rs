//! `tether trace merge|summary`: reading the traces `TETHER_TRACE=<dir>`
//! leaves (docs/tracing.md).

mod load;
mod merge;
mod pairs;
mod plot;
mod summary;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

/// Merge or summarise the per-process traces of a run (TETHER_TRACE=<dir>).
#[derive(Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Subcommand)]
enum TraceCommand {
    /// One Chrome trace-event file (Perfetto, chrome://tracing): a track per
    /// process grouped by program, clocks aligned, an arrow from every send
    /// to its receive.
    Merge {
        /// The directory TETHER_TRACE named.
        dir: PathBuf,
        /// The file to write.
        #[arg(short, long, default_value = "run.json")]
        output: PathBuf,
    },
    /// Who waited for whom: time waiting per program, waiting by the
    /// program waited for, bytes per pair of programs and transport.
    Summary {
        /// The directory TETHER_TRACE named.
        dir: PathBuf,
        /// Also draw the waiting matrix and every process's waits over
        /// time into this PNG (python3 with matplotlib).
        #[arg(long, value_name = "FILE")]
        plot: Option<PathBuf>,
    },
}

pub fn main(args: TraceArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tether trace: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: TraceArgs) -> Result<(), String> {
    match args.command {
        TraceCommand::Merge { dir, output } => {
            let processes = load::load(&dir)?;
            let merged = merge::merge(&processes);
            let unaligned = processes.iter().filter(|p| p.clock_samples() == 0).count();
            let document =
                serde_json::json!({"traceEvents": merged.events, "displayTimeUnit": "ns"});
            let text = serde_json::to_string(&document).map_err(|e| e.to_string())?;
            std::fs::write(&output, text).map_err(|e| format!("{}: {e}", output.display()))?;
            println!(
                "tether trace: {} processes, {} sends, {} paired with their receive; wrote {}",
                processes.len(),
                merged.sends,
                merged.flows,
                output.display()
            );
            if unaligned > 0 {
                println!("tether trace: {unaligned} processes carry no clock measurement: their times are their host's");
            }
            Ok(())
        }
        TraceCommand::Summary { dir, plot } => {
            let processes = load::load(&dir)?;
            let summary = summary::summary(&processes);
            print!("{}", summary.text);
            if let Some(png) = plot {
                plot::draw(&summary.plot, &png)?;
                println!("tether trace: plot written to {}", png.display());
            }
            Ok(())
        }
    }
}

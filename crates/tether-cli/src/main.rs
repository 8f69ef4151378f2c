//! The `tether` command. Each subcommand lives in its own module, which
//! owns its arguments (`XArgs`) and its `main`; this file only dispatches.

mod bench;
mod info;
mod key;
mod rendezvous;
mod run;
mod trace;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tether",
    version,
    about = "Launch, inspect, benchmark and trace Tether coupled runs."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Run(run::RunArgs),
    Info(info::InfoArgs),
    Key(key::KeyArgs),
    Bench(bench::BenchArgs),
    /// One process of a `tether bench` run (started by the harness).
    #[command(hide = true)]
    BenchWorker(bench::worker::WorkerArgs),
    Rendezvous(rendezvous::RendezvousArgs),
    Trace(trace::TraceArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(args) => run::main(args),
        Command::Info(args) => info::main(args),
        Command::Key(args) => key::main(args),
        Command::Bench(args) => bench::main(args),
        Command::BenchWorker(args) => bench::worker::main(args),
        Command::Rendezvous(args) => rendezvous::main(args),
        Command::Trace(args) => trace::main(args),
    }
}

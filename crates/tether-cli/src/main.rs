//! The `tether` command. Each subcommand lives in its own module, which
//! owns its arguments (`XArgs`) and its `main`; this file only dispatches.

mod rendezvous;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tether",
    version,
    about = "Launch and inspect Tether coupled runs."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Run(run::RunArgs),
    Rendezvous(rendezvous::RendezvousArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(args) => run::main(args),
        Command::Rendezvous(args) => rendezvous::main(args),
    }
}

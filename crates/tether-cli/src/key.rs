//! `tether key new FILE`: a fresh key for programs launched separately,
//! which share it through `TETHER_KEY_FILE`. (`tether run` makes its own
//! key for every run and needs none.)

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

/// Make keys that authenticate the processes of a run.
#[derive(Args)]
pub struct KeyArgs {
    #[command(subcommand)]
    command: KeyCommand,
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Write a fresh random key to FILE (which must not exist), readable
    /// by its owner only (mode 0600). Give every program of the run
    /// TETHER_KEY_FILE=FILE; the key itself is never printed.
    New { file: PathBuf },
}

pub fn main(args: KeyArgs) -> ExitCode {
    match args.command {
        KeyCommand::New { file } => match tether_auth::write_new_key_file(&file) {
            Ok(()) => {
                println!(
                    "wrote a new key to {}; give the programs TETHER_KEY_FILE={}",
                    file.display(),
                    file.display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("tether key new: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

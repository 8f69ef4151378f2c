//! `tether rendezvous serve`: a stand-alone rendezvous server for programs
//! launched separately (different jobs or systems).

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use tether::settings::Settings;
use tether_rendezvous::Server;

/// Run a TCP rendezvous server for separately launched programs.
#[derive(Args)]
pub struct RendezvousArgs {
    #[command(subcommand)]
    command: RendezvousCommand,
}

#[derive(Subcommand)]
enum RendezvousCommand {
    /// Serve until killed. The first line on stdout is the url
    /// (tcp://host:port) to give the programs as TETHER_RENDEZVOUS. With
    /// TETHER_KEY_FILE (or TETHER_KEY) set, as the programs have it, the
    /// server takes only entries sealed with that key.
    Serve {
        /// Address to listen on (host:port; port 0 picks a free port).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
        bind: String,
    },
}

pub fn main(args: RendezvousArgs) -> ExitCode {
    match args.command {
        RendezvousCommand::Serve { bind } => serve(&bind),
    }
}

/// Never returns once the url is printed; fails when the address cannot be
/// bound or stdout cannot be written.
fn serve(bind: &str) -> ExitCode {
    let key = match Settings::from_env()
        .map_err(|e| e.message)
        .and_then(|(settings, _)| tether::auth::run_key(&settings).map_err(|e| e.message))
    {
        Ok(key) => key,
        Err(message) => {
            eprintln!("tether rendezvous serve: {message}");
            return ExitCode::FAILURE;
        }
    };
    if key.is_none() {
        eprintln!("tether rendezvous serve: no key (TETHER_KEY_FILE is unset): anyone who reaches this server may write its entries");
    }
    let server = match Server::bind(bind).map(|server| server.with_key(key)) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("tether rendezvous serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{}", server.url()).and_then(|()| stdout.flush()) {
        eprintln!("tether rendezvous serve: cannot print the url: {e}");
        return ExitCode::FAILURE;
    }
    drop(stdout);
    server.serve_forever()
}

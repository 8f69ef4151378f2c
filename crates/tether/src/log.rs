//! Logging: `TETHER_LOG_LEVEL` and `TETHER_LOG_FILE`, through `tracing`;
//! repeated warnings are aggregated ([`crate::repeats`]).

use std::fs::OpenOptions;
use std::io::IsTerminal;
use std::sync::Mutex;

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::repeats::RepeatFilter;

use crate::settings::Settings;

/// Installs the log subscriber once per process; later calls do nothing.
/// `%r` in the file name becomes `rank` (the universe rank, or the program
/// rank before the universe exists).
pub fn init(settings: &Settings, rank: u32) {
    let level = match settings.log_level() {
        "off" => LevelFilter::OFF,
        "error" => LevelFilter::ERROR,
        "info" => LevelFilter::INFO,
        "debug" => LevelFilter::DEBUG,
        "trace" => LevelFilter::TRACE,
        _ => LevelFilter::WARN,
    };
    let builder = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_target(false);
    let file = settings
        .log_file()
        .map(|f| f.replace("%r", &rank.to_string()))
        .and_then(
            |path| match OpenOptions::new().create(true).append(true).open(&path) {
                Ok(f) => Some(f),
                Err(e) => {
                    eprintln!(
                        "tether: cannot open TETHER_LOG_FILE {path:?}: {e}; logging to stderr"
                    );
                    None
                }
            },
        );
    let _ = match file {
        Some(f) => builder
            .with_ansi(false)
            .with_writer(Mutex::new(f))
            .finish()
            .with(RepeatFilter)
            .try_init(),
        None => builder
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .finish()
            .with(RepeatFilter)
            .try_init(),
    };
}

//! `tether info`: the version, the transports and every setting with its
//! effective value (from this environment) and meaning, all from the one
//! settings table of the runtime.

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use clap::Args;
use tether::settings::{Origin, Settings, TABLE};

/// Print the version, the transports and every TETHER_* setting.
#[derive(Args)]
pub struct InfoArgs {
    /// Print the settings as a Markdown table (as in docs/SETTINGS.md).
    #[arg(long)]
    markdown: bool,
}

pub fn main(args: InfoArgs) -> ExitCode {
    let (settings, warnings) = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tether info: {e}");
            return ExitCode::from(1);
        }
    };
    let text = if args.markdown {
        markdown()
    } else {
        report(&settings, &warnings)
    };
    // A closed pipe (`tether info | head`) is not an error worth a panic.
    let _ = std::io::stdout().write_all(text.as_bytes());
    ExitCode::SUCCESS
}

fn report(settings: &Settings, warnings: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "tether {}", tether::VERSION);
    let _ = writeln!(
        out,
        "host id: {} (peers with the same one are on this host)",
        tether::host::host_id(settings.host_id())
    );
    let _ = writeln!(out, "transports:");
    for (name, usable) in tether::transport::availability() {
        let text = usable.unwrap_or_else(|why| why);
        let _ = writeln!(out, "  {name:<8} {text}");
    }
    let _ = writeln!(
        out,
        "settings (environment variable = effective value [origin]):"
    );
    for s in TABLE {
        let value = settings.get(s.key).unwrap_or("");
        let origin = match settings.origin(s.key) {
            Some(Origin::Environment) => "environment",
            Some(Origin::Hint) => "hint",
            _ => "default",
        };
        let shown = if value.is_empty() { "(unset)" } else { value };
        let hint = if s.hint { ", also a hint" } else { "" };
        let _ = writeln!(out, "  TETHER_{} = {shown} [{origin}{hint}]", s.key);
        let _ = writeln!(out, "      {}", s.meaning);
    }
    for w in warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

fn markdown() -> String {
    let mut out = String::from("| variable | default | hint | meaning |\n|---|---|---|---|\n");
    for s in TABLE {
        let default = if s.default.is_empty() {
            "(unset)".to_string()
        } else {
            format!("`{}`", s.default)
        };
        let hint = if s.hint { "yes" } else { "no" };
        let _ = writeln!(
            out,
            "| `TETHER_{}` | {default} | {hint} | {} |",
            s.key,
            s.meaning.replace('|', "\\|")
        );
    }
    out
}

//! `tether trace summary --plot`: the drawing is matplotlib's, run by
//! the system's python3 on the summary's data (the script is compiled
//! into the command, so nothing needs installing but matplotlib).

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

const SCRIPT: &str = include_str!("plot.py");

/// Draws `data` (`summary::Summary::plot`) into the PNG `png`.
pub fn draw(data: &Value, png: &Path) -> Result<(), String> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string());
    let mut child = Command::new(&python)
        .args(["-c", SCRIPT])
        .arg(png)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!("--plot needs {python} with matplotlib: cannot start {python}: {e}")
        })?;
    let text = data.to_string();
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| format!("--plot: writing to {python}: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("--plot: {python}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "--plot: {python} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

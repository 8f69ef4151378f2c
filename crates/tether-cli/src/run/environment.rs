//! The `TETHER_*` variables that tell each child who it is and where the
//! others are (DESIGN 3.9).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::process::Command;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tether::settings::Settings;
use tether_auth::Key;

use super::segments::Segment;

pub const RENDEZVOUS: &str = "TETHER_RENDEZVOUS";
pub const PROGRAMS: &str = "TETHER_PROGRAMS";
pub const PROGRAM: &str = "TETHER_PROGRAM";
pub const RUN_ID: &str = "TETHER_RUN_ID";
pub const RANK: &str = "TETHER_RANK";
pub const SIZE: &str = "TETHER_SIZE";
pub const LOCAL_PROCESSES: &str = "TETHER_LOCAL_PROCESSES";
pub const OUTPUT_RELAY: &str = "TETHER_OUTPUT_RELAY";
pub const KEY: &str = "TETHER_KEY";
pub const KEY_FILE: &str = "TETHER_KEY_FILE";

/// What [`RunEnvironment::apply`] sets (or removes) for each process:
/// `--env` may not set these, or the run would not hold together.
pub const SET_PER_PROCESS: &[&str] = &[
    RENDEZVOUS,
    PROGRAMS,
    PROGRAM,
    RUN_ID,
    RANK,
    SIZE,
    LOCAL_PROCESSES,
    OUTPUT_RELAY,
    KEY,
    KEY_FILE,
];

/// What every child of one run shares.
#[derive(Debug, Clone)]
pub struct RunEnvironment {
    rendezvous: String,
    programs: String,
    run_id: String,
    /// The run's key, made for this run; `None` when the launcher's own
    /// environment names one (`TETHER_KEY` or `TETHER_KEY_FILE`), which
    /// the children then inherit, so that the run can couple with
    /// programs launched separately with the same key file.
    key: Option<String>,
    /// Processes started here: the ranks of every `-n` segment, and one
    /// for each segment that starts its own ranks (at least one).
    local_processes: u32,
}

impl RunEnvironment {
    /// The run id (the user's `TETHER_RUN_ID` when set, else a fresh
    /// one), the rendezvous spec, and the program names in command-line
    /// order.
    pub fn new(rendezvous: String, segments: &[Segment], key: &RunKey) -> RunEnvironment {
        let names: Vec<&str> = segments.iter().map(|s| s.name.as_str()).collect();
        let run_id = std::env::var(RUN_ID)
            .ok()
            .filter(|id| !id.is_empty())
            .unwrap_or_else(new_run_id);
        RunEnvironment {
            rendezvous,
            programs: names.join(","),
            run_id,
            key: key.made.clone(),
            local_processes: segments.iter().map(|s| s.ranks.unwrap_or(1)).sum(),
        }
    }

    /// Sets the variables on `command` for `program`; `rank` is
    /// `Some((rank, size))` for a segment with `-n`. Without it, inherited
    /// `TETHER_RANK`/`TETHER_SIZE` are removed so that the program takes its
    /// identity from its MPI launcher instead. `relay` is the program's
    /// output relay (`TETHER_OUTPUT_RELAY`), for a segment without `-n`;
    /// an inherited one is removed otherwise.
    pub fn apply(
        &self,
        command: &mut Command,
        program: &str,
        rank: Option<(u32, u32)>,
        relay: Option<&str>,
    ) {
        match relay {
            Some(relay) => command.env(OUTPUT_RELAY, relay),
            None => command.env_remove(OUTPUT_RELAY),
        };
        command
            .env(RENDEZVOUS, &self.rendezvous)
            .env(PROGRAMS, &self.programs)
            .env(PROGRAM, program)
            .env(RUN_ID, &self.run_id)
            .env(LOCAL_PROCESSES, self.local_processes.to_string());
        if let Some(key) = &self.key {
            command.env(KEY, key);
        }
        match rank {
            Some((rank, size)) => command
                .env(RANK, rank.to_string())
                .env(SIZE, size.to_string()),
            None => command.env_remove(RANK).env_remove(SIZE),
        };
    }
}

/// The run's key: the one the launcher's environment names (`TETHER_KEY`
/// or `TETHER_KEY_FILE`), which the children inherit, else a fresh one
/// made for this run and handed to them.
pub struct RunKey {
    pub key: Arc<Key>,
    /// The text of a key made for this run (to set as `TETHER_KEY`).
    made: Option<String>,
}

impl RunKey {
    /// Errors: the key the environment names cannot be used (too short,
    /// a key file missing or readable by others), said with the setting
    /// or the file; nothing was started then.
    pub fn for_this_run() -> Result<RunKey, String> {
        let (settings, _) = Settings::from_env().map_err(|e| e.message)?;
        if let Some(key) = tether::auth::run_key(&settings).map_err(|e| e.message)? {
            return Ok(RunKey { key, made: None });
        }
        let text = Key::generate_text();
        let key = Key::new(text.as_bytes(), "a fresh key").map_err(|e| e.to_string())?;
        Ok(RunKey {
            key: Arc::new(key),
            made: Some(text),
        })
    }
}

/// 16 hex digits. `RandomState` is seeded from the operating system's
/// randomness, which is all a run id needs, without another dependency.
fn new_run_id() -> String {
    let mut hasher = RandomState::new().build_hasher();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(nanos);
    hasher.write_u32(std::process::id());
    format!("{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_16_hex_digits_and_differ() {
        let a = new_run_id();
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, new_run_id());
    }
}

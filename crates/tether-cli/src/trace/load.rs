//! Reading a trace directory (`TETHER_TRACE`): one `<program>.<rank>.jsonl`
//! per process (format: docs/tracing.md), times aligned to universe rank
//! 0's clock with the offsets each process measured.

use std::fs;
use std::path::Path;

use serde_json::Value;

/// One process's trace.
pub struct Process {
    pub program: String,
    pub program_id: u64,
    pub rank: u64,
    pub universe_rank: u64,
    /// (local time, offset) samples, by local time.
    clock: Vec<(i64, i64)>,
    pub spans: Vec<Span>,
}

/// One span, its times aligned to rank 0's clock.
pub struct Span {
    pub what: String,
    pub start: i64,
    pub end: i64,
    pub peer: Option<u64>,
    pub transport: Option<String>,
    pub context: Option<u64>,
    pub tag: Option<i64>,
    pub bytes: u64,
    pub ordinal: Option<u64>,
    pub name: Option<String>,
    pub step: Option<i64>,
}

impl Process {
    /// `local` in rank 0's clock: the offset interpolated between the
    /// measurements (join and finalize), the nearest one outside them.
    pub fn align(&self, local: i64) -> i64 {
        local + offset_at(&self.clock, local)
    }

    /// Which program and rank, as `tether run` labels them.
    pub fn label(&self) -> String {
        format!("{}:{}", self.program, self.rank)
    }

    /// How many clock measurements it carries (0: its times are its own).
    pub fn clock_samples(&self) -> usize {
        self.clock.len()
    }
}

fn offset_at(clock: &[(i64, i64)], t: i64) -> i64 {
    match clock {
        [] => 0,
        [(_, only)] => *only,
        _ => {
            let (first, last) = (clock[0], clock[clock.len() - 1]);
            if t <= first.0 || last.0 == first.0 {
                first.1
            } else if t >= last.0 {
                last.1
            } else {
                let fraction = (t - first.0) as f64 / (last.0 - first.0) as f64;
                first.1 + ((last.1 - first.1) as f64 * fraction).round() as i64
            }
        }
    }
}

/// Every process's trace in `dir`, by universe rank.
pub fn load(dir: &Path) -> Result<Vec<Process>, String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut processes = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            processes.push(load_file(&path)?);
        }
    }
    if processes.is_empty() {
        return Err(format!(
            "{}: no trace files (<program>.<rank>.jsonl); was the run started with TETHER_TRACE={}?",
            dir.display(),
            dir.display()
        ));
    }
    processes.sort_by_key(|p| p.universe_rank);
    Ok(processes)
}

fn load_file(path: &Path) -> Result<Process, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines().enumerate();
    let bad = |n: usize, why: &str| format!("{}:{}: {why}", path.display(), n + 1);
    let (n, first) = lines.next().ok_or_else(|| bad(0, "empty file"))?;
    let head: Value = serde_json::from_str(first).map_err(|e| bad(n, &e.to_string()))?;
    if head["tether_trace"].as_u64() != Some(1) {
        return Err(bad(
            n,
            "not a Tether trace of format 1 (first line lacks \"tether_trace\":1)",
        ));
    }
    let field = |v: &Value, key: &str, n: usize| {
        v[key]
            .as_u64()
            .ok_or_else(|| bad(n, &format!("\"{key}\" is missing or not a number")))
    };
    let mut process = Process {
        program: head["program"].as_str().unwrap_or("?").to_string(),
        program_id: field(&head, "program_id", n)?,
        rank: field(&head, "rank", n)?,
        universe_rank: field(&head, "universe_rank", n)?,
        clock: Vec::new(),
        spans: Vec::new(),
    };
    let mut raw = Vec::new();
    for (n, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| bad(n, &e.to_string()))?;
        if v.get("clock").is_some() {
            let local = v["local"]
                .as_i64()
                .ok_or_else(|| bad(n, "clock without \"local\""))?;
            let offset = v["offset"]
                .as_i64()
                .ok_or_else(|| bad(n, "clock without \"offset\""))?;
            process.clock.push((local, offset));
            continue;
        }
        let what = v["what"]
            .as_str()
            .ok_or_else(|| bad(n, "a span without \"what\""))?;
        let start = v["start"]
            .as_i64()
            .ok_or_else(|| bad(n, "a span without \"start\""))?;
        let end = v["end"]
            .as_i64()
            .ok_or_else(|| bad(n, "a span without \"end\""))?;
        raw.push(Span {
            what: what.to_string(),
            start,
            end,
            peer: v["peer"].as_u64(),
            transport: v["transport"].as_str().map(str::to_string),
            context: v["context"].as_u64(),
            tag: v["tag"].as_i64(),
            bytes: v["bytes"].as_u64().unwrap_or(0),
            ordinal: v["ordinal"].as_u64(),
            name: v["name"].as_str().map(str::to_string),
            step: v["step"].as_i64(),
        });
    }
    process.clock.sort();
    for mut span in raw {
        span.start = process.align(span.start);
        span.end = process.align(span.end);
        process.spans.push(span);
    }
    Ok(process)
}

#[cfg(test)]
mod tests {
    use super::offset_at;

    #[test]
    fn offsets_interpolate_between_join_and_finalize() {
        let clock = [(1000, 50), (3000, 70)];
        assert_eq!(offset_at(&clock, 0), 50);
        assert_eq!(offset_at(&clock, 2000), 60);
        assert_eq!(offset_at(&clock, 9000), 70);
        assert_eq!(offset_at(&[(5, -7)], 100), -7);
        assert_eq!(offset_at(&[], 100), 0);
    }
}

//! The result of one `tether bench` invocation: its JSON form (`--json`)
//! and the table printed by default.
//!
//! JSON schema (version 1): an object with `schema` (1), `version` (of
//! Tether), `mode`, `metric` (`latency_us`, `bandwidth_mb_s`,
//! `messages_per_s`), `unit`, `higher_is_better`, `transports` (the
//! effective TETHER_TRANSPORTS), `programs`, `procs_per_program`, `window`,
//! `reps`, `iters` and `warmup` (null: the mode's defaults per size),
//! `machine` (`cpu`, `logical_cpus`, `kernel`, `os`, `load_average`),
//! `command` (the command line that reproduces the run) and `series`: one
//! per measured thing, Tether first, each with `name`, `status` (`ran`,
//! `skipped`, `failed`), `note` (why skipped or failed, or a remark),
//! `description` and `points`: per size `size` (bytes), `median`, `min`,
//! `max`, `samples` (one per repetition) and, for baselines, `ratio`:
//! Tether's median divided by the baseline's.

use std::fmt::Write as _;

use serde::Serialize;

use super::machine::Machine;
use super::mode::{Metric, Mode};
use super::sizes::human;
use super::stats::Summary;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: u32,
    pub version: &'static str,
    pub mode: Mode,
    pub metric: Metric,
    pub unit: &'static str,
    pub higher_is_better: bool,
    pub transports: String,
    pub programs: u32,
    pub procs_per_program: u32,
    pub window: Option<u32>,
    pub reps: u32,
    pub iters: Option<u64>,
    pub warmup: Option<u64>,
    pub machine: Machine,
    pub command: String,
    pub series: Vec<Series>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ran,
    Skipped,
    Failed,
}

#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub name: String,
    pub status: Status,
    pub note: Option<String>,
    pub description: String,
    pub points: Vec<SeriesPoint>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SeriesPoint {
    pub size: u64,
    #[serde(flatten)]
    pub summary: Summary,
    pub ratio: Option<f64>,
}

impl Report {
    /// Fills in each baseline point's ratio: Tether's median over the
    /// baseline's at the same size (the first series is Tether's).
    pub fn add_ratios(&mut self) {
        let Some((tether, baselines)) = self.series.split_first_mut() else {
            return;
        };
        for point in baselines.iter_mut().flat_map(|s| s.points.iter_mut()) {
            point.ratio = tether
                .points
                .iter()
                .find(|t| t.size == point.size)
                .filter(|_| point.summary.median > 0.0)
                .map(|t| t.summary.median / point.summary.median);
        }
    }

    /// The human-readable report: a header, one row per size with Tether
    /// and each baseline that ran (median, min-max, ratio), then notes.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# tether bench {}: transports {}, {} program(s) x {} process(es){}, {} repetition(s)",
            self.mode.name(),
            self.transports,
            self.programs,
            self.procs_per_program,
            self.window
                .map_or(String::new(), |w| format!(", window {w}")),
            self.reps
        );
        let _ = writeln!(out, "# machine: {}", self.machine.summary());
        let _ = writeln!(
            out,
            "# {} in {}, median (min-max); ratio = Tether / baseline ({})",
            if self.higher_is_better {
                "higher is better"
            } else {
                "lower is better"
            },
            self.unit,
            if self.higher_is_better {
                "below 1: Tether slower"
            } else {
                "above 1: Tether slower"
            }
        );
        let ran: Vec<&Series> = self
            .series
            .iter()
            .filter(|s| s.status == Status::Ran)
            .collect();
        let mut header = String::from("| size |");
        let mut rule = String::from("|---:|");
        for (i, s) in ran.iter().enumerate() {
            let _ = write!(header, " {} ({}) |", s.name, self.unit);
            rule.push_str("---:|");
            if i > 0 {
                let _ = write!(header, " ratio |");
                rule.push_str("---:|");
            }
        }
        let _ = writeln!(out, "{header}\n{rule}");
        for size in self.sizes() {
            let mut row = format!("| {} |", human(size));
            for (i, s) in ran.iter().enumerate() {
                let point = s.points.iter().find(|p| p.size == size);
                let cell = point.map_or("-".into(), |p| {
                    let m = &p.summary;
                    format!("{} ({}-{})", number(m.median), number(m.min), number(m.max))
                });
                let _ = write!(row, " {cell} |");
                if i > 0 {
                    let ratio = point
                        .and_then(|p| p.ratio)
                        .map_or("-".into(), |r| format!("{r:.2}"));
                    let _ = write!(row, " {ratio} |");
                }
            }
            let _ = writeln!(out, "{row}");
        }
        for s in &self.series {
            let state = match s.status {
                Status::Ran => "",
                Status::Skipped => "skipped: ",
                Status::Failed => "FAILED: ",
            };
            let note = s
                .note
                .as_deref()
                .map_or(String::new(), |n| format!(" ({state}{n})"));
            let _ = writeln!(out, "- {}: {}{note}", s.name, s.description);
        }
        let _ = writeln!(out, "reproduce: {}", self.command);
        out
    }

    /// Every size measured by any series, ascending.
    fn sizes(&self) -> Vec<u64> {
        let mut sizes: Vec<u64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.size))
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }
}

/// A figure with about four significant digits.
fn number(v: f64) -> String {
    match v.abs() {
        a if a >= 1000.0 => format!("{v:.0}"),
        a if a >= 100.0 => format!("{v:.1}"),
        a if a >= 1.0 => format!("{v:.2}"),
        _ => format!("{v:.3}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str, points: &[(u64, f64)]) -> Series {
        Series {
            name: name.into(),
            status: Status::Ran,
            note: None,
            description: format!("{name} measured"),
            points: points
                .iter()
                .map(|(size, v)| SeriesPoint {
                    size: *size,
                    summary: Summary::of(&[*v, v * 2.0, v / 2.0]).unwrap(),
                    ratio: None,
                })
                .collect(),
        }
    }

    fn report() -> Report {
        let mut skipped = series("zmq", &[]);
        skipped.status = Status::Skipped;
        skipped.note = Some("libzmq not installed".into());
        Report {
            schema: 1,
            version: "0",
            mode: Mode::Latency,
            metric: Metric::LatencyUs,
            unit: "us",
            higher_is_better: false,
            transports: "tcp".into(),
            programs: 2,
            procs_per_program: 1,
            window: None,
            reps: 3,
            iters: None,
            warmup: None,
            machine: Machine::describe(),
            command: "tether bench latency".into(),
            series: vec![
                series("tether", &[(8, 6.0), (1024, 8.0)]),
                series("raw_tcp", &[(8, 4.0)]),
                skipped,
            ],
        }
    }

    #[test]
    fn ratios_divide_tether_by_the_baseline() {
        let mut r = report();
        r.add_ratios();
        assert_eq!(r.series[1].points[0].ratio, Some(1.5));
        assert_eq!(r.series[0].points[0].ratio, None);
    }

    #[test]
    fn table_and_json_carry_every_series() {
        let mut r = report();
        r.add_ratios();
        let table = r.table();
        assert!(
            table.contains("| 8 B | 6.00 (3.00-12.00) | 4.00 (2.00-8.00) | 1.50 |"),
            "{table}"
        );
        assert!(
            table.contains("| 1 KiB | 8.00 (4.00-16.00) | - | - |"),
            "{table}"
        );
        assert!(
            table.contains("zmq: zmq measured (skipped: libzmq not installed)"),
            "{table}"
        );
        let json: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(json["mode"], "latency");
        assert_eq!(json["series"][1]["points"][0]["median"], 4.0);
        assert_eq!(json["series"][2]["status"], "skipped");
    }

    #[test]
    fn numbers_keep_four_digits() {
        assert_eq!(number(0.1234), "0.123");
        assert_eq!(number(5.678), "5.68");
        assert_eq!(number(123.45), "123.5");
        assert_eq!(number(5567.4), "5567");
    }
}

//! `tether trace summary`: who waited for whom, in text. Per program, its
//! processes' time from their first to their last span and the share
//! spent waiting; a matrix of waiting time by the program waited for;
//! bytes moved per pair of programs and transport.
//!
//! A wait is attributed to the peer that held it up: among the messages
//! whose requests the wait returned (the spans that started before it
//! ended, and end after it and before the process's next wait starts),
//! the one whose other side started
//! last — the sender of a receive, the receiver of a rendezvous send.
//! Without a paired message in the trace, the peer of the first request
//! the wait returned; for a wait inside a field step, the program on the
//! other side of the field.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde_json::{json, Value};

use super::load::{Process, Span};
use super::pairs::At;

/// The text, and what `--plot` draws: the matrix and every wait.
pub struct Summary {
    pub text: String,
    pub plot: Value,
}

pub fn summary(processes: &[Process]) -> Summary {
    let programs: BTreeMap<u64, &str> = processes
        .iter()
        .map(|p| (p.program_id, p.program.as_str()))
        .collect();
    let program_of: BTreeMap<u64, u64> = processes
        .iter()
        .map(|p| (p.universe_rank, p.program_id))
        .collect();
    let mut total: BTreeMap<u64, i64> = BTreeMap::new();
    let mut waiting: BTreeMap<u64, i64> = BTreeMap::new();
    let mut waited_on: BTreeMap<(u64, Option<u64>), i64> = BTreeMap::new();
    let mut moved: BTreeMap<(u64, u64, String), (u64, u64)> = BTreeMap::new();
    let mut count: BTreeMap<u64, usize> = BTreeMap::new();
    let pairs = super::pairs::pairs(processes);
    let origin = processes
        .iter()
        .flat_map(|p| p.spans.iter().map(|s| s.start))
        .min()
        .unwrap_or(0);
    let mut waits = Vec::new();
    for (pi, p) in processes.iter().enumerate() {
        *count.entry(p.program_id).or_default() += 1;
        let first = p.spans.iter().map(|s| s.start).min().unwrap_or(0);
        let last = p.spans.iter().map(|s| s.end).max().unwrap_or(0);
        *total.entry(p.program_id).or_default() += last - first;
        for (si, s) in p.spans.iter().enumerate() {
            if s.what == "wait" {
                let d = (s.end - s.start).max(0);
                *waiting.entry(p.program_id).or_default() += d;
                let peer = held_up_by(processes, &pairs, pi, si)
                    .or(s.peer)
                    .or_else(|| enclosing_peer(&p.spans, s));
                let on = peer.and_then(|peer| program_of.get(&peer).copied());
                *waited_on.entry((p.program_id, on)).or_default() += d;
                waits.push(json!({"process": p.label(), "program": p.program_id,
                                  "start_ms": (s.start - origin) as f64 / 1e6,
                                  "ms": d as f64 / 1e6, "on": on}));
            } else if s.what == "send" {
                if let Some(to) = s.peer.and_then(|peer| program_of.get(&peer)) {
                    let transport = s.transport.clone().unwrap_or_else(|| "?".into());
                    let entry = moved.entry((p.program_id, *to, transport)).or_default();
                    entry.0 += 1;
                    entry.1 += s.bytes;
                }
            }
        }
    }
    let ms = |ns: i64| ns as f64 / 1e6;
    let share = |part: i64, whole: i64| {
        if whole > 0 {
            100.0 * part as f64 / whole as f64
        } else {
            0.0
        }
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "time per program (summed over its processes, first to last span):"
    );
    let _ = writeln!(
        out,
        "  {:<12} {:>9} {:>12} {:>12} {:>8}",
        "program", "processes", "total ms", "waiting ms", "waiting"
    );
    for (id, name) in &programs {
        let (t, w) = (total[id], waiting.get(id).copied().unwrap_or(0));
        let _ = writeln!(
            out,
            "  {:<12} {:>9} {:>12.3} {:>12.3} {:>7.1}%",
            name,
            count[id],
            ms(t),
            ms(w),
            share(w, t)
        );
    }
    let _ = writeln!(
        out,
        "\nwaiting, by the program waited for (share of the waiting program's total time):"
    );
    let _ = write!(out, "  {:<12}", "waited \\ on");
    for name in programs.values() {
        let _ = write!(out, " {name:>12}");
    }
    let _ = writeln!(out, " {:>12}", "(unknown)");
    for (id, name) in &programs {
        let _ = write!(out, "  {name:<12}");
        for other in programs.keys().map(Some).chain([None]) {
            let w = waited_on.get(&(*id, other.copied())).copied().unwrap_or(0);
            let _ = write!(out, " {:>11.1}%", share(w, total[id]));
        }
        let _ = writeln!(out);
    }
    for (id, name) in &programs {
        let worst = waited_on
            .iter()
            .filter(|((who, on), _)| who == id && on.is_some_and(|o| o != *id))
            .max_by_key(|(_, w)| **w);
        if let Some(((_, Some(on)), w)) = worst {
            let _ = writeln!(
                out,
                "  {name} waited {:.0}% of its time on {}",
                share(*w, total[id]),
                programs[on]
            );
        }
    }
    let _ = writeln!(out, "\nmessages sent, per pair of programs and transport:");
    for ((from, to, transport), (messages, bytes)) in &moved {
        let _ = writeln!(
            out,
            "  {:<12} -> {:<12} {:<7} {messages:>8} messages {bytes:>14} bytes",
            programs[from], programs[to], transport
        );
    }
    let names: Vec<&str> = programs.values().copied().collect();
    let matrix: Vec<Vec<f64>> = programs
        .keys()
        .map(|id| {
            programs
                .keys()
                .map(Some)
                .chain([None])
                .map(|on| {
                    share(
                        waited_on.get(&(*id, on.copied())).copied().unwrap_or(0),
                        total[id],
                    )
                })
                .collect()
        })
        .collect();
    let processes_in_order: Vec<String> = processes.iter().map(|p| p.label()).collect();
    let plot = json!({"programs": names, "ids": programs.keys().collect::<Vec<_>>(), "matrix": matrix,
                      "processes": processes_in_order, "waits": waits});
    Summary { text: out, plot }
}

/// The peer whose lateness span `wait` of process `pi` waited for: see
/// the module documentation.
fn held_up_by(
    processes: &[Process],
    pairs: &HashMap<At, At>,
    pi: usize,
    wait: usize,
) -> Option<u64> {
    let spans = &processes[pi].spans;
    let w = &spans[wait];
    let next_wait = spans[wait + 1..]
        .iter()
        .find(|s| s.what == "wait")
        .map_or(i64::MAX, |s| s.start);
    spans
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            (s.what == "send" || s.what == "recv")
                && s.start <= w.end
                && s.end >= w.end
                && s.end <= next_wait
        })
        .filter_map(|(si, s)| {
            let &(qi, ri) = pairs.get(&(pi, si))?;
            Some((processes[qi].spans[ri].start, s.peer?))
        })
        .max_by_key(|(other_start, _)| *other_start)
        .map(|(_, peer)| peer)
}

/// The other side of a field step the wait happened in: a step waits for
/// the program on the other side of its field.
fn enclosing_peer(spans: &[Span], wait: &Span) -> Option<u64> {
    spans
        .iter()
        .filter(|s| s.what.starts_with("field_") && s.start <= wait.start && s.end >= wait.end)
        .find_map(|s| s.peer)
}

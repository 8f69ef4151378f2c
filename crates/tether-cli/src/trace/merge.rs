//! `tether trace merge`: every process's trace in one Chrome trace-event
//! file (Perfetto, chrome://tracing): a process per program, a thread per
//! rank, a slice per span, and a flow arrow from every send to the
//! receive that took it.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::load::{Process, Span};

/// What the merge found, for its report.
pub struct Merged {
    pub events: Vec<Value>,
    pub sends: usize,
    pub flows: usize,
}

/// Which slice group a span belongs to.
fn category(what: &str) -> &'static str {
    match what {
        "send" | "recv" => "p2p",
        "wait" => "wait",
        "field_put" | "field_get" => "field",
        _ => "collective",
    }
}

pub fn merge(processes: &[Process]) -> Merged {
    let origin = processes
        .iter()
        .flat_map(|p| p.spans.iter().map(|s| s.start))
        .min()
        .unwrap_or(0);
    let micros = |t: i64| (t - origin) as f64 / 1000.0;
    let by_universe: HashMap<u64, &Process> =
        processes.iter().map(|p| (p.universe_rank, p)).collect();
    let mut events = Vec::new();
    let mut named = std::collections::HashSet::new();
    for p in processes {
        if named.insert(p.program_id) {
            events.push(
                json!({"name": "process_name", "ph": "M", "pid": p.program_id,
                               "args": {"name": p.program}}),
            );
            events.push(
                json!({"name": "process_sort_index", "ph": "M", "pid": p.program_id,
                               "args": {"sort_index": p.program_id}}),
            );
        }
        events.push(json!({"name": "thread_name", "ph": "M", "pid": p.program_id, "tid": p.rank,
                           "args": {"name": format!("{} (universe rank {})", p.label(), p.universe_rank)}}));
        for s in &p.spans {
            let mut args = serde_json::Map::new();
            if let Some(peer) = s.peer {
                let who = by_universe
                    .get(&peer)
                    .map_or(format!("universe rank {peer}"), |q| q.label());
                args.insert("peer".into(), json!(who));
            }
            for (key, value) in [
                ("tag", s.tag.map(|v| json!(v))),
                ("step", s.step.map(|v| json!(v))),
                ("ordinal", s.ordinal.map(|v| json!(v))),
                ("transport", s.transport.as_ref().map(|v| json!(v))),
                ("field", s.name.as_ref().map(|v| json!(v))),
            ] {
                if let Some(value) = value {
                    args.insert(key.into(), value);
                }
            }
            if s.bytes > 0 {
                args.insert("bytes".into(), json!(s.bytes));
            }
            events.push(json!({"name": title(s, &by_universe), "cat": category(&s.what), "ph": "X",
                               "ts": micros(s.start), "dur": (s.end - s.start).max(0) as f64 / 1000.0,
                               "pid": p.program_id, "tid": p.rank, "args": args}));
        }
    }
    let pairs = super::pairs::pairs(processes);
    let (mut sends, mut flows) = (0, 0);
    for (pi, p) in processes.iter().enumerate() {
        for (si, s) in p.spans.iter().enumerate().filter(|(_, s)| s.what == "send") {
            sends += 1;
            let Some(&(qi, ri)) = pairs.get(&(pi, si)) else {
                continue;
            };
            let (q, r) = (&processes[qi], &processes[qi].spans[ri]);
            flows += 1;
            let id = flows;
            events.push(
                json!({"name": "message", "cat": "message", "ph": "s", "id": id,
                               "ts": micros(s.start), "pid": p.program_id, "tid": p.rank}),
            );
            // At the receive's end, inside its slice, so the arrow binds to it.
            events.push(json!({"name": "message", "cat": "message", "ph": "f", "bp": "e", "id": id,
                               "ts": micros(r.end.max(r.start)), "pid": q.program_id, "tid": q.rank}));
        }
    }
    Merged {
        events,
        sends,
        flows,
    }
}

fn title(s: &Span, by_universe: &HashMap<u64, &Process>) -> String {
    let who = |peer: u64| {
        by_universe
            .get(&peer)
            .map_or(format!("rank {peer}"), |q| q.label())
    };
    match (s.what.as_str(), s.peer) {
        ("send", Some(peer)) => format!("send to {}", who(peer)),
        ("recv", Some(peer)) => format!("recv from {}", who(peer)),
        ("wait", Some(peer)) => format!("wait ({})", who(peer)),
        ("field_put" | "field_get", _) => format!(
            "{} {} step {}",
            s.what,
            s.name.as_deref().unwrap_or("?"),
            s.step.unwrap_or(0)
        ),
        (what, _) => what.to_string(),
    }
}

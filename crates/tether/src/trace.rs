//! Traces (`TETHER_TRACE=<dir>`): every process records the spans of the
//! operations it takes part in — sends, receives, waits, collectives,
//! field steps — in memory, and writes them at finalize to
//! `<dir>/<program>.<rank>.jsonl`, one JSON object per line, for
//! `tether trace merge|summary` (docs/tracing.md, which is the format's
//! contract).
//!
//! Times are nanoseconds of this host's real-time clock. Hosts' clocks
//! differ, so the file also carries samples of this process's offset to
//! universe rank 0's clock, measured at join and at finalize
//! (`runtime/traced.rs`); the merge aligns every process's times with them.
//!
//! A send and its receive are paired by their ordinal: the k-th message
//! from one process to another with one (context, tag) is the k-th that
//! both count (`Engine::enable_ordinals`).

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rustc_hash::FxHashMap as HashMap;

/// One operation as this process saw it, from its start to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// `send`, `recv`, `wait`, a collective's name (`barrier`,
    /// `allreduce`, ...), `field_put` or `field_get`.
    pub what: &'static str,
    pub start: i64,
    pub end: i64,
    /// The other process (universe rank): a message's peer; for a wait,
    /// the peer of the first request it returned.
    pub peer: Option<u32>,
    pub context: u32,
    pub tag: i32,
    pub bytes: u64,
    /// A message's ordinal among those between the two processes with
    /// its context and tag.
    pub ordinal: Option<u64>,
    /// A field's name.
    pub detail: Option<String>,
    /// A field step.
    pub step: Option<i64>,
}

impl Span {
    pub fn new(what: &'static str, start: i64) -> Span {
        Span {
            what,
            start,
            end: start,
            peer: None,
            context: 0,
            tag: 0,
            bytes: 0,
            ordinal: None,
            detail: None,
            step: None,
        }
    }
}

/// The trace clock: nanoseconds of this host's real-time clock plus
/// `shift` (`TETHER_TRACE_CLOCK_SHIFT_NS`, for tests of the alignment).
pub fn clock(shift: i64) -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    since.as_nanos() as i64 + shift
}

/// One measurement of this process's clock against universe rank 0's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    /// `join` or `finalize`.
    pub when: &'static str,
    /// This process's time at the middle of the exchange.
    pub local: i64,
    /// Rank 0's clock minus this one's.
    pub offset: i64,
    /// The round trip the offset came from (its error is at most half).
    pub round_trip: i64,
}

/// The best of several exchanges `(sent, rank 0's time, received)`: the
/// one with the shortest round trip, NTP's choice, since the reply's
/// time lies within it.
pub fn best_sample(when: &'static str, exchanges: &[(i64, i64, i64)]) -> Option<ClockSample> {
    exchanges
        .iter()
        .min_by_key(|(sent, _, received)| received - sent)
        .map(|&(sent, theirs, received)| {
            let local = sent + (received - sent) / 2;
            ClockSample {
                when,
                local,
                offset: theirs - local,
                round_trip: received - sent,
            }
        })
}

/// Who wrote a trace file.
#[derive(Debug, Clone)]
pub struct Identity {
    pub program: String,
    pub program_id: usize,
    pub rank: u32,
    pub universe_rank: u32,
}

/// A process's trace, in memory until finalize.
pub struct Recorder {
    dir: PathBuf,
    who: Identity,
    /// Added to every clock reading (`TETHER_TRACE_CLOCK_SHIFT_NS`, for
    /// tests of the alignment).
    shift: i64,
    spans: Vec<Span>,
    /// Spans of requests not completed yet, by request.
    open: HashMap<u64, Span>,
    /// The wait whose peer the next closed span names.
    wait_without_peer: Option<usize>,
    clock: Vec<ClockSample>,
}

impl Recorder {
    /// A recorder writing into `dir` (created now, so that a wrong
    /// directory fails at init, not at finalize).
    pub fn new(dir: &Path, who: Identity, shift: i64) -> io::Result<Recorder> {
        fs::create_dir_all(dir)?;
        Ok(Recorder {
            dir: dir.to_path_buf(),
            who,
            shift,
            spans: Vec::new(),
            open: HashMap::default(),
            wait_without_peer: None,
            clock: Vec::new(),
        })
    }

    /// Nanoseconds of the real-time clock, shifted.
    pub fn now(&self) -> i64 {
        clock(self.shift)
    }

    /// Keeps `span` until request `req` completes.
    pub fn open(&mut self, req: u64, span: Span) {
        self.open.insert(req, span);
    }

    /// Ends the span of request `req`, if one is open: at `end`; a
    /// receive with the source, size, tag and ordinal its completion told.
    pub fn close(
        &mut self,
        req: u64,
        end: i64,
        peer: Option<u32>,
        bytes: u64,
        ordinal: Option<u64>,
        tag: i32,
    ) {
        if let Some(mut span) = self.open.remove(&req) {
            span.end = end;
            if span.what == "recv" {
                (span.peer, span.bytes, span.tag) = (peer, bytes, tag);
            }
            span.ordinal = span.ordinal.or(ordinal);
            self.push(span);
        }
    }

    /// Records a finished span.
    pub fn push(&mut self, span: Span) {
        if let (Some(at), Some(peer)) = (self.wait_without_peer, span.peer) {
            if span.what == "send" || span.what == "recv" {
                self.spans[at].peer = Some(peer);
                self.wait_without_peer = None;
            }
        }
        self.spans.push(span);
    }

    /// Records a wait; the next message span closed names its peer.
    pub fn push_wait(&mut self, start: i64, end: i64) {
        self.wait_without_peer = Some(self.spans.len());
        let mut wait = Span::new("wait", start);
        wait.end = end;
        self.spans.push(wait);
    }

    pub fn clock(&mut self, sample: ClockSample) {
        self.clock.push(sample);
    }

    /// The file this process writes.
    pub fn path(&self) -> PathBuf {
        self.dir
            .join(format!("{}.{}.jsonl", self.who.program, self.who.rank))
    }

    /// Writes the trace; `transport_of` names the transport that carries
    /// this process's messages to a peer (none where it sent none).
    pub fn write(&self, transport_of: impl Fn(u32) -> Option<&'static str>) -> io::Result<PathBuf> {
        let mut text = String::with_capacity(128 * (self.spans.len() + 4));
        let w = &self.who;
        let _ = writeln!(
            text,
            "{{\"tether_trace\":1,\"program\":{},\"program_id\":{},\"rank\":{},\"universe_rank\":{},\"pid\":{}}}",
            quote(&w.program),
            w.program_id,
            w.rank,
            w.universe_rank,
            std::process::id()
        );
        for c in &self.clock {
            let _ = writeln!(
                text,
                "{{\"clock\":\"{}\",\"local\":{},\"offset\":{},\"round_trip\":{}}}",
                c.when, c.local, c.offset, c.round_trip
            );
        }
        for s in &self.spans {
            let _ = write!(
                text,
                "{{\"what\":\"{}\",\"start\":{},\"end\":{}",
                s.what, s.start, s.end
            );
            if let Some(peer) = s.peer {
                let _ = write!(text, ",\"peer\":{peer}");
                if let Some(transport) = transport_of(peer) {
                    let _ = write!(text, ",\"transport\":\"{transport}\"");
                }
            }
            if s.what == "send" || s.what == "recv" {
                let _ = write!(
                    text,
                    ",\"context\":{},\"tag\":{},\"bytes\":{}",
                    s.context, s.tag, s.bytes
                );
            } else if s.bytes > 0 {
                let _ = write!(text, ",\"bytes\":{}", s.bytes);
            }
            if let Some(ordinal) = s.ordinal {
                let _ = write!(text, ",\"ordinal\":{ordinal}");
            }
            if let Some(detail) = &s.detail {
                let _ = write!(text, ",\"name\":{}", quote(detail));
            }
            if let Some(step) = s.step {
                let _ = write!(text, ",\"step\":{step}");
            }
            text.push_str("}\n");
        }
        let path = self.path();
        let mut file = fs::File::create(&path)?;
        file.write_all(text.as_bytes())?;
        Ok(path)
    }
}

/// `text` as a JSON string.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shortest_round_trip_gives_the_offset() {
        // Rank 0 is 1000 ahead; the second exchange waited on the way back.
        let s = best_sample(
            "join",
            &[(100, 1160, 220), (300, 1350, 500), (600, 1640, 680)],
        )
        .unwrap();
        assert_eq!(s.round_trip, 80);
        assert_eq!(s.local, 640);
        assert_eq!(s.offset, 1000);
        assert!(best_sample("join", &[]).is_none());
    }

    #[test]
    fn a_wait_is_attributed_to_the_next_message_and_files_are_json_lines() {
        let dir = std::env::temp_dir().join(format!("tether-trace-test-{}", std::process::id()));
        let who = Identity {
            program: "a\"b".to_string(),
            program_id: 0,
            rank: 1,
            universe_rank: 1,
        };
        let mut r = Recorder::new(&dir, who, 0).unwrap();
        r.push_wait(10, 20);
        let mut recv = Span::new("recv", 5);
        recv.peer = None;
        r.open(7, recv);
        r.close(7, 20, Some(3), 64, Some(2), 9);
        r.close(8, 30, Some(4), 1, None, 9);
        assert_eq!(r.spans[0].peer, Some(3));
        assert_eq!(r.spans[1].bytes, 64);
        assert_eq!(r.spans.len(), 2);
        let path = r.write(|peer| (peer == 3).then_some("tcp")).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("{\"tether_trace\":1,\"program\":\"a\\\"b\""));
        assert_eq!(
            lines[1],
            "{\"what\":\"wait\",\"start\":10,\"end\":20,\"peer\":3,\"transport\":\"tcp\"}"
        );
        assert!(lines[2].contains("\"ordinal\":2"));
        let _ = fs::remove_dir_all(dir);
    }
}

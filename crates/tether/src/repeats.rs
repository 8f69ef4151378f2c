//! Repeated warnings, aggregated: a cause that repeats (another universe's
//! peer retrying, a flood of connections that never complete their
//! handshake, a file that cannot be read at every poll) would otherwise
//! print hundreds of lines a minute and bury the one line that says what
//! is wrong. A warning is shown the first time; the same warning again
//! (same place in the code, same text once numbers are set aside: ports,
//! pids and ranks differ between repeats of one cause) is counted, not
//! shown, for [`WINDOW`]; the next one after that is shown with the count
//! of those hidden, and finalize reports what is still hidden
//! ([`report_hidden`]).

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// How long repeats of a warning are counted before one is shown again.
pub const WINDOW: Duration = Duration::from_secs(30);

/// At most this many causes are tracked; past it, warnings are shown as
/// they come (a run with that many distinct warnings has other problems,
/// and memory stays bounded).
const MAX_CAUSES: usize = 1024;

/// What to do with a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Show,
    Hide,
    /// Show it, after saying that `hidden` like it were not shown in
    /// the last `over`.
    ShowAfter {
        hidden: u64,
        over: Duration,
    },
}

/// One cause: where in the code, and the text with its numbers set aside.
type Cause = (&'static str, u32, String);

struct Seen {
    shown_at: Instant,
    hidden: u64,
    /// The last text shown, for the report of what is still hidden.
    text: String,
}

/// The causes seen, and how many of each were hidden.
#[derive(Default)]
pub struct Repeats {
    seen: HashMap<Cause, Seen>,
}

impl Repeats {
    /// The verdict on a warning from `file:line` saying `text` at `now`.
    pub fn admit(&mut self, file: &'static str, line: u32, text: &str, now: Instant) -> Verdict {
        let cause = (file, line, shape(text));
        if let Some(seen) = self.seen.get_mut(&cause) {
            let over = now.saturating_duration_since(seen.shown_at);
            if over < WINDOW {
                seen.hidden += 1;
                return Verdict::Hide;
            }
            let hidden = std::mem::take(&mut seen.hidden);
            seen.shown_at = now;
            seen.text = text.to_string();
            return if hidden == 0 {
                Verdict::Show
            } else {
                Verdict::ShowAfter { hidden, over }
            };
        }
        if self.seen.len() < MAX_CAUSES {
            let seen = Seen {
                shown_at: now,
                hidden: 0,
                text: text.to_string(),
            };
            self.seen.insert(cause, seen);
        }
        Verdict::Show
    }

    /// The warnings hidden since each was last shown (its text, and how
    /// many), and forgets them.
    pub fn take_hidden(&mut self) -> Vec<(String, u64)> {
        let mut hidden: Vec<(String, u64)> = self
            .seen
            .values_mut()
            .filter(|s| s.hidden > 0)
            .map(|s| (s.text.clone(), std::mem::take(&mut s.hidden)))
            .collect();
        hidden.sort();
        hidden
    }
}

/// `text` with every run of digits replaced by `#`.
fn shape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The process's record, shared by the layer and [`report_hidden`].
static REPEATS: Mutex<Option<Repeats>> = Mutex::new(None);

fn with_repeats<T>(f: impl FnOnce(&mut Repeats) -> T) -> T {
    let mut guard = REPEATS.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(Repeats::default))
}

/// The layer that holds back repeated warnings and errors (other levels
/// are asked for on purpose and pass as they are).
pub struct RepeatFilter;

impl<S: Subscriber> Layer<S> for RepeatFilter {
    fn event_enabled(&self, event: &Event<'_>, _: Context<'_, S>) -> bool {
        let meta = event.metadata();
        if *meta.level() > Level::WARN {
            return true;
        }
        let mut text = Message(String::new());
        event.record(&mut text);
        let (file, line) = (meta.file().unwrap_or(""), meta.line().unwrap_or(0));
        // The lock is released before the summary is logged: that event
        // comes back through this layer.
        let verdict = with_repeats(|r| r.admit(file, line, &text.0, Instant::now()));
        match verdict {
            Verdict::Show => true,
            Verdict::Hide => false,
            Verdict::ShowAfter { hidden, over } => {
                tracing::warn!(
                    "the next warning came {hidden} more time{} in the last {} s (not shown)",
                    if hidden == 1 { "" } else { "s" },
                    over.as_secs()
                );
                true
            }
        }
    }
}

/// Logs, once per cause, the warnings hidden since each was last shown
/// (at finalize, so that the count is not lost).
pub fn report_hidden() {
    for (text, hidden) in with_repeats(Repeats::take_hidden) {
        tracing::warn!(
            "this warning came {hidden} more time{} (not shown): {text}",
            if hidden == 1 { "" } else { "s" }
        );
    }
}

/// The `message` field of an event.
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = value.to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_is_hidden_then_counted_when_the_next_is_shown() {
        let mut r = Repeats::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let refused =
            |port: u32| format!("refusing connection from 127.0.0.1:{port}: beta:{port} ...");
        assert_eq!(r.admit("tcp.rs", 1, &refused(40001), at(0)), Verdict::Show);
        for (i, port) in (40002..40600).enumerate() {
            assert_eq!(
                r.admit("tcp.rs", 1, &refused(port), at(i as u64 / 30)),
                Verdict::Hide
            );
        }
        // Another cause, or the same text from elsewhere, is shown.
        assert_eq!(r.admit("tcp.rs", 2, &refused(1), at(1)), Verdict::Show);
        assert_eq!(
            r.admit("file.rs", 9, "cannot read the inbox", at(1)),
            Verdict::Show
        );
        assert_eq!(
            r.admit("tcp.rs", 1, &refused(7), at(31)),
            Verdict::ShowAfter {
                hidden: 598,
                over: Duration::from_secs(31)
            }
        );
        assert_eq!(r.admit("tcp.rs", 1, &refused(8), at(32)), Verdict::Hide);
        assert_eq!(r.take_hidden(), vec![(refused(7), 1)]);
        assert_eq!(r.take_hidden(), vec![], "reported once");
    }

    #[test]
    fn numbers_are_set_aside_but_words_are_not() {
        assert_eq!(shape("pid 123 on h1:4000"), "pid # on h#:#");
        assert_ne!(shape("beta:0 lost"), shape("alpha:0 lost"));
    }

    #[test]
    fn the_number_of_causes_is_bounded() {
        let mut r = Repeats::default();
        let now = Instant::now();
        for i in 0..MAX_CAUSES + 10 {
            r.admit("x.rs", i as u32, "same", now);
        }
        assert_eq!(r.seen.len(), MAX_CAUSES);
        assert_eq!(r.admit("x.rs", u32::MAX, "same", now), Verdict::Show);
    }
}

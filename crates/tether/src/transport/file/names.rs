//! Where the files of a run live, and what their names say.
//!
//! ```text
//! TETHER_FILE_DIR/
//!   run-<run name>/                  one per run
//!     alive-<rank>                   heartbeat of universe rank <rank>
//!     to-<rank>/                     inbox of universe rank <rank>
//!       <from>-<seq>.msg             a frame from <from>, <seq>th of that pair
//!       <from>-<receiver req>.data   a hybrid payload (hex request handle)
//!       .tmp-...                     being written; never read
//!       <name>.rejected-<n>          refused by the receiver, kept to inspect
//! ```
//!
//! A writer creates its file under a `.tmp-` name and then gives it its
//! final name in one step that never replaces an existing file, so a
//! reader sees only whole files, and a stray file squatting on a name is
//! moved aside by the receiver instead of overwritten.

use std::path::{Path, PathBuf};

/// Prefix of a file being written.
pub const TEMP_PREFIX: &str = ".tmp-";
/// Suffix of a frame file.
pub const MESSAGE_SUFFIX: &str = ".msg";
/// Suffix of a hybrid payload file.
pub const PAYLOAD_SUFFIX: &str = ".data";
/// Infix of a refused file.
pub const REJECTED: &str = ".rejected-";

/// The run's directory, and this process's place in it.
#[derive(Debug, Clone)]
pub struct Layout {
    pub run_dir: PathBuf,
    pub me: u32,
}

impl Layout {
    /// The directory of the run named `run_name` under `root`.
    pub fn new(root: &Path, run_name: &str, me: u32) -> Layout {
        Layout {
            run_dir: root.join(format!("run-{run_name}")),
            me,
        }
    }

    pub fn inbox(&self, rank: u32) -> PathBuf {
        self.run_dir.join(format!("to-{rank}"))
    }

    pub fn heartbeat(&self, rank: u32) -> PathBuf {
        self.run_dir.join(format!("alive-{rank}"))
    }

    /// The frame file number `seq` from this process to `to`.
    pub fn outgoing_message(&self, to: u32, seq: u64) -> PathBuf {
        self.inbox(to).join(message_name(self.me, seq))
    }

    /// The frame file number `seq` from `from` to this process.
    pub fn incoming_message(&self, from: u32, seq: u64) -> PathBuf {
        self.inbox(self.me).join(message_name(from, seq))
    }

    /// The payload file of the receive `receiver_req` of `to`.
    pub fn outgoing_payload(&self, to: u32, receiver_req: u64) -> PathBuf {
        self.inbox(to).join(payload_name(self.me, receiver_req))
    }

    pub fn incoming_payload(&self, from: u32, receiver_req: u64) -> PathBuf {
        self.inbox(self.me).join(payload_name(from, receiver_req))
    }

    /// A fresh temporary name in `to`'s inbox; `n` makes it unique in
    /// this process.
    pub fn temporary(&self, to: u32, n: u64) -> PathBuf {
        self.inbox(to).join(format!(
            "{TEMP_PREFIX}{}-{}-{n}",
            self.me,
            std::process::id()
        ))
    }
}

pub fn message_name(from: u32, seq: u64) -> String {
    format!("{from}-{seq}{MESSAGE_SUFFIX}")
}

pub fn payload_name(from: u32, receiver_req: u64) -> String {
    format!("{from}-{receiver_req:x}{PAYLOAD_SUFFIX}")
}

/// What an inbox entry is, by its name alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    Message { from: u32, seq: u64 },
    Payload,
    Temporary,
    Rejected,
    Unknown,
}

pub fn classify(name: &str) -> Entry {
    if name.starts_with(TEMP_PREFIX) {
        return Entry::Temporary;
    }
    if name.contains(REJECTED) {
        return Entry::Rejected;
    }
    if let Some(stem) = name.strip_suffix(MESSAGE_SUFFIX) {
        if let Some((from, seq)) = stem.split_once('-') {
            if let (Some(from), Some(seq)) = (decimal(from), decimal(seq)) {
                if let Ok(from) = u32::try_from(from) {
                    return Entry::Message { from, seq };
                }
            }
        }
    }
    if name.ends_with(PAYLOAD_SUFFIX) {
        return Entry::Payload;
    }
    Entry::Unknown
}

/// A canonical decimal number (no sign, no leading zero), so that one
/// message has exactly one name.
fn decimal(text: &str) -> Option<u64> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten()
}

/// Whether `name` is usable as a run name in a directory name.
pub fn is_safe_run_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && !name.starts_with('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_only_canonical_ones_are_messages() {
        assert_eq!(
            classify(&message_name(3, 17)),
            Entry::Message { from: 3, seq: 17 }
        );
        assert_eq!(classify(&payload_name(3, 0xabc)), Entry::Payload);
        for junk in [
            "3-017.msg",
            "-3-1.msg",
            "3-1.msg.bak",
            "x-1.msg",
            "3-.msg",
            "notes.txt",
        ] {
            assert_eq!(classify(junk), Entry::Unknown, "{junk}");
        }
        assert_eq!(classify(".tmp-3-99-0"), Entry::Temporary);
        assert_eq!(classify("3-1.msg.rejected-0"), Entry::Rejected);
        assert_eq!(classify("99999999999-1.msg"), Entry::Unknown);
    }

    #[test]
    fn layout_places_files_in_the_receivers_inbox() {
        let layout = Layout::new(Path::new("/d"), "abc", 2);
        assert_eq!(
            layout.outgoing_message(5, 0),
            PathBuf::from("/d/run-abc/to-5/2-0.msg")
        );
        assert_eq!(
            layout.incoming_message(5, 9),
            PathBuf::from("/d/run-abc/to-2/5-9.msg")
        );
        assert_eq!(layout.heartbeat(2), PathBuf::from("/d/run-abc/alive-2"));
    }

    #[test]
    fn run_names_with_path_characters_are_unsafe() {
        assert!(is_safe_run_name("a1b2-c3_d.4"));
        for bad in ["", "../x", "a/b", ".hidden", "a b", &"x".repeat(65)] {
            assert!(!is_safe_run_name(bad), "{bad:?}");
        }
    }
}

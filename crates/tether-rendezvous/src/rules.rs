//! What a key and a value may be; shared by both backends and the server.

use crate::error::{shown_key, RendezvousError};

/// Longest key, in characters (all key characters are ASCII).
pub const MAX_KEY_LEN: usize = 200;

/// Longest value, in bytes of UTF-8.
pub const MAX_VALUE_LEN: usize = 64 * 1024;

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '/' | '-')
}

/// Says which key rule `key` breaks, if any.
pub(crate) fn key_problem(key: &str) -> Option<String> {
    if key.is_empty() {
        return Some("the key is empty".into());
    }
    if let Some(c) = key.chars().find(|&c| !is_key_char(c)) {
        return Some(format!(
            "character {c:?} is not allowed (keys use A-Z a-z 0-9 _ . : / -)"
        ));
    }
    if key.len() > MAX_KEY_LEN {
        return Some(format!(
            "{} characters, at most {MAX_KEY_LEN} are allowed",
            key.len()
        ));
    }
    None
}

/// Says which value rule `value` breaks, if any.
pub(crate) fn value_problem(value: &str) -> Option<String> {
    if value.len() > MAX_VALUE_LEN {
        return Some(format!(
            "{} bytes, at most {MAX_VALUE_LEN} are allowed",
            value.len()
        ));
    }
    if value.contains('\n') {
        return Some("values may not contain a newline".into());
    }
    None
}

/// Fails with [`RendezvousError::InvalidKey`] naming `rendezvous` when `key`
/// breaks a key rule.
pub(crate) fn check_key(rendezvous: &str, key: &str) -> Result<(), RendezvousError> {
    match key_problem(key) {
        None => Ok(()),
        Some(reason) => Err(RendezvousError::InvalidKey {
            rendezvous: rendezvous.to_owned(),
            key: shown_key(key),
            reason,
        }),
    }
}

/// Fails with [`RendezvousError::InvalidValue`] naming `rendezvous` and `key`
/// when `value` breaks a value rule.
pub(crate) fn check_value(rendezvous: &str, key: &str, value: &str) -> Result<(), RendezvousError> {
    match value_problem(value) {
        None => Ok(()),
        Some(reason) => Err(RendezvousError::InvalidValue {
            rendezvous: rendezvous.to_owned(),
            key: shown_key(key),
            reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert!(key_problem("proc/sim/0").is_none());
        assert!(key_problem("a.b:c_d-E9").is_none());
        assert!(key_problem(&"k".repeat(MAX_KEY_LEN)).is_none());
        assert!(key_problem("").is_some());
        assert!(key_problem("a b").is_some());
        assert!(key_problem("a\nb").is_some());
        assert!(key_problem("é").is_some());
        assert!(key_problem(&"k".repeat(MAX_KEY_LEN + 1)).is_some());
    }

    #[test]
    fn values() {
        assert!(value_problem("").is_none());
        assert!(value_problem("host:1234 with spaces é").is_none());
        assert!(value_problem(&"v".repeat(MAX_VALUE_LEN)).is_none());
        assert!(value_problem(&"v".repeat(MAX_VALUE_LEN + 1)).is_some());
        assert!(value_problem("a\nb").is_some());
    }
}

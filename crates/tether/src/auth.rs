//! This process's key, from its settings: `TETHER_KEY` (what `tether run`
//! hands its processes) or else `TETHER_KEY_FILE` (what separately
//! launched programs share). Without either the process authenticates
//! nothing and is refused by every process that has a key.

use std::path::PathBuf;
use std::sync::Arc;

use tether_auth::{Key, KeySource};

use crate::error::{err, ErrorClass, Result};
use crate::settings::Settings;

/// The run's key, or `None` when neither setting is set.
///
/// Errors: `TETHER_ERR_AUTH` naming the setting or the file when the key
/// is too short, or the file is missing, unreadable, or readable by
/// others than its owner (the message never holds the key).
pub fn run_key(settings: &Settings) -> Result<Option<Arc<Key>>> {
    let source = match (settings.key(), settings.key_file()) {
        (Some(text), _) => KeySource::Text(text.to_owned()),
        (None, Some(path)) => KeySource::File(PathBuf::from(path)),
        (None, None) => return Ok(None),
    };
    let key = source
        .load()
        .map_err(|e| err(ErrorClass::Auth, e.to_string()))?;
    Ok(Some(Arc::new(key)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Settings {
        let vars = vars.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        Settings::from_vars(vars).unwrap().0
    }

    #[test]
    fn the_key_comes_from_the_text_before_the_file_and_never_shows() {
        assert!(run_key(&settings(&[])).unwrap().is_none());
        let text = settings(&[
            ("TETHER_KEY", "0123456789abcdef-secret"),
            ("TETHER_KEY_FILE", "/nonexistent/key"),
        ]);
        assert!(run_key(&text).unwrap().is_some());
        assert_eq!(text.get("KEY"), Some(crate::settings::HIDDEN));
        let short = run_key(&settings(&[("TETHER_KEY", "tiny")])).unwrap_err();
        assert_eq!(short.class, ErrorClass::Auth);
        assert!(!short.message.contains("tiny"), "{}", short.message);
        let missing = run_key(&settings(&[("TETHER_KEY_FILE", "/nonexistent/key")])).unwrap_err();
        assert!(
            missing.message.contains("/nonexistent/key"),
            "{}",
            missing.message
        );
    }
}

//! Hints (DESIGN 3.6): settings a program may change while it runs.

use std::ffi::{c_char, c_int};

use tether::settings::Settings;

use crate::ffi::{in_str, run, state, write_str};

/// Sets hint `key` to `value`. Before `tether_init` the hint is checked at
/// once and applied by init. `TETHER_ERR_UNKNOWN_HINT` for an unknown key
/// or a start-up-only setting, `TETHER_ERR_HINT_VALUE` for a bad value.
#[no_mangle]
pub extern "C" fn tether_hint(key: *const c_char, value: *const c_char) -> c_int {
    run("tether_hint", || {
        let key = in_str(key, "key")?;
        let value = in_str(value, "value")?;
        {
            let mut st = state("tether_hint")?;
            match st.runtime.as_mut() {
                Some(rt) => rt.hint(key, value)?,
                None => {
                    Settings::from_vars(Vec::new())?.0.set_hint(key, value)?;
                    st.early_hints.push((key.to_string(), value.to_string()));
                    return Ok(());
                }
            }
        }
        crate::progress_thread::sync()
    })
}

/// The read-only key of [`tether_hint_get`] that reports the links in
/// force now rather than a setting.
const LINKS: &str = "LINKS";

/// The effective value of setting `key` into `value` (`len` bytes); for
/// `LINKS`, the links this process holds now and their memory
/// (`links=2 tcp.links=1 ...`; `links=0` before `tether_init`).
#[no_mangle]
pub extern "C" fn tether_hint_get(key: *const c_char, value: *mut c_char, len: c_int) -> c_int {
    run("tether_hint_get", || {
        let key = in_str(key, "key")?;
        let st = state("tether_hint_get")?;
        if key == LINKS {
            let summary = st
                .runtime
                .as_ref()
                .map_or_else(|| "links=0".to_string(), |rt| rt.links_summary());
            return write_str(&summary, value, len, "value");
        }
        let effective = match st.runtime.as_ref() {
            Some(rt) => rt.settings().get(key).map(str::to_string),
            None => {
                let (mut settings, _) = Settings::from_env()?;
                for (k, v) in &st.early_hints {
                    settings.set_hint(k, v)?;
                }
                settings.get(key).map(str::to_string)
            }
        };
        let effective = effective.ok_or_else(|| {
            tether::error::err(
                tether::ErrorClass::UnknownHint,
                format!("unknown setting {key:?}"),
            )
        })?;
        write_str(&effective, value, len, "value")
    })
}

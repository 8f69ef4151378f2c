//! Counters readable at run time (issue 28): named 64-bit numbers, since
//! `tether_init`; the names are documented in `tether::runtime::stats`
//! and docs/SETTINGS.md's `TETHER_STATS`.

use std::ffi::{c_char, c_int};

use tether::error::{err, ErrorClass};

use crate::ffi::{in_str, out, run, state, write_str};

/// Takes a snapshot of this process's counters and gives their number:
/// `tether_stats_entry` reads them by index, as they were now.
#[no_mangle]
pub extern "C" fn tether_stats_count(count: *mut c_int) -> c_int {
    run("tether_stats_count", || {
        let mut st = state("tether_stats_count")?;
        let n = st.runtime()?.snapshot_stats();
        *out(count, "count")? = c_int::try_from(n).unwrap_or(c_int::MAX);
        Ok(())
    })
}

/// Entry `index` (0 to count-1) of the last `tether_stats_count`
/// snapshot: its name into `name` (`len` bytes; 128 always suffice) and
/// its value. `TETHER_ERR_ARG` for an index out of range.
#[no_mangle]
pub extern "C" fn tether_stats_entry(
    index: c_int,
    name: *mut c_char,
    len: c_int,
    value: *mut i64,
) -> c_int {
    run("tether_stats_entry", || {
        let mut st = state("tether_stats_entry")?;
        let rt = st.runtime()?;
        let (key, counted) = usize::try_from(index)
            .ok()
            .and_then(|i| rt.stats_entry(i))
            .ok_or_else(|| {
                err(
                    ErrorClass::Arg,
                    format!(
                        "index {index} is not one of the last snapshot's {} entries (tether_stats_count takes one)",
                        rt.stats_snapshot_len()
                    ),
                )
            })?;
        let counted = i64::try_from(*counted).unwrap_or(i64::MAX);
        write_str(key, name, len, "name")?;
        *out(value, "value")? = counted;
        Ok(())
    })
}

/// The current value of the counter called `name` (for example
/// `bytes_sent`, `tcp.messages_received`, `peer.3.shm.bytes_sent`).
/// A name no counter has now is `TETHER_ERR_ARG`; a peer's names exist
/// once a message moved between the two.
#[no_mangle]
pub extern "C" fn tether_stats_read(name: *const c_char, value: *mut i64) -> c_int {
    run("tether_stats_read", || {
        let key = in_str(name, "name")?;
        let mut st = state("tether_stats_read")?;
        let stats = st.runtime()?.stats();
        let (_, counted) = stats.iter().find(|(k, _)| k == key).ok_or_else(|| {
            err(
                ErrorClass::Arg,
                format!("no counter named {key:?} (tether_stats_count and tether_stats_entry list them)"),
            )
        })?;
        *out(value, "value")? = i64::try_from(*counted).unwrap_or(i64::MAX);
        Ok(())
    })
}

//! Windows and one-sided operations (DESIGN 3.7).
//!
//! Decisions where DESIGN 3.7 is silent: `TETHER_REPLACE` and
//! `TETHER_NO_OP` (MPI's `MPI_REPLACE`, `MPI_NO_OP`) are operations of the
//! accumulate family only; fetch-and-op takes integer and floating types,
//! compare-and-swap integer types (`TETHER_ERR_TYPE` otherwise); a target
//! is a rank of the communicator the window was created over, and a
//! target outside it is `TETHER_ERR_RANK`.

use std::ffi::{c_int, c_void};

use crate::ffi::{out, run, state};
use crate::types::*;

pub type tether_win = c_int;

/// No window: what `tether_win_free` leaves in the handle.
pub const TETHER_WIN_NULL: tether_win = 0;

/// Exposes `bytes` bytes at `base` (NULL with 0 bytes allowed) to the
/// members of `comm` for one-sided access; collective over `comm`. Every
/// member passes its own base and size; when it returns, every member's
/// window is in place. The memory stays the program's, valid until
/// `tether_win_free`. Errors: `TETHER_ERR_ARG` (negative size, NULL base
/// with bytes), `TETHER_ERR_COMM`, and a collective's errors.
#[no_mangle]
pub extern "C" fn tether_win_create(
    base: *mut c_void,
    bytes: i64,
    comm: tether_comm,
    win: *mut tether_win,
) -> c_int {
    run("tether_win_create", || {
        let win = out(win, "win")?;
        let mut st = state("tether_win_create")?;
        // SAFETY: the caller keeps `base` valid until tether_win_free (API contract).
        *win = unsafe { st.runtime()?.win_create(base.cast(), bytes, comm)? };
        Ok(())
    })
}

/// Completes every member's operations on `*win`, then frees it and sets
/// `*win` to `TETHER_WIN_NULL`; collective. A freed or unknown window is
/// `TETHER_ERR_ARG`.
#[no_mangle]
pub extern "C" fn tether_win_free(win: *mut tether_win) -> c_int {
    run("tether_win_free", || {
        let win = out(win, "win")?;
        state("tether_win_free")?.runtime()?.win_free(*win)?;
        *win = TETHER_WIN_NULL;
        Ok(())
    })
}

/// Writes `count` elements at `origin` into rank `target`'s window at
/// `target_offset_bytes`. Returns at once: `origin` may be reused, and
/// the data is in the target's memory, after `tether_win_flush(target)`,
/// `tether_win_flush_all` or `tether_win_fence`. An access outside the
/// target's window is `TETHER_ERR_RMA_RANGE`, with nothing sent.
#[no_mangle]
pub extern "C" fn tether_put(
    origin: *const c_void,
    count: i64,
    datatype: tether_datatype,
    target: c_int,
    target_offset_bytes: i64,
    win: tether_win,
) -> c_int {
    run("tether_put", || {
        let mut st = state("tether_put")?;
        // SAFETY: the caller keeps `origin` until the flush (API contract).
        unsafe {
            st.runtime()?.put(
                origin.cast(),
                count,
                datatype,
                target,
                target_offset_bytes,
                win,
            )
        }
    })
}

/// Reads `count` elements of rank `target`'s window at
/// `target_offset_bytes` into `origin`, which holds them after the next
/// flush of that target (or fence). Errors as `tether_put`.
#[no_mangle]
pub extern "C" fn tether_get(
    origin: *mut c_void,
    count: i64,
    datatype: tether_datatype,
    target: c_int,
    target_offset_bytes: i64,
    win: tether_win,
) -> c_int {
    run("tether_get", || {
        let mut st = state("tether_get")?;
        // SAFETY: the caller keeps `origin` until the flush (API contract).
        unsafe {
            st.runtime()?.get(
                origin.cast(),
                count,
                datatype,
                target,
                target_offset_bytes,
                win,
            )
        }
    })
}

/// `tether_put` with a request that completes once `origin` may be
/// reused (the data reaches the target's memory by the next flush).
#[no_mangle]
pub extern "C" fn tether_rput(
    origin: *const c_void,
    count: i64,
    datatype: tether_datatype,
    target: c_int,
    target_offset_bytes: i64,
    win: tether_win,
    req: *mut tether_request,
) -> c_int {
    run("tether_rput", || {
        let req = out(req, "req")?;
        let mut st = state("tether_rput")?;
        // SAFETY: the caller keeps `origin` until the request completes.
        let id = unsafe {
            st.runtime()?.rput(
                origin.cast(),
                count,
                datatype,
                target,
                target_offset_bytes,
                win,
            )?
        };
        *req = st.register(id);
        Ok(())
    })
}

/// `tether_get` with a request that completes once the data is in
/// `origin`. A target that refuses the access completes the request with
/// `TETHER_ERR_RMA_RANGE`.
#[no_mangle]
pub extern "C" fn tether_rget(
    origin: *mut c_void,
    count: i64,
    datatype: tether_datatype,
    target: c_int,
    target_offset_bytes: i64,
    win: tether_win,
    req: *mut tether_request,
) -> c_int {
    run("tether_rget", || {
        let req = out(req, "req")?;
        let mut st = state("tether_rget")?;
        // SAFETY: the caller keeps `origin` until the request completes.
        let id = unsafe {
            st.runtime()?.rget(
                origin.cast(),
                count,
                datatype,
                target,
                target_offset_bytes,
                win,
            )?
        };
        *req = st.register(id);
        Ok(())
    })
}

/// Combines `count` elements at `origin` into rank `target`'s window with
/// `op` (a reduction, `TETHER_REPLACE` or `TETHER_NO_OP`): atomic per
/// element against the other accumulate-family operations on it, and
/// applied in the order this process issued them to that target.
/// Complete after the next flush. An invalid (type, op) pair is
/// `TETHER_ERR_OP`.
#[no_mangle]
pub extern "C" fn tether_accumulate(
    origin: *const c_void,
    count: i64,
    datatype: tether_datatype,
    target: c_int,
    target_offset_bytes: i64,
    op: tether_op,
    win: tether_win,
) -> c_int {
    run("tether_accumulate", || {
        let mut st = state("tether_accumulate")?;
        // SAFETY: the caller keeps `origin` until the flush (API contract).
        unsafe {
            st.runtime()?.accumulate(
                origin.cast(),
                count,
                datatype,
                target,
                target_offset_bytes,
                op,
                win,
            )
        }
    })
}

/// Combines the one element at `origin` into rank `target`'s window with
/// `op` and fetches the element's value before into `result`, atomically;
/// `result` holds it after the next flush. Integer and floating types
/// only (`TETHER_ERR_TYPE`), aligned to their size
/// (`TETHER_ERR_RMA_RANGE`).
#[no_mangle]
pub extern "C" fn tether_fetch_and_op(
    origin: *const c_void,
    result: *mut c_void,
    datatype: tether_datatype,
    target: c_int,
    target_offset_bytes: i64,
    op: tether_op,
    win: tether_win,
) -> c_int {
    run("tether_fetch_and_op", || {
        let mut st = state("tether_fetch_and_op")?;
        // SAFETY: `origin` is read during the call; `result` stays valid
        // until the flush (API contract).
        unsafe {
            st.runtime()?.fetch_and_op(
                origin.cast(),
                result.cast(),
                datatype,
                target,
                target_offset_bytes,
                op,
                win,
            )
        }
    })
}

/// Replaces the one element at rank `target`'s window with `*origin` if
/// it equals `*compare`, and fetches its value before into `result`,
/// atomically; `result` holds it after the next flush. Integer types only
/// (`TETHER_ERR_TYPE`), aligned to their size (`TETHER_ERR_RMA_RANGE`).
#[no_mangle]
pub extern "C" fn tether_compare_and_swap(
    origin: *const c_void,
    compare: *const c_void,
    result: *mut c_void,
    datatype: tether_datatype,
    target: c_int,
    target_offset_bytes: i64,
    win: tether_win,
) -> c_int {
    run("tether_compare_and_swap", || {
        let mut st = state("tether_compare_and_swap")?;
        // SAFETY: `origin` and `compare` are read during the call; `result`
        // stays valid until the flush (API contract).
        unsafe {
            st.runtime()?.compare_and_swap(
                origin.cast(),
                compare.cast(),
                result.cast(),
                datatype,
                target,
                target_offset_bytes,
                win,
            )
        }
    })
}

/// Blocks until every operation this process issued on `win` to rank
/// `target` is complete in the target's memory (and its results in the
/// caller's). Reports the first failure of those operations since the
/// last flush: `TETHER_ERR_PEER_LOST` when the target was lost,
/// `TETHER_ERR_RMA_RANGE` or `TETHER_ERR_OP` when it refused one.
#[no_mangle]
pub extern "C" fn tether_win_flush(target: c_int, win: tether_win) -> c_int {
    run("tether_win_flush", || {
        state("tether_win_flush")?
            .runtime()?
            .win_flush(Some(target), win)
    })
}

/// `tether_win_flush` for every member of `win`.
#[no_mangle]
pub extern "C" fn tether_win_flush_all(win: tether_win) -> c_int {
    run("tether_win_flush_all", || {
        state("tether_win_flush_all")?
            .runtime()?
            .win_flush(None, win)
    })
}

/// Completes every member's operations on `win`: collective over its
/// members; when it returns, what anyone put before is in every target's
/// memory.
#[no_mangle]
pub extern "C" fn tether_win_fence(win: tether_win) -> c_int {
    run("tether_win_fence", || {
        state("tether_win_fence")?.runtime()?.win_fence(win)
    })
}

//! Point-to-point (DESIGN 3.3) and datatype queries (DESIGN 3.4).

use std::ffi::{c_int, c_void};

use tether::datatype::{self, byte_len};
use tether::error::{err, ErrorClass, Result};
use tether::{Arrival, ErrorClass as Class, Status};

use crate::ffi::{guard, out, record, run, state, State};
use crate::types::*;

/// Writes `status` (unless `ptr` is NULL: `TETHER_STATUS_IGNORE`) and
/// returns the code `wait` reports for it: its error class, except that a
/// cancelled receive is a success whose status says `TETHER_ERR_CANCELLED`.
fn report(status: &Status, ptr: *mut tether_status) -> c_int {
    // SAFETY: a non-null status pointer points to a tether_status by contract.
    if let Some(s) = unsafe { ptr.as_mut() } {
        *s = tether_status {
            source: status.source,
            tag: status.tag,
            error: status
                .error
                .as_ref()
                .map_or(TETHER_SUCCESS, |e| e.class.code()),
            bytes: status.bytes as i64,
        };
    }
    match &status.error {
        None => TETHER_SUCCESS,
        Some(e) if e.class == Class::Cancelled => TETHER_SUCCESS,
        Some(e) => record(e),
    }
}

/// `report` for a message the short path received: a success from
/// `source` (a rank, never a wildcard there).
fn report_arrival(source: c_int, arrival: Arrival, ptr: *mut tether_status) -> c_int {
    // SAFETY: a non-null status pointer points to a tether_status by contract.
    if let Some(s) = unsafe { ptr.as_mut() } {
        *s = tether_status {
            source,
            tag: arrival.tag,
            error: TETHER_SUCCESS,
            bytes: arrival.bytes as i64,
        };
    }
    TETHER_SUCCESS
}

/// The bytes `count` elements of `datatype` at `buf` span. A NULL buffer
/// is allowed for an empty message and becomes a dangling, never-touched
/// pointer.
#[inline]
fn buffer_region(
    buf: *const c_void,
    count: i64,
    datatype: tether_datatype,
) -> Result<(*mut u8, usize)> {
    let len = byte_len(count, datatype::lookup(datatype)?)?;
    if buf.is_null() {
        if len > 0 {
            return Err(err(
                ErrorClass::Arg,
                format!("buffer is NULL but count {count} is not 0"),
            ));
        }
        return Ok((std::ptr::NonNull::<u8>::dangling().as_ptr(), 0));
    }
    Ok((buf.cast::<u8>().cast_mut(), len))
}

fn start_send(
    st: &mut State,
    (ptr, len): (*mut u8, usize),
    dest: c_int,
    tag: c_int,
    comm: tether_comm,
) -> Result<tether_request> {
    // SAFETY: the caller keeps the buffer valid until the request completes (API contract).
    let req = unsafe { st.runtime()?.isend(ptr, len, dest, tag, comm)? };
    Ok(st.register(req))
}

fn start_recv(
    st: &mut State,
    (ptr, len): (*mut u8, usize),
    source: c_int,
    tag: c_int,
    comm: tether_comm,
) -> Result<tether_request> {
    // SAFETY: the caller keeps the buffer valid until the request completes (API contract).
    let req = unsafe { st.runtime()?.irecv(ptr, len, source, tag, comm)? };
    Ok(st.register(req))
}

/// Starts a send; `*req` is written on success.
#[no_mangle]
pub extern "C" fn tether_isend(
    buf: *const c_void,
    count: i64,
    datatype: tether_datatype,
    dest: c_int,
    tag: c_int,
    comm: tether_comm,
    req: *mut tether_request,
) -> c_int {
    run("tether_isend", || {
        let req = out(req, "req")?;
        let region = buffer_region(buf, count, datatype)?;
        *req = start_send(&mut *state("tether_isend")?, region, dest, tag, comm)?;
        Ok(())
    })
}

/// Posts a receive; `*req` is written on success.
#[no_mangle]
pub extern "C" fn tether_irecv(
    buf: *mut c_void,
    count: i64,
    datatype: tether_datatype,
    source: c_int,
    tag: c_int,
    comm: tether_comm,
    req: *mut tether_request,
) -> c_int {
    run("tether_irecv", || {
        let req = out(req, "req")?;
        let region = buffer_region(buf, count, datatype)?;
        *req = start_recv(&mut *state("tether_irecv")?, region, source, tag, comm)?;
        Ok(())
    })
}

fn wait_handle(st: &mut State, handle: tether_request) -> Result<Status> {
    let id = st.request(handle)?;
    let status = st.runtime()?.wait(id)?;
    st.requests.remove(&handle);
    Ok(status)
}

/// Sends and waits until the buffer may be reused.
#[no_mangle]
pub extern "C" fn tether_send(
    buf: *const c_void,
    count: i64,
    datatype: tether_datatype,
    dest: c_int,
    tag: c_int,
    comm: tether_comm,
) -> c_int {
    guard("tether_send", || {
        let (ptr, len) = buffer_region(buf, count, datatype)?;
        let mut st = state("tether_send")?;
        let rt = st.runtime()?;
        // SAFETY: the buffer is valid during the call (API contract).
        if unsafe { rt.send_direct(ptr, len, dest, tag, comm)? } {
            return Ok(TETHER_SUCCESS);
        }
        // SAFETY: as above; the send is complete when `wait` returns.
        let req = unsafe { rt.isend(ptr, len, dest, tag, comm)? };
        Ok(report(&rt.wait(req)?, std::ptr::null_mut()))
    })
}

/// Receives a message; `status` may be `TETHER_STATUS_IGNORE`.
#[no_mangle]
pub extern "C" fn tether_recv(
    buf: *mut c_void,
    count: i64,
    datatype: tether_datatype,
    source: c_int,
    tag: c_int,
    comm: tether_comm,
    status: *mut tether_status,
) -> c_int {
    guard("tether_recv", || {
        let (ptr, len) = buffer_region(buf, count, datatype)?;
        let mut st = state("tether_recv")?;
        let rt = st.runtime()?;
        // SAFETY: the buffer is valid during the call (API contract).
        if let Some(arrival) = unsafe { rt.recv_direct(ptr, len, source, tag, comm)? } {
            return Ok(report_arrival(source, arrival, status));
        }
        // SAFETY: as above; the receive is complete when `wait` returns.
        let req = unsafe { rt.irecv(ptr, len, source, tag, comm)? };
        Ok(report(&rt.wait(req)?, status))
    })
}

/// The first half of `tether_send`, for bindings that release a lock of
/// their own before they block (Python's GIL): starts the send and, when
/// it completed as it started (an eager message handed to the transport),
/// frees it, sets `*req = TETHER_REQUEST_NULL` and returns its code, as
/// `tether_send` would. Otherwise `*req` is the pending request, for
/// `tether_wait`. Not part of the C API.
pub fn send_started(
    buf: *const c_void,
    count: i64,
    datatype: tether_datatype,
    dest: c_int,
    tag: c_int,
    comm: tether_comm,
    req: &mut tether_request,
) -> c_int {
    *req = TETHER_REQUEST_NULL;
    guard("tether_send", || {
        let mut st = state("tether_send")?;
        let (ptr, len) = buffer_region(buf, count, datatype)?;
        // SAFETY: the buffer is valid during the call (API contract).
        if unsafe { st.runtime()?.send_direct(ptr, len, dest, tag, comm)? } {
            return Ok(TETHER_SUCCESS);
        }
        let handle = start_send(&mut st, (ptr, len), dest, tag, comm)?;
        finish_if_done(&mut st, handle, req, std::ptr::null_mut())
    })
}

/// The first half of `tether_recv`, as `send_started`: a receive that a
/// message already here completed as it was posted is finished (its
/// status written), anything else is left in `*req` for `tether_wait`.
/// Not part of the C API.
#[allow(clippy::too_many_arguments)]
pub fn recv_started(
    buf: *mut c_void,
    count: i64,
    datatype: tether_datatype,
    source: c_int,
    tag: c_int,
    comm: tether_comm,
    req: &mut tether_request,
    status: *mut tether_status,
) -> c_int {
    *req = TETHER_REQUEST_NULL;
    guard("tether_recv", || {
        let mut st = state("tether_recv")?;
        let (ptr, len) = buffer_region(buf, count, datatype)?;
        // SAFETY: the buffer is valid during the call (API contract).
        if let Some(arrival) = unsafe { st.runtime()?.recv_direct(ptr, len, source, tag, comm)? } {
            return Ok(report_arrival(source, arrival, status));
        }
        let handle = start_recv(&mut st, (ptr, len), source, tag, comm)?;
        finish_if_done(&mut st, handle, req, status)
    })
}

/// Frees `handle` and reports its status if it is complete (no progress
/// is made); otherwise stores it in `*req`.
fn finish_if_done(
    st: &mut State,
    handle: tether_request,
    req: &mut tether_request,
    status: *mut tether_status,
) -> Result<c_int> {
    let id = st.request(handle)?;
    match st.runtime()?.take(id) {
        Some(done) => {
            st.requests.remove(&handle);
            Ok(report(&done, status))
        }
        None => {
            *req = handle;
            Ok(TETHER_SUCCESS)
        }
    }
}

/// Waits for `*req`, fills `status`, sets `*req = TETHER_REQUEST_NULL`.
/// Returns the operation's error class (`TETHER_ERR_TRUNCATE`, ...). A null
/// request completes at once with an empty status.
#[no_mangle]
pub extern "C" fn tether_wait(req: *mut tether_request, status: *mut tether_status) -> c_int {
    guard("tether_wait", || {
        let handle = out(req, "req")?;
        if *handle == TETHER_REQUEST_NULL {
            return Ok(report(&empty_status(), status));
        }
        let done = wait_handle(&mut *state("tether_wait")?, *handle)?;
        *handle = TETHER_REQUEST_NULL;
        Ok(report(&done, status))
    })
}

fn empty_status() -> Status {
    Status {
        source: TETHER_ANY_SOURCE,
        tag: TETHER_ANY_TAG,
        bytes: 0,
        error: None,
    }
}

fn slice_mut<'a, T>(ptr: *mut T, n: c_int, name: &str) -> Result<&'a mut [T]> {
    if n < 0 {
        return Err(err(ErrorClass::Count, format!("{n} {name} is negative")));
    }
    if n == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(err(ErrorClass::Arg, format!("argument `{name}` is NULL")));
    }
    // SAFETY: the caller passes an array of `n` elements (API contract).
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, n as usize) })
}

/// Completes every request of `handles` with `complete`, resets it to
/// null and reports its status in `statuses[i]` (unless that is NULL);
/// returns the first error class among them, or success.
fn finish_all(
    st: &mut State,
    handles: &mut [tether_request],
    statuses: *mut tether_status,
    mut complete: impl FnMut(&mut State, tether_request) -> Result<Status>,
) -> Result<c_int> {
    let mut first_error = TETHER_SUCCESS;
    for (i, handle) in handles.iter_mut().enumerate() {
        let done = complete(st, *handle)?;
        *handle = TETHER_REQUEST_NULL;
        let slot = if statuses.is_null() {
            std::ptr::null_mut()
        } else {
            statuses.wrapping_add(i)
        };
        let code = report(&done, slot);
        if first_error == TETHER_SUCCESS {
            first_error = code;
        }
    }
    Ok(first_error)
}

/// Waits for all `n` requests. Every status describes its own request; the
/// return value is the first error class among them, or success.
#[no_mangle]
pub extern "C" fn tether_waitall(
    n: c_int,
    reqs: *mut tether_request,
    statuses: *mut tether_status,
) -> c_int {
    guard("tether_waitall", || {
        let handles = slice_mut(reqs, n, "reqs")?;
        let mut st = state("tether_waitall")?;
        for h in handles.iter().filter(|h| **h != TETHER_REQUEST_NULL) {
            st.request(*h)?;
        }
        finish_all(&mut st, handles, statuses, |st, handle| {
            if handle == TETHER_REQUEST_NULL {
                Ok(empty_status())
            } else {
                wait_handle(st, handle)
            }
        })
    })
}

/// Waits until one of the `n` requests completes; `*index` is its position
/// (`TETHER_UNDEFINED` when none is active).
#[no_mangle]
pub extern "C" fn tether_waitany(
    n: c_int,
    reqs: *mut tether_request,
    index: *mut c_int,
    status: *mut tether_status,
) -> c_int {
    guard("tether_waitany", || {
        let handles = slice_mut(reqs, n, "reqs")?;
        let index = out(index, "index")?;
        let mut st = state("tether_waitany")?;
        let ids = handles
            .iter()
            .map(|h| {
                if *h == TETHER_REQUEST_NULL {
                    Ok(None)
                } else {
                    st.request(*h).map(Some)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        match st.runtime()?.wait_any(&ids)? {
            None => {
                *index = TETHER_UNDEFINED;
                Ok(report(&empty_status(), status))
            }
            Some((i, done)) => {
                st.requests.remove(&handles[i]);
                handles[i] = TETHER_REQUEST_NULL;
                *index = i as c_int;
                Ok(report(&done, status))
            }
        }
    })
}

/// `*flag` = 1 and the request is completed and freed if it is done;
/// otherwise `*flag` = 0 and nothing else changes.
#[no_mangle]
pub extern "C" fn tether_test(
    req: *mut tether_request,
    flag: *mut c_int,
    status: *mut tether_status,
) -> c_int {
    guard("tether_test", || {
        let handle = out(req, "req")?;
        let flag = out(flag, "flag")?;
        if *handle == TETHER_REQUEST_NULL {
            *flag = 1;
            return Ok(report(&empty_status(), status));
        }
        let mut st = state("tether_test")?;
        let id = st.request(*handle)?;
        match st.runtime()?.test(id)? {
            Some(done) => {
                st.requests.remove(handle);
                *handle = TETHER_REQUEST_NULL;
                *flag = 1;
                Ok(report(&done, status))
            }
            None => {
                *flag = 0;
                Ok(TETHER_SUCCESS)
            }
        }
    })
}

/// `*flag` = 1 and all requests completed and freed if all are done;
/// otherwise `*flag` = 0 and none is freed.
#[no_mangle]
pub extern "C" fn tether_testall(
    n: c_int,
    reqs: *mut tether_request,
    flag: *mut c_int,
    statuses: *mut tether_status,
) -> c_int {
    guard("tether_testall", || {
        let handles = slice_mut(reqs, n, "reqs")?;
        let flag = out(flag, "flag")?;
        let mut st = state("tether_testall")?;
        let ids = handles
            .iter()
            .filter(|h| **h != TETHER_REQUEST_NULL)
            .map(|h| st.request(*h))
            .collect::<Result<Vec<_>>>()?;
        if !st.runtime()?.all_complete(&ids)? {
            *flag = 0;
            return Ok(TETHER_SUCCESS);
        }
        *flag = 1;
        finish_all(&mut st, handles, statuses, |st, handle| {
            match st.requests.remove(&handle) {
                Some(id) => Ok(st.runtime()?.take(id).expect("complete")),
                None => Ok(empty_status()),
            }
        })
    })
}

/// Waits until a message matching (source, tag, comm) can be received and
/// describes it in `status` without receiving it.
#[no_mangle]
pub extern "C" fn tether_probe(
    source: c_int,
    tag: c_int,
    comm: tether_comm,
    status: *mut tether_status,
) -> c_int {
    guard("tether_probe", || {
        let found = state("tether_probe")?.runtime()?.probe(source, tag, comm)?;
        Ok(report(&found, status))
    })
}

/// Like `tether_probe` without waiting: `*flag` tells whether one is there.
#[no_mangle]
pub extern "C" fn tether_iprobe(
    source: c_int,
    tag: c_int,
    comm: tether_comm,
    flag: *mut c_int,
    status: *mut tether_status,
) -> c_int {
    guard("tether_iprobe", || {
        let flag = out(flag, "flag")?;
        match state("tether_iprobe")?
            .runtime()?
            .iprobe(source, tag, comm)?
        {
            Some(found) => {
                *flag = 1;
                Ok(report(&found, status))
            }
            None => {
                *flag = 0;
                Ok(TETHER_SUCCESS)
            }
        }
    })
}

/// Cancels a receive that has not matched yet. The request must still be
/// completed with wait or test; its status then says `TETHER_ERR_CANCELLED`
/// (or describes the message, if it matched first).
#[no_mangle]
pub extern "C" fn tether_cancel(req: *mut tether_request) -> c_int {
    run("tether_cancel", || {
        let handle = out(req, "req")?;
        let mut st = state("tether_cancel")?;
        let id = st.request(*handle)?;
        st.runtime()?.cancel(id)
    })
}

/// Elements of `datatype` in the message `status` describes;
/// `TETHER_UNDEFINED` when its size is not a whole number of elements.
#[no_mangle]
pub extern "C" fn tether_get_count(
    status: *const tether_status,
    datatype: tether_datatype,
    count: *mut i64,
) -> c_int {
    run("tether_get_count", || {
        // SAFETY: a non-null status pointer points to a tether_status by contract.
        let status = unsafe { status.as_ref() }
            .ok_or_else(|| err(ErrorClass::Arg, "argument `status` is NULL"))?;
        let size = datatype::lookup(datatype)?.size as i64;
        let count = out(count, "count")?;
        *count = if status.bytes % size == 0 {
            status.bytes / size
        } else {
            i64::from(TETHER_UNDEFINED)
        };
        Ok(())
    })
}

/// Size in bytes of one element of `datatype`.
#[no_mangle]
pub extern "C" fn tether_type_size(datatype: tether_datatype, size: *mut c_int) -> c_int {
    run("tether_type_size", || {
        let t = datatype::lookup(datatype)?;
        *out(size, "size")? = t.size as c_int;
        Ok(())
    })
}

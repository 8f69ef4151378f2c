//! Requests whose Python object was dropped before they completed.
//!
//! The C request still reads or writes the buffer, so dropping the
//! `Request` must not release it: the C requests and their buffers move
//! here instead, and are completed (and the buffers released) by the next
//! operation that finds them done, or by `finalize`, which cancels the
//! orphaned receives and waits for everything.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use pyo3::Python;
use tether_capi::*;

use crate::buffer::Buffer;

struct Orphan {
    handles: Vec<tether_request>,
    _keep: Vec<Buffer>,
}

static ORPHANS: Mutex<Vec<Orphan>> = Mutex::new(Vec::new());
/// Whether `ORPHANS` may be non-empty: one relaxed load on the fast path.
static ANY: AtomicBool = AtomicBool::new(false);

fn orphans() -> std::sync::MutexGuard<'static, Vec<Orphan>> {
    ORPHANS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Takes over live C requests and the buffers they use. Call with the GIL.
pub fn adopt(handles: Vec<tether_request>, keep: Vec<Buffer>) {
    orphans().push(Orphan {
        handles,
        _keep: keep,
    });
    ANY.store(true, Ordering::Relaxed);
}

/// Completes the orphans that are done, releasing their buffers. Call with
/// the GIL (a buffer is released by dropping it).
pub fn reap() {
    // Inside an active-message handler every C call but a send is refused:
    // a refused test must not pass for a completed one.
    if !ANY.load(Ordering::Relaxed) || crate::active::in_handler() {
        return;
    }
    let mut list = orphans();
    list.retain_mut(|o| {
        let mut flag = 0;
        let mut statuses = vec![tether_status::default(); o.handles.len()];
        let code = tether_testall(
            o.handles.len() as i32,
            o.handles.as_mut_ptr(),
            &mut flag,
            statuses.as_mut_ptr(),
        );
        flag == 0 && code == TETHER_SUCCESS
    });
    ANY.store(!list.is_empty(), Ordering::Relaxed);
}

/// Before finalize: cancels orphaned receives and waits (without the GIL)
/// for every orphan, then releases their buffers.
pub fn settle(py: Python<'_>) {
    let list = std::mem::take(&mut *orphans());
    ANY.store(false, Ordering::Relaxed);
    let list = py.detach(move || {
        let mut list = list;
        for o in list.iter_mut() {
            for h in o.handles.iter_mut() {
                tether_cancel(h);
            }
            let n = o.handles.len() as i32;
            tether_waitall(n, o.handles.as_mut_ptr(), std::ptr::null_mut());
        }
        list
    });
    drop(list);
}

//! Active messages from Python (DESIGN 3.7, 3.11): `tether.am_register`,
//! `Comm.am_send` and the handler trampoline.
//!
//! A Python handler is registered with the C API as [`trampoline`], its
//! `ctx` the [`Handler`] (boxed, so its address is stable) that
//! [`HANDLERS`] owns until the id is registered again. The C layer calls
//! the trampoline inside the progress of a Tether call, on the thread
//! making that call, with the library's lock held:
//!
//! - On a Python thread (one with a Python thread state: it entered
//!   Tether from Python, and holds the GIL or gave it away only to wait),
//!   the trampoline takes the GIL (a no-op when held) and calls
//!   `fn(source, header, payload)` with `bytes` copies of the message:
//!   the library's buffers are valid only during the call, and Python code
//!   may keep whatever it is given. A send from inside (`Comm.am_send`) is
//!   copied by the C layer and returns `None`; every other Tether call
//!   raises `ArgError` (the C layer's TETHER_ERR_ARG).
//! - An exception escaping the handler cannot cross the C boundary: it is
//!   reported through `sys.unraisablehook` (printed with its traceback by
//!   default, as ctypes and cffi do for callbacks) and Tether carries on;
//!   a `KeyboardInterrupt` is raised again in the main thread.
//! - The C progress thread (`PROGRESS_THREAD=1`) has no Python thread
//!   state, and taking the GIL there, with the library's lock held, would
//!   deadlock against a Python thread that holds the GIL and waits for
//!   that lock (every call does, briefly). So `am_register` refuses a
//!   Python handler while the progress thread runs, and `tether.hint`
//!   refuses to start it while Python handlers exist. Should a handler
//!   still reach a thread without Python (a C library in the same process
//!   starting the thread itself), the trampoline never touches Python: it
//!   copies the message, warns once, and `tether.progress()` runs it.

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyKeyboardInterrupt, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use tether_capi::*;

use crate::buffer::{Access, Buffer};
use crate::comm::Comm;
use crate::error::{arg_error, check};
use crate::orphans;
use crate::request::Request;

/// What a Python handler's `ctx` points to.
struct Handler {
    id: c_int,
    func: Py<PyAny>,
}

/// The registered Python handlers by id, boxed so that the `ctx` given to
/// the C layer stays valid until the id is registered again.
static HANDLERS: Mutex<Option<HashMap<c_int, Box<Handler>>>> = Mutex::new(None);

/// A message that reached a thread without Python (see the module
/// documentation), waiting for `tether.progress()`.
struct Deferred {
    id: c_int,
    source: c_int,
    header: Vec<u8>,
    payload: Vec<u8>,
}

static DEFERRED: Mutex<Vec<Deferred>> = Mutex::new(Vec::new());
static ANY_DEFERRED: AtomicBool = AtomicBool::new(false);
static WARNED_DEFERRED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This thread is running a Python handler.
    static IN_HANDLER: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is running a Python active-message handler: the
/// binding's own housekeeping (reaping orphaned requests) must not call
/// the C layer then, since every call but `tether_am_send` is refused.
pub fn in_handler() -> bool {
    IN_HANDLER.with(Cell::get)
}

fn handlers() -> MutexGuard<'static, Option<HashMap<c_int, Box<Handler>>>> {
    HANDLERS.lock().unwrap_or_else(|p| p.into_inner())
}

fn deferred() -> MutexGuard<'static, Vec<Deferred>> {
    DEFERRED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether any Python handler is registered.
pub fn any_handler() -> bool {
    handlers().as_ref().is_some_and(|m| !m.is_empty())
}

/// Whether the C progress thread is on (hint `PROGRESS_THREAD`).
pub fn progress_thread_on() -> bool {
    let mut buf = [0u8; 8];
    let key = c"PROGRESS_THREAD";
    tether_hint_get(key.as_ptr(), buf.as_mut_ptr().cast(), buf.len() as c_int) == TETHER_SUCCESS
        && buf[0] == b'1'
        && buf[1] == 0
}

/// The refusal of a Python handler beside the progress thread.
pub fn progress_thread_refused(py: Python<'_>, what: &str) -> PyErr {
    arg_error(
        py,
        format!(
            "{what}: Python active-message handlers cannot be used with the progress thread \
             (PROGRESS_THREAD=1): they need the GIL, which that thread cannot take while it \
             holds Tether's lock without risking a deadlock; Python handlers run in the Python \
             thread's own Tether calls (tether.progress() and every blocking call) instead"
        ),
    )
}

/// `len` bytes at `ptr` (NULL with 0).
///
/// # Safety
/// A non-NULL `ptr` addresses `len` readable bytes for `'a`.
unsafe fn slice<'a>(ptr: *const c_void, len: usize) -> &'a [u8] {
    if len == 0 || ptr.is_null() {
        &[]
    } else {
        // SAFETY: as the caller promises.
        unsafe { std::slice::from_raw_parts(ptr.cast(), len) }
    }
}

/// The C handler of every Python handler (see the module documentation).
unsafe extern "C" fn trampoline(
    ctx: *mut c_void,
    source: c_int,
    header: *const c_void,
    header_len: usize,
    payload: *const c_void,
    payload_len: usize,
) {
    // SAFETY: the C layer passes the message's buffers, valid during the
    // call, and the `ctx` registered with this trampoline: a `Handler`
    // that `HANDLERS` keeps until after the C layer lets go of it.
    let (handler, header, payload) = unsafe {
        (
            &*(ctx as *const Handler),
            slice(header, header_len),
            slice(payload, payload_len),
        )
    };
    // SAFETY: no arguments; reads this thread's state only.
    let python_thread = !unsafe { pyo3::ffi::PyGILState_GetThisThreadState() }.is_null();
    if !python_thread {
        defer(handler.id, source, header, payload);
        return;
    }
    // Nothing may unwind into the C layer.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        Python::attach(|py| call(py, handler.func.bind(py), source, header, payload))
    }));
}

/// Calls a Python handler with the message (copied into `bytes`).
fn call(py: Python<'_>, func: &Bound<'_, PyAny>, source: c_int, header: &[u8], payload: &[u8]) {
    let header = PyBytes::new(py, header);
    let payload = PyBytes::new(py, payload);
    let outer = IN_HANDLER.with(|h| h.replace(true));
    let result = func.call1((source, header, payload));
    IN_HANDLER.with(|h| h.set(outer));
    if let Err(e) = result {
        if e.is_instance_of::<PyKeyboardInterrupt>(py) {
            // SAFETY: no arguments; the main thread raises it at its
            // next check for signals.
            unsafe { pyo3::ffi::PyErr_SetInterrupt() };
        } else {
            e.write_unraisable(py, Some(func));
        }
    }
}

/// Keeps a message that reached a thread without Python for
/// `tether.progress()`.
fn defer(id: c_int, source: c_int, header: &[u8], payload: &[u8]) {
    if !WARNED_DEFERRED.swap(true, Ordering::Relaxed) {
        eprintln!(
            "tether: warning: an active message for the Python handler of id {id} arrived on a \
             thread without Python (the progress thread?); it runs at the next tether.progress()"
        );
    }
    deferred().push(Deferred {
        id,
        source,
        header: header.to_vec(),
        payload: payload.to_vec(),
    });
    ANY_DEFERRED.store(true, Ordering::Release);
}

/// Runs the messages that reached a thread without Python (outside any C
/// handler: a send from them returns a request). Call with the GIL.
pub fn run_deferred(py: Python<'_>) {
    if !ANY_DEFERRED.swap(false, Ordering::Acquire) {
        return;
    }
    let list = std::mem::take(&mut *deferred());
    for m in list {
        let func = handlers()
            .as_ref()
            .and_then(|map| map.get(&m.id))
            .map(|h| h.func.clone_ref(py));
        match func {
            Some(f) => call(py, f.bind(py), m.source, &m.header, &m.payload),
            None => eprintln!(
                "tether: warning: an active message for id {} from rank {} has no Python handler \
                 any more: dropped",
                m.id, m.source
            ),
        }
    }
}

/// Registers the Python callable `handler` for active-message id `id`
/// (0 to 1023) in this process, replacing the one before; `None`
/// unregisters it.
#[pyfunction]
#[pyo3(signature = (id, handler))]
pub fn am_register(py: Python<'_>, id: c_int, handler: Option<Bound<'_, PyAny>>) -> PyResult<()> {
    let boxed = match handler {
        Some(h) => {
            if !h.is_callable() {
                return Err(PyTypeError::new_err(format!(
                    "am_register: the handler must be callable as fn(source, header, payload), \
                     not {}",
                    h.get_type().name()?
                )));
            }
            if !in_handler() && progress_thread_on() {
                return Err(progress_thread_refused(py, "am_register"));
            }
            Some(Box::new(Handler {
                id,
                func: h.unbind(),
            }))
        }
        None => None,
    };
    let code = match &boxed {
        Some(b) => {
            let ctx = (&**b as *const Handler).cast_mut().cast::<c_void>();
            tether_am_register(id, Some(trampoline), ctx)
        }
        None => tether_am_register(id, None, std::ptr::null_mut()),
    };
    check(py, code)?;
    // The C layer no longer calls the handler before (if any): drop it.
    let before = {
        let mut map = handlers();
        let map = map.get_or_insert_with(HashMap::new);
        match boxed {
            Some(b) => map.insert(id, b),
            None => map.remove(&id),
        }
    };
    drop(before);
    Ok(())
}

#[pymethods]
impl Comm {
    /// Sends an active message for handler `id` to rank `dest` of this
    /// communicator: `header` and `payload` are any buffers (bytes,
    /// numpy arrays; `None` is empty). Returns a `Request` that completes
    /// when they may be reused (it keeps `payload` alive; the header is
    /// copied), or `None` from inside a handler, where both are copied
    /// and the message leaves when the handler returns.
    #[pyo3(signature = (dest, id, header=None, payload=None))]
    fn am_send(
        &self,
        py: Python<'_>,
        dest: c_int,
        id: c_int,
        header: Option<&Bound<'_, PyAny>>,
        payload: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Request>> {
        let inside = in_handler();
        if !inside {
            orphans::reap();
        }
        let header = header
            .map(|h| Buffer::get(h, Access::Read, "am_send header"))
            .transpose()?;
        let payload = payload
            .map(|p| Buffer::get(p, Access::Read, "am_send payload"))
            .transpose()?;
        let (hptr, hlen) = header
            .as_ref()
            .map_or((std::ptr::null(), 0), |b| (b.ptr().cast_const(), b.len()));
        let (pptr, plen) = payload
            .as_ref()
            .map_or((std::ptr::null(), 0), |b| (b.ptr().cast_const(), b.len()));
        let mut req = TETHER_REQUEST_NULL;
        check(
            py,
            tether_am_send(dest, id, hptr, hlen, pptr, plen, self.handle, &mut req),
        )?;
        if req == TETHER_REQUEST_NULL {
            return Ok(None);
        }
        Ok(Some(Request::new(
            vec![req],
            payload.into_iter().collect(),
            None,
        )))
    }
}

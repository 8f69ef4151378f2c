//! Active messages (DESIGN 3.7): `tether_am_register`, `tether_am_send`,
//! `tether_progress`.
//!
//! A handler runs inside a Tether call (any call that makes progress),
//! with the library's lock held, so it cannot take the lock again. The
//! defined way out: `tether_am_send` called from inside a handler copies
//! its arguments, returns at once with `*req = TETHER_REQUEST_NULL` (the
//! buffers are free: nothing to wait for), and the message leaves when
//! the handler returns; its destination and communicator are checked
//! then, and a bad one is logged as an error naming the handler's id.
//! Every other call from inside a handler fails with `TETHER_ERR_ARG`,
//! its arguments untouched: blocking calls would wait on progress that
//! only this thread can make.

use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void};

use tether::error::{err, ErrorClass, Result};
use tether::{AmMessage, AmReply, AM_IDS};
use tether_proto::Region;

use crate::ffi::{out, run, state};
use crate::types::*;

/// A handler: `source` is the sender's rank in the communicator it sent
/// on; `header` and `payload` are the library's, valid during the call
/// (NULL when their length is 0).
pub type tether_am_handler = Option<
    unsafe extern "C" fn(
        ctx: *mut c_void,
        source: c_int,
        header: *const c_void,
        header_len: usize,
        payload: *const c_void,
        payload_len: usize,
    ),
>;

thread_local! {
    /// This thread is inside a handler (see the module documentation).
    static IN_HANDLER: Cell<bool> = const { Cell::new(false) };
    /// What the running handler sent.
    static REPLIES: RefCell<Vec<AmReply>> = const { RefCell::new(Vec::new()) };
}

/// Whether this thread is running an active-message handler.
pub(crate) fn in_handler() -> bool {
    IN_HANDLER.with(Cell::get)
}

/// The program's `ctx`, handed back to its handler on the thread that
/// holds the library's lock.
struct Context(*mut c_void);

// SAFETY: the pointer is only passed back to the program's handler, which
// runs on whichever thread holds the lock, as the program registered it.
unsafe impl Send for Context {}

impl Context {
    /// The pointer (a method, so that closures capture the whole `Send`
    /// wrapper, not its field).
    fn get(&self) -> *mut c_void {
        self.0
    }
}

fn ptr_or_null(bytes: &[u8]) -> *const c_void {
    if bytes.is_empty() {
        std::ptr::null()
    } else {
        bytes.as_ptr().cast()
    }
}

/// `len` bytes at `ptr`, NULL allowed only with 0.
fn bytes<'a>(ptr: *const c_void, len: usize, name: &str) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(err(
            ErrorClass::Arg,
            format!("`{name}` is NULL but its length is {len}"),
        ));
    }
    // SAFETY: a non-NULL buffer argument holds `len` bytes (API contract).
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast(), len) })
}

/// Registers `handler` for id `id` (0 to 1023) in this process, replacing
/// the one before; a NULL handler unregisters it. Register before the
/// synchronisation that precedes the first message that could reach it:
/// a message for an id with no handler is dropped with a warning naming
/// the id and the sender.
#[no_mangle]
pub extern "C" fn tether_am_register(
    id: c_int,
    handler: tether_am_handler,
    ctx: *mut c_void,
) -> c_int {
    run("tether_am_register", || {
        let mut st = state("tether_am_register")?;
        let runtime = st.runtime()?;
        let Some(handler) = handler else {
            return runtime.am_register(id, None);
        };
        let ctx = Context(ctx);
        let call = move |m: &AmMessage| -> Vec<AmReply> {
            IN_HANDLER.with(|h| h.set(true));
            // SAFETY: the program's handler, called as DESIGN 3.7 says;
            // the buffers are valid during the call.
            unsafe {
                handler(
                    ctx.get(),
                    m.source,
                    ptr_or_null(m.header),
                    m.header.len(),
                    ptr_or_null(m.payload),
                    m.payload.len(),
                )
            };
            IN_HANDLER.with(|h| h.set(false));
            REPLIES.with(|r| std::mem::take(&mut *r.borrow_mut()))
        };
        runtime.am_register(id, Some(Box::new(call)))
    })
}

/// Sends an active message for handler `id` to rank `dest` of `comm`,
/// which runs it when it makes progress. `*req` completes when `header`
/// and `payload` may be reused. Every message is delivered exactly once;
/// no order between messages is promised. From inside a handler, see the
/// top of this section: the buffers are copied and `*req` is
/// `TETHER_REQUEST_NULL`.
#[no_mangle]
pub extern "C" fn tether_am_send(
    dest: c_int,
    id: c_int,
    header: *const c_void,
    header_len: usize,
    payload: *const c_void,
    payload_len: usize,
    comm: tether_comm,
    req: *mut tether_request,
) -> c_int {
    run("tether_am_send", || {
        let req = out(req, "req")?;
        let header = bytes(header, header_len, "header")?;
        if !AM_IDS.contains(&id) {
            return Err(err(
                ErrorClass::Arg,
                format!("active-message id {id} is outside 0..1024"),
            ));
        }
        if in_handler() {
            let payload = bytes(payload, payload_len, "payload")?;
            REPLIES.with(|r| {
                r.borrow_mut().push(AmReply {
                    dest,
                    id,
                    comm,
                    header: header.to_vec(),
                    payload: payload.to_vec(),
                })
            });
            *req = TETHER_REQUEST_NULL;
            return Ok(());
        }
        let payload = match (payload.is_null(), payload_len) {
            (_, 0) => Region::from_const(std::ptr::NonNull::dangling().as_ptr(), 0),
            (true, _) => {
                return Err(err(
                    ErrorClass::Arg,
                    format!("`payload` is NULL but its length is {payload_len}"),
                ))
            }
            (false, len) => Region::from_const(payload.cast(), len),
        };
        let mut st = state("tether_am_send")?;
        // SAFETY: the caller keeps `payload` valid until the request
        // completes (API contract); the header is copied.
        let id = unsafe { st.runtime()?.am_send(dest, id, header, payload, comm)? };
        *req = st.register(id);
        Ok(())
    })
}

/// One round of progress without waiting: receives what arrived, runs
/// active-message handlers, serves one-sided operations aimed at this
/// process, advances collectives and transfers.
#[no_mangle]
pub extern "C" fn tether_progress() -> c_int {
    run("tether_progress", || {
        state("tether_progress")?.runtime()?.progress();
        Ok(())
    })
}

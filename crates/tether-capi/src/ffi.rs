//! The boundary: the process-wide state behind one lock, the thread's last
//! error, pointer checks, and the guard that keeps panics inside.

use crate::lock::{BiasedLock, Guard, Reentered};
use crate::poison::Poison;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use tether::error::{err, Error, ErrorClass, Result};
use tether::{ReqId, Runtime};

use crate::types::{tether_request, TETHER_SUCCESS};

/// Everything the C API keeps between calls.
pub(crate) struct State {
    pub runtime: Option<Runtime>,
    /// C request handles (slot + 1) of live requests.
    pub requests: Handles,
    /// Hints set before `tether_init`, applied by it.
    pub early_hints: Vec<(String, String)>,
    /// Distributions made by this process.
    pub dists: crate::fields::Dists,
    /// Whether `tether_finalize` ran: a process joins once.
    pub finalized: bool,
}

impl State {
    const fn new() -> State {
        State {
            runtime: None,
            requests: Handles {
                by_slot: Vec::new(),
            },
            early_hints: Vec::new(),
            dists: crate::fields::Dists::new(),
            finalized: false,
        }
    }
}

/// The state and what guards it: the lock every call takes, and the
/// poison a caught panic leaves.
pub(crate) struct Boundary {
    state: BiasedLock<State>,
    poison: Poison,
}

static BOUNDARY: Boundary = Boundary::new();

/// The live C request handles. A handle is its request's engine slot
/// plus one, so the table is a vector indexed by slot: a send and its
/// wait look a handle up three times, which hashing made a tenth of a
/// small message's cost.
#[derive(Default)]
pub(crate) struct Handles {
    by_slot: Vec<Option<ReqId>>,
}

impl Handles {
    fn slot(handle: tether_request) -> Option<usize> {
        usize::try_from(handle).ok()?.checked_sub(1)
    }

    pub fn insert(&mut self, handle: tether_request, req: ReqId) {
        let slot = Self::slot(handle).expect("handles are slot + 1");
        if self.by_slot.len() <= slot {
            self.by_slot.resize(slot + 1, None);
        }
        self.by_slot[slot] = Some(req);
    }

    pub fn get(&self, handle: &tether_request) -> Option<&ReqId> {
        self.by_slot.get(Self::slot(*handle)?)?.as_ref()
    }

    pub fn remove(&mut self, handle: &tether_request) -> Option<ReqId> {
        self.by_slot.get_mut(Self::slot(*handle)?)?.take()
    }

    pub fn clear(&mut self) {
        self.by_slot.clear();
    }
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The state, locked for exported function `call` (its C name, for
/// errors) until the guard drops; blocks while another thread is inside.
/// `TETHER_ERR_INTERNAL`, at once and without touching the state, when
/// this thread is already inside a call: a callback Tether runs (an
/// active-message handler) must not call Tether.
#[inline(always)]
pub(crate) fn state(call: &'static str) -> Result<Guard<'static, State>> {
    BOUNDARY.state(call)
}

impl Boundary {
    pub(crate) const fn new() -> Boundary {
        Boundary {
            state: BiasedLock::new(State::new()),
            poison: Poison::new(),
        }
    }

    /// `state` on this boundary.
    #[inline(always)]
    pub(crate) fn state(&self, call: &'static str) -> Result<Guard<'_, State>> {
        self.state
            .lock(call)
            .map_err(|reentered| reentry(call, reentered))
    }

    /// `guard` on this boundary.
    pub(crate) fn guard(&self, call: &'static str, body: impl FnOnce() -> Result<c_int>) -> c_int {
        if let Err(e) = self.poison.check(call) {
            return record(&e);
        }
        self.guard_even_if_poisoned(call, body)
    }

    /// `guard` without the poison check, for the calls that must still
    /// work after a panic (those that report errors).
    pub(crate) fn guard_even_if_poisoned(
        &self,
        call: &'static str,
        body: impl FnOnce() -> Result<c_int>,
    ) -> c_int {
        // Unwind safety is asserted, not proven: whatever a panicking body
        // left half-done is never used again, since the poison stops every
        // later call before it reaches the state.
        match catch_unwind(AssertUnwindSafe(body)) {
            Ok(Ok(code)) => code,
            Ok(Err(e)) => record(&e),
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                self.poison.set(call, &what);
                record(&err(
                    ErrorClass::Internal,
                    format!(
                        "internal error (please report) in {call}: {what}; Tether is unusable \
                         in this process from now on: every later call fails with \
                         TETHER_ERR_INTERNAL"
                    ),
                ))
            }
        }
    }
}

#[cold]
fn reentry(call: &str, reentered: Reentered) -> Error {
    if crate::active::in_handler() {
        return err(
            ErrorClass::Arg,
            format!(
                "{call} called from inside an active-message handler: only tether_am_send may \
                 be called there (a blocking call would wait on progress only this thread makes)"
            ),
        );
    }
    err(
        ErrorClass::Internal,
        format!(
            "{call} called from inside another Tether call on this thread ({}) (re-entry): \
             a callback that Tether runs must not call Tether; return from it and make the \
             call afterwards",
            reentered.holder
        ),
    )
}

impl State {
    pub fn runtime(&mut self) -> Result<&mut Runtime> {
        self.runtime.as_mut().ok_or_else(|| {
            err(
                ErrorClass::NotInitialized,
                "call tether_init or tether_init_as first",
            )
        })
    }

    /// Registers a new request and returns its C handle.
    pub fn register(&mut self, req: ReqId) -> tether_request {
        let handle = req.slot as tether_request + 1;
        self.requests.insert(handle, req);
        handle
    }

    pub fn request(&self, handle: tether_request) -> Result<ReqId> {
        self.requests.get(&handle).copied().ok_or_else(|| {
            err(
                ErrorClass::Request,
                format!("request handle {handle} is not active (already completed and freed, or never started)"),
            )
        })
    }
}

/// Remembers `error` as this thread's last error and returns its code.
pub(crate) fn record(error: &Error) -> c_int {
    LAST_ERROR.with(|last| *last.borrow_mut() = error.to_string());
    error.class.code()
}

pub(crate) fn last_error() -> String {
    LAST_ERROR.with(|last| last.borrow().clone())
}

/// Runs the body of exported function `call` (its C name, for errors):
/// errors become codes (and the last error). A panic becomes
/// `TETHER_ERR_INTERNAL` and poisons the library: from then on every call
/// fails with `TETHER_ERR_INTERNAL` before its body runs, naming the
/// panic (see `poison`).
pub(crate) fn guard(call: &'static str, body: impl FnOnce() -> Result<c_int>) -> c_int {
    BOUNDARY.guard(call, body)
}

/// `guard` for bodies that succeed with `TETHER_SUCCESS`.
pub(crate) fn run(call: &'static str, body: impl FnOnce() -> Result<()>) -> c_int {
    guard(call, || body().map(|()| TETHER_SUCCESS))
}

/// `run` for the calls that report errors, which work after a panic too.
pub(crate) fn run_even_if_poisoned(call: &'static str, body: impl FnOnce() -> Result<()>) -> c_int {
    BOUNDARY.guard_even_if_poisoned(call, || body().map(|()| TETHER_SUCCESS))
}

/// A checked output pointer.
pub(crate) fn out<'a, T>(ptr: *mut T, name: &str) -> Result<&'a mut T> {
    // SAFETY: non-null pointers from C are taken to point to a valid T, as
    // the API contract requires.
    unsafe { ptr.as_mut() }
        .ok_or_else(|| err(ErrorClass::Arg, format!("argument `{name}` is NULL")))
}

/// A checked input string.
pub(crate) fn in_str<'a>(ptr: *const c_char, name: &str) -> Result<&'a str> {
    if ptr.is_null() {
        return Err(err(ErrorClass::Arg, format!("argument `{name}` is NULL")));
    }
    // SAFETY: a non-null C string argument is NUL-terminated by contract.
    unsafe { CStr::from_ptr(ptr) }
        .to_str()
        .map_err(|_| err(ErrorClass::Arg, format!("argument `{name}` is not UTF-8")))
}

/// Copies `text` with a NUL into `buf` of `len` bytes; fails (writing
/// nothing) when it does not fit.
pub(crate) fn write_str(text: &str, buf: *mut c_char, len: c_int, name: &str) -> Result<()> {
    if buf.is_null() {
        return Err(err(ErrorClass::Arg, format!("argument `{name}` is NULL")));
    }
    let needed = text.len() + 1;
    if len < 0 || (len as usize) < needed {
        return Err(err(
            ErrorClass::Arg,
            format!("buffer `{name}` of {len} bytes is too small: {needed} needed"),
        ));
    }
    // SAFETY: `buf` holds at least `needed` bytes, checked above.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
        *buf.add(text.len()) = 0;
    }
    Ok(())
}

/// Copies as much of `text` as fits, always NUL-terminated (for messages).
pub(crate) fn write_str_truncated(text: &str, buf: *mut c_char, len: c_int) -> Result<()> {
    if buf.is_null() || len <= 0 {
        return Err(err(
            ErrorClass::Arg,
            "message buffer is NULL or has no room",
        ));
    }
    let mut n = text.len().min(len as usize - 1);
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    // SAFETY: `buf` holds `len > n` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
    }
    Ok(())
}

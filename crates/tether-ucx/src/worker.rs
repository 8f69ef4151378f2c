//! [`Worker`], [`Endpoint`] and the events UCX callbacks leave behind.
//!
//! UCX calls back from inside `ucp_worker_progress` (AM arrivals, send and
//! receive completions, endpoint errors). Every callback here only *records*
//! into a queue owned by the worker, and the caller takes the records out
//! with [`Worker::next_event`]: no user code ever runs inside UCX, which is
//! what a sans-IO transport polling the worker needs.
//!
//! Lifetimes: a [`Worker`], its [`Endpoint`]s and held data ([`AmDesc`])
//! all share one reference-counted core; the UCX worker is destroyed when
//! the last of them goes, endpoints are closed when dropped.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::os::fd::RawFd;
use std::ptr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::context::{Context, ContextInner, REQUEST_SPACE};
use crate::error::{Error, Result};
use crate::ffi::*;
use crate::library::Ucp;

/// How long dropping an endpoint waits for UCX to finish closing it.
const DROP_GRACE: Duration = Duration::from_secs(2);
/// How long dropping the worker waits for cancelled operations: by then
/// every endpoint is closed, so what is still in flight (UCX cannot cancel
/// sends, nor rendezvous receives in 1.13) will not complete anyway.
const CANCEL_GRACE: Duration = Duration::from_millis(100);

/// Identifies an [`Endpoint`] within its worker (in [`Event::EndpointFailed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EpId(pub u64);

/// Identifies a send that did not complete at once ([`Event::SendDone`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SendToken(pub u64);

/// Identifies a receive that did not complete at once ([`Event::RecvDone`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecvToken(pub u64);

/// An operation that either finished inside the call or will be reported
/// by an event carrying the token.
#[derive(Debug)]
pub enum Completion<T, K> {
    /// Finished: the value (e.g. the buffers given back).
    Done(T),
    /// In flight: an event with this token reports the end.
    Pending(K),
}

/// The `(header, data)` buffers of [`Endpoint::am_send`].
pub type AmBuffers = (Vec<u8>, Vec<u8>);

/// `UCP_ERR_HANDLING_MODE_*` for a new endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorMode {
    /// `NONE`: UCX may pick any lane (shared memory included), but a dead
    /// peer may never be reported (never, on `sm`).
    None,
    /// `PEER`: a peer failure ends in [`Event::EndpointFailed`]. On `sm` it
    /// needs `UCX_POSIX_ERROR_HANDLING=y UCX_SYSV_ERROR_HANDLING=y`.
    Peer,
}

/// `UCS_THREAD_MODE_*` of a new worker ([`Worker::with_mode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadMode {
    /// `SINGLE`: only the thread that created the worker calls it.
    Single,
    /// `SERIALIZED`: any thread may call it, one at a time. The types
    /// stay `!Send` (their handles are reference counted without atomics);
    /// a caller that moves a worker, its context, endpoints and
    /// descriptors between threads together, and calls them under one
    /// lock, may assert `Send` for the whole.
    Serialized,
}

/// How [`Endpoint::am_send`] may send.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SendMode {
    /// UCX chooses by size (its thresholds).
    #[default]
    Auto,
    /// `UCP_AM_SEND_FLAG_EAGER`.
    Eager,
    /// `UCP_AM_SEND_FLAG_RNDV`: the receiver pulls the data into its own
    /// buffer ([`Worker::recv_data`]); no copy on either side.
    Rendezvous,
}

/// What [`Worker::arm`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arm {
    /// The event fd will become readable on the next event: safe to sleep.
    Armed,
    /// Events are pending (`UCS_ERR_BUSY`): progress again, do not sleep.
    Busy,
}

/// The payload of an arrived active message.
#[derive(Debug)]
pub enum AmData {
    /// No payload.
    Empty,
    /// Eager payload, copied out of UCX's buffer inside the callback
    /// (UCX did not let it persist).
    Bytes(Vec<u8>),
    /// Payload UCX keeps for the caller: eager data in a UCX descriptor, or
    /// a rendezvous announcement whose data is still on the sender. Pass it
    /// to [`Worker::recv_data`] (or drop it to decline / release).
    Held(AmDesc),
}

impl AmData {
    /// Payload length in bytes.
    pub fn len(&self) -> usize {
        match self {
            AmData::Empty => 0,
            AmData::Bytes(b) => b.len(),
            AmData::Held(d) => d.len(),
        }
    }

    /// Whether there is no payload.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The payload's bytes, wherever they are kept; `None` for data
    /// still on the sender (rendezvous).
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            AmData::Empty => Some(&[]),
            AmData::Bytes(b) => Some(b),
            AmData::Held(d) => d.bytes(),
        }
    }
}

/// An active message that arrived on one of the worker's handler ids.
#[derive(Debug)]
pub struct AmMessage {
    /// The AM id it was sent to.
    pub id: u16,
    /// The user header (copied).
    pub header: Vec<u8>,
    /// The payload.
    pub data: AmData,
}

/// A UCX data descriptor held past the AM callback (`UCS_INPROGRESS`).
/// Dropping it calls `ucp_am_data_release` (for rendezvous: declines the
/// data; the sender's operation then completes with success).
pub struct AmDesc {
    core: Rc<Core>,
    ptr: *mut c_void,
    len: usize,
    rndv: bool,
}

impl std::fmt::Debug for AmDesc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmDesc")
            .field("len", &self.len)
            .field("rndv", &self.rndv)
            .finish()
    }
}

impl AmDesc {
    /// Payload length in bytes (for rendezvous: the buffer size needed).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the data is still on the sender (rendezvous).
    pub fn is_rendezvous(&self) -> bool {
        self.rndv
    }

    /// The bytes of held eager data (`None` for rendezvous).
    pub fn bytes(&self) -> Option<&[u8]> {
        if self.rndv {
            return None;
        }
        // SAFETY: for eager data UCX passed `ptr`/`len` as the payload and,
        // since the callback returned UCS_INPROGRESS, keeps it until
        // ucp_am_data_release, which only Drop (or recv_data, consuming
        // self) calls.
        Some(unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) })
    }

    fn take(mut self) -> *mut c_void {
        std::mem::replace(&mut self.ptr, ptr::null_mut())
    }
}

impl Drop for AmDesc {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: `ptr` is a descriptor this worker's AM callback kept
            // (returned UCS_INPROGRESS for) and nobody released yet.
            unsafe { (self.core.ucp.am_data_release)(self.core.handle, self.ptr) };
        }
    }
}

/// What the worker's callbacks recorded; see [`Worker::next_event`].
#[derive(Debug)]
pub enum Event {
    /// An active message arrived.
    Am(AmMessage),
    /// A send reported as [`Completion::Pending`] finished.
    SendDone {
        token: SendToken,
        result: Result<()>,
        /// The `(header, data)` buffers of [`Endpoint::am_send`], given
        /// back; `None` for [`Endpoint::am_send_raw`].
        buffers: Option<AmBuffers>,
    },
    /// A receive reported as [`Completion::Pending`] finished.
    RecvDone {
        token: RecvToken,
        /// The number of bytes received.
        result: Result<usize>,
        /// The buffer of [`Worker::recv_data`], given back; `None` for
        /// [`Worker::recv_data_raw`].
        buffer: Option<Vec<u8>>,
    },
    /// UCX reported the endpoint failed (peer error handling); the endpoint
    /// can no longer send and should be dropped.
    EndpointFailed { ep: EpId, error: Error },
}

enum RawData {
    Empty,
    Bytes(Vec<u8>),
    Desc {
        ptr: *mut c_void,
        len: usize,
        rndv: bool,
    },
}

enum RawEvent {
    Am {
        id: u16,
        header: Vec<u8>,
        data: RawData,
    },
    SendDone {
        token: u64,
        status: ucs_status_t,
        buffers: Option<AmBuffers>,
    },
    RecvDone {
        token: u64,
        status: ucs_status_t,
        length: usize,
        buffer: Option<Vec<u8>>,
    },
    EpFailed {
        ep: u64,
        status: ucs_status_t,
    },
}

struct SendOp {
    req: *mut c_void,
    buffers: Option<AmBuffers>,
}

struct RecvOp {
    req: *mut c_void,
    buffer: Option<Vec<u8>>,
}

struct EpState {
    id: u64,
    failed: Option<ucs_status_t>,
}

/// The `arg` of one AM handler: the handler's id and its worker.
struct HandlerArg {
    core: *const Core,
    id: u16,
}

#[derive(Default)]
pub(crate) struct State {
    events: VecDeque<RawEvent>,
    next_token: u64,
    sends: HashMap<u64, SendOp>,
    recvs: HashMap<u64, RecvOp>,
    /// Keyed by the `ucp_ep_h` address.
    eps: HashMap<usize, EpState>,
    /// Boxed so that the addresses given to UCX stay put as the Vec grows.
    #[allow(clippy::vec_box)]
    handler_args: Vec<Box<HandlerArg>>,
}

impl State {
    fn token(&mut self) -> u64 {
        self.next_token += 1;
        self.next_token
    }
}

pub(crate) struct Core {
    _ctx: Rc<ContextInner>,
    pub(crate) ucp: &'static Ucp,
    pub(crate) handle: ucp_worker_h,
    /// Borrowed only briefly, never across a UCX call (callbacks borrow it).
    pub(crate) state: RefCell<State>,
}

impl Core {
    /// Gives the in-flight request `p` a new token, written into its
    /// reserved space where the callback reads it.
    ///
    /// # Safety
    /// `p` is a request of this context (REQUEST_SPACE bytes) whose
    /// callback has not run: callbacks run only in later progress calls.
    unsafe fn new_token(&self, p: *mut c_void) -> u64 {
        let token = self.state.borrow_mut().token();
        // SAFETY: the caller's contract.
        unsafe { set_request_token(p, token) };
        token
    }

    /// Keeps the in-flight send-type request `p` (a send, a flush) and
    /// the buffers it reads until its callback reports it.
    ///
    /// # Safety
    /// As [`Core::new_token`].
    pub(crate) unsafe fn track_send(
        &self,
        p: *mut c_void,
        buffers: Option<AmBuffers>,
    ) -> SendToken {
        // SAFETY: the caller's contract.
        let token = unsafe { self.new_token(p) };
        let op = SendOp { req: p, buffers };
        self.state.borrow_mut().sends.insert(token, op);
        SendToken(token)
    }

    /// [`Core::track_send`] for a receive and the buffer it fills.
    ///
    /// # Safety
    /// As [`Core::new_token`].
    unsafe fn track_recv(&self, p: *mut c_void, buffer: Option<Vec<u8>>) -> RecvToken {
        // SAFETY: the caller's contract.
        let token = unsafe { self.new_token(p) };
        let op = RecvOp { req: p, buffer };
        self.state.borrow_mut().recvs.insert(token, op);
        RecvToken(token)
    }

    fn progress(&self) -> u32 {
        // SAFETY: live worker, used from its owning thread (Core is !Send).
        unsafe { (self.ucp.worker_progress)(self.handle) }
    }

    /// Waits (progressing) until `req` is no longer in progress or the
    /// deadline passes; frees it either way (freeing an unfinished request
    /// lets UCX finish and release it itself).
    fn wait_request(&self, req: *mut c_void, deadline: Instant) -> ucs_status_t {
        let mut st;
        loop {
            // SAFETY: `req` is a live request of this worker, not yet freed.
            st = unsafe { (self.ucp.request_check_status)(req) };
            if st != UCS_INPROGRESS || Instant::now() >= deadline {
                break;
            }
            self.progress();
        }
        // SAFETY: as above; freed once.
        unsafe { (self.ucp.request_free)(req) };
        st
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        let this: &Core = self;
        // Cancel what is in flight and let the callbacks run, so UCX stops
        // touching buffers before they are freed.
        let reqs: Vec<*mut c_void> = {
            let s = this.state.borrow();
            s.sends
                .values()
                .map(|o| o.req)
                .chain(s.recvs.values().map(|o| o.req))
                .collect()
        };
        for req in reqs {
            // SAFETY: each is a live request of this worker whose callback
            // has not run yet (it removes the entry when it does).
            unsafe { (this.ucp.request_cancel)(this.handle, req) };
        }
        let deadline = Instant::now() + CANCEL_GRACE;
        while Instant::now() < deadline {
            {
                let s = this.state.borrow();
                if s.sends.is_empty() && s.recvs.is_empty() {
                    break;
                }
            }
            this.progress();
        }
        let mut s = this.state.borrow_mut();
        for ev in s.events.drain(..) {
            if let RawEvent::Am {
                data: RawData::Desc { ptr, .. },
                ..
            } = ev
            {
                // SAFETY: a descriptor kept by the AM callback and never
                // handed out (still in the queue).
                unsafe { (this.ucp.am_data_release)(this.handle, ptr) };
            }
        }
        // Buffers of operations UCX did not finish: UCX may still own them
        // until the worker is destroyed below; leak rather than free early.
        for (_, op) in s.sends.drain() {
            std::mem::forget(op.buffers);
        }
        for (_, op) in s.recvs.drain() {
            std::mem::forget(op.buffer);
        }
        drop(s);
        // SAFETY: no endpoint or descriptor is left (each holds an Rc to
        // this core), and the worker is destroyed once.
        unsafe { (this.ucp.worker_destroy)(this.handle) };
    }
}

// --- Callbacks (they only record) --------------------------------------------

/// Reads the token the binding wrote into a request's reserved space.
///
/// # Safety
/// `req` must be a request of a context created with `REQUEST_SPACE` bytes.
unsafe fn request_token(req: *mut c_void) -> u64 {
    // SAFETY: the caller guarantees REQUEST_SPACE (>= 8) bytes at `req`.
    unsafe { ptr::read_unaligned(req as *const u64) }
}

/// # Safety
/// As [`request_token`].
unsafe fn set_request_token(req: *mut c_void, token: u64) {
    const { assert!(REQUEST_SPACE >= 8) };
    // SAFETY: the caller guarantees REQUEST_SPACE (>= 8) bytes at `req`.
    unsafe { ptr::write_unaligned(req as *mut u64, token) }
}

pub(crate) unsafe extern "C" fn send_cb(
    req: *mut c_void,
    status: ucs_status_t,
    user_data: *mut c_void,
) {
    // SAFETY: user_data is the Core that issued the send and outlives every
    // request of it (Core::drop waits for them); `req` is that request,
    // whose token was written right after the send returned it (callbacks
    // run only in later progress calls).
    unsafe {
        let core = &*(user_data as *const Core);
        let token = request_token(req);
        if let Ok(mut s) = core.state.try_borrow_mut() {
            let buffers = s.sends.remove(&token).and_then(|op| op.buffers);
            s.events.push_back(RawEvent::SendDone {
                token,
                status,
                buffers,
            });
        }
        (core.ucp.request_free)(req);
    }
}

unsafe extern "C" fn recv_cb(
    req: *mut c_void,
    status: ucs_status_t,
    length: usize,
    user_data: *mut c_void,
) {
    // SAFETY: as in send_cb.
    unsafe {
        let core = &*(user_data as *const Core);
        let token = request_token(req);
        if let Ok(mut s) = core.state.try_borrow_mut() {
            let buffer = s.recvs.remove(&token).and_then(|op| op.buffer);
            s.events.push_back(RawEvent::RecvDone {
                token,
                status,
                length,
                buffer,
            });
        }
        (core.ucp.request_free)(req);
    }
}

unsafe extern "C" fn am_cb(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const ucp_am_recv_param_t,
) -> ucs_status_t {
    // SAFETY: `arg` is a HandlerArg boxed in the core's state (freed only
    // with the core, after the worker is destroyed); UCX passes valid
    // header/data ranges and a valid param for the duration of the call.
    unsafe {
        let h = &*(arg as *const HandlerArg);
        let core = &*h.core;
        let attr = (*param).recv_attr;
        let header = if header_length == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(header as *const u8, header_length).to_vec()
        };
        let (data, ret) = if attr & UCP_AM_RECV_ATTR_FLAG_RNDV != 0 {
            (
                RawData::Desc {
                    ptr: data,
                    len: length,
                    rndv: true,
                },
                UCS_INPROGRESS,
            )
        } else if length == 0 {
            (RawData::Empty, UCS_OK)
        } else if attr & UCP_AM_RECV_ATTR_FLAG_DATA != 0 {
            (
                RawData::Desc {
                    ptr: data,
                    len: length,
                    rndv: false,
                },
                UCS_INPROGRESS,
            )
        } else {
            let bytes = std::slice::from_raw_parts(data as *const u8, length).to_vec();
            (RawData::Bytes(bytes), UCS_OK)
        };
        match core.state.try_borrow_mut() {
            Ok(mut s) => {
                s.events.push_back(RawEvent::Am {
                    id: h.id,
                    header,
                    data,
                });
                ret
            }
            // Cannot happen (state is never borrowed across a UCX call);
            // if it did, refuse the message rather than lose track of it.
            Err(_) => UCS_OK,
        }
    }
}

unsafe extern "C" fn ep_err_cb(arg: *mut c_void, ep: ucp_ep_h, status: ucs_status_t) {
    // SAFETY: `arg` is the Core the endpoint belongs to, alive while the
    // endpoint is (the Endpoint holds an Rc to it).
    unsafe {
        let core = &*(arg as *const Core);
        if let Ok(mut s) = core.state.try_borrow_mut() {
            if let Some(e) = s.eps.get_mut(&(ep as usize)) {
                e.failed = Some(status);
                let id = e.id;
                s.events.push_back(RawEvent::EpFailed { ep: id, status });
            }
        }
    }
}

// --- Worker -------------------------------------------------------------------

/// A UCP worker (`UCS_THREAD_MODE_SINGLE`) with AM handlers that record into
/// its event queue. Not `Send`: UCX's single-threaded worker belongs to the
/// thread that created it.
pub struct Worker {
    pub(crate) core: Rc<Core>,
}

impl Worker {
    /// Creates a worker and registers an AM handler for each of `am_ids`
    /// *before* the worker has an address to publish, so that no message
    /// can arrive for an id without a handler (UCX would drop it).
    pub fn new(ctx: &Context, am_ids: &[u16]) -> Result<Worker> {
        Worker::with_mode(ctx, am_ids, ThreadMode::Single)
    }

    /// [`Worker::new`] in thread mode `mode`.
    pub fn with_mode(ctx: &Context, am_ids: &[u16], mode: ThreadMode) -> Result<Worker> {
        let ucp = ctx.inner.ucp;
        let params = ucp_worker_params_t {
            field_mask: UCP_WORKER_PARAM_FIELD_THREAD_MODE,
            thread_mode: match mode {
                ThreadMode::Single => UCS_THREAD_MODE_SINGLE,
                ThreadMode::Serialized => UCS_THREAD_MODE_SERIALIZED,
            },
            ..Default::default()
        };
        let mut handle: ucp_worker_h = ptr::null_mut();
        // SAFETY: live context, valid params (thread_mode masked) and
        // out-pointer.
        let st = unsafe { (ucp.worker_create)(ctx.inner.handle, &params, &mut handle) };
        if st != UCS_OK {
            return Err(Error::ucx(ucp, "ucp_worker_create", st));
        }
        let core = Rc::new(Core {
            _ctx: ctx.inner.clone(),
            ucp,
            handle,
            state: RefCell::new(State::default()),
        });
        for &id in am_ids {
            let arg = Box::new(HandlerArg {
                core: Rc::as_ptr(&core),
                id,
            });
            let param = ucp_am_handler_param_t {
                field_mask: UCP_AM_HANDLER_PARAM_FIELD_ID
                    | UCP_AM_HANDLER_PARAM_FIELD_FLAGS
                    | UCP_AM_HANDLER_PARAM_FIELD_CB
                    | UCP_AM_HANDLER_PARAM_FIELD_ARG,
                id: id.into(),
                flags: UCP_AM_FLAG_WHOLE_MSG,
                cb: Some(am_cb),
                arg: &*arg as *const HandlerArg as *mut c_void,
            };
            core.state.borrow_mut().handler_args.push(arg);
            // SAFETY: live worker; `param.arg` points into a Box kept in the
            // core's state for the worker's whole life.
            let st = unsafe { (ucp.worker_set_am_recv_handler)(handle, &param) };
            if st != UCS_OK {
                return Err(Error::ucx(ucp, "ucp_worker_set_am_recv_handler", st));
            }
        }
        Ok(Worker { core })
    }

    /// The library this worker uses.
    pub fn ucp(&self) -> &'static Ucp {
        self.core.ucp
    }

    /// The raw handle, valid while this worker or any of its endpoints lives.
    pub fn as_raw(&self) -> ucp_worker_h {
        self.core.handle
    }

    /// The worker's address, to publish to peers (they pass it to
    /// [`Worker::connect`]).
    pub fn address(&self) -> Result<Vec<u8>> {
        let ucp = self.core.ucp;
        let mut addr: *mut ucp_address = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: live worker, valid out-pointers.
        let st = unsafe { (ucp.worker_get_address)(self.core.handle, &mut addr, &mut len) };
        if st != UCS_OK {
            return Err(Error::ucx(ucp, "ucp_worker_get_address", st));
        }
        // SAFETY: UCX returned `len` readable bytes at `addr`; released once.
        let bytes = unsafe {
            let v = std::slice::from_raw_parts(addr as *const u8, len).to_vec();
            (ucp.worker_release_address)(self.core.handle, addr);
            v
        };
        Ok(bytes)
    }

    /// `max_am_header` from `ucp_worker_query`: the largest AM header.
    pub fn max_am_header(&self) -> Result<usize> {
        let mut attr = ucp_worker_attr_t {
            field_mask: UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER,
            ..Default::default()
        };
        // SAFETY: live worker, valid attr with one masked output field.
        let st = unsafe { (self.core.ucp.worker_query)(self.core.handle, &mut attr) };
        if st != UCS_OK {
            return Err(Error::ucx(self.core.ucp, "ucp_worker_query", st));
        }
        Ok(attr.max_am_header)
    }

    /// `ucp_worker_progress`: runs UCX (callbacks record into the event
    /// queue) and returns how many events UCX processed. Never blocks.
    pub fn progress(&self) -> u32 {
        self.core.progress()
    }

    /// Takes the next recorded event, oldest first.
    pub fn next_event(&self) -> Option<Event> {
        let raw = self.core.state.borrow_mut().events.pop_front()?;
        let ucp = self.core.ucp;
        let result = |op, st: ucs_status_t| {
            if st == UCS_OK {
                Ok(())
            } else {
                Err(Error::ucx(ucp, op, st))
            }
        };
        Some(match raw {
            RawEvent::Am { id, header, data } => {
                let data = match data {
                    RawData::Empty => AmData::Empty,
                    RawData::Bytes(b) => AmData::Bytes(b),
                    RawData::Desc { ptr, len, rndv } => AmData::Held(AmDesc {
                        core: self.core.clone(),
                        ptr,
                        len,
                        rndv,
                    }),
                };
                Event::Am(AmMessage { id, header, data })
            }
            RawEvent::SendDone {
                token,
                status,
                buffers,
            } => Event::SendDone {
                token: SendToken(token),
                result: result("ucp_am_send_nbx", status),
                buffers,
            },
            RawEvent::RecvDone {
                token,
                status,
                length,
                buffer,
            } => Event::RecvDone {
                token: RecvToken(token),
                result: result("ucp_am_recv_data_nbx", status).map(|()| length),
                buffer,
            },
            RawEvent::EpFailed { ep, status } => Event::EndpointFailed {
                ep: EpId(ep),
                error: Error::ucx(ucp, "endpoint", status),
            },
        })
    }

    /// Whether events are waiting in the queue.
    pub fn has_events(&self) -> bool {
        !self.core.state.borrow().events.is_empty()
    }

    /// `ucp_worker_get_efd`: a file descriptor (an epoll fd in UCX 1.13)
    /// that becomes readable when the worker has work after [`Worker::arm`].
    /// Owned by UCX: register it (e.g. mio's `SourceFd`), never close it.
    pub fn event_fd(&self) -> Result<RawFd> {
        let mut fd = -1;
        // SAFETY: live worker (created with UCP_FEATURE_WAKEUP), valid out-pointer.
        let st = unsafe { (self.core.ucp.worker_get_efd)(self.core.handle, &mut fd) };
        if st != UCS_OK {
            return Err(Error::ucx(self.core.ucp, "ucp_worker_get_efd", st));
        }
        Ok(fd)
    }

    /// `ucp_worker_arm`: call after progress returned 0 and the event queue
    /// is empty, right before sleeping on [`Worker::event_fd`].
    pub fn arm(&self) -> Result<Arm> {
        // SAFETY: live worker created with UCP_FEATURE_WAKEUP.
        match unsafe { (self.core.ucp.worker_arm)(self.core.handle) } {
            UCS_OK => Ok(Arm::Armed),
            UCS_ERR_BUSY => Ok(Arm::Busy),
            st => Err(Error::ucx(self.core.ucp, "ucp_worker_arm", st)),
        }
    }

    /// Progresses until an event is queued, sleeping on the event fd when
    /// there is nothing to do, for at most `timeout`. Returns whether an
    /// event is queued. A convenience for tests and simple programs.
    pub fn wait(&self, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            while self.progress() > 0 {}
            if self.has_events() {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            if self.arm()? == Arm::Busy {
                continue;
            }
            let ms = (deadline - now).as_millis().clamp(1, i32::MAX as u128) as i32;
            let mut pfd = libc::pollfd {
                fd: self.event_fd()?,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, ms) };
        }
    }

    /// Creates an endpoint to the worker whose [`Worker::address`] is
    /// `address`. UCX queues sends while the connection is wired up.
    pub fn connect(&self, address: &[u8], mode: ErrorMode) -> Result<Endpoint> {
        let ucp = self.core.ucp;
        if address.is_empty() {
            return Err(Error::Invalid("empty UCX worker address".into()));
        }
        let mut params = ucp_ep_params_t {
            field_mask: UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
            address: address.as_ptr() as *const ucp_address,
            err_mode: match mode {
                ErrorMode::None => UCP_ERR_HANDLING_MODE_NONE,
                ErrorMode::Peer => UCP_ERR_HANDLING_MODE_PEER,
            },
            ..Default::default()
        };
        if mode == ErrorMode::Peer {
            params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
            params.err_handler = ucp_err_handler_t {
                cb: Some(ep_err_cb),
                arg: Rc::as_ptr(&self.core) as *mut c_void,
            };
        }
        let mut ep: ucp_ep_h = ptr::null_mut();
        // SAFETY: live worker; `params.address` points at `address` (read
        // during the call only); the error handler's arg is the core, which
        // outlives the endpoint (the Endpoint holds an Rc).
        let st = unsafe { (ucp.ep_create)(self.core.handle, &params, &mut ep) };
        if st != UCS_OK {
            return Err(Error::ucx(ucp, "ucp_ep_create", st));
        }
        let mut s = self.core.state.borrow_mut();
        let id = s.token();
        s.eps.insert(ep as usize, EpState { id, failed: None });
        Ok(Endpoint {
            core: self.core.clone(),
            handle: ep,
            id: EpId(id),
            open: true,
        })
    }

    /// Receives the payload of `desc` into `buffer` (at least `desc.len()`
    /// bytes): for rendezvous UCX fetches it straight into the buffer; held
    /// eager data is copied. The buffer comes back in `Done` or in
    /// [`Event::RecvDone`], with the byte count.
    pub fn recv_data(
        &self,
        desc: AmDesc,
        mut buffer: Vec<u8>,
    ) -> Result<Completion<(Vec<u8>, usize), RecvToken>> {
        let ptr = buffer.as_mut_ptr();
        let len = buffer.len();
        // SAFETY: `buffer` is moved into the pending-receive table (its heap
        // block does not move) or returned in Done; the table entry is only
        // released by the completion callback or, after cancel, by Core::drop.
        let r = unsafe { self.recv_data_inner(desc, ptr, len, Some(buffer)) }?;
        Ok(r)
    }

    /// [`Worker::recv_data`] into memory the caller owns.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be writable and neither read nor written by
    /// anything else until this returns `Done` or the [`Event::RecvDone`]
    /// with the returned token is taken (or the worker core is dropped).
    pub unsafe fn recv_data_raw(
        &self,
        desc: AmDesc,
        ptr: *mut u8,
        len: usize,
    ) -> Result<Completion<usize, RecvToken>> {
        // SAFETY: forwarded contract.
        match unsafe { self.recv_data_inner(desc, ptr, len, None) }? {
            Completion::Done((_, n)) => Ok(Completion::Done(n)),
            Completion::Pending(t) => Ok(Completion::Pending(t)),
        }
    }

    /// # Safety
    /// As [`Worker::recv_data_raw`]; `owned`, when given, is the Vec that
    /// owns `ptr..ptr+len`.
    unsafe fn recv_data_inner(
        &self,
        desc: AmDesc,
        ptr: *mut u8,
        len: usize,
        owned: Option<Vec<u8>>,
    ) -> Result<Completion<(Vec<u8>, usize), RecvToken>> {
        if !Rc::ptr_eq(&desc.core, &self.core) {
            return Err(Error::Invalid("AM descriptor of another worker".into()));
        }
        if len < desc.len {
            return Err(Error::Invalid(format!(
                "receive buffer of {len} bytes for {} bytes of AM data",
                desc.len
            )));
        }
        let ucp = self.core.ucp;
        let n = desc.len;
        if !desc.rndv {
            if let Some(src) = desc.bytes() {
                // SAFETY: `src` is UCX's held data, `ptr` the caller's
                // buffer of at least `n` bytes; they cannot overlap.
                unsafe { ptr::copy_nonoverlapping(src.as_ptr(), ptr, n) };
            }
            drop(desc); // releases the descriptor
            return Ok(Completion::Done((owned.unwrap_or_default(), n)));
        }
        let data_desc = desc.take();
        let param = ucp_request_param_t {
            op_attr_mask: UCP_OP_ATTR_FIELD_CALLBACK
                | UCP_OP_ATTR_FIELD_USER_DATA
                | UCP_OP_ATTR_FIELD_DATATYPE,
            cb: ucp_request_param_cb {
                recv_am: Some(recv_cb),
            },
            datatype: UCP_DATATYPE_BYTES,
            user_data: Rc::as_ptr(&self.core) as *mut c_void,
            ..Default::default()
        };
        // SAFETY: `data_desc` is a rendezvous descriptor kept by am_cb and not
        // released (taken from the AmDesc, so its Drop will not release it);
        // the buffer contract is the caller's; user_data is the core, which
        // outlives the request (Core::drop cancels and waits).
        let p =
            unsafe { (ucp.am_recv_data_nbx)(self.core.handle, data_desc, ptr.cast(), n, &param) };
        if p.is_null() {
            return Ok(Completion::Done((owned.unwrap_or_default(), n)));
        }
        if ucs_ptr_is_err(p) {
            return Err(Error::ucx(ucp, "ucp_am_recv_data_nbx", ucs_ptr_status(p)));
        }
        // SAFETY: `p` is an in-flight request UCX just returned.
        Ok(Completion::Pending(unsafe {
            self.core.track_recv(p, owned)
        }))
    }
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("handle", &self.core.handle)
            .finish()
    }
}

// --- Endpoint -----------------------------------------------------------------

/// A connection to a remote worker. Dropping it closes it with
/// `UCP_EP_CLOSE_FLAG_FORCE` (outstanding sends end with an error event);
/// use [`Endpoint::close`] to flush first.
pub struct Endpoint {
    pub(crate) core: Rc<Core>,
    pub(crate) handle: ucp_ep_h,
    id: EpId,
    open: bool,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("id", &self.id).finish()
    }
}

impl Endpoint {
    /// This endpoint's id (as in [`Event::EndpointFailed`]).
    pub fn id(&self) -> EpId {
        self.id
    }

    /// The raw handle, valid while this endpoint lives.
    pub fn as_raw(&self) -> ucp_ep_h {
        self.handle
    }

    /// The failure UCX reported for this endpoint, if any.
    pub fn failure(&self) -> Option<Error> {
        let st = self
            .core
            .state
            .borrow()
            .eps
            .get(&(self.handle as usize))?
            .failed?;
        Some(Error::ucx(self.core.ucp, "endpoint", st))
    }

    /// Sends an active message to handler `id`, owning the buffers until
    /// UCX is done with them: `Done` gives them back at once, `Pending`
    /// in [`Event::SendDone`]. Never blocks. `header` must not exceed
    /// [`Worker::max_am_header`].
    pub fn am_send(
        &self,
        id: u16,
        header: Vec<u8>,
        data: Vec<u8>,
        mode: SendMode,
    ) -> Result<Completion<AmBuffers, SendToken>> {
        let (h, hl, d, dl) = (header.as_ptr(), header.len(), data.as_ptr(), data.len());
        // SAFETY: the Vecs are moved into the pending-send table (their heap
        // blocks do not move) or returned in Done, and are not touched until
        // the callback gives them back.
        unsafe { self.send_inner(id, h, hl, d, dl, mode, Some((header, data))) }
    }

    /// [`Endpoint::am_send`] from memory the caller owns (zero copy).
    ///
    /// # Safety
    /// Both ranges must stay valid and unmodified until this returns `Done`
    /// or the [`Event::SendDone`] with the returned token is taken (or the
    /// worker core is dropped).
    pub unsafe fn am_send_raw(
        &self,
        id: u16,
        header: *const u8,
        header_len: usize,
        data: *const u8,
        data_len: usize,
        mode: SendMode,
    ) -> Result<Completion<(), SendToken>> {
        // SAFETY: forwarded contract.
        match unsafe { self.send_inner(id, header, header_len, data, data_len, mode, None) }? {
            Completion::Done(_) => Ok(Completion::Done(())),
            Completion::Pending(t) => Ok(Completion::Pending(t)),
        }
    }

    /// # Safety
    /// As [`Endpoint::am_send_raw`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn send_inner(
        &self,
        id: u16,
        header: *const u8,
        header_len: usize,
        data: *const u8,
        data_len: usize,
        mode: SendMode,
        owned: Option<AmBuffers>,
    ) -> Result<Completion<AmBuffers, SendToken>> {
        let ucp = self.core.ucp;
        let mut param = ucp_request_param_t {
            op_attr_mask: UCP_OP_ATTR_FIELD_CALLBACK
                | UCP_OP_ATTR_FIELD_USER_DATA
                | UCP_OP_ATTR_FIELD_DATATYPE,
            cb: ucp_request_param_cb {
                send: Some(send_cb),
            },
            datatype: UCP_DATATYPE_BYTES,
            user_data: Rc::as_ptr(&self.core) as *mut c_void,
            ..Default::default()
        };
        let flags = match mode {
            SendMode::Auto => 0,
            SendMode::Eager => UCP_AM_SEND_FLAG_EAGER,
            SendMode::Rendezvous => UCP_AM_SEND_FLAG_RNDV,
        };
        if flags != 0 {
            param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
            param.flags = flags;
        }
        // SAFETY: live endpoint; buffer contract from the caller; user_data
        // is the core, which outlives the request (Core::drop cancels and
        // waits for outstanding ones).
        let p = unsafe {
            (ucp.am_send_nbx)(
                self.handle,
                id.into(),
                header.cast(),
                header_len,
                data.cast(),
                data_len,
                &param,
            )
        };
        if p.is_null() {
            return Ok(Completion::Done(owned.unwrap_or_default()));
        }
        if ucs_ptr_is_err(p) {
            return Err(Error::ucx(ucp, "ucp_am_send_nbx", ucs_ptr_status(p)));
        }
        // SAFETY: `p` is an in-flight request UCX just returned.
        Ok(Completion::Pending(unsafe {
            self.core.track_send(p, owned)
        }))
    }

    /// Closes the endpoint, progressing the worker for at most `timeout`.
    /// `force: false` flushes outstanding sends first (needs the peer to
    /// progress too); `true` cancels them.
    pub fn close(mut self, force: bool, timeout: Duration) -> Result<()> {
        let st = self.close_inner(force, timeout);
        if st == UCS_OK {
            Ok(())
        } else {
            Err(Error::ucx(self.core.ucp, "ucp_ep_close_nbx", st))
        }
    }

    fn close_inner(&mut self, force: bool, timeout: Duration) -> ucs_status_t {
        if !self.open {
            return UCS_OK;
        }
        self.open = false;
        let ucp = self.core.ucp;
        let mut param = ucp_request_param_t::default();
        if force {
            param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            param.flags = UCP_EP_CLOSE_FLAG_FORCE;
        }
        // SAFETY: live endpoint, closed once (Drop/close consume it).
        let p = unsafe { (ucp.ep_close_nbx)(self.handle, &param) };
        let st = if p.is_null() {
            UCS_OK
        } else if ucs_ptr_is_err(p) {
            ucs_ptr_status(p)
        } else {
            self.core.wait_request(p, Instant::now() + timeout)
        };
        self.core
            .state
            .borrow_mut()
            .eps
            .remove(&(self.handle as usize));
        st
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.close_inner(true, DROP_GRACE);
    }
}

/// Registers the worker's event fd ([`Worker::event_fd`]) in a mio `Poll`,
/// where Tether's reactor sleeps. Before sleeping: progress until it
/// returns 0, take the events, then [`Worker::arm`]; sleep only on
/// [`Arm::Armed`]. Works edge-triggered (mio's mode): the fd is itself an
/// epoll fd in UCX 1.13 and nests.
#[cfg(feature = "mio")]
impl mio::event::Source for Worker {
    fn register(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> std::io::Result<()> {
        let fd = self.event_fd().map_err(std::io::Error::other)?;
        mio::unix::SourceFd(&fd).register(registry, token, interests)
    }

    fn reregister(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> std::io::Result<()> {
        let fd = self.event_fd().map_err(std::io::Error::other)?;
        mio::unix::SourceFd(&fd).reregister(registry, token, interests)
    }

    fn deregister(&mut self, registry: &mio::Registry) -> std::io::Result<()> {
        let fd = self.event_fd().map_err(std::io::Error::other)?;
        mio::unix::SourceFd(&fd).deregister(registry)
    }
}

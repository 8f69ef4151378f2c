//! The raw UCP types: handles, status codes, parameter structs and the
//! constants the binding uses, transcribed from UCX 1.13's `ucp.h`,
//! `ucp_def.h` and `ucs/type/status.h`.
//!
//! Every struct here is `#[repr(C)]` and checked field by field against the
//! installed header by `tests/layout.rs`. UCP's parameter structs all begin
//! with a `field_mask`; UCX reads only the fields whose bit is set and only
//! ever appends fields, so a caller that zero-initialises a struct and sets
//! the bits it knows stays compatible with newer libraries (ucp.h: "Provides
//! ABI compatibility with respect to adding new fields").

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_uint, c_void};

// --- Opaque handles -------------------------------------------------------

/// Declares an opaque C struct that is only ever used behind a pointer.
macro_rules! opaque {
    ($($name:ident),* $(,)?) => {$(
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
            _not_send_sync: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
        }
    )*};
}
opaque!(
    ucp_context,
    ucp_worker,
    ucp_ep,
    ucp_config,
    ucp_address,
    ucp_conn_request
);

pub type ucp_context_h = *mut ucp_context;
pub type ucp_worker_h = *mut ucp_worker;
pub type ucp_ep_h = *mut ucp_ep;
pub type ucp_conn_request_h = *mut ucp_conn_request;

// --- Status ---------------------------------------------------------------

/// `ucs_status_t`: a *packed* enum in UCX (`UCS_S_PACKED`), one signed byte.
pub type ucs_status_t = i8;
/// `ucs_status_ptr_t`: a request pointer or a status encoded as a pointer.
pub type ucs_status_ptr_t = *mut c_void;

pub const UCS_OK: ucs_status_t = 0;
pub const UCS_INPROGRESS: ucs_status_t = 1;
pub const UCS_ERR_NO_MESSAGE: ucs_status_t = -1;
pub const UCS_ERR_UNREACHABLE: ucs_status_t = -6;
pub const UCS_ERR_BUSY: ucs_status_t = -15;
pub const UCS_ERR_CANCELED: ucs_status_t = -16;
pub const UCS_ERR_CONNECTION_RESET: ucs_status_t = -25;
pub const UCS_ERR_ENDPOINT_TIMEOUT: ucs_status_t = -80;
/// Lowest status code; pointer-encoded statuses lie in `[UCS_ERR_LAST, 0]`.
pub const UCS_ERR_LAST: ucs_status_t = -100;

/// `UCS_PTR_IS_ERR`: the pointer encodes an error status.
#[inline]
pub fn ucs_ptr_is_err(p: ucs_status_ptr_t) -> bool {
    (p as usize) >= (UCS_ERR_LAST as isize as usize)
}

/// `UCS_PTR_IS_PTR`: the pointer is a real request (neither NULL nor a status).
#[inline]
pub fn ucs_ptr_is_ptr(p: ucs_status_ptr_t) -> bool {
    (p as usize).wrapping_sub(1) < (UCS_ERR_LAST as isize as usize).wrapping_sub(1)
}

/// `UCS_PTR_STATUS`: `UCS_INPROGRESS` for a request, else the encoded status.
#[inline]
pub fn ucs_ptr_status(p: ucs_status_ptr_t) -> ucs_status_t {
    if ucs_ptr_is_ptr(p) {
        UCS_INPROGRESS
    } else {
        p as isize as ucs_status_t
    }
}

// --- Enumerations (C `int`-sized enums) -------------------------------------

/// `ucs_thread_mode_t`.
pub type ucs_thread_mode_t = c_uint;
pub const UCS_THREAD_MODE_SINGLE: ucs_thread_mode_t = 0;
pub const UCS_THREAD_MODE_SERIALIZED: ucs_thread_mode_t = 1;
pub const UCS_THREAD_MODE_MULTI: ucs_thread_mode_t = 2;

/// `ucp_err_handling_mode_t`.
pub type ucp_err_handling_mode_t = c_uint;
pub const UCP_ERR_HANDLING_MODE_NONE: ucp_err_handling_mode_t = 0;
pub const UCP_ERR_HANDLING_MODE_PEER: ucp_err_handling_mode_t = 1;

/// `ucs_memory_type_t`.
pub type ucs_memory_type_t = c_uint;
pub const UCS_MEMORY_TYPE_HOST: ucs_memory_type_t = 0;

/// `ucp_datatype_t`.
pub type ucp_datatype_t = u64;
/// `ucp_dt_make_contig(1)`: contiguous bytes.
pub const UCP_DATATYPE_BYTES: ucp_datatype_t = 1 << 3; // (1 << UCP_DATATYPE_SHIFT) | UCP_DATATYPE_CONTIG (0)

const fn bit(n: u32) -> u64 {
    1 << n
}

// ucp_params_field
pub const UCP_PARAM_FIELD_FEATURES: u64 = bit(0);
pub const UCP_PARAM_FIELD_REQUEST_SIZE: u64 = bit(1);
pub const UCP_PARAM_FIELD_MT_WORKERS_SHARED: u64 = bit(5);
pub const UCP_PARAM_FIELD_ESTIMATED_NUM_EPS: u64 = bit(6);
pub const UCP_PARAM_FIELD_NAME: u64 = bit(8);

// ucp_feature
pub const UCP_FEATURE_TAG: u64 = bit(0);
pub const UCP_FEATURE_RMA: u64 = bit(1);
pub const UCP_FEATURE_AMO32: u64 = bit(2);
pub const UCP_FEATURE_AMO64: u64 = bit(3);
pub const UCP_FEATURE_WAKEUP: u64 = bit(4);
pub const UCP_FEATURE_STREAM: u64 = bit(5);
pub const UCP_FEATURE_AM: u64 = bit(6);

// ucp_worker_params_field
pub const UCP_WORKER_PARAM_FIELD_THREAD_MODE: u64 = bit(0);
pub const UCP_WORKER_PARAM_FIELD_NAME: u64 = bit(6);

// ucp_worker_attr_field
pub const UCP_WORKER_ATTR_FIELD_THREAD_MODE: u64 = bit(0);
pub const UCP_WORKER_ATTR_FIELD_ADDRESS: u64 = bit(1);
pub const UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER: u64 = bit(3);

// ucp_ep_params_field
pub const UCP_EP_PARAM_FIELD_REMOTE_ADDRESS: u64 = bit(0);
pub const UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE: u64 = bit(1);
pub const UCP_EP_PARAM_FIELD_ERR_HANDLER: u64 = bit(2);
pub const UCP_EP_PARAM_FIELD_USER_DATA: u64 = bit(3);
pub const UCP_EP_PARAM_FIELD_FLAGS: u64 = bit(5);
pub const UCP_EP_PARAM_FIELD_NAME: u64 = bit(7);

// ucp_ep_close_flags_t
pub const UCP_EP_CLOSE_FLAG_FORCE: u32 = 1;

// ucp_op_attr_t
pub const UCP_OP_ATTR_FIELD_REQUEST: u32 = 1 << 0;
pub const UCP_OP_ATTR_FIELD_CALLBACK: u32 = 1 << 1;
pub const UCP_OP_ATTR_FIELD_USER_DATA: u32 = 1 << 2;
pub const UCP_OP_ATTR_FIELD_DATATYPE: u32 = 1 << 3;
pub const UCP_OP_ATTR_FIELD_FLAGS: u32 = 1 << 4;
pub const UCP_OP_ATTR_FIELD_REPLY_BUFFER: u32 = 1 << 5;
pub const UCP_OP_ATTR_FIELD_MEMORY_TYPE: u32 = 1 << 6;
pub const UCP_OP_ATTR_FIELD_RECV_INFO: u32 = 1 << 7;
pub const UCP_OP_ATTR_FLAG_NO_IMM_CMPL: u32 = 1 << 16;

// ucp_send_am_flags
pub const UCP_AM_SEND_FLAG_REPLY: u32 = 1 << 0;
pub const UCP_AM_SEND_FLAG_EAGER: u32 = 1 << 1;
pub const UCP_AM_SEND_FLAG_RNDV: u32 = 1 << 2;

// ucp_am_cb_flags
pub const UCP_AM_FLAG_WHOLE_MSG: u32 = 1 << 0;
pub const UCP_AM_FLAG_PERSISTENT_DATA: u32 = 1 << 1;

// ucp_am_recv_attr_t
pub const UCP_AM_RECV_ATTR_FIELD_REPLY_EP: u64 = bit(0);
pub const UCP_AM_RECV_ATTR_FLAG_DATA: u64 = bit(16);
pub const UCP_AM_RECV_ATTR_FLAG_RNDV: u64 = bit(17);

// ucp_am_handler_param_field
pub const UCP_AM_HANDLER_PARAM_FIELD_ID: u64 = bit(0);
pub const UCP_AM_HANDLER_PARAM_FIELD_FLAGS: u64 = bit(1);
pub const UCP_AM_HANDLER_PARAM_FIELD_CB: u64 = bit(2);
pub const UCP_AM_HANDLER_PARAM_FIELD_ARG: u64 = bit(3);

// --- Callbacks --------------------------------------------------------------

pub type ucp_request_init_callback_t = Option<unsafe extern "C" fn(request: *mut c_void)>;
pub type ucp_request_cleanup_callback_t = Option<unsafe extern "C" fn(request: *mut c_void)>;
pub type ucp_send_nbx_callback_t = Option<
    unsafe extern "C" fn(request: *mut c_void, status: ucs_status_t, user_data: *mut c_void),
>;
pub type ucp_am_recv_data_nbx_callback_t = Option<
    unsafe extern "C" fn(
        request: *mut c_void,
        status: ucs_status_t,
        length: usize,
        user_data: *mut c_void,
    ),
>;
pub type ucp_err_handler_cb_t =
    Option<unsafe extern "C" fn(arg: *mut c_void, ep: ucp_ep_h, status: ucs_status_t)>;
pub type ucp_am_recv_callback_t = Option<
    unsafe extern "C" fn(
        arg: *mut c_void,
        header: *const c_void,
        header_length: usize,
        data: *mut c_void,
        length: usize,
        param: *const ucp_am_recv_param_t,
    ) -> ucs_status_t,
>;

// --- Structs ----------------------------------------------------------------

/// `ucp_params_t` (80 bytes in 1.13; 88 in later releases, which append).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ucp_params_t {
    pub field_mask: u64,
    pub features: u64,
    pub request_size: usize,
    pub request_init: ucp_request_init_callback_t,
    pub request_cleanup: ucp_request_cleanup_callback_t,
    pub tag_sender_mask: u64,
    pub mt_workers_shared: c_int,
    pub estimated_num_eps: usize,
    pub estimated_num_ppn: usize,
    pub name: *const c_char,
}

/// `ucs_cpu_set_t`: `UCS_CPU_SETSIZE` (1024) bits.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ucs_cpu_set_t {
    pub ucs_bits: [libc::c_ulong; 1024 / (8 * std::mem::size_of::<libc::c_ulong>())],
}

/// `ucp_worker_params_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ucp_worker_params_t {
    pub field_mask: u64,
    pub thread_mode: ucs_thread_mode_t,
    pub cpu_mask: ucs_cpu_set_t,
    pub events: c_uint,
    pub user_data: *mut c_void,
    pub event_fd: c_int,
    pub flags: u64,
    pub name: *const c_char,
    pub am_alignment: usize,
    pub client_id: u64,
}

/// `UCP_ENTITY_NAME_MAX`.
pub const UCP_ENTITY_NAME_MAX: usize = 32;

/// `ucp_worker_attr_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ucp_worker_attr_t {
    pub field_mask: u64,
    pub thread_mode: ucs_thread_mode_t,
    pub address_flags: u32,
    pub address: *mut ucp_address,
    pub address_length: usize,
    pub max_am_header: usize,
    pub name: [c_char; UCP_ENTITY_NAME_MAX],
    pub max_debug_string: usize,
}

/// `ucp_err_handler_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ucp_err_handler_t {
    pub cb: ucp_err_handler_cb_t,
    pub arg: *mut c_void,
}

/// `ucs_sock_addr_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ucs_sock_addr_t {
    pub addr: *const libc::sockaddr,
    pub addrlen: libc::socklen_t,
}

/// `ucp_ep_params_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ucp_ep_params_t {
    pub field_mask: u64,
    pub address: *const ucp_address,
    pub err_mode: ucp_err_handling_mode_t,
    pub err_handler: ucp_err_handler_t,
    pub user_data: *mut c_void,
    pub flags: c_uint,
    pub sockaddr: ucs_sock_addr_t,
    pub conn_request: ucp_conn_request_h,
    pub name: *const c_char,
    pub local_sockaddr: ucs_sock_addr_t,
}

/// The `cb` union of `ucp_request_param_t`: every member is a function pointer.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ucp_request_param_cb {
    pub send: ucp_send_nbx_callback_t,
    pub recv_am: ucp_am_recv_data_nbx_callback_t,
    pub raw: *mut c_void,
}

/// The `recv_info` union of `ucp_request_param_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ucp_request_param_recv_info {
    pub length: *mut usize,
    pub tag_info: *mut c_void,
}

/// `ucp_request_param_t` (72 bytes in 1.13; later releases append).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ucp_request_param_t {
    pub op_attr_mask: u32,
    pub flags: u32,
    pub request: *mut c_void,
    pub cb: ucp_request_param_cb,
    pub datatype: ucp_datatype_t,
    pub user_data: *mut c_void,
    pub reply_buffer: *mut c_void,
    pub memory_type: ucs_memory_type_t,
    pub recv_info: ucp_request_param_recv_info,
    pub memh: *mut c_void,
}

/// `ucp_am_handler_param_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ucp_am_handler_param_t {
    pub field_mask: u64,
    pub id: c_uint,
    pub flags: u32,
    pub cb: ucp_am_recv_callback_t,
    pub arg: *mut c_void,
}

/// `ucp_am_recv_param_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ucp_am_recv_param_t {
    pub recv_attr: u64,
    pub reply_ep: ucp_ep_h,
}

/// Implements `Default` as the all-zero value, which is what UCP expects
/// before a caller sets `field_mask` and the masked fields.
macro_rules! zeroed_default {
    ($($t:ty),* $(,)?) => {$(
        impl Default for $t {
            fn default() -> Self {
                // SAFETY: every field of this `#[repr(C)]` struct is an
                // integer, a raw pointer, an `Option<extern fn>` (None is the
                // null pointer), an array or union of those: all-zero bytes
                // are a valid value.
                unsafe { std::mem::zeroed() }
            }
        }
    )*};
}
zeroed_default!(
    ucp_params_t,
    ucp_worker_params_t,
    ucp_worker_attr_t,
    ucp_ep_params_t,
    ucp_request_param_t,
    ucp_am_handler_param_t,
    ucp_am_recv_param_t,
    ucp_mem_map_params_t,
);

/// `ucp_dt_make_contig(elem_size)`: contiguous elements of `elem_size`
/// bytes (the datatype of an atomic operation's operand).
pub const fn ucp_dt_make_contig(elem_size: usize) -> ucp_datatype_t {
    (elem_size as u64) << 3
}

// ucp_mem_map_params_field
pub const UCP_MEM_MAP_PARAM_FIELD_ADDRESS: u64 = bit(0);
pub const UCP_MEM_MAP_PARAM_FIELD_LENGTH: u64 = bit(1);

/// `ucp_mem_map_params_t` (one-sided windows: `rma.rs`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ucp_mem_map_params_t {
    pub field_mask: u64,
    pub address: *mut c_void,
    pub length: usize,
    pub flags: c_uint,
    pub prot: c_uint,
    pub memory_type: ucs_memory_type_t,
}

opaque!(ucp_mem, ucp_rkey);
pub type ucp_mem_h = *mut ucp_mem;
pub type ucp_rkey_h = *mut ucp_rkey;

/// `ucp_atomic_op_t`.
pub type ucp_atomic_op_t = c_uint;
pub const UCP_ATOMIC_OP_ADD: ucp_atomic_op_t = 0;
pub const UCP_ATOMIC_OP_SWAP: ucp_atomic_op_t = 1;
pub const UCP_ATOMIC_OP_CSWAP: ucp_atomic_op_t = 2;
pub const UCP_ATOMIC_OP_AND: ucp_atomic_op_t = 3;
pub const UCP_ATOMIC_OP_OR: ucp_atomic_op_t = 4;
pub const UCP_ATOMIC_OP_XOR: ucp_atomic_op_t = 5;

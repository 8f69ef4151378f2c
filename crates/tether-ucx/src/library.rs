//! Loading libucp at run time: `dlopen` of the library and `dlsym` of every
//! function the binding uses into one table of function pointers.
//!
//! Nothing links against UCX: a process where `libucp.so.0` is absent, too
//! old or incomplete gets an [`Unavailable`] with a one-line reason and
//! carries on with its other transports.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::fmt;
use std::sync::Mutex;

use crate::ffi::*;

/// The library file name tried when `TETHER_UCX_LIB` is unset.
pub const DEFAULT_LIB: &str = "libucp.so.0";
/// Environment variable naming another file (or path) to load instead.
pub const LIB_ENV: &str = "TETHER_UCX_LIB";
/// The oldest UCX whose UCP API has everything used here
/// (`ucp_am_send_nbx`, `ucp_am_recv_data_nbx`, `ucp_worker_set_am_recv_handler`).
pub const MIN_VERSION: (u32, u32) = (1, 10);

/// UCX cannot be used in this process; `reason` says why in one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable {
    pub reason: String,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ucx unavailable: {}", self.reason)
    }
}

impl std::error::Error for Unavailable {}

/// Declares the function table and its loader in one place, so that a
/// symbol cannot be added to one and forgotten in the other.
macro_rules! ucp_functions {
    ($( $field:ident = $sym:literal : fn($($arg:ty),*) $(-> $ret:ty)?; )*) => {
        /// The UCP (and one UCS) functions, resolved from a loaded libucp.
        ///
        /// Calling any of them is `unsafe`: they are C functions with C's
        /// contracts (see `ucp.h`). The safe wrapper ([`crate::Worker`] and co.)
        /// keeps those contracts.
        #[allow(missing_docs)]
        pub struct Ucp {
            /// The `dlopen` handle; never closed (UCX is not unload-safe).
            handle: *mut c_void,
            /// The file name or path that was loaded.
            pub name: String,
            /// `ucp_get_version()`: major, minor, release.
            pub version: (u32, u32, u32),
            $( pub $field: unsafe extern "C" fn($($arg),*) $(-> $ret)?, )*
        }

        impl Ucp {
            fn resolve(handle: *mut c_void, name: &str, version: (u32, u32, u32))
                -> Result<Ucp, Unavailable>
            {
                Ok(Ucp {
                    handle,
                    name: name.to_owned(),
                    version,
                    $( $field: {
                        let p = sym(handle, name, $sym)?;
                        // SAFETY: `p` is the address of the C function
                        // `$sym`, whose prototype in ucp.h (UCX >= 1.10,
                        // checked before resolving) is the one spelled here.
                        unsafe {
                            std::mem::transmute::<*mut c_void,
                                unsafe extern "C" fn($($arg),*) $(-> $ret)?>(p)
                        }
                    }, )*
                })
            }
        }
    };
}

ucp_functions! {
    get_version_string = "ucp_get_version_string": fn() -> *const c_char;
    config_read = "ucp_config_read":
        fn(*const c_char, *const c_char, *mut *mut ucp_config) -> ucs_status_t;
    config_release = "ucp_config_release": fn(*mut ucp_config);
    config_modify = "ucp_config_modify":
        fn(*mut ucp_config, *const c_char, *const c_char) -> ucs_status_t;
    init_version = "ucp_init_version":
        fn(c_uint, c_uint, *const ucp_params_t, *const ucp_config, *mut ucp_context_h)
            -> ucs_status_t;
    cleanup = "ucp_cleanup": fn(ucp_context_h);
    context_print_info = "ucp_context_print_info": fn(ucp_context_h, *mut libc::FILE);
    worker_create = "ucp_worker_create":
        fn(ucp_context_h, *const ucp_worker_params_t, *mut ucp_worker_h) -> ucs_status_t;
    worker_destroy = "ucp_worker_destroy": fn(ucp_worker_h);
    worker_query = "ucp_worker_query": fn(ucp_worker_h, *mut ucp_worker_attr_t) -> ucs_status_t;
    worker_print_info = "ucp_worker_print_info": fn(ucp_worker_h, *mut libc::FILE);
    worker_get_address = "ucp_worker_get_address":
        fn(ucp_worker_h, *mut *mut ucp_address, *mut usize) -> ucs_status_t;
    worker_release_address = "ucp_worker_release_address": fn(ucp_worker_h, *mut ucp_address);
    worker_progress = "ucp_worker_progress": fn(ucp_worker_h) -> c_uint;
    worker_get_efd = "ucp_worker_get_efd": fn(ucp_worker_h, *mut c_int) -> ucs_status_t;
    worker_arm = "ucp_worker_arm": fn(ucp_worker_h) -> ucs_status_t;
    worker_signal = "ucp_worker_signal": fn(ucp_worker_h) -> ucs_status_t;
    worker_set_am_recv_handler = "ucp_worker_set_am_recv_handler":
        fn(ucp_worker_h, *const ucp_am_handler_param_t) -> ucs_status_t;
    worker_fence = "ucp_worker_fence": fn(ucp_worker_h) -> ucs_status_t;
    worker_flush_nbx = "ucp_worker_flush_nbx":
        fn(ucp_worker_h, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ep_create = "ucp_ep_create":
        fn(ucp_worker_h, *const ucp_ep_params_t, *mut ucp_ep_h) -> ucs_status_t;
    ep_close_nbx = "ucp_ep_close_nbx": fn(ucp_ep_h, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ep_flush_nbx = "ucp_ep_flush_nbx": fn(ucp_ep_h, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ep_print_info = "ucp_ep_print_info": fn(ucp_ep_h, *mut libc::FILE);
    am_send_nbx = "ucp_am_send_nbx":
        fn(ucp_ep_h, c_uint, *const c_void, usize, *const c_void, usize,
           *const ucp_request_param_t) -> ucs_status_ptr_t;
    am_recv_data_nbx = "ucp_am_recv_data_nbx":
        fn(ucp_worker_h, *mut c_void, *mut c_void, usize, *const ucp_request_param_t)
            -> ucs_status_ptr_t;
    am_data_release = "ucp_am_data_release": fn(ucp_worker_h, *mut c_void);
    request_check_status = "ucp_request_check_status": fn(*mut c_void) -> ucs_status_t;
    request_cancel = "ucp_request_cancel": fn(ucp_worker_h, *mut c_void);
    request_free = "ucp_request_free": fn(*mut c_void);
    mem_map = "ucp_mem_map":
        fn(ucp_context_h, *const ucp_mem_map_params_t, *mut ucp_mem_h) -> ucs_status_t;
    mem_unmap = "ucp_mem_unmap": fn(ucp_context_h, ucp_mem_h) -> ucs_status_t;
    rkey_pack = "ucp_rkey_pack":
        fn(ucp_context_h, ucp_mem_h, *mut *mut c_void, *mut usize) -> ucs_status_t;
    rkey_buffer_release = "ucp_rkey_buffer_release": fn(*mut c_void);
    ep_rkey_unpack = "ucp_ep_rkey_unpack":
        fn(ucp_ep_h, *const c_void, *mut ucp_rkey_h) -> ucs_status_t;
    rkey_destroy = "ucp_rkey_destroy": fn(ucp_rkey_h);
    put_nbx = "ucp_put_nbx":
        fn(ucp_ep_h, *const c_void, usize, u64, ucp_rkey_h, *const ucp_request_param_t)
            -> ucs_status_ptr_t;
    get_nbx = "ucp_get_nbx":
        fn(ucp_ep_h, *mut c_void, usize, u64, ucp_rkey_h, *const ucp_request_param_t)
            -> ucs_status_ptr_t;
    atomic_op_nbx = "ucp_atomic_op_nbx":
        fn(ucp_ep_h, ucp_atomic_op_t, *const c_void, usize, u64, ucp_rkey_h,
           *const ucp_request_param_t) -> ucs_status_ptr_t;
    // In libucs; dlsym on the libucp handle finds it through libucp's
    // dependencies (dlsym searches the handle's dependency tree).
    status_string = "ucs_status_string": fn(ucs_status_t) -> *const c_char;
}

// SAFETY: the table holds only addresses of C functions and the dlopen
// handle, none of which is mutated after loading; the functions themselves
// are thread-safe or not according to UCX's own rules (which the wrapper
// enforces on the objects, not on this table).
unsafe impl Send for Ucp {}
// SAFETY: as above; sharing `&Ucp` shares only immutable addresses.
unsafe impl Sync for Ucp {}

impl fmt::Debug for Ucp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ucp")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the
    // next dl* call on this thread; it is copied at once.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown error".to_owned()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

fn sym(handle: *mut c_void, lib: &str, name: &str) -> Result<*mut c_void, Unavailable> {
    let c = CString::new(name).expect("symbol names have no NUL");
    // SAFETY: `handle` is a live dlopen handle (never closed) and `c` a
    // NUL-terminated string.
    let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
    if p.is_null() {
        return Err(Unavailable {
            reason: format!("{lib} has no symbol {name}"),
        });
    }
    Ok(p)
}

impl Ucp {
    /// Loads `name` (a file name searched like any `dlopen`, or a path),
    /// checks its version and resolves every function. Each call opens the
    /// library again (dlopen counts references) and leaks the small table:
    /// UCX is never unloaded. Prefer [`Ucp::load`], which caches.
    pub fn load_from(name: &str) -> Result<&'static Ucp, Unavailable> {
        let cname = CString::new(name).map_err(|_| Unavailable {
            reason: format!("library name {name:?} contains a NUL byte"),
        })?;
        // SAFETY: `cname` is NUL-terminated; loading libucp runs its
        // constructors, which only initialise UCX's own globals.
        let handle = unsafe { libc::dlopen(cname.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(Unavailable {
                reason: format!("cannot load {name}: {}", dlerror()),
            });
        }
        let get_version = sym(handle, name, "ucp_get_version")?;
        // SAFETY: `ucp_get_version(unsigned *, unsigned *, unsigned *)` has
        // existed with this prototype since UCX 1.0.
        let get_version: unsafe extern "C" fn(*mut c_uint, *mut c_uint, *mut c_uint) =
            unsafe { std::mem::transmute::<*mut c_void, _>(get_version) };
        let (mut major, mut minor, mut release) = (0, 0, 0);
        // SAFETY: three valid out-pointers.
        unsafe { get_version(&mut major, &mut minor, &mut release) };
        if (major, minor) < MIN_VERSION {
            return Err(Unavailable {
                reason: format!(
                    "UCX {major}.{minor}.{release} ({name}) is older than {}.{} \
                     (needs ucp_am_send_nbx)",
                    MIN_VERSION.0, MIN_VERSION.1
                ),
            });
        }
        let ucp = Ucp::resolve(handle, name, (major, minor, release))?;
        Ok(Box::leak(Box::new(ucp)))
    }

    /// Loads `$TETHER_UCX_LIB`, or `libucp.so.0` when it is unset or empty.
    /// The outcome (success or reason) is cached per name for the process.
    pub fn load() -> Result<&'static Ucp, Unavailable> {
        let name = std::env::var(LIB_ENV)
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| DEFAULT_LIB.to_owned());
        type Cache = Vec<(String, Result<&'static Ucp, Unavailable>)>;
        static CACHE: Mutex<Cache> = Mutex::new(Vec::new());
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, r)) = cache.iter().find(|(n, _)| *n == name) {
            return r.clone();
        }
        let r = Ucp::load_from(&name);
        cache.push((name, r.clone()));
        r
    }

    /// `ucs_status_string(status)`, copied.
    pub fn status_message(&self, status: ucs_status_t) -> String {
        // SAFETY: ucs_status_string returns a pointer to a static string for
        // every value (an "unknown" text for codes it does not know).
        unsafe {
            let p = (self.status_string)(status);
            if p.is_null() {
                format!("status {status}")
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        }
    }

    /// `ucp_get_version_string()`, copied.
    pub fn version_string(&self) -> String {
        // SAFETY: returns a static NUL-terminated string.
        unsafe { CStr::from_ptr((self.get_version_string)()) }
            .to_string_lossy()
            .into_owned()
    }
}

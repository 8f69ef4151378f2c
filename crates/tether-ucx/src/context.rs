//! [`Context`]: one `ucp_context_h`, created with the features Tether uses.

use std::ffi::CString;
use std::ptr;
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::ffi::*;
use crate::library::Ucp;

/// Bytes UCX reserves in front of every request for the binding's token
/// (`ucp_params_t::request_size`); see `worker.rs`.
pub(crate) const REQUEST_SPACE: usize = 16;

/// The UCP API version the binding is written against (passed to
/// `ucp_init_version`): the oldest that has every function it uses.
const API: (u32, u32) = (1, 10);

/// How to create a [`Context`].
#[derive(Clone, Debug, Default)]
pub struct ContextOptions {
    /// Also ask for `UCP_FEATURE_RMA | AMO32 | AMO64` (one-sided windows).
    pub rma: bool,
    /// Configuration overrides applied with `ucp_config_modify` on top of
    /// the `UCX_*` environment, e.g. `("TLS", "tcp")`, `("NET_DEVICES", "lo")`.
    /// Names are without the `UCX_` prefix.
    pub config: Vec<(String, String)>,
    /// A name for UCX's diagnostics (`ucp_params_t::name`).
    pub name: Option<String>,
    /// `estimated_num_eps` hint (0 = unset).
    pub estimated_endpoints: usize,
}

pub(crate) struct ContextInner {
    pub(crate) ucp: &'static Ucp,
    pub(crate) handle: ucp_context_h,
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: the handle came from ucp_init_version; every Worker holds an
        // Rc to this, so no worker of the context is alive any more.
        unsafe { (self.ucp.cleanup)(self.handle) };
    }
}

/// A UCP context (`ucp_context_h`) with `UCP_FEATURE_AM | UCP_FEATURE_WAKEUP`
/// (and RMA/AMO when asked). Cheap to clone (reference counted); not `Send`:
/// a context and its workers belong to the thread that made them.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Rc<ContextInner>,
}

impl Context {
    /// Creates a context from the library `ucp` (see [`Ucp::load`]).
    pub fn new(ucp: &'static Ucp, opts: &ContextOptions) -> Result<Context> {
        let mut config: *mut ucp_config = ptr::null_mut();
        // SAFETY: NULL prefix and file mean "UCX_" and no file; `config` is a
        // valid out-pointer.
        let st = unsafe { (ucp.config_read)(ptr::null(), ptr::null(), &mut config) };
        if st != UCS_OK {
            return Err(Error::ucx(ucp, "ucp_config_read", st));
        }
        let release = |config| {
            // SAFETY: `config` came from ucp_config_read and is released once.
            unsafe { (ucp.config_release)(config) }
        };
        for (k, v) in &opts.config {
            let (Ok(ck), Ok(cv)) = (CString::new(k.as_str()), CString::new(v.as_str())) else {
                release(config);
                return Err(Error::Invalid(format!("UCX config {k}={v:?} contains NUL")));
            };
            // SAFETY: `config` is live; both strings are NUL-terminated.
            let st = unsafe { (ucp.config_modify)(config, ck.as_ptr(), cv.as_ptr()) };
            if st != UCS_OK {
                release(config);
                return Err(Error::ucx(ucp, "ucp_config_modify", st));
            }
        }
        let name = opts
            .name
            .as_deref()
            .map(|n| CString::new(n).unwrap_or_default());
        let mut params = ucp_params_t {
            field_mask: UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE,
            features: UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
            request_size: REQUEST_SPACE,
            ..Default::default()
        };
        if opts.rma {
            params.features |= UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64;
        }
        if let Some(n) = &name {
            params.field_mask |= UCP_PARAM_FIELD_NAME;
            params.name = n.as_ptr();
        }
        if opts.estimated_endpoints > 0 {
            params.field_mask |= UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
            params.estimated_num_eps = opts.estimated_endpoints;
        }
        let mut handle: ucp_context_h = ptr::null_mut();
        // SAFETY: `params` is a valid ucp_params_t whose masked fields are
        // set (and `name` outlives the call), `config` is live, `handle` a
        // valid out-pointer.
        let st = unsafe { (ucp.init_version)(API.0, API.1, &params, config, &mut handle) };
        release(config);
        if st != UCS_OK {
            return Err(Error::ucx(ucp, "ucp_init", st));
        }
        Ok(Context {
            inner: Rc::new(ContextInner { ucp, handle }),
        })
    }

    /// The library this context uses.
    pub fn ucp(&self) -> &'static Ucp {
        self.inner.ucp
    }

    /// The raw handle, for calls the wrapper does not cover. It stays valid
    /// while this `Context` (or any clone or worker of it) lives.
    pub fn as_raw(&self) -> ucp_context_h {
        self.inner.handle
    }
}

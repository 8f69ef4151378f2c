//! One-sided operations: memory registered for remote access
//! ([`MemRegion`]), the keys peers use to reach it ([`RemoteKey`]), and
//! puts, gets and atomics on an [`Endpoint`], completed by a flush.
//!
//! Completion. UCX completes a put locally (its source may be reused)
//! before it is visible at the target; only a flush of the endpoint
//! ([`Endpoint::flush`], `ucp_ep_flush_nbx`) says that every operation
//! issued on it before is done at both ends, gets and fetching atomics
//! included. So the operations here report nothing themselves: each
//! returns once UCX took it (its request, if any, is released at once
//! and UCX finishes it on its own), and the caller learns the outcome
//! from the next flush's completion ([`Event::SendDone`] with the
//! flush's token, or [`Completion::Done`] at once). The memory an
//! operation reads or writes must stay valid until that flush is done.
//!
//! Who must progress. Where the network registers memory (InfiniBand,
//! RoCE: `rc`, `dc` transports) the target's NIC serves the operations
//! and the target process does nothing. Over `tcp`, and over shared
//! memory for memory UCX did not allocate itself (`sysv`/`posix` only
//! map their own segments; `cma` covers puts and gets but not atomics),
//! UCX emulates them with active messages that run in the target's
//! `ucp_worker_progress` ([`Context::transports`] tells which kind a
//! context has).
//!
//! [`Event::SendDone`]: crate::Event::SendDone

use std::ffi::c_void;
use std::ptr;
use std::rc::Rc;

use crate::context::{Context, ContextInner};
use crate::error::{Error, Result};
use crate::ffi::*;
use crate::worker::{send_cb, Completion, Core, Endpoint, SendToken, Worker};

/// Local memory registered with UCX for remote access, until dropped
/// (`ucp_mem_unmap`).
pub struct MemRegion {
    ctx: Rc<ContextInner>,
    handle: ucp_mem_h,
}

impl std::fmt::Debug for MemRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemRegion").finish_non_exhaustive()
    }
}

impl Context {
    /// Registers `len` bytes at `addr` for remote access (`ucp_mem_map`;
    /// the context must have been created with [`ContextOptions::rma`]).
    ///
    /// # Safety
    /// The memory must stay allocated until the region is dropped; peers
    /// holding its key may read and write it until then.
    ///
    /// [`ContextOptions::rma`]: crate::ContextOptions::rma
    pub unsafe fn map(&self, addr: *mut u8, len: usize) -> Result<MemRegion> {
        let ucp = self.inner.ucp;
        let params = ucp_mem_map_params_t {
            field_mask: UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
            address: addr.cast(),
            length: len,
            ..Default::default()
        };
        let mut handle: ucp_mem_h = ptr::null_mut();
        // SAFETY: live context, params with the two masked fields set,
        // valid out-pointer; the memory contract is the caller's.
        let st = unsafe { (ucp.mem_map)(self.inner.handle, &params, &mut handle) };
        if st != UCS_OK {
            return Err(Error::ucx(ucp, "ucp_mem_map", st));
        }
        Ok(MemRegion {
            ctx: self.inner.clone(),
            handle,
        })
    }

    /// The transports of this context's resources, as UCX names them
    /// (`tcp`, `sysv`, `posix`, `cma`, `rc_mlx5`, ...), from
    /// `ucp_context_print_info`.
    pub fn transports(&self) -> Result<Vec<String>> {
        let text = print_to_string(|file| {
            // SAFETY: live context; `file` is an open stream.
            unsafe { (self.inner.ucp.context_print_info)(self.inner.handle, file) }
        })
        .map_err(|e| Error::Invalid(format!("reading ucp_context_print_info: {e}")))?;
        Ok(parse_transports(&text))
    }
}

/// What `print` writes to a `FILE`, read back from memory
/// (`open_memstream`: no file is made).
fn print_to_string(print: impl FnOnce(*mut libc::FILE)) -> std::io::Result<String> {
    let mut buffer: *mut libc::c_char = std::ptr::null_mut();
    let mut size: libc::size_t = 0;
    // SAFETY: valid out-pointers, which the stream updates until closed.
    let file = unsafe { libc::open_memstream(&mut buffer, &mut size) };
    if file.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    print(file);
    // SAFETY: closing the open stream sets `buffer` and `size` to what was
    // written; the buffer is ours to free, once, after copying it.
    unsafe {
        libc::fclose(file);
        if buffer.is_null() {
            return Ok(String::new());
        }
        let text = String::from_utf8_lossy(std::slice::from_raw_parts(buffer as *const u8, size))
            .into_owned();
        libc::free(buffer.cast());
        Ok(text)
    }
}

/// The transport names of `#      resource 1  :  md 1  dev 1  flags -- tcp/lo`
/// lines, each once, in order.
fn parse_transports(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines().filter(|l| l.contains("resource")) {
        let Some((_, resource)) = line.split_once("-- ") else {
            continue;
        };
        let name = resource.split('/').next().unwrap_or("").trim();
        if !name.is_empty() && !out.iter().any(|t| t == name) {
            out.push(name.to_owned());
        }
    }
    out
}

impl MemRegion {
    /// The packed remote key of the region (`ucp_rkey_pack`), to give to
    /// peers ([`Endpoint::unpack_key`]).
    pub fn pack(&self) -> Result<Vec<u8>> {
        let ucp = self.ctx.ucp;
        let mut buffer: *mut c_void = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: live context and region; valid out-pointers.
        let st = unsafe { (ucp.rkey_pack)(self.ctx.handle, self.handle, &mut buffer, &mut len) };
        if st != UCS_OK {
            return Err(Error::ucx(ucp, "ucp_rkey_pack", st));
        }
        // SAFETY: UCX returned `len` readable bytes at `buffer`, released once.
        let packed = unsafe {
            let bytes = std::slice::from_raw_parts(buffer as *const u8, len).to_vec();
            (ucp.rkey_buffer_release)(buffer);
            bytes
        };
        Ok(packed)
    }
}

impl Drop for MemRegion {
    fn drop(&mut self) {
        // SAFETY: the region was mapped on this live context and is
        // unmapped once.
        unsafe { (self.ctx.ucp.mem_unmap)(self.ctx.handle, self.handle) };
    }
}

/// A peer's packed key unpacked on an endpoint to it (`ucp_rkey_h`),
/// destroyed when dropped. It keeps its worker alive.
pub struct RemoteKey {
    core: Rc<Core>,
    handle: ucp_rkey_h,
}

impl std::fmt::Debug for RemoteKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteKey").finish_non_exhaustive()
    }
}

impl Drop for RemoteKey {
    fn drop(&mut self) {
        // SAFETY: unpacked by this worker, destroyed once.
        unsafe { (self.core.ucp.rkey_destroy)(self.handle) };
    }
}

/// The atomic operations of `ucp_atomic_op_nbx`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// `*remote += operand`.
    Add,
    /// `*remote = operand`.
    Swap,
    /// `if *remote == operand { *remote = *reply }` (the reply buffer
    /// holds the new value on the way in).
    CompareSwap,
    And,
    Or,
    Xor,
}

impl AtomicOp {
    fn raw(self) -> ucp_atomic_op_t {
        match self {
            AtomicOp::Add => UCP_ATOMIC_OP_ADD,
            AtomicOp::Swap => UCP_ATOMIC_OP_SWAP,
            AtomicOp::CompareSwap => UCP_ATOMIC_OP_CSWAP,
            AtomicOp::And => UCP_ATOMIC_OP_AND,
            AtomicOp::Or => UCP_ATOMIC_OP_OR,
            AtomicOp::Xor => UCP_ATOMIC_OP_XOR,
        }
    }
}

impl Worker {
    /// Orders the worker's one-sided operations (`ucp_worker_fence`):
    /// those issued after it are carried out at their targets after
    /// those issued before (UCX orders none by itself).
    pub fn fence(&self) -> Result<()> {
        let ucp = self.core.ucp;
        // SAFETY: live worker.
        let st = unsafe { (ucp.worker_fence)(self.core.handle) };
        if st != UCS_OK {
            return Err(Error::ucx(ucp, "ucp_worker_fence", st));
        }
        Ok(())
    }
}

impl Endpoint {
    /// Unpacks a peer's packed key ([`MemRegion::pack`]) for operations
    /// on this endpoint (`ucp_ep_rkey_unpack`; `UCS_ERR_UNREACHABLE` when
    /// no transport of the pair reaches that memory).
    pub fn unpack_key(&self, packed: &[u8]) -> Result<RemoteKey> {
        let ucp = self.core.ucp;
        let mut handle: ucp_rkey_h = ptr::null_mut();
        // SAFETY: live endpoint; `packed` is readable for the call (UCX
        // copies what it needs).
        let st = unsafe { (ucp.ep_rkey_unpack)(self.handle, packed.as_ptr().cast(), &mut handle) };
        if st != UCS_OK {
            return Err(Error::ucx(ucp, "ucp_ep_rkey_unpack", st));
        }
        Ok(RemoteKey {
            core: self.core.clone(),
            handle,
        })
    }

    /// Writes `len` bytes from `src` to `remote` in the peer's memory
    /// that `key` covers (`ucp_put_nbx`); done once a later flush is.
    ///
    /// # Safety
    /// `src..src+len` stays valid and unmodified until the next
    /// [`Endpoint::flush`] completes; `remote..remote+len` lies in the
    /// peer's registered memory.
    pub unsafe fn put_raw(
        &self,
        src: *const u8,
        len: usize,
        remote: u64,
        key: &RemoteKey,
    ) -> Result<()> {
        let param = bytes_param();
        // SAFETY: live endpoint and key; the caller's memory contract.
        let p = unsafe {
            (self.core.ucp.put_nbx)(self.handle, src.cast(), len, remote, key.handle, &param)
        };
        self.released(p, "ucp_put_nbx")
    }

    /// Reads `len` bytes at `remote` in the peer's memory into `dst`
    /// (`ucp_get_nbx`); the bytes are there once a later flush is done.
    ///
    /// # Safety
    /// `dst..dst+len` stays valid (and is not read) until the next
    /// [`Endpoint::flush`] completes; `remote..remote+len` lies in the
    /// peer's registered memory.
    pub unsafe fn get_raw(
        &self,
        dst: *mut u8,
        len: usize,
        remote: u64,
        key: &RemoteKey,
    ) -> Result<()> {
        let param = bytes_param();
        // SAFETY: as in put_raw.
        let p = unsafe {
            (self.core.ucp.get_nbx)(self.handle, dst.cast(), len, remote, key.handle, &param)
        };
        self.released(p, "ucp_get_nbx")
    }

    /// An atomic `op` on the `size`-byte integer (4 or 8) at `remote`
    /// (`ucp_atomic_op_nbx`) with the operand at `operand`; with `reply`,
    /// the value before the operation lands there (for
    /// [`AtomicOp::CompareSwap`] it holds the new value on the way in).
    /// Done once a later flush is.
    ///
    /// # Safety
    /// `operand` and `reply` (`size` bytes each) stay valid until the
    /// next [`Endpoint::flush`] completes; `remote` is aligned and lies
    /// in the peer's registered memory.
    pub unsafe fn atomic_raw(
        &self,
        op: AtomicOp,
        operand: *const u8,
        size: usize,
        remote: u64,
        key: &RemoteKey,
        reply: Option<*mut u8>,
    ) -> Result<()> {
        if size != 4 && size != 8 {
            return Err(Error::Invalid(format!(
                "UCX atomics take 4 or 8 bytes, not {size}"
            )));
        }
        let mut param = ucp_request_param_t {
            op_attr_mask: UCP_OP_ATTR_FIELD_DATATYPE,
            datatype: ucp_dt_make_contig(size),
            ..Default::default()
        };
        if let Some(reply) = reply {
            param.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
            param.reply_buffer = reply.cast();
        }
        // SAFETY: as in put_raw; one element of `size` bytes.
        let p = unsafe {
            (self.core.ucp.atomic_op_nbx)(
                self.handle,
                op.raw(),
                operand.cast(),
                1,
                remote,
                key.handle,
                &param,
            )
        };
        self.released(p, "ucp_atomic_op_nbx")
    }

    /// Completes every operation issued on this endpoint before, at both
    /// ends (`ucp_ep_flush_nbx`): `Done` at once, or `Pending` and an
    /// [`Event::SendDone`](crate::Event::SendDone) with the token later
    /// (its result is the flush's: an error if an operation failed or
    /// the peer is gone).
    pub fn flush(&self) -> Result<Completion<(), SendToken>> {
        let ucp = self.core.ucp;
        let param = ucp_request_param_t {
            op_attr_mask: UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
            cb: ucp_request_param_cb {
                send: Some(send_cb),
            },
            user_data: Rc::as_ptr(&self.core) as *mut c_void,
            ..Default::default()
        };
        // SAFETY: live endpoint; user_data is the core, which outlives the
        // request (Core::drop cancels and waits for it).
        let p = unsafe { (ucp.ep_flush_nbx)(self.handle, &param) };
        if p.is_null() {
            return Ok(Completion::Done(()));
        }
        if ucs_ptr_is_err(p) {
            return Err(Error::ucx(ucp, "ucp_ep_flush_nbx", ucs_ptr_status(p)));
        }
        // SAFETY: `p` is an in-flight request UCX just returned.
        Ok(Completion::Pending(unsafe {
            self.core.track_send(p, None)
        }))
    }

    /// The outcome of an operation whose completion a flush reports: an
    /// error status is returned, a request is released at once (UCX
    /// finishes and frees it itself).
    fn released(&self, p: ucs_status_ptr_t, op: &'static str) -> Result<()> {
        if ucs_ptr_is_err(p) {
            return Err(Error::ucx(self.core.ucp, op, ucs_ptr_status(p)));
        }
        if ucs_ptr_is_ptr(p) {
            // SAFETY: a live request of this worker, freed once; UCX
            // completes a freed request on its own.
            unsafe { (self.core.ucp.request_free)(p) };
        }
        Ok(())
    }
}

/// Parameters of a put or get of plain bytes, reported by no callback.
fn bytes_param() -> ucp_request_param_t {
    ucp_request_param_t {
        op_attr_mask: UCP_OP_ATTR_FIELD_DATATYPE,
        datatype: UCP_DATATYPE_BYTES,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::parse_transports;

    #[test]
    fn transports_are_read_from_the_resource_lines() {
        let text = "#\n# UCP context\n#\n#            md 1  :  component 1  tcp \n\
                    #      resource 0  :  md 0  dev 0  flags -- self/memory0\n\
                    #      resource 1  :  md 1  dev 1  flags -- tcp/lo\n\
                    #      resource 2  :  md 1  dev 2  flags -- tcp/eth0\n\
                    #      resource 3  :  md 4  dev 3  flags -- rc_mlx5/mlx5_0:1\n";
        assert_eq!(parse_transports(text), ["self", "tcp", "rc_mlx5"]);
    }
}

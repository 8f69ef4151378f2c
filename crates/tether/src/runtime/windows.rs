//! Windows and one-sided operations (DESIGN 3.7) on the engine's
//! one-sided protocol (`tether-proto`'s `engine/onesided.rs`).
//!
//! A window has a communicator of its own, created from the caller's
//! when the window is (so that the program may free its communicator,
//! and the window's fences and free never match the program's
//! collectives); that communicator's context, agreed by every member and
//! unique in each, is also the window's id on the wire and its handle.
//! Creation then gathers every member's size, registers the window in the
//! engine and ends with a barrier, so that an operation issued after
//! `tether_win_create` returns finds every target's window in place.
//!
//! Every access is checked here against the target's size, with the
//! numbers in the error, before the engine checks it again (and the
//! target once more). Targets serve operations whenever they make
//! progress: the engine hands out the accumulate family one at a time,
//! computed here (`windows/apply.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap as HashMap;
use tether_proto::{Engine, Reduction, Region, ReqId, RmaError, RmaTarget};

use super::{Arg, Runtime, IN_PLACE};
use crate::datatype::{self, byte_len, Datatype};
use crate::error::{err, Error, ErrorClass, Result};

mod apply;
mod native;
pub use apply::{AccOp, NO_OP, REPLACE};

/// No window: what `tether_win_free` leaves in the handle.
pub const WIN_NULL: i32 = 0;

/// Words each member contributes when a window is created: its size,
/// address, transport key length, and whether it could take native
/// atomics.
const WORDS: usize = 4;

/// This process's record of one window.
pub(super) struct Window {
    /// The window's own communicator (see the module documentation).
    comm: i32,
    /// Universe rank of each member, by rank in the window's communicator.
    members: Arc<[u32]>,
    /// Each member's window size in bytes, by rank.
    sizes: Vec<u64>,
    /// Its members agreed that its atomics go to the transport
    /// (`windows/native.rs`).
    native_atomics: bool,
}

/// Windows by handle.
#[derive(Default)]
pub(super) struct Windows {
    table: HashMap<i32, Window>,
}

/// Where an operation goes, checked: its engine target and its length.
struct Access {
    at: RmaTarget,
    len: usize,
    datatype: Datatype,
}

impl Runtime {
    /// Creates a window over `bytes` bytes at `base` (NULL with 0 bytes
    /// allowed), collective over `comm`: returns its handle.
    ///
    /// # Safety
    /// `base` stays valid for `bytes` bytes until the window is freed.
    pub unsafe fn win_create(&mut self, base: *mut u8, bytes: i64, comm: i32) -> Result<i32> {
        let len = usize::try_from(bytes)
            .map_err(|_| err(ErrorClass::Arg, format!("window size {bytes} is negative")))?;
        if base.is_null() && len > 0 {
            return Err(err(
                ErrorClass::Arg,
                format!("window base is NULL but its size is {bytes} bytes"),
            ));
        }
        let members = self.comms.get(comm)?.members.to_vec();
        let own = self.create(members)?;
        let (members, my_rank) = {
            let c = self.comms.get(own)?;
            (c.members.clone(), c.my_rank as usize)
        };
        let id = self.comms.get(own)?.context;
        let (some, all) = self.reached_by_transport_keys(&members);
        // Registered (UCX pins the memory on an RDMA network) only where
        // a member is reached by the transport's keys, or this process's
        // own atomics go through them.
        let key = if some || all {
            // SAFETY: the caller keeps the memory until the window is
            // freed, which unregisters it first.
            unsafe { self.transport.router_mut().window_created(id, base, len) }
        } else {
            Vec::new()
        };
        let native_here = all && !key.is_empty();
        // Every member's size, address, transport key length and whether
        // it could take native atomics, four words each, then (where any
        // member has a key) the keys.
        let mut gathered = vec![0u64; WORDS * members.len()];
        gathered[WORDS * my_rank] = len as u64;
        gathered[WORDS * my_rank + 1] = base as u64;
        gathered[WORDS * my_rank + 2] = key.len() as u64;
        gathered[WORDS * my_rank + 3] = u64::from(native_here);
        let gathered_keys = self
            .allgather_words(&mut gathered, WORDS as i64, own)
            .and_then(|()| self.allgather_keys(&gathered, key, my_rank, own));
        let keys = match gathered_keys {
            Ok(keys) => keys,
            Err(e) => {
                self.transport.router_mut().window_freed(id);
                let _ = self.comm_free(own);
                return Err(e);
            }
        };
        let sizes: Vec<u64> = gathered.iter().step_by(WORDS).copied().collect();
        let native_atomics = gathered.iter().skip(3).step_by(WORDS).all(|&w| w == 1);
        let others: Vec<(u32, u64)> = members
            .iter()
            .zip(&sizes)
            .enumerate()
            .filter(|(rank, _)| *rank != my_rank)
            .map(|(_, (&member, &size))| (member, size))
            .collect();
        let local = Region {
            ptr: if len == 0 {
                std::ptr::NonNull::dangling().as_ptr()
            } else {
                base
            },
            len,
        };
        if let Err(e) = self.engine.win_create(id, local, &others) {
            self.transport.router_mut().window_freed(id);
            return Err(rma_error(e, "creating a window"));
        }
        for (rank, (&member, key)) in members.iter().zip(keys).enumerate() {
            if rank != my_rank && sizes[rank] > 0 {
                self.engine
                    .win_set_address(id, member, gathered[WORDS * rank + 1]);
                if !key.is_empty() {
                    self.transport.router_mut().window_key(id, member, key);
                }
            }
        }
        if native_atomics {
            self.engine.win_set_native_atomics(id);
        }
        let handle = id as i32;
        self.windows.table.insert(
            handle,
            Window {
                comm: own,
                members,
                sizes,
                native_atomics,
            },
        );
        self.barrier(own)?;
        Ok(handle)
    }

    /// Gathers `per` words of every member of `comm` into `words`, where
    /// this member's are in place already.
    fn allgather_words(&mut self, words: &mut [u64], per: i64, comm: i32) -> Result<()> {
        let int64 = datatype::lookup(6)?;
        // SAFETY: `words` outlives the allgather, which completes here.
        let done = unsafe {
            let send = Arg::new(IN_PLACE, per, int64.handle);
            let recv = Arg::new(words.as_mut_ptr().cast(), per, int64.handle);
            self.iallgather(send, recv, comm)
                .and_then(|req| self.wait(req))
        };
        done.and_then(|s| s.error.map_or(Ok(()), Err))
    }

    /// Whether this process reaches some, and whether it reaches every,
    /// other member of a new window with window operations by the
    /// transport's keys (UCX), settling the routes not settled yet. Only
    /// where every member reaches every other so may the window's atomics
    /// all go to the transport (`windows/native.rs`). Both are false
    /// where no transport registers windows itself.
    ///
    /// A route that waits for the member's address is waited for (the
    /// creation is collective, so the member is there), at most
    /// `TETHER_CONNECT_TIMEOUT`; one still unsettled then counts as not
    /// reached.
    fn reached_by_transport_keys(&mut self, members: &[u32]) -> (bool, bool) {
        if !self.transport.router().registers_windows() {
            return (false, false);
        }
        let others: Vec<u32> = members.iter().copied().filter(|&m| m != self.me).collect();
        for &member in &others {
            self.transport.reach(member, &mut self.engine);
        }
        let deadline = Instant::now() + Duration::from_secs(self.settings.connect_timeout());
        while others
            .iter()
            .any(|&m| !self.transport.router().route_settled(m))
            && Instant::now() < deadline
        {
            self.progress_once(Some(Duration::from_millis(1)));
        }
        let router = self.transport.router();
        let reached = others
            .iter()
            .filter(|&&m| router.window_rma_route(m))
            .count();
        (reached > 0, reached == others.len())
    }

    /// Every member's transport key of the window being created (empty
    /// where it has none), given their lengths (the third of each
    /// member's `WORDS` gathered words): one more allgather, of the
    /// longest key's size, only where some member has a key, which every
    /// member knows alike.
    fn allgather_keys(
        &mut self,
        gathered: &[u64],
        own_key: Vec<u8>,
        my_rank: usize,
        comm: i32,
    ) -> Result<Vec<Vec<u8>>> {
        let lengths: Vec<usize> = gathered
            .iter()
            .skip(2)
            .step_by(WORDS)
            .map(|&l| l as usize)
            .collect();
        let longest = lengths.iter().copied().max().unwrap_or(0);
        if longest == 0 {
            return Ok(vec![Vec::new(); lengths.len()]);
        }
        let mut all = vec![0u8; longest * lengths.len()];
        all[longest * my_rank..][..own_key.len()].copy_from_slice(&own_key);
        let byte = datatype::lookup(1)?;
        // SAFETY: `all` outlives the allgather, which completes here.
        let done = unsafe {
            let send = Arg::new(IN_PLACE, longest as i64, byte.handle);
            let recv = Arg::new(all.as_mut_ptr().cast(), longest as i64, byte.handle);
            self.iallgather(send, recv, comm)
                .and_then(|req| self.wait(req))
        };
        done.and_then(|s| s.error.map_or(Ok(()), Err))?;
        Ok(lengths
            .iter()
            .enumerate()
            .map(|(rank, &len)| all[longest * rank..][..len].to_vec())
            .collect())
    }

    fn window(&self, win: i32) -> Result<&Window> {
        self.windows.table.get(&win).ok_or_else(|| {
            err(
                ErrorClass::Arg,
                format!("{win} is not a live tether_win (never created, or freed)"),
            )
        })
    }

    /// Checks `count` elements of `datatype` at `offset` bytes into
    /// `target`'s window (a rank of the window's communicator).
    fn access(
        &self,
        win: i32,
        target: i32,
        offset: i64,
        count: i64,
        datatype: i32,
    ) -> Result<Access> {
        let window = self.window(win)?;
        let datatype = datatype::lookup(datatype)?;
        let len = byte_len(count, datatype)?;
        let rank = usize::try_from(target)
            .ok()
            .filter(|r| *r < window.members.len())
            .ok_or_else(|| {
                err(
                    ErrorClass::Rank,
                    format!(
                        "target {target} is outside the window's {} members",
                        window.members.len()
                    ),
                )
            })?;
        let size = window.sizes[rank];
        let offset = u64::try_from(offset).map_err(|_| {
            err(
                ErrorClass::RmaRange,
                format!("target offset {offset} is negative"),
            )
        })?;
        if offset.checked_add(len as u64).is_none_or(|end| end > size) {
            return Err(err(
                ErrorClass::RmaRange,
                format!(
                    "{len} bytes at offset {offset} pass the end of rank {target}'s window of {size} bytes"
                ),
            ));
        }
        Ok(Access {
            at: RmaTarget {
                win: win as u32,
                rank: window.members[rank],
                offset,
            },
            len,
            datatype,
        })
    }

    /// Writes `count` elements at `origin` into `target`'s window; the
    /// buffer is the library's until the next flush of that target.
    ///
    /// # Safety
    /// `origin` stays valid and unmodified until that flush returns.
    pub unsafe fn put(
        &mut self,
        origin: *const u8,
        count: i64,
        datatype: i32,
        target: i32,
        offset: i64,
        win: i32,
    ) -> Result<()> {
        self.transfer(
            origin.cast_mut(),
            count,
            datatype,
            target,
            offset,
            win,
            "put",
            Engine::win_put,
        )
    }

    /// [`Runtime::put`] with a request that completes once `origin` may
    /// be reused.
    ///
    /// # Safety
    /// `origin` stays valid and unmodified until the request completes.
    pub unsafe fn rput(
        &mut self,
        origin: *const u8,
        count: i64,
        datatype: i32,
        target: i32,
        offset: i64,
        win: i32,
    ) -> Result<ReqId> {
        self.transfer(
            origin.cast_mut(),
            count,
            datatype,
            target,
            offset,
            win,
            "rput",
            Engine::win_rput,
        )
    }

    /// Reads `count` elements of `target`'s window into `origin`, which
    /// holds them after the next flush of that target.
    ///
    /// # Safety
    /// `origin` stays valid until that flush returns.
    pub unsafe fn get(
        &mut self,
        origin: *mut u8,
        count: i64,
        datatype: i32,
        target: i32,
        offset: i64,
        win: i32,
    ) -> Result<()> {
        self.transfer(
            origin,
            count,
            datatype,
            target,
            offset,
            win,
            "get",
            Engine::win_get,
        )
    }

    /// [`Runtime::get`] with a request that completes once the data is
    /// in `origin`.
    ///
    /// # Safety
    /// `origin` stays valid until the request completes.
    pub unsafe fn rget(
        &mut self,
        origin: *mut u8,
        count: i64,
        datatype: i32,
        target: i32,
        offset: i64,
        win: i32,
    ) -> Result<ReqId> {
        self.transfer(
            origin,
            count,
            datatype,
            target,
            offset,
            win,
            "rget",
            Engine::win_rget,
        )
    }

    /// Checks a put or get of `count` elements between `buf` and
    /// `target`'s window and hands it to the engine's `issue`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn transfer<T>(
        &mut self,
        buf: *mut u8,
        count: i64,
        datatype: i32,
        target: i32,
        offset: i64,
        win: i32,
        what: &str,
        issue: impl FnOnce(&mut Engine, RmaTarget, Region) -> std::result::Result<T, RmaError>,
    ) -> Result<T> {
        let a = self.access(win, target, offset, count, datatype)?;
        let local = region(buf, a.len, "origin")?;
        let issued = issue(&mut self.engine, a.at, local).map_err(|e| rma_error(e, what))?;
        self.after_issue();
        Ok(issued)
    }

    /// Combines `count` elements at `origin` into `target`'s window with
    /// `op` (a reduction, `TETHER_REPLACE` or `TETHER_NO_OP`), atomically
    /// per element and after every accumulate-family operation this
    /// process issued to that target before.
    ///
    /// # Safety
    /// `origin` stays valid and unmodified until the next flush returns.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn accumulate(
        &mut self,
        origin: *const u8,
        count: i64,
        datatype: i32,
        target: i32,
        offset: i64,
        op: i32,
        win: i32,
    ) -> Result<()> {
        let a = self.access(win, target, offset, count, datatype)?;
        let op = AccOp::from_handle(op)?;
        op.check(a.datatype)?;
        let source = region(origin.cast_mut(), a.len, "origin")?;
        let native = native::code(a.datatype, op)
            .filter(|_| op != AccOp::NoOp && self.window(win).is_ok_and(|w| w.native_atomics))
            .filter(|_| a.at.offset.is_multiple_of(a.datatype.size as u64));
        match native {
            // Element by element, each the transport's atomic: every
            // update of a location on this window takes that path.
            Some(code) => {
                let size = a.datatype.size;
                // SAFETY: the caller's origin holds `a.len` bytes, read
                // now (each atomic copies its element).
                let elements = unsafe { source.as_slice() };
                for (i, element) in elements.chunks_exact(size).enumerate() {
                    let at = RmaTarget {
                        offset: a.at.offset + (i * size) as u64,
                        ..a.at
                    };
                    let atomic = native::atomic(code, op, element, None);
                    self.engine
                        .win_native_atomic(at, atomic, reduction(a.datatype, op))
                        .map_err(|e| rma_error(e, "accumulate"))?;
                }
            }
            None => self
                .engine
                .win_accumulate(a.at, source, reduction(a.datatype, op))
                .map_err(|e| rma_error(e, "accumulate"))?,
        }
        self.after_issue();
        Ok(())
    }

    /// Combines the one element at `origin` into `target`'s window with
    /// `op` and fetches the element's value before into `result`.
    ///
    /// # Safety
    /// `result` stays valid until the next flush returns.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn fetch_and_op(
        &mut self,
        origin: *const u8,
        result: *mut u8,
        datatype: i32,
        target: i32,
        offset: i64,
        op: i32,
        win: i32,
    ) -> Result<()> {
        let takes = (
            apply::fetchable as fn(Datatype) -> bool,
            "an integer or floating type",
        );
        let a = self.atomic_access(win, target, offset, datatype, "fetch_and_op", takes)?;
        let op = AccOp::from_handle(op)?;
        op.check(a.datatype)?;
        let operand = region(origin.cast_mut(), a.len, "origin")?;
        let result = region(result, a.len, "result")?;
        let native = native::code(a.datatype, op)
            .filter(|_| self.window(win).is_ok_and(|w| w.native_atomics));
        match native {
            Some(code) => {
                // SAFETY: the caller's origin holds one element, read now.
                let atomic = native::atomic(code, op, unsafe { operand.as_slice() }, Some(result));
                self.engine
                    .win_native_atomic(a.at, atomic, reduction(a.datatype, op))
            }
            None => self
                .engine
                .win_fetch_and_op(a.at, operand, result, reduction(a.datatype, op)),
        }
        .map_err(|e| rma_error(e, "fetch_and_op"))?;
        self.after_issue();
        Ok(())
    }

    /// Replaces the one element at `target`'s window with `origin`'s if it
    /// equals `compare`, and fetches its value before into `result`.
    ///
    /// # Safety
    /// `result` stays valid until the next flush returns.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn compare_and_swap(
        &mut self,
        origin: *const u8,
        compare: *const u8,
        result: *mut u8,
        datatype: i32,
        target: i32,
        offset: i64,
        win: i32,
    ) -> Result<()> {
        let takes = (apply::swappable as fn(Datatype) -> bool, "an integer type");
        let a = self.atomic_access(win, target, offset, datatype, "compare_and_swap", takes)?;
        let value = region(origin.cast_mut(), a.len, "origin")?;
        let compare = region(compare.cast_mut(), a.len, "compare")?;
        let result = region(result, a.len, "result")?;
        // SAFETY: the caller's value and compare hold one element each,
        // read now.
        let native = self
            .window(win)
            .is_ok_and(|w| w.native_atomics)
            .then(|| unsafe {
                native::compare_and_swap(a.datatype, value.as_slice(), compare.as_slice(), result)
            })
            .flatten();
        match native {
            Some(atomic) => {
                let same_op = Reduction {
                    datatype: a.datatype.handle as u8,
                    op: 0,
                };
                self.engine.win_native_atomic(a.at, atomic, same_op)
            }
            None => self.engine.win_compare_and_swap(
                a.at,
                value,
                compare,
                result,
                a.datatype.handle as u8,
            ),
        }
        .map_err(|e| rma_error(e, "compare_and_swap"))?;
        self.after_issue();
        Ok(())
    }

    /// [`Runtime::access`] for one element of an atomic operation `what`:
    /// a type `takes` accepts (`TETHER_ERR_TYPE` naming what it takes),
    /// aligned to its size in the target's window.
    fn atomic_access(
        &self,
        win: i32,
        target: i32,
        offset: i64,
        datatype: i32,
        what: &str,
        (accepts, takes): (fn(Datatype) -> bool, &str),
    ) -> Result<Access> {
        let a = self.access(win, target, offset, 1, datatype)?;
        if !accepts(a.datatype) {
            return Err(apply::atomic_type_error(what, a.datatype, takes));
        }
        aligned(&a, what)?;
        Ok(a)
    }

    /// Blocks until every operation this process issued on `win` to
    /// `target` (`None`: to every member) is complete at the target.
    pub fn win_flush(&mut self, target: Option<i32>, win: i32) -> Result<()> {
        let window = self.window(win)?;
        let target = match target {
            None => None,
            Some(t) => Some(
                usize::try_from(t)
                    .ok()
                    .and_then(|r| window.members.get(r).copied())
                    .ok_or_else(|| {
                        err(
                            ErrorClass::Rank,
                            format!(
                                "target {t} is outside the window's {} members",
                                window.members.len()
                            ),
                        )
                    })?,
            ),
        };
        let mark = self
            .engine
            .win_flush_mark(win as u32, target)
            .map_err(|e| rma_error(e, "flush"))?;
        let mut outcome = None;
        self.wait_until(|rt| {
            outcome = rt.engine.win_flush_poll(&mark);
            outcome.is_some()
        });
        outcome
            .expect("the wait ends when the flush does")
            .map_err(|e| rma_error(e, "an operation before this flush"))
    }

    /// Completes every member's operations on `win` (collective).
    pub fn win_fence(&mut self, win: i32) -> Result<()> {
        let flushed = self.win_flush(None, win);
        let comm = self.window(win)?.comm;
        let synced = self.barrier(comm);
        flushed.and(synced)
    }

    /// Frees `win` once every member's operations on it are complete
    /// (collective); its memory is the program's again.
    pub fn win_free(&mut self, win: i32) -> Result<()> {
        self.window(win)?;
        let fenced = self.win_fence(win);
        // A get's reply that borrows the window may still wait for its
        // link: progress until the engine lets the window go, for at
        // most the finalize timeout (a reply to a peer that is lost
        // meanwhile is dropped, so this ends).
        let deadline = Instant::now() + Duration::from_secs(self.settings.finalize_timeout());
        let mut freed = self.engine.win_free(win as u32);
        while freed == Err(RmaError::Busy) && Instant::now() < deadline {
            self.progress_once(Some(Duration::from_millis(1)));
            freed = self.engine.win_free(win as u32);
        }
        if freed == Err(RmaError::Busy) {
            return Err(err(
                ErrorClass::Timeout,
                format!(
                    "window {win} is still in use after TETHER_FINALIZE_TIMEOUT={} s (operations on it did not end); it stays live",
                    self.settings.finalize_timeout()
                ),
            ));
        }
        if freed.is_ok() {
            self.transport.router_mut().window_freed(win as u32);
        }
        if let Some(window) = self.windows.table.remove(&win) {
            let _ = self.comm_free(window.comm);
        }
        fenced.and(freed.map_err(|e| rma_error(e, "freeing a window")))
    }

    /// Computes the accumulate-family operations the engine hands out,
    /// one at a time (what keeps them atomic and in order).
    pub(super) fn serve_applies(&mut self) {
        while let Some(mut a) = self.engine.poll_apply() {
            let status = apply::compute(&mut a);
            self.engine.apply_done(a, status);
        }
    }

    /// Sends what an operation queued; one to this process is applied at
    /// once.
    fn after_issue(&mut self) {
        self.serve_applies();
        self.push_transmits();
    }
}

fn reduction(datatype: Datatype, op: AccOp) -> Reduction {
    Reduction {
        datatype: datatype.handle as u8,
        op: op.handle() as u8,
    }
}

/// `len` bytes at `ptr`: NULL only with 0 bytes.
fn region(ptr: *mut u8, len: usize, name: &str) -> Result<Region> {
    if ptr.is_null() {
        if len > 0 {
            return Err(err(
                ErrorClass::Arg,
                format!("`{name}` is NULL but {len} bytes are accessed"),
            ));
        }
        return Ok(Region {
            ptr: std::ptr::NonNull::dangling().as_ptr(),
            len: 0,
        });
    }
    Ok(Region { ptr, len })
}

/// Atomics take one element aligned to its size in the target's window.
fn aligned(a: &Access, what: &str) -> Result<()> {
    if !a.at.offset.is_multiple_of(a.datatype.size as u64) {
        return Err(err(
            ErrorClass::RmaRange,
            format!(
                "{what}: offset {} is not aligned to TETHER_{}'s {} bytes",
                a.at.offset, a.datatype.name, a.datatype.size
            ),
        ));
    }
    Ok(())
}

/// The error class and message of a one-sided failure.
fn rma_error(e: RmaError, what: &str) -> Error {
    let class = match e {
        RmaError::OutOfRange | RmaError::TargetNoWindow => ErrorClass::RmaRange,
        RmaError::Refused => ErrorClass::Op,
        RmaError::PeerLost => ErrorClass::PeerLost,
        RmaError::Transport => ErrorClass::Transport,
        RmaError::NoWindow | RmaError::NotMember | RmaError::Busy => ErrorClass::Arg,
    };
    err(class, format!("{what}: {e}"))
}

//! One-sided windows for the transports that reach window memory by keys
//! of their own (UCX RMA): the runtime registers each window here when
//! it is created, passes on the keys the members published, and frees
//! them with the window. Transports that reach memory by address (shm's
//! cross-memory attach) need none of this.

use super::Router;

impl Router {
    /// Whether some transport registers windows' memory itself (UCX with
    /// window RMA for some peers).
    pub fn registers_windows(&self) -> bool {
        self.ucx.as_ref().is_some_and(|ucx| ucx.registers_windows())
    }

    /// Registers this process's part of window `win` with such a
    /// transport and returns the key the members pass to it (empty:
    /// window operations to this process go as frames).
    ///
    /// # Safety
    /// `base..base+len` stays allocated until [`Router::window_freed`].
    pub unsafe fn window_created(&mut self, win: u32, base: *mut u8, len: usize) -> Vec<u8> {
        match self.ucx.as_mut() {
            // SAFETY: forwarded contract.
            Some(ucx) => unsafe { ucx.window_created(win, base, len) },
            None => Vec::new(),
        }
    }

    /// Whether window operations to `peer` go by the transport's keys: its
    /// route is settled, over UCX, with UCX RMA chosen for it.
    pub fn window_rma_route(&self, peer: u32) -> bool {
        matches!(self.peers.route(peer), Some(super::Route::Ucx))
            && self
                .ucx
                .as_ref()
                .is_some_and(|ucx| ucx.window_rma(peer).is_some())
    }

    /// Whether `peer`'s route is chosen (not waiting for its address).
    pub fn route_settled(&self, peer: u32) -> bool {
        !matches!(self.peers.route(peer), Some(super::Route::Pending(_)))
    }

    /// Member `peer`'s key of its part of window `win`.
    pub fn window_key(&mut self, win: u32, peer: u32, key: Vec<u8>) {
        if let Some(ucx) = self.ucx.as_mut() {
            ucx.window_key(win, peer, key);
        }
    }

    /// Window `win` is freed: every operation on it is complete.
    pub fn window_freed(&mut self, win: u32) {
        if let Some(ucx) = self.ucx.as_mut() {
            ucx.window_freed(win);
        }
    }
}

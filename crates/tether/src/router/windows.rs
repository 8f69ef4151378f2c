//! One-sided windows for the transports that reach window memory by keys
//! of their own (UCX RMA): the runtime registers each window here when
//! it is created, passes on the keys the members published, and frees
//! them with the window. Transports that reach memory by address (shm's
//! cross-memory attach) need none of this.

use super::Router;

impl Router {
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

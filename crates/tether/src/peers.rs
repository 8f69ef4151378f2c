//! What this process knows of each peer, in one record per peer: the
//! route its frames take, the frames that wait for it (the one queue of
//! back-pressure: a route not settled yet, or a link that gave a frame
//! back as `NoResource`), whether large payloads to it go by file
//! (`hybrid`), whether it was used inside a communication kernel, and
//! why it can no longer be reached. Its published address is in the
//! process's address book (`addresses.rs`), which the router and TCP
//! share and a lookup thread fills.
//!
//! One record instead of a table per concern, so that what later issues
//! hang on a peer has one place: its authentication state (issue 24) and
//! its rails (issue 26) become fields here when those issues build them.
//! Its liveness is not here: the heartbeat thread keeps when each peer
//! was last heard (`liveness.rs`), off the application's thread, and a
//! silent peer ends here as a loss like any other. The router owns the table (it reads the route of every
//! frame) and the runtime reads it through the router.

use std::collections::VecDeque;
use std::time::Instant;

use tether_proto::Transmit;

use crate::error::Error;
use crate::transport::peer_table::PeerTable;
use crate::transport::retry::Retry;

/// Which transport carries a peer's frames.
pub(crate) enum Route {
    Tcp,
    Shm,
    File,
    Ucx,
    /// Shared memory may reach the peer but its address or segment is not
    /// there yet.
    Pending(Pending),
}

/// A route not settled yet: tried again on the [`Retry`] schedule, until
/// `deadline`; the peer's frames wait in its record meanwhile.
pub(crate) struct Pending {
    pub deadline: Instant,
    pub retry: Retry,
    /// Why the last try failed, for the error at the deadline.
    pub problem: String,
    /// What waits for the peer's address: UCX (whether it publishes a
    /// worker), else shared memory (its segment).
    pub ucx: bool,
}

/// One peer's record.
#[derive(Default)]
struct Peer {
    /// `None` until the router chooses one, and again after it gave up.
    route: Option<Route>,
    /// Reached through `hybrid`: payloads above the threshold go by file.
    hybrid: bool,
    /// Exchanged messages with this process while `IN_KERNEL` was set.
    kernel: bool,
    /// The link cap's epoch of its last use (`router/link_cap.rs`).
    last_use: u64,
    /// Why it can no longer be reached (the first reason found).
    lost: Option<Error>,
    /// Frames for it that its link could not take yet, in order.
    waiting: VecDeque<Transmit>,
}

/// The record of every peer this process dealt with.
#[derive(Default)]
pub struct Peers {
    table: PeerTable<Peer>,
    /// How many routes are [`Route::Pending`] (progress checks it on
    /// every call; every change of a route goes through
    /// [`Peers::set_route`] and [`Peers::remove_route`] to keep it exact).
    pending: usize,
    /// The peers with frames waiting, each once.
    waiting: Vec<u32>,
}

impl Peers {
    fn entry(&mut self, peer: u32) -> &mut Peer {
        self.table.get_or_insert_with(peer, Peer::default)
    }

    /// The route of `peer`'s frames, once chosen.
    #[inline(always)]
    pub(crate) fn route(&self, peer: u32) -> Option<&Route> {
        self.table.get(&peer)?.route.as_ref()
    }

    #[inline(always)]
    pub(crate) fn route_mut(&mut self, peer: u32) -> Option<&mut Route> {
        self.table.get_mut(&peer)?.route.as_mut()
    }

    #[inline(always)]
    pub fn has_route(&self, peer: u32) -> bool {
        self.route(peer).is_some()
    }

    /// Sets the route of `peer`, returning the one it replaces.
    pub(crate) fn set_route(&mut self, peer: u32, route: Route) -> Option<Route> {
        self.pending += usize::from(matches!(route, Route::Pending(_)));
        let old = self.entry(peer).route.replace(route);
        self.pending -= usize::from(matches!(old, Some(Route::Pending(_))));
        old
    }

    /// Forgets the route of `peer` (the router gave up on it), returning it.
    pub(crate) fn remove_route(&mut self, peer: u32) -> Option<Route> {
        let old = self.table.get_mut(&peer)?.route.take();
        self.pending -= usize::from(matches!(old, Some(Route::Pending(_))));
        old
    }

    #[inline(always)]
    pub(crate) fn has_pending(&self) -> bool {
        self.pending > 0
    }

    /// Every peer whose route is pending, with what waits for it.
    pub(crate) fn pending(&self) -> impl Iterator<Item = (u32, &Pending)> {
        self.table.iter().filter_map(|(&peer, p)| match &p.route {
            Some(Route::Pending(pending)) => Some((peer, pending)),
            _ => None,
        })
    }

    /// Whether frames wait for any peer (for finalize).
    #[inline(always)]
    pub(crate) fn has_queued(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Whether frames wait for `peer`: a new one goes behind them.
    #[inline(always)]
    pub(crate) fn has_waiting(&self, peer: u32) -> bool {
        self.table.get(&peer).is_some_and(|p| !p.waiting.is_empty())
    }

    /// Whether `peer`'s route is shared memory with nothing waiting for
    /// it: the short path of a blocking call may use its ring.
    #[inline(always)]
    pub(crate) fn shm_idle(&self, peer: u32) -> bool {
        self.table
            .get(&peer)
            .is_some_and(|p| matches!(p.route, Some(Route::Shm)) && p.waiting.is_empty())
    }

    /// Whether `peer`'s route is UCX with nothing waiting for it: the
    /// short path of a blocking call may use its link.
    #[inline(always)]
    pub(crate) fn ucx_idle(&self, peer: u32) -> bool {
        self.table
            .get(&peer)
            .is_some_and(|p| matches!(p.route, Some(Route::Ucx)) && p.waiting.is_empty())
    }

    /// Keeps `t` for its peer, behind what waits (`front`: before it,
    /// where a frame taken off the front comes back).
    pub(crate) fn wait(&mut self, t: Transmit, front: bool) {
        let peer = t.peer;
        let record = self.table.get_or_insert_with(peer, Peer::default);
        if record.waiting.is_empty() {
            self.waiting.push(peer);
        }
        if front {
            record.waiting.push_front(t);
        } else {
            record.waiting.push_back(t);
        }
    }

    /// The oldest frame waiting for `peer`.
    pub(crate) fn next_waiting(&mut self, peer: u32) -> Option<Transmit> {
        let t = self.table.get_mut(&peer)?.waiting.pop_front();
        if self.table.get(&peer).is_some_and(|p| p.waiting.is_empty()) {
            self.waiting.retain(|&p| p != peer);
        }
        t
    }

    /// The frames waiting for `peer`, to revisit their protocol.
    pub(crate) fn waiting_mut(&mut self, peer: u32) -> impl Iterator<Item = &mut Transmit> {
        self.table
            .get_mut(&peer)
            .into_iter()
            .flat_map(|p| p.waiting.iter_mut())
    }

    /// The peers with frames waiting.
    pub(crate) fn waiting_peers(&self) -> Vec<u32> {
        self.waiting.clone()
    }

    /// Drops what waits for `peer` (lost: its requests fail without it).
    pub(crate) fn drop_waiting(&mut self, peer: u32) {
        if let Some(p) = self.table.get_mut(&peer) {
            p.waiting.clear();
        }
        self.waiting.retain(|&p| p != peer);
    }

    #[inline(always)]
    pub fn is_hybrid(&self, peer: u32) -> bool {
        self.table.get(&peer).is_some_and(|p| p.hybrid)
    }

    pub(crate) fn set_hybrid(&mut self, peer: u32) {
        self.entry(peer).hybrid = true;
    }

    /// Marks `peer` as used inside a communication kernel.
    pub fn mark_kernel(&mut self, peer: u32) {
        self.entry(peer).kernel = true;
    }

    /// Whether `peer` was used inside a communication kernel.
    pub fn is_kernel(&self, peer: u32) -> bool {
        self.table.get(&peer).is_some_and(|p| p.kernel)
    }

    /// Marks a use of `peer` in the link cap's `epoch`.
    #[inline(always)]
    pub(crate) fn touch(&mut self, peer: u32, epoch: u64) {
        if let Some(p) = self.table.get_mut(&peer) {
            p.last_use = epoch;
        }
    }

    /// The link cap's epoch of `peer`'s last use (0: none marked).
    pub(crate) fn last_use(&self, peer: u32) -> u64 {
        self.table.get(&peer).map_or(0, |p| p.last_use)
    }

    /// The peers used inside a communication kernel, by rank.
    pub fn kernel_peers(&self) -> Vec<u32> {
        let mut peers: Vec<u32> = self
            .table
            .iter()
            .filter_map(|(&peer, p)| p.kernel.then_some(peer))
            .collect();
        peers.sort_unstable();
        peers
    }

    /// Records that `peer` can no longer be reached; the first reason
    /// stays (a later one is a consequence of it).
    pub fn lose(&mut self, peer: u32, error: Error) {
        self.entry(peer).lost.get_or_insert(error);
    }

    /// Why `peer` can no longer be reached, if it cannot.
    pub fn lost(&self, peer: u32) -> Option<&Error> {
        self.table.get(&peer)?.lost.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::{err, ErrorClass};

    fn pending() -> Route {
        let now = Instant::now();
        Route::Pending(Pending {
            deadline: now + Duration::from_secs(1),
            retry: Retry::starting(now),
            problem: String::new(),
            ucx: false,
        })
    }

    #[test]
    fn the_pending_count_follows_every_change_of_a_route() {
        let mut peers = Peers::default();
        assert!(!peers.has_route(1) && !peers.has_pending());
        assert!(peers.set_route(1, pending()).is_none());
        assert!(peers.set_route(2, pending()).is_none());
        assert!(peers.has_pending());
        assert_eq!(peers.pending().count(), 2);
        assert!(matches!(
            peers.set_route(1, Route::Shm),
            Some(Route::Pending(_))
        ));
        assert!(matches!(peers.remove_route(2), Some(Route::Pending(_))));
        assert!(!peers.has_pending(), "{}", peers.pending);
        assert!(peers.remove_route(2).is_none() && peers.remove_route(7).is_none());
        assert!(matches!(peers.route(1), Some(Route::Shm)));
        assert!(!peers.has_route(2), "a removed route is none");
    }

    fn frame(peer: u32, tag: i32) -> Transmit {
        let mut header = tether_proto::FrameHeader::new(tether_proto::FrameKind::Eager);
        header.tag = tag;
        Transmit {
            peer,
            header,
            payload: tether_proto::TransmitPayload::None,
            completes: None,
            copy_if_blocked: false,
        }
    }

    #[test]
    fn frames_wait_per_peer_in_order_and_go_with_a_loss() {
        let mut peers = Peers::default();
        assert!(!peers.has_queued() && !peers.has_waiting(1));
        peers.wait(frame(1, 1), false);
        peers.wait(frame(1, 2), false);
        peers.wait(frame(3, 9), false);
        assert_eq!(peers.waiting_peers(), vec![1, 3]);
        let first = peers.next_waiting(1).unwrap();
        assert_eq!(first.header.tag, 1);
        peers.wait(first, true);
        let tags: Vec<i32> = peers.waiting_mut(1).map(|t| t.header.tag).collect();
        assert_eq!(tags, vec![1, 2], "a frame given back keeps its place");
        peers.set_route(1, Route::Shm);
        assert!(!peers.shm_idle(1), "frames wait: no short path");
        peers.next_waiting(1);
        peers.next_waiting(1);
        assert!(peers.next_waiting(1).is_none());
        assert!(peers.shm_idle(1));
        assert_eq!(peers.waiting_peers(), vec![3]);
        peers.drop_waiting(3);
        assert!(!peers.has_queued());
    }

    #[test]
    fn flags_and_the_first_reason_of_a_loss_stay_with_the_peer() {
        let mut peers = Peers::default();
        peers.set_hybrid(2);
        peers.mark_kernel(5);
        peers.mark_kernel(1);
        peers.lose(2, err(ErrorClass::PeerLost, "first"));
        peers.lose(2, err(ErrorClass::Timeout, "second"));
        assert!(peers.is_hybrid(2) && !peers.is_hybrid(5));
        assert_eq!(peers.kernel_peers(), [1, 5]);
        assert_eq!(peers.lost(2).map(|e| e.message.as_str()), Some("first"));
        assert!(peers.lost(1).is_none());
        assert!(!peers.has_route(5), "a flag makes no route");
    }
}

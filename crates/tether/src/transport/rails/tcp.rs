//! TCP rails: what the router asks of TCP beyond the transport contract
//! (descriptors, timers, connecting, giving a peer up, counters), done
//! for every rail. A ready descriptor goes to the rail whose part of the
//! TCP tokens it is in.

use std::time::{Duration, Instant};

use super::{MultiRail, Rail};
use crate::transport::reactor::{Ready, TCP_TOKENS};
use crate::transport::resources::LinkUse;
use crate::transport::tcp::TcpTransport;

impl Rail for TcpTransport {
    fn unwritten_to(&self, peer: u32) -> u64 {
        TcpTransport::unwritten_to(self, peer)
    }

    fn rails_of(&self, peer: u32) -> Option<usize> {
        TcpTransport::rails_of(self, peer)
    }
}

impl MultiRail<TcpTransport> {
    pub fn on_ready(&mut self, ready: &Ready) {
        let rail = TCP_TOKENS.part_of(ready.token).unwrap_or(0);
        if let Some(rail) = self.rails_mut().get_mut(rail) {
            rail.on_ready(ready);
        }
        self.collect();
    }

    /// Connects to `peer` on the pair's home rail (the other rails
    /// connect when a chunk first goes on them), or on rail 0 while the
    /// peer's address is not known: its connect attempt waits for the
    /// address and fails the peer at the connect timeout.
    pub fn start_connect(&mut self, peer: u32) {
        let home = self.home_of(peer).unwrap_or(0);
        self.rails_mut()[home].start_connect(peer);
        self.collect();
    }

    pub fn is_busy(&self) -> bool {
        self.rails().iter().any(TcpTransport::is_busy)
    }

    /// Whether a busy poll may read the connections directly: on every
    /// rail (no more than [`DIRECT_POLL_MAX`] connections on each).
    ///
    /// [`DIRECT_POLL_MAX`]: crate::transport::tcp::DIRECT_POLL_MAX
    pub fn can_poll_direct(&self) -> bool {
        self.rails().iter().all(TcpTransport::can_poll_direct)
    }

    pub fn poll_direct(&mut self) -> bool {
        let mut moved = false;
        for rail in self.rails_mut() {
            moved |= rail.poll_direct();
        }
        self.collect();
        moved
    }

    pub fn timer(&self) -> Option<Instant> {
        self.rails().iter().filter_map(TcpTransport::timer).min()
    }

    pub fn handle_timers(&mut self) {
        self.each(TcpTransport::handle_timers);
    }

    pub fn abandon(&mut self, peer: u32) {
        self.each(|rail| rail.abandon(peer));
    }

    pub fn set_timeouts(&mut self, connect: Duration, handshake: Duration, goodbye: Duration) {
        self.each(|rail| rail.set_timeouts(connect, handshake, goodbye));
    }

    /// Every rail's established links.
    pub fn links(&self, out: &mut Vec<LinkUse>) {
        for rail in self.rails() {
            rail.links(out);
        }
    }

    pub fn connect_retries(&self) -> u64 {
        self.rails().iter().map(|rail| rail.connect_retries).sum()
    }
}

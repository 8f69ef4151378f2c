//! TCP rails: what the router asks of TCP beyond the transport contract
//! (descriptors, timers, connecting, giving a peer up, counters), done
//! for every rail. A ready descriptor goes to the rail whose part of the
//! TCP tokens it is in.

use std::time::{Duration, Instant};

use super::{MultiRail, Rail};
use crate::error::{err, ErrorClass};
use crate::transport::events::LinkEvent;
use crate::transport::reactor::{Ready, TCP_TOKENS};
use crate::transport::resources::LinkUse;
use crate::transport::resources::OpenLink;
use crate::transport::tcp::TcpTransport;

/// How often a connect that waits for a peer's address looks again.
const HOME_LOOK: Duration = Duration::from_millis(1);

impl Rail for TcpTransport {
    fn unwritten_to(&self, peer: u32) -> u64 {
        TcpTransport::unwritten_to(self, peer)
    }

    fn rails_of(&self, peer: u32) -> Option<usize> {
        TcpTransport::rails_of(self, peer)
    }

    fn has_room(&self, peer: u32) -> bool {
        TcpTransport::has_room(self, peer)
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
    /// connect when a chunk first goes on them). While the peer's address
    /// is not known, neither is its home: the connect waits for it (looked
    /// for at every timer round) up to the connect timeout, so that no
    /// connection is opened on a rail the pair will not use for its
    /// order (an idle connection costs a busy poll a read per round).
    pub fn start_connect(&mut self, peer: u32) {
        match self.home_of(peer) {
            Some(home) => self.rails_mut()[home].start_connect(peer),
            None if !self.homeless.iter().any(|&(p, _)| p == peer) => {
                let deadline = Instant::now() + self.connect_timeout();
                self.homeless.push((peer, deadline));
            }
            None => {}
        }
        self.collect();
    }

    /// Connects the peers whose home became known; fails those whose
    /// address did not appear in time.
    fn settle_homes(&mut self) {
        let now = Instant::now();
        let waiting = std::mem::take(&mut self.homeless);
        for (peer, deadline) in waiting {
            if let Some(home) = self.home_of(peer) {
                self.rails_mut()[home].start_connect(peer);
            } else if now >= deadline {
                let message = format!(
                    "universe rank {peer} could not be reached over tcp within {} s (TETHER_CONNECT_TIMEOUT): its address never appeared in the rendezvous",
                    self.connect_timeout().as_secs()
                );
                let error = err(ErrorClass::Timeout, message);
                self.events.links.push(LinkEvent::Lost { peer, error });
            } else {
                self.homeless.push((peer, deadline));
            }
        }
    }

    fn connect_timeout(&self) -> Duration {
        self.rails()[0].connect_timeout()
    }

    pub fn is_busy(&self) -> bool {
        !self.homeless.is_empty() || self.rails().iter().any(TcpTransport::is_busy)
    }

    /// Whether a busy poll may read the connections directly: on every
    /// rail (no more than [`DIRECT_POLL_MAX`] connections on each), and
    /// no connect waits for a peer's address (its timer must run).
    ///
    /// [`DIRECT_POLL_MAX`]: crate::transport::tcp::DIRECT_POLL_MAX
    pub fn can_poll_direct(&self) -> bool {
        self.homeless.is_empty() && self.rails().iter().all(TcpTransport::can_poll_direct)
    }

    pub fn poll_direct(&mut self) -> bool {
        let mut moved = false;
        for rail in self.rails_mut() {
            moved |= rail.poll_direct();
        }
        self.collect();
        moved
    }

    /// The rails' timers, and while a connect waits for a peer's
    /// address, a look every millisecond (the address book finds it on
    /// its own thread).
    pub fn timer(&self) -> Option<Instant> {
        let rails = self.rails().iter().filter_map(TcpTransport::timer).min();
        let homes = (!self.homeless.is_empty()).then(|| Instant::now() + HOME_LOOK);
        rails.into_iter().chain(homes).min()
    }

    pub fn handle_timers(&mut self) {
        if !self.homeless.is_empty() {
            self.settle_homes();
        }
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

    /// Every rail's open connections (a peer once per rail it uses).
    pub fn open_links(&self, out: &mut Vec<OpenLink>) {
        for rail in self.rails() {
            rail.open_links(out);
        }
    }

    /// Retires `peer`'s connections on every rail that can retire its
    /// own now; returns whether any did.
    pub fn retire(&mut self, peer: u32) -> bool {
        let mut any = false;
        self.each(|rail| any |= rail.retire(peer));
        any
    }

    /// Every rail's connections, in any state.
    pub fn connections(&self) -> usize {
        self.rails().iter().map(TcpTransport::connections).sum()
    }

    /// Pins `peer` on every rail (`TcpTransport::pin`).
    pub fn pin(&mut self, peer: u32) {
        self.each(|rail| rail.pin(peer));
    }

    /// Connections closed by a retire, on every rail.
    pub fn retires(&self) -> u64 {
        self.rails().iter().map(|rail| rail.retires).sum()
    }

    /// Bytes of the buffers each rail's connections share, summed
    /// (`tcp/conn.rs`'s `SharedBuffers`).
    pub fn shared_buffer_bytes(&self) -> u64 {
        self.rails()
            .iter()
            .map(TcpTransport::shared_buffer_bytes)
            .sum()
    }

    /// The most connections open at once on each rail, summed.
    pub fn links_peak(&self) -> u64 {
        self.rails().iter().map(|rail| rail.links_peak).sum()
    }

    pub fn connect_retries(&self) -> u64 {
        self.rails().iter().map(|rail| rail.connect_retries).sum()
    }
}

//! What the engine moved, per peer: messages and bytes each way, how
//! the sends went (eager or rendezvous), and the bytes moved by remote
//! memory access. Pure counting, read by the runtime's statistics
//! (`tether_stats`); a message moved outside the engine (the runtime's
//! short path for blocking eager messages) is added by its mover.

/// One peer's counts since the engine started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeerCounters {
    pub messages_sent: u64,
    pub bytes_sent: u64,
    /// Sends that went eagerly (one frame with the payload)...
    pub eager_sent: u64,
    /// ...and by rendezvous (the receiver granted its buffer first).
    pub rendezvous_sent: u64,
    /// Messages that arrived from the peer, matched or not yet.
    pub messages_received: u64,
    pub bytes_received: u64,
    /// Bytes this process wrote into the peer's memory, and read from it,
    /// by remote memory access (the zero-copy rendezvous on one host).
    pub bytes_put: u64,
    pub bytes_got: u64,
}

/// How a send went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendPath {
    Eager,
    Rendezvous,
}

/// Counts by peer (universe rank).
#[derive(Debug, Clone, Default)]
pub struct Counters {
    peers: Vec<PeerCounters>,
}

impl Counters {
    fn peer_mut(&mut self, peer: u32) -> &mut PeerCounters {
        let index = peer as usize;
        if index >= self.peers.len() {
            self.peers.resize(index + 1, PeerCounters::default());
        }
        &mut self.peers[index]
    }

    /// Counts a message of `bytes` sent to `peer`.
    pub fn sent(&mut self, peer: u32, bytes: u64, path: SendPath) {
        let counts = self.peer_mut(peer);
        counts.messages_sent = counts.messages_sent.saturating_add(1);
        counts.bytes_sent = counts.bytes_sent.saturating_add(bytes);
        let path_count = match path {
            SendPath::Eager => &mut counts.eager_sent,
            SendPath::Rendezvous => &mut counts.rendezvous_sent,
        };
        *path_count = path_count.saturating_add(1);
    }

    /// Counts a message of `bytes` that arrived from `peer`.
    pub fn received(&mut self, peer: u32, bytes: u64) {
        let counts = self.peer_mut(peer);
        counts.messages_received = counts.messages_received.saturating_add(1);
        // Saturating: the sizes are a peer's word, which may be anything.
        counts.bytes_received = counts.bytes_received.saturating_add(bytes);
    }

    /// Counts `bytes` written into (`put`) or read from `peer`'s memory.
    pub fn remote(&mut self, peer: u32, put: bool, bytes: u64) {
        let counts = self.peer_mut(peer);
        let count = if put {
            &mut counts.bytes_put
        } else {
            &mut counts.bytes_got
        };
        *count = count.saturating_add(bytes);
    }

    /// Every peer with a count, by universe rank.
    pub fn peers(&self) -> impl Iterator<Item = (u32, &PeerCounters)> {
        self.peers
            .iter()
            .enumerate()
            .filter(|(_, c)| **c != PeerCounters::default())
            .map(|(peer, c)| (peer as u32, c))
    }

    pub fn peer(&self, peer: u32) -> PeerCounters {
        self.peers.get(peer as usize).copied().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_size_saturates_instead_of_overflowing() {
        let mut c = Counters::default();
        c.received(2, u64::MAX);
        c.received(2, u64::MAX);
        assert_eq!(c.peer(2).bytes_received, u64::MAX);
    }

    #[test]
    fn counts_add_up_per_peer_and_skip_silent_peers() {
        let mut c = Counters::default();
        c.sent(3, 100, SendPath::Eager);
        c.sent(3, 1 << 20, SendPath::Rendezvous);
        c.received(1, 8);
        let three = c.peer(3);
        assert_eq!(three.messages_sent, 2);
        assert_eq!(three.bytes_sent, 100 + (1 << 20));
        assert_eq!((three.eager_sent, three.rendezvous_sent), (1, 1));
        assert_eq!(c.peer(1).bytes_received, 8);
        assert_eq!(c.peer(7), PeerCounters::default());
        let peers: Vec<u32> = c.peers().map(|(p, _)| p).collect();
        assert_eq!(peers, vec![1, 3]);
    }
}

//! The counters a program or a tool reads at run time (`tether_stats_*`,
//! `tether.stats()`) and `TETHER_STATS=1` prints at finalize: named
//! numbers, since `tether_init`, so that a new counter is a new name and
//! readers keep working.
//!
//! Names (the contract; `<counter>` is one of `messages_sent`,
//! `bytes_sent`, `eager_sent`, `rendezvous_sent`, `messages_received`,
//! `bytes_received`, `bytes_put`, `bytes_got`):
//! - `<counter>`: over all peers;
//! - `<transport>.<counter>`: over the peers that transport carries
//!   (`tcp`, `shm`, `file`, `hybrid`, `self`);
//! - `peer.<universe rank>.<transport>.<counter>`: one peer, with the
//!   transport that carries it;
//! - `links`, `<transport>.links`: dedicated links now (TCP connections,
//!   shared-memory ring pairs);
//! - `link_user_bytes`, `link_kernel_bytes`, `link_ring_bytes`,
//!   `link_ring_resident_bytes`: what those links hold now, in total,
//!   as `<transport>.<name>` per transport and as
//!   `peer.<universe rank>.<transport>.<name>` per peer: user-space
//!   buffers, the kernel's socket queues (`ss -m`'s r + w + f), ring
//!   bytes mapped, and of those the resident ones
//!   (`transport/resources.rs`);
//! - `links_peak`: the most dedicated links held at once (TCP
//!   connections at their peak, plus the shared-memory rings ever
//!   written and the UCX links); `link_bytes_peak`: the most bytes the
//!   links held at once (`link_user_bytes + link_kernel_bytes +
//!   link_ring_resident_bytes`), sampled every 100 ms of progress and
//!   whenever the counters are read; `link_retires`: TCP connections closed by a
//!   retire (`TETHER_MAX_LINKS`), by either side;
//! - `tcp_shared_bytes`: the read buffers and write stages this
//!   process's TCP connections share, kept between uses (a connection
//!   holds a read buffer only while part of a frame waits in it, a stage
//!   only while staged bytes wait to be written, counted then in its
//!   `link_user_bytes`); a read buffer's pages come when first read into;
//! - `mailbox_bytes`, `mailbox_resident_bytes`: this process's
//!   shared-memory mailbox, which every peer without a ring of its own
//!   writes to (`TETHER_MAX_LINKS`), and its pages present now;
//!   `mailbox_records_sent`, `mailbox_records_received`: records this
//!   process wrote to its peers' mailboxes and read from its own;
//! - `blocked_ns`: time spent in waits that did not complete at once;
//! - `connect_retries`: connection set-up tries after a first that found
//!   the peer not there yet (its address, listener or shared memory);
//! - `route_waits`: peers whose route waited (for the peer's address in
//!   the rendezvous, or its segment) instead of settling at once; a peer
//!   that reached this process first through shared memory needs none;
//! - `link_full`: times a full link gave a frame back (back-pressure),
//!   to wait in its peer's queue;
//! - `unexpected_now`, `unexpected_max`: messages waiting for their
//!   receive now, and the most at once.
//!
//! Messages are those of the engine: point-to-point, and the messages
//! collectives and fields are made of, counted once per peer message.
//! A received message is counted when it arrives, matched or not.

use tether_proto::PeerCounters;

use crate::transport::resources::LinkMemory;

use super::Runtime;

/// Reads one counter of a peer.
type Read = fn(&PeerCounters) -> u64;

/// The counters kept per peer, by name, and how to read each.
const COUNTERS: [(&str, Read); 8] = [
    ("messages_sent", |c| c.messages_sent),
    ("bytes_sent", |c| c.bytes_sent),
    ("eager_sent", |c| c.eager_sent),
    ("rendezvous_sent", |c| c.rendezvous_sent),
    ("messages_received", |c| c.messages_received),
    ("bytes_received", |c| c.bytes_received),
    ("bytes_put", |c| c.bytes_put),
    ("bytes_got", |c| c.bytes_got),
];

impl Runtime {
    /// Every counter by name, in a stable order: totals, per transport,
    /// per peer, then the rest.
    pub fn stats(&self) -> Vec<(String, u64)> {
        let counters = self.engine.counters();
        let mut total = [0u64; COUNTERS.len()];
        let mut by_transport: Vec<(&'static str, [u64; COUNTERS.len()])> = Vec::new();
        let mut peers = Vec::new();
        for (peer, counts) in counters.peers() {
            let transport = self
                .transport
                .router()
                .transport_of(peer, self.me)
                .unwrap_or("none");
            let values = COUNTERS.map(|(_, read)| read(counts));
            let slot = match by_transport.iter().position(|(t, _)| *t == transport) {
                Some(at) => at,
                None => {
                    by_transport.push((transport, [0; COUNTERS.len()]));
                    by_transport.len() - 1
                }
            };
            for (i, value) in values.iter().enumerate() {
                total[i] += value;
                by_transport[slot].1[i] += value;
            }
            peers.push((peer, transport, values));
        }
        by_transport.sort_by_key(|(t, _)| *t);
        let mut out = Vec::new();
        for (i, (name, _)) in COUNTERS.iter().enumerate() {
            out.push((name.to_string(), total[i]));
        }
        for (transport, values) in &by_transport {
            for (i, (name, _)) in COUNTERS.iter().enumerate() {
                out.push((format!("{transport}.{name}"), values[i]));
            }
        }
        for (peer, transport, values) in &peers {
            for (i, (name, _)) in COUNTERS.iter().enumerate() {
                out.push((format!("peer.{peer}.{transport}.{name}"), values[i]));
            }
        }
        self.link_stats(&mut out);
        out.push(("blocked_ns".to_string(), self.blocked.as_nanos() as u64));
        out.push((
            "connect_retries".to_string(),
            self.transport.router().connect_retries(),
        ));
        out.push((
            "route_waits".to_string(),
            self.transport.router().route_waits(),
        ));
        out.push(("link_full".to_string(), self.transport.router().link_full()));
        out.push((
            "unexpected_now".to_string(),
            self.engine.unexpected_len() as u64,
        ));
        out.push((
            "unexpected_max".to_string(),
            self.engine.unexpected_deepest() as u64,
        ));
        out
    }

    /// The links and their memory (see the names above).
    /// What `tether_hint_get("LINKS")` reads: the process's dedicated
    /// links now, in total and per transport, and their memory, as
    /// `name=value` words (the `links` and `link_*` counters without the
    /// per-peer ones, which `tether_stats_read` gives).
    pub fn links_summary(&self) -> String {
        let mut stats = Vec::new();
        self.link_stats(&mut stats);
        stats
            .iter()
            .filter(|(name, _)| !name.starts_with("peer."))
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn link_stats(&self, out: &mut Vec<(String, u64)>) {
        let links = self.transport.router().links();
        let mut total = LinkMemory::default();
        // Per transport: its name, its links, their memory.
        let mut by_transport: Vec<(&'static str, u64, LinkMemory)> = Vec::new();
        for link in &links {
            let slot = match by_transport.iter().position(|(t, ..)| *t == link.transport) {
                Some(at) => at,
                None => {
                    by_transport.push((link.transport, 0, LinkMemory::default()));
                    by_transport.len() - 1
                }
            };
            by_transport[slot].1 += u64::from(link.dedicated);
            by_transport[slot].2.add(&link.memory);
            total.add(&link.memory);
        }
        by_transport.sort_by_key(|(t, ..)| *t);
        let dedicated = links.iter().filter(|link| link.dedicated).count();
        out.push(("links".to_string(), dedicated as u64));
        let router = self.transport.router();
        out.push(("links_peak".to_string(), router.links_peak()));
        out.push(("link_bytes_peak".to_string(), router.link_bytes_peak()));
        out.push(("link_retires".to_string(), router.retires()));
        out.push(("tcp_shared_bytes".to_string(), router.tcp_shared_bytes()));
        let (mailbox, mailbox_resident) = router.mailbox_footprint();
        out.push(("mailbox_bytes".to_string(), mailbox));
        out.push(("mailbox_resident_bytes".to_string(), mailbox_resident));
        let (written, read) = router.mailbox_records();
        out.push(("mailbox_records_sent".to_string(), written));
        out.push(("mailbox_records_received".to_string(), read));
        out.extend(
            total
                .named()
                .iter()
                .map(|(name, value)| (name.to_string(), *value)),
        );
        for (transport, count, memory) in &by_transport {
            out.push((format!("{transport}.links"), *count));
            out.extend(
                memory
                    .named()
                    .iter()
                    .map(|(name, value)| (format!("{transport}.{name}"), *value)),
            );
        }
        // Per peer and transport (several links with rails), in the
        // order `links` gives: by peer, then transport.
        for group in links.chunk_by(|a, b| (a.peer, a.transport) == (b.peer, b.transport)) {
            let (peer, transport) = (group[0].peer, group[0].transport);
            let mut memory = LinkMemory::default();
            group.iter().for_each(|link| memory.add(&link.memory));
            let dedicated = group.iter().filter(|link| link.dedicated).count();
            if dedicated > 1 {
                out.push((format!("peer.{peer}.{transport}.links"), dedicated as u64));
            }
            out.extend(
                memory
                    .named()
                    .iter()
                    .map(|(name, value)| (format!("peer.{peer}.{transport}.{name}"), *value)),
            );
        }
    }

    /// Takes a snapshot of [`Runtime::stats`] for reading by index (the C
    /// API's `tether_stats_count` / `tether_stats_entry`); returns its length.
    pub fn snapshot_stats(&mut self) -> usize {
        self.stats_snapshot = self.stats();
        self.stats_snapshot.len()
    }

    pub fn stats_snapshot_len(&self) -> usize {
        self.stats_snapshot.len()
    }

    /// Entry `index` of the last snapshot.
    pub fn stats_entry(&self, index: usize) -> Option<&(String, u64)> {
        self.stats_snapshot.get(index)
    }

    /// `TETHER_STATS=1`: the counters on standard error, at finalize.
    pub(super) fn print_stats(&self) {
        let me = &self.universe.programs[self.universe.my_program];
        let who = format!("{}:{}", me.name, self.universe.my_rank);
        let mut text = String::new();
        for (name, value) in self.stats() {
            if value != 0 || !name.starts_with("peer.") {
                text.push_str(&format!("tether stats {who}: {name} {value}\n"));
            }
        }
        eprint!("{text}");
    }
}

//! The universe: every joined process of every program, and how a process
//! joins it through the rendezvous.
//!
//! Rendezvous keys (values are single lines):
//! - `size/<program>`: the number of joining processes of the program,
//!   published by its rank 0;
//! - `addr/<program>/<rank>`: how to reach that process, published by it
//!   once it listens (see [`PeerAddress`]).
//!
//! Joining waits only for the sizes; addresses are read when a peer is
//! first used, so a process pays nothing for peers it never talks to.

use std::time::{Duration, Instant};

use tether_rendezvous::Rendezvous;

use crate::error::{err, Error, ErrorClass, Result};
use crate::identity::{check_program_name, Identity};
use crate::stale::Publisher;

/// One program of the universe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub name: String,
    /// Joined processes.
    pub size: u32,
    /// Universe rank of its rank 0.
    pub first: u32,
}

/// The programs of the universe, ordered by name, and this process's place.
#[derive(Debug, Clone)]
pub struct Universe {
    pub programs: Vec<Program>,
    pub my_program: usize,
    pub my_rank: u32,
    /// A fingerprint of the programs and sizes: peers with another one
    /// belong to another universe and are refused at the handshake.
    pub id: u64,
    /// Universe rank 0's random start-up nonce, read from its program's
    /// size entry in [`join`] (absent when that entry carries none): tells
    /// this run from an earlier one (the `file` transport salts its run id
    /// with it).
    pub run_nonce: Option<u64>,
    /// This process's host identity ([`crate::host::host_id`]), set by
    /// [`join`]: entries of processes on this host are checked by pid.
    pub my_host: String,
}

impl Universe {
    /// Builds the universe from every program's size.
    pub fn new(sizes: &[(String, u32)], me: &Identity) -> Result<Universe> {
        let mut sorted: Vec<(String, u32)> = sizes.to_vec();
        sorted.sort();
        let mut programs = Vec::with_capacity(sorted.len());
        let mut first = 0u32;
        let mut id: u64 = 0xcbf2_9ce4_8422_2325;
        for (name, size) in sorted {
            for byte in name.bytes().chain(size.to_le_bytes()).chain([0xff]) {
                id = (id ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
            programs.push(Program { name, size, first });
            first = first
                .checked_add(size)
                .ok_or_else(|| err(ErrorClass::Init, "universe larger than 2^32 processes"))?;
        }
        let my_program = programs
            .iter()
            .position(|p| p.name == me.program)
            .ok_or_else(|| {
                err(
                    ErrorClass::Init,
                    format!("program {:?} is not in the universe", me.program),
                )
            })?;
        Ok(Universe {
            programs,
            my_program,
            my_rank: me.rank,
            id,
            run_nonce: None,
            my_host: String::new(),
        })
    }

    pub fn size(&self) -> u32 {
        self.programs.last().map_or(0, |p| p.first + p.size)
    }

    pub fn my_universe_rank(&self) -> u32 {
        self.programs[self.my_program].first + self.my_rank
    }

    /// The program index and program rank of a universe rank.
    pub fn locate(&self, universe_rank: u32) -> Option<(usize, u32)> {
        self.programs
            .iter()
            .position(|p| universe_rank >= p.first && universe_rank < p.first + p.size)
            .map(|i| (i, universe_rank - self.programs[i].first))
    }

    /// `program:rank` of a universe rank, for messages.
    pub fn describe(&self, universe_rank: u32) -> String {
        match self.locate(universe_rank) {
            Some((p, r)) => format!("{}:{}", self.programs[p].name, r),
            None => format!("universe rank {universe_rank}"),
        }
    }

    pub fn find(&self, name: &str) -> Option<usize> {
        self.programs.iter().position(|p| p.name == name)
    }

    /// This run's tag, written into each joined process's address entry
    /// (`run=`): the universe's fingerprint with rank 0's nonce, different
    /// in every run, so that an address an earlier run left is not taken
    /// for a peer's.
    pub fn run_tag(&self) -> u64 {
        let nonce = self.run_nonce.unwrap_or(0);
        crate::stale::fingerprint(self.id.to_le_bytes().into_iter().chain(nonce.to_le_bytes()))
    }
}

/// How to reach a process, as published under `addr/<program>/<rank>`:
/// `tcp=<ip:port> host=<host id> pid=<pid> [start=<ticks>] [shm=<fd>]`.
/// `start` is the process's start time (with `pid`, it names the process
/// even after its pid is reused), `shm` the descriptor of its
/// shared-memory segment; both are absent when it offers no shared
/// memory. Unknown fields are ignored, so later versions may add some.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerAddress {
    pub tcp: String,
    pub host: String,
    pub pid: u32,
    pub start: Option<u64>,
    pub shm: Option<u32>,
    /// The UDP port its heartbeat thread answers on (`liveness.rs`), on
    /// the IP of `tcp`.
    pub beat: Option<u16>,
    /// The listeners of its further TCP rails (`TETHER_RAILS`), in rail
    /// order from rail 1 (rail 0 is `tcp`).
    pub rails: Vec<String>,
    /// Its UCX worker's address (hex), when `ucx` is one of its transports.
    pub ucx: Option<String>,
}

impl PeerAddress {
    pub fn encode(&self) -> String {
        let mut text = format!("tcp={} host={} pid={}", self.tcp, self.host, self.pid);
        if let Some(start) = self.start {
            text += &format!(" start={start}");
        }
        if let Some(fd) = self.shm {
            text += &format!(" shm={fd}");
        }
        if let Some(port) = self.beat {
            text += &format!(" beat={port}");
        }
        if !self.rails.is_empty() {
            text += &format!(" rails={}", self.rails.join(","));
        }
        if let Some(ucx) = &self.ucx {
            text += &format!(" ucx={ucx}");
        }
        text
    }

    pub fn decode(text: &str) -> Option<PeerAddress> {
        let mut tcp = None;
        let mut host = None;
        let mut pid = None;
        let mut start = None;
        let mut shm = None;
        let mut beat = None;
        let mut rails = Vec::new();
        let mut ucx = None;
        for field in text.split_whitespace() {
            match field.split_once('=')? {
                ("tcp", v) => tcp = Some(v.to_string()),
                ("host", v) => host = Some(v.to_string()),
                ("pid", v) => pid = v.parse().ok(),
                ("start", v) => start = v.parse().ok(),
                ("shm", v) => shm = v.parse().ok(),
                ("beat", v) => beat = v.parse().ok(),
                ("rails", v) => rails = v.split(',').map(str::to_string).collect(),
                ("ucx", v) => ucx = Some(v.to_string()),
                _ => {}
            }
        }
        Some(PeerAddress {
            tcp: tcp?,
            host: host?,
            pid: pid?,
            start,
            shm,
            beat,
            rails,
            ucx,
        })
    }
}

pub fn size_key(program: &str) -> String {
    format!("size/{program}")
}

/// A program's size entry, published by its rank 0 under `size/<program>`
/// and never removed while the run lasts: `<size> nonce=<16 hex digits>
/// [run=<16 hex digits>] host=<id> pid=<pid> [start=<ticks>] tcp=<ip:port>`,
/// the nonce random at every start, `run` the fingerprint of
/// `TETHER_RUN_ID` when set, and the rest naming the process that wrote
/// it, so that an entry an earlier run left is known as such
/// ([`crate::stale`]). Every process reads every program's entry before it
/// joins, so universe rank 0's nonce is known to all even when rank 0 has
/// already finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeEntry {
    pub size: u32,
    pub nonce: Option<u64>,
    pub run_id: Option<u64>,
    pub by: Option<Publisher>,
}

impl SizeEntry {
    pub fn encode(&self) -> String {
        let mut text = self.size.to_string();
        if let Some(nonce) = self.nonce {
            text += &format!(" nonce={nonce:016x}");
        }
        if let Some(run) = self.run_id {
            text += &format!(" run={run:016x}");
        }
        if let Some(by) = &self.by {
            text += &format!(" host={} pid={}", by.host, by.pid);
            if let Some(start) = by.start {
                text += &format!(" start={start}");
            }
            if let Some(tcp) = &by.tcp {
                text += &format!(" tcp={tcp}");
            }
        }
        text
    }

    /// The size and the other fields; unknown fields are ignored, missing
    /// ones are `None` (entries of older versions have no nonce and no
    /// publisher), a missing or bad size is `None` for the whole entry.
    pub fn decode(text: &str) -> Option<SizeEntry> {
        let mut fields = text.split_whitespace();
        let size = fields.next()?.parse().ok()?;
        let (mut nonce, mut host, mut pid, mut start, mut tcp) = (None, None, None, None, None);
        for field in fields {
            match field.split_once('=') {
                Some(("nonce", v)) => nonce = u64::from_str_radix(v, 16).ok(),
                Some(("host", v)) => host = Some(v.to_string()),
                Some(("pid", v)) => pid = v.parse().ok(),
                Some(("start", v)) => start = v.parse().ok(),
                Some(("tcp", v)) => tcp = Some(v.to_string()),
                _ => {}
            }
        }
        let by = host.zip(pid).map(|(host, pid)| Publisher {
            host,
            pid,
            start,
            tcp,
        });
        Some(SizeEntry {
            size,
            nonce,
            run_id: crate::stale::run_field(text),
            by,
        })
    }

    /// Why this entry belongs to another run than the one `run_id`
    /// (`TETHER_RUN_ID`'s fingerprint) names, seen from `my_host`. When
    /// both carry a run id, it decides: the same one is this run's even
    /// when its writer has ended (under `tether run`, which sets a fresh
    /// id, a program's rank 0 may finish before a slow process of another
    /// program joins). Without one, a writer that is gone makes the entry
    /// stale. `None`: it is taken as this run's (also when it names no
    /// writer: an older version wrote it).
    pub fn stale(&self, run_id: Option<u64>, my_host: &str) -> Option<String> {
        if let (Some(theirs), Some(ours)) = (self.run_id, run_id) {
            return (theirs != ours)
                .then(|| "it was written under another TETHER_RUN_ID".to_string());
        }
        self.by.as_ref()?.gone(my_host)
    }
}

pub fn addr_key(program: &str, rank: u32) -> String {
    format!("addr/{program}/{rank}")
}

/// The names in `TETHER_PROGRAMS`, checked; a lone program when unset.
pub fn program_names(programs: Option<&str>, me: &Identity) -> Result<Vec<String>> {
    let Some(list) = programs else {
        return Ok(vec![me.program.clone()]);
    };
    let mut names: Vec<String> = list
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    for name in &names {
        check_program_name(name)?;
    }
    names.sort();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(err(
            ErrorClass::Init,
            format!(
                "program {:?} appears twice in TETHER_PROGRAMS={list:?}",
                w[0]
            ),
        ));
    }
    if !names.contains(&me.program) {
        return Err(err(
            ErrorClass::Init,
            format!(
                "this program {:?} is missing from TETHER_PROGRAMS={list:?}",
                me.program
            ),
        ));
    }
    Ok(names)
}

/// Publishes this process (and, on a program's rank 0, its size with
/// `nonce`) and waits until every program has published its size. A size
/// entry that another run left (`run_id`, `TETHER_RUN_ID`, differs, or
/// the process that wrote it is gone: [`SizeEntry::stale`]) is not
/// believed: the program's new rank 0 will replace it. Fails with
/// `Timeout` naming the programs that did not appear, and why an entry
/// that is there was not believed. Once joined, the address is published
/// again with the run's tag ([`Universe::run_tag`]), by which peers tell
/// it from an address another run left.
pub fn join(
    rendezvous: &Rendezvous,
    names: &[String],
    me: &Identity,
    address: &PeerAddress,
    nonce: u64,
    run_id: Option<&str>,
    timeout: Duration,
) -> Result<Universe> {
    let run_id = run_id.map(|id| crate::stale::fingerprint(id.bytes()));
    claim(rendezvous, me, address)?;
    if me.rank == 0 {
        let entry = SizeEntry {
            size: me.size,
            nonce: Some(nonce),
            run_id,
            by: Some(Publisher::this_process(&address.host, &address.tcp)),
        };
        rendezvous
            .put(&size_key(&me.program), &entry.encode())
            .map_err(rdv_err)?;
    }
    let deadline = Instant::now() + timeout;
    let mut sizes = Vec::with_capacity(names.len());
    let mut nonces = Vec::with_capacity(names.len());
    let mut missing = Vec::new();
    for name in names {
        let entry = match await_size(rendezvous, name, run_id, &address.host, deadline)? {
            Ok(entry) => entry,
            Err(stale) => {
                missing.push(match stale {
                    Some(why) => format!(
                        "{name} (its entry {} is not taken for this run's: {why}; an earlier or crashed run left it, or its rank 0 ended)",
                        size_key(name)
                    ),
                    None => name.clone(),
                });
                continue;
            }
        };
        let size = entry.size;
        if name == &me.program && size != me.size {
            return Err(err(
                ErrorClass::Init,
                format!("program {name:?}: this process says {} joining processes, its rank 0 said {size}", me.size),
            ));
        }
        sizes.push((name.clone(), size));
        nonces.push((name.as_str(), entry.nonce));
    }
    let unsealed: Vec<&str> = names
        .iter()
        .filter(|name| rendezvous.unsealed(&size_key(name)))
        .map(String::as_str)
        .collect();
    if !unsealed.is_empty() {
        return Err(err(
            ErrorClass::Auth,
            format!(
                "program(s) {} did not join within {} s: rendezvous {} holds their entries, but not written with this process's key; give every program the same TETHER_KEY_FILE (or start them with one `tether run`)",
                unsealed.join(", "),
                timeout.as_secs(),
                rendezvous.describe()
            ),
        ));
    }
    if !missing.is_empty() {
        return Err(err(
            ErrorClass::Timeout,
            format!(
                "program(s) {} did not join within {} s (rendezvous {}): is their rank 0 running with the same TETHER_RENDEZVOUS?",
                missing.join(", "),
                timeout.as_secs(),
                rendezvous.describe()
            ),
        ));
    }
    // Two processes that claimed one identity at the same moment both
    // found it free; the later write won: the other sees it now.
    let key = addr_key(&me.program, me.rank);
    if let Ok(Some(text)) = rendezvous.get(&key) {
        if let Some(other) = PeerAddress::decode(&text).filter(|other| other != address) {
            return Err(claimed_twice(me, &other, address, rendezvous));
        }
    }
    let mut universe = Universe::new(&sizes, me)?;
    universe.run_nonce = nonces
        .iter()
        .find(|(name, _)| *name == universe.programs[0].name)
        .and_then(|(_, nonce)| *nonce);
    universe.my_host = address.host.clone();
    let tagged = format!("{} run={:016x}", address.encode(), universe.run_tag());
    rendezvous.put(&key, &tagged).map_err(rdv_err)?;
    Ok(universe)
}

/// A rendezvous failure at join: `TETHER_ERR_AUTH` when the others have a
/// key and this process has none, `TETHER_ERR_INIT` otherwise.
fn rdv_err(e: tether_rendezvous::RendezvousError) -> crate::error::Error {
    let class = match e {
        tether_rendezvous::RendezvousError::SealedWithoutKey { .. } => ErrorClass::Auth,
        _ => ErrorClass::Init,
    };
    err(class, e.to_string())
}

/// Program `name`'s size entry, once one of this run is there: an entry
/// another run left is waited past until it is replaced. At `deadline`,
/// `Err` with why the entry there (if any) was not believed.
fn await_size(
    rendezvous: &Rendezvous,
    name: &str,
    run_id: Option<u64>,
    my_host: &str,
    deadline: Instant,
) -> Result<std::result::Result<SizeEntry, Option<String>>> {
    let key = size_key(name);
    // The text of the entry found stale, and why: it is not checked again
    // until it changes.
    let mut stale: Option<(String, String)> = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let value = match &stale {
            None => rendezvous.wait(&key, left).map_err(rdv_err)?,
            Some((old, _)) => {
                std::thread::sleep(STALE_POLL.min(left));
                rendezvous
                    .get(&key)
                    .map_err(rdv_err)?
                    .filter(|text| text != old)
            }
        };
        let Some(value) = value else {
            if left.is_zero() {
                return Ok(Err(stale.map(|(_, why)| why)));
            }
            continue;
        };
        let entry = SizeEntry::decode(&value).ok_or_else(|| {
            err(
                ErrorClass::Init,
                format!(
                    "rendezvous {} holds a bad size {value:?} for program {name:?}",
                    rendezvous.describe()
                ),
            )
        })?;
        match entry.stale(run_id, my_host) {
            None => return Ok(Ok(entry)),
            Some(why) => {
                if stale.is_none() {
                    tracing::info!(
                        "rendezvous {}: {key} is another run's ({why}); waiting for this run's",
                        rendezvous.describe()
                    );
                }
                stale = Some((value, why));
            }
        }
    }
}

/// How often an entry found stale is read again while its program's new
/// rank 0 has not replaced it.
const STALE_POLL: Duration = Duration::from_millis(20);

/// Publishes this process's address as `me`, unless a live process holds
/// that identity already (a forgotten `TETHER_RANK`, two launches of one
/// rank): then the error names both. An entry that a process now gone
/// left (an earlier or crashed run on the same rendezvous) is replaced.
fn claim(rendezvous: &Rendezvous, me: &Identity, address: &PeerAddress) -> Result<()> {
    let key = addr_key(&me.program, me.rank);
    if let Some(text) = rendezvous.get(&key).map_err(rdv_err)? {
        if let Some(other) = PeerAddress::decode(&text) {
            if other != *address && holds(&other, address) {
                return Err(claimed_twice(me, &other, address, rendezvous));
            }
            tracing::info!(
                "rendezvous {}: {key} named pid {} on {}, which is gone (an earlier run); replaced",
                rendezvous.describe(),
                other.pid,
                other.host
            );
        }
    }
    rendezvous.put(&key, &address.encode()).map_err(rdv_err)
}

/// Whether the process `other` describes still runs: on this host, by
/// its pid and start time; elsewhere, by whether its listener answers.
fn holds(other: &PeerAddress, me: &PeerAddress) -> bool {
    if other.host == me.host {
        return match other.start {
            Some(start) => crate::host::is_alive(other.pid, start),
            None => crate::host::start_time(other.pid).is_some(),
        };
    }
    other
        .tcp
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_millis(300)).is_ok())
}

fn claimed_twice(
    me: &Identity,
    other: &PeerAddress,
    address: &PeerAddress,
    rendezvous: &Rendezvous,
) -> Error {
    err(
        ErrorClass::Init,
        format!(
            "{}:{} is claimed twice in rendezvous {}: by pid {} on {} (tcp {}) and by this process, pid {} on {}; \
             give each process its own rank (TETHER_RANK, or the MPI launcher's), or a fresh rendezvous",
            me.program,
            me.rank,
            rendezvous.describe(),
            other.pid,
            other.host,
            other.tcp,
            address.pid,
            address.host
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me(program: &str, rank: u32, size: u32) -> Identity {
        Identity {
            program: program.into(),
            rank,
            size,
        }
    }

    #[test]
    fn programs_are_ordered_by_name_and_ranks_concatenated() {
        let u = Universe::new(
            &[("sim".into(), 4), ("ml".into(), 1), ("io".into(), 2)],
            &me("sim", 2, 4),
        )
        .unwrap();
        let names: Vec<&str> = u.programs.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["io", "ml", "sim"]);
        assert_eq!(u.size(), 7);
        assert_eq!(u.my_universe_rank(), 5);
        assert_eq!(u.locate(2), Some((1, 0)));
        assert_eq!(u.describe(6), "sim:3");
        assert_eq!(u.locate(7), None);
        let other = Universe::new(
            &[("sim".into(), 4), ("ml".into(), 2), ("io".into(), 2)],
            &me("sim", 0, 4),
        )
        .unwrap();
        assert_ne!(u.id, other.id);
    }

    #[test]
    fn program_list_is_checked() {
        let e = program_names(Some("a,b"), &me("c", 0, 1)).unwrap_err();
        assert_eq!(e.class, ErrorClass::Init);
        assert!(
            e.message.contains("\"c\" is missing from TETHER_PROGRAMS"),
            "{}",
            e.message
        );
        assert!(program_names(Some("a,a"), &me("a", 0, 1)).is_err());
        assert_eq!(program_names(None, &me("x", 0, 1)).unwrap(), ["x"]);
    }

    #[test]
    fn addresses_round_trip() {
        let a = PeerAddress {
            tcp: "127.0.0.1:4000".into(),
            host: "node1-abc".into(),
            pid: 42,
            start: Some(123456),
            shm: Some(7),
            beat: Some(4001),
            rails: vec!["10.1.0.1:4002".into(), "10.2.0.1:4003".into()],
            ucx: Some("00ab17".into()),
        };
        assert_eq!(PeerAddress::decode(&a.encode()), Some(a.clone()));
        let one_rail = PeerAddress {
            rails: Vec::new(),
            ..a.clone()
        };
        assert!(!one_rail.encode().contains("rails="));
        assert_eq!(PeerAddress::decode(&one_rail.encode()), Some(one_rail));
        assert_eq!(PeerAddress::decode("garbage"), None);
        let old = PeerAddress::decode("tcp=127.0.0.1:1 host=x pid=1 future=yes").unwrap();
        assert_eq!((old.start, old.shm, old.beat), (None, None, None));
        assert_eq!(old.ucx, None);
    }

    #[test]
    fn size_entries_round_trip_and_old_ones_have_no_nonce() {
        let entry = SizeEntry {
            size: 3,
            nonce: Some(0x0123_4567_89ab_cdef),
            run_id: Some(0xff),
            by: Some(Publisher {
                host: "h/b".into(),
                pid: 5,
                start: Some(6),
                tcp: Some("127.0.0.1:7".into()),
            }),
        };
        assert_eq!(
            entry.encode(),
            "3 nonce=0123456789abcdef run=00000000000000ff host=h/b pid=5 start=6 tcp=127.0.0.1:7"
        );
        assert_eq!(SizeEntry::decode(&entry.encode()), Some(entry));
        let old = SizeEntry::decode("4\n").unwrap();
        assert_eq!(
            (old.size, old.nonce, old.run_id, old.by),
            (4, None, None, None)
        );
        assert_eq!(SizeEntry::decode("four nonce=1"), None);
        assert_eq!(SizeEntry::decode(""), None);
    }

    #[test]
    fn every_process_learns_rank_zeros_nonce_even_after_rank_zero_left() {
        let dir = std::env::temp_dir().join(format!("tether-join-{}", std::process::id()));
        let rendezvous = Rendezvous::open(&dir.to_string_lossy()).unwrap();
        let address = PeerAddress::decode("tcp=127.0.0.1:1 host=h pid=1").unwrap();
        let names = ["alpha".to_string(), "beta".to_string()];
        let wait = Duration::from_secs(5);
        // beta's rank 0 has published its size, not yet its address.
        rendezvous.put(&size_key("beta"), "1 nonce=9").unwrap();
        let first = join(
            &rendezvous,
            &names,
            &me("alpha", 0, 1),
            &address,
            7,
            None,
            wait,
        )
        .unwrap();
        // alpha:0 finishes and removes its address before beta:0 arrives.
        rendezvous.remove(&addr_key("alpha", 0)).unwrap();
        let late = join(
            &rendezvous,
            &names,
            &me("beta", 0, 1),
            &address,
            9,
            None,
            wait,
        )
        .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(first.run_nonce, Some(7));
        assert_eq!(
            late.run_nonce,
            Some(7),
            "beta must use universe rank 0's nonce"
        );
    }

    #[test]
    fn a_live_claimant_is_refused_and_a_gone_one_replaced() {
        let dir = std::env::temp_dir().join(format!("tether-claim-{}", std::process::id()));
        let rendezvous = Rendezvous::open(&dir.to_string_lossy()).unwrap();
        let pid = std::process::id();
        let mine = PeerAddress {
            tcp: "127.0.0.1:2".into(),
            host: "h".into(),
            pid,
            start: crate::host::start_time(pid),
            shm: None,
            beat: None,
            rails: Vec::new(),
            ucx: None,
        };
        let names = ["alpha".to_string()];
        let wait = Duration::from_secs(5);
        // A gone process of an earlier run (pid 1's start time is not 7).
        let gone = PeerAddress {
            pid: 1,
            start: Some(7),
            ..mine.clone()
        };
        rendezvous
            .put(&addr_key("alpha", 0), &gone.encode())
            .unwrap();
        join(
            &rendezvous,
            &names,
            &me("alpha", 0, 1),
            &mine,
            1,
            None,
            wait,
        )
        .unwrap();
        let published = rendezvous.get(&addr_key("alpha", 0)).unwrap().unwrap();
        assert_eq!(PeerAddress::decode(&published), Some(mine.clone()));
        // A live one (this test process, listening elsewhere).
        let twin = PeerAddress {
            tcp: "127.0.0.1:3".into(),
            ..mine.clone()
        };
        let e = join(
            &rendezvous,
            &names,
            &me("alpha", 0, 1),
            &twin,
            1,
            None,
            wait,
        )
        .unwrap_err();
        assert_eq!(e.class, ErrorClass::Init);
        assert!(
            e.message.contains("alpha:0 is claimed twice"),
            "{}",
            e.message
        );
        assert!(
            e.message
                .contains(&format!("by pid {pid} on h (tcp 127.0.0.1:2)")),
            "{}",
            e.message
        );
        // On another host whose listener does not answer: gone.
        let elsewhere = PeerAddress {
            host: "other".into(),
            tcp: "127.0.0.1:1".into(),
            ..mine.clone()
        };
        rendezvous
            .put(&addr_key("alpha", 0), &elsewhere.encode())
            .unwrap();
        join(
            &rendezvous,
            &names,
            &me("alpha", 0, 1),
            &mine,
            1,
            None,
            wait,
        )
        .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A size entry as an earlier run's rank 0 (pid 1, which did not
    /// start at tick 7) left it on host `h`.
    fn left_behind(size: u32) -> String {
        SizeEntry {
            size,
            nonce: Some(1),
            run_id: None,
            by: Some(Publisher {
                host: "h".into(),
                pid: 1,
                start: Some(7),
                tcp: None,
            }),
        }
        .encode()
    }

    #[test]
    fn a_size_entry_an_ended_process_wrote_is_waited_past() {
        let dir = std::env::temp_dir().join(format!("tether-stale-{}", std::process::id()));
        let rendezvous = Rendezvous::open(&dir.to_string_lossy()).unwrap();
        let address = PeerAddress::decode("tcp=127.0.0.1:1 host=h pid=1").unwrap();
        let names = ["alpha".to_string(), "beta".to_string()];
        rendezvous.put(&size_key("beta"), &left_behind(3)).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                // beta's new rank 0 (this test process: alive) replaces it.
                let fresh = SizeEntry {
                    size: 2,
                    nonce: Some(9),
                    run_id: None,
                    by: Some(Publisher::this_process("h", "127.0.0.1:1")),
                };
                rendezvous.put(&size_key("beta"), &fresh.encode()).unwrap();
            });
            let wait = Duration::from_secs(20);
            let u = join(
                &rendezvous,
                &names,
                &me("alpha", 0, 1),
                &address,
                7,
                None,
                wait,
            )
            .unwrap();
            assert_eq!(
                u.programs[1].size, 2,
                "the earlier run's size 3 was believed"
            );
        });
        // The address is published with the run's tag once joined.
        let text = rendezvous.get(&addr_key("alpha", 0)).unwrap().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(crate::stale::run_field(&text).is_some(), "{text}");
    }

    #[test]
    fn a_size_entry_never_replaced_times_out_saying_whose_it_is() {
        let dir = std::env::temp_dir().join(format!("tether-stale-to-{}", std::process::id()));
        let rendezvous = Rendezvous::open(&dir.to_string_lossy()).unwrap();
        let address = PeerAddress::decode("tcp=127.0.0.1:1 host=h pid=1").unwrap();
        let names = ["alpha".to_string(), "beta".to_string()];
        rendezvous.put(&size_key("beta"), &left_behind(3)).unwrap();
        let wait = Duration::from_millis(300);
        let e = join(
            &rendezvous,
            &names,
            &me("alpha", 0, 1),
            &address,
            7,
            None,
            wait,
        )
        .unwrap_err();
        // Another TETHER_RUN_ID is another run, even with a live writer.
        let other_run = SizeEntry {
            size: 3,
            nonce: None,
            run_id: Some(crate::stale::fingerprint(*b"old")),
            by: Some(Publisher::this_process("h", "127.0.0.1:1")),
        };
        rendezvous
            .put(&size_key("beta"), &other_run.encode())
            .unwrap();
        let e2 = join(
            &rendezvous,
            &names,
            &me("alpha", 0, 1),
            &address,
            7,
            Some("new"),
            wait,
        )
        .unwrap_err();
        // The same TETHER_RUN_ID is this run, even with its writer gone
        // (a rank 0 that finished before a slow process joined).
        let ended_same_run = SizeEntry {
            run_id: Some(crate::stale::fingerprint(*b"new")),
            ..SizeEntry::decode(&left_behind(3)).unwrap()
        };
        rendezvous
            .put(&size_key("beta"), &ended_same_run.encode())
            .unwrap();
        let same = join(
            &rendezvous,
            &names,
            &me("alpha", 0, 1),
            &address,
            7,
            Some("new"),
            wait,
        );
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(e.class, ErrorClass::Timeout);
        assert!(
            e.message.contains("program(s) beta (its entry size/beta is not taken for this run's: pid 1 on this host has ended; an earlier or crashed run left it, or its rank 0 ended) did not join"),
            "{}",
            e.message
        );
        assert!(
            e.message.contains(&dir.to_string_lossy().to_string()),
            "{}",
            e.message
        );
        assert!(
            e2.message.contains("another TETHER_RUN_ID"),
            "{}",
            e2.message
        );
        assert_eq!(same.unwrap().programs[1].size, 3);
    }
}

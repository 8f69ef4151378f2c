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
        text
    }

    pub fn decode(text: &str) -> Option<PeerAddress> {
        let mut tcp = None;
        let mut host = None;
        let mut pid = None;
        let mut start = None;
        let mut shm = None;
        for field in text.split_whitespace() {
            match field.split_once('=')? {
                ("tcp", v) => tcp = Some(v.to_string()),
                ("host", v) => host = Some(v.to_string()),
                ("pid", v) => pid = v.parse().ok(),
                ("start", v) => start = v.parse().ok(),
                ("shm", v) => shm = v.parse().ok(),
                _ => {}
            }
        }
        Some(PeerAddress {
            tcp: tcp?,
            host: host?,
            pid: pid?,
            start,
            shm,
        })
    }
}

pub fn size_key(program: &str) -> String {
    format!("size/{program}")
}

/// A program's size entry, published by its rank 0 under `size/<program>`
/// and never removed while the run lasts: `<size> nonce=<16 hex digits>`,
/// the nonce random at every start. Every process reads every program's
/// entry before it joins, so universe rank 0's nonce is known to all even
/// when rank 0 has already finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeEntry {
    pub size: u32,
    pub nonce: Option<u64>,
}

impl SizeEntry {
    pub fn encode(&self) -> String {
        match self.nonce {
            Some(nonce) => format!("{} nonce={nonce:016x}", self.size),
            None => self.size.to_string(),
        }
    }

    /// The size and nonce; unknown fields are ignored, a missing nonce is
    /// `None`, a missing or bad size is `None` for the whole entry.
    pub fn decode(text: &str) -> Option<SizeEntry> {
        let mut fields = text.split_whitespace();
        let size = fields.next()?.parse().ok()?;
        let nonce = fields
            .filter_map(|f| f.strip_prefix("nonce="))
            .find_map(|v| u64::from_str_radix(v, 16).ok());
        Some(SizeEntry { size, nonce })
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
/// `nonce`) and waits until every program has published its size. Fails
/// with `Timeout` naming the programs that did not appear.
pub fn join(
    rendezvous: &Rendezvous,
    names: &[String],
    me: &Identity,
    address: &PeerAddress,
    nonce: u64,
    timeout: Duration,
) -> Result<Universe> {
    let rdv_err = |e: tether_rendezvous::RendezvousError| err(ErrorClass::Init, e.to_string());
    claim(rendezvous, me, address)?;
    if me.rank == 0 {
        rendezvous
            .put(
                &size_key(&me.program),
                &SizeEntry {
                    size: me.size,
                    nonce: Some(nonce),
                }
                .encode(),
            )
            .map_err(rdv_err)?;
    }
    let deadline = Instant::now() + timeout;
    let mut sizes = Vec::with_capacity(names.len());
    let mut nonces = Vec::with_capacity(names.len());
    for name in names {
        let left = deadline.saturating_duration_since(Instant::now());
        let value = rendezvous.wait(&size_key(name), left).map_err(rdv_err)?;
        let Some(value) = value else {
            let missing: Vec<&str> = names
                .iter()
                .filter(|n| !matches!(rendezvous.get(&size_key(n)), Ok(Some(_))))
                .map(String::as_str)
                .collect();
            return Err(err(
                ErrorClass::Timeout,
                format!(
                    "program(s) {} did not join within {} s (rendezvous {}): is their rank 0 running with the same TETHER_RENDEZVOUS?",
                    missing.join(", "),
                    timeout.as_secs(),
                    rendezvous.describe()
                ),
            ));
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
    Ok(universe)
}

/// Publishes this process's address as `me`, unless a live process holds
/// that identity already (a forgotten `TETHER_RANK`, two launches of one
/// rank): then the error names both. An entry that a process now gone
/// left (an earlier or crashed run on the same rendezvous) is replaced.
fn claim(rendezvous: &Rendezvous, me: &Identity, address: &PeerAddress) -> Result<()> {
    let rdv_err = |e: tether_rendezvous::RendezvousError| err(ErrorClass::Init, e.to_string());
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
        };
        assert_eq!(PeerAddress::decode(&a.encode()), Some(a.clone()));
        assert_eq!(PeerAddress::decode("garbage"), None);
        let old = PeerAddress::decode("tcp=127.0.0.1:1 host=x pid=1 future=yes").unwrap();
        assert_eq!((old.start, old.shm), (None, None));
    }

    #[test]
    fn size_entries_round_trip_and_old_ones_have_no_nonce() {
        let entry = SizeEntry {
            size: 3,
            nonce: Some(0x0123_4567_89ab_cdef),
        };
        assert_eq!(entry.encode(), "3 nonce=0123456789abcdef");
        assert_eq!(SizeEntry::decode(&entry.encode()), Some(entry));
        let old = SizeEntry::decode("4\n").unwrap();
        assert_eq!((old.size, old.nonce), (4, None));
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
        let first = join(&rendezvous, &names, &me("alpha", 0, 1), &address, 7, wait).unwrap();
        // alpha:0 finishes and removes its address before beta:0 arrives.
        rendezvous.remove(&addr_key("alpha", 0)).unwrap();
        let late = join(&rendezvous, &names, &me("beta", 0, 1), &address, 9, wait).unwrap();
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
        join(&rendezvous, &names, &me("alpha", 0, 1), &mine, 1, wait).unwrap();
        assert_eq!(
            rendezvous.get(&addr_key("alpha", 0)).unwrap(),
            Some(mine.encode())
        );
        // A live one (this test process, listening elsewhere).
        let twin = PeerAddress {
            tcp: "127.0.0.1:3".into(),
            ..mine.clone()
        };
        let e = join(&rendezvous, &names, &me("alpha", 0, 1), &twin, 1, wait).unwrap_err();
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
        join(&rendezvous, &names, &me("alpha", 0, 1), &mine, 1, wait).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

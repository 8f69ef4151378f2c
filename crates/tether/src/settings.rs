//! Every setting of Tether, declared once.
//!
//! [`TABLE`] drives everything that knows about settings: parsing of the
//! `TETHER_*` environment, the hints API (`tether_hint`), `tether info`
//! and the settings table in the docs. A setting marked `hint` may also be
//! changed at run time with `tether_hint(key, value)`; the environment
//! variable is always `TETHER_<KEY>`.

use std::collections::BTreeMap;

use crate::error::{err, ErrorClass, Result};

/// What values a setting accepts.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// `0` or `1`.
    Flag,
    /// A whole number in `min..=max`.
    Number { min: u64, max: u64 },
    /// One of these words.
    Choice(&'static [&'static str]),
    /// A comma-separated, non-empty list of these words.
    ListOf(&'static [&'static str]),
    /// Free text (possibly empty).
    Text,
    /// Free text that is never shown: [`Settings::get`] (and so
    /// `tether info`, `tether_hint_get`) gives [`HIDDEN`] for it.
    Secret,
}

/// What [`Settings::get`] gives for a [`Kind::Secret`] setting that is set.
pub const HIDDEN: &str = "(set, not shown)";

/// One row of the settings table.
#[derive(Debug)]
pub struct Setting {
    /// Key without the `TETHER_` prefix, as given to `tether_hint`.
    pub key: &'static str,
    /// Default as text; empty means unset.
    pub default: &'static str,
    pub kind: Kind,
    /// Whether `tether_hint` may change it after start-up.
    pub hint: bool,
    pub meaning: &'static str,
}

/// The largest eager message any sender may use; receivers accept eager
/// payloads up to this size, so senders never need to agree on a limit.
pub const MAX_EAGER_LIMIT: u64 = 4 << 20;

/// Transports this build provides, in the default order.
pub const TRANSPORTS: &[&str] = &["shm", "tcp", "file", "hybrid", "ucx"];

/// Declares the settings table and, for each row, a typed accessor on
/// [`Settings`] named after it (`connect_timeout()` for
/// `CONNECT_TIMEOUT`) and a variant of [`Key`] (`Key::ConnectTimeout`):
/// the key is written once, in its row, and a caller that misspells a
/// setting does not compile. The accessor's type follows the row's kind
/// (`Flag`: bool, `Number`: u64, `Choice`: the word, `List`: the words,
/// `Text`: the text when set); a test checks that the two agree.
macro_rules! settings {
    ($( $name:ident as $variant:ident : $ty:ident = $row:expr; )*) => {
        /// The rows of [`TABLE`], one constant each, for the accessors.
        #[allow(non_upper_case_globals)]
        mod rows {
            use super::*;
            $( pub const $name: Setting = $row; )*
        }

        pub static TABLE: &[Setting] = &[$(rows::$name,)*];

        /// A setting, by its row of [`TABLE`]: what code that reacts to a
        /// change of a setting (`policy::ConnectionPolicy::apply_hint`)
        /// matches on, so that a misspelt key does not compile and a new
        /// row is a case to decide.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Key {
            $( $variant, )*
        }

        impl Key {
            /// Every key, in the order of [`TABLE`].
            pub const ALL: &'static [Key] = &[$(Key::$variant,)*];

            /// Its row of [`TABLE`].
            pub fn row(self) -> &'static Setting {
                &TABLE[self as usize]
            }

            /// The key of the row named `key` (as given to `tether_hint`).
            pub fn of(key: &str) -> Option<Key> {
                Key::ALL.iter().copied().find(|k| k.row().key == key)
            }
        }

        impl Settings {
            $( settings!(@accessor $name $ty); )*
        }

        /// Each row's key, its accessor's type and its kind.
        #[cfg(test)]
        fn accessor_types() -> Vec<(&'static str, &'static str, Kind)> {
            vec![$((rows::$name.key, stringify!($ty), rows::$name.kind),)*]
        }
    };
    (@accessor $name:ident Flag) => {
        #[doc = concat!("The setting `", stringify!($name), "` (its row in [`TABLE`]).")]
        pub fn $name(&self) -> bool {
            self.flag(rows::$name.key)
        }
    };
    (@accessor $name:ident Number) => {
        #[doc = concat!("The setting `", stringify!($name), "` (its row in [`TABLE`]).")]
        pub fn $name(&self) -> u64 {
            self.number(rows::$name.key)
        }
    };
    (@accessor $name:ident Choice) => {
        #[doc = concat!("The setting `", stringify!($name), "` (its row in [`TABLE`]).")]
        pub fn $name(&self) -> &str {
            self.get(rows::$name.key).unwrap_or(rows::$name.default)
        }
    };
    (@accessor $name:ident List) => {
        #[doc = concat!("The setting `", stringify!($name), "` (its row in [`TABLE`]).")]
        pub fn $name(&self) -> Vec<String> {
            self.list(rows::$name.key)
        }
    };
    (@accessor $name:ident Secret) => {
        #[doc = concat!("The secret setting `", stringify!($name), "` (its row in [`TABLE`]), when set: never show it.")]
        pub fn $name(&self) -> Option<&str> {
            self.values.get(rows::$name.key).map(|(v, _)| v.as_str()).filter(|v| !v.is_empty())
        }
    };
    (@accessor $name:ident Text) => {
        #[doc = concat!("The setting `", stringify!($name), "` (its row in [`TABLE`]), when set.")]
        pub fn $name(&self) -> Option<&str> {
            self.text(rows::$name.key)
        }
    };
}

settings! {
    rendezvous as Rendezvous: Text = Setting {
        key: "RENDEZVOUS",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "where processes find each other: a directory on a shared file system, or tcp://host:port of `tether rendezvous serve` (set by `tether run`)",
    };
    program as Program: Text = Setting {
        key: "PROGRAM",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "name of this process's program (set by `tether run`; tether_init_as overrides)",
    };
    programs as Programs: Text = Setting {
        key: "PROGRAMS",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "comma-separated names of all programs of the universe",
    };
    rank as Rank: Text = Setting {
        key: "RANK",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "rank of this process in its program; else taken from OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, MV2_COMM_WORLD_RANK, SLURM_PROCID",
    };
    size as Size: Text = Setting {
        key: "SIZE",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "number of joining processes of this program; else from the MPI launcher's environment",
    };
    run_id as RunId: Text = Setting {
        key: "RUN_ID",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "names one run (set by `tether run`, which keeps a value you set): the file transport's run directory is run-<this>, and rendezvous size entries written under another one are taken for another run's; unset: derived from universe rank 0's start-up nonce",
    };
    transports as Transports: List = Setting {
        key: "TRANSPORTS",
        default: "shm,tcp",
        kind: Kind::ListOf(TRANSPORTS),
        hint: true,
        meaning: "ordered list of transports; for each peer the first that reaches it is used (shm: peers on this host; tcp: any peer; file: any peer that shares TETHER_FILE_DIR; hybrid: shm or tcp for control and small messages, files for payloads above TETHER_HYBRID_THRESHOLD; ucx: peers that publish a UCX worker, UCX_TLS choosing the network; UCX is loaded at start, so ucx must be listed then); a change applies to peers not reached yet",
    };
    ucx_lib as UcxLib: Text = Setting {
        key: "UCX_LIB",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "the UCX library the ucx transport loads at start (a file name the dynamic loader finds, or a path); unset: libucp.so.0. UCX's own variables (UCX_TLS, UCX_NET_DEVICES) choose its network",
    };
    ucx_rma as UcxRma: Choice = Setting {
        key: "UCX_RMA",
        default: "auto",
        kind: Kind::Choice(&["auto", "on", "off"]),
        hint: false,
        meaning: "how window operations to peers reached over ucx travel: on, as UCX RMA (ucp_put_nbx/ucp_get_nbx with keys exchanged at tether_win_create, no target involvement where the network registers memory; integer atomics as ucp_atomic_op_nbx on windows whose members all reach each other so); off, as frames the target applies; auto, as UCX RMA with every peer where UCX has an RDMA network here, else with peers on this host only (over UCX's tcp its emulated RMA is slower than frames). Read at start",
    };
    host_id as HostId: Text = Setting {
        key: "HOST_ID",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "identity of this host: processes with the same one use shared memory; unset: host name and boot id (set different values to make processes of one machine act as on different hosts)",
    };
    shm_ring_bytes as ShmRingBytes: Number = Setting {
        key: "SHM_RING_BYTES",
        default: "262144",
        kind: Kind::Number {
            min: 4096,
            max: 1 << 30,
        },
        hint: false,
        meaning: "capacity of each shared-memory ring this process receives on, one per peer (rounded up to a power of two); frames up to this size minus 128 bytes (frames are padded to 64-byte lines, and one line stays free) are written in one piece, larger ones stream through",
    };
    shm_cma as ShmCma: Flag = Setting {
        key: "SHM_CMA",
        default: "1",
        kind: Kind::Flag,
        hint: false,
        meaning: "1: rendezvous data between processes of one host is copied once, straight into the receive buffer, by cross-memory attach (process_vm_writev) when the kernel allows it; 0: always through the ring",
    };
    shm_membarrier as ShmMembarrier: Flag = Setting {
        key: "SHM_MEMBARRIER",
        default: "1",
        kind: Kind::Flag,
        hint: false,
        meaning: "1: register for membarrier(2) at start, for writers that skip their fence while sleepers issue the barrier; that variant is switched off (the kernel's barrier can skip a CPU: docs/journal/2026-11-28-shm-barrier.md), so every message is followed by a fence either way; 0: do not register",
    };
    shm_split_bytes as ShmSplitBytes: Number = Setting {
        key: "SHM_SPLIT_BYTES",
        default: "131072",
        kind: Kind::Number {
            min: 0,
            max: u64::MAX,
        },
        hint: false,
        meaning: "rendezvous messages between processes of one host of at least this many bytes are copied by both at once, when cross-memory attach works: the receiver reads the second half from the send buffer (process_vm_readv) while the sender writes the first; 0: the sender copies all",
    };
    file_dir as FileDir: Text = Setting {
        key: "FILE_DIR",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "directory the file and hybrid transports exchange files in, shared by every process of the run; unset: `files` inside a directory rendezvous, else $TMPDIR/tether-files-<uid> (one host only)",
    };
    file_eager_limit as FileEagerLimit: Number = Setting {
        key: "FILE_EAGER_LIMIT",
        default: "4194304",
        kind: Kind::Number {
            min: 0,
            max: MAX_EAGER_LIMIT,
        },
        hint: false,
        meaning: "messages up to this many bytes to a peer reached through files go as one file; larger ones by rendezvous, three files (replaces TETHER_EAGER_LIMIT for those peers; see docs/journal/2026-11-24-file-hybrid.md)",
    };
    file_fsync as FileFsync: Flag = Setting {
        key: "FILE_FSYNC",
        default: "0",
        kind: Kind::Flag,
        hint: false,
        meaning: "1: every file is flushed to stable storage (fsync) before it is published; 0: the file system's own ordering is trusted",
    };
    file_notify as FileNotify: Choice = Setting {
        key: "FILE_NOTIFY",
        default: "auto",
        kind: Kind::Choice(&["auto", "inotify", "poll"]),
        hint: false,
        meaning: "how a receiver learns of new files: inotify, or polling every TETHER_FILE_POLL_US doubling up to TETHER_FILE_POLL_MAX_US while idle; auto: inotify unless the directory is on a network or parallel file system (NFS, Lustre, GPFS, CephFS, ...), whose events miss other hosts' writes",
    };
    file_poll_us as FilePollUs: Number = Setting {
        key: "FILE_POLL_US",
        default: "50",
        kind: Kind::Number {
            min: 1,
            max: 10_000_000,
        },
        hint: false,
        meaning: "shortest interval between two looks into the inbox when polling, in microseconds (used while messages flow)",
    };
    file_poll_max_us as FilePollMaxUs: Number = Setting {
        key: "FILE_POLL_MAX_US",
        default: "20000",
        kind: Kind::Number {
            min: 1,
            max: 60_000_000,
        },
        hint: false,
        meaning: "longest interval between two looks into the inbox when polling, in microseconds (reached after a quiet spell; with inotify, the safety rescan period)",
    };
    file_peer_timeout as FilePeerTimeout: Number = Setting {
        key: "FILE_PEER_TIMEOUT",
        default: "30",
        kind: Kind::Number {
            min: 2,
            max: 86_400,
        },
        hint: false,
        meaning: "seconds the file transport waits for an announced payload file, or for the replacement of a refused file, before the sender is lost with TETHER_ERR_FILE (a silent sender is TETHER_PEER_TIMEOUT's)",
    };
    hybrid_threshold as HybridThreshold: Number = Setting {
        key: "HYBRID_THRESHOLD",
        default: "1073741824",
        kind: Kind::Number {
            min: 0,
            max: u64::MAX,
        },
        hint: false,
        meaning: "with the hybrid transport, rendezvous payloads larger than this many bytes go through files, the rest through the socket transport; the default (1 GiB) is this development machine's measurement, where loopback TCP outruns files at every size: between machines whose network is slower than their shared file system, measure the crossover with benches/compare_file.py --thresholds (docs/journal/2026-11-24-file-hybrid.md)",
    };
    tcp_interface as TcpInterface: Text = Setting {
        key: "TCP_INTERFACE",
        default: "127.0.0.1",
        kind: Kind::Text,
        hint: false,
        meaning: "IP address this process listens on and publishes (across hosts: an address the peers can reach); with TETHER_RAILS, a comma-separated list: rail k listens on the (k mod count)-th address, one per NIC",
    };
    tcp_port as TcpPort: Number = Setting {
        key: "TCP_PORT",
        default: "0",
        kind: Kind::Number { min: 0, max: 65535 },
        hint: false,
        meaning: "TCP port this process listens on; 0: any free port (one process per port: set it per process, e.g. for a firewall or a port forward)",
    };
    tcp_publish as TcpPublish: Text = Setting {
        key: "TCP_PUBLISH",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "ip:port published for peers to connect to, when it differs from the one listened on (a port forward, NAT, or the fault harness's proxy, docs/RELIABILITY.md); unset: the listening address",
    };
    rails as Rails: Number = Setting {
        key: "RAILS",
        default: "1",
        kind: Kind::Number { min: 1, max: 16 },
        hint: false,
        meaning: "TCP connections (rails) per peer: control frames and small messages stay on one of them, rendezvous data from TETHER_RAIL_THRESHOLD bytes on is striped over all in chunks of TETHER_RAIL_CHUNK (docs/transports.md); a rail that fails is taken out and its chunks go again on the others (the home rail's loss is the peer's); a start-up setting, since each rail's listener is published at start; a peer with fewer rails is reached on as many as both have",
    };
    rail_policy as RailPolicy: Choice = Setting {
        key: "RAIL_POLICY",
        default: "round_robin",
        kind: Kind::Choice(&["round_robin", "least_used"]),
        hint: true,
        meaning: "which rail takes each chunk: round_robin, each rail in turn (cheapest; best on equal rails); least_used, the rail with the fewest bytes waiting to be written (balances unequal rails); either way a pair's ordered frames and small messages stay on its home rail, (a + b) mod rails for universe ranks a and b, so a process's peers are dealt round-robin over its rails",
    };
    rail_threshold as RailThreshold: Number = Setting {
        key: "RAIL_THRESHOLD",
        default: "1048576",
        kind: Kind::Number {
            min: 1,
            max: u64::MAX,
        },
        hint: true,
        meaning: "with TETHER_RAILS above 1, rendezvous data of at least this many bytes is striped over the rails; smaller data goes whole on the peer's home rail (applies to peers reached from then on)",
    };
    rail_chunk as RailChunk: Number = Setting {
        key: "RAIL_CHUNK",
        default: "524288",
        kind: Kind::Number {
            min: 4096,
            max: 1 << 30,
        },
        hint: true,
        meaning: "bytes per chunk of striped data: smaller chunks balance unequal rails more finely, larger ones cost fewer frames (applies to peers reached from then on)",
    };
    eager_limit as EagerLimit: Number = Setting {
        key: "EAGER_LIMIT",
        default: "131072",
        kind: Kind::Number {
            min: 0,
            max: MAX_EAGER_LIMIT,
        },
        hint: true,
        meaning: "messages up to this many bytes are sent eagerly; larger ones by rendezvous (see docs/journal/2026-11-21-p2p-tcp.md for how the default was chosen)",
    };
    connect as Connect: Choice = Setting {
        key: "CONNECT",
        default: "lazy",
        kind: Kind::Choice(&["lazy", "eager"]),
        hint: true,
        meaning: "lazy: connect to a peer on first use; eager: connect to every peer at start-up",
    };
    in_kernel as InKernel: Flag = Setting {
        key: "IN_KERNEL",
        default: "0",
        kind: Kind::Flag,
        hint: true,
        meaning: "1 while the program is in a communication kernel: waits spin longer instead of sleeping, the peers used inside keep their links whatever TETHER_MAX_LINKS says, and they are connected at once the next time a kernel starts",
    };
    max_links as MaxLinks: Number = Setting {
        key: "MAX_LINKS",
        default: "0",
        kind: Kind::Number {
            min: 0,
            max: 1_000_000,
        },
        hint: true,
        meaning: "at most this many dedicated links per process (0: no cap): beyond it, the least recently used idle ones that no IN_KERNEL region used are retired (TCP: closed through a goodbye both sides agree on, nothing lost or reordered, and dialled again on demand; shared memory: the ring's pages given back, to come back as it is written) (docs/hints.md); UCX endpoints are not capped",
    };
    rma_direct_bytes as RmaDirectBytes: Number = Setting {
        key: "RMA_DIRECT_BYTES",
        default: "16384",
        kind: Kind::Number {
            min: 0,
            max: u64::MAX,
        },
        hint: false,
        meaning: "one-sided puts and gets of at least this many bytes to a process on this host go straight into or out of its window by cross-memory attach, without the target (0: never); smaller ones go as frames the target's progress applies",
    };
    progress_thread as ProgressThread: Flag = Setting {
        key: "PROGRESS_THREAD",
        default: "0",
        kind: Kind::Flag,
        hint: true,
        meaning: "1: a background thread makes progress every TETHER_PROGRESS_INTERVAL_US while the program computes, so that one-sided operations and active messages aimed at this process are served without it calling Tether (handlers may then run on that thread); costs CPU (about 13% of a core at the default interval) and the C API lock's fast path",
    };
    progress_interval_us as ProgressIntervalUs: Number = Setting {
        key: "PROGRESS_INTERVAL_US",
        default: "100",
        kind: Kind::Number {
            min: 1,
            max: 1_000_000,
        },
        hint: true,
        meaning: "how long the progress thread (TETHER_PROGRESS_THREAD) sleeps between rounds of progress, in microseconds: the longest a remote access waits for a target that computes",
    };
    wait as Wait: Choice = Setting {
        key: "WAIT",
        default: "auto",
        kind: Kind::Choice(&["auto", "spin", "yield"]),
        hint: true,
        meaning: "how a wait polls before it sleeps: `spin` busy-polls (fastest where every process has a core), `yield` gives the core away between polls (sched_yield), so that a process it waits for can run on it; `auto` yields when this host runs more processes of the universe than this process may use CPUs",
    };
    local_processes as LocalProcesses: Number = Setting {
        key: "LOCAL_PROCESSES",
        default: "0",
        kind: Kind::Number {
            min: 0,
            max: 1_000_000,
        },
        hint: false,
        meaning: "processes of the universe on this host, when known (set by `tether run`; 0: unknown); `TETHER_WAIT=auto` also counts the peers found through shared memory",
    };
    poll_spin_us as PollSpinUs: Number = Setting {
        key: "POLL_SPIN_US",
        default: "50",
        kind: Kind::Number {
            min: 0,
            max: 10_000_000,
        },
        hint: true,
        meaning: "longest time a wait polls before it sleeps in the kernel, in microseconds (adapts down when polling does not pay, e.g. more processes than cores)",
    };
    trace as Trace: Text = Setting {
        key: "TRACE",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "directory to write this process's trace into at finalize (<program>.<rank>.jsonl: its sends, receives, waits, collectives and field steps, with its clock's offset to universe rank 0's), for `tether trace merge|summary` (docs/tracing.md); unset: no trace",
    };
    trace_clock_shift_ns as TraceClockShiftNs: Text = Setting {
        key: "TRACE_CLOCK_SHIFT_NS",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "for tests of trace alignment: nanoseconds added to this process's trace clock (and to the clock universe rank 0 answers with), as if its host's clock were off",
    };
    stats as Stats: Flag = Setting {
        key: "STATS",
        default: "0",
        kind: Kind::Flag,
        hint: false,
        meaning: "1: print this process's counters (messages and bytes per peer and transport, eager/rendezvous sends, time blocked, unexpected-queue depth; the names of tether_stats_entry) on standard error at finalize",
    };
    field_queue as FieldQueue: Number = Setting {
        key: "FIELD_QUEUE",
        default: "2",
        kind: Kind::Number {
            min: 1,
            max: 1_000_000,
        },
        hint: true,
        meaning: "steps a field's producer may run ahead of its slowest consumer program before put blocks; read at tether_field_create",
    };
    connect_timeout as ConnectTimeout: Number = Setting {
        key: "CONNECT_TIMEOUT",
        default: "30",
        kind: Kind::Number {
            min: 1,
            max: 86_400,
        },
        hint: true,
        meaning: "seconds to wait for a program to join or a peer to accept a connection before TETHER_ERR_TIMEOUT",
    };
    handshake_timeout as HandshakeTimeout: Number = Setting {
        key: "HANDSHAKE_TIMEOUT",
        default: "10",
        kind: Kind::Number { min: 1, max: 3600 },
        hint: true,
        meaning: "seconds an accepted connection may take to complete its handshake before it is dropped",
    };
    peer_timeout as PeerTimeout: Number = Setting {
        key: "PEER_TIMEOUT",
        default: "30",
        kind: Kind::Number {
            min: 0,
            max: 86_400,
        },
        hint: false,
        meaning: "seconds a peer this process depends on may stay silent before it is lost with TETHER_ERR_PEER_LOST (a stopped process, a vanished host, a network that drops everything): a thread in each process answers heartbeats every quarter of this, also while its program computes without calling Tether (file-transport peers: their heartbeat file stops changing); the default survives file-system stalls and network reconvergence of tens of seconds (docs/RELIABILITY.md); 0: this process gives nobody up (it still answers)",
    };
    finalize_timeout as FinalizeTimeout: Number = Setting {
        key: "FINALIZE_TIMEOUT",
        default: "60",
        kind: Kind::Number {
            min: 0,
            max: 86_400,
        },
        hint: true,
        meaning: "seconds tether_finalize waits for queued data to leave and for connected peers to say goodbye",
    };
    output_relay as OutputRelay: Text = Setting {
        key: "OUTPUT_RELAY",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "set by `tether run` for a program started without -n (through its own MPI launcher): the abstract Unix socket (@name) to which each process connects its stdout and stderr at init, so that its lines are labelled [name:rank]",
    };
    launcher as Launcher: Text = Setting {
        key: "LAUNCHER",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "path of the `tether` launcher that `python -m tether run` uses (else `tether` on PATH, else build/bin/tether of the checkout the Python package was installed from); the library itself does not read it",
    };
    log_level as LogLevel: Choice = Setting {
        key: "LOG_LEVEL",
        default: "warn",
        kind: Kind::Choice(&["off", "error", "warn", "info", "debug", "trace"]),
        hint: false,
        meaning: "how much Tether logs (to stderr, or TETHER_LOG_FILE)",
    };
    key as RunKey: Secret = Setting {
        key: "KEY",
        default: "",
        kind: Kind::Secret,
        hint: false,
        meaning: "the run's secret key (at least 16 bytes; `tether run` sets a fresh one for every run): with it, every link, rendezvous entry and file is authenticated and peers without it are refused; never shown. Separately launched programs use TETHER_KEY_FILE instead",
    };
    key_file as RunKeyFile: Text = Setting {
        key: "KEY_FILE",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "file holding the run's secret key (make one with `tether key new FILE`); refused unless only its owner, this process's user, may read it (mode 0600). Ignored when TETHER_KEY is set",
    };
    log_file as LogFile: Text = Setting {
        key: "LOG_FILE",
        default: "",
        kind: Kind::Text,
        hint: false,
        meaning: "file to append log lines to instead of stderr; %r in the name becomes the universe rank",
    };
}

fn row(key: &str) -> Option<&'static Setting> {
    Key::of(key).map(Key::row)
}

/// Checks `value` against the kind of setting `key`.
pub fn validate(key: &str, value: &str) -> Result<()> {
    let setting = row(key).ok_or_else(|| {
        err(
            ErrorClass::UnknownHint,
            format!("unknown setting {key:?}; known: {}", known_keys()),
        )
    })?;
    let bad = |expected: String| {
        err(
            ErrorClass::HintValue,
            format!("TETHER_{key}={value:?} is not valid: expected {expected}"),
        )
    };
    match setting.kind {
        Kind::Flag if value == "0" || value == "1" => Ok(()),
        Kind::Flag => Err(bad("0 or 1".into())),
        Kind::Number { min, max } => match value.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(()),
            _ => Err(bad(format!("a whole number from {min} to {max}"))),
        },
        Kind::Choice(words) if words.contains(&value) => Ok(()),
        Kind::Choice(words) => Err(bad(format!("one of {}", words.join(", ")))),
        Kind::ListOf(words) => {
            let items: Vec<&str> = value.split(',').map(str::trim).collect();
            if !value.trim().is_empty() && items.iter().all(|i| words.contains(i)) {
                Ok(())
            } else {
                Err(bad(format!(
                    "a comma-separated list of {}",
                    words.join(", ")
                )))
            }
        }
        Kind::Text | Kind::Secret => Ok(()),
    }
}

fn known_keys() -> String {
    TABLE.iter().map(|s| s.key).collect::<Vec<_>>().join(", ")
}

/// Where an effective value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Default,
    Environment,
    Hint,
}

/// The effective settings of one process.
#[derive(Debug, Clone)]
pub struct Settings {
    values: BTreeMap<&'static str, (String, Origin)>,
}

impl Settings {
    /// Reads every `TETHER_*` variable from `vars`. Invalid values of known
    /// settings are errors; unknown `TETHER_*` names are returned as
    /// warnings (a misspelt setting must not pass silently).
    pub fn from_vars<I>(vars: I) -> Result<(Settings, Vec<String>)>
    where
        I: IntoIterator<Item = (String, String)>,
    {
        let mut values: BTreeMap<&'static str, (String, Origin)> = TABLE
            .iter()
            .map(|s| (s.key, (s.default.to_string(), Origin::Default)))
            .collect();
        let mut warnings = Vec::new();
        for (name, value) in vars {
            let Some(key) = name.strip_prefix("TETHER_") else {
                continue;
            };
            match row(key) {
                Some(setting) => {
                    validate(key, &value).map_err(|e| err(ErrorClass::Init, e.message))?;
                    values.insert(setting.key, (value, Origin::Environment));
                }
                None => warnings.push(format!(
                    "unknown setting {name} ignored (see `tether info` for the known ones)"
                )),
            }
        }
        Ok((Settings { values }, warnings))
    }

    /// The settings of this process's environment.
    pub fn from_env() -> Result<(Settings, Vec<String>)> {
        Settings::from_vars(std::env::vars())
    }

    /// Sets a hint at run time and returns which setting changed: unknown
    /// keys and settings that cannot change after start-up give
    /// `UnknownHint`, bad values `HintValue`.
    pub fn set_hint(&mut self, key: &str, value: &str) -> Result<Key> {
        validate(key, value)?;
        let hint = Key::of(key).expect("validated");
        let setting = hint.row();
        if !setting.hint {
            return Err(err(
                ErrorClass::UnknownHint,
                format!(
                    "{key} is a start-up setting, not a hint: set TETHER_{key} in the environment"
                ),
            ));
        }
        self.values
            .insert(setting.key, (value.to_string(), Origin::Hint));
        Ok(hint)
    }

    /// The effective value of `key` (empty when unset), for what walks
    /// the table or takes a key from the user (`tether info`,
    /// `tether_hint_get`); code reads a setting through its accessor.
    /// A [`Kind::Secret`] setting that is set gives [`HIDDEN`].
    pub fn get(&self, key: &str) -> Option<&str> {
        let value = self.values.get(key).map(|(v, _)| v.as_str())?;
        let secret = matches!(row(key).map(|r| r.kind), Some(Kind::Secret));
        Some(if secret && !value.is_empty() {
            HIDDEN
        } else {
            value
        })
    }

    pub fn origin(&self, key: &str) -> Option<Origin> {
        self.values.get(key).map(|(_, o)| *o)
    }

    /// A value that is set, or `None` when empty.
    fn text(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.is_empty())
    }

    /// A number setting (validated on the way in).
    fn number(&self, key: &str) -> u64 {
        self.get(key).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    fn flag(&self, key: &str) -> bool {
        self.get(key) == Some("1")
    }

    fn list(&self, key: &str) -> Vec<String> {
        self.get(key)
            .unwrap_or("")
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_environment_and_hints() {
        let (mut s, warnings) =
            Settings::from_vars(vars(&[("TETHER_EAGER_LIMIT", "1024"), ("PATH", "/bin")])).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(s.eager_limit(), 1024);
        assert_eq!(s.origin("EAGER_LIMIT"), Some(Origin::Environment));
        assert_eq!(s.connect(), "lazy");
        s.set_hint("IN_KERNEL", "1").unwrap();
        assert!(s.in_kernel());
        assert_eq!(s.origin("IN_KERNEL"), Some(Origin::Hint));
    }

    #[test]
    fn unknown_names_warn_and_bad_values_fail() {
        let (_, warnings) = Settings::from_vars(vars(&[("TETHER_EAGER_LIMT", "1")])).unwrap();
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("TETHER_EAGER_LIMT"));
        let e = Settings::from_vars(vars(&[("TETHER_CONNECT", "sometimes")])).unwrap_err();
        assert_eq!(e.class, ErrorClass::Init);
        assert!(e.message.contains("lazy, eager"), "{}", e.message);
    }

    #[test]
    fn hints_are_checked() {
        let (mut s, _) = Settings::from_vars(Vec::new()).unwrap();
        assert_eq!(
            s.set_hint("NO_SUCH", "1").unwrap_err().class,
            ErrorClass::UnknownHint
        );
        assert_eq!(
            s.set_hint("IN_KERNEL", "2").unwrap_err().class,
            ErrorClass::HintValue
        );
        assert_eq!(
            s.set_hint("EAGER_LIMIT", "99999999999").unwrap_err().class,
            ErrorClass::HintValue
        );
        assert_eq!(
            s.set_hint("TRANSPORTS", "tcp,carrier-pigeon")
                .unwrap_err()
                .class,
            ErrorClass::HintValue
        );
        assert_eq!(
            s.set_hint("RENDEZVOUS", "/tmp").unwrap_err().class,
            ErrorClass::UnknownHint
        );
        s.set_hint("TRANSPORTS", "tcp").unwrap();
        s.set_hint("TRANSPORTS", "shm,tcp").unwrap();
    }

    #[test]
    fn keys_name_their_rows() {
        assert_eq!(Key::ALL.len(), TABLE.len());
        for (key, row) in Key::ALL.iter().zip(TABLE) {
            assert!(std::ptr::eq(key.row(), row));
            assert_eq!(Key::of(row.key), Some(*key));
        }
        assert_eq!(Key::ConnectTimeout.row().key, "CONNECT_TIMEOUT");
        assert_eq!(Key::of("CONNECT_TIMEOUTS"), None);
        let (mut s, _) = Settings::from_vars(Vec::new()).unwrap();
        assert_eq!(s.set_hint("IN_KERNEL", "1").unwrap(), Key::InKernel);
    }

    #[test]
    fn accessors_have_the_type_of_their_row() {
        for (key, accessor, kind) in accessor_types() {
            let agrees = matches!(
                (accessor, kind),
                ("Flag", Kind::Flag)
                    | ("Number", Kind::Number { .. })
                    | ("Choice", Kind::Choice(_))
                    | ("List", Kind::ListOf(_))
                    | ("Text", Kind::Text)
                    | ("Secret", Kind::Secret)
            );
            assert!(agrees, "{key}: a {accessor} accessor for {kind:?}");
        }
    }
}

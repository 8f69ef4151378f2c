//! The `file` transport, and the file half of `hybrid`: coupling through a
//! directory that both sides see (a shared or parallel file system), for
//! machines with no network route between them.
//!
//! `file`: every engine frame becomes one file in the receiver's inbox,
//! named by sender and sequence number (`names.rs`), carrying magic,
//! version, run id, sender, receiver, sequence number, length and CRC32C
//! checksums (`format.rs`), published whole by a no-replace rename
//! (`io.rs`); rendezvous data above 4 MiB becomes several such files, its
//! parts, each published as soon as it is written (`chunks.rs`). The
//! receiver consumes each sender's files strictly in sequence order, so
//! MPI's order holds; rendezvous data lands straight in the posted receive
//! buffer, part by part as the parts appear. It learns of new files by inotify on local
//! file systems and by polling with backoff elsewhere (`watch.rs`), and of
//! lost peers by their heartbeat files (`heartbeat.rs`).
//!
//! `hybrid`: frames travel on the socket transport; the payload of a
//! rendezvous `Data` frame larger than `TETHER_HYBRID_THRESHOLD` is written
//! to a payload file first, and the `Data` frame that follows on the socket
//! carries [`FLAG_PAYLOAD_IN_FILE`] instead of the bytes. The receiver
//! reads that file into the granted buffer ([`FileTransport::add_payload`]).
//!
//! A file that fails any check is never delivered: it is moved aside to
//! `<name>.rejected-<n>` and reported as `TETHER_ERR_FILE` naming the path
//! and the problem. Because files are never overwritten, a stray file on
//! the name of a real message delays that message only until the
//! receiver has moved the stray aside; if the real file does not follow
//! within `TETHER_FILE_PEER_TIMEOUT`, the peer is lost with that error.

mod chunks;
mod deliver;
pub mod format;
mod heartbeat;
mod io;
mod names;
mod parts;
mod watch;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use tether_proto::wire::FLAG_PAYLOAD_IN_FILE;
use tether_proto::{
    FileData, FrameHeader, FrameKind, PayloadSink, Transmit, TransmitPayload, WireError,
};

use crate::error::{err, Error, ErrorClass};
use crate::settings::MAX_EAGER_LIMIT;
use crate::transport::api::{Caps, NoResource, PayloadFiles, Transport};
use crate::transport::events::Events;
use crate::transport::reactor::FILE_TOKENS;
use crate::universe::Universe;
use deliver::Placement;
use format::{encode_prefix, Envelope};
use heartbeat::{Heartbeat, Liveness, Verdict};
use io::{Checksum, Found};
pub use names::is_safe_run_name;
use names::{classify, Entry, Layout, REJECTED, TEMP_PREFIX};
use parts::Incoming;
pub use watch::NotifyMode;
use watch::Watcher;

/// The reactor token of the inbox's inotify descriptor.
const TOKEN: Token = FILE_TOKENS.token(0);
/// A leftover temporary file older than this is reported once.
const STALE_TEMPORARY: Duration = Duration::from_secs(60);

/// Settings of the transport.
#[derive(Debug, Clone)]
pub struct FileConfig {
    /// `TETHER_FILE_DIR`: the directory shared by every process of the run.
    pub root: PathBuf,
    /// The run's directory name, the same in every process.
    pub run_name: String,
    /// The run id every file carries: unique per run.
    pub run_id: u64,
    pub fsync: bool,
    pub notify: NotifyMode,
    pub poll_min: Duration,
    pub poll_max: Duration,
    /// `TETHER_FILE_PEER_TIMEOUT`: how long an announced payload file,
    /// or the replacement of a refused one, is waited for.
    pub peer_timeout: Duration,
    /// `TETHER_PEER_TIMEOUT`: how long a peer's heartbeat file may stay
    /// unchanged (zero: forever).
    pub silence: Duration,
    pub connect_timeout: Duration,
    /// `TETHER_FILE_EAGER_LIMIT`: the eager limit of peers reached by file.
    pub eager_limit: u64,
    /// Whether whole frames may arrive by file (`file` is a transport of
    /// this run), which needs the inbox watched and a heartbeat; `hybrid`
    /// payloads alone need neither.
    pub frames: bool,
    /// The run's key: every file written is sealed with it, and only
    /// files sealed with it are consumed (`format.rs`).
    pub key: Option<Arc<tether_auth::Key>>,
}

/// A message file of `from` that passed the file checks, on its way to
/// the engine: its frame, the open file and where it lies.
#[derive(Clone, Copy)]
struct Arrival<'a> {
    from: u32,
    frame: &'a FrameHeader,
    opened: &'a io::Opened,
    path: &'a Path,
}

struct Peer {
    send_seq: u64,
    recv_seq: u64,
    /// Written files whose final name is still taken, in order.
    unplaced: VecDeque<(PathBuf, PathBuf)>,
    /// The payload whose parts are arriving (`chunks.rs`), if any.
    incoming: Option<Incoming>,
    /// Where the next file stands with the router (`deliver.rs`).
    placement: Placement,
    liveness: Liveness,
    bye_sent: bool,
    bye_received: bool,
    dead: bool,
}

struct Waiting {
    payload: FileData,
    since: Instant,
}

/// What only a process that receives whole frames by file has.
struct Receiving {
    watcher: Watcher,
    _heartbeat: Heartbeat,
}

impl Receiving {
    /// Watches the inbox (its inotify descriptor in the reactor)
    /// and starts the heartbeat.
    fn start(
        layout: &Layout,
        config: &FileConfig,
        registry: &Registry,
    ) -> Result<Receiving, Error> {
        let inbox = layout.inbox(layout.me);
        let watcher = Watcher::new(&inbox, config.notify, config.poll_min, config.poll_max);
        if let Some(fd) = watcher.fd() {
            registry
                .register(&mut SourceFd(&fd), TOKEN, Interest::READABLE)
                .map_err(|e| file_error(format!("cannot watch {}: {e}", inbox.display())))?;
        }
        let path = layout.heartbeat(layout.me);
        let heartbeat =
            Heartbeat::start(path.clone(), heartbeat::period(config.silence)).map_err(|e| {
                file_error(format!(
                    "cannot write the heartbeat {}: {e}",
                    path.display()
                ))
            })?;
        Ok(Receiving {
            watcher,
            _heartbeat: heartbeat,
        })
    }
}

pub struct FileTransport {
    layout: Layout,
    run: u64,
    config: FileConfig,
    universe: Arc<Universe>,
    peers: HashMap<u32, Peer>,
    inboxes_made: HashSet<u32>,
    temporaries: u64,
    receiving: Option<Receiving>,
    payloads: Vec<Waiting>,
    warned: HashSet<PathBuf>,
    next_liveness: Instant,
    /// Peers lost without a goodbye by file, whichever transport reported
    /// it: the files this process wrote for them are removed as it leaves.
    lost: HashSet<u32>,
    /// What happened since the router last drained it.
    pub events: Events,
}

/// Creates `dir` and its missing parents readable by this user only
/// (the run's files are nobody else's business).
fn private_dirs(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

fn file_error(message: String) -> Error {
    err(ErrorClass::File, message)
}

impl FileTransport {
    /// Creates this process's inbox in the run's directory and, when
    /// frames arrive by file, starts watching it and the heartbeat.
    pub fn new(
        config: FileConfig,
        universe: Arc<Universe>,
        registry: &Registry,
    ) -> Result<FileTransport, Error> {
        let me = universe.my_universe_rank();
        let layout = Layout::new(&config.root, &config.run_name, me);
        let inbox = layout.inbox(me);
        private_dirs(&inbox).map_err(|e| {
            file_error(format!(
                "cannot create the inbox {} (TETHER_FILE_DIR={}): {e}",
                inbox.display(),
                config.root.display()
            ))
        })?;
        warn_about_other_runs(&config.root, &layout.run_dir);
        let receiving = if config.frames {
            Some(Receiving::start(&layout, &config, registry)?)
        } else {
            None
        };
        tracing::info!(
            "file transport in {} ({})",
            layout.run_dir.display(),
            match &receiving {
                Some(r) if r.watcher.uses_events() => "inotify",
                Some(_) => "polling",
                None => "hybrid payloads only",
            }
        );
        let next_liveness = Instant::now() + heartbeat::period(config.silence);
        Ok(FileTransport {
            run: config.run_id,
            layout,
            config,
            universe,
            peers: HashMap::new(),
            inboxes_made: HashSet::from([me]),
            temporaries: 0,
            receiving,
            payloads: Vec::new(),
            warned: HashSet::new(),
            next_liveness,
            lost: HashSet::new(),
            events: Events::default(),
        })
    }

    fn me(&self) -> u32 {
        self.layout.me
    }

    /// Starts receiving whole frames by file, if not yet (`file` was
    /// added to the transports after hybrid created this transport).
    pub fn receive_frames(&mut self, registry: &Registry) -> Result<(), Error> {
        if self.receiving.is_none() {
            self.config.frames = true;
            self.receiving = Some(Receiving::start(&self.layout, &self.config, registry)?);
        }
        Ok(())
    }

    fn peer(&mut self, peer: u32) -> &mut Peer {
        self.peers.entry(peer).or_insert_with(|| Peer {
            send_seq: 0,
            recv_seq: 0,
            unplaced: VecDeque::new(),
            incoming: None,
            placement: Placement::Unreported,
            liveness: Liveness::new(Instant::now()),
            bye_sent: false,
            bye_received: false,
            dead: false,
        })
    }

    /// Writes the payload of a hybrid `Data` frame to its file
    /// ([`PayloadFiles::send_payload`]).
    fn write_payload(&mut self, mut t: Transmit) -> Transmit {
        pack(&mut t);
        let peer = t.peer;
        let receiver_req = t.header.receiver_req;
        let target = self.layout.outgoing_payload(peer, receiver_req);
        let mut in_file = t.header;
        in_file.seq = 0;
        in_file.payload_len = t.payload.len() as u64;
        // SAFETY: as in `send`, the payload outlives this write.
        let bytes = unsafe { payload_bytes(&t.payload) };
        let written = self
            .write(
                peer,
                receiver_req,
                &in_file,
                bytes,
                Checksum::Beside,
                &target,
            )
            .and_then(|temp| {
                if io::place(&temp, &target)? {
                    Ok(())
                } else {
                    let _ = std::fs::remove_file(&temp);
                    Err(std::io::Error::other("a file of that name already exists"))
                }
            });
        if let Err(e) = written {
            tracing::warn!(
                "cannot write the payload for {} to {} ({e}): it goes on the socket instead",
                self.universe.describe(peer),
                target.display()
            );
            return t;
        }
        if let Some(req) = t.completes {
            self.events.sent.push(req);
        }
        let mut header = t.header;
        header.flags |= FLAG_PAYLOAD_IN_FILE;
        header.payload_len = 0;
        Transmit {
            peer,
            header,
            payload: TransmitPayload::None,
            completes: None,
            copy_if_blocked: false,
        }
    }

    /// Writes a file for `to` under a temporary name; returns that name.
    fn write(
        &mut self,
        to: u32,
        seq: u64,
        header: &FrameHeader,
        bytes: &[u8],
        checksum: Checksum,
        target: &Path,
    ) -> std::io::Result<PathBuf> {
        if self.inboxes_made.insert(to) {
            private_dirs(&self.layout.inbox(to))?;
        }
        let temp = self.layout.temporary(to, self.temporaries);
        self.temporaries += 1;
        let envelope = Envelope {
            run: self.run,
            sender: self.me(),
            receiver: to,
            seq,
        };
        let key = self.config.key.as_deref();
        io::write_temp(&temp, bytes, checksum, self.config.fsync, key, |crc| {
            encode_prefix(&envelope, header, bytes.len() as u64, crc, key.is_some())
        })
        .map_err(|e| std::io::Error::new(e.kind(), format!("{} ({e})", target.display())))?;
        Ok(temp)
    }

    /// Gives waiting files for `peer` their final names, in order, as far
    /// as the names are free.
    fn place_waiting(&mut self, peer: u32) -> bool {
        let mut moved = false;
        let Some(state) = self.peers.get_mut(&peer) else {
            return false;
        };
        while let Some((temp, target)) = state.unplaced.front() {
            match io::place(temp, target) {
                Ok(true) => {
                    state.unplaced.pop_front();
                    moved = true;
                }
                Ok(false) => {
                    if self.warned.insert(target.clone()) {
                        tracing::warn!(
                            "{} is taken by a file this process did not write; the message waits until the receiver moves it aside",
                            target.display()
                        );
                    }
                    break;
                }
                Err(e) => {
                    let message = format!("cannot publish {}: {e}", target.display());
                    self.lose(peer, file_error(message));
                    break;
                }
            }
        }
        moved
    }

    /// epoll reported the inbox's inotify descriptor.
    pub fn notify(&mut self) {
        if let Some(r) = self.receiving.as_mut() {
            r.watcher.notify();
        }
    }

    /// Places waiting files, reads the inbox when due, reads announced
    /// payloads, and checks the peers' heartbeats when due. Returns
    /// whether anything moved.
    pub fn poll(&mut self) -> bool {
        let mut moved = false;
        let blocked: Vec<u32> = self
            .peers
            .iter()
            .filter(|(_, p)| !p.unplaced.is_empty() && !p.dead)
            .map(|(peer, _)| *peer)
            .collect();
        for peer in blocked {
            moved |= self.place_waiting(peer);
        }
        let now = Instant::now();
        if self.receiving.as_mut().is_some_and(|r| r.watcher.due(now)) {
            let found = self.look();
            if let Some(r) = self.receiving.as_mut() {
                r.watcher.looked(Instant::now(), found);
            }
            moved |= found;
        }
        if !self.payloads.is_empty() {
            moved |= self.read_payloads();
        }
        if now >= self.next_liveness {
            self.next_liveness = now + heartbeat::period(self.config.silence);
            self.check_peers(now);
        }
        moved
    }

    /// The latest time the runtime may sleep until.
    pub fn wake_by(&self) -> Option<Instant> {
        let mut by = self.receiving.as_ref().map(|r| r.watcher.next_look());
        if self.receiving.is_some() || !self.payloads.is_empty() {
            by = Some(by.map_or(self.next_liveness, |b| b.min(self.next_liveness)));
        }
        let busy = !self.payloads.is_empty()
            || self
                .peers
                .values()
                .any(|p| !p.unplaced.is_empty() && !p.dead);
        if busy {
            let soon = Instant::now() + self.config.poll_min;
            by = Some(by.map_or(soon, |b| b.min(soon)));
        }
        by
    }

    /// Reads the inbox: consumes every sender's files that are next in
    /// sequence, refuses impostors, reports strays once.
    fn look(&mut self) -> bool {
        let inbox = self.layout.inbox(self.me());
        let entries = match std::fs::read_dir(&inbox) {
            Ok(entries) => entries,
            Err(e) => {
                if self.warned.insert(inbox.clone()) {
                    tracing::warn!("cannot read the inbox {}: {e}", inbox.display());
                }
                return false;
            }
        };
        let mut senders = Vec::new();
        let mut moved = false;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                self.stray(entry.path(), "its name is not UTF-8");
                continue;
            };
            match classify(name) {
                Entry::Message { from, seq } => {
                    if from >= self.universe.size() || from == self.me() {
                        let what = format!(
                            "it names sender {from}, not another process of this universe of {}",
                            self.universe.size()
                        );
                        moved |= self.refuse_stray(&entry.path(), what);
                    } else if seq < self.peers.get(&from).map_or(0, |p| p.recv_seq) {
                        let what = format!("message {seq} of that sender was consumed already");
                        moved |= self.refuse_stray(&entry.path(), what);
                    } else if !senders.contains(&from) {
                        senders.push(from);
                    }
                }
                Entry::Temporary => {
                    let old = entry
                        .metadata()
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age >= STALE_TEMPORARY);
                    if old {
                        self.stray(
                            entry.path(),
                            "a temporary file left by a writer that stopped (killed?); it is never read",
                        );
                    }
                }
                Entry::Unknown => self.stray(entry.path(), "not a file of this transport"),
                Entry::Payload | Entry::Rejected => {}
            }
        }
        for from in senders {
            while self.consume(from) {
                moved = true;
            }
        }
        moved
    }

    fn stray(&mut self, path: PathBuf, why: &str) {
        if self.warned.insert(path.clone()) {
            tracing::warn!("ignoring {}: {why}", path.display());
        }
    }

    /// Moves aside a message file that cannot be the next of any sender.
    fn refuse_stray(&mut self, path: &Path, what: String) -> bool {
        let error = file_error(format!("refused {}: {what}", path.display()));
        match io::reject(path) {
            Ok(aside) => {
                tracing::error!("{error}; moved to {}", aside.display());
                true
            }
            Err(e) => {
                if self.warned.insert(path.to_path_buf()) {
                    tracing::error!("{error}; cannot move it aside: {e}");
                }
                false
            }
        }
    }

    /// Consumes the next file of `from` if it is there and sound. Returns
    /// whether one was consumed.
    fn consume(&mut self, from: u32) -> bool {
        // A peer gets an entry (liveness checks, a goodbye owed) only once
        // a sound file of this run came from it: a stray name is no peer.
        let (seq, dead) = self
            .peers
            .get(&from)
            .map_or((0, false), |p| (p.recv_seq, p.dead));
        if dead {
            return false;
        }
        let path = self.layout.incoming_message(from, seq);
        let expected = Envelope {
            run: self.run,
            sender: from,
            receiver: self.me(),
            seq,
        };
        let opened = match io::open(&path, &expected, self.config.key.as_ref()) {
            Ok(Found::Missing) => return false,
            Ok(Found::Bad(problem)) => {
                self.refuse(from, seq, &path, problem.to_string());
                return false;
            }
            Ok(Found::Good(opened)) => opened,
            Err(e) => {
                self.refuse(from, seq, &path, format!("cannot read it: {e}"));
                return false;
            }
        };
        let frame = match FrameHeader::decode(&opened.prefix.frame, seq, MAX_EAGER_LIMIT) {
            Ok(frame) if frame.payload_len == opened.prefix.payload_len && frame.flags == 0 => {
                frame
            }
            Ok(_) => {
                let what = "its frame header disagrees with the file header".to_string();
                self.refuse(from, seq, &path, what);
                return false;
            }
            Err(e) => {
                let what = format!("it holds a bad frame: {e}");
                self.refuse(from, seq, &path, what);
                return false;
            }
        };
        let arrival = Arrival {
            from,
            frame: &frame,
            opened: &opened,
            path: &path,
        };
        let delivered = self.deliver(arrival);
        // Closed before it is removed: on NFS, removing an open file leaves
        // a `.nfs*` file behind.
        drop(opened);
        if !delivered {
            return false;
        }
        if let Err(e) = std::fs::remove_file(&path) {
            tracing::warn!("cannot remove consumed {}: {e}", path.display());
        }
        let state = self.peer(from);
        state.recv_seq += 1;
        if let Some(r) = self.receiving.as_mut() {
            r.watcher.activity(Instant::now());
        }
        true
    }

    /// Reads `arrival`'s payload into `dst` and verifies it with
    /// `checksum`; a file that fails is refused (`refuse`) and false
    /// returned.
    fn read_arrival(&mut self, arrival: Arrival<'_>, dst: &mut [u8], checksum: Checksum) -> bool {
        match arrival.opened.read_checked(dst, checksum) {
            Ok(()) => true,
            Err(problem) => {
                self.refuse(arrival.from, arrival.frame.seq, arrival.path, problem);
                false
            }
        }
    }

    /// A file at the place of `from`'s next message failed its checks: it
    /// is moved aside and reported, and the real message, which can never
    /// have replaced it, is published under the freed name. Whether the
    /// sender is still there is for its heartbeat to tell.
    fn refuse(&mut self, from: u32, seq: u64, path: &Path, what: String) {
        let who = self.universe.describe(from);
        let error = file_error(format!(
            "refused {} (message {seq} from {who}): {what}",
            path.display()
        ));
        match io::reject(path) {
            Ok(aside) => tracing::error!("{error}; moved to {}", aside.display()),
            Err(e) => {
                if self.warned.insert(path.to_path_buf()) {
                    tracing::error!("{error}; cannot move it aside ({e}): message {seq} from {who} waits until it is removed");
                }
            }
        }
    }

    fn broke_protocol_in(&mut self, from: u32, path: &Path, e: impl std::fmt::Display) {
        let who = self.universe.describe(from);
        tracing::error!("protocol error from {who} in {}: {e}", path.display());
        let message = format!("{who} broke the protocol in {}: {e}", path.display());
        self.lose(from, err(ErrorClass::Protocol, message));
    }

    /// Reads the announced hybrid payloads whose files are there.
    fn read_payloads(&mut self) -> bool {
        let mut moved = false;
        let waiting = std::mem::take(&mut self.payloads);
        for w in waiting {
            let FileData {
                peer,
                header,
                region,
                ..
            } = &w.payload;
            let path = self.layout.incoming_payload(*peer, header.receiver_req);
            let expected = Envelope {
                run: self.run,
                sender: *peer,
                receiver: self.me(),
                seq: header.receiver_req,
            };
            let problem = match io::open(&path, &expected, self.config.key.as_ref()) {
                Ok(Found::Missing) => {
                    if w.since.elapsed() < self.config.peer_timeout {
                        self.payloads.push(w);
                        continue;
                    }
                    format!(
                        "it did not appear within {} s (TETHER_FILE_PEER_TIMEOUT); is TETHER_FILE_DIR the same directory on both sides?",
                        self.config.peer_timeout.as_secs()
                    )
                }
                Ok(Found::Bad(problem)) => problem.to_string(),
                Err(e) => format!("cannot read it: {e}"),
                Ok(Found::Good(opened)) => {
                    let frame = FrameHeader::decode(&opened.prefix.frame, 0, 0);
                    let matches = frame.is_ok_and(|f| {
                        f.kind == FrameKind::Data
                            && f.sender_req == header.sender_req
                            && f.receiver_req == header.receiver_req
                            && f.payload_len == header.payload_len
                    });
                    if !matches || opened.prefix.payload_len != region.len as u64 {
                        "it does not hold the data the socket announced".to_string()
                    } else {
                        // SAFETY: the granted region is valid and reserved
                        // for this data until its receive completes.
                        let dst = unsafe { std::slice::from_raw_parts_mut(region.ptr, region.len) };
                        let read = opened.read_checked(dst, Checksum::Beside);
                        drop(opened);
                        match read {
                            Ok(()) => {
                                let _ = std::fs::remove_file(&path);
                                self.events.filled.push((w.payload.token, None));
                                moved = true;
                                continue;
                            }
                            Err(problem) => problem,
                        }
                    }
                }
            };
            let peer = *peer;
            let who = self.universe.describe(peer);
            let mut message = format!("payload file {} from {who}: {problem}", path.display());
            if path.exists() {
                match io::reject(&path) {
                    Ok(aside) => message += &format!(" (moved to {})", aside.display()),
                    Err(e) => message += &format!(" (cannot move it aside: {e})"),
                }
            }
            tracing::error!("TETHER_ERR_FILE: {message}");
            self.lose(peer, file_error(message));
            moved = true;
        }
        moved
    }

    /// Loses peers whose heartbeat stopped or never started, and peers
    /// whose refused message was not replaced in time.
    fn check_peers(&mut self, now: Instant) {
        if self.receiving.is_none() {
            return;
        }
        let (connect, silence) = (self.config.connect_timeout, self.config.silence);
        let peers: Vec<u32> = self.peers.keys().copied().collect();
        for peer in peers {
            let path = self.layout.heartbeat(peer);
            let who = self.universe.describe(peer);
            let state = self.peers.get_mut(&peer).expect("listed");
            if state.dead || state.bye_received {
                continue;
            }
            let error = match state.liveness.check(&path, now, connect, silence) {
                Verdict::NeverSeen(for_) => Some(err(
                    ErrorClass::Timeout,
                    format!(
                        "{who} did not appear in {} within {} s (TETHER_CONNECT_TIMEOUT): no heartbeat file {}; is TETHER_FILE_DIR the same directory for it, and is it running?",
                        self.layout.run_dir.display(),
                        for_.as_secs(),
                        path.display()
                    ),
                )),
                Verdict::Silent(for_) => Some(err(
                    ErrorClass::PeerLost,
                    format!(
                        "no heartbeat from {who} for {:.1} s (TETHER_PEER_TIMEOUT={}): its heartbeat file {} stopped changing; it is stopped or hung, or gone",
                        for_.as_secs_f64(),
                        silence.as_secs(),
                        path.display(),
                    ),
                )),
                Verdict::Alive => None,
            };
            if let Some(error) = error {
                self.lose(peer, error);
            }
        }
    }

    fn lose(&mut self, peer: u32, error: Error) {
        let state = self.peer(peer);
        if state.dead {
            return;
        }
        // A peer that said goodbye can still hear ours.
        if !state.bye_received {
            state.dead = true;
        }
        state.incoming = None;
        state.placement = Placement::Unreported;
        self.forget(peer);
        self.events.lost(peer, error);
    }

    /// Drops what waits for the receives of a lost peer, which failed
    /// with the loss and gave their buffers back to the program: its
    /// announced payloads (their files are removed), and the place of the
    /// payload arriving in parts, whose remaining parts are then consumed
    /// without being written. Every loss of a peer, whatever transport
    /// reported it, comes here before this transport reads again.
    pub fn forget(&mut self, peer: u32) {
        // A peer that said goodbye by file still reads ours (finalize
        // waits for it): what this process writes to it is not left over.
        if !self.peers.get(&peer).is_some_and(|p| p.bye_received) {
            self.lost.insert(peer);
        }
        let (forgotten, kept): (Vec<Waiting>, Vec<Waiting>) = std::mem::take(&mut self.payloads)
            .into_iter()
            .partition(|w| w.payload.peer == peer);
        self.payloads = kept;
        for w in forgotten {
            let path = self
                .layout
                .incoming_payload(peer, w.payload.header.receiver_req);
            let _ = std::fs::remove_file(path);
        }
        if let Some(incoming) = self.peers.get_mut(&peer).and_then(|p| p.incoming.as_mut()) {
            incoming.forget_place();
        }
    }

    fn control(&mut self, kind: FrameKind, tag: i32) {
        let peers: Vec<u32> = self
            .peers
            .iter()
            .filter(|(_, p)| !p.dead && !p.bye_sent)
            .map(|(peer, _)| *peer)
            .collect();
        for peer in peers {
            if kind == FrameKind::Bye {
                self.peer(peer).bye_sent = true;
            }
            let mut header = FrameHeader::new(kind);
            header.tag = tag;
            // A file transport takes every frame: it writes the file now.
            let _taken = self.send(Transmit {
                peer,
                header,
                payload: TransmitPayload::None,
                completes: None,
                copy_if_blocked: false,
            });
        }
    }
}

/// The files of `hybrid` peers: the payload is written before the link
/// announces it, and read once its file is there.
impl PayloadFiles for FileTransport {
    fn send_payload(&mut self, t: Transmit) -> Transmit {
        self.write_payload(t)
    }

    fn add_payload(&mut self, payload: FileData) {
        self.payloads.push(Waiting {
            payload,
            since: Instant::now(),
        });
        self.read_payloads();
    }
}

impl Transport for FileTransport {
    fn caps(&self) -> Caps {
        Caps {
            eager_limit: Some(self.config.eager_limit),
            remote_memory: 0,
            stripe: None,
            window_rma: None,
        }
    }

    /// Sends an engine frame to `peer` as a file, or, for a `Data` frame
    /// above `chunks::CHUNK`, as consecutive files of its parts, each
    /// published as soon as it is written so that the receiver reads it
    /// while the next is written.
    fn send(&mut self, mut t: Transmit) -> Result<(), NoResource> {
        pack(&mut t);
        let peer = t.peer;
        // SAFETY: a borrowed payload stays valid until the request in
        // `completes` completes, which is after these writes.
        let bytes = unsafe { payload_bytes(&t.payload) };
        let parts: Vec<_> = if t.header.kind == FrameKind::Data {
            chunks::parts(bytes.len()).collect()
        } else {
            std::iter::once(0..bytes.len()).collect()
        };
        if parts.len() > 1 {
            tracing::debug!(
                "data of {} bytes for {} in {} files",
                bytes.len(),
                self.universe.describe(peer),
                parts.len()
            );
        }
        // Parts are written while the receiver reads the ones before: both
        // cores are busy, so each part is checksummed inline.
        let checksum = if parts.len() > 1 {
            Checksum::Inline
        } else {
            Checksum::Beside
        };
        for part in parts {
            let state = self.peer(peer);
            if state.dead {
                return Ok(());
            }
            let seq = state.send_seq;
            state.send_seq += 1;
            t.header.seq = seq;
            t.header.payload_len = part.len() as u64;
            let target = self.layout.outgoing_message(peer, seq);
            match self.write(peer, seq, &t.header, &bytes[part], checksum, &target) {
                Ok(temp) => {
                    self.peer(peer).unplaced.push_back((temp, target));
                    self.place_waiting(peer);
                }
                Err(e) => {
                    let message = format!(
                        "cannot write a message for {} to {}: {e}",
                        self.universe.describe(peer),
                        target.display()
                    );
                    self.lose(peer, file_error(message));
                    return Ok(());
                }
            }
        }
        if let Some(req) = t.completes {
            self.events.sent.push(req);
        }
        if let Some(r) = self.receiving.as_mut() {
            r.watcher.activity(Instant::now());
        }
        Ok(())
    }

    fn place(&mut self, peer: u32, sink: PayloadSink) {
        self.place_frame(peer, sink);
    }

    fn broke_protocol(&mut self, peer: u32, error: WireError) {
        self.refuse_frame(peer, error);
    }

    fn events(&mut self) -> &mut Events {
        &mut self.events
    }

    /// Whether written files still wait for their names.
    fn has_output(&self) -> bool {
        self.peers
            .values()
            .any(|p| !p.dead && !p.unplaced.is_empty())
    }

    /// Sends a goodbye to every peer this process exchanged files with.
    fn say_goodbye(&mut self) {
        self.control(FrameKind::Bye, 0);
    }

    /// Whether every peer has heard this process's goodbye and said its own.
    fn all_goodbyes_heard(&self) -> bool {
        self.peers
            .values()
            .all(|p| p.dead || (p.bye_received && p.unplaced.is_empty()))
    }

    /// Sends an abort to every peer, best effort.
    fn broadcast_abort(&mut self, code: i32) {
        self.control(FrameKind::Abort, code);
    }
}

impl FileTransport {
    /// Removes the files this process wrote into the inbox of `peer`, which
    /// was lost: it will never take them, and nobody else may.
    /// Done as this process leaves, not at the loss, so that a peer lost
    /// by a silence it survives still reads what this process sent while
    /// it runs, and then loses this process by its heartbeat. The peer's
    /// own files (its heartbeat, its inbox) are its to remove.
    fn remove_written_for(&self, peer: u32) {
        let mine = format!("{}-", self.me());
        let temporary = format!("{TEMP_PREFIX}{}-{}-", self.me(), std::process::id());
        let Ok(entries) = std::fs::read_dir(self.layout.inbox(peer)) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if (name.starts_with(&mine) && !name.contains(REJECTED)) || name.starts_with(&temporary)
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

impl Drop for FileTransport {
    /// Removes what this process owns: unsent temporaries, its inbox when
    /// empty (refused files are kept there for inspection) and the run's
    /// directory when it is the last to leave.
    fn drop(&mut self) {
        for peer in self.peers.values() {
            for (temp, target) in &peer.unplaced {
                tracing::warn!(
                    "{} was never delivered: its name stayed taken",
                    target.display()
                );
                let _ = std::fs::remove_file(temp);
            }
        }
        self.receiving = None;
        for peer in &self.lost {
            self.remove_written_for(*peer);
        }
        let inbox = self.layout.inbox(self.me());
        if std::fs::remove_dir(&inbox).is_err() {
            let left: Vec<String> = std::fs::read_dir(&inbox)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            if !left.is_empty() {
                tracing::warn!(
                    "files left in {} (refused ones are kept for inspection): {}",
                    inbox.display(),
                    left.join(", ")
                );
            }
        }
        let _ = std::fs::remove_dir(&self.layout.run_dir);
    }
}

/// The bytes of a frame's payload.
///
/// # Safety
/// A borrowed payload's region must be valid for reads while the returned
/// slice is used (the engine keeps it so until the send completes).
/// A file holds contiguous bytes: a gathered payload's runs are packed.
fn pack(t: &mut Transmit) {
    if let TransmitPayload::Gathered(g) = &t.payload {
        // SAFETY: the runs are valid until the send completes.
        t.payload = TransmitPayload::Owned(unsafe { g.to_vec() });
    }
}

unsafe fn payload_bytes(payload: &TransmitPayload) -> &[u8] {
    match payload {
        TransmitPayload::None => &[],
        TransmitPayload::Borrowed(r) => std::slice::from_raw_parts(r.ptr, r.len),
        TransmitPayload::Owned(v) => v,
        TransmitPayload::Gathered(_) => unreachable!("gathered payloads are packed first"),
    }
}

/// Warns once about directories of other runs under `root`: they are
/// ignored, never read, and may belong to runs still going.
fn warn_about_other_runs(root: &Path, ours: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let others: Vec<String> = entries
        .flatten()
        .filter(|e| e.path() != ours)
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.starts_with("run-"))
        .collect();
    if !others.is_empty() {
        tracing::warn!(
            "{} holds {} director{} of other runs, ignored (remove them once those runs are over): {}",
            root.display(),
            others.len(),
            if others.len() == 1 { "y" } else { "ies" },
            others.join(", ")
        );
    }
}

/// Creates `dir` for this user alone (mode 0700) if it is missing, and
/// refuses it unless it is a real directory owned by this user that no one
/// else can write to: the default directory lies in a shared `/tmp`.
pub fn ensure_private_dir(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let refuse = |why: String| file_error(format!("{}: {why}; set TETHER_FILE_DIR", dir.display()));
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(refuse(format!("cannot create it: {e}"))),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| refuse(e.to_string()))?;
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    if !meta.file_type().is_dir() {
        return Err(refuse("not a directory (a symbolic link?)".into()));
    }
    if meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(refuse(format!(
            "owned by uid {} with mode {:o}, not by this user (uid {uid}) alone",
            meta.uid(),
            meta.mode() & 0o777
        )));
    }
    Ok(())
}

/// Whether the file transport can be used here (for `tether info`).
pub fn availability() -> Result<String, String> {
    Ok("usable: messages as checksummed files in TETHER_FILE_DIR, watched by inotify on local file systems and polled on network ones".into())
}

//! The shared segment of one receiving process: a header, the mailbox
//! that every writer may write to, a table of slots, and one ring per
//! universe rank that only that rank writes.
//!
//! Layout (offsets in bytes; `R` = ring capacity, a power of two; `M` =
//! [`MAILBOX_BYTES`]; `T` = the slot table, [`SLOT_ENTRY`] bytes a slot,
//! rounded up to whole pages):
//!
//! | offset | what |
//! |---|---|
//! | 0 | [`Header`]: magic, universe id, owner, slot count, `R`, `ready`, sleep barrier |
//! | 128 | the owner's nonce (32 bytes, fresh per segment) |
//! | 256 | attach generation: +1 each time a writer attaches |
//! | 320 | the owner's [`Doorbell`] (its sleep flag) |
//! | 384 | the mailbox's [`MailboxControl`] (writers' lock, cursors) |
//! | 576 | attached writers: bit i is set once slot i's writer attached (slots below [`ATTACHED_BITS`]) |
//! | 4096 | the mailbox's M bytes |
//! | 4096 + M + i*256 | slot i: [`RingControl`], [`WriterInfo`] |
//! | 4096 + M + T + i*R | slot i: the ring's R bytes |
//!
//! Slots are packed 16 to a page, apart from their rings: a writer that
//! sends through the mailbox only (`TETHER_MAX_LINKS`, `mailbox.rs`)
//! costs the owner 256 bytes, not a page, and its ring no page at all.
//! It writes its records through the segment's file ([`FileBytes`]), so
//! of the owner's segment it keeps only the header page mapped: what it
//! needs per write (the mailbox's lock and cursors, the doorbell) is
//! there.
//!
//! The segment is a memfd: it has no name in any file system, so nothing
//! can be left behind in /dev/shm whatever happens to the processes (a
//! kill -9 during start-up included); its pages go when the last process
//! that maps it or holds its descriptor exits. Writers open it through
//! `/proc/<owner pid>/fd/<fd>`, which the kernel allows to processes of the
//! same user (ptrace read access), the same rule as cross-memory attach.
//!
//! Life cycle: [`Segment::create`] before joining (the descriptor number
//! is published with the address), [`Segment::init`] once the universe
//! size is known (sizes the memfd, writes the header, sets `ready` last
//! with Release). A writer maps it only after it sees `ready` (Acquire),
//! claims its slot (0 -> 2 -> 1, so two processes claiming one rank are
//! caught), and bumps the attach generation so the owner looks for it.
//!
//! With the run's key, a writer proves it in its slot before it marks
//! the slot attached: `HMAC(key, ATTACH_LABEL, owner nonce, universe id,
//! owner rank, writer rank, pid, start)` ([`attach_proof`]). The owner
//! reads from no slot whose proof does not check. (The kernel lets only
//! processes of the same user open the segment, and those could read
//! any of this process's memory anyway: the proof keeps out processes
//! of other runs and misconfigured ones, not a hostile process of the
//! same user; see docs/RELIABILITY.md.)

use std::fs::File;
use std::ops::Deref;
use std::os::fd::{AsRawFd, FromRawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};
use tether_ring::{Bytes, Doorbell, MailboxControl, RingControl};

const MAGIC: u64 = u64::from_le_bytes(*b"TTHRSHM3");
pub const PAGE: usize = 4096;
const GENERATION_AT: usize = 256;
const DOORBELL_AT: usize = 320;
const OWNER_NONCE_AT: usize = 128;
const MAILBOX_CONTROL_AT: usize = 384;
const ATTACHED_AT: usize = MAILBOX_CONTROL_AT + std::mem::size_of::<MailboxControl>();
const MAILBOX_AT: usize = PAGE;
/// The mailbox's capacity: a burst of small frames from every peer
/// without a ring of its own (about 500 frames of 64 bytes) before a
/// writer waits for the owner to read.
pub const MAILBOX_BYTES: usize = 64 * 1024;
/// Bytes of one slot in the slot table: its ring's control (two lines)
/// and its writer.
const SLOT_ENTRY: usize = 256;
const SLOTS_AT: usize = MAILBOX_AT + MAILBOX_BYTES;
/// Slots whose attach is marked in the header's bitmap: the owner then
/// looks at those slots only, so that a peer that never writes to this
/// process costs it no page (reading a slot's state brings its page in).
/// A universe with more ranks has its other slots scanned.
pub const ATTACHED_BITS: u32 = ((PAGE - ATTACHED_AT) * 8) as u32;
/// The label of a writer's proof of the key.
const ATTACH_LABEL: &str = "tether shm attach v1";

#[repr(C)]
struct Header {
    magic: u64,
    universe_id: u64,
    owner_rank: u32,
    slots: u32,
    ring_bytes: u64,
    ready: AtomicU32,
    /// 1: the owner issues the barrier of `barrier.rs` before it sleeps,
    /// so its registered writers need not fence (`Doorbell`).
    sleeps_with_barrier: u32,
}

/// Who writes a slot: state 0 free, 2 being claimed, 1 attached.
#[repr(C, align(64))]
pub struct WriterInfo {
    state: AtomicU32,
    pid: AtomicU32,
    start: AtomicU64,
    /// The writer's own segment descriptor, so the owner can attach back.
    segment_fd: AtomicU32,
    /// Its proof of the run's key (zero without a key), written before
    /// `state` becomes 1.
    proof: [AtomicU64; 4],
    /// 1: the writer starts with its ring; 0: with the mailbox, until it
    /// says otherwise there (`mailbox.rs`).
    ring_open: AtomicU32,
}

/// The writer of a slot, as the owner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Writer {
    pub pid: u32,
    pub start: u64,
    pub segment_fd: u32,
    /// It starts writing to its ring, not to the mailbox.
    pub ring_open: bool,
}

/// Who attaches to whom: what a writer's proof of the key covers (see
/// the module's notes).
pub struct Attachment<'a> {
    pub owner_nonce: &'a [u8],
    pub universe_id: u64,
    pub owner_rank: u32,
    pub writer_rank: u32,
    pub writer: &'a Writer,
}

impl Attachment<'_> {
    fn with_parts<T>(&self, f: impl FnOnce(&[&[u8]]) -> T) -> T {
        f(&[
            self.owner_nonce,
            &self.universe_id.to_le_bytes(),
            &self.owner_rank.to_le_bytes(),
            &self.writer_rank.to_le_bytes(),
            &self.writer.pid.to_le_bytes(),
            &self.writer.start.to_le_bytes(),
        ])
    }

    /// The writer's proof.
    pub fn proof(&self, key: &tether_auth::Key) -> tether_auth::Tag {
        self.with_parts(|parts| key.prove(ATTACH_LABEL, parts))
    }

    /// Whether `proof` is the writer's proof (compared in constant time).
    pub fn checks(&self, key: &tether_auth::Key, proof: &[u8]) -> bool {
        self.with_parts(|parts| key.check(ATTACH_LABEL, parts, proof))
    }
}

/// A mapping of a segment (own or a peer's).
pub struct Mapping {
    map: Arc<MmapRaw>,
    /// A peer's segment file, kept open to write its mailbox with.
    file: Option<Arc<File>>,
    slots: u32,
    ring_bytes: usize,
}

/// A pointer into a mapping that keeps the mapping alive.
pub struct Shared<T> {
    ptr: NonNull<T>,
    _map: Arc<MmapRaw>,
}

impl<T> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the pointer is inside the mapping this value keeps alive,
        // aligned, and `T` is made of atomics valid for any bit pattern
        // (the segment starts zeroed).
        unsafe { self.ptr.as_ref() }
    }
}

// SAFETY: `T` is made of atomics; sharing it is what it is for.
unsafe impl<T: Sync> Send for Shared<T> {}

/// A mailbox's bytes as its writers see them: written with `pwrite(2)`
/// to the segment's file, so that the pages a record lands on are not
/// mapped into the writer (every page of every peer's mailbox it ever
/// wrote to would count in its resident memory, as shared pages count
/// in every process that maps them). Loads, word stores, and writes
/// the file refuses, go through the mapping.
///
/// Order: the kernel copies the record on this thread before `pwrite`
/// returns, so the Release store of the mailbox's head after it orders
/// the record's bytes before the head, as it does this thread's own
/// stores.
pub struct FileBytes {
    file: Option<Arc<File>>,
    offset: u64,
    bytes: RingBytes,
}

// SAFETY: as `RingBytes`, whose range the file's offsets name.
unsafe impl Bytes for FileBytes {
    fn capacity(&self) -> usize {
        self.bytes.capacity()
    }
    unsafe fn store(&self, at: usize, src: *const u8, len: usize) {
        use std::os::unix::fs::FileExt;
        // SAFETY: `src` is valid for `len` reads (the trait's contract).
        let data = unsafe { std::slice::from_raw_parts(src, len) };
        let written = self
            .file
            .as_ref()
            .is_some_and(|f| f.write_all_at(data, self.offset + at as u64).is_ok());
        if !written {
            // SAFETY: as the trait's contract.
            unsafe { self.bytes.store(at, src, len) };
        }
    }
    unsafe fn load(&self, at: usize, dst: *mut u8, len: usize) {
        // SAFETY: as the trait's contract.
        unsafe { self.bytes.load(at, dst, len) }
    }
    unsafe fn store_word(&self, at: usize, value: u64, order: Ordering) {
        // SAFETY: as the trait's contract.
        unsafe { self.bytes.store_word(at, value, order) }
    }
    unsafe fn load_word(&self, at: usize, order: Ordering) -> u64 {
        // SAFETY: as the trait's contract.
        unsafe { self.bytes.load_word(at, order) }
    }
}

/// Whole pages of a mapping, which this process may stop mapping.
pub struct Pages {
    ptr: *mut u8,
    len: usize,
    _map: Arc<MmapRaw>,
}

// SAFETY: a plain memory range inside the mapping this value keeps alive.
unsafe impl Send for Pages {}

impl Pages {
    /// Stops mapping the pages in this process (`MADV_DONTNEED` on a
    /// shared mapping: the segment keeps them, and the next touch maps
    /// them again, as they are), so that they no longer count in its
    /// resident memory. No byte changes.
    pub fn unmap_here(&self) {
        // SAFETY: a page-aligned range inside the mapping this value
        // keeps alive; on a shared mapping the advice only drops this
        // process's page table entries.
        let rc = unsafe { libc::madvise(self.ptr.cast(), self.len, libc::MADV_DONTNEED) };
        if rc != 0 {
            tracing::debug!(
                "cannot unmap a segment's pages here: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// A ring's storage inside a mapping.
pub struct RingBytes {
    ptr: *mut u8,
    len: usize,
    _map: Arc<MmapRaw>,
}

// SAFETY: a plain memory range inside the mapping this value keeps alive.
unsafe impl Send for RingBytes {}

// SAFETY: `len` is the segment's ring size, a power of two checked at
// `init`/`attach`; copies stay inside `ptr..ptr+len`.
unsafe impl Bytes for RingBytes {
    fn capacity(&self) -> usize {
        self.len
    }
    unsafe fn store(&self, at: usize, src: *const u8, len: usize) {
        std::ptr::copy_nonoverlapping(src, self.ptr.add(at), len);
    }
    unsafe fn load(&self, at: usize, dst: *mut u8, len: usize) {
        std::ptr::copy_nonoverlapping(self.ptr.add(at), dst, len);
    }
    unsafe fn store_word(&self, at: usize, value: u64, order: Ordering) {
        self.word(at).store(value, order);
    }
    unsafe fn load_word(&self, at: usize, order: Ordering) -> u64 {
        self.word(at).load(order)
    }
}

impl RingBytes {
    /// The ring's bytes, and those of its pages present in memory now.
    pub fn footprint(&self) -> (u64, u64) {
        // SAFETY: the ring is a page-aligned range of the mapping this
        // value keeps alive.
        let resident = unsafe { crate::transport::resources::resident_bytes(self.ptr, self.len) };
        (self.len as u64, resident)
    }

    /// Gives the ring's pages back to the system (`MADV_REMOVE`: the
    /// memfd's pages are freed for every process that maps them); they
    /// come back zeroed when next touched.
    ///
    /// # Safety
    /// Nothing reads or writes the ring's bytes meanwhile, and nothing
    /// written there is still to be read: its producer calls this, after
    /// the consumer released everything ([`tether_ring::Producer::drained`]).
    pub unsafe fn give_back(&self) -> std::io::Result<()> {
        if libc::madvise(self.ptr.cast(), self.len, libc::MADV_REMOVE) == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// The word at byte `at` of the ring (a line's first word, which a
    /// reader polls for a marker).
    ///
    /// # Safety
    /// `at < capacity()` and a multiple of 8.
    pub unsafe fn word(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at < self.len && at.is_multiple_of(8));
        // SAFETY: the ring starts on a page, so `at`, a multiple of 8,
        // is an aligned u64 inside it.
        &*self.ptr.add(at).cast::<AtomicU64>()
    }

    /// The address of byte `at` of the ring, for frames written and read
    /// in place.
    ///
    /// # Safety
    /// `at < capacity()`.
    pub unsafe fn at(&self, at: usize) -> *mut u8 {
        debug_assert!(at < self.len);
        self.ptr.add(at)
    }

    /// Allocates and maps the ring's pages for its writer now, at once,
    /// without touching their bytes (`MADV_POPULATE_WRITE`, Linux 5.14):
    /// otherwise the first lap of a fresh ring pays a page fault every
    /// 4 KiB in the writer, which made the first 4,096 one-line messages
    /// of a pair slower (the journal, docs/journal/2026-11-24-shm.md). The
    /// reader's faults, which only map the pages, are
    /// left to first touch: populating them too measured slower. Returns
    /// whether the kernel did it (older kernels refuse the advice; the
    /// pages then come on first touch, as before).
    pub fn populate_for_writing(&self) -> bool {
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        // SAFETY: the range is the ring, page-aligned (it starts a page
        // after its slot's start) and inside the mapping this value keeps
        // alive; the advice changes no byte.
        unsafe { libc::madvise(self.ptr.cast(), self.len, MADV_POPULATE_WRITE) == 0 }
    }
}

/// Where the rings start: after the slot table, on a page.
fn rings_at(slots: u32) -> usize {
    SLOTS_AT + (slots as usize * SLOT_ENTRY).next_multiple_of(PAGE)
}

fn segment_len(slots: u32, ring_bytes: usize) -> usize {
    rings_at(slots) + slots as usize * ring_bytes
}

impl Mapping {
    fn at<T>(&self, offset: usize) -> Shared<T> {
        let ptr = NonNull::new(self.map.as_mut_ptr().wrapping_add(offset).cast::<T>())
            .expect("mapping is not null");
        Shared {
            ptr,
            _map: self.map.clone(),
        }
    }

    fn header(&self) -> Shared<Header> {
        self.at(0)
    }

    pub fn generation(&self) -> Shared<AtomicU64> {
        self.at(GENERATION_AT)
    }

    pub fn doorbell(&self) -> Shared<Doorbell> {
        self.at(DOORBELL_AT)
    }

    /// Whether the owner issues the barrier of `barrier.rs` before it
    /// sleeps (written before `ready`, so settled once the mapping is
    /// usable).
    pub fn owner_sleeps_with_barrier(&self) -> bool {
        self.header().sleeps_with_barrier == 1
    }

    fn slot_offset(&self, slot: u32) -> usize {
        assert!(slot < self.slots, "slot {slot} of {}", self.slots);
        SLOTS_AT + slot as usize * SLOT_ENTRY
    }

    pub fn ring(&self, slot: u32) -> (Shared<RingControl>, RingBytes) {
        let offset = self.slot_offset(slot);
        let bytes = RingBytes {
            ptr: self
                .map
                .as_mut_ptr()
                .wrapping_add(rings_at(self.slots) + slot as usize * self.ring_bytes),
            len: self.ring_bytes,
            _map: self.map.clone(),
        };
        (self.at(offset), bytes)
    }

    /// The mailbox as a writer of another process writes it: its control
    /// words, and its bytes written through the segment's file.
    pub fn mailbox_for_writer(&self) -> (Shared<MailboxControl>, FileBytes) {
        let (control, bytes) = self.mailbox();
        let file = FileBytes {
            file: self.file.clone(),
            offset: MAILBOX_AT as u64,
            bytes,
        };
        (control, file)
    }

    /// The mailbox's bytes, as pages of this mapping.
    pub fn mailbox_pages(&self) -> Pages {
        self.pages(MAILBOX_AT, MAILBOX_BYTES)
    }

    /// The page of the slot table that holds `slot`.
    pub fn slot_page(&self, slot: u32) -> Pages {
        let at = self.slot_offset(slot) / PAGE * PAGE;
        self.pages(at, PAGE)
    }

    fn pages(&self, at: usize, len: usize) -> Pages {
        Pages {
            ptr: self.map.as_mut_ptr().wrapping_add(at),
            len,
            _map: self.map.clone(),
        }
    }

    /// The mailbox: its control words and its bytes.
    pub fn mailbox(&self) -> (Shared<MailboxControl>, RingBytes) {
        let bytes = RingBytes {
            ptr: self.map.as_mut_ptr().wrapping_add(MAILBOX_AT),
            len: MAILBOX_BYTES,
            _map: self.map.clone(),
        };
        (self.at(MAILBOX_CONTROL_AT), bytes)
    }

    fn writer_info(&self, slot: u32) -> Shared<WriterInfo> {
        self.at(self.slot_offset(slot) + std::mem::size_of::<RingControl>())
    }

    /// The writer attached to `slot`, if one is.
    pub fn writer(&self, slot: u32) -> Option<Writer> {
        let info = self.writer_info(slot);
        (info.state.load(Ordering::Acquire) == 1).then(|| Writer {
            pid: info.pid.load(Ordering::Relaxed),
            start: info.start.load(Ordering::Relaxed),
            segment_fd: info.segment_fd.load(Ordering::Relaxed),
            ring_open: info.ring_open.load(Ordering::Relaxed) == 1,
        })
    }

    /// The proof the writer of `slot` left (read after [`Mapping::writer`]
    /// saw the slot attached).
    pub fn writer_proof(&self, slot: u32) -> tether_auth::Tag {
        let info = self.writer_info(slot);
        let mut proof = [0u8; tether_auth::TAG_LEN];
        for (bytes, word) in proof.chunks_mut(8).zip(&info.proof) {
            bytes.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        proof
    }

    /// The slots whose writers may have attached: those marked in the
    /// header's bitmap, and every slot from [`ATTACHED_BITS`] on.
    pub fn attached_slots(&self) -> Vec<u32> {
        let marked = self.slots.min(ATTACHED_BITS);
        let words = marked.div_ceil(64) as usize;
        let bitmap: Shared<[AtomicU64; (PAGE - ATTACHED_AT) / 8]> = self.at(ATTACHED_AT);
        let mut slots = Vec::new();
        for (w, word) in bitmap.iter().take(words).enumerate() {
            let mut bits = word.load(Ordering::Acquire);
            while bits != 0 {
                let bit = bits.trailing_zeros();
                bits &= bits - 1;
                let slot = w as u32 * 64 + bit;
                if slot < marked {
                    slots.push(slot);
                }
            }
        }
        slots.extend(marked..self.slots);
        slots
    }

    /// The owner's nonce, which writers' proofs cover.
    pub fn owner_nonce(&self) -> [u8; tether_auth::NONCE_LEN] {
        let words: Shared<[AtomicU64; 4]> = self.at(OWNER_NONCE_AT);
        let mut nonce = [0u8; tether_auth::NONCE_LEN];
        for (bytes, word) in nonce.chunks_mut(8).zip(words.iter()) {
            bytes.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        nonce
    }
}

/// This process's own segment.
pub struct Segment {
    file: File,
    mapping: Option<Mapping>,
}

impl Segment {
    /// Creates the (empty) memfd.
    pub fn create() -> std::io::Result<Segment> {
        // SAFETY: a constant C string and flags.
        let fd = unsafe { libc::memfd_create(c"tether-shm".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a descriptor just created and owned by nobody else.
        let file = unsafe { File::from_raw_fd(fd) };
        Ok(Segment {
            file,
            mapping: None,
        })
    }

    /// The descriptor number peers open through /proc.
    pub fn fd(&self) -> u32 {
        self.file.as_raw_fd() as u32
    }

    /// Sizes and maps the segment and marks it ready. `ring_bytes` must be
    /// a power of two; `sleeps_with_barrier`: this process issues the
    /// barrier of `barrier.rs` before it sleeps.
    pub fn init(
        &mut self,
        universe_id: u64,
        owner_rank: u32,
        slots: u32,
        ring_bytes: usize,
        sleeps_with_barrier: bool,
    ) -> std::io::Result<&Mapping> {
        assert!(ring_bytes.is_power_of_two() && ring_bytes >= PAGE);
        let len = segment_len(slots, ring_bytes);
        self.file.set_len(len as u64)?;
        let map = Arc::new(MmapOptions::new().len(len).map_raw(&self.file)?);
        let mapping = Mapping {
            map,
            file: None,
            slots,
            ring_bytes,
        };
        let header = mapping.header().ptr.as_ptr();
        // SAFETY: nobody maps the segment before `ready` is set; the header
        // is at the start of the fresh mapping.
        unsafe {
            (*header).magic = MAGIC;
            (*header).universe_id = universe_id;
            (*header).owner_rank = owner_rank;
            (*header).slots = slots;
            (*header).ring_bytes = ring_bytes as u64;
            (*header).sleeps_with_barrier = sleeps_with_barrier as u32;
        }
        let nonce = tether_auth::nonce();
        let words: Shared<[AtomicU64; 4]> = mapping.at(OWNER_NONCE_AT);
        for (word, bytes) in words.iter().zip(nonce.chunks(8)) {
            word.store(
                u64::from_le_bytes(bytes.try_into().expect("8 bytes")),
                Ordering::Relaxed,
            );
        }
        mapping.header().ready.store(1, Ordering::Release);
        Ok(self.mapping.insert(mapping))
    }

    pub fn mapping(&self) -> Option<&Mapping> {
        self.mapping.as_ref()
    }
}

/// Why attaching to a peer's segment did not work.
#[derive(Debug)]
pub enum AttachError {
    /// The peer has not finished its start-up: try again later.
    NotReady,
    /// This transport cannot reach the peer (another reason: permissions,
    /// another universe); the message says why.
    Unusable(String),
    /// The peer's process has ended: no transport reaches it.
    Gone(String),
}

/// Maps the segment of process `pid` (descriptor `fd`) and claims slot
/// `me` as its writer. `writer` describes this process.
pub fn attach(
    pid: u32,
    fd: u32,
    universe_id: u64,
    me: u32,
    writer: Writer,
    key: Option<&tether_auth::Key>,
) -> Result<Mapping, AttachError> {
    let path = format!("/proc/{pid}/fd/{fd}");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| AttachError::Unusable(format!("cannot open its segment {path}: {e}")))?;
    let len = file
        .metadata()
        .map_err(|e| AttachError::Unusable(format!("{path}: {e}")))?
        .len() as usize;
    if len < PAGE {
        return Err(AttachError::NotReady);
    }
    let map = Arc::new(
        MmapOptions::new()
            .len(len)
            .map_raw(&file)
            .map_err(|e| AttachError::Unusable(format!("cannot map {path}: {e}")))?,
    );
    let probe = Mapping {
        map,
        file: None,
        slots: 0,
        ring_bytes: 0,
    };
    let header = probe.header();
    if header.ready.load(Ordering::Acquire) != 1 {
        return Err(AttachError::NotReady);
    }
    let (magic, id, slots, ring_bytes) = (
        header.magic,
        header.universe_id,
        header.slots,
        header.ring_bytes as usize,
    );
    if magic != MAGIC {
        return Err(AttachError::Unusable(format!(
            "{path} has segment format {magic:#x}, expected {MAGIC:#x} (another version of Tether?)"
        )));
    }
    if id != universe_id {
        return Err(AttachError::Unusable(format!(
            "{path} is not a segment of this universe (id {id:#x}, expected {universe_id:#x})"
        )));
    }
    if !ring_bytes.is_power_of_two() || segment_len(slots, ring_bytes) > len || me >= slots {
        return Err(AttachError::Unusable(format!(
            "{path} has an inconsistent layout ({slots} slots of {ring_bytes} bytes in {len} bytes)"
        )));
    }
    let mapping = Mapping {
        map: probe.map.clone(),
        file: Some(Arc::new(file)),
        slots,
        ring_bytes,
    };
    let info = mapping.writer_info(me);
    if info
        .state
        .compare_exchange(0, 2, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return Err(AttachError::Unusable(format!(
            "another process already writes to it as universe rank {me}"
        )));
    }
    info.pid.store(writer.pid, Ordering::Relaxed);
    info.start.store(writer.start, Ordering::Relaxed);
    info.segment_fd.store(writer.segment_fd, Ordering::Relaxed);
    info.ring_open
        .store(u32::from(writer.ring_open), Ordering::Relaxed);
    if let Some(key) = key {
        let owner = mapping.header().owner_rank;
        let proof = Attachment {
            owner_nonce: &mapping.owner_nonce(),
            universe_id: id,
            owner_rank: owner,
            writer_rank: me,
            writer: &writer,
        }
        .proof(key);
        for (word, bytes) in info.proof.iter().zip(proof.chunks(8)) {
            word.store(
                u64::from_le_bytes(bytes.try_into().expect("8 bytes")),
                Ordering::Relaxed,
            );
        }
    }
    info.state.store(1, Ordering::Release);
    if me < ATTACHED_BITS {
        let bitmap: Shared<[AtomicU64; (PAGE - ATTACHED_AT) / 8]> = mapping.at(ATTACHED_AT);
        bitmap[(me / 64) as usize].fetch_or(1 << (me % 64), Ordering::Release);
    }
    mapping.generation().fetch_add(1, Ordering::Release);
    Ok(mapping)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of `bytes` the kernel says are resident in this process.
    fn resident_pages(bytes: &RingBytes) -> usize {
        let mut present = vec![0u8; bytes.len / PAGE];
        // SAFETY: a page-aligned range of a live mapping, and a vector of
        // one byte per page.
        let rc = unsafe { libc::mincore(bytes.ptr.cast(), bytes.len, present.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        present.iter().filter(|&&p| p & 1 == 1).count()
    }

    /// A writer attaching through /proc reads whether the owner sleeps
    /// with the barrier, as the owner wrote it.
    #[test]
    fn a_writer_reads_how_the_owner_sleeps() {
        for sleeps_with_barrier in [false, true] {
            let mut segment = Segment::create().unwrap();
            segment.init(7, 0, 2, 4096, sleeps_with_barrier).unwrap();
            let me = Writer {
                pid: std::process::id(),
                start: 1,
                segment_fd: 0,
                ring_open: true,
            };
            let Ok(mapping) = attach(std::process::id(), segment.fd(), 7, 1, me, None) else {
                panic!("attaching to this process's own segment failed");
            };
            assert_eq!(mapping.owner_sleeps_with_barrier(), sleeps_with_barrier);
        }
    }

    #[test]
    fn a_writer_proves_the_key_in_its_slot_and_the_proof_fits_nothing_else() {
        let key = tether_auth::Key::new(&[3; 32], "test").unwrap();
        let other = tether_auth::Key::new(&[4; 32], "test").unwrap();
        let mut segment = Segment::create().unwrap();
        segment.init(9, 0, 3, 4096, false).unwrap();
        let me = Writer {
            pid: std::process::id(),
            start: 5,
            segment_fd: 0,
            ring_open: true,
        };
        attach(std::process::id(), segment.fd(), 9, 1, me, Some(&key)).unwrap();
        attach(std::process::id(), segment.fd(), 9, 2, me, None).unwrap();
        let owner = segment.mapping().unwrap();
        let nonce = owner.owner_nonce();
        assert_ne!(nonce, [0; 32], "the owner's nonce is drawn at init");
        let attachment = |writer_rank| Attachment {
            owner_nonce: &nonce,
            universe_id: 9,
            owner_rank: 0,
            writer_rank,
            writer: &me,
        };
        assert!(attachment(1).checks(&key, &owner.writer_proof(1)));
        assert!(!attachment(1).checks(&other, &owner.writer_proof(1)));
        assert!(
            !attachment(2).checks(&key, &owner.writer_proof(1)),
            "a proof for another slot"
        );
        assert!(
            !attachment(2).checks(&key, &owner.writer_proof(2)),
            "a writer without the key"
        );
    }

    #[test]
    fn the_owner_finds_the_attached_slots_by_their_marks() {
        let mut segment = Segment::create().unwrap();
        segment.init(3, 0, 70, 4096, false).unwrap();
        let me = Writer {
            pid: std::process::id(),
            start: 1,
            segment_fd: 0,
            ring_open: true,
        };
        assert!(segment.mapping().unwrap().attached_slots().is_empty());
        for slot in [1, 65, 69] {
            attach(std::process::id(), segment.fd(), 3, slot, me, None).unwrap();
        }
        assert_eq!(segment.mapping().unwrap().attached_slots(), [1, 65, 69]);
    }

    /// A writer that starts with the mailbox touches no page of its
    /// ring, and the owner learns how it starts; slots share pages.
    #[test]
    fn a_mailbox_writer_costs_no_ring_page_and_slots_share_a_page() {
        let mut segment = Segment::create().unwrap();
        segment.init(4, 0, 40, 4096, false).unwrap();
        let mut me = Writer {
            pid: std::process::id(),
            start: 1,
            segment_fd: 0,
            ring_open: false,
        };
        attach(std::process::id(), segment.fd(), 4, 3, me, None).unwrap();
        me.ring_open = true;
        attach(std::process::id(), segment.fd(), 4, 5, me, None).unwrap();
        let owner = segment.mapping().unwrap();
        assert!(!owner.writer(3).unwrap().ring_open);
        assert!(owner.writer(5).unwrap().ring_open);
        for slot in 0..40 {
            assert_eq!(resident_pages(&owner.ring(slot).1), 0, "ring {slot}");
        }
        let (control, _) = owner.ring(0);
        let (last, _) = owner.ring(15);
        let (next, _) = owner.ring(16);
        let page = |c: &Shared<RingControl>| c.ptr.as_ptr() as usize / PAGE;
        assert_eq!(page(&control), page(&last));
        assert_ne!(page(&control), page(&next));
    }

    #[test]
    fn populating_a_ring_faults_in_every_page_and_changes_no_byte() {
        let mut segment = Segment::create().unwrap();
        let mapping = segment.init(1, 0, 2, 64 * 1024, false).unwrap();
        let (_, bytes) = mapping.ring(1);
        assert_eq!(resident_pages(&bytes), 0, "a fresh ring has no pages");
        // SAFETY: a word inside the ring.
        unsafe { bytes.store_word(8, 77, Ordering::Relaxed) };
        if bytes.populate_for_writing() {
            assert_eq!(resident_pages(&bytes), 16);
            // SAFETY: as above.
            assert_eq!(unsafe { bytes.load_word(8, Ordering::Relaxed) }, 77);
        } else {
            eprintln!("MADV_POPULATE_WRITE refused: kernel older than 5.14");
        }
    }
}

//! What each link holds, as its transport and the kernel count it: the
//! figures `TETHER_STATS=1`, `tether_stats_*` and `tether.stats()` report
//! per peer and in total (`runtime/stats.rs`), so that a program sees
//! what its peers cost in memory.

/// The memory one link to one peer holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkMemory {
    /// Buffers this process allocated for the link: its read buffer,
    /// frames queued with their own copy of a payload, a ring's assembly
    /// buffer.
    pub user_bytes: u64,
    /// What the kernel holds for the link's socket now: its receive
    /// queue, its send queue and its forward allocation (`ss -m`'s `r`,
    /// `w` and `f`), from `SO_MEMINFO`.
    pub kernel_bytes: u64,
    /// Shared-memory ring bytes mapped for the link, both directions.
    pub ring_bytes: u64,
    /// Of those, the bytes of the pages present in memory now (`mincore`):
    /// a ring's pages come when first written.
    pub ring_resident_bytes: u64,
}

impl LinkMemory {
    /// Adds `other`'s figures to these.
    pub fn add(&mut self, other: &LinkMemory) {
        self.user_bytes += other.user_bytes;
        self.kernel_bytes += other.kernel_bytes;
        self.ring_bytes += other.ring_bytes;
        self.ring_resident_bytes += other.ring_resident_bytes;
    }

    /// The figures by name, in the order the counters list them.
    pub fn named(&self) -> [(&'static str, u64); 4] {
        [
            ("link_user_bytes", self.user_bytes),
            ("link_kernel_bytes", self.kernel_bytes),
            ("link_ring_bytes", self.ring_bytes),
            ("link_ring_resident_bytes", self.ring_resident_bytes),
        ]
    }
}

/// One link: its peer, its transport and what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkUse {
    pub peer: u32,
    pub transport: &'static str,
    pub memory: LinkMemory,
    /// It holds resources of its own now (counted in `links`): a TCP
    /// connection, a UCX endpoint, a shared-memory ring pair not given
    /// back. A shared-memory channel without rings (given back, or never
    /// opened: its frames go through the mailbox under
    /// `TETHER_MAX_LINKS`) still shows what it holds but is not a link.
    pub dedicated: bool,
}

/// One dedicated link the link cap (`TETHER_MAX_LINKS`) may retire: a
/// TCP connection, or a shared-memory ring holding pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenLink {
    pub peer: u32,
    /// Retiring it now delays no frame: nothing waits to be written on
    /// it (shared memory: and it moved nothing since the last check).
    pub idle: bool,
    /// The peer refused to retire it: not to be asked again.
    pub kept_by_peer: bool,
}

/// Bytes the kernel holds for socket `fd` now (`SO_MEMINFO`: receive
/// queue + send queue + forward allocation), or 0 where it does not say.
pub fn socket_kernel_bytes(fd: std::os::fd::RawFd) -> u64 {
    const RMEM_ALLOC: usize = libc::SK_MEMINFO_RMEM_ALLOC as usize;
    const FWD_ALLOC: usize = libc::SK_MEMINFO_FWD_ALLOC as usize;
    const WMEM_QUEUED: usize = libc::SK_MEMINFO_WMEM_QUEUED as usize;
    let mut info = [0u32; libc::SK_MEMINFO_DROPS as usize + 1];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: `info` is writable for `len` bytes; the kernel writes at
    // most that and says how much in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 || (len as usize) < (WMEM_QUEUED + 1) * 4 {
        return 0;
    }
    u64::from(info[RMEM_ALLOC]) + u64::from(info[WMEM_QUEUED]) + u64::from(info[FWD_ALLOC])
}

/// Bytes of the pages of `len` bytes at `ptr` (page-aligned) present in
/// memory now, or 0 where `mincore` refuses.
///
/// # Safety
/// `ptr..ptr+len` must be a mapping of this process.
pub unsafe fn resident_bytes(ptr: *mut u8, len: usize) -> u64 {
    const PAGE: usize = 4096;
    let pages = len.div_ceil(PAGE);
    let mut present = vec![0u8; pages];
    if libc::mincore(ptr.cast(), len, present.as_mut_ptr()) != 0 {
        return 0;
    }
    (present.iter().filter(|&&p| p & 1 == 1).count() * PAGE) as u64
}

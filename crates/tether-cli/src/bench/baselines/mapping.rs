//! A shared anonymous mapping: memory that a process and the children it
//! forks afterwards all see (flags, payload areas, figures).

use std::sync::atomic::AtomicU64;

/// The mapping, unmapped on drop.
pub struct Mapping {
    base: *mut u8,
    len: usize,
}

impl Mapping {
    /// Maps `len` zeroed bytes.
    ///
    /// Errors: mmap fails (the message says why).
    pub fn new(len: usize) -> Result<Mapping, String> {
        // SAFETY: a fresh anonymous mapping; checked for failure.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!(
                "mmap of {len} shared bytes failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Mapping {
            base: base.cast(),
            len,
        })
    }

    /// The 8 bytes at `offset` as an atomic.
    ///
    /// Panics: `offset` is not 8-aligned or the 8 bytes are not inside.
    pub fn atomic(&self, offset: usize) -> &AtomicU64 {
        assert!(
            offset & 7 == 0 && offset + 8 <= self.len,
            "atomic at {offset}"
        );
        // SAFETY: aligned, inside the mapping, which lives as long as
        // `self`; these bytes are only accessed atomically.
        unsafe { &*self.base.add(offset).cast::<AtomicU64>() }
    }

    /// The address of byte `offset`.
    ///
    /// Panics: `offset` is past the end.
    pub fn at(&self, offset: usize) -> *mut u8 {
        assert!(offset <= self.len, "offset {offset} past {}", self.len);
        // SAFETY: inside the mapping (or one past its end).
        unsafe { self.base.add(offset) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps what `new` mapped.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

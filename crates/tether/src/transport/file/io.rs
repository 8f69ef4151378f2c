//! Writing, reading and refusing the files of a run (see `format.rs` for
//! their contents and `names.rs` for their names).
//!
//! Writing: the whole file goes under a temporary name first (payload
//! checksummed chunk by chunk as it is written, the prefix last), is
//! optionally flushed to stable storage, and then takes its final name
//! with `renameat2(RENAME_NOREPLACE)`, or `link` + `unlink` where the file
//! system lacks that flag. Both fail rather than replace an existing
//! file, so a name is never silently overwritten.
//!
//! Reading: the prefix is verified first; a payload is read straight into
//! its destination (a posted receive buffer), checksummed chunk by chunk
//! while the chunk is still in cache.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::format::{self, Envelope, FileProblem, Prefix, PREFIX_LEN};
use super::names::REJECTED;

/// Payloads are written, read and checksummed in pieces of this size, so
/// that the checksum and the kernel's copy meet each piece in the core's
/// L2 cache (at least 512 KiB on current x86 and Arm server cores).
const CHUNK: usize = 256 << 10;
/// From this size on, a second thread checksums a payload beside the
/// thread that copies it to or from the file: the checksum, a pass over
/// every byte, then costs time only where no core is free for it (inline,
/// it left the file path well below a plain write and read: the journal,
/// docs/journal/2026-11-24-file-hybrid.md).
const PARALLEL_CHECKSUM_MIN: usize = 4 << 20;

/// Who computes a payload's checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// A second thread beside the copy from [`PARALLEL_CHECKSUM_MIN`] on:
    /// for a file written or read whole, whose writer and reader take turns,
    /// so that a core is free for it.
    Beside,
    /// The copying thread, piece by piece while each is in cache: for the
    /// parts of a streamed payload (`chunks.rs`), whose writer and reader
    /// run at the same time and keep the cores busy. On 2 cores it gave the
    /// same bandwidth as a checksum thread per part for less CPU (the
    /// journal, docs/journal/2026-11-24-file-hybrid.md), which is what
    /// counts when other work shares the cores.
    Inline,
}

impl Checksum {
    fn beside(self, len: usize) -> bool {
        self == Checksum::Beside && len >= PARALLEL_CHECKSUM_MIN
    }
}

/// Writes a whole file under the temporary name `temp`: `prefix_of` gets
/// the payload's checksum and returns the prefix.
pub fn write_temp(
    temp: &Path,
    payload: &[u8],
    checksum: Checksum,
    fsync: bool,
    prefix_of: impl FnOnce(u32) -> [u8; PREFIX_LEN],
) -> io::Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(temp)?;
    let result = (|| {
        let crc = if checksum.beside(payload.len()) {
            std::thread::scope(|s| {
                let checksum = std::thread::Builder::new()
                    .name("tether-checksum".into())
                    .spawn_scoped(s, || crc32c::crc32c(payload));
                write_payload(&file, payload, checksum.is_err())?;
                Ok::<u32, io::Error>(match checksum {
                    Ok(thread) => thread.join().unwrap_or_else(|_| crc32c::crc32c(payload)),
                    Err(_) => crc32c::crc32c(payload),
                })
            })?
        } else {
            write_payload(&file, payload, true)?
        };
        file.write_all_at(&prefix_of(crc), 0)?;
        if fsync {
            file.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(temp);
    }
    result
}

/// Gives `temp` the name `target` unless a file already has it
/// (`Ok(false)`, `temp` kept).
pub fn place(temp: &Path, target: &Path) -> io::Result<bool> {
    let from = c_path(temp)?;
    let to = c_path(target)?;
    // SAFETY: both are NUL-terminated paths that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(true);
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EEXIST) => Ok(false),
        Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {
            match std::fs::hard_link(temp, target) {
                Ok(()) => {
                    std::fs::remove_file(temp)?;
                    Ok(true)
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(e),
            }
        }
        _ => Err(error),
    }
}

/// Writes `payload` after the prefix's place; returns its checksum when
/// `checksum` (computed chunk by chunk, each while it is in cache), else 0.
fn write_payload(file: &File, payload: &[u8], checksum: bool) -> io::Result<u32> {
    let mut crc = 0;
    let mut offset = PREFIX_LEN as u64;
    for chunk in payload.chunks(CHUNK) {
        if checksum {
            crc = crc32c::crc32c_append(crc, chunk);
        }
        file.write_all_at(chunk, offset)?;
        offset += chunk.len() as u64;
    }
    Ok(crc)
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// An open file whose prefix has been verified.
pub struct Opened {
    pub file: File,
    pub prefix: Prefix,
}

/// What opening a file found.
pub enum Found {
    /// No file of that name (yet).
    Missing,
    /// A file that must not be consumed, and why.
    Bad(FileProblem),
    Good(Opened),
}

/// Opens `path` and verifies its prefix against `expected`.
pub fn open(path: &Path, expected: &Envelope) -> io::Result<Found> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Found::Missing),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    let mut prefix = [0u8; PREFIX_LEN];
    let have = (len as usize).min(PREFIX_LEN);
    file.read_exact_at(&mut prefix[..have], 0)?;
    Ok(
        match format::decode_prefix(&prefix[..have], len, expected) {
            Ok(prefix) => Found::Good(Opened { file, prefix }),
            Err(problem) => Found::Bad(problem),
        },
    )
}

impl Opened {
    /// Reads the payload into `dst` (exactly its length) and verifies its
    /// checksum. On a mismatch `dst` holds the bad bytes; the caller must
    /// not deliver them.
    pub fn read_payload(
        &self,
        dst: &mut [u8],
        checksum: Checksum,
    ) -> io::Result<Result<(), FileProblem>> {
        debug_assert_eq!(dst.len() as u64, self.prefix.payload_len);
        let crc = if checksum.beside(dst.len()) {
            self.read_checksummed_beside(dst)?
        } else {
            let mut crc = 0;
            let mut offset = PREFIX_LEN as u64;
            for chunk in dst.chunks_mut(CHUNK) {
                self.file.read_exact_at(chunk, offset)?;
                crc = crc32c::crc32c_append(crc, chunk);
                offset += chunk.len() as u64;
            }
            crc
        };
        Ok(format::check_payload(&self.prefix, crc))
    }

    /// [`Opened::read_payload`] for the transport: `Err` is what was wrong,
    /// a refused payload or an unreadable file, in words for the error
    /// that names the file.
    pub fn read_checked(&self, dst: &mut [u8], checksum: Checksum) -> Result<(), String> {
        match self.read_payload(dst, checksum) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(problem)) => Err(problem.to_string()),
            Err(e) => Err(format!("cannot read it: {e}")),
        }
    }

    /// Reads the payload into `dst` chunk by chunk while a second thread
    /// checksums each chunk as soon as it is in; returns the checksum.
    fn read_checksummed_beside(&self, dst: &mut [u8]) -> io::Result<u32> {
        let (chunks, ready) = std::sync::mpsc::channel::<&[u8]>();
        std::thread::scope(|s| {
            let checksum = std::thread::Builder::new()
                .name("tether-checksum".into())
                .spawn_scoped(s, move || ready.iter().fold(0, crc32c::crc32c_append));
            let mut offset = PREFIX_LEN as u64;
            let mut inline = 0;
            for chunk in dst.chunks_mut(CHUNK) {
                self.file.read_exact_at(chunk, offset)?;
                offset += chunk.len() as u64;
                let chunk: &[u8] = chunk;
                if checksum.is_ok() {
                    // The thread is alive until every sender is dropped.
                    let _ = chunks.send(chunk);
                } else {
                    inline = crc32c::crc32c_append(inline, chunk);
                }
            }
            drop(chunks);
            Ok(match checksum {
                // A checksum thread that died yields a mismatch, never a
                // false match.
                Ok(thread) => thread.join().unwrap_or(!inline),
                Err(_) => inline,
            })
        })
    }
}

/// Moves a refused file aside to `<path>.rejected-<n>` (the first free
/// `n`), so that it is never read again and its name is free for the
/// real file; returns where it went.
pub fn reject(path: &Path) -> io::Result<PathBuf> {
    for n in 0.. {
        let mut aside = path.as_os_str().to_owned();
        aside.push(format!("{REJECTED}{n}"));
        let aside = PathBuf::from(aside);
        if place(path, &aside)? {
            return Ok(aside);
        }
    }
    unreachable!("some suffix is free")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::file::format::{encode_prefix, run_id};
    use tether_proto::{FrameHeader, FrameKind};

    fn envelope() -> Envelope {
        Envelope {
            run: run_id("io-test"),
            sender: 0,
            receiver: 1,
            seq: 0,
        }
    }

    fn write(dir: &Path, name: &str, payload: &[u8]) -> PathBuf {
        write_with(dir, name, payload, Checksum::Beside)
    }

    fn write_with(dir: &Path, name: &str, payload: &[u8], checksum: Checksum) -> PathBuf {
        let temp = dir.join(format!(".tmp-{name}"));
        let frame = FrameHeader::new(FrameKind::Data);
        write_temp(&temp, payload, checksum, false, |crc| {
            encode_prefix(&envelope(), &frame, payload.len() as u64, crc)
        })
        .unwrap();
        let target = dir.join(name);
        assert!(place(&temp, &target).unwrap());
        target
    }

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tether-io-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_written_file_reads_back_across_chunks() {
        let dir = scratch("round");
        let payload: Vec<u8> = (0..CHUNK * 2 + 17).map(|i| (i * 7) as u8).collect();
        let path = write(&dir, "0-0.msg", &payload);
        let Found::Good(opened) = open(&path, &envelope()).unwrap() else {
            panic!("good file refused");
        };
        let mut back = vec![0u8; payload.len()];
        opened
            .read_payload(&mut back, Checksum::Beside)
            .unwrap()
            .unwrap();
        assert_eq!(back, payload);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn large_payloads_checksummed_beside_the_copy_or_inline_round_trip_and_catch_corruption() {
        let dir = scratch("parallel");
        let payload: Vec<u8> = (0..PARALLEL_CHECKSUM_MIN + CHUNK + 5)
            .map(|i| (i * 31 + i / 7) as u8)
            .collect();
        let modes = [Checksum::Beside, Checksum::Inline];
        for (n, (written, read)) in modes
            .iter()
            .flat_map(|w| modes.iter().map(move |r| (*w, *r)))
            .enumerate()
        {
            let path = write_with(&dir, &format!("0-{n}.msg"), &payload, written);
            let Found::Good(opened) = open(&path, &envelope()).unwrap() else {
                panic!("good file refused");
            };
            let mut back = vec![0u8; payload.len()];
            opened.read_payload(&mut back, read).unwrap().unwrap();
            assert_eq!(back, payload, "written {written:?}, read {read:?}");
            let file = OpenOptions::new().write(true).open(&path).unwrap();
            file.write_all_at(b"!", PREFIX_LEN as u64 + (3 << 20) + 1)
                .unwrap();
            assert!(
                matches!(
                    opened.read_payload(&mut back, read).unwrap(),
                    Err(FileProblem::PayloadChecksum { .. })
                ),
                "corruption missed, written {written:?}, read {read:?}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn placing_never_replaces_and_rejecting_frees_the_name() {
        let dir = scratch("place");
        let path = write(&dir, "0-0.msg", b"first");
        let temp = dir.join(".tmp-second");
        std::fs::write(&temp, b"second").unwrap();
        assert!(
            !place(&temp, &path).unwrap(),
            "an existing file was replaced"
        );
        assert!(temp.exists());
        let aside = reject(&path).unwrap();
        assert!(aside.to_string_lossy().ends_with("0-0.msg.rejected-0"));
        assert!(place(&temp, &path).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn corrupted_payloads_are_detected_after_reading() {
        let dir = scratch("corrupt");
        let path = write(&dir, "0-0.msg", b"0123456789");
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(b"X", PREFIX_LEN as u64 + 3).unwrap();
        let Found::Good(opened) = open(&path, &envelope()).unwrap() else {
            panic!("prefix is intact");
        };
        let mut back = [0u8; 10];
        assert!(matches!(
            opened.read_payload(&mut back, Checksum::Beside).unwrap(),
            Err(FileProblem::PayloadChecksum { .. })
        ));
        file.set_len(PREFIX_LEN as u64 + 4).unwrap();
        assert!(matches!(
            open(&path, &envelope()).unwrap(),
            Found::Bad(FileProblem::Size { .. })
        ));
        assert!(matches!(
            open(&dir.join("absent"), &envelope()).unwrap(),
            Found::Missing
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

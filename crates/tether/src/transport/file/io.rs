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
//!
//! With the run's key, the pass that checksums a payload also computes
//! its MAC (`format.rs`), written after the payload and checked after
//! reading it, before anything is delivered. Files are created 0600: a
//! payload is nobody else's business.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use std::sync::Arc;

use tether_auth::{Key, Streaming};

use super::format::{self, Envelope, FileProblem, Prefix, PREFIX_LEN, SEAL_LABEL, SEAL_LEN};
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

/// A payload's checksum and, with a key, its MAC, computed in one pass.
struct Digest {
    crc: u32,
    mac: Option<Streaming>,
}

impl Digest {
    fn new(key: Option<&Key>, payload_len: usize) -> Digest {
        let mac = key.map(|key| {
            let mut mac = key.begin(SEAL_LABEL);
            mac.part(payload_len as u64);
            mac
        });
        Digest { crc: 0, mac }
    }

    fn of(key: Option<&Key>, payload: &[u8]) -> Digest {
        let mut digest = Digest::new(key, payload.len());
        for chunk in payload.chunks(CHUNK) {
            digest.update(chunk);
        }
        digest
    }

    fn update(&mut self, chunk: &[u8]) {
        self.crc = crc32c::crc32c_append(self.crc, chunk);
        if let Some(mac) = &mut self.mac {
            mac.bytes(chunk);
        }
    }

    /// The MAC's last part, the prefix as written.
    fn with_prefix(mut self, prefix: &[u8; PREFIX_LEN]) -> Option<Streaming> {
        let mac = self.mac.as_mut()?;
        mac.part(PREFIX_LEN as u64);
        mac.bytes(prefix);
        self.mac
    }
}

/// Writes a whole file under the temporary name `temp`: `prefix_of` gets
/// the payload's checksum and returns the prefix. With `key`, the file
/// is sealed: its MAC follows the payload.
pub fn write_temp(
    temp: &Path,
    payload: &[u8],
    checksum: Checksum,
    fsync: bool,
    key: Option<&Key>,
    prefix_of: impl FnOnce(u32) -> [u8; PREFIX_LEN],
) -> io::Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(temp)?;
    let result = (|| {
        let digest = if checksum.beside(payload.len()) {
            std::thread::scope(|s| {
                let checksum = std::thread::Builder::new()
                    .name("tether-checksum".into())
                    .spawn_scoped(s, || Digest::of(key, payload));
                write_payload(&file, payload, None)?;
                Ok::<Digest, io::Error>(match checksum {
                    Ok(thread) => thread.join().unwrap_or_else(|_| Digest::of(key, payload)),
                    Err(_) => Digest::of(key, payload),
                })
            })?
        } else {
            let mut digest = Digest::new(key, payload.len());
            write_payload(&file, payload, Some(&mut digest))?;
            digest
        };
        let prefix = prefix_of(digest.crc);
        file.write_all_at(&prefix, 0)?;
        if let Some(mac) = digest.with_prefix(&prefix) {
            let at = (PREFIX_LEN + payload.len()) as u64;
            file.write_all_at(&mac.finish(), at)?;
        }
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

/// Writes `payload` after the prefix's place, feeding `digest` (when
/// given) chunk by chunk, each while it is in cache.
fn write_payload(file: &File, payload: &[u8], mut digest: Option<&mut Digest>) -> io::Result<()> {
    let mut offset = PREFIX_LEN as u64;
    for chunk in payload.chunks(CHUNK) {
        if let Some(digest) = digest.as_deref_mut() {
            digest.update(chunk);
        }
        file.write_all_at(chunk, offset)?;
        offset += chunk.len() as u64;
    }
    Ok(())
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// An open file whose prefix has been verified.
pub struct Opened {
    pub file: File,
    pub prefix: Prefix,
    /// The run's key, which a sealed file's MAC is checked against.
    key: Option<Arc<Key>>,
}

/// What opening a file found.
pub enum Found {
    /// No file of that name (yet).
    Missing,
    /// A file that must not be consumed, and why.
    Bad(FileProblem),
    Good(Opened),
}

/// Opens `path` and verifies its prefix against `expected`: sealed with
/// `key` when there is one, unsealed otherwise.
pub fn open(path: &Path, expected: &Envelope, key: Option<&Arc<Key>>) -> io::Result<Found> {
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
        match format::decode_prefix(&prefix[..have], len, expected, key.is_some()) {
            Ok(prefix) => Found::Good(Opened {
                file,
                prefix,
                key: key.cloned(),
            }),
            Err(problem) => Found::Bad(problem),
        },
    )
}

impl Opened {
    /// Reads the payload into `dst` (exactly its length) and verifies its
    /// MAC (a sealed file) and checksum. On a mismatch `dst` holds the bad
    /// bytes; the caller must not deliver them.
    pub fn read_payload(
        &self,
        dst: &mut [u8],
        checksum: Checksum,
    ) -> io::Result<Result<(), FileProblem>> {
        debug_assert_eq!(dst.len() as u64, self.prefix.payload_len);
        let digest = if checksum.beside(dst.len()) {
            self.read_checksummed_beside(dst)?
        } else {
            let mut digest = self.digest(dst.len());
            let mut offset = PREFIX_LEN as u64;
            for chunk in dst.chunks_mut(CHUNK) {
                self.file.read_exact_at(chunk, offset)?;
                digest.update(chunk);
                offset += chunk.len() as u64;
            }
            digest
        };
        let crc = digest.crc;
        if self.prefix.sealed {
            let mut tag = [0u8; SEAL_LEN as usize];
            let at = PREFIX_LEN as u64 + self.prefix.payload_len;
            self.file.read_exact_at(&mut tag, at)?;
            let checks = digest
                .with_prefix(&self.prefix.bytes)
                .is_some_and(|mac| mac.check(&tag));
            if !checks {
                return Ok(Err(FileProblem::BadSeal));
            }
        }
        Ok(format::check_payload(&self.prefix, crc))
    }

    fn digest(&self, payload_len: usize) -> Digest {
        let key = self.key.as_deref().filter(|_| self.prefix.sealed);
        Digest::new(key, payload_len)
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
    fn read_checksummed_beside(&self, dst: &mut [u8]) -> io::Result<Digest> {
        let (chunks, ready) = std::sync::mpsc::channel::<&[u8]>();
        let beside = self.digest(dst.len());
        let mut inline = self.digest(dst.len());
        std::thread::scope(|s| {
            let checksum = std::thread::Builder::new()
                .name("tether-checksum".into())
                .spawn_scoped(s, move || {
                    ready.iter().fold(beside, |mut digest, chunk| {
                        digest.update(chunk);
                        digest
                    })
                });
            let mut offset = PREFIX_LEN as u64;
            for chunk in dst.chunks_mut(CHUNK) {
                self.file.read_exact_at(chunk, offset)?;
                offset += chunk.len() as u64;
                let chunk: &[u8] = chunk;
                if checksum.is_ok() {
                    // The thread is alive until every sender is dropped.
                    let _ = chunks.send(chunk);
                } else {
                    inline.update(chunk);
                }
            }
            drop(chunks);
            Ok(match checksum {
                // A checksum thread that died yields a mismatch, never a
                // false match.
                Ok(thread) => thread.join().unwrap_or(Digest {
                    crc: !inline.crc,
                    mac: None,
                }),
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
        write_sealed(dir, name, payload, checksum, None)
    }

    fn write_sealed(
        dir: &Path,
        name: &str,
        payload: &[u8],
        checksum: Checksum,
        key: Option<&Key>,
    ) -> PathBuf {
        let temp = dir.join(format!(".tmp-{name}"));
        let frame = FrameHeader::new(FrameKind::Data);
        write_temp(&temp, payload, checksum, false, key, |crc| {
            encode_prefix(
                &envelope(),
                &frame,
                payload.len() as u64,
                crc,
                key.is_some(),
            )
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
        let Found::Good(opened) = open(&path, &envelope(), None).unwrap() else {
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
            let Found::Good(opened) = open(&path, &envelope(), None).unwrap() else {
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
    fn sealed_files_are_consumed_with_their_key_only_and_any_change_is_caught() {
        let dir = scratch("sealed");
        let key = Arc::new(Key::new(&[7; 32], "test").unwrap());
        let other = Arc::new(Key::new(&[8; 32], "test").unwrap());
        let small = b"sealed payload".to_vec();
        let large: Vec<u8> = (0..PARALLEL_CHECKSUM_MIN + 9).map(|i| i as u8).collect();
        let mut n = 0;
        for payload in [&small, &large] {
            for checksum in [Checksum::Beside, Checksum::Inline] {
                n += 1;
                let path = write_sealed(&dir, &format!("0-{n}.msg"), payload, checksum, Some(&key));
                assert_eq!(
                    std::fs::metadata(&path).unwrap().len(),
                    (PREFIX_LEN + payload.len()) as u64 + SEAL_LEN
                );
                let mut back = vec![0u8; payload.len()];
                let Found::Good(opened) = open(&path, &envelope(), Some(&key)).unwrap() else {
                    panic!("sealed file refused");
                };
                opened.read_payload(&mut back, checksum).unwrap().unwrap();
                assert_eq!(&back, payload);
                // Another key: refused before anything is delivered.
                let Found::Good(opened) = open(&path, &envelope(), Some(&other)).unwrap() else {
                    panic!("prefix refused");
                };
                let read = opened.read_payload(&mut back, checksum).unwrap();
                assert_eq!(read, Err(FileProblem::BadSeal));
                // A changed payload whose CRC is fixed up still fails the MAC.
                let mut bytes = std::fs::read(&path).unwrap();
                bytes[PREFIX_LEN] ^= 1;
                let crc = crc32c::crc32c(&bytes[PREFIX_LEN..PREFIX_LEN + payload.len()]);
                let frame = FrameHeader::new(FrameKind::Data);
                let prefix = encode_prefix(&envelope(), &frame, payload.len() as u64, crc, true);
                bytes[..PREFIX_LEN].copy_from_slice(&prefix);
                std::fs::write(&path, &bytes).unwrap();
                let Found::Good(opened) = open(&path, &envelope(), Some(&key)).unwrap() else {
                    panic!("prefix refused");
                };
                let read = opened.read_payload(&mut back, checksum).unwrap();
                assert_eq!(read, Err(FileProblem::BadSeal));
            }
        }
        // Unsealed files are refused by a keyed reader at once.
        let path = write(&dir, "0-0.msg", b"plain");
        assert!(matches!(
            open(&path, &envelope(), Some(&key)).unwrap(),
            Found::Bad(FileProblem::NotSealed)
        ));
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
        let Found::Good(opened) = open(&path, &envelope(), None).unwrap() else {
            panic!("prefix is intact");
        };
        let mut back = [0u8; 10];
        assert!(matches!(
            opened.read_payload(&mut back, Checksum::Beside).unwrap(),
            Err(FileProblem::PayloadChecksum { .. })
        ));
        file.set_len(PREFIX_LEN as u64 + 4).unwrap();
        assert!(matches!(
            open(&path, &envelope(), None).unwrap(),
            Found::Bad(FileProblem::Size { .. })
        ));
        assert!(matches!(
            open(&dir.join("absent"), &envelope(), None).unwrap(),
            Found::Missing
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

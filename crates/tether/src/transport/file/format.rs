//! What a file of the `file` and `hybrid` transports holds, and how a
//! reader decides it may be consumed. No I/O here.
//!
//! A file is a *prefix* followed by a payload:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `b"TTHF"` |
//! | 4 | 2 | file format version ([`VERSION`]) |
//! | 6 | 2 | flags: [`FLAG_SEALED`] or 0 |
//! | 8 | 8 | run id ([`run_id`] of the run directory's name) |
//! | 16 | 4 | sender's universe rank |
//! | 20 | 4 | receiver's universe rank |
//! | 24 | 8 | sequence number of this file, per sender and receiver, from 0 |
//! | 32 | 8 | payload length in bytes |
//! | 40 | 4 | CRC32C of the payload |
//! | 44 | 4 | CRC32C of bytes 0..44 and of the frame header that follows |
//! | 48 | 56 | the engine's frame header (`tether_proto::wire`), unchanged |
//! | 104 | n | the payload |
//! | 104 + n | 32 | sealed files only: `HMAC-SHA256(key, SEAL_LABEL, payload, bytes 0..104)` |
//!
//! A run with a key ([`tether_auth`]) seals every file and consumes only
//! sealed files whose MAC checks: a file written without the key is
//! refused (moved aside), however well formed, so it can neither pass for
//! a message nor take a genuine message's place in the sequence. The MAC
//! covers the payload itself, not its CRC, which anyone can recompute.
//!
//! All integers are little-endian. The prefix checksum is verified before
//! anything in the file is believed (so a length cannot be trusted before
//! it is known to be intact); the payload checksum after the payload is
//! read, before the message is handed to the engine. A file whose size is
//! not exactly prefix + payload length is truncated or has trailing bytes,
//! and is refused as well.

use tether_proto::wire::HEADER_LEN;
use tether_proto::FrameHeader;

/// The four bytes every file of these transports starts with.
pub const MAGIC: [u8; 4] = *b"TTHF";
/// The file format this build writes and reads.
pub const VERSION: u16 = 1;
/// Size of the file's own header (before the frame header).
pub const FILE_HEADER_LEN: usize = 48;
/// Bytes before the payload.
pub const PREFIX_LEN: usize = FILE_HEADER_LEN + HEADER_LEN;
/// Flag of a sealed file: its MAC follows the payload.
pub const FLAG_SEALED: u16 = 1;
/// Bytes of the MAC after a sealed file's payload.
pub const SEAL_LEN: u64 = tether_auth::TAG_LEN as u64;
/// The label of a file's MAC.
pub const SEAL_LABEL: &str = "tether file v1";

/// Who wrote a file, for whom, and in what place of the sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    pub run: u64,
    pub sender: u32,
    pub receiver: u32,
    pub seq: u64,
}

/// A decoded, verified prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub envelope: Envelope,
    pub payload_len: u64,
    pub payload_crc: u32,
    /// Whether a MAC follows the payload.
    pub sealed: bool,
    /// The prefix as written, which the MAC covers.
    pub bytes: [u8; PREFIX_LEN],
    /// The frame header bytes, for the engine to decode against its own
    /// expectations.
    pub frame: [u8; HEADER_LEN],
}

/// Why a file may not be consumed. Each reason says what was wrong in
/// terms a person reading the log can check against the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileProblem {
    #[error("truncated: {got} bytes, at least {PREFIX_LEN} expected for the header")]
    ShortPrefix { got: u64 },
    #[error("bad magic: expected {:02x?} (\"TTHF\"), got {got:02x?}", MAGIC)]
    BadMagic { got: [u8; 4] },
    #[error("unsupported file format version {got} (this build reads {VERSION})")]
    BadVersion { got: u16 },
    #[error("flags are {got:#06x}, this build knows {FLAG_SEALED:#06x} only (a later format?)")]
    Reserved { got: u16 },
    #[error(
        "not sealed with the run's key: written by a process without it (another run's, or forged)"
    )]
    NotSealed,
    #[error("sealed with a key, and this process has none (TETHER_KEY_FILE unset here)")]
    SealedButNoKey,
    #[error("its MAC does not check against this run's key: written without the key, or altered")]
    BadSeal,
    #[error("header checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    PrefixChecksum { stored: u32, computed: u32 },
    #[error("belongs to another run (run id {got:#018x}, this run is {expected:#018x})")]
    ForeignRun { expected: u64, got: u64 },
    #[error("{field} is {got}, the file name says {expected}")]
    Mismatch {
        field: &'static str,
        expected: u64,
        got: u64,
    },
    #[error("truncated or overlong: {got} bytes, the header says {expected}")]
    Size { expected: u64, got: u64 },
    #[error("payload checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    PayloadChecksum { stored: u32, computed: u32 },
}

/// The run id written into every file: a 64-bit FNV-1a hash of the run
/// directory's name, which is unique per run.
pub fn run_id(run_name: &str) -> u64 {
    let mut id: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in run_name.bytes() {
        id = (id ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    id
}

/// Encodes the prefix of a file carrying `frame` and a payload of
/// `payload_len` bytes whose checksum is `payload_crc`.
pub fn encode_prefix(
    envelope: &Envelope,
    frame: &FrameHeader,
    payload_len: u64,
    payload_crc: u32,
    sealed: bool,
) -> [u8; PREFIX_LEN] {
    let mut out = [0u8; PREFIX_LEN];
    out[0..4].copy_from_slice(&MAGIC);
    out[4..6].copy_from_slice(&VERSION.to_le_bytes());
    let flags = if sealed { FLAG_SEALED } else { 0 };
    out[6..8].copy_from_slice(&flags.to_le_bytes());
    out[8..16].copy_from_slice(&envelope.run.to_le_bytes());
    out[16..20].copy_from_slice(&envelope.sender.to_le_bytes());
    out[20..24].copy_from_slice(&envelope.receiver.to_le_bytes());
    out[24..32].copy_from_slice(&envelope.seq.to_le_bytes());
    out[32..40].copy_from_slice(&payload_len.to_le_bytes());
    out[40..44].copy_from_slice(&payload_crc.to_le_bytes());
    out[FILE_HEADER_LEN..].copy_from_slice(&frame.encode());
    let crc = prefix_crc(&out);
    out[44..48].copy_from_slice(&crc.to_le_bytes());
    out
}

fn prefix_crc(prefix: &[u8; PREFIX_LEN]) -> u32 {
    let crc = crc32c::crc32c(&prefix[..44]);
    crc32c::crc32c_append(crc, &prefix[FILE_HEADER_LEN..])
}

/// Decodes `bytes` (the first bytes of a file of `file_len` bytes) and
/// checks it against what the reader expects: this run, and the sender,
/// receiver and sequence number that the file's name promised, sealed
/// when the reader has a key (`keyed`) and not otherwise.
pub fn decode_prefix(
    bytes: &[u8],
    file_len: u64,
    expected: &Envelope,
    keyed: bool,
) -> Result<Prefix, FileProblem> {
    let Ok(prefix) = <&[u8; PREFIX_LEN]>::try_from(bytes.get(..PREFIX_LEN).unwrap_or(bytes)) else {
        return Err(FileProblem::ShortPrefix {
            got: bytes.len() as u64,
        });
    };
    let magic: [u8; 4] = prefix[0..4].try_into().expect("4 bytes");
    if magic != MAGIC {
        return Err(FileProblem::BadMagic { got: magic });
    }
    let version = u16::from_le_bytes([prefix[4], prefix[5]]);
    if version != VERSION {
        return Err(FileProblem::BadVersion { got: version });
    }
    let u32_at = |at: usize| u32::from_le_bytes(prefix[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(prefix[at..at + 8].try_into().expect("8 bytes"));
    let stored = u32_at(44);
    let computed = prefix_crc(prefix);
    if stored != computed {
        return Err(FileProblem::PrefixChecksum { stored, computed });
    }
    // Checked after the checksum: the checksum covers them, so a writer
    // set them, and a reader that ignored them could misread its format.
    let flags = u16::from_le_bytes([prefix[6], prefix[7]]);
    if flags & !FLAG_SEALED != 0 {
        return Err(FileProblem::Reserved { got: flags });
    }
    let sealed = flags & FLAG_SEALED != 0;
    let envelope = Envelope {
        run: u64_at(8),
        sender: u32_at(16),
        receiver: u32_at(20),
        seq: u64_at(24),
    };
    if envelope.run != expected.run {
        return Err(FileProblem::ForeignRun {
            expected: expected.run,
            got: envelope.run,
        });
    }
    let fields = [
        ("sender", expected.sender.into(), envelope.sender.into()),
        (
            "receiver",
            expected.receiver.into(),
            envelope.receiver.into(),
        ),
        ("sequence number", expected.seq, envelope.seq),
    ];
    for (field, expected, got) in fields {
        if expected != got {
            return Err(FileProblem::Mismatch {
                field,
                expected,
                got,
            });
        }
    }
    // After the envelope: a file of another run or place says so first.
    match (sealed, keyed) {
        (false, true) => return Err(FileProblem::NotSealed),
        (true, false) => return Err(FileProblem::SealedButNoKey),
        _ => {}
    }
    let payload_len = u64_at(32);
    let trailer = if sealed { SEAL_LEN } else { 0 };
    let total = payload_len.checked_add(PREFIX_LEN as u64 + trailer);
    if total != Some(file_len) {
        return Err(FileProblem::Size {
            expected: total.unwrap_or(u64::MAX),
            got: file_len,
        });
    }
    Ok(Prefix {
        envelope,
        payload_len,
        payload_crc: u32_at(40),
        sealed,
        bytes: *prefix,
        frame: prefix[FILE_HEADER_LEN..].try_into().expect("frame header"),
    })
}

/// Checks a payload's computed checksum against the stored one.
pub fn check_payload(prefix: &Prefix, computed: u32) -> Result<(), FileProblem> {
    if computed == prefix.payload_crc {
        Ok(())
    } else {
        Err(FileProblem::PayloadChecksum {
            stored: prefix.payload_crc,
            computed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_proto::FrameKind;

    fn envelope() -> Envelope {
        Envelope {
            run: run_id("run-test"),
            sender: 3,
            receiver: 1,
            seq: 7,
        }
    }

    fn file(payload: &[u8]) -> Vec<u8> {
        let mut frame = FrameHeader::new(FrameKind::Eager);
        frame.seq = 7;
        frame.tag = 42;
        frame.payload_len = payload.len() as u64;
        let mut bytes = encode_prefix(
            &envelope(),
            &frame,
            payload.len() as u64,
            crc32c::crc32c(payload),
            false,
        )
        .to_vec();
        bytes.extend_from_slice(payload);
        bytes
    }

    fn decode(bytes: &[u8]) -> Result<Prefix, FileProblem> {
        decode_prefix(bytes, bytes.len() as u64, &envelope(), false)
    }

    #[test]
    fn a_good_file_round_trips() {
        let bytes = file(b"hello");
        let prefix = decode(&bytes).unwrap();
        assert_eq!(prefix.envelope, envelope());
        assert_eq!(prefix.payload_len, 5);
        check_payload(&prefix, crc32c::crc32c(b"hello")).unwrap();
        let frame = FrameHeader::decode(&prefix.frame, 7, 1 << 20).unwrap();
        assert_eq!(frame.tag, 42);
    }

    #[test]
    fn every_flipped_prefix_bit_is_refused() {
        let bytes = file(b"payload");
        for byte in 0..PREFIX_LEN {
            for bit in 0..8 {
                let mut bad = bytes.clone();
                bad[byte] ^= 1 << bit;
                assert!(
                    decode(&bad).is_err(),
                    "byte {byte} bit {bit} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn unknown_flags_are_refused_even_with_a_good_checksum() {
        let mut bytes = file(b"payload");
        bytes[6] = 2;
        let prefix: &[u8; PREFIX_LEN] = bytes[..PREFIX_LEN].try_into().unwrap();
        let crc = prefix_crc(prefix);
        bytes[44..48].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            decode(&bytes).unwrap_err(),
            FileProblem::Reserved { got: 2 }
        );
    }

    #[test]
    fn a_keyed_reader_takes_sealed_files_only_and_a_keyless_one_unsealed_only() {
        let bytes = file(b"payload");
        let len = bytes.len() as u64;
        assert_eq!(
            decode_prefix(&bytes, len, &envelope(), true).unwrap_err(),
            FileProblem::NotSealed
        );
        let mut frame = FrameHeader::new(FrameKind::Eager);
        frame.payload_len = 7;
        let sealed = encode_prefix(&envelope(), &frame, 7, crc32c::crc32c(b"payload"), true);
        let with_mac = PREFIX_LEN as u64 + 7 + SEAL_LEN;
        assert!(
            decode_prefix(&sealed, with_mac, &envelope(), true)
                .unwrap()
                .sealed
        );
        assert_eq!(
            decode_prefix(&sealed, with_mac, &envelope(), false).unwrap_err(),
            FileProblem::SealedButNoKey
        );
        assert!(matches!(
            decode_prefix(&sealed, with_mac - SEAL_LEN, &envelope(), true),
            Err(FileProblem::Size { .. })
        ));
    }

    #[test]
    fn a_flipped_payload_bit_fails_the_payload_checksum() {
        let mut bytes = file(b"payload");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x10;
        let prefix = decode(&bytes).unwrap();
        let problem = check_payload(&prefix, crc32c::crc32c(&bytes[PREFIX_LEN..])).unwrap_err();
        assert!(matches!(problem, FileProblem::PayloadChecksum { .. }));
    }

    #[test]
    fn truncated_and_overlong_files_are_refused() {
        let bytes = file(b"0123456789");
        assert!(matches!(
            decode(&bytes[..PREFIX_LEN - 1]),
            Err(FileProblem::ShortPrefix { got }) if got == PREFIX_LEN as u64 - 1
        ));
        let problem =
            decode_prefix(&bytes, bytes.len() as u64 - 3, &envelope(), false).unwrap_err();
        assert_eq!(
            problem.to_string(),
            "truncated or overlong: 111 bytes, the header says 114"
        );
        assert!(decode_prefix(&bytes, bytes.len() as u64 + 1, &envelope(), false).is_err());
        assert!(decode(&[]).is_err());
    }

    #[test]
    fn files_of_another_run_or_pair_or_place_are_refused() {
        let bytes = file(b"x");
        let mut other = envelope();
        other.run = run_id("run-older");
        assert!(matches!(
            decode_prefix(&bytes, bytes.len() as u64, &other, false),
            Err(FileProblem::ForeignRun { .. })
        ));
        for change in [
            |e: &mut Envelope| e.sender = 4,
            |e: &mut Envelope| e.receiver = 0,
            |e: &mut Envelope| e.seq = 8,
        ] {
            let mut other = envelope();
            change(&mut other);
            assert!(matches!(
                decode_prefix(&bytes, bytes.len() as u64, &other, false),
                Err(FileProblem::Mismatch { .. })
            ));
        }
    }
}

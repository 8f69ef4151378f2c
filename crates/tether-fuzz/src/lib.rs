//! The bodies of Tether's fuzz targets, one function per target, each
//! taking the fuzzer's bytes. They cover every decoder that reads bytes
//! another process wrote:
//!
//! | target | decoder |
//! |---|---|
//! | [`frame_header`] | `tether_proto::FrameHeader::decode` |
//! | [`hello`] | `tether_proto::Hello::decode` |
//! | [`file_prefix`] | `tether::transport::file::format::decode_prefix` |
//! | [`rendezvous`] | `tether_rendezvous::protocol`: `read_line`, `Request::parse` (the server's side), `Reply::parse` (the client's side) |
//! | [`engine`] | `tether_proto::Engine` fed a hostile peer's frames |
//! | [`field_descriptions`] | fields' `Hello::decode`, `decode_local`, `decode_side` and `tether_redist::Dist::decode`, and what the runtime then does with a description (`check`, `plan`) |
//! | [`dispatch`] | `tether_proto::classify` on every kind of link, then `tether_proto::deliver` |
//! | [`link`] | `tether_proto::Link` (handshake, sequence numbers, goodbye, deadlines) and `tether_proto::link::Resequencer`, fed a hostile peer's frames on a virtual clock |
//! | [`onesided`] | `tether_proto::Engine`'s one-sided operations: `RmaRequest` and `RmaReply` frames from hostile peers, windows, applies, flushes and remote memory operations |
//!
//! A target returns normally for every input; a panic (a failed check
//! included) is a finding. `fuzz/` (cargo-fuzz, nightly) wraps each one
//! in a `fuzz_target!`, and `tests/corpus.rs` replays the committed
//! corpora on stable. See docs/FUZZING.md.

mod dispatch;
mod engine;
mod handshake;
mod input;
mod link;
mod onesided;

pub use dispatch::dispatch;
pub use engine::engine;
pub use handshake::handshake;
pub use link::link;
pub use onesided::onesided;

use std::io::{BufReader, Cursor};

use tether::transport::file::format::{
    check_payload, decode_prefix, encode_prefix, Envelope, FILE_HEADER_LEN, FLAG_SEALED,
    PREFIX_LEN, SEAL_LEN,
};
use tether_proto::wire::{
    FrameKind, FLAG_CHUNK, FLAG_PAYLOAD_IN_FILE, FLAG_REMOTE_KEY, FLAG_SPLIT, FLAG_WRITTEN,
    HEADER_LEN, MAX_CONTROL_PAYLOAD,
};
use tether_proto::RemoteKey;
use tether_proto::{FrameHeader, Hello};
use tether_rendezvous::protocol::{read_line, Line, Reply, Request, MAX_LINE};

use input::Input;

/// A target's body.
pub type Target = fn(&[u8]);

/// The targets by name, as `fuzz/` and `fuzz/corpus/` spell them.
pub const TARGETS: [(&str, Target); 10] = [
    ("frame_header", frame_header),
    ("hello", hello),
    ("file_prefix", file_prefix),
    ("rendezvous", rendezvous),
    ("engine", engine),
    ("field_descriptions", field_descriptions),
    ("dispatch", dispatch),
    ("link", link),
    ("onesided", onesided),
    ("handshake", handshake),
];

/// `FrameHeader::decode` of the first [`HEADER_LEN`] bytes, against the
/// expected sequence number and eager bound in the next 8 + 8 bytes
/// (0 and 65536 where the input is shorter).
///
/// A header that decodes must carry the expected sequence number, a
/// payload length within its kind's bound, flags only its kind allows,
/// and encode back to exactly the bytes it came from.
pub fn frame_header(data: &[u8]) {
    let Some(bytes) = data.get(..HEADER_LEN) else {
        return;
    };
    let bytes: &[u8; HEADER_LEN] = bytes.try_into().expect("HEADER_LEN bytes");
    let mut rest = Input::new(&data[HEADER_LEN..]);
    let expected_seq = rest.u64().unwrap_or(0);
    let max_eager = rest.u64().unwrap_or(65536);
    match FrameHeader::decode(bytes, expected_seq, max_eager) {
        Ok(header) => {
            assert_eq!(header.seq, expected_seq);
            let bound = match header.kind {
                FrameKind::Hello
                | FrameKind::HelloAck
                | FrameKind::HelloReject
                | FrameKind::Challenge
                | FrameKind::Proof => MAX_CONTROL_PAYLOAD,
                FrameKind::Eager => max_eager,
                FrameKind::Data if header.flags & FLAG_WRITTEN != 0 => 0,
                FrameKind::Data | FrameKind::RmaRequest | FrameKind::RmaReply => u64::MAX,
                FrameKind::Rts | FrameKind::Cts if header.flags & FLAG_REMOTE_KEY != 0 => {
                    assert_eq!(header.payload_len, RemoteKey::ENCODED_LEN as u64);
                    RemoteKey::ENCODED_LEN as u64
                }
                _ => 0,
            };
            assert!(header.payload_len <= bound, "{header:?}");
            let allowed = match header.kind {
                FrameKind::Data => FLAG_PAYLOAD_IN_FILE | FLAG_WRITTEN | FLAG_CHUNK,
                FrameKind::Rts => FLAG_REMOTE_KEY,
                FrameKind::Cts => FLAG_REMOTE_KEY | FLAG_SPLIT,
                _ => 0,
            };
            assert_eq!(header.flags & !allowed, 0, "{header:?}");
            // A `Data` frame's payload is in one place only.
            let places = header.flags & (FLAG_PAYLOAD_IN_FILE | FLAG_WRITTEN | FLAG_CHUNK);
            assert!(places.count_ones() <= 1, "{header:?}");
            if header.flags & FLAG_SPLIT != 0 {
                assert_ne!(header.flags & FLAG_REMOTE_KEY, 0, "{header:?}");
            }
            assert_eq!(&header.encode(), bytes);
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// `Hello::decode` of the whole input. A handshake that decodes encodes
/// back to exactly the same bytes (the format has one encoding per value).
pub fn hello(data: &[u8]) {
    match Hello::decode(data) {
        Ok(hello) => assert_eq!(hello.encode(), data, "{hello:?}"),
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// `decode_prefix` as the file transport calls it: on at most
/// `PREFIX_LEN` bytes of a file, with the file's length and the envelope
/// its name promised.
///
/// Input: one byte of switches, then the file. Switch bit 0 writes the
/// correct prefix checksum into the file first (so that the checks after
/// the checksum are reached); bit 1 expects the envelope the file holds
/// (else the next 24 bytes give it); bit 2 takes the file's length from
/// the next 8 bytes (else it is the file's true length).
///
/// A prefix that decodes must match the expected envelope and the file's
/// length, have its reserved bytes 0, and encode back to the same bytes
/// when its frame header decodes.
pub fn file_prefix(data: &[u8]) {
    let mut input = Input::new(data);
    let Some(switches) = input.u8() else {
        return;
    };
    let given_envelope = if switches & 2 == 0 {
        let (Some(run), Some(sender), Some(receiver), Some(seq)) =
            (input.u64(), input.u32(), input.u32(), input.u64())
        else {
            return;
        };
        Some(Envelope {
            run,
            sender,
            receiver,
            seq,
        })
    } else {
        None
    };
    let given_len = if switches & 4 != 0 {
        let Some(len) = input.u64() else { return };
        Some(len)
    } else {
        None
    };
    let mut file = input.rest().to_vec();
    if switches & 1 != 0 && file.len() >= PREFIX_LEN {
        let crc = crc32c::crc32c(&file[..44]);
        let crc = crc32c::crc32c_append(crc, &file[FILE_HEADER_LEN..PREFIX_LEN]);
        file[44..48].copy_from_slice(&crc.to_le_bytes());
    }
    let le_u32 = |at: usize| u32::from_le_bytes(file[at..at + 4].try_into().expect("4 bytes"));
    let le_u64 = |at: usize| u64::from_le_bytes(file[at..at + 8].try_into().expect("8 bytes"));
    let expected = match given_envelope {
        Some(envelope) => envelope,
        None if file.len() >= PREFIX_LEN => Envelope {
            run: le_u64(8),
            sender: le_u32(16),
            receiver: le_u32(20),
            seq: le_u64(24),
        },
        None => Envelope {
            run: 0,
            sender: 0,
            receiver: 0,
            seq: 0,
        },
    };
    let file_len = given_len.unwrap_or(file.len() as u64);
    let have = file.len().min(PREFIX_LEN);
    let keyed = switches & 2 != 0;
    match decode_prefix(&file[..have], file_len, &expected, keyed) {
        Ok(prefix) => {
            assert_eq!(prefix.envelope, expected);
            assert_eq!(
                prefix.sealed, keyed,
                "a file sealed or not against the reader's key"
            );
            let trailer = if keyed { SEAL_LEN } else { 0 };
            assert_eq!(
                prefix.payload_len.checked_add(PREFIX_LEN as u64 + trailer),
                Some(file_len)
            );
            let flags = if keyed { FLAG_SEALED } else { 0 };
            assert_eq!(&file[6..8], flags.to_le_bytes(), "unknown flags accepted");
            let frame = FrameHeader::decode(&prefix.frame, expected.seq, u64::MAX);
            if let Ok(frame) = frame {
                let again = encode_prefix(
                    &prefix.envelope,
                    &frame,
                    prefix.payload_len,
                    prefix.payload_crc,
                    prefix.sealed,
                );
                assert_eq!(&again[..], &file[..PREFIX_LEN]);
            }
            if file_len == file.len() as u64 && !keyed {
                let payload = &file[PREFIX_LEN..];
                let verdict = check_payload(&prefix, crc32c::crc32c(payload));
                assert_eq!(
                    verdict.is_ok(),
                    crc32c::crc32c(payload) == prefix.payload_crc
                );
            }
        }
        Err(problem) => {
            let _ = problem.to_string();
        }
    }
}

/// The rendezvous line protocol from both ends: the input is a stream
/// that `read_line` splits into lines (through a reader whose buffer size
/// the first byte picks, so that lines straddle buffer boundaries); every
/// line is parsed as a request (what the server reads from a client) and
/// as a reply (what a client reads from the server).
///
/// A line is never longer than [`MAX_LINE`] less its `\n`; a request or
/// reply that parses encodes to a line that parses to the same value.
pub fn rendezvous(data: &[u8]) {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let capacity = 1 + usize::from(first);
    let mut reader = BufReader::with_capacity(capacity, Cursor::new(stream));
    loop {
        let line = match read_line(&mut reader).expect("a cursor does not fail") {
            Line::Closed => return,
            Line::TooLong | Line::NotUtf8 => continue,
            Line::Text(line) => line,
        };
        assert!(line.len() < MAX_LINE, "{} bytes", line.len());
        assert!(!line.contains('\n'));
        if let Ok(request) = Request::parse(&line) {
            let encoded = request.encode();
            let again = encoded.strip_suffix('\n').expect("a line ends with \\n");
            assert_eq!(Request::parse(again).as_ref(), Ok(&request), "{line:?}");
        }
        if let Ok(reply) = Reply::parse(&line) {
            let encoded = reply.encode();
            let again = encoded.strip_suffix('\n').expect("a line ends with \\n");
            assert_eq!(Reply::parse(again).as_ref(), Ok(&reply), "{line:?}");
        }
    }
}

/// A field's descriptions as another process sends them: the first byte
/// picks the decoder (hello, a rank's local description, rank 0's side),
/// the rest is the message.
///
/// What decodes must encode to something that decodes to the same value,
/// and what the runtime does with a decoded distribution must not panic:
/// describing it, its first rank's local size, checking it against
/// itself and, when it has few enough ranks and elements to plan in a
/// moment, planning its rank 0 against itself.
pub fn field_descriptions(data: &[u8]) {
    use tether::field::wire::{decode_local, decode_side, encode_local, encode_side, Hello};
    use tether::field::LocalDist;
    let Some((&which, message)) = data.split_first() else {
        return;
    };
    let dist = match which % 3 {
        0 => Hello::decode(message).map(|hello| {
            assert_eq!(Hello::decode(&hello.encode()).as_ref(), Some(&hello));
            hello.dist
        }),
        1 => decode_local(message).and_then(|local| {
            assert_eq!(decode_local(&encode_local(&local)).as_ref(), Some(&local));
            match local {
                LocalDist::Regular(dist) => Some(dist),
                LocalDist::Boxes { .. } => None,
            }
        }),
        _ => decode_side(message).and_then(|side| {
            assert_eq!(decode_side(&encode_side(&side)).as_ref(), Some(&side));
            side.ok()
        }),
    };
    let Some(dist) = dist else {
        return;
    };
    let _ = dist.describe();
    if dist.ranks() == 0 {
        return;
    }
    let _ = dist.local_len(0);
    let elements: u128 = dist.shape().iter().map(|&n| n.max(1) as u128).product();
    if dist.ranks() <= 64 && elements <= 1 << 16 {
        assert!(
            tether_redist::check(&dist, &dist).is_ok(),
            "{}",
            dist.describe()
        );
        let _ = tether_redist::plan(&dist, &dist, tether_redist::Side::Producer, 0);
    }
}

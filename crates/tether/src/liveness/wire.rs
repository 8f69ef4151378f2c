//! The heartbeat datagram: 32 bytes, little-endian.
//!
//! ```text
//! 0  "TTHB"        magic
//! 4  1             version
//! 5  kind          1 ping, 2 pong, 3 given up, 4 goodbye
//! 6  0 0
//! 8  run tag       universe id mixed with universe rank 0's nonce
//! 16 from          sender's universe rank
//! 20 to            receiver's universe rank
//! 24 count         the sender's ping number (echoed in the pong)
//! ```
//!
//! A datagram of another length, magic, version or run, or one that is
//! not addressed to this process, is dropped without an answer.
//!
//! With the run's key, the 32 bytes are followed by their MAC
//! (HMAC-SHA256 under [`SEAL_LABEL`]), and a datagram without a MAC that
//! checks is dropped: otherwise anyone could keep a dead peer looking
//! alive, or make this process give a live one up (`GivenUp`) or stop
//! watching it (`Goodbye`). Replayed pings and pongs are refused by their
//! counts, which only grow (see the thread).

use tether_auth::{Key, TAG_LEN};

pub const LEN: usize = 32;
/// A sealed beat: the beat, then its MAC.
pub const SEALED_LEN: usize = LEN + TAG_LEN;
const SEAL_LABEL: &str = "tether heartbeat v1";
const MAGIC: &[u8; 4] = b"TTHB";
const VERSION: u8 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Are you there? Answered at once by the receiver's thread.
    Ping,
    /// Yes.
    Pong,
    /// The receiver's ping comes from a process this one gave up (it was
    /// silent too long): it is not answered any more.
    GivenUp,
    /// The sender finalized: its silence from now on is no failure.
    Goodbye,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Beat {
    pub kind: Kind,
    pub run: u64,
    pub from: u32,
    pub to: u32,
    pub count: u64,
}

impl Beat {
    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[..4].copy_from_slice(MAGIC);
        b[4] = VERSION;
        b[5] = match self.kind {
            Kind::Ping => 1,
            Kind::Pong => 2,
            Kind::GivenUp => 3,
            Kind::Goodbye => 4,
        };
        b[8..16].copy_from_slice(&self.run.to_le_bytes());
        b[16..20].copy_from_slice(&self.from.to_le_bytes());
        b[20..24].copy_from_slice(&self.to.to_le_bytes());
        b[24..32].copy_from_slice(&self.count.to_le_bytes());
        b
    }

    /// The beat as sent: sealed with `key` when there is one.
    pub fn encode_with(&self, key: Option<&Key>, out: &mut Vec<u8>) {
        out.clear();
        let bytes = self.encode();
        out.extend_from_slice(&bytes);
        if let Some(key) = key {
            out.extend_from_slice(&key.prove(SEAL_LABEL, &[&bytes]));
        }
    }

    /// The beat in `bytes` as sent with [`Beat::encode_with`]: sealed with
    /// `key` when there is one, and one of run `run` for `me`.
    pub fn decode_with(
        bytes: &[u8],
        key: Option<&Key>,
        run: u64,
        me: u32,
        size: u32,
    ) -> Option<Beat> {
        let beat = match key {
            None => bytes,
            Some(key) if bytes.len() == SEALED_LEN => {
                let (beat, tag) = bytes.split_at(LEN);
                key.check(SEAL_LABEL, &[beat], tag).then_some(beat)?
            }
            Some(_) => return None,
        };
        Beat::decode(beat, run, me, size)
    }

    /// The beat in `bytes`, if it is one of run `run` for `me`.
    pub fn decode(bytes: &[u8], run: u64, me: u32, size: u32) -> Option<Beat> {
        if bytes.len() != LEN
            || &bytes[..4] != MAGIC
            || bytes[4] != VERSION
            || bytes[6..8] != [0, 0]
        {
            return None;
        }
        let kind = match bytes[5] {
            1 => Kind::Ping,
            2 => Kind::Pong,
            3 => Kind::GivenUp,
            4 => Kind::Goodbye,
            _ => return None,
        };
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let long = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let beat = Beat {
            kind,
            run: long(8),
            from: word(16),
            to: word(20),
            count: long(24),
        };
        let ours = beat.run == run && beat.to == me && beat.from != me && beat.from < size;
        ours.then_some(beat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beats_round_trip_and_strangers_are_dropped() {
        let beat = Beat {
            kind: Kind::Ping,
            run: 0xfeed,
            from: 2,
            to: 0,
            count: 7,
        };
        let bytes = beat.encode();
        assert_eq!(Beat::decode(&bytes, 0xfeed, 0, 3), Some(beat));
        for kind in [Kind::Pong, Kind::GivenUp, Kind::Goodbye] {
            let other = Beat { kind, ..beat };
            assert_eq!(Beat::decode(&other.encode(), 0xfeed, 0, 3), Some(other));
        }
        assert_eq!(Beat::decode(&bytes, 0xbeef, 0, 3), None, "another run");
        assert_eq!(Beat::decode(&bytes, 0xfeed, 1, 3), None, "for another rank");
        assert_eq!(
            Beat::decode(&bytes, 0xfeed, 0, 2),
            None,
            "from outside the universe"
        );
        assert_eq!(Beat::decode(&bytes[..31], 0xfeed, 0, 3), None, "short");
        let from_me = Beat { from: 0, ..beat }.encode();
        assert_eq!(Beat::decode(&from_me, 0xfeed, 0, 3), None, "from this rank");
        for at in [0, 4, 5, 6] {
            let mut bad = bytes;
            bad[at] ^= 0x40;
            assert_eq!(Beat::decode(&bad, 0xfeed, 0, 3), None, "byte {at}");
        }
    }

    #[test]
    fn sealed_beats_pass_with_their_key_only() {
        let key = Key::new(&[5; 32], "test").unwrap();
        let other = Key::new(&[6; 32], "test").unwrap();
        let beat = Beat {
            kind: Kind::GivenUp,
            run: 9,
            from: 1,
            to: 0,
            count: 3,
        };
        let mut sealed = Vec::new();
        beat.encode_with(Some(&key), &mut sealed);
        assert_eq!(sealed.len(), SEALED_LEN);
        assert_eq!(Beat::decode_with(&sealed, Some(&key), 9, 0, 2), Some(beat));
        assert_eq!(Beat::decode_with(&sealed, Some(&other), 9, 0, 2), None);
        assert_eq!(
            Beat::decode_with(&sealed[..LEN], Some(&key), 9, 0, 2),
            None,
            "unsealed"
        );
        let mut forged = sealed.clone();
        forged[24] ^= 1;
        assert_eq!(
            Beat::decode_with(&forged, Some(&key), 9, 0, 2),
            None,
            "changed"
        );
        let mut plain = Vec::new();
        beat.encode_with(None, &mut plain);
        assert_eq!(Beat::decode_with(&plain, None, 9, 0, 2), Some(beat));
        assert_eq!(
            Beat::decode_with(&sealed, None, 9, 0, 2),
            None,
            "sealed, no key here"
        );
    }
}

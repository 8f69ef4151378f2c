//! The run's secret key and the proofs made with it.
//!
//! Every process of an authenticated run holds one [`Key`]. Two processes
//! that meet prove to each other that they hold it by a challenge and
//! response in which both contribute a fresh [`Nonce`]: each sends
//! `HMAC-SHA256(key, label, nonces, identities)` ([`Key::prove`]) and
//! checks the other's ([`Key::check`]). A recorded proof is worth nothing
//! later, because the other side's nonce will differ. Stored data (the
//! rendezvous entries, the file transport's files) carries a MAC made
//! the same way over its content.
//!
//! What this protects: nobody without the key joins a run, injects a
//! message, forges a rendezvous entry or a file. What it does not:
//! payloads travel in clear (no confidentiality), and a process of the
//! same user can read any process's memory anyway (the kernel's ptrace
//! rule), so the key guards against other users, other hosts and other
//! runs, not against one's own processes.
//!
//! No hand-written cryptography: HMAC and SHA-256 are the `hmac` and
//! `sha2` crates, randomness is the operating system's (`getrandom`).

mod file;

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub use file::{write_new_key_file, KeyError, KeySource};

/// Bytes of a MAC (an HMAC-SHA256 output).
pub const TAG_LEN: usize = 32;

/// Bytes of a nonce.
pub const NONCE_LEN: usize = 32;

/// The fewest bytes a key may have: a key is a shared secret, not a
/// password, and 16 random bytes are out of reach of a search.
pub const MIN_KEY_LEN: usize = 16;

/// A MAC.
pub type Tag = [u8; TAG_LEN];

/// A value used once: each side of a handshake draws its own, so that
/// neither side's proof can be replayed to the other.
pub type Nonce = [u8; NONCE_LEN];

/// The run's secret. Its `Debug` shows no byte of it, and nothing in this
/// crate writes it anywhere but a key file (see [`KeySource`]).
#[derive(Clone, PartialEq, Eq)]
pub struct Key {
    secret: Vec<u8>,
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// A key of `secret`'s bytes.
    ///
    /// Errors: [`KeyError::TooShort`] under [`MIN_KEY_LEN`] bytes
    /// (`origin` says where the key came from, for the message).
    pub fn new(secret: &[u8], origin: &str) -> Result<Key, KeyError> {
        if secret.len() < MIN_KEY_LEN {
            return Err(KeyError::TooShort {
                origin: origin.to_owned(),
                got: secret.len(),
            });
        }
        Ok(Key {
            secret: secret.to_vec(),
        })
    }

    /// A fresh random key, as the text a key file or `TETHER_KEY` holds
    /// (64 hexadecimal digits: 32 random bytes).
    pub fn generate_text() -> String {
        hex(&random::<32>())
    }

    /// `HMAC-SHA256(key, label, parts...)`. Each part is preceded by its
    /// length, so that no two different lists of parts hash alike; the
    /// label keeps a proof made for one purpose from passing for another.
    pub fn prove(&self, label: &str, parts: &[&[u8]]) -> Tag {
        self.mac(label, parts).finalize().into_bytes().into()
    }

    /// Whether `tag` is [`Key::prove`] of the same label and parts; the
    /// comparison takes the same time wherever the bytes differ.
    pub fn check(&self, label: &str, parts: &[&[u8]], tag: &[u8]) -> bool {
        self.mac(label, parts).verify_slice(tag).is_ok()
    }

    /// A MAC over parts given one by one, for data too large to hold
    /// twice (a file's payload, read or written in pieces): the same
    /// value as [`Key::prove`] of the same label and parts.
    pub fn begin(&self, label: &str) -> Streaming {
        Streaming(self.mac(label, &[]))
    }

    fn mac(&self, label: &str, parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes keys of any length");
        mac.update(&(label.len() as u64).to_le_bytes());
        mac.update(label.as_bytes());
        for part in parts {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        mac
    }
}

/// A MAC being computed ([`Key::begin`]): announce each part's length
/// with [`Streaming::part`], then give its bytes in any pieces with
/// [`Streaming::bytes`].
#[derive(Clone)]
pub struct Streaming(Hmac<Sha256>);

impl Streaming {
    /// Starts a part of `len` bytes.
    pub fn part(&mut self, len: u64) {
        self.0.update(&len.to_le_bytes());
    }

    /// More bytes of the current part.
    pub fn bytes(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub fn finish(self) -> Tag {
        self.0.finalize().into_bytes().into()
    }

    /// Whether `tag` is this MAC, compared in constant time.
    pub fn check(self, tag: &[u8]) -> bool {
        self.0.verify_slice(tag).is_ok()
    }
}

/// A fresh nonce from the operating system's random source.
pub fn nonce() -> Nonce {
    random::<NONCE_LEN>()
}

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    // The kernel's random source fails only before it is seeded at boot
    // or when the syscall is missing; a run cannot be authenticated then.
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    bytes
}

/// `bytes` as lower-case hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of lower-case or upper-case hexadecimal `text`, or `None`.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> Key {
        Key::new(&[byte; 32], "test").unwrap()
    }

    #[test]
    fn a_proof_checks_with_the_same_key_label_and_parts_only() {
        let tag = key(1).prove("hello", &[b"ab", b"c"]);
        assert!(key(1).check("hello", &[b"ab", b"c"], &tag));
        assert!(!key(2).check("hello", &[b"ab", b"c"], &tag));
        assert!(!key(1).check("other", &[b"ab", b"c"], &tag));
        // Moving a byte between parts changes the proof.
        assert!(!key(1).check("hello", &[b"a", b"bc"], &tag));
        assert!(!key(1).check("hello", &[b"ab", b"c"], &tag[..31]));
    }

    #[test]
    fn a_streamed_mac_equals_the_whole_one() {
        let mut streaming = key(1).begin("file");
        streaming.part(5);
        streaming.bytes(b"he");
        streaming.bytes(b"llo");
        streaming.part(1);
        streaming.bytes(b"!");
        let tag = key(1).prove("file", &[b"hello", b"!"]);
        assert!(streaming.clone().check(&tag));
        assert_eq!(streaming.finish(), tag);
    }

    #[test]
    fn short_keys_are_refused_and_keys_never_show() {
        let error = Key::new(b"short", "TETHER_KEY").unwrap_err();
        assert_eq!(
            error.to_string(),
            "the key from TETHER_KEY has 5 bytes; at least 16 are required (make one with `tether key new FILE`)"
        );
        let shown = format!("{:?}", Key::new(b"0123456789abcdefXYZ", "t").unwrap());
        assert_eq!(shown, "Key(..)");
    }

    #[test]
    fn nonces_and_generated_keys_differ() {
        assert_ne!(nonce(), nonce());
        let text = Key::generate_text();
        assert_eq!(text.len(), 64);
        assert_eq!(unhex(&text).unwrap().len(), 32);
        assert_ne!(text, Key::generate_text());
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
        assert_eq!(unhex("00AB10"), Some(vec![0, 0xab, 0x10]));
        assert_eq!(unhex("0g"), None);
        assert_eq!(unhex("abc"), None);
    }
}

//! The authenticated handshake: both sides prove they hold the run's key,
//! each over a nonce of its own and one of the other's, before the
//! acceptor's caller sees the `Hello`.
//!
//! ```text
//! connector                                   acceptor
//!   Hello + CAP_AUTH, nonce_c          ->
//!                                      <-     Challenge: nonce_a, proof_a, Hello_a
//!   checks proof_a
//!   Proof: proof_c                     ->
//!                                             checks proof_c; HelloReceived
//!                                      <-     HelloAck | HelloReject
//! ```
//!
//! `proof_a = HMAC(key, ACCEPTOR, nonce_c, nonce_a, Hello_c, Hello_a)`
//! and `proof_c` the same under [`CONNECTOR`], where `Hello_c` and
//! `Hello_a` are the encoded `Hello`s as sent. Each proof covers a nonce
//! its maker cannot have chosen, so a recorded handshake replayed to
//! either side fails; each covers both identities, so a proof made for
//! one pair of processes passes for no other. A process without a key
//! and one with a key refuse each other with a reason naming the
//! setting.

use tether_auth::{Key, Nonce, NONCE_LEN, TAG_LEN};

/// Label of the acceptor's proof.
const ACCEPTOR: &str = "tether link acceptor v1";
/// Label of the connector's proof.
const CONNECTOR: &str = "tether link connector v1";

/// This side's key and the nonce it drew for one link: a fresh nonce for
/// every link, from [`tether_auth::nonce`].
#[derive(Debug, Clone)]
pub struct LinkAuth {
    pub key: std::sync::Arc<Key>,
    pub nonce: Nonce,
}

/// The reason given when the connector authenticates and we cannot.
pub(super) const WE_HAVE_NO_KEY: &str = "the connecting process authenticates with a key and this process has none (set TETHER_KEY_FILE, or TETHER_KEY, as the peer does)";
/// The reason given when the connector does not authenticate and we must.
pub(super) const PEER_HAS_NO_KEY: &str = "the connecting process has no key and this process requires one (set TETHER_KEY_FILE, or TETHER_KEY, as this process does)";

/// The handshake as both sides see it: what the two proofs cover.
pub(super) struct Transcript<'a> {
    pub connector_nonce: &'a [u8],
    pub acceptor_nonce: &'a [u8],
    pub connector_hello: &'a [u8],
    pub acceptor_hello: &'a [u8],
}

impl Transcript<'_> {
    fn parts(&self) -> [&[u8]; 4] {
        [
            self.connector_nonce,
            self.acceptor_nonce,
            self.connector_hello,
            self.acceptor_hello,
        ]
    }

    pub fn acceptor_proof(&self, key: &Key) -> [u8; TAG_LEN] {
        key.prove(ACCEPTOR, &self.parts())
    }

    pub fn connector_proof(&self, key: &Key) -> [u8; TAG_LEN] {
        key.prove(CONNECTOR, &self.parts())
    }

    pub fn check_acceptor(&self, key: &Key, proof: &[u8]) -> bool {
        key.check(ACCEPTOR, &self.parts(), proof)
    }

    pub fn check_connector(&self, key: &Key, proof: &[u8]) -> bool {
        key.check(CONNECTOR, &self.parts(), proof)
    }
}

/// A `Challenge` payload: the acceptor's nonce, its proof, its `Hello`.
pub(super) fn challenge(nonce: &Nonce, proof: &[u8; TAG_LEN], hello: &[u8]) -> Vec<u8> {
    [nonce.as_slice(), proof.as_slice(), hello].concat()
}

/// A `Challenge` payload's nonce, proof and `Hello` bytes, or `None` when
/// it is too short to hold them.
pub(super) fn split_challenge(payload: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    if payload.len() < NONCE_LEN + TAG_LEN {
        return None;
    }
    let (nonce, rest) = payload.split_at(NONCE_LEN);
    let (proof, hello) = rest.split_at(TAG_LEN);
    Some((nonce, proof, hello))
}

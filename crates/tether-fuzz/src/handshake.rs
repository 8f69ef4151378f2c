//! The authenticated handshake against hostile input. A connector and an
//! acceptor, each with a key (the same one, or two others by the input's
//! choice), exchange their genuine frames through a wire the input
//! controls: each step delivers the next frame of one direction intact,
//! delivers it with one payload byte flipped, drops it, or injects a
//! control frame of the input's making (any kind, any payload, with the
//! sequence number the receiver expects, so that it is judged on its
//! content).
//!
//! What the handshake promises, checked after every step:
//! - the acceptor's caller sees the connector's `Hello` only when both
//!   hold the same key and every frame the acceptor read came intact
//!   from the genuine connector (nothing flipped, nothing injected);
//! - the connector's link opens only with the same key and when the
//!   `Challenge` it read was the acceptor's, intact, and nothing was
//!   injected before it. (The `HelloAck` after it is not covered by a
//!   proof: authentication says who is at the other end, not that each
//!   later byte is theirs, docs/RELIABILITY.md.)
//! - nothing panics, whatever arrives in whatever state.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tether_auth::Key;
use tether_proto::link::{Inbound, Link, LinkAuth, LinkConfig, LinkEvent, LinkState};
use tether_proto::wire::HEADER_LEN;
use tether_proto::{FrameHeader, FrameKind, Hello};

use crate::input::Input;

const CONNECTOR: usize = 0;
const ACCEPTOR: usize = 1;
const KINDS: [FrameKind; 7] = [
    FrameKind::Hello,
    FrameKind::HelloAck,
    FrameKind::HelloReject,
    FrameKind::Challenge,
    FrameKind::Proof,
    FrameKind::Bye,
    FrameKind::Eager,
];

struct End {
    link: Link,
    /// Frames the other end wrote, not yet read here: header bytes and
    /// payload.
    inbox: VecDeque<([u8; HEADER_LEN], Vec<u8>)>,
    /// Frames this end has read (its next expected sequence number).
    read: u64,
    /// A frame read here was flipped or injected.
    tainted: bool,
    /// The connector read the acceptor's `Challenge` intact.
    genuine_challenge: bool,
}

fn config(rank: u32, key: &Arc<Key>, nonce: u8) -> LinkConfig {
    LinkConfig {
        hello: Hello {
            universe_id: 0x5eed,
            universe_rank: rank,
            capabilities: 0,
            program: ["ocean", "atmosphere"][rank as usize].into(),
            program_rank: rank,
        },
        handshake_timeout: Duration::from_secs(5),
        goodbye_timeout: Duration::from_secs(5),
        max_eager: 1024,
        auth: Some(LinkAuth {
            key: key.clone(),
            nonce: [nonce; tether_auth::NONCE_LEN],
        }),
    }
}

/// The target: see the module's notes.
pub fn handshake(data: &[u8]) {
    outcome(data);
}

/// Runs the input; says whether the acceptor saw the `Hello` and the
/// connector's link opened.
fn outcome(data: &[u8]) -> (bool, bool) {
    let mut input = Input::new(data);
    let (Some(choice), Some(nonce_c), Some(nonce_a)) = (input.u8(), input.u8(), input.u8()) else {
        return (false, false);
    };
    let key = Arc::new(Key::new(&[0x11; 32], "fuzz").expect("long enough"));
    let other = Arc::new(Key::new(&[0x22; 32], "fuzz").expect("long enough"));
    let same_key = choice & 1 == 0;
    let acceptor_key = if same_key { &key } else { &other };
    let now = Instant::now();
    let mut ends = [
        End {
            link: Link::connector(config(0, &key, nonce_c), 1, now),
            inbox: VecDeque::new(),
            read: 0,
            tainted: false,
            genuine_challenge: false,
        },
        End {
            link: Link::acceptor(config(1, acceptor_key, nonce_a), now),
            inbox: VecDeque::new(),
            read: 0,
            tainted: false,
            genuine_challenge: false,
        },
    ];
    let mut hello_seen = false;
    let mut opened = false;
    while let Some(op) = input.u8() {
        for side in [CONNECTOR, ACCEPTOR] {
            while let Some(frame) = ends[side].link.poll_transmit() {
                ends[1 - side]
                    .inbox
                    .push_back((frame.header.encode(), frame.payload));
            }
        }
        let to = usize::from(op & 1);
        let end = &mut ends[to];
        let frame = match (op >> 1) % 4 {
            0 => end.inbox.pop_front(),
            1 => end.inbox.pop_front().map(|(header, mut payload)| {
                let at = input.u16().map_or(0, usize::from);
                if !payload.is_empty() {
                    let at = at % payload.len();
                    payload[at] ^= input.u8().unwrap_or(1).max(1);
                    end.tainted = true;
                }
                (header, payload)
            }),
            2 => {
                end.inbox.pop_front();
                None
            }
            _ => {
                let kind = KINDS[usize::from(input.u8().unwrap_or(0)) % KINDS.len()];
                let len = usize::from(input.u8().unwrap_or(0));
                let payload = input.take(len).unwrap_or_default().to_vec();
                let mut header = FrameHeader::new(kind);
                header.seq = end.read;
                header.tag = i32::from(input.u8().unwrap_or(0) % 4);
                header.payload_len = payload.len() as u64;
                end.tainted = true;
                Some((header.encode(), payload))
            }
        };
        if let Some((header, payload)) = frame {
            feed(end, &header, &payload);
        }
        for side in [CONNECTOR, ACCEPTOR] {
            while let Some(event) = ends[side].link.poll_event() {
                match event {
                    LinkEvent::HelloReceived(_) => {
                        assert_eq!(side, ACCEPTOR);
                        assert!(same_key, "a Hello passed with another key");
                        assert!(!ends[side].tainted, "a Hello passed after a forged frame");
                        hello_seen = true;
                        ends[side].link.accept_hello();
                    }
                    LinkEvent::Established { .. } if side == CONNECTOR => {
                        assert!(same_key, "the connector opened with another key");
                        assert!(
                            ends[side].genuine_challenge,
                            "the connector opened without the acceptor's genuine challenge"
                        );
                        opened = true;
                    }
                    _ => {}
                }
            }
        }
    }
    if opened {
        assert!(
            hello_seen,
            "the connector opened, the acceptor never saw its Hello"
        );
    }
    (hello_seen, opened)
}

/// Reads one frame into `end`'s link, as a connection would.
fn feed(end: &mut End, header: &[u8; HEADER_LEN], payload: &[u8]) {
    let before = end.link.state();
    let Ok(inbound) = end.link.on_header(header) else {
        return;
    };
    end.read += 1;
    if let Inbound::Control(decoded) = inbound {
        let kind = decoded.kind;
        let taken = end.link.on_control(&decoded, payload).is_ok();
        if kind == FrameKind::Challenge && taken && before == LinkState::AwaitingAck && !end.tainted
        {
            end.genuine_challenge = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::outcome;

    #[test]
    fn the_seeds_do_what_their_names_say() {
        assert_eq!(outcome(&[0, 7, 9, 1, 0, 1, 0]), (true, true), "genuine");
        assert_eq!(
            outcome(&[1, 7, 9, 1, 0, 1, 0]),
            (false, false),
            "another key"
        );
        assert_eq!(
            outcome(&[0, 7, 9, 3, 5, 0, 1, 0, 1, 0]),
            (false, false),
            "flipped Hello"
        );
    }
}

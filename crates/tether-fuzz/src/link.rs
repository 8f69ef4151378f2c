//! The link target: `tether_proto::Link`, the state machine of one link
//! (handshake, sequence numbers, goodbye, deadlines), and the
//! `Resequencer` that orders one peer's frames across links, on a virtual
//! clock.
//!
//! Two links face each other: a connector (universe rank 0, which dialled
//! rank 1) and an acceptor (rank 1). Each has an inbox of the frames the
//! other wrote. The fuzz bytes are a script: write a link's control
//! frames, read the next frame of its inbox (its payload as written or
//! with a byte flipped), feed it a hostile frame (56 raw header bytes, or
//! a header built from a few bytes with the sequence number the link
//! expects, and for a handshake frame the peer's `Hello`, a changed one
//! or raw bytes), accept or reject a `Hello`, stamp an engine frame,
//! close, retire or refuse a retire, let time pass (with or without handing it to the deadlines),
//! and push frames to or pop them from a resequencer.
//!
//! The caller's side of the contract (link/mod.rs) is kept: a control
//! frame's whole payload goes to `on_control`; a link's control frames
//! are written before engine frames are stamped; time never goes back;
//! after an `Err` the link's queued frames are written once more.
//!
//! Checked, beyond no panic:
//! - `on_header` decodes with the link's next sequence number and its
//!   eager bound, hands the link's own frames to the caller, and delivers
//!   engine frames exactly in the states that may receive them (`Open`,
//!   `ByeSent`); `on_control` moves the handshake and the goodbye as
//!   `LinkState` describes (a `Hello` of another universe or naming the
//!   acceptor is refused, a `HelloAck` must come from the rank dialled,
//!   a `HelloReject` gives the peer's reason);
//! - an `Err` leaves the link `Failed`, with no deadline and refusing
//!   stamps, and names the link's peer; `Failed` is final, and a `Closed`
//!   link only fails;
//! - every frame a link hands out, control or stamped, carries the next
//!   of consecutive sequence numbers from 0; a control frame is one the
//!   peer's decoder accepts (its payload within the control bound, a
//!   reject reason in UTF-8), and a handshake carries the link's `Hello`;
//!   `stamp` succeeds exactly in `Open` and `ByeReceived` and otherwise
//!   changes nothing;
//! - `poll_timeout` is the handshake deadline (creation plus the timeout)
//!   during the handshake, the goodbye deadline (our `Bye` plus its
//!   timeout) in `ByeSent`, and `None` otherwise; `handle_timeout(now)`
//!   fails exactly when that deadline is at or before `now`, with the
//!   error of the state, and otherwise leaves no deadline at or before
//!   `now`;
//! - events come in protocol order, each at most once: `HelloReceived`
//!   (acceptor only), `Established` with the link's peer, `PeerClosing`,
//!   `Closed`; a link that may carry engine frames has said `Established`;
//! - while the script does nothing hostile (no forged or altered frame,
//!   no rejection, no close during a handshake, no deadline missed),
//!   nothing fails, and at the end, once both sides have written and read
//!   everything, accepted the `Hello` and closed, both links are `Closed`;
//! - the resequencer matches a model: duplicates and a full hold queue
//!   are refused, frames come out in sequence order, `held` and
//!   `poll_timeout` (the oldest held frame's arrival plus the gap
//!   timeout) are exact, and the gap timeout fires exactly at or after
//!   that deadline.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use tether_proto::link::{ControlFrame, Inbound, PeerName, RejectCode, BYE_STAY};
use tether_proto::wire::{CAP_AUTH, FLAG_PAYLOAD_IN_FILE, HEADER_LEN, MAX_CONTROL_PAYLOAD};
use tether_proto::{
    FrameHeader, FrameKind, Hello, Link, LinkConfig, LinkError, LinkEvent, LinkState, Resequencer,
    WireError,
};

use crate::input::Input;

const UNIVERSE: u64 = 0x7e7e;
/// The connector's and the acceptor's universe ranks; the connector
/// dialled the acceptor.
const RANKS: [u32; 2] = [0, 1];
const CONNECTOR: usize = 0;
const ACCEPTOR: usize = 1;
/// The peer whose frames the resequencer orders.
const RESEQ_PEER: u32 = 1;

/// Runs the script in `data`; panics on a finding.
pub fn link(data: &[u8]) {
    let mut input = Input::new(data);
    let (Some(handshake), Some(goodbye), Some(gap), Some(limits)) =
        (input.u8(), input.u8(), input.u8(), input.u8())
    else {
        return;
    };
    let mut h = Harness::new(
        Duration::from_millis(u64::from(handshake)),
        Duration::from_millis(u64::from(goodbye)),
        [0, 1, 64, 4096][usize::from(limits % 4)],
        Duration::from_millis(u64::from(gap)),
        usize::from((limits >> 2) % 8),
    );
    while let Some(op) = input.u8() {
        if h.step(op, &mut input).is_none() {
            break;
        }
        for side in 0..2 {
            h.check(side);
        }
    }
    h.finish();
}

fn hello(side: usize) -> Hello {
    Hello {
        universe_id: UNIVERSE,
        universe_rank: RANKS[side],
        capabilities: 0,
        program: ["ocean", "atmosphere"][side].into(),
        program_rank: RANKS[side],
    }
}

fn in_handshake(state: LinkState) -> bool {
    matches!(
        state,
        LinkState::AwaitingAck
            | LinkState::AwaitingHello
            | LinkState::AwaitingProof
            | LinkState::Verifying
    )
}

fn is_control(kind: FrameKind) -> bool {
    matches!(
        kind,
        FrameKind::Hello | FrameKind::HelloAck | FrameKind::HelloReject | FrameKind::Bye
    )
}

/// A frame on its way to a link: the header's bytes and its payload.
struct Wired {
    bytes: [u8; HEADER_LEN],
    payload: Vec<u8>,
}

/// One link and what the harness knows of it.
struct Side {
    link: Link,
    config: LinkConfig,
    /// What the other side wrote and this one has not read yet.
    inbox: VecDeque<Wired>,
    /// Frames this link has handed out: the next one's sequence number.
    sent: u64,
    /// Headers this link decoded: the sequence number it expects next.
    received: u64,
    created: Instant,
    /// When our `Bye` went out from `Open`.
    bye_at: Option<Instant>,
    /// The state after the last operation.
    state: LinkState,
    /// The events seen so far, in protocol order.
    hello_received: bool,
    established: bool,
    peer_closing: bool,
    /// The peer's retiring `Bye` came, and this side has not refused it.
    peer_retiring: bool,
    /// Our `Bye` is a retire, not answered yet.
    our_retire: bool,
    closed: bool,
}

/// The resequencer's model: what `Resequencer<u64>` (each frame is its
/// own sequence number) must do.
struct Reseq {
    reseq: Resequencer<u64>,
    hold_limit: usize,
    gap: Duration,
    /// The next number to release, and the next one `pop` returns.
    next: u64,
    popped: u64,
    /// Held frames and their arrival times.
    held: BTreeMap<u64, Instant>,
}

struct Harness {
    sides: [Side; 2],
    reseq: Reseq,
    now: Instant,
    /// Nothing hostile has happened yet: every `Err` is a finding.
    clean: bool,
}

impl Harness {
    fn new(
        handshake_timeout: Duration,
        goodbye_timeout: Duration,
        max_eager: u64,
        gap: Duration,
        hold_limit: usize,
    ) -> Harness {
        let now = Instant::now();
        let config = |side| LinkConfig {
            hello: hello(side),
            handshake_timeout,
            goodbye_timeout,
            max_eager,
            auth: None,
        };
        let side = |link: Link, config| Side {
            state: link.state(),
            link,
            config,
            inbox: VecDeque::new(),
            sent: 0,
            received: 0,
            created: now,
            bye_at: None,
            hello_received: false,
            established: false,
            peer_closing: false,
            peer_retiring: false,
            our_retire: false,
            closed: false,
        };
        let connector = Link::connector(config(CONNECTOR), RANKS[ACCEPTOR], now);
        let acceptor = Link::acceptor(config(ACCEPTOR), now);
        assert_eq!(connector.peer(), Some(RANKS[ACCEPTOR]));
        assert_eq!(acceptor.peer(), None);
        Harness {
            sides: [
                side(connector, config(CONNECTOR)),
                side(acceptor, config(ACCEPTOR)),
            ],
            reseq: Reseq {
                reseq: Resequencer::new(RESEQ_PEER, hold_limit, gap),
                hold_limit,
                gap,
                next: 0,
                popped: 0,
                held: BTreeMap::new(),
            },
            now,
            clean: true,
        }
    }

    /// One operation; `None` when the input ran out.
    fn step(&mut self, op: u8, input: &mut Input) -> Option<()> {
        let side = usize::from(op >> 7);
        match op % 12 {
            0 => self.transmit(side),
            1 => {
                let flip = input.u8()?;
                self.read(side, flip);
            }
            2 => {
                let bytes: [u8; HEADER_LEN] = input.take(HEADER_LEN)?.try_into().expect("header");
                self.hostile(side, &bytes, None, input)?;
            }
            3 => {
                let (bytes, payload) = self.build_frame(side, input)?;
                self.hostile(side, &bytes, Some(payload), input)?;
            }
            4 => self.sides[side].link.accept_hello(),
            5 => {
                let len = usize::from(input.u16()?) % (2 * MAX_CONTROL_PAYLOAD as usize);
                // A reason in 2-byte characters tests where it is cut.
                let reason = if len & 1 == 0 {
                    "x".repeat(len)
                } else {
                    "é".repeat(len / 2)
                };
                if self.sides[side].link.state() == LinkState::Verifying {
                    self.clean = false;
                }
                self.sides[side].link.reject_hello(&reason);
            }
            6 => {
                let b = input.u8()?;
                let len = input.u16()?;
                self.stamp(side, b, len);
            }
            7 => match input.u8()? % 3 {
                0 => self.close(side),
                1 => self.retire(side),
                _ => {
                    let s = &mut self.sides[side];
                    if s.link.refuse_retire() {
                        assert!(s.peer_retiring, "refused a retire that never came");
                        s.peer_retiring = false;
                    }
                }
            },
            8 => {
                self.advance(input.u8()?);
                self.handle_timeouts();
            }
            9 => self.advance(input.u8()?),
            10 => {
                let b = input.u8()?;
                let seq = if b & 0x80 != 0 {
                    input.u64()?
                } else {
                    (self.reseq.next + u64::from(b % 16)).saturating_sub(2)
                };
                self.reseq.push(self.now, seq);
            }
            _ => self.reseq.pop(),
        }
        Some(())
    }

    /// Time passes: 0 to 127 ms, or 0 to 12.7 s in steps of 100 ms.
    fn advance(&mut self, b: u8) {
        let ms = if b & 0x80 != 0 {
            u64::from(b & 0x7f) * 100
        } else {
            u64::from(b)
        };
        self.now += Duration::from_millis(ms);
    }

    /// This side sends nothing more. During a handshake that leaves the
    /// peer's frames unexpected: not hostile, but no longer clean.
    fn close(&mut self, side: usize) {
        let s = &mut self.sides[side];
        let state = s.link.state();
        if in_handshake(state) {
            self.clean = false;
        }
        if state == LinkState::Open || (state == LinkState::ByeSent && s.bye_at.is_none()) {
            s.bye_at = Some(self.now);
        }
        s.link.close(self.now);
    }

    /// This side asks to retire the link (or agrees to the peer's
    /// retire): no deadline runs until it closes.
    fn retire(&mut self, side: usize) {
        let s = &mut self.sides[side];
        let state = s.link.state();
        let retired = s.link.retire();
        s.our_retire |= retired && state == LinkState::Open;
        assert_eq!(
            retired,
            state == LinkState::Open || (state == LinkState::ByeReceived && s.peer_retiring),
            "retire from {state:?}"
        );
    }

    /// Hands the time to every deadline, as a caller whose timers fired.
    fn handle_timeouts(&mut self) {
        let now = self.now;
        for side in 0..2 {
            let s = &mut self.sides[side];
            let deadline = s.link.poll_timeout();
            let before = s.link.state();
            match s.link.handle_timeout(now) {
                Ok(()) => {
                    assert!(
                        deadline.is_none_or(|d| d > now),
                        "{before:?}: deadline {deadline:?} passed by {now:?} without firing"
                    );
                    assert_eq!(s.link.state(), before);
                    assert_eq!(s.link.poll_timeout(), deadline);
                }
                Err(e) => {
                    assert!(deadline.is_some_and(|d| d <= now), "{e}: early");
                    match e {
                        LinkError::HandshakeTimeout { timeout, .. } => {
                            assert!(in_handshake(before), "{before:?}: {e}");
                            assert_eq!(timeout, s.config.handshake_timeout);
                        }
                        LinkError::GoodbyeTimeout { timeout, .. } => {
                            assert_eq!(before, LinkState::ByeSent, "{e}");
                            assert_eq!(timeout, s.config.goodbye_timeout);
                        }
                        ref other => panic!("{before:?}: a timeout failed with {other}"),
                    }
                    self.clean = false;
                    self.failed(side, &e);
                }
            }
        }
        self.reseq.handle_timeout(now);
    }

    /// Writes the link's control frames to the other side, checking each.
    fn transmit(&mut self, side: usize) {
        while let Some(ControlFrame { header, payload }) = self.sides[side].link.poll_transmit() {
            let s = &mut self.sides[side];
            assert_eq!(header.seq, s.sent, "{header:?}");
            s.sent += 1;
            assert!(is_control(header.kind), "{header:?}");
            assert_eq!(header.payload_len, payload.len() as u64, "{header:?}");
            let bytes = header.encode();
            let decoded = FrameHeader::decode(&bytes, header.seq, s.config.max_eager);
            assert_eq!(decoded, Ok(header), "the peer cannot read our frame");
            match header.kind {
                FrameKind::Hello | FrameKind::HelloAck => {
                    assert_eq!(payload, s.config.hello.encode(), "{header:?}");
                }
                FrameKind::HelloReject => {
                    assert!(
                        std::str::from_utf8(&payload).is_ok(),
                        "a reason not in UTF-8"
                    );
                }
                _ => {}
            }
            self.sides[1 - side]
                .inbox
                .push_back(Wired { bytes, payload });
        }
    }

    /// The link reads the next frame the other side wrote; a `flip` below
    /// 128 alters byte `flip` of a control frame's payload, if it has one.
    fn read(&mut self, side: usize, flip: u8) {
        let Some(Wired { bytes, mut payload }) = self.sides[side].inbox.pop_front() else {
            return;
        };
        if let Some(b) = payload.get_mut(usize::from(flip)).filter(|_| flip < 128) {
            *b ^= 0x20;
            self.clean = false;
        }
        let delivered = self.on_header(side, &bytes);
        if let Some(Inbound::Deliver(header)) = delivered {
            assert_eq!(header.encode(), bytes);
        }
        if let Some(Inbound::Control(header)) = delivered {
            self.on_control(side, &header, &payload);
        }
    }

    /// A frame from a hostile peer: its header, and for a control frame
    /// the `payload` built with it or, for raw header bytes, the header's
    /// length of bytes from the script.
    fn hostile(
        &mut self,
        side: usize,
        bytes: &[u8; HEADER_LEN],
        payload: Option<Vec<u8>>,
        input: &mut Input,
    ) -> Option<()> {
        self.clean = false;
        if let Some(Inbound::Control(header)) = self.on_header(side, bytes) {
            let payload = match payload {
                Some(payload) => payload,
                None => {
                    let len = usize::try_from(header.payload_len).expect("a control payload");
                    input.take(len)?.to_vec()
                }
            };
            self.on_control(side, &header, &payload);
        }
        Some(())
    }

    /// A handshake payload a hostile peer may send: the `Hello` the link
    /// expects from its peer, one with fields changed (another universe,
    /// another rank, a long program name, capabilities), or raw bytes.
    fn forged_hello(side: usize, input: &mut Input) -> Option<Vec<u8>> {
        let b = input.u8()?;
        let mut forged = hello(1 - side);
        Some(match b % 4 {
            0 => forged.encode(),
            1 | 2 => {
                if b & 0x10 != 0 {
                    forged.universe_id ^= 1;
                }
                if b & 0x20 != 0 {
                    forged.universe_rank = u32::from(input.u8()? % 3);
                }
                if b & 0x40 != 0 {
                    forged.program = "p".repeat(usize::from(input.u16()? % 4096));
                }
                if b & 0x80 != 0 {
                    forged.capabilities = 1;
                }
                forged.encode()
            }
            _ => {
                let len = input.u8()?;
                input.take(usize::from(len))?.to_vec()
            }
        })
    }

    /// A header with the link's expected sequence number, and its payload,
    /// built from a few bytes: the kind, a handshake payload or a reject
    /// reason of its own length, an engine frame's length within its
    /// kind's bound; and, by the kind byte's top bits, one field off
    /// (sequence, length or flags) for the decoder to refuse.
    fn build_frame(&self, side: usize, input: &mut Input) -> Option<([u8; HEADER_LEN], Vec<u8>)> {
        use FrameKind::*;
        const KINDS: [FrameKind; 16] = [
            Hello,
            HelloAck,
            HelloReject,
            Bye,
            Hello,
            HelloAck,
            HelloReject,
            Bye,
            Eager,
            Rts,
            Cts,
            Data,
            Abort,
            ReadDone,
            Eager,
            Data,
        ];
        let b = input.u8()?;
        let s = &self.sides[side];
        let mut header = FrameHeader::new(KINDS[usize::from(b % 16)]);
        header.seq = s.received;
        let payload = match header.kind {
            Hello | HelloAck => Self::forged_hello(side, input)?,
            HelloReject => {
                let len = input.u8()?;
                input.take(usize::from(len))?.to_vec()
            }
            _ => Vec::new(),
        };
        header.payload_len = match header.kind {
            Eager => u64::from(input.u16()?) % (s.config.max_eager + 1),
            Data => u64::from(input.u16()?),
            _ => payload.len() as u64,
        };
        match b >> 5 {
            5 => header.seq = header.seq.wrapping_add(1),
            6 => header.payload_len += MAX_CONTROL_PAYLOAD + 1,
            7 => header.flags = FLAG_PAYLOAD_IN_FILE,
            _ => {}
        }
        Some((header.encode(), payload))
    }

    /// Stamps an engine frame of a kind and length from `b` and `len`,
    /// after writing the link's control frames, and writes it.
    fn stamp(&mut self, side: usize, b: u8, len: u16) {
        const KINDS: [FrameKind; 8] = [
            FrameKind::Eager,
            FrameKind::Rts,
            FrameKind::Cts,
            FrameKind::Data,
            FrameKind::Abort,
            FrameKind::ReadDone,
            FrameKind::Eager,
            FrameKind::Data,
        ];
        self.transmit(side);
        let s = &mut self.sides[side];
        let mut header = FrameHeader::new(KINDS[usize::from(b % 8)]);
        header.tag = i32::from(b >> 3);
        header.payload_len = match header.kind {
            FrameKind::Eager => u64::from(len) % (s.config.max_eager + 1),
            FrameKind::Data => u64::from(len),
            _ => 0,
        };
        if header.kind == FrameKind::Data && b & 0x80 != 0 {
            header.flags = FLAG_PAYLOAD_IN_FILE;
        }
        let before = header;
        let state = s.link.state();
        let may_send =
            state == LinkState::Open || (state == LinkState::ByeReceived && !s.peer_retiring);
        match s.link.stamp(&mut header) {
            Ok(()) => {
                assert!(may_send, "stamped in {state:?}");
                assert_eq!(header.seq, s.sent);
                s.sent += 1;
                assert_eq!(
                    FrameHeader {
                        seq: before.seq,
                        ..header
                    },
                    before,
                    "stamping changed more than seq"
                );
                let bytes = header.encode();
                self.sides[1 - side].inbox.push_back(Wired {
                    bytes,
                    payload: Vec::new(),
                });
            }
            Err(e) => {
                assert!(!may_send, "{state:?}: {e}");
                assert_eq!(header, before, "a refused stamp changed the header");
                assert_eq!(s.link.state(), state, "a refused stamp changed the state");
                assert!(
                    matches!(e, LinkError::NotOpen { state: got, .. } if got == state),
                    "{e}"
                );
                self.check_error(side, &e);
            }
        }
    }

    /// `Link::on_header`, checked against the decoder and the states that
    /// may receive engine frames.
    fn on_header(&mut self, side: usize, bytes: &[u8; HEADER_LEN]) -> Option<Inbound> {
        let s = &mut self.sides[side];
        let before = s.link.state();
        let result = s.link.on_header(bytes);
        if before == LinkState::Failed {
            assert!(
                matches!(
                    result,
                    Err(LinkError::NotOpen {
                        state: LinkState::Failed,
                        ..
                    })
                ),
                "{result:?}"
            );
            return None;
        }
        let expected = FrameHeader::decode(bytes, s.received, s.config.max_eager);
        if expected.is_ok() {
            s.received += 1;
        }
        match (expected, result) {
            (Ok(header), Ok(Inbound::Control(got))) if is_control(header.kind) => {
                assert_eq!(got, header);
                Some(Inbound::Control(got))
            }
            (Ok(header), Ok(Inbound::Deliver(got))) if !is_control(header.kind) => {
                assert_eq!(got, header);
                assert!(
                    matches!(before, LinkState::Open | LinkState::ByeSent),
                    "{before:?} delivered {header:?}"
                );
                Some(Inbound::Deliver(got))
            }
            (Ok(header), Err(e)) => {
                assert!(!is_control(header.kind), "{before:?}: {header:?}: {e}");
                assert!(
                    !matches!(before, LinkState::Open | LinkState::ByeSent),
                    "{before:?} refused {header:?}: {e}"
                );
                assert!(
                    matches!(e, LinkError::Wire { error: WireError::UnexpectedFrame { got, .. }, .. } if got == header.kind),
                    "{e}"
                );
                self.failed(side, &e);
                None
            }
            (Err(wire), Err(e)) => {
                assert!(
                    matches!(e, LinkError::Wire { ref error, .. } if *error == wire),
                    "{e}, not {wire}"
                );
                self.failed(side, &e);
                None
            }
            (expected, result) => panic!("{before:?}: {result:?}, decoder says {expected:?}"),
        }
    }

    /// `Link::on_control`, checked against the handshake and goodbye that
    /// `LinkState` describes.
    fn on_control(&mut self, side: usize, header: &FrameHeader, payload: &[u8]) {
        let s = &mut self.sides[side];
        let before = s.link.state();
        let result = s.link.on_control(header, payload);
        let after = s.link.state();
        match (header.kind, before, result) {
            (FrameKind::Hello, LinkState::AwaitingHello, Ok(())) => {
                assert_eq!(after, LinkState::Verifying);
                let hello = Hello::decode(payload).expect("a verified Hello decodes");
                assert_eq!(hello.universe_id, UNIVERSE);
                assert_ne!(hello.universe_rank, RANKS[side]);
                assert_eq!(s.link.peer(), Some(hello.universe_rank));
            }
            (FrameKind::Hello, LinkState::AwaitingHello, Err(e)) => {
                if let LinkError::Refused { .. } = e {
                    // A malformed Hello is refused too, so that a connector
                    // of another version learns why.
                    if let Ok(hello) = Hello::decode(payload) {
                        // These links have no key: a Hello that says it
                        // authenticates is refused as well.
                        assert!(
                            hello.universe_id != UNIVERSE
                                || hello.universe_rank == RANKS[side]
                                || hello.capabilities & CAP_AUTH != 0,
                            "{hello:?}: {e}"
                        );
                        assert_eq!(s.link.peer(), Some(hello.universe_rank));
                    }
                    // The refusal went out: the caller writes it.
                    self.transmit(side);
                    let Wired { bytes, .. } = self.sides[1 - side].inbox.back().expect("written");
                    assert_eq!(bytes[6], FrameKind::HelloReject as u8);
                } else {
                    assert!(Hello::decode(payload).is_err(), "{e}");
                }
                self.failed(side, &e);
            }
            (FrameKind::HelloAck, LinkState::AwaitingAck, Ok(())) => {
                assert_eq!(after, LinkState::Open);
                let hello = Hello::decode(payload).expect("an accepted HelloAck decodes");
                assert_eq!(
                    (hello.universe_id, hello.universe_rank),
                    (UNIVERSE, RANKS[ACCEPTOR])
                );
            }
            (FrameKind::HelloAck, LinkState::AwaitingAck, Err(e)) => {
                match &e {
                    LinkError::WrongPeer { expected, .. } => {
                        assert_eq!(*expected, RANKS[ACCEPTOR]);
                        let hello = Hello::decode(payload).expect("a wrong peer's Hello decodes");
                        assert_ne!(
                            (hello.universe_id, hello.universe_rank),
                            (UNIVERSE, RANKS[ACCEPTOR])
                        );
                    }
                    other => assert!(Hello::decode(payload).is_err(), "{other}"),
                }
                self.failed(side, &e);
            }
            (FrameKind::HelloReject, LinkState::AwaitingAck, Err(e)) => {
                let reason = String::from_utf8_lossy(payload);
                // The header's tag says why; an unknown code is a refusal.
                let named = match RejectCode::from_tag(header.tag) {
                    RejectCode::Refused => {
                        matches!(e, LinkError::Rejected { reason: ref r, .. } if *r == reason)
                    }
                    RejectCode::Duplicate => matches!(e, LinkError::Superseded { .. }),
                    RejectCode::OtherUniverse => {
                        matches!(e, LinkError::OtherUniverse { reason: ref r, .. } if *r == reason)
                    }
                    RejectCode::Unauthenticated => {
                        matches!(e, LinkError::Unauthenticated { reason: ref r, .. } if *r == reason)
                    }
                };
                assert!(named, "tag {}: {e}", header.tag);
                self.failed(side, &e);
            }
            (FrameKind::Bye, LinkState::Open, Ok(())) => assert_eq!(after, LinkState::ByeReceived),
            (FrameKind::Bye, LinkState::ByeSent, Ok(())) => {
                let side_ = &mut self.sides[side];
                let expected = if header.tag == BYE_STAY && side_.our_retire {
                    // Refused: open again, or (closing meanwhile) the
                    // final goodbye follows.
                    if side_.bye_at.is_some() {
                        LinkState::ByeSent
                    } else {
                        LinkState::Open
                    }
                } else {
                    LinkState::Closed
                };
                side_.our_retire = false;
                assert_eq!(after, expected, "a Bye tagged {}", header.tag);
            }
            (kind, before, Ok(())) => panic!("{before:?} took a {kind:?}"),
            (kind, before, Err(e)) => {
                assert!(
                    matches!(e, LinkError::Wire { error: WireError::UnexpectedFrame { got, .. }, .. } if got == kind),
                    "{before:?}: {e}"
                );
                self.failed(side, &e);
            }
        }
    }

    /// What every `Err` that ends a link must leave: a `Failed` link with
    /// no deadline that stamps nothing; then the caller writes what the
    /// link queued (a refusal's `HelloReject`).
    fn failed(&mut self, side: usize, e: &LinkError) {
        assert!(!self.clean, "no hostile input, yet: {e}");
        self.check_error(side, e);
        let s = &mut self.sides[side];
        assert_eq!(s.link.state(), LinkState::Failed, "{e}");
        assert_eq!(s.link.poll_timeout(), None, "{e}");
        let mut header = FrameHeader::new(FrameKind::Eager);
        assert!(s.link.stamp(&mut header).is_err(), "{e}");
        assert_eq!(header.seq, 0);
        self.transmit(side);
    }

    /// An error names the link's peer as the link knows it.
    fn check_error(&self, side: usize, e: &LinkError) {
        let peer = PeerName(self.sides[side].link.peer());
        match e {
            LinkError::HandshakeTimeout { peer: p, .. }
            | LinkError::Rejected { peer: p, .. }
            | LinkError::Superseded { peer: p }
            | LinkError::OtherUniverse { peer: p, .. }
            | LinkError::Refused { peer: p, .. }
            | LinkError::GoodbyeTimeout { peer: p, .. }
            | LinkError::Wire { peer: p, .. }
            | LinkError::NotOpen { peer: p, .. } => assert_eq!(*p, peer, "{e}"),
            LinkError::WrongPeer { expected, .. } => assert_eq!(Some(*expected), peer.0, "{e}"),
            other => panic!("a link failed with a resequencer's error: {other}"),
        }
        let _ = e.to_string();
    }

    /// After every operation: the link's state may follow the one before,
    /// its deadline is its state's, and its events are in order.
    fn check(&mut self, side: usize) {
        let now = self.now;
        let s = &mut self.sides[side];
        let state = s.link.state();
        match s.state {
            LinkState::Failed => assert_eq!(state, LinkState::Failed),
            LinkState::Closed => assert!(matches!(state, LinkState::Closed | LinkState::Failed)),
            _ => {}
        }
        s.state = state;
        let deadline = match state {
            LinkState::AwaitingAck
            | LinkState::AwaitingHello
            | LinkState::AwaitingProof
            | LinkState::Verifying => Some(s.created + s.config.handshake_timeout),
            // A retire waits without a deadline until the side closes.
            LinkState::ByeSent => s.bye_at.map(|bye_at| {
                assert!(bye_at <= now);
                bye_at + s.config.goodbye_timeout
            }),
            LinkState::Open | LinkState::ByeReceived | LinkState::Closed | LinkState::Failed => {
                None
            }
        };
        assert_eq!(s.link.poll_timeout(), deadline, "{state:?}");
        while let Some(event) = s.link.poll_event() {
            match event {
                LinkEvent::HelloReceived(hello) => {
                    assert_eq!(side, ACCEPTOR, "{hello:?}");
                    assert!(!s.hello_received, "{hello:?} twice");
                    s.hello_received = true;
                    assert_eq!(hello.universe_id, UNIVERSE);
                    assert_ne!(hello.universe_rank, RANKS[side]);
                    assert_eq!(s.link.peer(), Some(hello.universe_rank));
                }
                LinkEvent::Established { peer } => {
                    assert!(!s.established, "established twice");
                    assert!(side == CONNECTOR || s.hello_received);
                    s.established = true;
                    assert_eq!(Some(peer), s.link.peer());
                    if side == CONNECTOR {
                        assert_eq!(peer, RANKS[ACCEPTOR]);
                    }
                }
                LinkEvent::PeerClosing => {
                    assert!(s.established && !s.peer_closing, "PeerClosing out of order");
                    s.peer_closing = true;
                }
                LinkEvent::PeerRetiring => {
                    assert!(
                        s.established && !s.peer_closing,
                        "PeerRetiring out of order"
                    );
                    s.peer_retiring = true;
                }
                LinkEvent::RetireRefused => {
                    assert!(
                        s.established && !s.peer_closing,
                        "RetireRefused out of order"
                    );
                    // The link may have moved on within the operation (the
                    // peer's goodbye right after its refusal): no state check.
                }
                LinkEvent::Closed => {
                    assert!(s.established && !s.closed, "Closed out of order");
                    assert!(matches!(state, LinkState::Closed), "Closed in {state:?}");
                    s.closed = true;
                }
            }
        }
        if matches!(
            state,
            LinkState::Open | LinkState::ByeSent | LinkState::ByeReceived
        ) {
            assert!(s.established, "{state:?} without Established");
        }
    }

    /// With nothing hostile done, both sides write and read everything,
    /// the acceptor accepts, both close: both links end `Closed`.
    fn finish(mut self) {
        if !self.clean {
            return;
        }
        for round in 0..2 {
            // Each pass writes what the last one queued; a handshake and a
            // goodbye take a few.
            for _ in 0..4 {
                for side in 0..2 {
                    self.transmit(side);
                    while !self.sides[side].inbox.is_empty() {
                        self.read(side, u8::MAX);
                    }
                    self.sides[side].link.accept_hello();
                    self.transmit(side);
                    self.check(side);
                }
            }
            if round == 0 {
                for side in 0..2 {
                    self.close(side);
                    self.check(side);
                }
            }
        }
        for s in &self.sides {
            assert_eq!(s.state, LinkState::Closed);
            assert!(s.closed, "Closed without its event");
        }
    }
}

impl Reseq {
    fn push(&mut self, now: Instant, seq: u64) {
        let result = self.reseq.push(now, seq, seq);
        let expected = if seq < self.next || self.held.contains_key(&seq) {
            Err(LinkError::Duplicate {
                peer: RESEQ_PEER,
                seq,
            })
        } else if seq > self.next && self.held.len() >= self.hold_limit {
            Err(LinkError::HoldQueueFull {
                peer: RESEQ_PEER,
                missing: self.next,
                held: self.held.len(),
            })
        } else {
            if seq > self.next {
                self.held.insert(seq, now);
            } else {
                self.next += 1;
                while self.held.remove(&self.next).is_some() {
                    self.next += 1;
                }
            }
            Ok(())
        };
        assert_eq!(result, expected, "push {seq}");
        if let Err(e) = result {
            let _ = e.to_string();
        }
        self.check();
    }

    fn pop(&mut self) {
        match self.reseq.pop() {
            Some(seq) => {
                assert_eq!(seq, self.popped, "out of order");
                self.popped += 1;
            }
            None => assert_eq!(self.popped, self.next, "a released frame not popped"),
        }
        self.check();
    }

    fn handle_timeout(&mut self, now: Instant) {
        let deadline = self.deadline();
        let result = self.reseq.handle_timeout(now);
        match deadline {
            Some(d) if d <= now => assert_eq!(
                result,
                Err(LinkError::GapTimeout {
                    peer: RESEQ_PEER,
                    missing: self.next,
                    held: self.held.len(),
                    timeout: self.gap,
                })
            ),
            _ => assert_eq!(result, Ok(())),
        }
        self.check();
    }

    fn deadline(&self) -> Option<Instant> {
        self.held.values().min().map(|&arrived| arrived + self.gap)
    }

    fn check(&self) {
        assert_eq!(self.reseq.held(), self.held.len());
        assert!(self.held.len() <= self.hold_limit);
        assert_eq!(self.reseq.poll_timeout(), self.deadline());
    }
}

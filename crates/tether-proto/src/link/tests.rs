//! The link and resequencer alone, frame by frame; the harness's World
//! tests them with engines, time and faults.

use std::time::{Duration, Instant};

use super::*;
use crate::wire::{FrameHeader, FrameKind, Hello, WireError, MAX_CONTROL_PAYLOAD};

fn config(rank: u32) -> LinkConfig {
    LinkConfig {
        hello: Hello {
            universe_id: 5,
            universe_rank: rank,
            capabilities: 0,
            program: "p".into(),
            program_rank: rank,
        },
        handshake_timeout: Duration::from_secs(2),
        goodbye_timeout: Duration::from_secs(1),
        max_eager: 64,
        auth: None,
    }
}

/// Writes `from`'s control frames into `to`, as a connection would.
fn pipe(from: &mut Link, to: &mut Link) -> Result<(), LinkError> {
    while let Some(frame) = from.poll_transmit() {
        match to.on_header(&frame.header.encode())? {
            Inbound::Control(header) => to.on_control(&header, &frame.payload)?,
            Inbound::Deliver(header) => panic!("a control frame was delivered: {header:?}"),
        }
    }
    Ok(())
}

fn handshake(now: Instant) -> (Link, Link) {
    let mut dialer = Link::connector(config(0), 1, now);
    let mut answerer = Link::acceptor(config(1), now);
    pipe(&mut dialer, &mut answerer).unwrap();
    assert!(matches!(
        answerer.poll_event(),
        Some(LinkEvent::HelloReceived(Hello {
            universe_rank: 0,
            ..
        }))
    ));
    answerer.accept_hello();
    pipe(&mut answerer, &mut dialer).unwrap();
    (dialer, answerer)
}

#[test]
fn a_handshake_opens_both_ends_and_data_frames_continue_the_link_numbering() {
    let now = Instant::now();
    let (mut dialer, mut answerer) = handshake(now);
    assert_eq!(
        dialer.poll_event(),
        Some(LinkEvent::Established { peer: 1 })
    );
    assert_eq!(
        answerer.poll_event(),
        Some(LinkEvent::Established { peer: 0 })
    );
    assert_eq!(
        (dialer.state(), answerer.state()),
        (LinkState::Open, LinkState::Open)
    );
    assert_eq!(dialer.poll_timeout(), None, "no deadline on an open link");
    let mut eager = FrameHeader::new(FrameKind::Eager);
    dialer.stamp(&mut eager).unwrap();
    assert_eq!(eager.seq, 1, "the Hello was frame 0 of this link");
    assert_eq!(
        answerer.on_header(&eager.encode()),
        Ok(Inbound::Deliver(eager))
    );
}

#[test]
fn nothing_is_stamped_before_the_handshake_and_a_frame_out_of_order_fails_the_link() {
    let now = Instant::now();
    let mut dialer = Link::connector(config(0), 1, now);
    let refused = dialer.stamp(&mut FrameHeader::new(FrameKind::Eager));
    assert!(matches!(
        refused,
        Err(LinkError::NotOpen {
            state: LinkState::AwaitingAck,
            ..
        })
    ));
    let (mut dialer, mut answerer) = handshake(now);
    let mut first = FrameHeader::new(FrameKind::Eager);
    let mut second = first;
    dialer.stamp(&mut first).unwrap();
    dialer.stamp(&mut second).unwrap();
    assert!(matches!(
        answerer.on_header(&second.encode()),
        Err(LinkError::Wire {
            error: WireError::BadSequence {
                expected: 1,
                got: 2
            },
            ..
        })
    ));
    assert_eq!(answerer.state(), LinkState::Failed);
}

#[test]
fn an_answer_from_another_rank_and_a_reject_by_the_caller_end_the_handshake() {
    let now = Instant::now();
    let mut dialer = Link::connector(config(0), 1, now);
    let mut impostor = Link::acceptor(config(2), now);
    pipe(&mut dialer, &mut impostor).unwrap();
    impostor.accept_hello();
    let error = pipe(&mut impostor, &mut dialer).unwrap_err();
    assert!(
        matches!(error, LinkError::WrongPeer { expected: 1, .. }),
        "{error}"
    );

    let mut dialer = Link::connector(config(0), 1, now);
    let mut answerer = Link::acceptor(config(1), now);
    pipe(&mut dialer, &mut answerer).unwrap();
    answerer.reject_hello("a link to rank 0 exists");
    assert_eq!(answerer.state(), LinkState::Failed);
    assert_eq!(
        pipe(&mut answerer, &mut dialer),
        Err(LinkError::Rejected {
            peer: PeerName(Some(1)),
            reason: "a link to rank 0 exists".into()
        })
    );
}

/// Found by the `link` fuzz target: a refusal quoting a long program
/// name, or a long reason of the caller's, made a `HelloReject` longer
/// than the peer's decoder reads, so the peer saw a bad frame instead of
/// the reason.
#[test]
fn a_reject_reason_is_cut_to_what_the_peer_can_read() {
    let now = Instant::now();
    // A Hello of another universe with a long program name, which the
    // refusal quotes.
    let mut dialer = Link::connector(config(0), 1, now);
    let mut answerer = Link::acceptor(config(1), now);
    let mut stranger = config(0).hello;
    stranger.universe_id += 1;
    stranger.program = "p".repeat(4070);
    let payload = stranger.encode();
    let mut hello = FrameHeader::new(FrameKind::Hello);
    hello.payload_len = payload.len() as u64;
    let Ok(Inbound::Control(header)) = answerer.on_header(&hello.encode()) else {
        panic!("a Hello is a control frame");
    };
    let Err(LinkError::Refused { reason, .. }) = answerer.on_control(&header, &payload) else {
        panic!("a Hello of another universe is refused");
    };
    assert!(
        reason.len() as u64 > MAX_CONTROL_PAYLOAD,
        "the local error keeps it all"
    );
    let Err(LinkError::OtherUniverse { reason: read, .. }) = pipe(&mut answerer, &mut dialer)
    else {
        panic!("the dialer reads the rejection, as one of another universe");
    };
    assert_eq!(read, reason[..MAX_CONTROL_PAYLOAD as usize]);

    // A long reason of the caller's, in 2-byte characters: cut at a
    // character boundary.
    let mut dialer = Link::connector(config(0), 1, now);
    let mut answerer = Link::acceptor(config(1), now);
    pipe(&mut dialer, &mut answerer).unwrap();
    let long = "é".repeat(3000);
    answerer.reject_hello(&long);
    let Err(LinkError::Rejected { reason, .. }) = pipe(&mut answerer, &mut dialer) else {
        panic!("the dialer reads the rejection");
    };
    assert_eq!(reason.len() as u64, MAX_CONTROL_PAYLOAD);
    assert!(long.starts_with(&reason));
}

#[test]
fn the_resequencer_releases_any_interleaving_in_sender_order() {
    let now = Instant::now();
    let mut order: Vec<u64> = (0..50).collect();
    for round in 0..20u64 {
        // A seeded shuffle: each round a different interleaving.
        for i in (1..order.len()).rev() {
            let j = ((i as u64 * 7919 + round * 104_729) % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        let mut reseq = Resequencer::new(3, 64, Duration::from_millis(10));
        let mut out = Vec::new();
        for &seq in &order {
            reseq.push(now, seq, seq).unwrap();
            out.extend(std::iter::from_fn(|| reseq.pop()));
        }
        assert_eq!(out, (0..50).collect::<Vec<u64>>(), "round {round}");
        assert_eq!((reseq.held(), reseq.poll_timeout()), (0, None));
    }
}

#[test]
fn the_resequencer_refuses_duplicates_and_more_than_its_hold_limit() {
    let now = Instant::now();
    let mut reseq = Resequencer::new(3, 2, Duration::from_millis(10));
    reseq.push(now, 0, ()).unwrap();
    assert_eq!(
        reseq.push(now, 0, ()),
        Err(LinkError::Duplicate { peer: 3, seq: 0 })
    );
    reseq.push(now, 2, ()).unwrap();
    reseq.push(now, 3, ()).unwrap();
    assert_eq!(
        reseq.push(now, 4, ()),
        Err(LinkError::HoldQueueFull {
            peer: 3,
            missing: 1,
            held: 2
        })
    );
}

#[test]
fn a_gap_expires_when_its_oldest_held_frame_has_waited_the_timeout() {
    let t0 = Instant::now();
    let gap = Duration::from_millis(10);
    let mut reseq = Resequencer::new(3, 8, gap);
    reseq.push(t0, 2, ()).unwrap();
    reseq.push(t0 + gap / 2, 4, ()).unwrap();
    assert_eq!(reseq.poll_timeout(), Some(t0 + gap));
    // Frame 1 fills the first gap; frame 4 now waits for 3, since t0 + gap/2.
    reseq.push(t0 + gap / 4, 0, ()).unwrap();
    reseq.push(t0 + gap / 4, 1, ()).unwrap();
    assert_eq!(reseq.poll_timeout(), Some(t0 + gap / 2 + gap));
    let deadline = t0 + gap / 2 + gap;
    assert_eq!(
        reseq.handle_timeout(deadline - Duration::from_nanos(1)),
        Ok(())
    );
    let error = reseq.handle_timeout(deadline).unwrap_err();
    assert_eq!(
        error.to_string(),
        "frame 3 from universe rank 3 did not arrive within 10ms while 1 later frames waited"
    );
}

#[test]
fn simultaneous_connects_keep_the_link_dialled_by_the_lower_rank_at_both_ends() {
    let now = Instant::now();
    // Ranks 0 and 1 dial each other at once; each acceptor hears the
    // other's Hello while its own connector is unanswered.
    let mut dialled_by_0 = (
        Link::connector(config(0), 1, now),
        Link::acceptor(config(1), now),
    );
    let mut dialled_by_1 = (
        Link::connector(config(1), 0, now),
        Link::acceptor(config(0), now),
    );
    pipe(&mut dialled_by_0.0, &mut dialled_by_0.1).unwrap();
    pipe(&mut dialled_by_1.0, &mut dialled_by_1.1).unwrap();
    for (acceptor, me, peer) in [(&mut dialled_by_0.1, 1, 0), (&mut dialled_by_1.1, 0, 1)] {
        assert!(matches!(
            acceptor.poll_event(),
            Some(LinkEvent::HelloReceived(_))
        ));
        if incoming_wins(me, peer) {
            acceptor.accept_hello();
        } else {
            acceptor.reject_duplicate();
        }
    }
    pipe(&mut dialled_by_0.1, &mut dialled_by_0.0).unwrap();
    assert_eq!(
        (dialled_by_0.0.state(), dialled_by_0.1.state()),
        (LinkState::Open, LinkState::Open)
    );
    assert_eq!(
        pipe(&mut dialled_by_1.1, &mut dialled_by_1.0),
        Err(LinkError::Superseded {
            peer: PeerName(Some(0))
        })
    );
}

#[test]
fn a_hello_of_another_universe_is_refused_with_its_code_and_a_malformed_one_with_the_reason() {
    let now = Instant::now();
    let mut stranger_config = config(0);
    stranger_config.hello.universe_id = 6;
    let mut stranger = Link::connector(stranger_config, 1, now);
    let mut answerer = Link::acceptor(config(1), now);
    assert!(matches!(
        pipe(&mut stranger, &mut answerer),
        Err(LinkError::Refused { .. })
    ));
    let error = pipe(&mut answerer, &mut stranger).unwrap_err();
    assert!(
        matches!(&error, LinkError::OtherUniverse { reason, .. } if reason.contains("another universe (id 0x6, expected 0x5)")),
        "{error}"
    );

    let mut answerer = Link::acceptor(config(1), now);
    let mut hello = FrameHeader::new(FrameKind::Hello);
    hello.payload_len = 3;
    let Ok(Inbound::Control(header)) = answerer.on_header(&hello.encode()) else {
        panic!("a Hello is a control frame");
    };
    let error = answerer.on_control(&header, &[1, 2, 3]).unwrap_err();
    assert!(
        matches!(
            error,
            LinkError::Refused {
                peer: PeerName(None),
                ..
            }
        ),
        "{error}"
    );
    let reject = answerer.poll_transmit().expect("the refusal is answered");
    assert_eq!(reject.header.kind, FrameKind::HelloReject);
    assert_eq!(RejectCode::from_tag(reject.header.tag), RejectCode::Refused);
    assert!(String::from_utf8_lossy(&reject.payload).starts_with("malformed handshake"));
}

#[test]
fn a_connector_given_its_own_deadline_waits_until_then_and_reports_the_time_waited() {
    let now = Instant::now();
    let deadline = now + Duration::from_secs(30);
    let mut dialer = Link::connector_until(config(0), 1, now, deadline);
    assert_eq!(dialer.poll_timeout(), Some(deadline));
    assert_eq!(dialer.handle_timeout(now + Duration::from_secs(2)), Ok(()));
    assert_eq!(
        dialer.handle_timeout(deadline),
        Err(LinkError::HandshakeTimeout {
            peer: PeerName(Some(1)),
            timeout: Duration::from_secs(30)
        })
    );
    assert_eq!(dialer.poll_timeout(), None);
}

#[test]
fn a_data_frame_before_the_handshake_completed_fails_the_link_saying_so() {
    let mut answerer = Link::acceptor(config(1), Instant::now());
    let error = answerer
        .on_header(&FrameHeader::new(FrameKind::Eager).encode())
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "bad frame from a peer that has not sent its Hello: unexpected Eager frame before the handshake completed"
    );
}

fn keyed(rank: u32, key: &[u8], nonce: u8) -> LinkConfig {
    LinkConfig {
        auth: Some(LinkAuth {
            key: std::sync::Arc::new(tether_auth::Key::new(key, "test").unwrap()),
            nonce: [nonce; tether_auth::NONCE_LEN],
        }),
        ..config(rank)
    }
}

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

/// Runs an authenticated handshake to the acceptor's verdict.
fn keyed_handshake(
    dialer: LinkConfig,
    answerer: LinkConfig,
) -> (Link, Link, Result<(), LinkError>) {
    let now = Instant::now();
    let mut dialer = Link::connector(dialer, 1, now);
    let mut answerer = Link::acceptor(answerer, now);
    let result = (|| {
        pipe(&mut dialer, &mut answerer)?;
        pipe(&mut answerer, &mut dialer)?;
        pipe(&mut dialer, &mut answerer)
    })();
    (dialer, answerer, result)
}

#[test]
fn an_authenticated_handshake_shows_the_hello_only_after_the_proof() {
    let now = Instant::now();
    let mut dialer = Link::connector(keyed(0, KEY, 1), 1, now);
    let mut answerer = Link::acceptor(keyed(1, KEY, 2), now);
    pipe(&mut dialer, &mut answerer).unwrap();
    assert_eq!(answerer.state(), LinkState::AwaitingProof);
    assert_eq!(answerer.poll_event(), None, "no Hello before the proof");
    pipe(&mut answerer, &mut dialer).unwrap();
    assert_eq!(dialer.state(), LinkState::AwaitingAck);
    pipe(&mut dialer, &mut answerer).unwrap();
    assert!(matches!(
        answerer.poll_event(),
        Some(LinkEvent::HelloReceived(Hello {
            universe_rank: 0,
            ..
        }))
    ));
    answerer.accept_hello();
    pipe(&mut answerer, &mut dialer).unwrap();
    assert_eq!(
        (dialer.state(), answerer.state()),
        (LinkState::Open, LinkState::Open)
    );
    let mut eager = FrameHeader::new(FrameKind::Eager);
    dialer.stamp(&mut eager).unwrap();
    assert_eq!(eager.seq, 2, "Hello and Proof were frames 0 and 1");
    assert_eq!(
        answerer.on_header(&eager.encode()),
        Ok(Inbound::Deliver(eager))
    );
}

#[test]
fn a_wrong_key_is_refused_by_whichever_side_checks_first() {
    // The connector checks the acceptor's proof first.
    let (dialer, answerer, result) =
        keyed_handshake(keyed(0, KEY, 1), keyed(1, b"another key, long enough", 2));
    let error = result.unwrap_err();
    assert!(
        matches!(error, LinkError::Unauthenticated { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("holds another key"), "{error}");
    assert_eq!(dialer.state(), LinkState::Failed);
    assert_eq!(answerer.state(), LinkState::AwaitingProof);
}

#[test]
fn a_replayed_handshake_fails_at_the_proof_and_is_answered_with_a_reject() {
    // Record a genuine connector's Hello and Proof ...
    let now = Instant::now();
    let mut dialer = Link::connector(keyed(0, KEY, 1), 1, now);
    let mut answerer = Link::acceptor(keyed(1, KEY, 2), now);
    let hello = dialer.poll_transmit().unwrap();
    answerer.on_header(&hello.header.encode()).unwrap();
    answerer.on_control(&hello.header, &hello.payload).unwrap();
    pipe(&mut answerer, &mut dialer).unwrap();
    let proof = dialer.poll_transmit().unwrap();
    assert_eq!(proof.header.kind, FrameKind::Proof);
    // ... and play them to an acceptor that drew another nonce.
    let mut victim = Link::acceptor(keyed(1, KEY, 3), now);
    victim.on_header(&hello.header.encode()).unwrap();
    victim.on_control(&hello.header, &hello.payload).unwrap();
    let challenge = victim.poll_transmit().unwrap();
    assert_eq!(challenge.header.kind, FrameKind::Challenge);
    victim.on_header(&proof.header.encode()).unwrap();
    let error = victim
        .on_control(&proof.header, &proof.payload)
        .unwrap_err();
    assert!(matches!(error, LinkError::Refused { .. }), "{error}");
    assert!(error.to_string().contains("replayed"), "{error}");
    assert_eq!(victim.poll_event(), None, "the caller never saw the Hello");
    assert_eq!(
        victim.poll_transmit().unwrap().header.kind,
        FrameKind::HelloReject
    );
}

#[test]
fn a_key_on_one_side_only_is_refused_naming_the_setting() {
    for (dialer, answerer, says) in [
        (keyed(0, KEY, 1), config(1), "this process has none"),
        (config(0), keyed(1, KEY, 2), "has no key"),
    ] {
        let now = Instant::now();
        let mut dialer = Link::connector(dialer, 1, now);
        let mut answerer = Link::acceptor(answerer, now);
        let error = pipe(&mut dialer, &mut answerer).unwrap_err();
        assert!(matches!(error, LinkError::Refused { .. }), "{error}");
        assert!(error.to_string().contains(says), "{error}");
        assert_eq!(
            answerer.poll_event(),
            None,
            "the caller never saw the Hello"
        );
        let error = pipe(&mut answerer, &mut dialer).unwrap_err();
        assert!(
            matches!(error, LinkError::Unauthenticated { .. }),
            "{error}"
        );
        assert!(error.to_string().contains("TETHER_KEY_FILE"), "{error}");
        assert_eq!(dialer.state(), LinkState::Failed);
    }
}

#[test]
fn a_keyless_acceptor_that_answers_at_once_does_not_open_a_keyed_connector() {
    // An acceptor that skips the challenge (an old or hostile one) and
    // answers HelloAck: the keyed connector refuses to open.
    let now = Instant::now();
    let mut dialer = Link::connector(keyed(0, KEY, 1), 1, now);
    let mut ack = FrameHeader::new(FrameKind::HelloAck);
    ack.seq = 0;
    let payload = config(1).hello.encode();
    ack.payload_len = payload.len() as u64;
    dialer.poll_transmit().unwrap();
    dialer.on_header(&ack.encode()).unwrap();
    let error = dialer.on_control(&ack, &payload).unwrap_err();
    assert!(
        matches!(error, LinkError::Unauthenticated { .. }),
        "{error}"
    );
    assert_eq!(dialer.state(), LinkState::Failed);
}

/// Both ends of an open link, their `Established` events taken.
fn open_pair(now: Instant) -> (Link, Link) {
    let (mut dialer, mut answerer) = handshake(now);
    assert!(matches!(
        dialer.poll_event(),
        Some(LinkEvent::Established { .. })
    ));
    assert!(matches!(
        answerer.poll_event(),
        Some(LinkEvent::Established { .. })
    ));
    (dialer, answerer)
}

#[test]
fn a_retire_is_answered_in_kind_and_frames_sent_before_the_answer_still_arrive() {
    let now = Instant::now();
    let (mut a, mut b) = open_pair(now);
    assert!(a.retire());
    assert!(a.retiring() && !a.takes_frames());
    assert_eq!(
        a.poll_timeout(),
        None,
        "a busy peer answering late is no failure"
    );
    let mut refused = FrameHeader::new(FrameKind::Eager);
    assert!(
        a.stamp(&mut refused).is_err(),
        "nothing follows our retiring Bye"
    );
    // B stamped a frame before it read the retire: it still arrives.
    let mut before = FrameHeader::new(FrameKind::Eager);
    b.stamp(&mut before).unwrap();
    pipe(&mut a, &mut b).unwrap();
    assert_eq!(b.poll_event(), Some(LinkEvent::PeerRetiring));
    assert!(
        !b.takes_frames(),
        "frames after the peer's retire wait for a new link"
    );
    assert!(b.retire());
    assert!(b.retired());
    assert_eq!(b.poll_event(), Some(LinkEvent::Closed));
    assert_eq!(a.on_header(&before.encode()), Ok(Inbound::Deliver(before)));
    pipe(&mut b, &mut a).unwrap();
    assert!(a.retired());
    assert_eq!(a.poll_event(), Some(LinkEvent::Closed));
    assert!(!a.retire(), "a closed link has nothing to retire");
}

#[test]
fn retires_that_cross_close_both_ends_and_a_final_bye_crossing_one_is_no_retire() {
    let now = Instant::now();
    let (mut a, mut b) = open_pair(now);
    assert!(a.retire() && b.retire());
    pipe(&mut a, &mut b).unwrap();
    pipe(&mut b, &mut a).unwrap();
    assert!(a.retired() && b.retired());

    // B finalizes as A's retire is on its way: the link closes, but the
    // peer is not to be dialled again.
    let (mut a, mut b) = open_pair(now);
    assert!(a.retire());
    b.close(now);
    pipe(&mut a, &mut b).unwrap();
    pipe(&mut b, &mut a).unwrap();
    assert_eq!(
        (a.state(), b.state()),
        (LinkState::Closed, LinkState::Closed)
    );
    assert!(!a.retired() && !b.retired());

    // A finalizes while its retire waits: the answer is now due within
    // the goodbye timeout, and a link in its handshake is never retired.
    let (mut a, _b) = open_pair(now);
    assert!(a.retire());
    a.close(now);
    assert_eq!(a.poll_timeout(), Some(now + Duration::from_secs(1)));
    let mut dialling = Link::connector(config(0), 1, now);
    assert!(!dialling.retire());
    assert_eq!(dialling.state(), LinkState::AwaitingAck);
}

#[test]
fn a_refused_retire_reopens_the_link_at_both_ends_and_the_numbering_goes_on() {
    let now = Instant::now();
    let (mut a, mut b) = open_pair(now);
    assert!(a.retire());
    pipe(&mut a, &mut b).unwrap();
    assert_eq!(b.poll_event(), Some(LinkEvent::PeerRetiring));
    assert!(b.refuse_retire());
    assert!(b.takes_frames() && !b.refuse_retire());
    pipe(&mut b, &mut a).unwrap();
    let mut after = FrameHeader::new(FrameKind::Eager);
    b.stamp(&mut after).unwrap();
    assert_eq!(a.poll_event(), Some(LinkEvent::RetireRefused));
    assert_eq!(a.state(), LinkState::Open);
    assert_eq!(a.on_header(&after.encode()), Ok(Inbound::Deliver(after)));
    let mut next = FrameHeader::new(FrameKind::Eager);
    a.stamp(&mut next).unwrap();
    assert_eq!(b.on_header(&next.encode()), Ok(Inbound::Deliver(next)));
    // And it may be retired later all the same.
    assert!(a.retire());
    pipe(&mut a, &mut b).unwrap();
    assert!(b.retire() && b.retired());
}

#[test]
fn a_retire_refused_after_this_side_began_to_finalize_becomes_its_goodbye() {
    let now = Instant::now();
    let (mut a, mut b) = open_pair(now);
    assert!(a.retire());
    a.close(now);
    pipe(&mut a, &mut b).unwrap();
    assert_eq!(b.poll_event(), Some(LinkEvent::PeerRetiring));
    assert!(b.refuse_retire());
    pipe(&mut b, &mut a).unwrap();
    assert_eq!(
        a.poll_event(),
        None,
        "no reopening: the final Bye is queued instead"
    );
    assert_eq!(a.state(), LinkState::ByeSent);
    pipe(&mut a, &mut b).unwrap();
    assert_eq!(b.poll_event(), Some(LinkEvent::PeerClosing));
    b.close(now);
    pipe(&mut b, &mut a).unwrap();
    assert_eq!(
        (a.state(), b.state()),
        (LinkState::Closed, LinkState::Closed)
    );
}

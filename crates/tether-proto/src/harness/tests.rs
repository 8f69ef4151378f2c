//! The engine and its links on the virtual clock: deadlines that fire at
//! exactly their time, and MPI order when two links reorder frames.

use std::collections::HashMap;
use std::time::Duration;

use super::rng::XorShift;
use super::*;
use crate::engine::Stripe;
use crate::link::PeerName;
use crate::request::{CompletionError, Region, ReqId};

const NS: Duration = Duration::from_nanos(1);

fn region(buf: &mut [u8]) -> Region {
    Region {
        ptr: buf.as_mut_ptr(),
        len: buf.len(),
    }
}

fn slow(ranks: u32, rails: usize) -> WorldConfig {
    let mut config = WorldConfig::new(ranks);
    config.rails = rails;
    config.model.latency = Duration::from_millis(1);
    config
}

fn failure_of(w: &World, rank: u32) -> &Failure {
    w.failures
        .iter()
        .find(|f| f.rank == rank)
        .unwrap_or_else(|| panic!("rank {rank} saw no failure: {:?}", w.failures))
}

#[test]
fn a_handshake_without_answer_times_out_at_its_deadline_and_not_before() {
    let mut w = World::start(slow(2, 1));
    w.wire_model(0, 1, 0).loss = 1.0;
    let deadline = w.start_time() + Duration::from_secs(5);
    assert_eq!(w.next_timeout(), Some(deadline));
    let mut msg = [7u8; 8];
    let send = w.engines[0].isend(1, 0, 0, region(&mut msg));

    w.advance_to(deadline - NS);
    assert!(w.failures.is_empty(), "{:?}", w.failures);
    assert_eq!(w.link_state(0, 1, 0), LinkState::AwaitingAck);
    assert_eq!(w.engines[0].completion(send), None, "waits for the link");

    w.advance_to(deadline);
    let dialer = failure_of(&w, 0);
    assert_eq!(
        dialer.error,
        LinkError::HandshakeTimeout {
            peer: PeerName(Some(1)),
            timeout: Duration::from_secs(5)
        }
    );
    assert_eq!(
        dialer.error.to_string(),
        "no handshake with universe rank 1 within 5s"
    );
    assert_eq!((dialer.peer, dialer.at), (1, deadline));
    assert_eq!(
        failure_of(&w, 1).error.to_string(),
        "no handshake with a peer that has not sent its Hello within 5s"
    );
    assert_eq!(
        w.engines[0].completion(send).and_then(|c| c.error),
        Some(CompletionError::PeerLost)
    );
}

#[test]
fn a_refused_handshake_reports_the_reason_on_both_sides() {
    let mut config = slow(2, 1);
    config.universe[1] = 0xbad;
    let mut w = World::start(config);
    w.run_until_idle();
    let reason = "process world:0 belongs to another universe (id 0x7e7e, expected 0xbad)";
    let refuser = failure_of(&w, 1);
    assert_eq!(
        refuser.error,
        LinkError::Refused {
            peer: PeerName(Some(0)),
            reason: reason.into()
        }
    );
    assert_eq!(refuser.at, w.start_time() + Duration::from_millis(1));
    let dialer = failure_of(&w, 0);
    assert_eq!(
        dialer.error.to_string(),
        format!("universe rank 1 refused the connection: {reason}")
    );
    assert_eq!(dialer.at, w.start_time() + Duration::from_millis(2));
}

fn closed_both_ways(w: &World, rails: usize) {
    for rail in 0..rails {
        assert_eq!(w.link_state(0, 1, rail), LinkState::Closed);
        assert_eq!(w.link_state(1, 0, rail), LinkState::Closed);
    }
    let closed = |rank| {
        w.events
            .iter()
            .filter(|e| e.0 == rank && e.3 == LinkEvent::Closed)
            .count()
    };
    assert_eq!((closed(0), closed(1)), (rails, rails));
    assert!(w.failures.is_empty(), "{:?}", w.failures);
    assert_eq!(w.next_timeout(), None, "no deadline left");
}

#[test]
fn goodbye_in_turn_and_at_once_closes_every_link_both_ways() {
    let mut w = World::start(slow(2, 2));
    w.pump();
    w.close(0, 1);
    w.pump();
    assert_eq!(w.link_state(0, 1, 0), LinkState::ByeSent);
    assert_eq!(w.link_state(1, 0, 1), LinkState::ByeReceived);
    assert!(w.events.contains(&(1, 0, 1, LinkEvent::PeerClosing)));
    w.close(1, 0);
    w.pump();
    closed_both_ways(&w, 2);

    let mut w = World::start(slow(2, 2));
    w.pump();
    w.close(0, 1);
    w.close(1, 0);
    w.pump();
    closed_both_ways(&w, 2);
}

#[test]
fn a_goodbye_without_answer_times_out_at_its_deadline() {
    let mut w = World::start(slow(2, 1));
    w.pump();
    w.close(0, 1);
    let deadline = w.now() + Duration::from_secs(1);
    w.advance_to(deadline - NS);
    assert!(w.failures.is_empty(), "{:?}", w.failures);
    w.advance_to(deadline);
    let failure = failure_of(&w, 0);
    assert_eq!(
        failure.error.to_string(),
        "universe rank 1 sent no Bye within 1s of ours"
    );
    assert_eq!(failure.at, deadline);
}

#[test]
fn a_frame_lost_on_a_link_that_falls_silent_fails_the_peer_at_the_gap_deadline() {
    let mut w = World::start(slow(2, 2));
    w.pump();
    let mut sent: Vec<Vec<u8>> = (0..3).map(|i| vec![i as u8; 10]).collect();
    let mut got: Vec<Vec<u8>> = (0..3).map(|_| vec![0u8; 10]).collect();
    let recvs: Vec<ReqId> = got
        .iter_mut()
        .map(|buf| w.engines[1].irecv(Some(0), 0, Some(4), region(buf)))
        .collect();
    w.rail_choice = RailChoice::Fixed(0);
    w.drop_next(0, 1, 0, 1);
    w.engines[0].isend(1, 0, 4, region(&mut sent[0]));
    w.pump();
    w.rail_choice = RailChoice::Fixed(1);
    w.engines[0].isend(1, 0, 4, region(&mut sent[1]));
    w.engines[0].isend(1, 0, 4, region(&mut sent[2]));
    let sent_at = w.now();
    w.pump();
    assert_eq!(w.held(1, 0), 2, "both later frames wait for the lost one");
    assert!(recvs.iter().all(|&r| w.engines[1].completion(r).is_none()));

    let deadline = sent_at + Duration::from_millis(1) + Duration::from_millis(100);
    assert_eq!(w.next_timeout(), Some(deadline));
    w.advance_to(deadline - NS);
    assert!(w.failures.is_empty(), "{:?}", w.failures);
    w.advance_to(deadline);
    let failure = failure_of(&w, 1);
    assert_eq!(
        failure.error,
        LinkError::GapTimeout {
            peer: 0,
            missing: 0,
            held: 2,
            timeout: Duration::from_millis(100)
        }
    );
    assert_eq!(failure.at, deadline);
    for r in recvs {
        assert_eq!(
            w.engines[1].completion(r).and_then(|c| c.error),
            Some(CompletionError::PeerLost),
            "a receive waiting for the lost frame ends instead of hanging"
        );
    }
}

/// A message of the order test: who sent it, its place in the sender's
/// order, its tag and bytes (the first two name sender and place).
struct Message {
    source: u32,
    index: usize,
    tag: i32,
    bytes: Vec<u8>,
}

struct Receive {
    source: Option<u32>,
    tag: Option<i32>,
    req: ReqId,
    buf: Vec<u8>,
}

const SENDERS: u32 = 2;
const RECEIVER: u32 = 2;
const PER_SENDER: usize = 60;
const TAGS: u64 = 3;
/// Eager (up to `EAGER` = 64) and rendezvous sizes.
const SIZES: [usize; 6] = [2, 17, 64, 65, 300, 2000];
const LARGEST: usize = 2000;

fn message(rng: &mut XorShift, source: u32, index: usize) -> Message {
    let len = SIZES[rng.below(SIZES.len() as u64) as usize];
    let mut bytes: Vec<u8> = (0..len)
        .map(|k| (k as u8).wrapping_mul(13).wrapping_add(index as u8))
        .collect();
    bytes[0] = source as u8;
    bytes[1] = index as u8;
    Message {
        source,
        index,
        tag: rng.below(TAGS) as i32,
        bytes,
    }
}

/// Two senders, one receiver, two links per pair with jitter far above
/// latency; sends and receives (specific, ANY_SOURCE, ANY_TAG, both)
/// interleave with time passing, so messages meet both posted receives
/// and the unexpected queue.
/// With `retires`, a link of a random sender and the receiver is retired
/// now and then, by either side, and opened again: the stream crosses
/// the two links (and a refused retire where the receiver pins sender 1).
fn run_order_scenario(
    seed: u64,
    stripe: Option<Stripe>,
    retires: bool,
) -> (World, Vec<Message>, Vec<Receive>) {
    let mut config = WorldConfig::new(3);
    config.rails = 2;
    config.seed = seed;
    config.model = WireModel {
        latency: Duration::from_micros(20),
        jitter: Duration::from_micros(300),
        loss: 0.0,
    };
    let mut w = World::start(config);
    for sender in 0..SENDERS as usize {
        w.engines[sender].set_stripe(RECEIVER, stripe);
    }
    w.pump();
    let mut rng = XorShift::new(seed ^ 0x5eed);
    let mut messages: Vec<Message> = (0..SENDERS)
        .flat_map(|s| (0..PER_SENDER).map(move |i| (s, i)))
        .map(|(s, i)| message(&mut rng, s, i))
        .collect();
    let mut receives: Vec<Receive> = Vec::new();
    let mut next_send = [0usize; SENDERS as usize];
    let total = SENDERS as usize * PER_SENDER;
    let mut sends = Vec::new();
    if retires {
        w.pinned.push((RECEIVER, 1));
    }
    while receives.len() < total || next_send.iter().any(|&n| n < PER_SENDER) {
        match rng.below(if retires { 5 } else { 4 }) {
            4 => {
                let s = rng.below(SENDERS as u64) as u32;
                match rng.below(2) {
                    0 => w.retire(s, RECEIVER),
                    _ => w.retire(RECEIVER, s),
                }
            }
            0 | 1 => {
                let s = rng.below(SENDERS as u64) as usize;
                if next_send[s] < PER_SENDER {
                    let m = &mut messages[s * PER_SENDER + next_send[s]];
                    let req = w.engines[s].isend(RECEIVER, 0, m.tag, region(&mut m.bytes));
                    sends.push((s, req));
                    next_send[s] += 1;
                }
            }
            2 if receives.len() < total => {
                let source = (rng.below(2) == 0).then(|| rng.below(SENDERS as u64) as u32);
                let tag = (rng.below(2) == 0).then(|| rng.below(TAGS) as i32);
                let mut buf = vec![0u8; LARGEST];
                let req = w.engines[RECEIVER as usize].irecv(source, 0, tag, region(&mut buf));
                receives.push(Receive {
                    source,
                    tag,
                    req,
                    buf,
                });
            }
            _ => {
                let pause = Duration::from_micros(rng.below(120));
                w.advance_to(w.now() + pause);
            }
        }
    }
    w.pump();
    // Random selectors may leave a receive with nothing to match; such a
    // receive is cancelled and the messages it left are taken by
    // ANY_SOURCE/ANY_TAG receives, which the order check covers too.
    let receiver = &mut w.engines[RECEIVER as usize];
    receives.retain(|r| receiver.completion(r.req).is_some() || !receiver.cancel(r.req));
    while receiver.iprobe(None, 0, None).is_some() {
        let mut buf = vec![0u8; LARGEST];
        let req = receiver.irecv(None, 0, None, region(&mut buf));
        receives.push(Receive {
            source: None,
            tag: None,
            req,
            buf,
        });
    }
    w.pump();
    for (s, req) in sends {
        let c = w.engines[s]
            .take_completion(req)
            .expect("every send completes");
        assert_eq!(c.error, None);
    }
    (w, messages, receives)
}

fn check_order(seed: u64, receiver: &Engine, messages: &[Message], receives: &[Receive]) {
    // For each receive in posting order: the message it took.
    let mut taken = vec![false; messages.len()];
    let got: Vec<usize> = receives
        .iter()
        .map(|r| {
            let c = receiver.completion(r.req).expect("every receive completes");
            assert_eq!(c.error, None, "seed {seed}");
            let (source, index) = (r.buf[0] as u32, r.buf[1] as usize);
            let at = source as usize * PER_SENDER + index;
            let m = &messages[at];
            assert_eq!(
                (c.source, c.tag, c.bytes),
                (m.source, m.tag, m.bytes.len() as u64)
            );
            assert_eq!(&r.buf[..m.bytes.len()], &m.bytes[..], "seed {seed}");
            assert!(!taken[at], "seed {seed}: message {at} received twice");
            taken[at] = true;
            at
        })
        .collect();
    assert!(
        taken.iter().all(|&t| t),
        "seed {seed}: a message was not received"
    );
    // Non-overtaking: a receive never takes a later message of a sender
    // while an earlier one it also matches goes to a receive posted after it.
    for (i, &a) in got.iter().enumerate() {
        for &b in &got[i + 1..] {
            let (ma, mb) = (&messages[a], &messages[b]);
            let matches_b = receives[i].source.is_none_or(|s| s == mb.source)
                && receives[i].tag.is_none_or(|t| t == mb.tag);
            assert!(
                !(ma.source == mb.source && mb.index < ma.index && matches_b),
                "seed {seed}: receive {i} took message {} of rank {} before message {} it also matches",
                ma.index,
                ma.source,
                mb.index
            );
        }
    }
}

#[test]
fn mpi_order_holds_when_two_links_reorder_a_peers_frames() {
    for seed in 1..=100 {
        let (w, messages, receives) = run_order_scenario(seed, None, false);
        assert!(
            w.overtaken > 10,
            "seed {seed}: only {} frames were overtaken; the links hardly reordered",
            w.overtaken
        );
        check_order(seed, &w.engines[RECEIVER as usize], &messages, &receives);
    }
}

/// The order test with rendezvous data striped: chunks take any link and
/// no place in the peer's order, so they arrive out of order, while MPI's
/// order (of the `Eager`s and `Rts`s) holds and every byte lands in place.
#[test]
fn striped_data_lands_in_place_and_mpi_order_holds_when_chunks_arrive_out_of_order() {
    let stripe = Stripe {
        threshold: 300,
        chunk: 128,
    };
    let mut reordered = 0;
    for seed in 1..=50 {
        let (w, messages, receives) = run_order_scenario(seed, Some(stripe), false);
        check_order(seed, &w.engines[RECEIVER as usize], &messages, &receives);
        let mut last_offset: HashMap<u64, u64> = HashMap::new();
        for &(_, receive, offset) in &w.chunk_log {
            let last = last_offset.insert(receive, offset);
            reordered += usize::from(last.is_some_and(|last| last > offset));
        }
        let largest = messages.iter().filter(|m| m.bytes.len() >= 300).count();
        assert!(
            w.chunk_log.len() >= largest * 3,
            "seed {seed}: {} chunks for {largest} striped messages",
            w.chunk_log.len()
        );
    }
    assert!(
        reordered > 100,
        "only {reordered} chunks arrived before an earlier one"
    );
}

/// MPI order and every byte across links retired in the middle of the
/// stream and opened again (the lower rank dialling), with the frames
/// emitted meanwhile waiting for the new link; a pinned peer's retires
/// are refused and its links stay.
#[test]
fn mpi_order_holds_and_nothing_is_lost_across_retired_and_reopened_links() {
    let mut reopened = 0;
    let mut refused = 0;
    for seed in 1..=100 {
        let (w, messages, receives) = run_order_scenario(seed, None, true);
        check_order(seed, &w.engines[RECEIVER as usize], &messages, &receives);
        reopened += w.reopened;
        refused += w
            .events
            .iter()
            .filter(|(_, _, _, e)| *e == LinkEvent::RetireRefused)
            .count();
        let pinned_reopened = w
            .events
            .iter()
            .any(|(rank, peer, _, e)| (*rank, *peer) == (1, RECEIVER) && *e == LinkEvent::Closed);
        assert!(!pinned_reopened, "seed {seed}: a pinned link closed");
    }
    assert!(
        reopened > 500,
        "only {reopened} links were retired and opened again"
    );
    assert!(refused > 100, "only {refused} retires were refused");
}

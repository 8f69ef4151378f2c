//! The composite over recording rails: which rail takes which frame,
//! and where deliveries go back.

use tether_proto::{FrameHeader, TransmitPayload};

use super::*;

/// A rail that records what it takes; `unwritten` stands for its queue.
#[derive(Default)]
struct Recorder {
    sent: Vec<Transmit>,
    placed: Vec<u32>,
    unwritten: u64,
    full: bool,
    peer_rails: Option<usize>,
    events: Events,
}

impl Transport for Recorder {
    fn caps(&self) -> Caps {
        Caps::NONE
    }
    fn send(&mut self, t: Transmit) -> Result<(), NoResource> {
        self.unwritten += t.payload.len() as u64;
        self.sent.push(t);
        Ok(())
    }
    fn place(&mut self, peer: u32, _: PayloadSink) {
        self.placed.push(peer);
    }
    fn broke_protocol(&mut self, _: u32, _: WireError) {}
    fn events(&mut self) -> &mut Events {
        &mut self.events
    }
    fn has_output(&self) -> bool {
        false
    }
    fn say_goodbye(&mut self) {}
    fn all_goodbyes_heard(&self) -> bool {
        true
    }
    fn broadcast_abort(&mut self, _: i32) {}
}

impl Rail for Recorder {
    fn unwritten_to(&self, _: u32) -> u64 {
        self.unwritten
    }
    fn has_room(&self, _: u32) -> bool {
        !self.full
    }
    fn rails_of(&self, _: u32) -> Option<usize> {
        self.peer_rails
    }
}

/// This process's universe rank.
const ME: u32 = 5;

const STRIPE: Stripe = Stripe {
    threshold: 100,
    chunk: 10,
};

fn composite(rails: usize, peer_rails: Option<usize>, policy: RailPolicy) -> MultiRail<Recorder> {
    let rails = (0..rails)
        .map(|_| Recorder {
            peer_rails,
            ..Recorder::default()
        })
        .collect();
    MultiRail::new(rails, ME, policy, STRIPE)
}

fn frame(peer: u32, kind: FrameKind, flags: u8, len: usize) -> Transmit {
    let mut header = FrameHeader::new(kind);
    header.flags = flags;
    header.payload_len = len as u64;
    Transmit {
        peer,
        header,
        payload: TransmitPayload::Owned(vec![0; len]),
        completes: None,
        copy_if_blocked: false,
    }
}

fn chunk(peer: u32, len: usize) -> Transmit {
    frame(peer, FrameKind::Data, FLAG_CHUNK, len)
}

/// How many frames each rail took.
fn taken(m: &MultiRail<Recorder>) -> Vec<usize> {
    m.rails().iter().map(|r| r.sent.len()).collect()
}

#[test]
fn ordered_frames_stay_on_the_peers_home_rail_and_homes_go_round() {
    let mut m = composite(3, Some(3), RailPolicy::RoundRobin);
    for peer in [7, 8, 9, 10] {
        for kind in [
            FrameKind::Eager,
            FrameKind::Rts,
            FrameKind::Cts,
            FrameKind::Data,
        ] {
            m.send(frame(peer, kind, 0, 500)).unwrap();
        }
    }
    // Homes (5 + peer) mod 3: peers 7, 8, 9, 10 on rails 0, 1, 2, 0.
    assert_eq!(taken(&m), [8, 4, 4]);
    for (rail, peers) in [(0, vec![7, 10]), (1, vec![8]), (2, vec![9])] {
        let mut seen: Vec<u32> = m.rails()[rail].sent.iter().map(|t| t.peer).collect();
        seen.dedup();
        assert_eq!(seen, peers, "rail {rail}");
    }
    assert_eq!(m.caps().stripe, Some(STRIPE));
}

#[test]
fn round_robin_deals_chunks_to_every_rail_in_turn() {
    let mut m = composite(4, Some(4), RailPolicy::RoundRobin);
    for _ in 0..10 {
        m.send(chunk(3, 10)).unwrap();
    }
    assert_eq!(taken(&m), [3, 3, 2, 2]);
}

#[test]
fn a_chunk_waits_until_a_rail_the_policy_allows_has_room() {
    for policy in [RailPolicy::RoundRobin, RailPolicy::LeastUsed] {
        let mut m = composite(2, Some(2), policy);
        m.rails_mut()[0].full = true;
        // Round robin waits for rail 0's turn; least used takes rail 1.
        let first = m.send(chunk(3, 10));
        assert_eq!(first.is_ok(), policy == RailPolicy::LeastUsed, "{policy:?}");
        m.rails_mut()[1].full = true;
        assert!(
            m.send(chunk(3, 10)).is_err(),
            "{policy:?}: no rail has room"
        );
        // Ordered frames go home whatever the room: the link queues them.
        assert!(m.send(frame(3, FrameKind::Eager, 0, 4)).is_ok());
        m.rails_mut()[0].full = false;
        assert!(m.send(chunk(3, 10)).is_ok(), "{policy:?}");
    }
}

#[test]
fn least_used_sends_each_chunk_where_least_waits() {
    let mut m = composite(2, Some(2), RailPolicy::LeastUsed);
    // Rail 1 drains twice as fast as rail 0 (6 bytes a round against 3),
    // and together they drain less than a chunk a round: queues build.
    for _ in 0..30 {
        m.send(chunk(5, 10)).unwrap();
        for (rail, drained) in m.rails_mut().iter_mut().zip([3, 6]) {
            rail.unwritten = rail.unwritten.saturating_sub(drained);
        }
    }
    let [slow, fast] = taken(&m)[..] else {
        unreachable!()
    };
    assert!(
        fast >= slow * 3 / 2 && slow > 0,
        "fast rail {fast} chunks, slow {slow}"
    );
}

#[test]
fn a_peer_with_fewer_rails_is_reached_on_those_it_has() {
    let mut m = composite(4, Some(2), RailPolicy::RoundRobin);
    for _ in 0..6 {
        m.send(chunk(1, 10)).unwrap();
    }
    assert_eq!(taken(&m), [3, 3, 0, 0]);
}

#[test]
fn frames_wait_until_the_peers_rails_are_known() {
    let mut m = composite(4, None, RailPolicy::RoundRobin);
    assert!(m.send(frame(2, FrameKind::Eager, 0, 4)).is_err());
    assert!(m.send(chunk(2, 10)).is_err());
    assert_eq!(m.home_of(2), None);
    for rail in m.rails_mut() {
        rail.peer_rails = Some(2);
    }
    assert!(m.send(frame(2, FrameKind::Eager, 0, 4)).is_ok());
    assert_eq!(m.home_of(2), Some(1), "(5 + 2) mod 2");
    assert_eq!(taken(&m), [0, 1, 0, 0]);
}

#[test]
fn a_failed_rail_is_taken_out_and_reports_its_unsent_chunks_sent() {
    let mut m = composite(3, Some(3), RailPolicy::RoundRobin);
    let peer = 1; // home (5 + 1) mod 3 = rail 0
    let send = ReqId::from_wire(7);
    for _ in 0..6 {
        let mut t = chunk(peer, 10);
        t.completes = Some(send);
        m.send(t).unwrap();
    }
    assert_eq!(taken(&m), [2, 2, 2]);
    // Rail 2 wrote one of its chunks, then lost the peer.
    m.rails_mut()[2].events.sent.push(send);
    m.collect();
    assert_eq!(m.events.sent.drain(..).count(), 1);
    let error = crate::error::err(crate::error::ErrorClass::PeerLost, "cut");
    m.rails_mut()[2].events.lost(peer, error.clone());
    m.collect();
    assert_eq!(
        m.events.sent.drain(..).collect::<Vec<_>>(),
        [send],
        "the one it dropped"
    );
    assert!(matches!(
        m.events.links.pop(),
        Some(LinkEvent::RailLost {
            peer: 1,
            rail: 2,
            ..
        })
    ));
    for _ in 0..4 {
        m.send(chunk(peer, 10)).unwrap();
    }
    assert_eq!(taken(&m), [4, 4, 2], "rail 2 takes no more");
    // The home rail's loss is the peer's.
    m.rails_mut()[0].events.lost(peer, error);
    m.collect();
    assert!(matches!(
        m.events.links.pop(),
        Some(LinkEvent::Lost { peer: 1, .. })
    ));
}

#[test]
fn one_rail_is_rail_zero_and_no_stripe() {
    let mut m = composite(1, Some(1), RailPolicy::LeastUsed);
    m.send(chunk(1, 10)).unwrap();
    m.send(frame(2, FrameKind::Eager, 0, 4)).unwrap();
    assert_eq!(taken(&m), [2]);
    assert_eq!(m.caps().stripe, None);
}

#[test]
fn a_frames_delivery_goes_back_to_the_rail_it_came_from() {
    let mut m = composite(3, Some(3), RailPolicy::RoundRobin);
    for (rail, peer) in [(2, 20), (0, 21), (1, 22), (2, 23)] {
        m.rails_mut()[rail]
            .events
            .frames
            .push_back((peer, FrameHeader::new(FrameKind::Eager)));
        m.collect();
    }
    let order: Vec<u32> = m.events.frames.drain(..).map(|(peer, _)| peer).collect();
    assert_eq!(order, [20, 21, 22, 23]);
    for peer in order {
        m.place(peer, PayloadSink::None);
    }
    let placed: Vec<Vec<u32>> = m.rails().iter().map(|r| r.placed.clone()).collect();
    assert_eq!(placed, [vec![21], vec![22], vec![20, 23]]);
}

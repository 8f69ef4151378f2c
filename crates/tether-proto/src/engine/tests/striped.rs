//! The striped rendezvous, one engine at a time, frames written by hand:
//! what a sender cuts, when its send completes, what a receiver refuses.

use super::*;
use crate::engine::Stripe;
use crate::wire::FLAG_CHUNK;

const STRIPE: Stripe = Stripe {
    threshold: 1000,
    chunk: 300,
};

fn engine(me: u32) -> Engine {
    Engine::new(EngineConfig {
        me,
        eager_limit: EAGER,
    })
}

/// Engine 1's `Cts` for a 1000-byte message from rank 0 into `buf`.
fn matched_receive(buf: &mut [u8]) -> (Engine, ReqId, FrameHeader) {
    let mut receiver = engine(1);
    let req = receiver.irecv(Some(0), 0, Some(4), region(buf));
    let mut rts = FrameHeader::new(FrameKind::Rts);
    rts.tag = 4;
    rts.msg_size = 1000;
    rts.sender_req = 77;
    assert!(matches!(receiver.on_header(0, &rts), Ok(PayloadSink::None)));
    let cts = receiver.poll_transmit().expect("a Cts").header;
    assert_eq!(cts.kind, FrameKind::Cts);
    (receiver, req, cts)
}

fn chunk(cts: &FrameHeader, offset: u64, len: u64) -> FrameHeader {
    let mut data = data_answering(cts);
    data.flags = FLAG_CHUNK;
    data.sender_req = offset;
    data.payload_len = len;
    data
}

/// Reads `bytes` into where the engine says, as a transport would.
fn land(engine: &mut Engine, header: &FrameHeader, bytes: &[u8]) {
    match engine.on_header(0, header) {
        Ok(PayloadSink::Region { region, token, .. }) => {
            // SAFETY: the region is the test's receive buffer, alive.
            unsafe { region.copy_from(bytes) };
            engine.payload_done(token, None);
        }
        other => panic!("a chunk goes to a region: {other:?}"),
    }
}

/// A sender with its `Cts` answered and its chunks queued.
fn striped_send(data: &mut [u8]) -> (Engine, ReqId, Vec<Transmit>) {
    let mut sender = engine(0);
    sender.set_stripe(1, Some(STRIPE));
    let send = sender.isend(1, 0, 4, region(data));
    let rts = sender.poll_transmit().expect("an Rts");
    let mut cts = FrameHeader::new(FrameKind::Cts);
    cts.tag = 4;
    cts.msg_size = data.len() as u64;
    cts.sender_req = rts.header.sender_req;
    cts.receiver_req = 9;
    assert!(sender.on_header(1, &cts).is_ok());
    let chunks = std::iter::from_fn(|| sender.poll_transmit()).collect();
    (sender, send, chunks)
}

fn landed(receiver_req: u64) -> FrameHeader {
    let mut landed = FrameHeader::new(FrameKind::Landed);
    landed.receiver_req = receiver_req;
    landed
}

#[test]
fn a_sender_cuts_granted_data_into_chunks_and_completes_when_all_are_taken_and_landed() {
    let mut data = pattern(1000, 5);
    let (mut sender, send, chunks) = striped_send(&mut data);
    let cut: Vec<(u64, usize)> = chunks
        .iter()
        .map(|t| (t.header.sender_req, t.payload.len()))
        .collect();
    assert_eq!(cut, [(0, 300), (300, 300), (600, 300), (900, 100)]);
    for t in &chunks {
        assert_eq!(t.header.flags, FLAG_CHUNK);
        assert_eq!((t.header.msg_size, t.header.receiver_req), (1000, 9));
    }
    for t in &chunks {
        sender.transmit_done(t.completes.expect("each chunk counts"));
        assert_eq!(
            sender.completion(send),
            None,
            "not before the receiver has it"
        );
    }
    let unknown =
        |r: Result<PayloadSink, WireError>| matches!(r, Err(WireError::UnknownHandle { .. }));
    assert!(unknown(sender.on_header(1, &landed(8))), "another receive");
    assert!(unknown(sender.on_header(2, &landed(9))), "another peer");
    assert!(matches!(
        sender.on_header(1, &landed(9)),
        Ok(PayloadSink::None)
    ));
    assert_eq!(done(&mut sender, send).bytes, 1000);
    assert!(unknown(sender.on_header(1, &landed(9))), "landed twice");
}

#[test]
fn after_a_rail_failed_the_chunks_of_sends_not_landed_go_again() {
    let mut data = pattern(1000, 5);
    let (mut sender, send, first) = striped_send(&mut data);
    // Some chunks were taken, the others dropped with the failed rail
    // (which the transport reports as taken: nothing will read them).
    for t in &first {
        sender.transmit_done(t.completes.unwrap());
    }
    sender.rail_lost(1);
    let again: Vec<Transmit> = std::iter::from_fn(|| sender.poll_transmit()).collect();
    let offsets: Vec<u64> = again.iter().map(|t| t.header.sender_req).collect();
    assert_eq!(offsets, [0, 300, 600, 900], "every chunk again");
    assert!(sender.on_header(1, &landed(9)).is_ok());
    assert_eq!(
        sender.completion(send),
        None,
        "the chunks sent again still read the buffer"
    );
    for t in &again {
        sender.transmit_done(t.completes.unwrap());
    }
    assert_eq!(done(&mut sender, send).error, None);
    // Nothing goes again for a send that has completed.
    sender.rail_lost(1);
    assert!(sender.poll_transmit().is_none());
}

#[test]
fn below_the_threshold_or_without_a_stripe_data_goes_whole() {
    for (stripe, len) in [(Some(STRIPE), 999usize), (None, 5000)] {
        let mut sender = engine(0);
        sender.set_stripe(1, stripe);
        let mut data = pattern(len, 1);
        sender.isend(1, 0, 4, region(&mut data));
        let rts = sender.poll_transmit().expect("an Rts");
        let mut cts = FrameHeader::new(FrameKind::Cts);
        cts.msg_size = len as u64;
        cts.sender_req = rts.header.sender_req;
        assert!(sender.on_header(1, &cts).is_ok());
        let data = sender.poll_transmit().expect("one Data frame");
        assert_eq!((data.header.flags, data.payload.len()), (0, len));
        assert!(sender.poll_transmit().is_none());
    }
}

#[test]
fn a_receiver_takes_chunks_in_any_order_and_completes_when_all_landed() {
    let mut buf = vec![0u8; 1000];
    let want = pattern(1000, 3);
    let (mut receiver, req, cts) = matched_receive(&mut buf);
    for (offset, len) in [(600u64, 400u64), (0, 250), (250, 350)] {
        assert_eq!(receiver.completion(req), None);
        let range = offset as usize..(offset + len) as usize;
        land(&mut receiver, &chunk(&cts, offset, len), &want[range]);
    }
    let got = done(&mut receiver, req);
    assert_eq!(
        (got.source, got.tag, got.bytes, got.error),
        (0, 4, 1000, None)
    );
    assert_eq!(buf, want);
    assert_eq!(receiver.live_requests(), 0);
    let landed = receiver.poll_transmit().expect("a Landed");
    assert_eq!((landed.peer, landed.header.kind), (0, FrameKind::Landed));
    assert_eq!(landed.header.receiver_req, cts.receiver_req);
}

#[test]
fn a_chunk_read_twice_counts_once_and_late_repeats_are_dropped_after_a_failure() {
    let mut buf = vec![0u8; 1000];
    let want = pattern(1000, 3);
    let (mut receiver, req, cts) = matched_receive(&mut buf);
    land(&mut receiver, &chunk(&cts, 0, 600), &want[..600]);
    receiver.rail_lost(0);
    land(&mut receiver, &chunk(&cts, 0, 600), &want[..600]);
    assert_eq!(receiver.completion(req), None, "a repeat counts once");
    land(&mut receiver, &chunk(&cts, 600, 400), &want[600..]);
    assert_eq!(done(&mut receiver, req).bytes, 1000);
    assert_eq!(buf, want);
    // A repeat after completion is read and dropped, not into the buffer.
    match receiver.on_header(0, &chunk(&cts, 600, 400)) {
        Ok(PayloadSink::Region {
            region, discard, ..
        }) => assert_eq!((region.len, discard), (0, 400)),
        other => panic!("a late repeat is dropped: {other:?}"),
    }
}

#[test]
fn a_receiver_refuses_chunks_outside_the_granted_data() {
    let mut buf = vec![0u8; 1000];
    let (mut receiver, _, cts) = matched_receive(&mut buf);
    let refused =
        |r: Result<PayloadSink, WireError>| matches!(r, Err(WireError::DataLength { .. }));
    assert!(
        refused(receiver.on_header(0, &chunk(&cts, 900, 200))),
        "past the end"
    );
    assert!(
        refused(receiver.on_header(0, &chunk(&cts, u64::MAX, 2))),
        "offset overflow"
    );
    assert!(refused(receiver.on_header(0, &chunk(&cts, 10, 0))), "empty");
    let mut wrong_size = chunk(&cts, 0, 10);
    wrong_size.msg_size = 999;
    assert!(refused(receiver.on_header(0, &wrong_size)), "another size");
    assert!(
        matches!(
            receiver.on_header(2, &chunk(&cts, 600, 400)),
            Err(WireError::UnknownHandle { .. })
        ),
        "from another peer"
    );
}

#[test]
fn a_repeat_that_outruns_the_failure_is_dropped_but_a_chunk_for_no_receive_is_refused() {
    let mut buf = vec![0u8; 1000];
    let want = pattern(1000, 4);
    let (mut receiver, req, cts) = matched_receive(&mut buf);
    land(&mut receiver, &chunk(&cts, 0, 1000), &want);
    assert_eq!(done(&mut receiver, req).bytes, 1000);
    // The sender saw a rail fail first and sent the chunk again; this
    // side has not seen it: the receive is remembered, the repeat dropped.
    match receiver.on_header(0, &chunk(&cts, 0, 1000)) {
        Ok(PayloadSink::Region {
            region, discard, ..
        }) => {
            assert_eq!((region.len, discard), (0, 1000))
        }
        other => panic!("a repeat for a landed receive is dropped: {other:?}"),
    }
    let mut never = chunk(&cts, 0, 10);
    never.receiver_req = cts.receiver_req ^ 0xffff;
    assert!(matches!(
        receiver.on_header(0, &never),
        Err(WireError::UnknownHandle { .. })
    ));
}

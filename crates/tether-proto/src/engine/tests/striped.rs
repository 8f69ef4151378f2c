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

#[test]
fn a_sender_cuts_granted_data_into_chunks_and_completes_after_the_last() {
    let mut sender = engine(0);
    sender.set_stripe(1, Some(STRIPE));
    let mut data = pattern(1000, 5);
    let send = sender.isend(1, 0, 4, region(&mut data));
    let rts = sender.poll_transmit().expect("an Rts");
    let mut cts = FrameHeader::new(FrameKind::Cts);
    cts.tag = 4;
    cts.msg_size = 1000;
    cts.sender_req = rts.header.sender_req;
    cts.receiver_req = 9;
    assert!(sender.on_header(1, &cts).is_ok());
    let chunks: Vec<Transmit> = std::iter::from_fn(|| sender.poll_transmit()).collect();
    let cut: Vec<(u64, usize)> = chunks
        .iter()
        .map(|t| (t.header.sender_req, t.payload.len()))
        .collect();
    assert_eq!(cut, [(0, 300), (300, 300), (600, 300), (900, 100)]);
    for t in &chunks {
        assert_eq!(t.header.flags, FLAG_CHUNK);
        assert_eq!((t.header.msg_size, t.header.receiver_req), (1000, 9));
    }
    for t in &chunks[..3] {
        sender.transmit_done(t.completes.expect("each chunk counts"));
        assert_eq!(sender.completion(send), None, "not before the last chunk");
    }
    sender.transmit_done(send);
    assert_eq!(done(&mut sender, send).bytes, 1000);
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
}

#[test]
fn a_receiver_refuses_chunks_outside_the_granted_data_or_beyond_it() {
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
    land(&mut receiver, &chunk(&cts, 0, 600), &[1; 600]);
    assert!(
        refused(receiver.on_header(0, &chunk(&cts, 0, 600))),
        "more bytes than granted: a repeat"
    );
    assert!(
        matches!(
            receiver.on_header(2, &chunk(&cts, 600, 400)),
            Err(WireError::UnknownHandle { .. })
        ),
        "from another peer"
    );
}

//! The rendezvous by remote memory (`engine/remote.rs`) between engines
//! of the test world, whose puts and gets are copies in this process.

use super::*;
use crate::engine::remote::SHORTEST_REMOTE_RUN;
use crate::harness::RmaRecord;
use crate::rma::{split_point, RemoteKey};
use crate::wire::{FLAG_REMOTE_KEY, FLAG_SPLIT, FLAG_WRITTEN};

const SPLIT: u64 = 8192;

/// Sends `len` bytes from rank 0 to a receive of `receive` bytes at rank
/// 1 and checks what arrived; returns the world's operations.
fn transfer(model: RemoteModel, split: u64, len: usize, receive: usize) -> Vec<RmaRecord> {
    let mut w = World::new(2);
    w.enable_remote_memory(split, model);
    let mut src = pattern(len, 5);
    let mut dst = vec![0u8; receive];
    let r = w.engines[1].irecv(Some(0), 0, Some(3), region(&mut dst));
    let s = w.engines[0].isend(1, 0, 3, region(&mut src));
    w.pump();
    let got = done(&mut w.engines[1], r);
    assert_eq!((got.source, got.tag, got.bytes), (0, 3, len as u64));
    let n = len.min(receive);
    assert_eq!(dst[..n], src[..n], "len {len} receive {receive} {model:?}");
    let truncated = (receive < len).then_some(CompletionError::Truncated);
    assert_eq!(got.error, truncated);
    assert_eq!(done(&mut w.engines[0], s).error, None);
    assert!(w.failures.is_empty(), "{:?}", w.failures);
    assert_eq!(
        w.engines[0].live_requests() + w.engines[1].live_requests(),
        0
    );
    let moved = |rank: u32, put: bool| -> u64 {
        let done = w.rma_log.iter().filter(|r| r.status == RmaStatus::Done);
        done.filter(|r| (r.rank, r.put) == (rank, put))
            .map(|r| r.bytes as u64)
            .sum()
    };
    assert_eq!(w.engines[0].counters().peer(1).bytes_put, moved(0, true));
    assert_eq!(w.engines[1].counters().peer(0).bytes_got, moved(1, false));
    w.rma_log
}

/// Hands the keyed frame `t` from `from` to `to` by hand, as a link
/// would: its header, then its key as the payload.
fn hand_keyed(to: &mut Engine, from: u32, mut t: Transmit) {
    t.header.payload_len = t.payload.len() as u64;
    let TransmitPayload::Owned(key) = t.payload else {
        panic!("a keyed frame carries its key: {:?}", t.header);
    };
    let PayloadSink::Owned { token, .. } = to.on_header(from, &t.header).unwrap() else {
        panic!("the key is read as an owned payload");
    };
    to.payload_done(token, Some(key));
}

fn op(rank: u32, put: bool, bytes: u64, status: RmaStatus) -> RmaRecord {
    RmaRecord {
        rank,
        put,
        bytes: bytes as usize,
        status,
    }
}

#[test]
fn below_the_split_the_sender_writes_everything() {
    let log = transfer(ALL_DONE, SPLIT, 5000, 5000);
    assert_eq!(log, [op(0, true, 5000, RmaStatus::Done)]);
}

#[test]
fn from_the_split_on_both_sides_copy_their_half() {
    let len = 100_000u64;
    let at = split_point(len);
    let log = transfer(ALL_DONE, SPLIT, len as usize, len as usize);
    let mut sorted = log.clone();
    sorted.sort_by_key(|r| r.rank);
    assert_eq!(
        sorted,
        [
            op(0, true, at, RmaStatus::Done),
            op(1, false, len - at, RmaStatus::Done)
        ]
    );
}

#[test]
fn a_truncated_receive_grants_and_gets_only_what_fits() {
    let log = transfer(ALL_DONE, SPLIT, 100_000, 30_000);
    let at = split_point(30_000);
    assert!(log.contains(&op(0, true, at, RmaStatus::Done)), "{log:?}");
    assert!(log.contains(&op(1, false, 30_000 - at, RmaStatus::Done)));
    let log = transfer(ALL_DONE, 0, 100_000, 30_000);
    assert_eq!(log, [op(0, true, 30_000, RmaStatus::Done)]);
}

#[test]
fn a_refused_write_sends_the_data_through_the_link_and_writes_no_more() {
    let refused = RemoteModel {
        puts: RmaStatus::Refused,
        gets: RmaStatus::Done,
    };
    let log = transfer(refused, 0, 5000, 5000);
    assert_eq!(log, [op(0, true, 5000, RmaStatus::Refused)]);
    // Split: the receiver read its half, the link carries all of it.
    let log = transfer(refused, SPLIT, 100_000, 100_000);
    assert_eq!(log.iter().filter(|r| r.put).count(), 1);

    let mut w = World::new(2);
    w.enable_remote_memory(0, refused);
    for round in 0..2 {
        let mut src = pattern(5000, round);
        let mut dst = vec![0u8; 5000];
        let r = w.engines[1].irecv(Some(0), 0, Some(0), region(&mut dst));
        w.engines[0].isend(1, 0, 0, region(&mut src));
        w.pump();
        assert_eq!(done(&mut w.engines[1], r).error, None);
        assert_eq!(dst, src);
    }
    assert_eq!(w.rma_log.len(), 1, "no second try after a refusal");
}

#[test]
fn a_refused_read_makes_the_sender_write_the_rest() {
    let refused = RemoteModel {
        puts: RmaStatus::Done,
        gets: RmaStatus::Refused,
    };
    let len = 100_000u64;
    let at = split_point(len);
    let log = transfer(refused, SPLIT, len as usize, len as usize);
    assert_eq!(
        log.iter()
            .filter(|r| r.put)
            .map(|r| r.bytes as u64)
            .sum::<u64>(),
        len,
        "{log:?}"
    );
    assert!(log.contains(&op(1, false, len - at, RmaStatus::Refused)));
}

#[test]
fn keys_name_the_send_buffer_and_the_granted_part_of_the_receive() {
    let mut w = World::new(2);
    w.enable_remote_memory(SPLIT, ALL_DONE);
    let mut src = pattern(100_000, 1);
    let mut dst = vec![0u8; 50_000];
    let recv = w.engines[1].irecv(Some(0), 0, None, region(&mut dst));
    let send = w.engines[0].isend(1, 0, 0, region(&mut src));
    let rts = w.engines[0].poll_transmit().unwrap();
    assert_eq!(rts.header.flags, FLAG_REMOTE_KEY);
    let TransmitPayload::Owned(bytes) = &rts.payload else {
        panic!("a keyed Rts carries its key");
    };
    let offer = RemoteKey::decode(bytes).unwrap();
    assert_eq!(offer, RemoteKey::of(send.to_wire(), region(&mut src)));

    let mut header = rts.header;
    header.payload_len = bytes.len() as u64;
    let PayloadSink::Owned { mut buf, token } = w.engines[1].on_header(0, &header).unwrap() else {
        panic!("the key is read as an owned payload");
    };
    buf.copy_from_slice(bytes);
    w.engines[1].payload_done(token, Some(buf));
    let cts = w.engines[1].poll_transmit().unwrap();
    assert_eq!(cts.header.flags, FLAG_REMOTE_KEY | FLAG_SPLIT);
    let TransmitPayload::Owned(bytes) = &cts.payload else {
        panic!("a keyed Cts carries its key");
    };
    let grant = RemoteKey::decode(bytes).unwrap();
    assert_eq!(grant, RemoteKey::of(recv.to_wire(), region(&mut dst)));
    let read = w.engines[1]
        .poll_rma()
        .expect("the receiver reads its part");
    assert_eq!((read.key, read.offset), (offer, split_point(50_000)));
}

#[test]
fn without_remote_memory_nothing_carries_a_key() {
    let mut w = World::new(2);
    let mut src = pattern(100_000, 1);
    w.engines[0].isend(1, 0, 0, region(&mut src));
    let rts = w.engines[0].poll_transmit().unwrap();
    assert_eq!((rts.header.flags, rts.payload.len()), (0, 0));
}

/// A receive at rank 1 of 5000 bytes matched to an `Rts` that rank 0
/// never sent: (its buffer, the `Cts` it answered with).
fn granted(w: &mut World, dst: &mut [u8], remote: bool) -> Transmit {
    if remote {
        w.enable_remote_memory(0, ALL_DONE);
    }
    w.engines[1].irecv(Some(0), 0, Some(1), region(dst));
    let mut rts = FrameHeader::new(FrameKind::Rts);
    rts.tag = 1;
    rts.msg_size = dst.len() as u64;
    rts.sender_req = 99;
    w.engines[1].on_header(0, &rts).unwrap();
    w.engines[1].poll_transmit().expect("a Cts")
}

fn written(cts: &Transmit) -> FrameHeader {
    let mut data = FrameHeader::new(FrameKind::Data);
    data.flags = FLAG_WRITTEN;
    data.tag = 1;
    data.msg_size = cts.header.msg_size;
    data.sender_req = cts.header.sender_req;
    data.receiver_req = cts.header.receiver_req;
    data
}

#[test]
fn data_said_written_into_a_buffer_without_a_key_is_a_protocol_error() {
    let mut w = World::new(2);
    let mut dst = vec![0u8; 5000];
    let cts = granted(&mut w, &mut dst, false);
    assert_eq!(cts.header.flags, 0);
    assert!(matches!(
        w.engines[1].on_header(0, &written(&cts)),
        Err(WireError::UnexpectedFrame { .. })
    ));
    // With a key, the same frame completes the receive.
    let mut w = World::new(2);
    let mut dst = vec![0u8; 5000];
    let cts = granted(&mut w, &mut dst, true);
    assert_eq!(cts.header.flags, FLAG_REMOTE_KEY);
    assert!(w.engines[1].on_header(0, &written(&cts)).is_ok());
}

#[test]
fn a_read_done_nobody_waits_for_is_a_protocol_error() {
    let mut w = World::new(2);
    let mut src = pattern(5000, 1);
    let send = w.engines[0].isend(1, 0, 0, region(&mut src));
    let mut frame = FrameHeader::new(FrameKind::ReadDone);
    frame.sender_req = send.to_wire();
    assert!(matches!(
        w.engines[0].on_header(1, &frame),
        Err(WireError::UnknownHandle {
            kind: FrameKind::ReadDone,
            ..
        })
    ));
}

#[test]
fn a_split_asked_of_a_send_that_offered_nothing_is_a_protocol_error() {
    let mut w = World::new(2);
    let mut src = pattern(5000, 1);
    let send = w.engines[0].isend(1, 0, 0, region(&mut src));
    w.engines[0].poll_transmit();
    let mut cts = FrameHeader::new(FrameKind::Cts);
    cts.flags = FLAG_REMOTE_KEY | FLAG_SPLIT;
    cts.payload_len = RemoteKey::ENCODED_LEN as u64;
    cts.msg_size = 5000;
    cts.sender_req = send.to_wire();
    assert!(matches!(
        w.engines[0].on_header(1, &cts),
        Err(WireError::BadFlags { .. })
    ));
}

#[test]
fn a_key_too_short_for_its_grant_is_not_used() {
    let mut w = World::new(2);
    w.enable_remote_memory(0, ALL_DONE);
    let mut src = pattern(5000, 1);
    let send = w.engines[0].isend(1, 0, 0, region(&mut src));
    w.engines[0].poll_transmit();
    let mut cts = FrameHeader::new(FrameKind::Cts);
    cts.flags = FLAG_REMOTE_KEY;
    cts.payload_len = RemoteKey::ENCODED_LEN as u64;
    cts.msg_size = 5000;
    cts.sender_req = send.to_wire();
    cts.receiver_req = 7;
    let PayloadSink::Owned { buf, token } = w.engines[0].on_header(1, &cts).unwrap() else {
        panic!("the key is read");
    };
    let short = RemoteKey {
        id: 7,
        addr: 4096,
        len: 4999,
    };
    assert_eq!(buf.len(), RemoteKey::ENCODED_LEN);
    w.engines[0].payload_done(token, Some(short.encode().to_vec()));
    assert!(w.engines[0].poll_rma().is_none());
    let data = w.engines[0]
        .poll_transmit()
        .expect("the data goes by the link");
    assert_eq!(
        (data.header.kind, data.payload.len()),
        (FrameKind::Data, 5000)
    );
}

#[test]
fn a_lost_peer_drops_its_operations_and_fails_the_transfer() {
    let mut w = World::new(2);
    w.enable_remote_memory(SPLIT, ALL_DONE);
    let mut src = pattern(100_000, 1);
    let mut dst = vec![0u8; 100_000];
    let recv = w.engines[1].irecv(Some(0), 0, None, region(&mut dst));
    let send = w.engines[0].isend(1, 0, 0, region(&mut src));
    let rts = w.engines[0].poll_transmit().unwrap();
    hand_keyed(&mut w.engines[1], 0, rts);
    assert!(w.engines[1].has_rma());
    w.engines[1].peer_lost(0);
    assert!(!w.engines[1].has_rma());
    assert_eq!(
        done(&mut w.engines[1], recv).error,
        Some(CompletionError::PeerLost)
    );
    w.engines[0].peer_lost(1);
    assert_eq!(
        done(&mut w.engines[0], send).error,
        Some(CompletionError::PeerLost)
    );
}

#[test]
fn frames_that_waited_for_their_route_are_revisited() {
    let mut w = World::new(2);
    let mut src = pattern(100_000, 1);
    let mut dst = vec![0u8; 100_000];
    w.engines[1].irecv(Some(0), 0, None, region(&mut dst));
    w.engines[0].isend(1, 0, 0, region(&mut src));
    let mut rts = w.engines[0].poll_transmit().unwrap();
    assert_eq!(rts.header.flags, 0, "the route is not known yet");
    w.enable_remote_memory(SPLIT, ALL_DONE);
    w.engines[0].revisit(&mut rts);
    assert_eq!(rts.header.flags, FLAG_REMOTE_KEY);
    assert_eq!(rts.payload.len(), RemoteKey::ENCODED_LEN);
    w.engines[0].revisit(&mut rts);
    assert_eq!(rts.payload.len(), RemoteKey::ENCODED_LEN, "once");

    let mut w = World::new(2);
    let mut dst = vec![0u8; 5000];
    let mut cts = granted(&mut w, &mut dst, false);
    w.enable_remote_memory(0, ALL_DONE);
    w.engines[1].revisit(&mut cts);
    assert_eq!(cts.header.flags, FLAG_REMOTE_KEY);
    assert!(w.engines[1].on_header(0, &written(&cts)).is_ok());

    // A Cts that waited keeps the sender's offer: it splits once sent.
    let mut w = World::new(2);
    w.enable_remote_memory(SPLIT, ALL_DONE);
    w.engines[1].set_remote_memory(0, 0);
    let mut src = pattern(100_000, 1);
    let mut dst = vec![0u8; 100_000];
    let r = w.engines[1].irecv(Some(0), 0, None, region(&mut dst));
    let s = w.engines[0].isend(1, 0, 0, region(&mut src));
    let rts = w.engines[0].poll_transmit().unwrap();
    hand_keyed(&mut w.engines[1], 0, rts);
    let mut cts = w.engines[1].poll_transmit().unwrap();
    assert_eq!(cts.header.flags, 0);
    w.engines[1].set_remote_memory(0, u64::MAX);
    w.engines[1].revisit(&mut cts);
    assert_eq!(cts.header.flags, FLAG_REMOTE_KEY | FLAG_SPLIT);
    assert!(w.engines[1].has_rma(), "the receiver reads its part");
    hand_keyed(&mut w.engines[0], 1, cts);
    w.pump();
    assert_eq!(done(&mut w.engines[1], r).error, None);
    assert_eq!(done(&mut w.engines[0], s).error, None);
    assert_eq!(dst, src);
    assert_eq!(w.rma_log.len(), 2, "{:?}", w.rma_log);
}

/// Gathered rendezvous data goes by remote memory only when its runs are
/// long: short ones travel through the link, which the sender packs as it
/// writes (`SHORTEST_REMOTE_RUN`).
#[test]
fn gathered_data_of_short_runs_goes_through_the_link() {
    for (run, count) in [(512usize, 300usize), (SHORTEST_REMOTE_RUN, 40)] {
        let src = pattern(2 * run * count, 9);
        let gather = Gather::new(
            (0..count)
                .map(|i| Region::from_const(src[2 * run * i..].as_ptr(), run))
                .collect(),
        );
        let want: Vec<u8> = (0..count)
            .flat_map(|i| src[2 * run * i..2 * run * i + run].to_vec())
            .collect();
        let mut w = World::new(2);
        w.enable_remote_memory(0, ALL_DONE);
        let mut dst = vec![0u8; want.len()];
        let r = w.engines[1].irecv(Some(0), 0, Some(6), region(&mut dst));
        let s = w.engines[0].isend_gather(1, 0, 6, gather);
        w.pump();
        assert_eq!(done(&mut w.engines[1], r).error, None);
        assert_eq!(done(&mut w.engines[0], s).error, None);
        assert!(dst == want, "runs of {run} bytes arrived in order");
        let put: usize = w.rma_log.iter().filter(|r| r.put).map(|r| r.bytes).sum();
        let expected = if run < SHORTEST_REMOTE_RUN {
            0
        } else {
            want.len()
        };
        assert_eq!(put, expected, "bytes put by remote memory, runs of {run}");
    }
}

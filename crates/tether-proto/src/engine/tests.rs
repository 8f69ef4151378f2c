//! The engine's protocol, between engines wired together by the test
//! harness (`crate::harness::World`): real header codec, real links.

use super::*;
use crate::harness::{RemoteModel, World, EAGER};
use crate::rma::RmaStatus;

mod remote;
mod striped;

const ALL_DONE: RemoteModel = RemoteModel {
    puts: RmaStatus::Done,
    gets: RmaStatus::Done,
};

fn region(buf: &mut [u8]) -> Region {
    Region {
        ptr: buf.as_mut_ptr(),
        len: buf.len(),
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn done(engine: &mut Engine, req: ReqId) -> Completion {
    engine.take_completion(req).expect("request complete")
}

#[test]
fn eager_and_rendezvous_deliver_whether_posted_first_or_not() {
    for len in [0usize, 1, EAGER as usize, EAGER as usize + 1, 5000] {
        for post_first in [true, false] {
            let mut w = World::new(2);
            let mut src = pattern(len, 3);
            let mut dst = vec![0u8; len];
            let mut r = None;
            if post_first {
                r = Some(w.engines[1].irecv(Some(0), 0, Some(9), region(&mut dst)));
                w.pump();
            }
            let s = w.engines[0].isend(1, 0, 9, region(&mut src));
            w.pump();
            let r = r.unwrap_or_else(|| w.engines[1].irecv(Some(0), 0, Some(9), region(&mut dst)));
            w.pump();
            let got = done(&mut w.engines[1], r);
            assert_eq!(
                got,
                Completion {
                    source: 0,
                    tag: 9,
                    bytes: len as u64,
                    error: None
                },
                "len {len} post_first {post_first}"
            );
            assert_eq!(done(&mut w.engines[0], s).error, None);
            assert_eq!(dst, src);
            assert_eq!(
                w.engines[0].live_requests() + w.engines[1].live_requests(),
                0
            );
        }
    }
}

#[test]
fn messages_do_not_overtake_within_source_tag_and_context() {
    let mut w = World::new(2);
    let sizes = [10usize, 500, 3, 200, 0, 64, 65];
    let mut sends: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| pattern(n, i as u8))
        .collect();
    for buf in sends.iter_mut() {
        w.engines[0].isend(1, 0, 1, region(buf));
    }
    w.pump();
    let mut recvs: Vec<Vec<u8>> = sizes.iter().map(|_| vec![0u8; 600]).collect();
    let reqs: Vec<ReqId> = recvs
        .iter_mut()
        .map(|b| w.engines[1].irecv(Some(0), 0, Some(1), region(b)))
        .collect();
    w.pump();
    for (i, req) in reqs.into_iter().enumerate() {
        let c = done(&mut w.engines[1], req);
        assert_eq!(c.bytes as usize, sizes[i]);
        assert_eq!(&recvs[i][..sizes[i]], &sends[i][..]);
    }
}

#[test]
fn wildcards_take_the_oldest_match() {
    let mut w = World::new(3);
    let mut a = pattern(8, 1);
    let mut b = pattern(100, 2);
    w.engines[0].isend(2, 0, 5, region(&mut a));
    w.pump();
    w.engines[1].isend(2, 0, 6, region(&mut b));
    w.pump();
    let mut buf = vec![0u8; 200];
    let any = w.engines[2].irecv(None, 0, None, region(&mut buf));
    w.pump();
    let c = done(&mut w.engines[2], any);
    assert_eq!((c.source, c.tag, c.bytes), (0, 5, 8));
    let tag6 = w.engines[2].irecv(None, 0, Some(6), region(&mut buf));
    w.pump();
    let c = done(&mut w.engines[2], tag6);
    assert_eq!((c.source, c.tag, c.bytes), (1, 6, 100));
    assert_eq!(&buf[..100], &b[..]);
}

#[test]
fn contexts_keep_traffic_apart() {
    let mut w = World::new(2);
    let mut x = pattern(4, 1);
    let mut y = pattern(4, 2);
    w.engines[0].isend(1, 7, 0, region(&mut x));
    w.engines[0].isend(1, 0, 0, region(&mut y));
    w.pump();
    let mut buf = vec![0u8; 4];
    let r = w.engines[1].irecv(Some(0), 0, None, region(&mut buf));
    w.pump();
    done(&mut w.engines[1], r);
    assert_eq!(buf, y);
}

#[test]
fn truncation_reports_true_size_and_keeps_the_link_in_step() {
    for len in [40usize, 4000] {
        let mut w = World::new(2);
        let mut big = pattern(len, 9);
        let mut next = pattern(30, 4);
        let mut small = vec![0u8; 16];
        let r = w.engines[1].irecv(Some(0), 0, None, region(&mut small));
        w.pump();
        let s = w.engines[0].isend(1, 0, 1, region(&mut big));
        w.engines[0].isend(1, 0, 2, region(&mut next));
        w.pump();
        let c = done(&mut w.engines[1], r);
        assert_eq!(c.error, Some(CompletionError::Truncated));
        assert_eq!(c.bytes, len as u64);
        assert_eq!(&small[..], &big[..16]);
        assert_eq!(done(&mut w.engines[0], s).error, None);
        let mut after = vec![0u8; 30];
        let r2 = w.engines[1].irecv(Some(0), 0, Some(2), region(&mut after));
        w.pump();
        assert_eq!(done(&mut w.engines[1], r2).error, None);
        assert_eq!(after, next);
    }
}

#[test]
fn probe_sees_envelope_and_size_without_receiving() {
    let mut w = World::new(2);
    let mut msg = pattern(1000, 5);
    w.engines[0].isend(1, 0, 42, region(&mut msg));
    w.pump();
    let (env, size) = w.engines[1]
        .iprobe(None, 0, None)
        .expect("message announced");
    assert_eq!((env.source, env.tag, size), (0, 42, 1000));
    assert!(w.engines[1].iprobe(None, 0, Some(41)).is_none());
    let mut buf = vec![0u8; 1000];
    let r = w.engines[1].irecv(Some(0), 0, Some(42), region(&mut buf));
    w.pump();
    done(&mut w.engines[1], r);
    assert_eq!(buf, msg);
    assert!(w.engines[1].iprobe(None, 0, None).is_none());
}

#[test]
fn cancel_removes_a_posted_receive_only() {
    let mut w = World::new(2);
    let mut buf = vec![0u8; 8];
    let r = w.engines[1].irecv(Some(0), 0, Some(1), region(&mut buf));
    assert!(w.engines[1].cancel(r));
    assert_eq!(
        done(&mut w.engines[1], r).error,
        Some(CompletionError::Cancelled)
    );
    let mut msg = pattern(8, 1);
    w.engines[0].isend(1, 0, 1, region(&mut msg));
    w.pump();
    assert!(
        w.engines[1].iprobe(Some(0), 0, Some(1)).is_some(),
        "the message was not taken by the cancelled receive"
    );
    let mut big = pattern(500, 1);
    let mut dst = vec![0u8; 500];
    let r = w.engines[1].irecv(Some(0), 0, Some(2), region(&mut dst));
    w.engines[0].isend(1, 0, 2, region(&mut big));
    w.pump();
    assert!(
        !w.engines[1].cancel(r),
        "a completed receive cannot be cancelled"
    );
}

#[test]
fn lost_peer_fails_pending_and_new_requests() {
    let mut w = World::new(3);
    let mut big = pattern(500, 1);
    let send = w.engines[0].isend(1, 0, 0, region(&mut big));
    let mut buf = vec![0u8; 8];
    let recv = w.engines[0].irecv(Some(1), 0, None, region(&mut buf));
    let mut buf2 = vec![0u8; 8];
    let any = w.engines[0].irecv(None, 0, None, region(&mut buf2));
    w.engines[0].poll_transmit();
    w.engines[0].peer_lost(1);
    assert_eq!(
        done(&mut w.engines[0], send).error,
        Some(CompletionError::PeerLost)
    );
    assert_eq!(
        done(&mut w.engines[0], recv).error,
        Some(CompletionError::PeerLost)
    );
    assert!(
        w.engines[0].completion(any).is_none(),
        "a wildcard receive may still match another peer"
    );
    let again = w.engines[0].isend(1, 0, 0, region(&mut big));
    assert_eq!(
        done(&mut w.engines[0], again).error,
        Some(CompletionError::PeerLost)
    );
    let mut msg = pattern(8, 3);
    w.engines[2].isend(0, 0, 0, region(&mut msg));
    w.pump();
    assert_eq!(done(&mut w.engines[0], any).source, 2);
}

#[test]
fn self_sends_small_and_large_in_either_order() {
    for len in [0usize, 10, 1000] {
        let mut w = World::new(1);
        let mut msg = pattern(len, 6);
        let mut dst = vec![0u8; len];
        let s = w.engines[0].isend(0, 0, 3, region(&mut msg));
        let r = w.engines[0].irecv(Some(0), 0, Some(3), region(&mut dst));
        assert_eq!(done(&mut w.engines[0], s).error, None);
        assert_eq!(done(&mut w.engines[0], r).bytes, len as u64);
        assert_eq!(dst, msg);
        let r = w.engines[0].irecv(None, 0, None, region(&mut dst));
        let s = w.engines[0].isend(0, 0, 3, region(&mut msg));
        assert!(w.engines[0].completion(r).is_some() && w.engines[0].completion(s).is_some());
        assert!(!w.engines[0].has_transmit());
    }
}

#[test]
fn frames_for_unknown_handles_or_wrong_sizes_are_protocol_errors() {
    let mut e = Engine::new(EngineConfig {
        me: 0,
        eager_limit: EAGER,
    });
    let mut cts = FrameHeader::new(FrameKind::Cts);
    cts.sender_req = 12345;
    assert!(matches!(
        e.on_header(1, &cts),
        Err(WireError::UnknownHandle { .. })
    ));
    let mut data = FrameHeader::new(FrameKind::Data);
    data.receiver_req = 7;
    data.payload_len = 10;
    assert!(matches!(
        e.on_header(1, &data),
        Err(WireError::UnknownHandle { .. })
    ));
    assert!(matches!(
        e.on_header(1, &FrameHeader::new(FrameKind::Hello)),
        Err(WireError::UnexpectedFrame { .. })
    ));

    let mut w = World::new(2);
    let mut dst = vec![0u8; 1000];
    w.engines[1].irecv(Some(0), 0, None, region(&mut dst));
    let mut src = pattern(1000, 0);
    w.engines[0].isend(1, 0, 0, region(&mut src));
    let rts = w.engines[0].poll_transmit().unwrap();
    w.engines[1].on_header(0, &rts.header).unwrap();
    let grant = w.engines[1].poll_transmit().unwrap();
    assert_eq!(grant.header.kind, FrameKind::Cts);
    let mut bad = FrameHeader::new(FrameKind::Data);
    bad.receiver_req = grant.header.receiver_req;
    bad.payload_len = 999;
    assert_eq!(
        w.engines[1].on_header(0, &bad).unwrap_err(),
        WireError::DataLength {
            expected: 1000,
            got: 999
        }
    );
    assert!(
        w.engines[1].on_header(1, &bad).is_err(),
        "data from another peer than the one granted"
    );
}

#[test]
fn generalized_requests_complete_only_by_their_owner() {
    let mut w = World::new(2);
    let g = w.engines[0].start_generalized();
    w.pump();
    assert!(w.engines[0].completion(g).is_none());
    assert!(!w.engines[0].cancel(g), "not cancellable");
    w.engines[0].peer_lost(1);
    assert!(w.engines[0].completion(g).is_none(), "needs no peer");
    let done = Completion {
        source: u32::MAX,
        tag: 7,
        bytes: 3,
        error: None,
    };
    w.engines[0].complete_generalized(g, done);
    let cancelled = Completion {
        error: Some(CompletionError::Cancelled),
        ..done
    };
    w.engines[0].complete_generalized(g, cancelled);
    assert_eq!(w.engines[0].take_completion(g), Some(done));
    assert!(!w.engines[0].is_live(g));
}

#[test]
fn a_request_carries_its_owners_word_until_it_is_freed_and_no_further() {
    let mut w = World::new(2);
    let mut buf = [0u8; 4];
    let r = w.engines[1].irecv(Some(0), 0, Some(1), region(&mut buf));
    assert_eq!(w.engines[1].user(r), Some(0), "zero until set");
    w.engines[1].set_user(r, 42);
    assert_eq!(w.engines[1].user(r), Some(42));
    assert_eq!(
        w.engines[1].take_completion_with_user(r),
        None,
        "pending: left alone"
    );
    let mut src = [7u8; 4];
    let s = w.engines[0].isend(1, 0, 1, region(&mut src));
    w.pump();
    let (completion, user) = w.engines[1]
        .take_completion_with_user(r)
        .expect("delivered");
    assert_eq!((completion.bytes, user), (4, 42));
    assert_eq!(w.engines[1].user(r), None, "freed");
    // The slot is reused by the next request, which starts at zero again:
    // a word never outlives its request.
    let next = w.engines[1].irecv(Some(0), 0, Some(1), region(&mut buf));
    assert_eq!(next.slot, r.slot);
    assert_eq!(w.engines[1].user(next), Some(0));
    w.engines[1].set_user(r, 9);
    assert_eq!(w.engines[1].user(next), Some(0), "a stale id sets nothing");
    assert_eq!(done(&mut w.engines[0], s).error, None);
}

#[test]
fn granted_region_names_the_part_of_the_buffer_a_cts_grants() {
    let mut w = World::new(2);
    let mut dst = vec![0u8; 500];
    let recv = w.engines[1].irecv(Some(0), 0, None, region(&mut dst));
    assert_eq!(w.engines[1].granted_region(recv), None, "not matched yet");
    let mut src = pattern(1000, 0);
    w.engines[0].isend(1, 0, 0, region(&mut src));
    let rts = w.engines[0].poll_transmit().unwrap();
    w.engines[1].on_header(0, &rts.header).unwrap();
    let granted = w.engines[1].granted_region(recv).expect("matched");
    assert_eq!((granted.ptr, granted.len), (dst.as_mut_ptr(), 500));
}

#[test]
fn a_peer_eager_limit_overrides_the_general_one_for_that_peer_only() {
    let mut e = Engine::new(EngineConfig {
        me: 0,
        eager_limit: EAGER,
    });
    let data = vec![7u8; 1000];
    let region = Region::from_const(data.as_ptr(), data.len());
    e.set_peer_eager_limit(2, 4096);
    e.isend(1, 0, 0, region);
    e.isend(2, 0, 0, region);
    e.set_eager_limit(2000);
    e.isend(3, 0, 0, region);
    let kinds: Vec<(u32, FrameKind)> = std::iter::from_fn(|| e.poll_transmit())
        .map(|t| (t.peer, t.header.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            (1, FrameKind::Rts),
            (2, FrameKind::Eager),
            (3, FrameKind::Eager)
        ]
    );
}

#[test]
fn eager_destination_names_the_receive_on_header_then_matches() {
    let mut e = Engine::new(EngineConfig {
        me: 1,
        eager_limit: EAGER,
    });
    let mut early = [0u8; 16];
    let mut later = [0u8; 16];
    let mut header = FrameHeader::new(FrameKind::Eager);
    header.tag = 5;
    header.payload_len = 10;
    assert_eq!(e.eager_destination(0, &header), None, "nothing posted");
    let first = e.irecv(
        Some(0),
        0,
        Some(5),
        Region {
            ptr: early.as_mut_ptr(),
            len: 16,
        },
    );
    e.irecv(
        Some(0),
        0,
        Some(5),
        Region {
            ptr: later.as_mut_ptr(),
            len: 16,
        },
    );
    let peeked = e.eager_destination(0, &header).unwrap();
    assert_eq!((peeked.ptr, peeked.len), (early.as_mut_ptr(), 10));
    assert_eq!(
        e.eager_destination(0, &header).unwrap(),
        peeked,
        "peeking changes nothing"
    );
    match e.on_header(0, &header).unwrap() {
        PayloadSink::Region { region, token, .. } => {
            assert_eq!(region, peeked);
            e.payload_done(token, None);
        }
        other => panic!("expected the peeked receive, got {other:?}"),
    }
    assert!(e.completion(first).is_some());
    header.kind = FrameKind::Rts;
    assert_eq!(e.eager_destination(0, &header), None, "only eager frames");
}

#[test]
fn gathered_sends_deliver_their_runs_in_order_eager_rendezvous_truncated_and_to_self() {
    // Runs of one buffer, out of address order, some empty.
    let src = pattern(6000, 5);
    let runs = |cuts: &[(usize, usize)]| {
        Gather::new(
            cuts.iter()
                .map(|&(a, b)| Region::from_const(src[a..b].as_ptr(), b - a))
                .collect(),
        )
    };
    let cuts = [(4000, 5500), (10, 10), (0, 700), (2000, 3000)];
    let want: Vec<u8> = cuts.iter().flat_map(|&(a, b)| src[a..b].to_vec()).collect();
    for (take, receive) in [(1, 700), (4, want.len()), (4, 1000)] {
        let mut w = World::new(2);
        let gather = runs(&cuts[..take]);
        let len = gather.len();
        let mut dst = vec![0u8; receive];
        let r = w.engines[1].irecv(Some(0), 0, Some(4), region(&mut dst));
        let s = w.engines[0].isend_gather(1, 0, 4, gather);
        w.pump();
        let got = done(&mut w.engines[1], r);
        assert_eq!(
            got.bytes, len as u64,
            "the true size, {take} runs into {receive}"
        );
        let n = len.min(receive);
        assert_eq!(dst[..n], want[..n]);
        if receive < len {
            assert_eq!(got.error, Some(CompletionError::Truncated));
        } else {
            assert_eq!(got.error, None);
        }
        assert_eq!(done(&mut w.engines[0], s).error, None);
    }
    // A rendezvous gather offers no key in its Rts, even where remote
    // memory reaches the peer: the receiver grants, the sender writes.
    let mut w = World::new(2);
    w.enable_remote_memory(1, ALL_DONE);
    w.engines[0].isend_gather(1, 0, 0, runs(&cuts));
    let rts = w.engines[0].poll_transmit().unwrap();
    assert_eq!(rts.header.kind, FrameKind::Rts);
    assert_eq!(rts.header.flags, 0);
    assert!(rts.payload.is_empty());
    // To itself, the runs are packed and matched like any send.
    let mut w = World::new(1);
    let mut dst = vec![0u8; want.len()];
    let s = w.engines[0].isend_gather(0, 0, 2, runs(&cuts));
    let r = w.engines[0].irecv(Some(0), 0, Some(2), region(&mut dst));
    w.pump();
    assert_eq!(done(&mut w.engines[0], r).error, None);
    assert_eq!(done(&mut w.engines[0], s).error, None);
    assert_eq!(dst, want);
}

#[test]
fn ordinals_pair_each_send_with_the_receive_that_matched_it() {
    // Three messages with tag 4 and one with tag 5, eager and rendezvous
    // mixed; the receiver posts tag 5 first and takes the tag-4 messages
    // partly from the unexpected queue, partly posted before they came.
    let mut w = World::new(2);
    for e in &mut w.engines {
        e.enable_ordinals();
    }
    let lens = [8usize, EAGER as usize + 100, 16, 3];
    let tags = [4, 4, 5, 4];
    let mut srcs: Vec<Vec<u8>> = lens.iter().map(|&n| pattern(n, 1)).collect();
    let mut dsts: Vec<Vec<u8>> = lens.iter().map(|&n| vec![0u8; n]).collect();
    let early = w.engines[1].irecv(Some(0), 0, Some(5), region(&mut dsts[2]));
    let sends: Vec<ReqId> = (0..4)
        .map(|i| w.engines[0].isend(1, 0, tags[i], region(&mut srcs[i])))
        .collect();
    w.pump();
    let late: Vec<ReqId> = [0usize, 1, 3]
        .iter()
        .map(|&i| w.engines[1].irecv(Some(0), 0, Some(4), region(&mut dsts[i])))
        .collect();
    w.pump();
    let sent: Vec<Option<u64>> = sends.iter().map(|&r| w.engines[0].ordinal(r)).collect();
    assert_eq!(sent, vec![Some(0), Some(1), Some(0), Some(2)]);
    assert_eq!(w.engines[1].ordinal(early), Some(0));
    let got: Vec<Option<u64>> = late.iter().map(|&r| w.engines[1].ordinal(r)).collect();
    assert_eq!(got, vec![Some(0), Some(1), Some(2)]);
    for r in late.into_iter().chain([early]) {
        assert_eq!(done(&mut w.engines[1], r).error, None);
    }
    assert_eq!(dsts, srcs);
    assert_eq!(w.engines[1].ordinal_outside(0, 0, 4, false), Some(3));
    let mut quiet = World::new(1);
    assert_eq!(quiet.engines[0].ordinal_outside(0, 0, 4, true), None);
}

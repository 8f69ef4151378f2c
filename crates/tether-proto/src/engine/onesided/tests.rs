//! One-sided operations between engines of the test world (real codec,
//! links and resequencing; loss and reorder where a test asks), and a few
//! checks of one engine alone where the exact frames matter.

use std::time::Duration;

use crate::dispatch::{deliver, Delivery};
use crate::engine::{
    ApplyStatus, Engine, EngineConfig, PayloadSink, Reduction, RmaError, RmaTarget, Transmit,
    TransmitPayload,
};
use crate::harness::onesided::{compute, INT64, SHIFT, SUM};
use crate::harness::{RailChoice, RemoteModel, WireModel, World, WorldConfig};
use crate::request::{CompletionError, Region};
use crate::rma::{Atomic, AtomicCode, RmaStatus};
use crate::wire::onesided::{ReplyStatus, RmaCode, RmaReply};
use crate::wire::{FrameKind, WireError};

const WIN: u32 = 7;

fn region(buf: &mut [u8]) -> Region {
    Region {
        ptr: buf.as_mut_ptr(),
        len: buf.len(),
    }
}

fn at(rank: u32, offset: u64) -> RmaTarget {
    RmaTarget {
        win: WIN,
        rank,
        offset,
    }
}

fn int64(reduction_op: u8) -> Reduction {
    Reduction {
        datatype: INT64,
        op: reduction_op,
    }
}

/// Each rank's window memory, of the sizes given, filled with a pattern
/// of its own; every engine registers window [`WIN`] with every size.
fn windows(engines: &mut [Engine], sizes: &[usize]) -> Vec<Vec<u8>> {
    let mut memory: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(rank, &n)| (0..n).map(|i| (i * 7 + rank * 31) as u8).collect())
        .collect();
    let all: Vec<(u32, u64)> = (0..sizes.len() as u32)
        .zip(sizes.iter().map(|&n| n as u64))
        .collect();
    for (rank, engine) in engines.iter_mut().enumerate() {
        engine
            .win_create(WIN, region(&mut memory[rank]), &all)
            .expect("a new window id");
    }
    memory
}

/// A flush by `rank` of what it issued to `target` (`None`: to all),
/// driven to completion.
fn flush(world: &mut World, rank: u32, target: Option<u32>) -> Result<(), RmaError> {
    let mark = world.engines[rank as usize]
        .win_flush_mark(WIN, target)
        .expect("a member's window");
    world.pump();
    world.engines[rank as usize]
        .win_flush_poll(&mark)
        .expect("every operation answered once the world is idle")
}

fn i64_at(bytes: &[u8], element: usize) -> i64 {
    i64::from_le_bytes(
        bytes[element * 8..element * 8 + 8]
            .try_into()
            .expect("8 bytes"),
    )
}

#[test]
fn puts_and_gets_of_0_bytes_to_megabytes_arrive_byte_exact() {
    let mut world = World::new(2);
    let size = 3 << 20;
    let mut memory = windows(&mut world.engines, &[0, size]);
    let mut data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    // A zero-length access at offset == size is legal, even into a
    // window of 0 bytes.
    world.engines[1]
        .win_put(at(0, 0), region(&mut data[..0]))
        .unwrap();
    world.engines[0]
        .win_put(at(1, size as u64), region(&mut data[..0]))
        .unwrap();
    world.engines[0]
        .win_put(at(1, 0), region(&mut data))
        .unwrap();
    assert_eq!(world.engines[0].win_outstanding(WIN, 1), 2);
    assert_eq!(flush(&mut world, 0, Some(1)), Ok(()));
    assert_eq!(flush(&mut world, 1, None), Ok(()));
    assert_eq!(world.engines[0].win_outstanding(WIN, 1), 0);
    assert!(memory[1] == data, "the window holds the put's bytes");

    memory[1][12345] = 0xAB;
    let mut back = vec![0u8; size - 100];
    let req = world.engines[0]
        .win_rget(at(1, 100), region(&mut back))
        .unwrap();
    let mut nothing = [0u8; 0];
    world.engines[0]
        .win_get(at(1, size as u64), region(&mut nothing))
        .unwrap();
    assert_eq!(flush(&mut world, 0, Some(1)), Ok(()));
    let done = world.engines[0]
        .take_completion(req)
        .expect("the rget completed");
    assert_eq!(
        (done.source, done.bytes, done.error),
        (1, (size - 100) as u64, None)
    );
    assert!(back == memory[1][100..], "the get read the window");
    assert_eq!(back[12345 - 100], 0xAB);
}

#[test]
fn a_put_lands_in_the_window_and_a_get_is_answered_from_it_in_place() {
    let mut e = Engine::new(EngineConfig {
        me: 1,
        eager_limit: 64,
    });
    let mut window = vec![0u8; 4096];
    e.win_create(WIN, region(&mut window), &[(0, 0)]).unwrap();
    let base = window.as_ptr() as usize;
    let mut put = crate::wire::onesided::RmaRequest {
        window: WIN,
        code: RmaCode::Put,
        datatype: 0,
        op: 0,
        offset: 1000,
        len: 2000,
        origin_op: 5,
    };
    let Ok(Delivery::Payload(PayloadSink::Region {
        region: into,
        discard: 0,
        token,
    })) = deliver(&mut e, 0, &put.to_header())
    else {
        panic!("a put's payload goes into the window");
    };
    assert_eq!((into.ptr as usize - base, into.len), (1000, 2000));
    assert!(!e.has_transmit(), "acknowledged only once the data is in");
    e.payload_done(token, None);
    let ack = e.poll_transmit().expect("the acknowledgement");
    assert_eq!(
        RmaReply::from_header(&ack.header).unwrap(),
        RmaReply {
            window: WIN,
            status: ReplyStatus::Done,
            origin_op: 5,
            len: 0
        }
    );

    put.code = RmaCode::Get;
    put.origin_op = 6;
    assert!(matches!(
        deliver(&mut e, 0, &put.to_header()),
        Ok(Delivery::Payload(PayloadSink::None))
    ));
    let Transmit {
        header,
        payload: TransmitPayload::Borrowed(from),
        copy_if_blocked: false,
        ..
    } = e.poll_transmit().expect("the get's reply")
    else {
        panic!("a get's reply borrows the window");
    };
    assert_eq!(header.kind, FrameKind::RmaReply);
    assert_eq!((from.ptr as usize - base, from.len), (1000, 2000));
}

#[test]
fn a_window_is_not_freed_under_a_get_reply_that_borrows_it() {
    let mut e = Engine::new(EngineConfig {
        me: 1,
        eager_limit: 64,
    });
    let mut window = vec![0u8; 64];
    e.win_create(WIN, region(&mut window), &[(0, 0)]).unwrap();
    let get = crate::wire::onesided::RmaRequest {
        window: WIN,
        code: RmaCode::Get,
        datatype: 0,
        op: 0,
        offset: 0,
        len: 64,
        origin_op: 1,
    };
    deliver(&mut e, 0, &get.to_header()).unwrap();
    assert_eq!(e.win_free(WIN), Err(RmaError::Busy));
    assert!(e.poll_transmit().is_some());
    assert_eq!(e.win_free(WIN), Ok(()));
}

#[test]
fn an_accumulate_keeps_its_place_while_its_payload_is_read_on_another_link() {
    let mut e = Engine::new(EngineConfig {
        me: 1,
        eager_limit: 64,
    });
    let mut window = vec![0u8; 8];
    e.win_create(WIN, region(&mut window), &[(0, 0)]).unwrap();
    let request = |digit: u64| crate::wire::onesided::RmaRequest {
        window: WIN,
        code: RmaCode::Accumulate,
        datatype: INT64,
        op: SHIFT,
        offset: 0,
        len: 8,
        origin_op: digit,
    };
    let mut payload_of = |digit: u64| {
        let Ok(Delivery::Payload(PayloadSink::Owned { mut buf, token })) =
            deliver(&mut e, 0, &request(digit).to_header())
        else {
            panic!("an accumulate's operand goes to a buffer for the runtime");
        };
        buf.copy_from_slice(&(digit as i64).to_le_bytes());
        (buf, token)
    };
    // Issued 1 then 2; 2's payload is read first.
    let (one, first) = payload_of(1);
    let (two, second) = payload_of(2);
    e.payload_done(second, Some(two));
    assert!(e.poll_apply().is_none(), "2 waits for 1");
    e.payload_done(first, Some(one));
    for digit in [1, 2] {
        let mut apply = e.poll_apply().expect("the next apply");
        assert_eq!(apply.operand(), (digit as i64).to_le_bytes());
        assert_eq!(compute(&mut apply), ApplyStatus::Done);
        e.apply_done(apply, ApplyStatus::Done);
    }
    assert_eq!(i64_at(&window, 0), 12);
}

#[test]
fn a_get_reply_lands_in_the_origin_buffer_and_wrong_replies_break_the_protocol() {
    let mut e = Engine::new(EngineConfig {
        me: 0,
        eager_limit: 64,
    });
    let mut none = [0u8; 0];
    e.win_create(WIN, region(&mut none), &[(1, 1 << 20), (2, 64)])
        .unwrap();
    let mut dest = vec![0u8; 5000];
    e.win_get(at(1, 64), region(&mut dest)).unwrap();
    let request = e.poll_transmit().expect("the request");
    let op = request.header.sender_req;
    let reply = |len, origin_op| {
        RmaReply {
            window: WIN,
            status: ReplyStatus::Done,
            origin_op,
            len,
        }
        .to_header()
    };
    assert!(matches!(
        deliver(&mut e, 2, &reply(5000, op)),
        Err(WireError::UnknownHandle { .. })
    ));
    assert!(matches!(
        deliver(&mut e, 1, &reply(5000, op + 1)),
        Err(WireError::UnknownHandle { .. })
    ));
    assert!(matches!(
        deliver(&mut e, 1, &reply(4999, op)),
        Err(WireError::DataLength {
            expected: 5000,
            got: 4999
        })
    ));
    let Ok(Delivery::Payload(PayloadSink::Region {
        region: into,
        token,
        ..
    })) = deliver(&mut e, 1, &reply(5000, op))
    else {
        panic!("the reply's data goes into the get's buffer");
    };
    assert_eq!((into.ptr, into.len), (dest.as_mut_ptr(), 5000));
    assert_eq!(e.win_outstanding(WIN, 1), 1, "answered once the data is in");
    e.payload_done(token, None);
    assert_eq!(e.win_outstanding(WIN, 1), 0);
}

#[test]
fn accesses_outside_the_window_are_refused_at_the_origin_and_nothing_is_sent() {
    let mut e = Engine::new(EngineConfig {
        me: 0,
        eager_limit: 64,
    });
    let mut mine = [0u8; 16];
    e.win_create(WIN, region(&mut mine), &[(1, 100)]).unwrap();
    let mut buf = [0u8; 16];
    let mut eight = [0u8; 8];
    let mut result = [0u8; 8];
    let refused = [
        e.win_put(at(1, 101), region(&mut buf[..0])),
        e.win_put(at(1, 90), region(&mut buf)),
        e.win_get(at(1, u64::MAX), region(&mut buf[..1])),
        e.win_accumulate(at(1, 85), region(&mut buf), int64(SUM)),
        // Misaligned; a result of another length than the operand.
        e.win_fetch_and_op(
            at(1, 4),
            region(&mut eight),
            region(&mut result),
            int64(SUM),
        ),
        e.win_fetch_and_op(at(1, 0), region(&mut eight), region(&mut buf), int64(SUM)),
    ];
    for result in refused {
        assert_eq!(result, Err(RmaError::OutOfRange));
    }
    assert_eq!(
        e.win_put(at(2, 0), region(&mut buf)),
        Err(RmaError::NotMember)
    );
    let elsewhere = RmaTarget {
        win: WIN + 1,
        ..at(1, 0)
    };
    assert_eq!(
        e.win_put(elsewhere, region(&mut buf)),
        Err(RmaError::NoWindow)
    );
    assert!(!e.has_transmit());
    assert_eq!(e.win_outstanding(WIN, 1), 0);
    assert_eq!(e.win_put(at(1, 84), region(&mut buf)), Ok(()));
    assert!(e.has_transmit());
}

#[test]
fn accesses_the_target_refuses_leave_its_memory_byte_identical() {
    let mut world = World::new(2);
    let mut real = vec![0x5Au8; 100];
    let before = real.clone();
    let mut origin_memory = [0u8; 0];
    // The origin believes the target's window is larger than it is: the
    // target's own check is the one that must hold.
    world.engines[0]
        .win_create(WIN, region(&mut origin_memory), &[(1, 4096)])
        .unwrap();
    world.engines[1]
        .win_create(WIN, region(&mut real), &[(0, 0)])
        .unwrap();
    let mut data = vec![1u8; 200];
    world.engines[0]
        .win_put(at(1, 0), region(&mut data))
        .unwrap();
    world.engines[0]
        .win_accumulate(at(1, 96), region(&mut data[..8]), int64(SUM))
        .unwrap();
    let mut back = vec![0u8; 300];
    let rget = world.engines[0]
        .win_rget(at(1, 0), region(&mut back))
        .unwrap();
    let rput = world.engines[0]
        .win_rput(at(1, 100), region(&mut data[..1]))
        .unwrap();
    assert_eq!(flush(&mut world, 0, Some(1)), Err(RmaError::OutOfRange));
    assert_eq!(real, before);
    assert!(back.iter().all(|&b| b == 0), "nothing was read");
    let failed = world.engines[0].take_completion(rget).unwrap();
    assert_eq!(failed.error, Some(CompletionError::RmaRange));
    // The rput completed locally before the target refused it: the flush
    // above reported it.
    assert_eq!(world.engines[0].take_completion(rput).unwrap().error, None);
    assert_eq!(
        flush(&mut world, 0, Some(1)),
        Ok(()),
        "a flush reports a failure once"
    );
}

#[test]
fn accumulates_from_one_origin_apply_in_issue_order_across_reordering_rails() {
    let mut config = WorldConfig::new(3);
    config.rails = 3;
    config.model = WireModel {
        latency: Duration::from_micros(10),
        jitter: Duration::from_micros(50),
        loss: 0.0,
    };
    config.seed = 23;
    let mut world = World::start(config);
    world.pump();
    world.rail_choice = RailChoice::Random;
    let mut memory = windows(&mut world.engines, &[16, 0, 0]);
    memory[0].fill(0);
    let mut digits: Vec<[u8; 8]> = (1..=9i64).map(i64::to_le_bytes).collect();
    for (i, digit) in digits.iter_mut().enumerate() {
        // Origin 1 spells 123456789 into element 0; origin 2 spells it
        // into element 1, both interleaved with puts it need not wait for.
        for origin in [1usize, 2] {
            let element = (origin - 1) as u64 * 8;
            world.engines[origin]
                .win_accumulate(at(0, element), region(digit), int64(SHIFT))
                .unwrap();
            if i % 3 == 0 {
                let mut nothing = [0u8; 0];
                world.engines[origin]
                    .win_put(at(0, 16), region(&mut nothing))
                    .unwrap();
            }
        }
    }
    assert_eq!(flush(&mut world, 1, None), Ok(()));
    assert_eq!(flush(&mut world, 2, None), Ok(()));
    assert!(world.overtaken > 0, "the rails reordered frames");
    assert_eq!(i64_at(&memory[0], 0), 123_456_789);
    assert_eq!(i64_at(&memory[0], 1), 123_456_789);
}

#[test]
fn accumulates_from_every_origin_sum_exactly() {
    let mut world = World::new(4);
    let mut memory = windows(&mut world.engines, &[64, 8, 8, 8]);
    memory[0].fill(0);
    let mut values: Vec<[u8; 64]> = (0..4).map(|_| [0u8; 64]).collect();
    for (origin, v) in values.iter_mut().enumerate() {
        for e in 0..8 {
            v[e * 8..e * 8 + 8].copy_from_slice(&((origin * 100 + e) as i64).to_le_bytes());
        }
    }
    for round in 0..5 {
        for (origin, v) in values.iter_mut().enumerate() {
            world.engines[origin]
                .win_accumulate(at(0, 0), region(v), int64(SUM))
                .unwrap();
        }
        if round == 2 {
            world.pump();
        }
    }
    for origin in 0..4 {
        assert_eq!(flush(&mut world, origin, Some(0)), Ok(()));
    }
    for e in 0..8 {
        let expected: i64 = (0..4).map(|o| 5 * (o * 100 + e) as i64).sum();
        assert_eq!(i64_at(&memory[0], e), expected, "element {e}");
    }
}

#[test]
fn fetch_and_op_from_several_origins_fetches_every_value_once() {
    let mut world = World::new(3);
    let mut memory = windows(&mut world.engines, &[8, 0, 0]);
    memory[0].fill(0);
    const EACH: usize = 25;
    let mut one = 1i64.to_le_bytes();
    let mut fetched = vec![[[0u8; 8]; EACH]; 3];
    for i in 0..EACH {
        for (rank, results) in fetched.iter_mut().enumerate() {
            world.engines[rank]
                .win_fetch_and_op(
                    at(0, 0),
                    region(&mut one),
                    region(&mut results[i]),
                    int64(SUM),
                )
                .unwrap();
        }
        if i % 7 == 0 {
            world.pump();
        }
    }
    for rank in 0..3 {
        assert_eq!(flush(&mut world, rank, None), Ok(()));
    }
    let mut seen: Vec<i64> = fetched
        .iter()
        .flatten()
        .map(|b| i64::from_le_bytes(*b))
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..(3 * EACH) as i64).collect::<Vec<_>>());
    assert_eq!(i64_at(&memory[0], 0), (3 * EACH) as i64);
}

#[test]
fn compare_and_swap_swaps_only_on_a_match_and_returns_the_old_value() {
    let mut world = World::new(2);
    let mut memory = windows(&mut world.engines, &[0, 32]);
    memory[1].fill(0);
    let (mut five, mut seven, mut zero) = (5i64.to_le_bytes(), 7i64.to_le_bytes(), [0u8; 8]);
    let (mut first, mut second) = ([0xFFu8; 8], [0xFFu8; 8]);
    let e = &mut world.engines[0];
    e.win_compare_and_swap(
        at(1, 8),
        region(&mut five),
        region(&mut zero),
        region(&mut first),
        INT64,
    )
    .unwrap();
    e.win_compare_and_swap(
        at(1, 8),
        region(&mut seven),
        region(&mut zero),
        region(&mut second),
        INT64,
    )
    .unwrap();
    assert_eq!(flush(&mut world, 0, Some(1)), Ok(()));
    assert_eq!(i64::from_le_bytes(first), 0, "the first swap saw 0");
    assert_eq!(
        i64::from_le_bytes(second),
        5,
        "the second saw the first's value"
    );
    assert_eq!(i64_at(&memory[1], 1), 5, "and did not swap");
    assert_eq!(i64_at(&memory[1], 0), 0);
}

#[test]
fn a_refused_datatype_or_op_leaves_the_target_untouched_and_fails_the_flush() {
    let mut world = World::new(2);
    let memory = windows(&mut world.engines, &[0, 24]);
    let before = memory[1].clone();
    let mut v = [1u8; 8];
    let mut odd = [1u8; 12];
    let unknown_type = Reduction {
        datatype: 5,
        op: SUM,
    };
    world.engines[0]
        .win_accumulate(at(1, 0), region(&mut v), unknown_type)
        .unwrap();
    world.engines[0]
        .win_accumulate(at(1, 8), region(&mut v), int64(42))
        .unwrap();
    world.engines[0]
        .win_accumulate(at(1, 0), region(&mut odd), int64(SUM))
        .unwrap();
    assert_eq!(flush(&mut world, 0, Some(1)), Err(RmaError::Refused));
    assert_eq!(memory[1], before);
}

#[test]
fn a_flush_waits_for_its_target_only_and_for_what_was_issued_before_it() {
    let mut world = World::new(3);
    let latency = Duration::from_millis(10);
    world.wire_model(0, 2, 0).latency = latency;
    let memory = windows(&mut world.engines, &[0, 64, 64]);
    let mut data = [9u8; 8];
    world.engines[0]
        .win_put(at(1, 0), region(&mut data))
        .unwrap();
    world.engines[0]
        .win_put(at(2, 0), region(&mut data))
        .unwrap();
    let to_1 = world.engines[0].win_flush_mark(WIN, Some(1)).unwrap();
    let to_all = world.engines[0].win_flush_mark(WIN, None).unwrap();
    let start = world.now();
    world.advance_to(start + latency / 2);
    assert_eq!(world.engines[0].win_flush_poll(&to_1), Some(Ok(())));
    assert_eq!(world.engines[0].win_flush_poll(&to_all), None);
    assert_eq!(world.engines[0].win_outstanding(WIN, 2), 1);
    // Issued after the marks: the flushes do not wait for it.
    world.engines[0]
        .win_put(at(2, 8), region(&mut data))
        .unwrap();
    world.advance_to(start + latency + latency / 4);
    assert_eq!(world.engines[0].win_outstanding(WIN, 2), 1);
    assert_eq!(world.engines[0].win_flush_poll(&to_all), Some(Ok(())));
    assert_eq!(memory[2][..8], data);
    assert_eq!(flush(&mut world, 0, Some(2)), Ok(()));
    assert_eq!(memory[2][8..16], data);
}

#[test]
fn a_lost_target_fails_what_is_outstanding_and_what_comes_after() {
    let mut world = World::new(2);
    let _memory = windows(&mut world.engines, &[0, 64]);
    // Nothing reaches the target any more, and nobody has noticed yet.
    world.wire_model(0, 1, 0).loss = 1.0;
    let mut data = [3u8; 8];
    let mut back = [0u8; 8];
    let mut result = [0u8; 8];
    let e = &mut world.engines[0];
    e.win_put(at(1, 0), region(&mut data)).unwrap();
    e.win_fetch_and_op(at(1, 8), region(&mut data), region(&mut result), int64(SUM))
        .unwrap();
    let rget = e.win_rget(at(1, 0), region(&mut back)).unwrap();
    let rput = e.win_rput(at(1, 0), region(&mut data)).unwrap();
    let mark = e.win_flush_mark(WIN, Some(1)).unwrap();
    world.pump();
    assert_eq!(world.engines[0].win_outstanding(WIN, 1), 4);
    assert_eq!(
        world.engines[0].win_flush_poll(&mark),
        None,
        "still waiting"
    );
    world.engines[0].peer_lost(1);
    let e = &mut world.engines[0];
    assert_eq!(e.win_outstanding(WIN, 1), 0);
    assert_eq!(e.win_flush_poll(&mark), Some(Err(RmaError::PeerLost)));
    let lost = e.take_completion(rget).unwrap();
    assert_eq!(
        (lost.source, lost.error),
        (1, Some(CompletionError::PeerLost))
    );
    assert_eq!(
        e.take_completion(rput).unwrap().error,
        None,
        "handed over before"
    );
    // Operations issued after the loss: at the next flush, or at once
    // for a request.
    e.win_put(at(1, 0), region(&mut data)).unwrap();
    let late = e.win_rget(at(1, 0), region(&mut back)).unwrap();
    assert_eq!(
        e.take_completion(late).unwrap().error,
        Some(CompletionError::PeerLost)
    );
    assert!(!e.has_transmit());
    assert_eq!(flush(&mut world, 0, Some(1)), Err(RmaError::PeerLost));
    assert_eq!(world.engines[0].win_free(WIN), Ok(()));
}

#[test]
fn applies_go_out_one_at_a_time_and_those_of_a_lost_origin_are_dropped() {
    let mut world = World::new(3);
    world.hold_applies = true;
    let mut memory = windows(&mut world.engines, &[8, 0, 0]);
    memory[0].fill(0);
    let mut one = 1i64.to_le_bytes();
    for origin in [1, 2, 1] {
        world.engines[origin]
            .win_accumulate(at(0, 0), region(&mut one), int64(SUM))
            .unwrap();
    }
    world.pump();
    let target = &mut world.engines[0];
    let mut first = target.poll_apply().expect("the first apply");
    assert!(target.poll_apply().is_none(), "one apply out at a time");
    assert!(!target.has_apply());
    assert_eq!(target.win_free(WIN), Err(RmaError::Busy));
    target.peer_lost(1);
    assert_eq!(compute(&mut first), ApplyStatus::Done);
    target.apply_done(first, ApplyStatus::Done);
    let second = target.poll_apply().expect("origin 2's apply is kept");
    assert_eq!(second.origin, 2);
    target.apply_done(second, ApplyStatus::Refused);
    assert!(
        target.poll_apply().is_none(),
        "origin 1's second apply is dropped"
    );
    assert_eq!(target.win_free(WIN), Ok(()));
    assert_eq!(i64_at(&memory[0], 0), 1);
}

#[test]
fn operations_on_oneself_take_the_same_paths_without_frames() {
    let mut world = World::new(1);
    let mut memory = windows(&mut world.engines, &[64]);
    memory[0].fill(0);
    let e = &mut world.engines[0];
    let mut data: Vec<u8> = (1..=16).collect();
    let rput = e.win_rput(at(0, 16), region(&mut data)).unwrap();
    assert_eq!(e.take_completion(rput).unwrap().bytes, 16);
    let mut back = [0u8; 16];
    e.win_get(at(0, 16), region(&mut back)).unwrap();
    let mut two = 2i64.to_le_bytes();
    let mut old = [0u8; 8];
    e.win_fetch_and_op(at(0, 0), region(&mut two), region(&mut old), int64(SUM))
        .unwrap();
    e.win_fetch_and_op(at(0, 0), region(&mut two), region(&mut old), int64(SUM))
        .unwrap();
    assert!(!e.has_transmit());
    assert_eq!(
        e.win_outstanding(WIN, 0),
        2,
        "the applies wait for the runtime"
    );
    assert_eq!(flush(&mut world, 0, Some(0)), Ok(()));
    assert_eq!(back[..], data[..]);
    assert_eq!(i64::from_le_bytes(old), 2);
    assert_eq!(i64_at(&memory[0], 0), 4);
}

#[test]
fn windows_are_created_once_and_freed_only_when_quiet() {
    let mut world = World::new(2);
    let memory = windows(&mut world.engines, &[0, 8]);
    let mut other = [0u8; 4];
    assert_eq!(
        world.engines[0].win_create(WIN, region(&mut other), &[]),
        Err(RmaError::Busy)
    );
    let mut data = [1u8; 8];
    world.engines[0]
        .win_put(at(1, 0), region(&mut data))
        .unwrap();
    assert_eq!(world.engines[0].win_free(WIN), Err(RmaError::Busy));
    assert_eq!(flush(&mut world, 0, None), Ok(()));
    assert_eq!(memory[1], data);
    assert_eq!(world.engines[0].win_free(WIN), Ok(()));
    assert_eq!(world.engines[0].win_free(WIN), Err(RmaError::NoWindow));
    assert_eq!(
        world.engines[0].win_put(at(1, 0), region(&mut data)),
        Err(RmaError::NoWindow)
    );
    // A target without the window answers so: nothing hangs.
    assert_eq!(world.engines[1].win_free(WIN), Ok(()));
    world.engines[0]
        .win_create(WIN, region(&mut other), &[(1, 8)])
        .unwrap();
    world.engines[0]
        .win_put(at(1, 0), region(&mut data))
        .unwrap();
    assert_eq!(flush(&mut world, 0, Some(1)), Err(RmaError::TargetNoWindow));
}

/// Window `WIN` over `memory`, with every member's address passed on, so
/// that puts and gets from `direct_bytes` on go by remote memory.
fn direct_world(sizes: &[usize], direct_bytes: u64, model: RemoteModel) -> (World, Vec<Vec<u8>>) {
    let mut world = World::new(sizes.len() as u32);
    world.enable_remote_memory(0, model);
    let memory = windows(&mut world.engines, sizes);
    for engine in world.engines.iter_mut() {
        engine.set_window_direct_bytes(direct_bytes);
        for (rank, m) in memory.iter().enumerate() {
            engine.win_set_address(WIN, rank as u32, m.as_ptr() as u64);
        }
    }
    (world, memory)
}

const DONE: RemoteModel = RemoteModel {
    puts: RmaStatus::Done,
    gets: RmaStatus::Done,
};

#[test]
fn large_puts_and_gets_go_straight_into_the_window_without_frames() {
    let size = 1 << 20;
    let (mut world, memory) = direct_world(&[16, size], 4096, DONE);
    let mut data: Vec<u8> = (0..size).map(|i| (i % 253) as u8).collect();
    world.engines[0]
        .win_put(at(1, 0), region(&mut data))
        .unwrap();
    let mut small = [9u8; 8];
    world.engines[0]
        .win_put(at(1, 64), region(&mut small))
        .unwrap();
    assert_eq!(flush(&mut world, 0, Some(1)), Ok(()));
    let mut expected = data.clone();
    expected[64..72].copy_from_slice(&small);
    assert!(memory[1] == expected, "both puts landed");
    let mut back = vec![0u8; size / 2];
    let req = world.engines[0]
        .win_rget(at(1, 1000), region(&mut back))
        .unwrap();
    assert_eq!(flush(&mut world, 0, Some(1)), Ok(()));
    assert!(world.engines[0]
        .take_completion(req)
        .unwrap()
        .error
        .is_none());
    assert!(back == expected[1000..1000 + size / 2]);
    let direct: Vec<(bool, usize)> = world.rma_log.iter().map(|r| (r.put, r.bytes)).collect();
    assert_eq!(
        direct,
        vec![(true, size), (false, size / 2)],
        "the 8-byte put went as a frame, the large ones by remote memory"
    );
}

#[test]
fn a_refused_direct_put_goes_as_a_frame_and_lands_all_the_same() {
    let refused = RemoteModel {
        puts: RmaStatus::Refused,
        gets: RmaStatus::Done,
    };
    let size = 64 << 10;
    let (mut world, memory) = direct_world(&[16, size], 4096, refused);
    let mut data: Vec<u8> = (0..size).map(|i| (i % 241) as u8).collect();
    let req = world.engines[0]
        .win_rput(at(1, 0), region(&mut data))
        .unwrap();
    assert_eq!(flush(&mut world, 0, Some(1)), Ok(()));
    assert!(world.engines[0]
        .take_completion(req)
        .unwrap()
        .error
        .is_none());
    assert!(memory[1] == data);
    let again = data.clone();
    world.engines[0]
        .win_put(at(1, 0), region(&mut data))
        .unwrap();
    assert_eq!(flush(&mut world, 0, Some(1)), Ok(()));
    assert!(memory[1] == again);
    assert_eq!(
        world.rma_log.len(),
        1,
        "after a refusal the peer's memory is not asked for again"
    );
}

#[test]
fn a_direct_get_to_a_lost_target_fails_at_the_flush() {
    let (mut world, _memory) = direct_world(&[16, 1 << 16], 4096, DONE);
    let mut back = vec![0u8; 1 << 16];
    world.engines[0]
        .win_get(at(1, 0), region(&mut back))
        .unwrap();
    world.engines[0].peer_lost(1);
    let mark = world.engines[0].win_flush_mark(WIN, Some(1)).unwrap();
    assert_eq!(
        world.engines[0].win_flush_poll(&mark),
        Some(Err(RmaError::PeerLost))
    );
    assert!(
        world.engines[0].poll_rma().is_none(),
        "the lost peer's operation is dropped"
    );
}

/// A reply may answer only a request that left: one to a request still
/// queued, or to a get that goes by remote memory, would end the
/// operation (and its flush) while its memory is still borrowed. Found by
/// the `onesided` fuzz target (fuzz/regressions/onesided/).
#[test]
fn a_reply_to_a_request_not_sent_is_refused() {
    let mut e = Engine::new(EngineConfig {
        me: 0,
        eager_limit: 64,
    });
    let mut window = vec![0u8; 64];
    e.win_create(WIN, region(&mut window), &[(1, 64)]).unwrap();
    let mut data = vec![7u8; 8];
    e.win_put(at(1, 0), region(&mut data)).unwrap();
    let mark = e.win_flush_mark(WIN, Some(1)).unwrap();
    let reply = |origin_op, len| {
        RmaReply {
            window: WIN,
            status: ReplyStatus::Done,
            origin_op,
            len,
        }
        .to_header()
    };
    // The put's frame, which borrows `data`, still waits to be sent.
    assert!(matches!(
        e.on_header(1, &reply(1, 0)),
        Err(WireError::UnknownHandle { .. })
    ));
    assert_eq!(e.win_flush_poll(&mark), None);
    let t = e.poll_transmit().expect("the put's frame");
    assert_eq!(
        (t.header.kind, t.header.sender_req),
        (FrameKind::RmaRequest, 1)
    );
    assert!(matches!(
        e.on_header(1, &reply(1, 0)),
        Ok(PayloadSink::None)
    ));
    assert_eq!(e.win_flush_poll(&mark), Some(Ok(())));

    // A get by remote memory has no frame to answer.
    e.set_remote_memory(1, u64::MAX);
    e.set_window_direct_bytes(1);
    e.win_set_address(WIN, 1, 0x10_0000);
    let mut dest = vec![0u8; 8];
    e.win_get(at(1, 8), region(&mut dest)).unwrap();
    let mark = e.win_flush_mark(WIN, Some(1)).unwrap();
    let op = e.poll_rma().expect("the get goes by remote memory");
    assert!(matches!(
        e.on_header(1, &reply(2, 8)),
        Err(WireError::UnknownHandle { .. })
    ));
    assert_eq!(e.win_flush_poll(&mark), None);
    e.rma_done(op, RmaStatus::Done);
    assert_eq!(e.win_flush_poll(&mark), Some(Ok(())));
}

/// A window stays while a put's payload is read into it: a hostile origin
/// may join the collective free with its payload still on the way. Found
/// by the `onesided` fuzz target (fuzz/regressions/onesided/).
#[test]
fn a_window_stays_while_a_put_is_read_into_it() {
    let mut e = Engine::new(EngineConfig {
        me: 1,
        eager_limit: 64,
    });
    let mut window = vec![0u8; 64];
    e.win_create(WIN, region(&mut window), &[(0, 64), (2, 64)])
        .unwrap();
    let put = crate::wire::onesided::RmaRequest {
        window: WIN,
        code: RmaCode::Put,
        datatype: 0,
        op: 0,
        offset: 8,
        len: 8,
        origin_op: 5,
    };
    let sink = |e: &mut Engine, origin| match e.on_header(origin, &put.to_header()) {
        Ok(PayloadSink::Region { token, .. }) => token,
        other => panic!("a put's payload goes into the window: {other:?}"),
    };
    let token = sink(&mut e, 0);
    // Rank 2's payload is never read.
    let _never = sink(&mut e, 2);
    assert_eq!(e.win_free(WIN), Err(RmaError::Busy));
    e.payload_done(token, None);
    assert_eq!(e.win_free(WIN), Err(RmaError::Busy));
    // The link of rank 2 died mid-payload: nothing more is read.
    e.peer_lost(2);
    assert_eq!(e.win_free(WIN), Ok(()));
}

/// One reply a request: a second reply to a get whose data is being read
/// (on another link of the same peer) is refused, or it would end the
/// operation while the first still writes its result. Found by the
/// `onesided` fuzz target (fuzz/regressions/onesided/).
#[test]
fn a_second_reply_while_the_first_is_read_is_refused() {
    let mut e = Engine::new(EngineConfig {
        me: 0,
        eager_limit: 64,
    });
    let mut window = vec![0u8; 64];
    e.win_create(WIN, region(&mut window), &[(1, 64)]).unwrap();
    let mut dest = vec![0u8; 8];
    e.win_get(at(1, 0), region(&mut dest)).unwrap();
    let mark = e.win_flush_mark(WIN, Some(1)).unwrap();
    let t = e.poll_transmit().expect("the get's frame");
    let reply = RmaReply {
        window: WIN,
        status: ReplyStatus::Done,
        origin_op: t.header.sender_req,
        len: 8,
    }
    .to_header();
    let Ok(PayloadSink::Region { token, .. }) = e.on_header(1, &reply) else {
        panic!("the reply's data goes into the get's buffer");
    };
    assert!(matches!(
        e.on_header(1, &reply),
        Err(WireError::UnknownHandle { .. })
    ));
    assert_eq!(e.win_flush_poll(&mark), None);
    e.payload_done(token, None);
    assert_eq!(e.win_flush_poll(&mark), Some(Ok(())));
}

/// A window address whose extent wraps around the address space (a
/// hostile member's, from the gather at creation) is never used for
/// remote memory: its operations go as frames, as a key that wraps is
/// refused by `RemoteKey::decode`. Found by the `onesided` fuzz target.
#[test]
fn a_window_address_that_wraps_is_not_used() {
    let mut e = Engine::new(EngineConfig {
        me: 0,
        eager_limit: 64,
    });
    let mut window = vec![0u8; 64];
    e.win_create(WIN, region(&mut window), &[(1, 64)]).unwrap();
    e.set_remote_memory(1, u64::MAX);
    e.set_window_direct_bytes(1);
    e.win_set_address(WIN, 1, u64::MAX - 10);
    let mut dest = vec![0u8; 8];
    e.win_get(at(1, 16), region(&mut dest)).unwrap();
    assert!(e.poll_rma().is_none(), "no remote memory past the end");
    let t = e.poll_transmit().expect("the get goes as a frame");
    assert_eq!(t.header.kind, FrameKind::RmaRequest);
    // A window that fits goes by remote memory.
    e.win_set_address(WIN, 1, u64::MAX - 64);
    e.win_get(at(1, 56), region(&mut dest)).unwrap();
    let op = e.poll_rma().expect("by remote memory");
    assert_eq!(op.remote_address(), Some(u64::MAX - 8));
}

/// A world whose window [`WIN`] takes native atomics on every member
/// (its members agreed), this process's own window included.
fn native_world(sizes: &[usize], model: RemoteModel) -> (World, Vec<Vec<u8>>) {
    let (mut world, memory) = direct_world(sizes, 0, model);
    for engine in world.engines.iter_mut() {
        engine.win_set_native_atomics(WIN);
    }
    (world, memory)
}

fn fetch_add(operand: &[u8; 8], result: &mut [u8; 8]) -> Atomic {
    Atomic {
        code: AtomicCode::Add,
        size: 8,
        operand: *operand,
        swap: [0; 8],
        result: Some(region(result)),
    }
}

#[test]
fn native_atomics_go_to_the_transport_on_an_agreed_window_own_included() {
    const EACH: usize = 10;
    let (mut world, mut memory) = native_world(&[8, 0, 0], DONE);
    memory[0].fill(0);
    let one = 1i64.to_le_bytes();
    let mut fetched = vec![[[0u8; 8]; EACH]; 3];
    for i in 0..EACH {
        for (rank, results) in fetched.iter_mut().enumerate() {
            world.engines[rank]
                .win_native_atomic(at(0, 0), fetch_add(&one, &mut results[i]), int64(SUM))
                .unwrap();
        }
    }
    for rank in 0..3 {
        assert_eq!(flush(&mut world, rank, None), Ok(()));
    }
    let mut seen: Vec<i64> = fetched
        .iter()
        .flatten()
        .map(|b| i64::from_le_bytes(*b))
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..(3 * EACH) as i64).collect::<Vec<_>>());
    assert_eq!(i64_at(&memory[0], 0), (3 * EACH) as i64);
    assert_eq!(world.rma_log.len(), 3 * EACH, "every one by the transport");
    assert!(
        world.rma_log.iter().any(|r| r.rank == 0),
        "rank 0's own atomics too"
    );
}

#[test]
fn native_atomics_on_a_window_without_agreement_go_as_frames() {
    let (mut world, mut memory) = direct_world(&[8, 0], 0, DONE);
    memory[0].fill(0);
    let one = 1i64.to_le_bytes();
    let mut result = [0u8; 8];
    world.engines[1]
        .win_native_atomic(at(0, 0), fetch_add(&one, &mut result), int64(SUM))
        .unwrap();
    assert_eq!(flush(&mut world, 1, Some(0)), Ok(()));
    assert_eq!(i64_at(&memory[0], 0), 1);
    assert!(world.rma_log.is_empty(), "a frame the target applied");
}

#[test]
fn a_refused_native_atomic_goes_as_its_frame_and_applies_once() {
    let refused = RemoteModel {
        puts: RmaStatus::Refused,
        gets: RmaStatus::Done,
    };
    let (mut world, mut memory) = native_world(&[8, 0], refused);
    memory[0].fill(0);
    let (mut own, mut theirs) = ([0xFFu8; 8], [0xFFu8; 8]);
    let seven = 7i64.to_le_bytes();
    world.engines[0]
        .win_native_atomic(at(0, 0), fetch_add(&seven, &mut own), int64(SUM))
        .unwrap();
    world.engines[1]
        .win_native_atomic(at(0, 0), fetch_add(&seven, &mut theirs), int64(SUM))
        .unwrap();
    assert_eq!(flush(&mut world, 0, None), Ok(()));
    assert_eq!(flush(&mut world, 1, None), Ok(()));
    assert_eq!(
        i64_at(&memory[0], 0),
        14,
        "each applied once, by the target"
    );
    let mut fetched = [i64::from_le_bytes(own), i64::from_le_bytes(theirs)];
    fetched.sort_unstable();
    assert_eq!(fetched, [0, 7]);
    assert_eq!(world.rma_log.len(), 2, "both refused, then frames");
}

#[test]
fn a_native_compare_and_swap_returns_the_old_value() {
    let (mut world, mut memory) = native_world(&[0, 16], DONE);
    memory[1].fill(0);
    let mut old = [0xFFu8; 8];
    let cas = Atomic {
        code: AtomicCode::CompareSwap,
        size: 8,
        operand: 0i64.to_le_bytes(),
        swap: 5i64.to_le_bytes(),
        result: Some(region(&mut old)),
    };
    world.engines[0]
        .win_native_atomic(
            at(1, 8),
            cas,
            Reduction {
                datatype: INT64,
                op: 0,
            },
        )
        .unwrap();
    assert_eq!(flush(&mut world, 0, Some(1)), Ok(()));
    assert_eq!(i64::from_le_bytes(old), 0);
    assert_eq!(i64_at(&memory[1], 1), 5);
    assert_eq!(
        world.engines[0].win_native_atomic(
            at(1, 4),
            cas,
            Reduction {
                datatype: INT64,
                op: 0
            }
        ),
        Err(RmaError::OutOfRange),
        "misaligned"
    );
}

#[test]
fn a_native_atomic_on_the_own_window_that_fails_fails_its_flush_instead_of_waiting() {
    let failed = RemoteModel {
        puts: RmaStatus::Failed,
        gets: RmaStatus::Done,
    };
    let (mut world, _memory) = native_world(&[8, 0], failed);
    let one = 1i64.to_le_bytes();
    let mut result = [0u8; 8];
    world.engines[0]
        .win_native_atomic(at(0, 0), fetch_add(&one, &mut result), int64(SUM))
        .unwrap();
    assert_eq!(flush(&mut world, 0, Some(0)), Err(RmaError::Transport));
}

//! The worker's event fd in a mio `Poll` (edge-triggered): sleep while
//! idle, wake when an active message arrives.
#![cfg(feature = "mio")]

mod common;

use std::time::{Duration, Instant};

use common::*;
use mio::{Events, Interest, Poll, Token};
use tether_ucx::{Arm, ErrorMode, Event, SendMode};

#[test]
fn mio_poll_sleeps_and_wakes() {
    let _g = serial();
    let Some(ucp) = ucp() else { return };
    let mut p = pair(ucp, "tcp", ErrorMode::None);
    p.a_to_b
        .am_send(AM_ID, b"wire-up".to_vec(), Vec::new(), SendMode::Auto)
        .unwrap();
    pump(&p, 1, |ev| matches!(ev, Event::Am(_)).then_some(()));

    let mut poll = Poll::new().unwrap();
    poll.registry()
        .register(&mut p.b, Token(1), Interest::READABLE)
        .unwrap();
    let mut events = Events::with_capacity(8);
    // Idle: drain, arm (Busy means progress again), sleep; nothing wakes us.
    let mut armed = false;
    for _ in 0..1000 {
        while p.b.progress() > 0 {}
        while p.b.next_event().is_some() {}
        if p.b.arm().unwrap() == Arm::Armed {
            armed = true;
            break;
        }
    }
    assert!(armed, "arm stayed busy on an idle worker");
    let t = Instant::now();
    poll.poll(&mut events, Some(Duration::from_millis(100)))
        .unwrap();
    assert!(events.is_empty(), "woke while idle");
    assert!(t.elapsed() >= Duration::from_millis(90));

    // A message wakes the sleeper.
    p.a_to_b
        .am_send(AM_ID, b"wake".to_vec(), Vec::new(), SendMode::Auto)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut woke = false;
    while !woke && Instant::now() < deadline {
        p.a.progress();
        poll.poll(&mut events, Some(Duration::from_millis(10)))
            .unwrap();
        woke = events.iter().any(|e| e.token() == Token(1));
    }
    assert!(woke, "event fd never became readable");
    let msg = pump(&p, 1, |ev| match ev {
        Event::Am(m) => Some(m),
        _ => None,
    });
    assert_eq!(msg.header, b"wake");
    poll.registry().deregister(&mut p.b).unwrap();
}

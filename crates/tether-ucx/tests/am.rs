//! Active messages between two workers in one thread, progressed
//! alternately, over UCX_TLS=tcp (loopback) and UCX_TLS=sm.

mod common;

use common::*;
use tether_ucx::{AmData, Completion, ErrorMode, Event, SendMode};

fn eager_round_trip(tls: &str) {
    let _g = serial();
    let Some(ucp) = ucp() else { return };
    let p = pair(ucp, tls, ErrorMode::None);
    let header = b"tether-frame-header".to_vec();
    let data = 0x1122_3344_5566_7788u64.to_le_bytes().to_vec();
    let sent = p
        .a_to_b
        .am_send(AM_ID, header.clone(), data.clone(), SendMode::Auto)
        .expect("send");
    let msg = pump(&p, 1, |ev| match ev {
        Event::Am(m) => Some(m),
        other => panic!("unexpected {other:?}"),
    });
    assert_eq!(msg.id, AM_ID);
    assert_eq!(msg.header, header);
    let got = match msg.data {
        AmData::Bytes(b) => b,
        AmData::Held(d) => {
            assert!(!d.is_rendezvous(), "8 bytes came as rendezvous");
            let got = d.bytes().expect("eager bytes").to_vec();
            match p.b.recv_data(d, vec![0; 8]).expect("recv held") {
                Completion::Done((buf, n)) => assert_eq!((&buf[..], n), (&got[..], 8)),
                Completion::Pending(_) => panic!("held eager data did not complete at once"),
            }
            got
        }
        AmData::Empty => panic!("payload lost"),
    };
    assert_eq!(got, data);
    if let Completion::Pending(t) = sent {
        pump(&p, 0, |ev| match ev {
            Event::SendDone {
                token,
                result,
                buffers,
            } if token == t => {
                result.expect("send result");
                assert_eq!(buffers.expect("buffers back").0, header);
                Some(())
            }
            _ => None,
        });
    }
    // And back, header only.
    p.b_to_a
        .am_send(AM_ID, b"pong".to_vec(), Vec::new(), SendMode::Eager)
        .expect("reply");
    let msg = pump(&p, 0, |ev| match ev {
        Event::Am(m) => Some(m),
        _ => None,
    });
    assert_eq!(msg.header, b"pong");
    assert!(matches!(msg.data, AmData::Empty));
}

fn rendezvous_into_caller_buffer(tls: &str, mode: SendMode) {
    let _g = serial();
    let Some(ucp) = ucp() else { return };
    let p = pair(ucp, tls, ErrorMode::None);
    const LEN: usize = 4 << 20;
    let data: Vec<u8> = (0..LEN).map(|i| (i * 7 + i / 4096) as u8).collect();
    let expect = data.clone();
    let sent = p
        .a_to_b
        .am_send(AM_ID, b"rndv".to_vec(), data, mode)
        .expect("send");
    let msg = pump(&p, 1, |ev| match ev {
        Event::Am(m) => Some(m),
        other => panic!("unexpected {other:?}"),
    });
    assert_eq!(msg.header, b"rndv");
    let AmData::Held(desc) = msg.data else {
        panic!("4 MiB did not arrive as held data: {:?}", msg.data.len())
    };
    assert_eq!(desc.len(), LEN);
    assert!(desc.is_rendezvous(), "4 MiB came eagerly");
    let buf = vec![0u8; LEN];
    let where_ = buf.as_ptr();
    let (buf, n) = match p.b.recv_data(desc, buf).expect("recv_data") {
        Completion::Done(r) => r,
        Completion::Pending(t) => pump(&p, 1, |ev| match ev {
            Event::RecvDone {
                token,
                result,
                buffer,
            } if token == t => Some((buffer.expect("buffer back"), result.expect("recv"))),
            _ => None,
        }),
    };
    assert_eq!(n, LEN);
    assert_eq!(
        buf.as_ptr(),
        where_,
        "data must land in the caller's buffer"
    );
    assert!(buf == expect, "rendezvous data differs");
    if let Completion::Pending(t) = sent {
        pump(&p, 0, |ev| match ev {
            Event::SendDone { token, result, .. } if token == t => {
                result.expect("send result");
                Some(())
            }
            _ => None,
        });
    }
}

#[test]
fn eager_tcp() {
    eager_round_trip("tcp");
}

#[test]
fn eager_sm() {
    eager_round_trip("sm");
}

#[test]
fn rendezvous_4mib_tcp() {
    rendezvous_into_caller_buffer("tcp", SendMode::Rendezvous);
}

#[test]
fn rendezvous_4mib_sm() {
    rendezvous_into_caller_buffer("sm", SendMode::Rendezvous);
}

#[test]
fn auto_4mib_goes_rendezvous_sm() {
    rendezvous_into_caller_buffer("sm", SendMode::Auto);
}

#[test]
fn declined_rendezvous_completes_sender() {
    let _g = serial();
    let Some(ucp) = ucp() else { return };
    let p = pair(ucp, "tcp", ErrorMode::None);
    let sent = p
        .a_to_b
        .am_send(AM_ID, Vec::new(), vec![1; 1 << 20], SendMode::Rendezvous)
        .expect("send");
    let msg = pump(&p, 1, |ev| match ev {
        Event::Am(m) => Some(m),
        _ => None,
    });
    drop(msg); // releases the descriptor: UCX completes the sender
    if let Completion::Pending(t) = sent {
        pump(&p, 0, |ev| match ev {
            Event::SendDone { token, .. } if token == t => Some(()),
            _ => None,
        });
    }
}

#[test]
fn many_messages_all_arrive_tcp() {
    let _g = serial();
    let Some(ucp) = ucp() else { return };
    let p = pair(ucp, "tcp", ErrorMode::Peer);
    for i in 0..1000u32 {
        p.a_to_b
            .am_send(
                AM_ID,
                i.to_le_bytes().to_vec(),
                vec![0; 100],
                SendMode::Auto,
            )
            .expect("send");
    }
    let mut seen = vec![false; 1000];
    let mut n = 0;
    while n < 1000 {
        let m = pump(&p, 1, |ev| match ev {
            Event::Am(m) => Some(m),
            _ => None,
        });
        let i = u32::from_le_bytes(m.header[..4].try_into().unwrap()) as usize;
        assert!(!seen[i], "message {i} twice");
        seen[i] = true;
        n += 1;
    }
}

#[test]
fn worker_sleeps_and_wakes_on_event_fd() {
    let _g = serial();
    let Some(ucp) = ucp() else { return };
    let p = pair(ucp, "tcp", ErrorMode::None);
    assert!(p.a.event_fd().expect("efd") >= 0);
    // Wire up both directions first.
    p.a_to_b
        .am_send(AM_ID, b"hi".to_vec(), Vec::new(), SendMode::Auto)
        .unwrap();
    pump(&p, 1, |ev| matches!(ev, Event::Am(_)).then_some(()));
    // Idle: waiting times out without an event.
    let t = std::time::Instant::now();
    assert!(!p.b.wait(std::time::Duration::from_millis(100)).unwrap());
    assert!(t.elapsed() >= std::time::Duration::from_millis(90));
    // A message makes the sleeping worker's fd readable.
    p.a_to_b
        .am_send(AM_ID, b"wake".to_vec(), Vec::new(), SendMode::Auto)
        .unwrap();
    for _ in 0..10 {
        p.a.progress();
    }
    assert!(p.b.wait(std::time::Duration::from_secs(10)).unwrap());
    assert!(matches!(p.b.next_event(), Some(Event::Am(m)) if m.header == b"wake"));
}

#[test]
fn address_and_limits() {
    let _g = serial();
    let Some(ucp) = ucp() else { return };
    let p = pair(ucp, "tcp", ErrorMode::None);
    let addr = p.a.address().unwrap();
    assert!(
        (16..4096).contains(&addr.len()),
        "address of {} bytes",
        addr.len()
    );
    assert!(
        p.a.max_am_header().unwrap() >= 64,
        "Tether needs 64-byte AM headers"
    );
    assert!(p.a.connect(&[], ErrorMode::None).is_err());
    eprintln!(
        "UCX {} ({:?}), tcp/lo address {} bytes",
        ucp.version_string(),
        ucp.version,
        addr.len()
    );
}

#[test]
fn drop_with_operations_in_flight_is_bounded() {
    let _g = serial();
    let Some(ucp) = ucp() else { return };
    let p = pair(ucp, "tcp", ErrorMode::None);
    let sent = p
        .a_to_b
        .am_send(AM_ID, Vec::new(), vec![3; 4 << 20], SendMode::Rendezvous)
        .expect("send");
    assert!(matches!(sent, Completion::Pending(_)));
    let msg = pump(&p, 1, |ev| match ev {
        Event::Am(m) => Some(m),
        _ => None,
    });
    let AmData::Held(desc) = msg.data else {
        panic!("no rendezvous")
    };
    let r = p.b.recv_data(desc, vec![0; 4 << 20]).expect("recv_data");
    assert!(matches!(r, Completion::Pending(_)));
    // Queue an unread message too, then drop everything mid-transfer.
    p.a_to_b
        .am_send(AM_ID, b"unread".to_vec(), vec![1; 100], SendMode::Auto)
        .unwrap();
    let Pair {
        a,
        b,
        a_to_b,
        b_to_a,
    } = p;
    let t = std::time::Instant::now();
    drop((a, b)); // the endpoints keep both cores alive
    drop(a_to_b); // force close: a's rendezvous send is cancelled
    let after_a = t.elapsed();
    drop(b_to_a); // b's receive in flight: cancelled, or waited for (2 s)
    eprintln!("drops: a {after_a:?}, b {:?}", t.elapsed() - after_a);
    assert!(t.elapsed() < std::time::Duration::from_secs(10));
}

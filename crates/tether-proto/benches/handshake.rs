//! What the authenticated handshake costs in computation: whole
//! handshakes between two links in memory (no sockets), with and without
//! a key, interleaved in rounds. On the wire it adds one round trip
//! (`Challenge`, `Proof`); this measures the rest (four HMAC-SHA256 and
//! the frames' encoding).
//!
//!     cargo bench -p tether-proto --bench handshake

use std::sync::Arc;
use std::time::{Duration, Instant};

use tether_auth::Key;
use tether_proto::link::{Inbound, Link, LinkAuth, LinkConfig, LinkEvent};
use tether_proto::Hello;

fn config(rank: u32, key: Option<&Arc<Key>>) -> LinkConfig {
    LinkConfig {
        hello: Hello {
            universe_id: 7,
            universe_rank: rank,
            capabilities: 0,
            program: "bench".into(),
            program_rank: rank,
        },
        handshake_timeout: Duration::from_secs(10),
        goodbye_timeout: Duration::from_secs(10),
        max_eager: 1 << 20,
        auth: key.map(|key| LinkAuth {
            key: key.clone(),
            nonce: tether_auth::nonce(),
        }),
    }
}

fn pipe(from: &mut Link, to: &mut Link) {
    while let Some(frame) = from.poll_transmit() {
        match to.on_header(&frame.header.encode()).expect("header") {
            Inbound::Control(header) => to.on_control(&header, &frame.payload).expect("control"),
            Inbound::Deliver(_) => unreachable!("a control frame"),
        }
    }
}

/// One whole handshake; the nonces are drawn as the TCP transport does,
/// one per link.
fn handshake(key: Option<&Arc<Key>>) {
    let now = Instant::now();
    let mut dialer = Link::connector(config(0, key), 1, now);
    let mut answerer = Link::acceptor(config(1, key), now);
    loop {
        pipe(&mut dialer, &mut answerer);
        while let Some(event) = answerer.poll_event() {
            if let LinkEvent::HelloReceived(_) = event {
                answerer.accept_hello();
            }
        }
        pipe(&mut answerer, &mut dialer);
        if let Some(LinkEvent::Established { .. }) = dialer.poll_event() {
            return;
        }
    }
}

fn main() {
    let key = Arc::new(Key::new(&[9; 32], "bench").expect("long enough"));
    let n = 20_000;
    let mut plain = Vec::new();
    let mut keyed = Vec::new();
    for _ in 0..5 {
        for (key, out) in [(None, &mut plain), (Some(&key), &mut keyed)] {
            let start = Instant::now();
            for _ in 0..n {
                handshake(key);
            }
            out.push(start.elapsed().as_secs_f64() * 1e6 / f64::from(n));
        }
    }
    plain.sort_by(f64::total_cmp);
    keyed.sort_by(f64::total_cmp);
    println!("handshake in memory, median of 5 rounds of {n}:");
    println!("  without a key: {:.2} us", plain[2]);
    println!(
        "  with a key:    {:.2} us (+{:.2} us)",
        keyed[2],
        keyed[2] - plain[2]
    );
}

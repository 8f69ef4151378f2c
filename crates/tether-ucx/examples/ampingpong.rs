//! Active-message ping-pong and bandwidth through tether-ucx, the same
//! scheme and output as benches/ucx/ampingpong.c, so the two can be
//! compared (ratios) in one run:
//!
//! ```text
//! cargo build --release -p tether-ucx --example ampingpong
//! UCX_TLS=tcp UCX_NET_DEVICES=lo target/release/examples/ampingpong [ITERS] [BW_ITERS]
//! UCX_TLS=sm target/release/examples/ampingpong
//! ```
//!
//! The program re-runs itself as rank 1 (`--child`), exchanging worker
//! addresses over the child's stdin/stdout. Latency: 8 B AMs, no header,
//! eager; bandwidth: 16 MiB AMs with `SendMode::Rendezvous`, received into
//! a preallocated buffer with `recv_data_raw` and answered by a 0 B AM.
//! Progress by spinning. `BENCH_ERR_MODE=peer` selects the peer error mode.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use tether_ucx::{
    AmData, Completion, Context, ContextOptions, Endpoint, ErrorMode, Event, SendMode, Ucp, Worker,
};

const AM_ID: u16 = 7;
const LAT_SIZE: usize = 8;
const BW_SIZE: usize = 16 << 20;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

struct Rank {
    w: Worker,
    received: Vec<AmData>,
}

impl Rank {
    /// Spins until an AM arrives; returns its payload.
    fn wait_am(&mut self) -> AmData {
        loop {
            if let Some(d) = self.received.pop() {
                return d;
            }
            self.w.progress();
            while let Some(ev) = self.w.next_event() {
                match ev {
                    Event::Am(m) => self.received.insert(0, m.data),
                    Event::EndpointFailed { error, .. } => panic!("endpoint failed: {error}"),
                    Event::SendDone { result, .. } => result.expect("send"),
                    Event::RecvDone { result, .. } => {
                        result.expect("recv");
                    }
                }
            }
        }
    }

    /// Spins until the send or receive with `token` is done.
    fn wait_done(&mut self, send: Option<u64>, recv: Option<u64>) {
        loop {
            self.w.progress();
            while let Some(ev) = self.w.next_event() {
                match ev {
                    Event::Am(m) => self.received.insert(0, m.data),
                    Event::EndpointFailed { error, .. } => panic!("endpoint failed: {error}"),
                    Event::SendDone { token, result, .. } => {
                        result.expect("send");
                        if Some(token.0) == send {
                            return;
                        }
                    }
                    Event::RecvDone { token, result, .. } => {
                        result.expect("recv");
                        if Some(token.0) == recv {
                            return;
                        }
                    }
                }
            }
        }
    }

    fn send(&mut self, ep: &Endpoint, buf: &[u8], mode: SendMode) {
        // SAFETY: `buf` outlives the wait for the completion below.
        let r =
            unsafe { ep.am_send_raw(AM_ID, std::ptr::null(), 0, buf.as_ptr(), buf.len(), mode) };
        if let Completion::Pending(t) = r.expect("am_send") {
            self.wait_done(Some(t.0), None);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let child = args.iter().any(|a| a == "--child");
    let nums: Vec<u64> = args[1..].iter().filter_map(|a| a.parse().ok()).collect();
    let iters = nums.first().copied().unwrap_or(10_000);
    let bw_iters = nums.get(1).copied().unwrap_or(20);

    let ucp = match Ucp::load() {
        Ok(u) => u,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let ctx = Context::new(ucp, &ContextOptions::default()).expect("context");
    let w = Worker::new(&ctx, &[AM_ID]).expect("worker");
    let my_addr = hex(&w.address().expect("address"));

    // Address exchange: the parent talks to the child's stdin/stdout.
    let (peer_addr, mut proc, mut to_peer, mut from_peer): (
        String,
        Option<std::process::Child>,
        Box<dyn Write>,
        Box<dyn BufRead>,
    ) = if child {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).unwrap();
        println!("{my_addr}");
        std::io::stdout().flush().unwrap();
        (
            line.trim().to_owned(),
            None,
            Box::new(std::io::stdout()),
            Box::new(BufReader::new(std::io::stdin())),
        )
    } else {
        let mut c = Command::new(std::env::current_exe().unwrap())
            .arg("--child")
            .args(&args[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn rank 1");
        let mut stdin = c.stdin.take().unwrap();
        writeln!(stdin, "{my_addr}").unwrap();
        let mut out = BufReader::new(c.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        (
            line.trim().to_owned(),
            Some(c),
            Box::new(stdin),
            Box::new(out),
        )
    };
    let mode = match std::env::var("BENCH_ERR_MODE").as_deref() {
        Ok("peer") => ErrorMode::Peer,
        _ => ErrorMode::None,
    };
    let ep = w.connect(&unhex(&peer_addr), mode).expect("connect");
    let mut r = Rank {
        w,
        received: Vec::new(),
    };

    let small = [0u8; LAT_SIZE];
    let warm = iters / 10 + 10;
    let mut t0 = Instant::now();
    for i in 0..warm + iters {
        if i == warm {
            t0 = Instant::now();
        }
        if !child {
            r.send(&ep, &small, SendMode::Auto);
            r.wait_am();
        } else {
            r.wait_am();
            r.send(&ep, &small, SendMode::Auto);
        }
    }
    let lat = t0.elapsed().as_secs_f64() / iters as f64 / 2.0 * 1e6;

    let mut big = vec![if child { 2u8 } else { 1u8 }; BW_SIZE];
    for i in 0..2 + bw_iters {
        if i == 2 {
            t0 = Instant::now();
        }
        if !child {
            r.send(&ep, &big, SendMode::Rendezvous);
            r.wait_am();
        } else {
            let AmData::Held(desc) = r.wait_am() else {
                panic!("16 MiB did not arrive as held data")
            };
            assert!(desc.is_rendezvous() && desc.len() == BW_SIZE);
            // SAFETY: `big` is not touched until the receive completes.
            let c = unsafe { r.w.recv_data_raw(desc, big.as_mut_ptr(), BW_SIZE) };
            if let Completion::Pending(t) = c.expect("recv_data") {
                r.wait_done(None, Some(t.0));
            }
            r.send(&ep, &[], SendMode::Auto);
        }
    }
    let bw = (BW_SIZE as u64 * bw_iters) as f64 / t0.elapsed().as_secs_f64() / 1e6;
    if !child {
        assert!(big.iter().all(|&b| b == 1));
        println!(
            "rust UCX_TLS={} lat_8B_us={lat:.3} bw_16MiB_MBps={bw:.0} (iters {iters}, {bw_iters})",
            std::env::var("UCX_TLS").unwrap_or_else(|_| "(unset)".into())
        );
    } else {
        assert!(big.iter().all(|&b| b == 1), "rank 0's bytes did not land");
    }
    // Both ranks finish their last exchange before closing.
    writeln!(to_peer, "done").unwrap();
    to_peer.flush().unwrap();
    let mut line = String::new();
    from_peer.read_line(&mut line).unwrap();
    drop(ep);
    if let Some(c) = proc.as_mut() {
        let st = c.wait().unwrap();
        assert!(st.success(), "rank 1 failed: {st}");
    }
}

//! Raw TCP on 127.0.0.1 between two processes, no framing or matching:
//! a busy-polling ping-pong (non-blocking socket, `read`/`write` retried
//! until done), a blocking stream of windows answered by a 4-byte ack (as
//! osu_bw), and windows both ways at once, busy-polled (as osu_bibw). All
//! with TCP_NODELAY.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::super::worker::{Counts, Point};
use super::fork::{spin_until, with_child, ChildResult};

/// Two connected sockets: (parent's, child's).
fn connected_pair() -> Result<(TcpStream, TcpStream), String> {
    let io = |e: std::io::Error| format!("raw TCP setup: {e}");
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io)?;
    let client = TcpStream::connect(listener.local_addr().map_err(io)?).map_err(io)?;
    let (server, _) = listener.accept().map_err(io)?;
    for s in [&client, &server] {
        s.set_nodelay(true).map_err(io)?;
    }
    Ok((server, client))
}

/// Moves all of `buf` one way, retrying on EAGAIN (busy-polling).
fn spin_io(
    mut stream: &TcpStream,
    buf: &mut [u8],
    sending: bool,
    deadline: Instant,
) -> ChildResult {
    let mut done = 0;
    let mut failure = None;
    spin_until(deadline, || {
        if done == buf.len() {
            return true;
        }
        let result = if sending {
            stream.write(&buf[done..])
        } else {
            stream.read(&mut buf[done..])
        };
        match result {
            Ok(0) => failure = Some("raw TCP: the peer closed the connection"),
            Ok(n) => done += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(_) => failure = Some("raw TCP: read or write failed"),
        }
        failure.is_some() || done == buf.len()
    })?;
    failure.map_or(Ok(()), Err)
}

/// Half the round trip of a busy-polled ping-pong per size (sizes of 0
/// bytes are left out: TCP has no empty message), in microseconds.
pub fn latency(plan: &[(u64, Counts)], deadline: Instant) -> Result<Vec<Point>, String> {
    let plan: Vec<(u64, Counts)> = plan.iter().copied().filter(|(s, _)| *s > 0).collect();
    let largest = plan.iter().map(|(s, _)| *s as usize).max().unwrap_or(1);
    let (parent, child) = connected_pair()?;
    for s in [&parent, &child] {
        s.set_nonblocking(true).map_err(|e| e.to_string())?;
    }
    let mut buf = vec![0u8; largest];
    with_child(
        || {
            for (size, counts) in &plan {
                let msg = &mut buf[..*size as usize];
                for _ in 0..counts.warmup + counts.iters {
                    spin_io(&child, msg, false, deadline)?;
                    spin_io(&child, msg, true, deadline)?;
                }
            }
            Ok(())
        },
        || {
            let mut points = Vec::new();
            let mut mine = vec![0u8; largest];
            for (size, counts) in &plan {
                let msg = &mut mine[..*size as usize];
                let mut start = Instant::now();
                for it in 0..counts.warmup + counts.iters {
                    if it == counts.warmup {
                        start = Instant::now();
                    }
                    spin_io(&parent, msg, true, deadline)?;
                    spin_io(&parent, msg, false, deadline)?;
                }
                let us = start.elapsed().as_secs_f64() * 1e6;
                points.push(Point {
                    size: *size,
                    value: us / (2.0 * counts.iters as f64),
                });
            }
            Ok(points)
        },
    )
}

/// A blocking stream: `window` messages of each size then a 4-byte ack,
/// per iteration, in MB/s.
pub fn stream(plan: &[(u64, Counts)], window: u32, limit: Duration) -> Result<Vec<Point>, String> {
    let plan: Vec<(u64, Counts)> = plan.iter().copied().filter(|(s, _)| *s > 0).collect();
    let largest = plan.iter().map(|(s, _)| *s as usize).max().unwrap_or(1);
    let (parent, child) = connected_pair()?;
    for s in [&parent, &child] {
        s.set_read_timeout(Some(limit)).map_err(|e| e.to_string())?;
    }
    let mut buf = vec![0u8; largest];
    with_child(
        || {
            let mut ack = [0u8; 4];
            for (size, counts) in &plan {
                let msg = &mut buf[..*size as usize];
                for _ in 0..counts.warmup + counts.iters {
                    for _ in 0..window {
                        (&child)
                            .read_exact(msg)
                            .map_err(|_| "raw TCP stream: read failed")?;
                    }
                    (&child)
                        .write_all(&ack)
                        .map_err(|_| "raw TCP stream: ack failed")?;
                    ack[0] = ack[0].wrapping_add(1);
                }
            }
            Ok(())
        },
        || {
            let mut points = Vec::new();
            let mine = vec![1u8; largest];
            let mut ack = [0u8; 4];
            let io = |e: std::io::Error| format!("raw TCP stream: {e}");
            for (size, counts) in &plan {
                let msg = &mine[..*size as usize];
                let mut start = Instant::now();
                for it in 0..counts.warmup + counts.iters {
                    if it == counts.warmup {
                        start = Instant::now();
                    }
                    for _ in 0..window {
                        (&parent).write_all(msg).map_err(io)?;
                    }
                    (&parent).read_exact(&mut ack).map_err(io)?;
                }
                let us = start.elapsed().as_secs_f64() * 1e6;
                let bytes = size * u64::from(window) * counts.iters;
                points.push(Point {
                    size: *size,
                    value: bytes as f64 / us,
                });
            }
            Ok(points)
        },
    )
}

/// Sends `total` bytes (repeating `out`) and receives `total` bytes (into
/// `into`, over and over) at once, busy-polling both directions of a
/// non-blocking socket.
fn spin_both(
    mut stream: &TcpStream,
    out: &[u8],
    into: &mut [u8],
    total: u64,
    deadline: Instant,
) -> ChildResult {
    let (mut sent, mut received) = (0u64, 0u64);
    let size = out.len() as u64;
    let mut failure = None;
    spin_until(deadline, || {
        if sent < total {
            let from = (sent % size) as usize;
            let len = (size - sent % size).min(total - sent) as usize;
            match stream.write(&out[from..from + len]) {
                Ok(n) => sent += n as u64,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(_) => failure = Some("raw TCP: write failed"),
            }
        }
        if received < total {
            let from = (received % size) as usize;
            let len = (size - received % size).min(total - received) as usize;
            match stream.read(&mut into[from..from + len]) {
                Ok(0) => failure = Some("raw TCP: the peer closed the connection"),
                Ok(n) => received += n as u64,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(_) => failure = Some("raw TCP: read failed"),
            }
        }
        failure.is_some() || (sent == total && received == total)
    })?;
    failure.map_or(Ok(()), Err)
}

/// Windows of `window` messages both ways at once per iteration, busy-polled,
/// both directions summed, in MB/s.
pub fn bidirectional(
    plan: &[(u64, Counts)],
    window: u32,
    deadline: Instant,
) -> Result<Vec<Point>, String> {
    let plan: Vec<(u64, Counts)> = plan.iter().copied().filter(|(s, _)| *s > 0).collect();
    let largest = plan.iter().map(|(s, _)| *s as usize).max().unwrap_or(1);
    let (parent, child) = connected_pair()?;
    for s in [&parent, &child] {
        s.set_nonblocking(true).map_err(|e| e.to_string())?;
    }
    let (child_out, mut child_in) = (vec![2u8; largest], vec![0u8; largest]);
    with_child(
        || {
            for (size, counts) in &plan {
                let n = *size as usize;
                let total = size * u64::from(window);
                for _ in 0..counts.warmup + counts.iters {
                    spin_both(&child, &child_out[..n], &mut child_in[..n], total, deadline)?;
                }
            }
            Ok(())
        },
        || {
            let (out, mut into) = (vec![1u8; largest], vec![0u8; largest]);
            let mut points = Vec::new();
            for (size, counts) in &plan {
                let n = *size as usize;
                let total = size * u64::from(window);
                let mut start = Instant::now();
                for it in 0..counts.warmup + counts.iters {
                    if it == counts.warmup {
                        start = Instant::now();
                    }
                    spin_both(&parent, &out[..n], &mut into[..n], total, deadline)?;
                }
                let us = start.elapsed().as_secs_f64() * 1e6;
                points.push(Point {
                    size: *size,
                    value: (2 * total * counts.iters) as f64 / us,
                });
            }
            Ok(points)
        },
    )
}

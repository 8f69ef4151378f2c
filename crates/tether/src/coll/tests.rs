//! Every algorithm run on engines wired in memory, for communicator sizes
//! 1 to 9 and every root, on both sides of each size threshold, against
//! results computed directly.

use std::collections::VecDeque;

use tether_proto::{Engine, EngineConfig, FrameHeader, PayloadSink, TransmitPayload};

use super::*;
use crate::datatype::{lookup, Datatype};
use crate::op::Op;

const CONTEXT: u32 = 1;
const TAG: i32 = 5;

/// One rank's buffers and running schedule.
struct Rank {
    send: Vec<u8>,
    recv: Vec<u8>,
    running: Running,
}

/// A scratch pool whose buffers hold garbage, as reused ones may: a
/// schedule that read its scratch before writing it would fail the tests.
fn garbage_scratch() -> ScratchPool {
    let mut pool = ScratchPool::default();
    pool.give(vec![vec![0xA5; 256 * 1024]; 16]);
    pool
}

/// Runs one schedule per rank (built by `build(rank)`) to completion.
/// `buffers(rank)` gives the initial send and receive buffers. Returns the
/// receive buffers.
fn run(
    size: u32,
    reduction: Option<(Op, Datatype)>,
    buffers: impl Fn(u32) -> (Vec<u8>, Vec<u8>),
    build: impl Fn(Shape) -> Schedule,
) -> Vec<Vec<u8>> {
    let mut engines: Vec<Engine> = (0..size)
        .map(|me| {
            Engine::new(EngineConfig {
                me,
                eager_limit: 4096,
            })
        })
        .collect();
    let mut ranks: Vec<Rank> = (0..size)
        .map(|rank| {
            let (send, mut recv) = buffers(rank);
            let schedule = build(Shape { rank, size });
            let running = Running::new(
                schedule.into(),
                Channel {
                    members: (0..size).collect(),
                    context: CONTEXT,
                    tag: TAG,
                },
                Buffers {
                    send: send.as_ptr(),
                    send_len: send.len(),
                    recv: recv.as_mut_ptr(),
                    recv_len: recv.len(),
                },
                reduction,
                &mut garbage_scratch(),
            );
            Rank {
                send,
                recv,
                running,
            }
        })
        .collect();
    let mut done = vec![false; size as usize];
    for _ in 0..100_000 {
        for (i, rank) in ranks.iter_mut().enumerate() {
            if !done[i] {
                if let Some(outcome) = rank.running.advance(&mut engines[i]) {
                    outcome.expect("collective failed");
                    done[i] = true;
                }
            }
        }
        if done.iter().all(|d| *d) {
            assert!(
                engines.iter().all(|e| e.live_requests() == 0),
                "leaked requests"
            );
            return ranks
                .into_iter()
                .map(|r| {
                    drop(r.send);
                    r.recv
                })
                .collect();
        }
        pump(&mut engines);
    }
    panic!("collective did not finish on {size} ranks");
}

/// Delivers every queued frame, in order per link.
fn pump(engines: &mut [Engine]) {
    let mut frames = VecDeque::new();
    for (from, engine) in engines.iter_mut().enumerate() {
        while let Some(t) = engine.poll_transmit() {
            let mut header: FrameHeader = t.header;
            header.payload_len = t.payload.len() as u64;
            let payload = match &t.payload {
                TransmitPayload::None => Vec::new(),
                // SAFETY: the region is valid until transmit_done.
                TransmitPayload::Borrowed(r) => unsafe { r.as_slice() }.to_vec(),
                TransmitPayload::Owned(v) => v.clone(),
            };
            if let Some(req) = t.completes {
                engine.transmit_done(req);
            }
            frames.push_back((from as u32, t.peer as usize, header, payload));
        }
    }
    for (from, to, header, payload) in frames {
        match engines[to].on_header(from, &header).expect("valid frame") {
            PayloadSink::None => {}
            PayloadSink::Region { region, token, .. } => {
                // SAFETY: the engine handed out a writable region.
                unsafe { region.copy_from(&payload[..region.len]) };
                engines[to].payload_done(token, None);
            }
            PayloadSink::Owned { mut buf, token } => {
                buf.copy_from_slice(&payload);
                engines[to].payload_done(token, Some(buf));
            }
        }
    }
}

/// Deterministic bytes for (rank, index).
fn data(rank: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(rank * 97 + 7) as u8)
        .collect()
}

fn int64s(rank: u32, count: usize) -> Vec<u8> {
    (0..count)
        .flat_map(|i| {
            ((i as i64 * 1_000_003 - rank as i64 * 77_777) ^ (rank as i64 - 4)).to_le_bytes()
        })
        .collect()
}

fn sum_int64(size: u32, count: usize) -> Vec<u8> {
    let mut total = vec![0i64; count];
    for r in 0..size {
        for (i, chunk) in int64s(r, count).chunks_exact(8).enumerate() {
            total[i] = total[i].wrapping_add(i64::from_le_bytes(chunk.try_into().unwrap()));
        }
    }
    total.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn int64() -> Datatype {
    lookup(6).unwrap()
}

const SIZES: std::ops::RangeInclusive<u32> = 1..=9;

#[test]
fn barrier_completes_on_every_size() {
    for p in SIZES {
        run(p, None, |_| (vec![], vec![]), tree::barrier);
    }
}

#[test]
fn bcast_small_and_large_from_every_root() {
    for len in [0, 1, 1000, tuning::BCAST_SCATTER_MIN_BYTES + 13] {
        for p in SIZES {
            for root in 0..p {
                let out = run(
                    p,
                    None,
                    |r| {
                        (
                            vec![],
                            if r == root {
                                data(root, len)
                            } else {
                                vec![0; len]
                            },
                        )
                    },
                    |me| tree::bcast(me, root, len),
                );
                assert!(
                    out.iter().all(|b| *b == data(root, len)),
                    "len {len} p {p} root {root}"
                );
            }
        }
    }
}

#[test]
fn reduce_and_allreduce_small_and_large() {
    let large = tuning::REDUCE_RING_MIN_BYTES / 8 + 5;
    for count in [0, 1, 7, large] {
        let len = count * 8;
        for p in SIZES {
            let expected = sum_int64(p, count);
            let out = run(
                p,
                Some((Op::Sum, int64())),
                |r| (int64s(r, count), vec![0; len]),
                |me| ring::allreduce(me, len, 8, Span::whole(Buf::Send, len)),
            );
            assert!(
                out.iter().all(|b| *b == expected),
                "allreduce count {count} p {p}"
            );
            let in_place = run(
                p,
                Some((Op::Sum, int64())),
                |r| (vec![], int64s(r, count)),
                |me| ring::allreduce(me, len, 8, Span::whole(Buf::Recv, len)),
            );
            assert!(
                in_place.iter().all(|b| *b == expected),
                "in place count {count} p {p}"
            );
            for root in [0, p / 2, p - 1] {
                let out = run(
                    p,
                    Some((Op::Sum, int64())),
                    |r| (int64s(r, count), vec![0; if r == root { len } else { 0 }]),
                    |me| tree::reduce(me, root, len, 8, Span::whole(Buf::Send, len)),
                );
                assert_eq!(
                    out[root as usize], expected,
                    "reduce count {count} p {p} root {root}"
                );
            }
        }
    }
}

#[test]
fn reduce_scatter_block_small_and_large() {
    for block_count in [0, 1, 3, tuning::REDUCE_RING_MIN_BYTES / 8] {
        for p in SIZES {
            let count = block_count * p as usize;
            let block = block_count * 8;
            let expected = sum_int64(p, count);
            let out = run(
                p,
                Some((Op::Sum, int64())),
                |r| (int64s(r, count), vec![0; block]),
                |me| ring::reduce_scatter_block(me, block, 8, Span::whole(Buf::Send, count * 8)),
            );
            for (r, got) in out.iter().enumerate() {
                assert_eq!(
                    got[..],
                    expected[r * block..][..block],
                    "block {block} p {p}"
                );
            }
        }
    }
}

fn concatenated(p: u32, block: usize) -> Vec<u8> {
    (0..p).flat_map(|r| data(r, block)).collect()
}

#[test]
fn gather_and_scatter_small_and_large_from_every_root() {
    for block in [0, 5, tuning::GATHER_TREE_MAX_BYTES / 3] {
        for p in SIZES {
            for root in 0..p {
                let all = concatenated(p, block);
                let out = run(
                    p,
                    None,
                    |r| {
                        (
                            data(r, block),
                            vec![0; if r == root { all.len() } else { 0 }],
                        )
                    },
                    |me| tree::gather(me, root, block, Span::whole(Buf::Send, block)),
                );
                assert_eq!(
                    out[root as usize], all,
                    "gather block {block} p {p} root {root}"
                );
                let out = run(
                    p,
                    None,
                    |r| (if r == root { all.clone() } else { vec![] }, vec![0; block]),
                    |me| tree::scatter(me, root, block, Some(Span::whole(Buf::Recv, block))),
                );
                for (r, got) in out.iter().enumerate() {
                    assert_eq!(
                        *got,
                        data(r as u32, block),
                        "scatter block {block} p {p} root {root}"
                    );
                }
            }
        }
    }
}

#[test]
fn allgather_bruck_and_ring_and_in_place() {
    for block in [0, 3, tuning::ALLGATHER_BRUCK_MAX_BYTES / 2] {
        for p in SIZES {
            let all = concatenated(p, block);
            let out = run(
                p,
                None,
                |r| (data(r, block), vec![0; all.len()]),
                |me| ring::allgather(me, block, Span::whole(Buf::Send, block)),
            );
            assert!(
                out.iter().all(|b| *b == all),
                "allgather block {block} p {p}"
            );
            let out = run(
                p,
                None,
                |r| {
                    let mut recv = vec![0; all.len()];
                    recv[r as usize * block..][..block].copy_from_slice(&data(r, block));
                    (vec![], recv)
                },
                |me| {
                    let mine = Span::new(Buf::Recv, me.rank as usize * block, block);
                    ring::allgather(me, block, mine)
                },
            );
            assert!(
                out.iter().all(|b| *b == all),
                "in place block {block} p {p}"
            );
        }
    }
}

/// Uneven blocks with gaps: rank r contributes r*3+1 bytes at a displacement
/// that leaves 2 bytes between blocks.
fn uneven(p: u32) -> Vec<(usize, usize)> {
    let mut offset = 0;
    (0..p)
        .map(|r| {
            let block = (offset, r as usize * 3 + 1);
            offset += block.1 + 2;
            block
        })
        .collect()
}

#[test]
fn v_variants_place_uneven_blocks() {
    for p in SIZES {
        let parts = uneven(p);
        let extent = parts.last().map_or(0, |(o, l)| o + l);
        let mut expected = vec![0u8; extent];
        for (r, (o, l)) in parts.iter().enumerate() {
            expected[*o..o + l].copy_from_slice(&data(r as u32, *l));
        }
        let out = run(
            p,
            None,
            |r| (data(r, parts[r as usize].1), vec![0; extent]),
            |me| {
                ring::allgatherv(
                    me,
                    &parts,
                    Span::whole(Buf::Send, parts[me.rank as usize].1),
                )
            },
        );
        assert!(out.iter().all(|b| *b == expected), "allgatherv p {p}");
        let root = p / 2;
        let out = run(
            p,
            None,
            |r| {
                (
                    data(r, parts[r as usize].1),
                    vec![0; if r == root { extent } else { 0 }],
                )
            },
            |me| {
                pairwise::gatherv(
                    me,
                    root,
                    &parts,
                    Span::whole(Buf::Send, parts[me.rank as usize].1),
                )
            },
        );
        assert_eq!(out[root as usize], expected, "gatherv p {p}");
        let out = run(
            p,
            None,
            |r| {
                (
                    if r == root { expected.clone() } else { vec![] },
                    vec![0; parts[r as usize].1],
                )
            },
            |me| {
                let len = parts[me.rank as usize].1;
                pairwise::scatterv(me, root, &parts, Some(Span::whole(Buf::Recv, len)))
            },
        );
        for (r, got) in out.iter().enumerate() {
            assert_eq!(*got, data(r as u32, parts[r].1), "scatterv p {p}");
        }
    }
}

#[test]
fn alltoall_at_once_pairwise_and_in_place() {
    for block in [0, 4, tuning::ALLTOALL_AT_ONCE_MAX_BYTES / 2] {
        for p in SIZES {
            let blocks = uniform(p, block);
            // Rank r sends data(r * 16 + dest) to dest.
            let outgoing =
                |r: u32| -> Vec<u8> { (0..p).flat_map(|d| data(r * 16 + d, block)).collect() };
            let expected =
                |r: u32| -> Vec<u8> { (0..p).flat_map(|s| data(s * 16 + r, block)).collect() };
            let out = run(
                p,
                None,
                |r| (outgoing(r), vec![0; block * p as usize]),
                |me| pairwise::alltoallv(me, Some(&blocks), &blocks),
            );
            for (r, got) in out.iter().enumerate() {
                assert_eq!(*got, expected(r as u32), "alltoall block {block} p {p}");
            }
            let out = run(
                p,
                None,
                |r| (vec![], outgoing(r)),
                |me| pairwise::alltoallv(me, None, &blocks),
            );
            for (r, got) in out.iter().enumerate() {
                assert_eq!(*got, expected(r as u32), "in place block {block} p {p}");
            }
        }
    }
}

#[test]
fn chunks_cover_the_buffer_in_whole_elements() {
    let parts = chunks(10, 8, 4);
    assert_eq!(parts, [(0, 24), (24, 24), (48, 16), (64, 16)]);
    assert_eq!(chunks(0, 8, 3), [(0, 0), (0, 0), (0, 0)]);
}

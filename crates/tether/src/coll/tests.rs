//! Every algorithm run on engines wired in memory, for communicator sizes
//! 1 to 9 and every root, on both sides of each size threshold, against
//! results computed directly.

use std::collections::VecDeque;

use tether_proto::{Engine, EngineConfig, FrameHeader, PayloadSink, Region, TransmitPayload};

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

/// Runs one schedule per rank (built by `build(rank)`) to completion,
/// twice: every transfer through the engines, then with a shortcut that
/// takes what it can straight from the links (as `RingShortcut` from the
/// rings) and defers receives whose message is not there yet. Both must
/// give the same buffers. `buffers(rank)` gives the initial send and
/// receive buffers. Returns the receive buffers.
fn run(
    size: u32,
    reduction: Option<(Op, Datatype)>,
    buffers: impl Fn(u32) -> (Vec<u8>, Vec<u8>),
    build: impl Fn(Shape) -> Schedule,
) -> Vec<Vec<u8>> {
    let through_engines = run_wired(size, reduction, &buffers, &build, None);
    let seed = 0x9E37_79B9_7F4A_7C15 ^ u64::from(size);
    let with_shortcut = run_wired(size, reduction, &buffers, &build, Some(seed));
    assert!(
        through_engines == with_shortcut,
        "the shortcut changed the result on {size} ranks"
    );
    through_engines
}

/// Frames in flight on each link (from, to), in order.
type Links = Vec<Vec<VecDeque<(FrameHeader, Vec<u8>)>>>;

/// A small deterministic generator for the interleavings.
struct Coin(u64);

impl Coin {
    fn flip(&mut self, one_in: u64) -> bool {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0.is_multiple_of(one_in)
    }
}

/// The shortcut of rank `me` over `links`, declining some sends at
/// random; it takes a receive's message only when it is the link's next
/// frame and no earlier posted receive or unexpected message comes first,
/// the rules `RingShortcut` follows.
struct LinkShortcut<'a> {
    links: &'a mut Links,
    /// Frames written by shortcut sends that the receiver cannot see yet:
    /// they appear at random moments, also between two receives of one
    /// pass, as a peer writing its ring concurrently would.
    staged: &'a mut Links,
    me: usize,
    coin: &'a mut Coin,
}

impl Shortcut for LinkShortcut<'_> {
    fn send(&mut self, engine: &Engine, dest: u32, context: u32, tag: i32, region: Region) -> bool {
        if engine.has_transmit()
            || region.len as u64 > engine.eager_limit(dest)
            || self.coin.flip(3)
        {
            return false;
        }
        let mut header = FrameHeader::new(tether_proto::FrameKind::Eager);
        header.context = context;
        header.tag = tag;
        header.msg_size = region.len as u64;
        header.payload_len = region.len as u64;
        // SAFETY: the schedule's send region is valid during the call.
        let payload = unsafe { region.as_slice() }.to_vec();
        self.staged[self.me][dest as usize].push_back((header, payload));
        true
    }

    fn recv(
        &mut self,
        engine: &Engine,
        source: u32,
        context: u32,
        tag: i32,
        region: Region,
    ) -> Received {
        if engine.iprobe(Some(source), context, Some(tag)).is_some() {
            return Received::Engine;
        }
        if self.coin.flip(2) {
            let arrived = std::mem::take(&mut self.staged[source as usize][self.me]);
            self.links[source as usize][self.me].extend(arrived);
        }
        let link = &mut self.links[source as usize][self.me];
        let Some((header, payload)) = link.front() else {
            return Received::NotYet;
        };
        let takes = header.kind == tether_proto::FrameKind::Eager
            && header.context == context
            && header.tag == tag
            && payload.len() <= region.len
            && engine.eager_destination(source, header).is_none();
        if !takes {
            return Received::Engine;
        }
        let (_, payload) = link.pop_front().expect("front exists");
        // SAFETY: the receive region is writable and holds the payload.
        unsafe { region.copy_from(&payload) };
        Received::Taken(payload.len() as u64)
    }
}

/// [`run`] with every transfer through the engines (`seed` none), or
/// with [`LinkShortcut`] and interleavings drawn from `seed`: frames wait
/// on their link for a random number of passes before the engine reads
/// them, and deferred receives are posted in the engine at random.
fn run_wired(
    size: u32,
    reduction: Option<(Op, Datatype)>,
    buffers: &impl Fn(u32) -> (Vec<u8>, Vec<u8>),
    build: &impl Fn(Shape) -> Schedule,
    seed: Option<u64>,
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
            let mut running = Running::new(
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
            if seed.is_some() {
                running.defer_receives();
            }
            Rank {
                send,
                recv,
                running,
            }
        })
        .collect();
    let n = size as usize;
    let mut links: Links = vec![vec![VecDeque::new(); n]; n];
    let mut staged: Links = vec![vec![VecDeque::new(); n]; n];
    let mut coin = Coin(seed.unwrap_or(1) | 1);
    let mut done = vec![false; n];
    for _ in 0..100_000 {
        for (i, rank) in ranks.iter_mut().enumerate() {
            if done[i] {
                continue;
            }
            let outcome = match seed {
                None => rank.running.advance(&mut engines[i]),
                Some(_) => {
                    let mut shortcut = LinkShortcut {
                        links: &mut links,
                        staged: &mut staged,
                        me: i,
                        coin: &mut coin,
                    };
                    let outcome = rank.running.advance_via(&mut engines[i], &mut shortcut);
                    if outcome.is_none() && rank.running.has_deferred() && coin.flip(4) {
                        rank.running.post_deferred(&mut engines[i]);
                    }
                    outcome
                }
            };
            if let Some(outcome) = outcome {
                outcome.expect("collective failed");
                done[i] = true;
            }
        }
        if done.iter().all(|d| *d) {
            assert!(
                engines.iter().all(|e| e.live_requests() == 0),
                "leaked requests"
            );
            assert!(
                links.iter().flatten().all(VecDeque::is_empty),
                "frames left on a link"
            );
            return ranks
                .into_iter()
                .map(|r| {
                    drop(r.send);
                    r.recv
                })
                .collect();
        }
        for (row, staged_row) in links.iter_mut().zip(staged.iter_mut()) {
            for (link, early) in row.iter_mut().zip(staged_row.iter_mut()) {
                link.extend(early.drain(..));
            }
        }
        pump(&mut engines, &mut links, seed.map(|_| &mut coin));
    }
    panic!("collective did not finish on {size} ranks");
}

/// Queues every frame the engines transmit on its link, then lets the
/// engines read the links: all of them, or with `coin`, each link only
/// now and then (frames left there may be taken by a shortcut).
fn pump(engines: &mut [Engine], links: &mut Links, mut coin: Option<&mut Coin>) {
    for (from, engine) in engines.iter_mut().enumerate() {
        while let Some(t) = engine.poll_transmit() {
            let mut header: FrameHeader = t.header;
            header.payload_len = t.payload.len() as u64;
            let payload = match &t.payload {
                TransmitPayload::None => Vec::new(),
                // SAFETY: the region is valid until transmit_done.
                TransmitPayload::Borrowed(r) => unsafe { r.as_slice() }.to_vec(),
                TransmitPayload::Owned(v) => v.clone(),
                // SAFETY: the runs are valid until transmit_done.
                TransmitPayload::Gathered(g) => unsafe { g.to_vec() },
            };
            if let Some(req) = t.completes {
                engine.transmit_done(req);
            }
            links[from][t.peer as usize].push_back((header, payload));
        }
    }
    for (from, row) in links.iter_mut().enumerate() {
        for (to, link) in row.iter_mut().enumerate() {
            if coin.as_deref_mut().is_some_and(|c| !c.flip(2)) {
                continue;
            }
            for (header, payload) in link.drain(..) {
                deliver(&mut engines[to], from as u32, &header, &payload);
            }
        }
    }
}

/// Feeds one frame to the engine of its receiver.
fn deliver(engine: &mut Engine, from: u32, header: &FrameHeader, payload: &[u8]) {
    match engine.on_header(from, header).expect("valid frame") {
        PayloadSink::None => {}
        PayloadSink::Region { region, token, .. } => {
            // SAFETY: the engine handed out a writable region.
            unsafe { region.copy_from(&payload[..region.len]) };
            engine.payload_done(token, None);
        }
        PayloadSink::Owned { mut buf, token } => {
            buf.copy_from_slice(payload);
            engine.payload_done(token, Some(buf));
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
fn two_receives_from_one_source_in_one_round_keep_their_order() {
    let (first, second) = (data(0, 24), data(1, 40));
    let buffers = |r| {
        if r == 0 {
            ([first.clone(), second.clone()].concat(), vec![])
        } else {
            (vec![], vec![0; 64])
        }
    };
    let build = |me: Shape| {
        let mut s = Schedule::new();
        if me.rank == 0 {
            s.round()
                .send(1, Span::new(Buf::Send, 0, 24))
                .send(1, Span::new(Buf::Send, 24, 40));
        } else {
            s.round()
                .recv(0, Span::new(Buf::Recv, 0, 24))
                .recv(0, Span::new(Buf::Recv, 24, 40));
        }
        s
    };
    // Many interleavings: the messages may appear between the two
    // receives of a pass, where deferring the first would let the second
    // take its message.
    for seed in 1..200 {
        let out = run_wired(2, None, &buffers, &build, Some(seed * 0x9E37_79B9));
        assert_eq!(
            out[1],
            [first.clone(), second.clone()].concat(),
            "seed {seed}"
        );
    }
}

#[test]
fn bcast_small_and_large_from_every_root() {
    for len in [
        0,
        1,
        1000,
        tuning::BCAST_SCATTER_MIN_BYTES + 13,
        tuning::BCAST_LINEAR_MAX_BYTES,
    ] {
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

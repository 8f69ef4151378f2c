//! M:N redistribution of a field between a producer and a consumer program.
//!
//! This is the planner and the copy loops behind `tether_field_*` (DESIGN
//! 3.8). It is a pure crate: no I/O, no clock, no threads, no `unsafe`. The
//! runtime exchanges the two sides' [`Dist`] descriptors ([`Dist::encode`],
//! [`Dist::decode`]), calls [`check`], then [`plan`] once per field, and per
//! step moves each [`PeerPlan`]'s message with [`PeerPlan::pack`] and
//! [`PeerPlan::unpack`], or in place when [`PeerPlan::contiguous`] says so.
//!
//! # Model
//!
//! A [`Dist`] splits a global array of `shape` (int64 extents, 0 allowed)
//! over the ranks of one side, either
//! - [`Layout::Regular`]: a process grid with a [`Kind`] per dimension. On
//!   one axis of extent `n`, `P` coordinates and block `B` (BLOCK:
//!   `ceil(n/P)`, so n=9, P=4 gives 3,3,3,0; CYCLIC: 1; BLOCK_CYCLIC: given;
//!   NONE: `P = 1`, `B = n`), global index `g` belongs to coordinate
//!   `(g div B) mod P` at local index `(g div (P*B))*B + g mod B`. The local
//!   indices of the dimensions are combined by the side's storage
//!   [`Order`], which also maps ranks to grid coordinates (C: last
//!   coordinate fastest; Fortran: first fastest);
//! - [`Layout::Boxes`]: per rank a list of boxes ([`Region`], 0-based
//!   global). The local buffer is the boxes one after another, each dense
//!   in the side's order. Producer boxes must not overlap
//!   ([`Dist::check_disjoint`]); consumer boxes may overlap and need not
//!   cover the array.
//!
//! Besides the rules of DESIGN 3.8, validation asks that the product of
//! the extents (zeros counted as 1) fit an int64 and that there be at most
//! [`MAX_DIMS`] dimensions, so that no index, offset or stride computed
//! later can overflow. [`check`] then compares a producer and a consumer:
//! ndims, shape, and that every element a consumer rank wants is held by
//! some producer rank; [`plan`] assumes it passed.
//!
//! # Canonical message order
//!
//! Both sides must agree on the order of a message without talking. The
//! message from producer `p` to consumer `q` is the concatenation, over
//! consumer box `b` ascending (a regular distribution is one piece), then
//! producer box `a` ascending, of the elements of `piece_a(p) ∩ piece_b(q)`
//! in logical C order of the global index (last dimension fastest), or in
//! Fortran order (first fastest) when both sides store in Fortran order.
//! Overlapping consumer boxes therefore receive an element once per box.
//! Different storage orders on the two sides make the copy a transpose.
//!
//! # Planning and its cost
//!
//! Regular distributions are separable: what `p` sends `q` is the product
//! over dimensions of one-dimensional intersections, and one dimension
//! depends only on the two coordinates in it (fields.md 4.2). A rank
//! therefore plans each dimension on its own and takes the product of the
//! remote coordinates met as its peers; it never looks at the other ranks
//! of its own side and never scans the other side rank by rank.
//!
//! On one dimension both patterns repeat every `L = lcm(P*B, Q*B')`
//! (computed in `i128`, treated as infinite when it does not fit or is not
//! below `n`). The planner walks the runs of one period (my blocks split by
//! the remote blocks, or the remote blocks when those are longer than my
//! whole period, since then each meets me in one local run), keeps a repeat
//! count and the local shift `L/P` per period, and walks the tail
//! `[R*L, n)` the same way. A block that spans several periods of the other
//! pattern is stored as one arithmetic progression per remote coordinate.
//! Work per rank and dimension is O(my blocks in one period x
//! min(B/B' + 1, Q)), or O(remote blocks in one period) when those are
//! longer than my period, with no factor in the number of remote ranks
//! beyond the peers actually met and none in the element count: 1-D 2^40
//! elements, 1000 CYCLIC to 7 BLOCK_CYCLIC(3) stores 20 entries on a
//! producer rank. Peers are then one step each. The stored plan is a sum
//! over dimensions, shared by all peers that use it, never an expanded
//! product and never expanded periods; adjacent runs contiguous on my side
//! are merged, so identical distributions and NONE dimensions give one run
//! per peer. A plan's lists, pieces and peers live in a few flat arrays
//! shared by its [`PeerPlan`]s, so a plan with thousands of peers costs a
//! few allocations.
//!
//! Boxes: a box against a grid intersects each of its intervals with the
//! grid's pattern, touching only the periods the interval spans (my grid
//! side: one local run per dimension, since a coordinate's blocks are
//! consecutive locally; my box side: at most three progressions per remote
//! coordinate). Box against box intersects intervals, O(my boxes x remote
//! boxes).
//!
//! # Copying
//!
//! [`PeerPlan::pack`] and [`PeerPlan::unpack`] walk the pieces with a
//! nested loop over dimensions that expands the run lists lazily. The
//! message-fastest dimensions that are contiguous in local memory are fused
//! first, so a piece that is one range is one `copy_from_slice` and a row
//! one copy; a piece fuses completely exactly when it is one range, which
//! is how [`PeerPlan::contiguous`] is decided in O(dimensions). What stays
//! strided (C storage on one side, Fortran on the other) is a transpose,
//! copied in 16 x 16 tiles with fixed-size cells for element sizes 1, 2,
//! 4, 8 and 16, so both buffers are touched a cache line at a time.
//!
//! Two Fortran sides are planned as the mirrored problem (dimensions
//! reversed, C order), which is the same memory and the same ranks, so
//! neither transposes: only a C side meeting a Fortran side does.
//!
//! # Tests and benchmark
//!
//! `tests/` checks every element of every message and every consumer
//! buffer against an element-by-element oracle (proptest cases plus
//! 100,000 seeded small cases over all kinds, both orders, boxes that
//! overlap or are empty, element sizes 1 to 16), bounds [`Plan::work`] and
//! [`Plan::stored_runs`] on the large cases of fields.md section 7, and
//! feeds [`Dist::decode`] arbitrary bytes. `cargo bench -p tether-redist`
//! times those cases beside a per-pair scan in the style of ScaLAPACK's
//! redistribution (`-- B2` runs one).
//!
//! # Example
//!
//! ```
//! use tether_redist::{check, plan, Dist, Kind, Order, Side};
//!
//! let producer = Dist::regular(&[9], &[4], &[Kind::Block], Order::C).unwrap();
//! let consumer = Dist::regular(&[9], &[2], &[Kind::Cyclic], Order::C).unwrap();
//! check(&producer, &consumer).unwrap();
//! let p0 = plan(&producer, &consumer, Side::Producer, 0);
//! // Producer rank 0 holds 0, 1, 2: 0 and 2 go to consumer 0, 1 to consumer 1.
//! let counts: Vec<(usize, u64)> = p0.peers().iter().map(|p| (p.peer(), p.elements())).collect();
//! assert_eq!(counts, [(0, 2), (1, 1)]);
//! let mut message = vec![0u8; 2];
//! p0.peers()[0].pack(&[10, 11, 12], 1, &mut message);
//! assert_eq!(message, [10, 12]);
//! ```

mod check;
mod codec;
mod copy;
mod dim;
mod dist;
mod plan;

pub use check::{check, Mismatch};
pub use dist::{Dist, DistError, Kind, Layout, Order, Region, MAX_DIMS};
pub use plan::{plan, PeerPlan, Plan, Side};

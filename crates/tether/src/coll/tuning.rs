//! Where the algorithms switch, in bytes. Chosen by measurement on the
//! development machine (docs/PERFORMANCE.md, "Collectives") and close to
//! MPICH's defaults where the measurement was flat.

/// Broadcasts of at least this many bytes on at least
/// [`BCAST_SCATTER_MIN_RANKS`] processes scatter the buffer and gather it
/// around a ring (van de Geijn); smaller ones use a binomial tree.
pub const BCAST_SCATTER_MIN_BYTES: usize = 512 * 1024;
pub const BCAST_SCATTER_MIN_RANKS: u32 = 4;

/// Broadcasts below [`BCAST_SCATTER_MIN_BYTES`] on at most this many
/// processes go from the root to every other process directly (one round)
/// instead of down a binomial tree. Up to 3 processes the two are the same
/// transfers; on 4, the tree's second hop costs more than the root's third
/// send: 4 processes of 2 programs on this 2-core machine, 8 B, shared
/// memory bound to cores, 2.45-2.53 us with the tree against 1.76-1.95
/// linear (Open MPI 1.87-2.17 in the same runs); TCP bound 12.3-12.8
/// against 10.4-10.7; 64 KiB over shared memory 21.3 against 20.0.
pub const BCAST_LINEAR_MAX_RANKS: u32 = 4;

/// Allreduces (and reduces) of at least this many bytes, with at least one
/// element per process, reduce-scatter around a ring; smaller ones use
/// recursive doubling (a binomial tree for reduce).
pub const REDUCE_RING_MIN_BYTES: usize = 256 * 1024;

/// Gathers and scatters whose whole buffer is at most this many bytes go
/// through a binomial tree; larger ones exchange with the root directly,
/// all transfers posted at once.
pub const GATHER_TREE_MAX_BYTES: usize = 64 * 1024;

/// Allgathers whose result is below this many bytes use Bruck's algorithm
/// (log p rounds); larger ones a ring (bandwidth-optimal).
pub const ALLGATHER_BRUCK_MAX_BYTES: usize = 80 * 1024;

/// All-to-alls whose send buffer is at most this many bytes post every
/// transfer at once; larger ones exchange pairwise, one partner a round.
pub const ALLTOALL_AT_ONCE_MAX_BYTES: usize = 32 * 1024;

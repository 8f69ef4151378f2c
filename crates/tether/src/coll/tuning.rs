//! Where the algorithms switch, in bytes. Chosen by measurement on the
//! development machine (docs/PERFORMANCE.md, "Collectives") and close to
//! MPICH's defaults where the measurement was flat.

/// Broadcasts of at least this many bytes on at least
/// [`BCAST_SCATTER_MIN_RANKS`] processes scatter the buffer and gather it
/// around a ring (van de Geijn); smaller ones go straight from the root or
/// down a binomial tree. At least 8 processes, as MPICH
/// (`MPIR_CVAR_BCAST_MIN_PROCS`): on 4 processes here the scatter-ring lost
/// to both others at every size (bound to cores, 512 KiB: shared memory
/// 162-184 us against 118-121 straight from the root and 132 binomial, TCP
/// 388-394 against 244-250 and 307-312; 4 MiB: shared memory 1.54 ms
/// against 1.41 and 1.31-1.43, TCP 2.95-3.00 against 2.56-2.63 and
/// 2.84-2.87).
pub const BCAST_SCATTER_MIN_BYTES: usize = 512 * 1024;
pub const BCAST_SCATTER_MIN_RANKS: u32 = 8;

/// Broadcasts below [`BCAST_LINEAR_MAX_BYTES`] on at most
/// [`BCAST_LINEAR_MAX_RANKS`] processes go from the root to every other
/// process directly (one round) instead of down a binomial tree. Up to 3
/// processes the two are the same transfers; on 4, the tree's second hop
/// cost more than the root's third send: 4 processes of 2 programs on this
/// 2-core machine, bound to cores, 8 B over shared memory 2.45-2.53 us with
/// the tree against 1.76-1.95 straight (Open MPI 1.87-2.17 in the same
/// runs), over TCP 12.3-12.8 against 10.4-10.7; 64 KiB over shared memory
/// 8.8-9.4 against 7.1-7.4; 512 KiB as above. From 1 MiB the tree, whose
/// root sends the buffer twice instead of three times, is kept for hosts
/// with a core per process (here at 4 MiB they were level over shared
/// memory, 1.31-1.43 ms with the tree against 1.41).
pub const BCAST_LINEAR_MAX_RANKS: u32 = 4;
pub const BCAST_LINEAR_MAX_BYTES: usize = 1024 * 1024;

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

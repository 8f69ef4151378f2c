//! Where the algorithms switch, in bytes. Chosen by measurement on the
//! development machine (docs/PERFORMANCE.md, "Collectives") and close to
//! MPICH's defaults where the measurement was flat.

/// Broadcasts of at least this many bytes on at least
/// [`BCAST_SCATTER_MIN_RANKS`] processes scatter the buffer and gather it
/// around a ring (van de Geijn); smaller ones use a binomial tree.
pub const BCAST_SCATTER_MIN_BYTES: usize = 512 * 1024;
pub const BCAST_SCATTER_MIN_RANKS: u32 = 4;

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

//! Where the algorithms switch, in bytes. Chosen by measurement on the
//! development machine (docs/journal/2026-11-24-collectives.md) and close to
//! MPICH's defaults where the measurement was flat.

/// Broadcasts of at least this many bytes on at least
/// [`BCAST_SCATTER_MIN_RANKS`] processes scatter the buffer and gather it
/// around a ring (van de Geijn); smaller ones go straight from the root or
/// down a binomial tree. At least 8 processes, as MPICH
/// (`MPIR_CVAR_BCAST_MIN_PROCS`): on 4 processes here the scatter-ring lost
/// to both others at every size (docs/journal/2026-11-24-collectives.md).
pub const BCAST_SCATTER_MIN_BYTES: usize = 512 * 1024;
pub const BCAST_SCATTER_MIN_RANKS: u32 = 8;

/// Broadcasts below [`BCAST_LINEAR_MAX_BYTES`] on at most
/// [`BCAST_LINEAR_MAX_RANKS`] processes go from the root to every other
/// process directly (one round) instead of down a binomial tree. Up to 3
/// processes the two are the same transfers; on 4, the tree's second hop
/// cost more than the root's third send (same journal entry). From 1 MiB
/// the tree, whose root sends the buffer twice instead of three times, is
/// kept for hosts with a core per process (at 4 MiB the two were level
/// here).
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

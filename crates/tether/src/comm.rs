//! Communicators: a group of universe processes with ranks `0..n-1` and a
//! context that keeps its traffic apart from every other communicator's.
//!
//! Contexts: a communicator uses its context for point-to-point traffic and
//! the next one for its collectives. The universe has 0 and 1; a new
//! communicator gets the largest "next free context" of its members (agreed
//! by an allreduce at creation), and each member's next free context moves
//! past it. So no process ever belongs to two communicators with the same
//! context, and traffic cannot cross between them, even when members of one
//! communicator are also members of another. Contexts are not reused.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use crate::error::{err, ErrorClass, Result};

/// Handle of the predefined universe communicator.
pub const COMM_UNIVERSE: i32 = 1;
/// Handle that names no communicator (what non-members get from a creation).
pub const COMM_NULL: i32 = 0;
/// Context of the agreement traffic of communicator creation (and, + 1,
/// its collective); never given to a communicator.
pub const CREATION_CONTEXT: u32 = u32::MAX - 1;
/// Context of active messages (`runtime/active.rs`); below it are the
/// field, clock and creation contexts, above the last communicator's
/// collective context.
pub const AM_CONTEXT: u32 = u32::MAX - 5;
/// Contexts the universe communicator uses; new ones start after them.
const FIRST_FREE_CONTEXT: u32 = 2;

#[derive(Debug, Clone)]
pub struct Comm {
    /// Matching context on the wire.
    pub context: u32,
    /// Universe rank of each member, by communicator rank.
    pub members: Arc<[u32]>,
    /// This process's rank in the communicator.
    pub my_rank: u32,
    by_universe: HashMap<u32, u32>,
    /// Whether rank i is universe rank i for every member (the universe,
    /// and a communicator of its first ranks): `rank_of` needs no lookup.
    identity: bool,
    /// Collectives started on this communicator: the tag of the next one.
    collectives: u64,
    /// The schedules of its last collectives.
    pub schedules: crate::coll::cache::ScheduleCache,
}

impl Comm {
    pub fn new(context: u32, members: Vec<u32>, me: u32) -> Option<Comm> {
        let by_universe: HashMap<u32, u32> = members
            .iter()
            .enumerate()
            .map(|(i, u)| (*u, i as u32))
            .collect();
        let my_rank = *by_universe.get(&me)?;
        let identity = members.iter().enumerate().all(|(i, u)| *u as usize == i);
        Some(Comm {
            context,
            members: members.into(),
            my_rank,
            by_universe,
            identity,
            collectives: 0,
            schedules: Default::default(),
        })
    }

    /// The context of this communicator's collectives.
    pub fn collective_context(&self) -> u32 {
        self.context + 1
    }

    /// The tag of the next collective. Members start collectives in the
    /// same order (MPI's rule), so they agree on it; concurrent
    /// non-blocking collectives on one communicator differ by it.
    pub fn next_collective_tag(&mut self) -> i32 {
        let tag = (self.collectives % (i32::MAX as u64 + 1)) as i32;
        self.collectives += 1;
        tag
    }

    pub fn size(&self) -> u32 {
        self.members.len() as u32
    }

    /// Universe rank of communicator rank `rank`.
    #[inline]
    pub fn universe_rank(&self, rank: i32) -> Result<u32> {
        usize::try_from(rank)
            .ok()
            .and_then(|r| self.members.get(r).copied())
            .ok_or_else(|| self.outside(rank))
    }

    #[cold]
    fn outside(&self, rank: i32) -> crate::error::Error {
        err(
            ErrorClass::Rank,
            format!(
                "rank {rank} is outside a communicator of {} processes",
                self.size()
            ),
        )
    }

    /// Communicator rank of a universe rank, if a member.
    pub fn rank_of(&self, universe_rank: u32) -> Option<u32> {
        if self.identity {
            return (universe_rank < self.size()).then_some(universe_rank);
        }
        self.by_universe.get(&universe_rank).copied()
    }
}

/// The communicators of this process, by handle.
#[derive(Debug, Default)]
pub struct CommTable {
    /// `COMM_UNIVERSE`, apart: nearly every message names it, and it needs
    /// no lookup.
    universe: Option<Comm>,
    /// Every other communicator.
    comms: HashMap<i32, Comm>,
    next_handle: i32,
    next_context: u32,
}

impl CommTable {
    pub fn with_universe(size: u32, me: u32) -> CommTable {
        CommTable {
            universe: Some(Comm::new(0, (0..size).collect(), me).expect("member of the universe")),
            comms: HashMap::default(),
            next_handle: COMM_UNIVERSE + 1,
            next_context: FIRST_FREE_CONTEXT,
        }
    }

    /// The lowest context this process can give a new communicator.
    pub fn next_free_context(&self) -> u32 {
        self.next_context
    }

    /// Adds a communicator whose context the members agreed on; returns
    /// its handle. Handles are not reused, so a freed one stays invalid.
    pub fn insert(&mut self, comm: Comm) -> Result<i32> {
        if comm.context < self.next_context || comm.context >= AM_CONTEXT - 1 {
            return Err(err(
                ErrorClass::Internal,
                format!(
                    "context {} is not free here (next free: {})",
                    comm.context, self.next_context
                ),
            ));
        }
        self.next_context = comm.context + 2;
        let handle = self.next_handle;
        self.next_handle = self
            .next_handle
            .checked_add(1)
            .ok_or_else(|| err(ErrorClass::Comm, "every communicator handle has been used"))?;
        self.comms.insert(handle, comm);
        Ok(handle)
    }

    /// Frees a communicator; its pending operations still complete.
    pub fn remove(&mut self, handle: i32) -> Result<Comm> {
        if handle == COMM_UNIVERSE {
            return Err(err(
                ErrorClass::Comm,
                "TETHER_COMM_UNIVERSE cannot be freed",
            ));
        }
        self.get(handle)?;
        Ok(self.comms.remove(&handle).expect("checked"))
    }

    pub fn get_mut(&mut self, handle: i32) -> Result<&mut Comm> {
        let comm = match handle {
            COMM_UNIVERSE => self.universe.as_mut(),
            _ => self.comms.get_mut(&handle),
        };
        comm.ok_or_else(|| unknown(handle))
    }

    #[inline]
    /// The communicator with wire context `context`, if this process has it.
    pub fn by_context(&self, context: u32) -> Option<&Comm> {
        self.universe
            .iter()
            .chain(self.comms.values())
            .find(|c| c.context == context)
    }

    pub fn get(&self, handle: i32) -> Result<&Comm> {
        let comm = match handle {
            COMM_UNIVERSE => self.universe.as_ref(),
            _ => self.comms.get(&handle),
        };
        comm.ok_or_else(|| unknown(handle))
    }
}

#[cold]
fn unknown(handle: i32) -> crate::error::Error {
    err(
        ErrorClass::Comm,
        format!("{handle} is not a communicator handle (freed, or never created)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_translate_both_ways() {
        let c = Comm::new(3, vec![5, 2, 9], 9).unwrap();
        assert_eq!(c.my_rank, 2);
        assert_eq!(c.universe_rank(1).unwrap(), 2);
        assert_eq!(c.rank_of(5), Some(0));
        assert_eq!(c.rank_of(0), None);
        let first = Comm::new(0, vec![0, 1, 2], 1).unwrap();
        assert_eq!((first.rank_of(2), first.rank_of(3)), (Some(2), None));
        assert_eq!(c.universe_rank(3).unwrap_err().class, ErrorClass::Rank);
        assert_eq!(c.universe_rank(-1).unwrap_err().class, ErrorClass::Rank);
        assert!(Comm::new(0, vec![1], 2).is_none());
        assert_eq!(
            CommTable::default().get(7).unwrap_err().class,
            ErrorClass::Comm
        );
    }

    #[test]
    fn contexts_move_past_every_communicator_and_handles_are_not_reused() {
        let mut table = CommTable::with_universe(4, 1);
        assert_eq!(table.next_free_context(), 2);
        let a = table.insert(Comm::new(6, vec![1, 3], 1).unwrap()).unwrap();
        assert_eq!(table.next_free_context(), 8);
        let stale = Comm::new(4, vec![1], 1).unwrap();
        assert_eq!(table.insert(stale).unwrap_err().class, ErrorClass::Internal);
        assert_eq!(table.get(a).unwrap().collective_context(), 7);
        table.remove(a).unwrap();
        assert_eq!(table.get(a).unwrap_err().class, ErrorClass::Comm);
        let b = table.insert(Comm::new(8, vec![1], 1).unwrap()).unwrap();
        assert_ne!(a, b);
        assert_eq!(
            table.remove(COMM_UNIVERSE).unwrap_err().class,
            ErrorClass::Comm
        );
        let c = table.get_mut(b).unwrap();
        assert_eq!((c.next_collective_tag(), c.next_collective_tag()), (0, 1));
    }
}

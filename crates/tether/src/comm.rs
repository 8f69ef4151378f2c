//! Communicators: a group of universe processes with ranks `0..n-1` and a
//! context that keeps its traffic apart from every other communicator's.

use std::collections::HashMap;

use crate::error::{err, ErrorClass, Result};

/// Handle of the predefined universe communicator.
pub const COMM_UNIVERSE: i32 = 1;

#[derive(Debug, Clone)]
pub struct Comm {
    /// Matching context on the wire.
    pub context: u32,
    /// Universe rank of each member, by communicator rank.
    pub members: Vec<u32>,
    /// This process's rank in the communicator.
    pub my_rank: u32,
    by_universe: HashMap<u32, u32>,
}

impl Comm {
    pub fn new(context: u32, members: Vec<u32>, me: u32) -> Option<Comm> {
        let by_universe: HashMap<u32, u32> = members
            .iter()
            .enumerate()
            .map(|(i, u)| (*u, i as u32))
            .collect();
        let my_rank = *by_universe.get(&me)?;
        Some(Comm {
            context,
            members,
            my_rank,
            by_universe,
        })
    }

    pub fn size(&self) -> u32 {
        self.members.len() as u32
    }

    /// Universe rank of communicator rank `rank`.
    pub fn universe_rank(&self, rank: i32) -> Result<u32> {
        usize::try_from(rank)
            .ok()
            .and_then(|r| self.members.get(r).copied())
            .ok_or_else(|| {
                err(
                    ErrorClass::Rank,
                    format!(
                        "rank {rank} is outside a communicator of {} processes",
                        self.size()
                    ),
                )
            })
    }

    /// Communicator rank of a universe rank, if a member.
    pub fn rank_of(&self, universe_rank: u32) -> Option<u32> {
        self.by_universe.get(&universe_rank).copied()
    }
}

/// The communicators of this process, by handle.
#[derive(Debug, Default)]
pub struct CommTable {
    comms: HashMap<i32, Comm>,
}

impl CommTable {
    pub fn with_universe(size: u32, me: u32) -> CommTable {
        let mut comms = HashMap::new();
        comms.insert(
            COMM_UNIVERSE,
            Comm::new(0, (0..size).collect(), me).expect("member of the universe"),
        );
        CommTable { comms }
    }

    pub fn get(&self, handle: i32) -> Result<&Comm> {
        self.comms.get(&handle).ok_or_else(|| {
            err(
                ErrorClass::Comm,
                format!("{handle} is not a communicator handle (freed, or never created)"),
            )
        })
    }
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
        assert_eq!(c.universe_rank(3).unwrap_err().class, ErrorClass::Rank);
        assert_eq!(c.universe_rank(-1).unwrap_err().class, ErrorClass::Rank);
        assert!(Comm::new(0, vec![1], 2).is_none());
        assert_eq!(
            CommTable::default().get(7).unwrap_err().class,
            ErrorClass::Comm
        );
    }
}

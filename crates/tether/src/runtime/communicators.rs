//! Creating and freeing communicators (DESIGN 3.2).
//!
//! Creation is collective over the members only: they run one allreduce
//! (on a context reserved for creation) that agrees on the new context and
//! checks that every member passed the same list. Processes outside the
//! list get [`COMM_NULL`] at once, without communicating.

use std::collections::HashSet;

use super::collective_activity::Collective;
use super::Runtime;
use crate::coll::{ring, Buf, Buffers, Channel, Failure, Running, Shape, Span};
use crate::comm::{Comm, AM_CONTEXT, COMM_NULL, CREATION_CONTEXT};
use crate::datatype;
use crate::error::{completion_words, err, Error, ErrorClass, Result};
use crate::op::Op;
use tether_proto::CompletionError;

/// FNV-1a over the member list: equal lists give equal values.
fn fingerprint(members: &[u32]) -> u64 {
    members.iter().fold(0xcbf2_9ce4_8422_2325, |h, m| {
        m.to_le_bytes()
            .iter()
            .fold(h, |h, b| (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3))
    })
}

impl Runtime {
    /// A communicator of every joined process of `programs`, ranked
    /// program by program in the order given (and by program rank inside
    /// each). Collective over those processes.
    pub fn comm_create(&mut self, programs: &[i32]) -> Result<i32> {
        let count = self.universe.programs.len();
        let mut members = Vec::new();
        let mut seen = HashSet::new();
        for id in programs {
            let program = usize::try_from(*id)
                .ok()
                .and_then(|i| self.universe.programs.get(i))
                .ok_or_else(|| {
                    err(
                        ErrorClass::Arg,
                        format!("program id {id} is outside 0..{count}"),
                    )
                })?;
            if !seen.insert(*id) {
                return Err(err(
                    ErrorClass::Arg,
                    format!("program {} is listed twice", program.name),
                ));
            }
            members.extend(program.first..program.first + program.size);
        }
        self.create(members)
    }

    /// A communicator whose rank i is universe rank `ranks[i]`. Collective
    /// over those processes.
    pub fn comm_create_ranks(&mut self, ranks: &[i32]) -> Result<i32> {
        let size = self.universe.size();
        let mut seen = HashSet::new();
        let members = ranks
            .iter()
            .map(|r| {
                let rank = u32::try_from(*r)
                    .ok()
                    .filter(|r| *r < size)
                    .ok_or_else(|| {
                        err(
                            ErrorClass::Rank,
                            format!("universe rank {r} is outside a universe of {size} processes"),
                        )
                    })?;
                if !seen.insert(rank) {
                    return Err(err(
                        ErrorClass::Rank,
                        format!("universe rank {rank} is listed twice"),
                    ));
                }
                Ok(rank)
            })
            .collect::<Result<Vec<u32>>>()?;
        self.create(members)
    }

    pub(super) fn create(&mut self, members: Vec<u32>) -> Result<i32> {
        let me = self.me;
        let Some(agreement) = Comm::new(CREATION_CONTEXT, members.clone(), me) else {
            return Ok(COMM_NULL);
        };
        let print = fingerprint(&members);
        let mut values: Box<[u64]> =
            Box::new([self.comms.next_free_context() as u64, print, !print]);
        let len = std::mem::size_of_val(&*values);
        let shape = Shape {
            rank: agreement.my_rank,
            size: agreement.size(),
        };
        let schedule = ring::allreduce(shape, len, 8, Span::whole(Buf::Recv, len));
        let channel = Channel {
            members: agreement.members.clone(),
            context: agreement.collective_context(),
            tag: 0,
        };
        let buffers = Buffers {
            send: std::ptr::null(),
            send_len: 0,
            recv: values.as_mut_ptr().cast(),
            recv_len: len,
        };
        let uint64 = datatype::lookup(10)?;
        let mut running = Running::new(
            schedule.into(),
            channel,
            buffers,
            Some((Op::Max, uint64)),
            &mut self.scratch,
        );
        if let Err(failure) = self.run_to_end(&mut running) {
            let transfers = running.orphans(&mut self.engine);
            if let Some(orphan) = Collective::orphaned(transfers, running, Some(values)) {
                self.activities.push(Box::new(orphan));
            }
            return Err(self.creation_error(&members, &failure));
        }
        if values[1] != !values[2] {
            return Err(err(
                ErrorClass::Comm,
                format!(
                    "the {} members of a new communicator passed different member lists",
                    members.len()
                ),
            ));
        }
        let context = u32::try_from(values[0])
            .ok()
            .filter(|c| *c < AM_CONTEXT - 1)
            .ok_or_else(|| err(ErrorClass::Comm, "no communicator context is left"))?;
        let comm = Comm::new(context, members, me).expect("a member");
        self.comms.insert(comm)
    }

    /// Why creating a communicator of `members` failed, naming the member
    /// and the cause (the agreement runs among the members alone).
    fn creation_error(&self, members: &[u32], failure: &Failure) -> Error {
        let creating = format!("creating a communicator of {} processes", members.len());
        let who = |rank: &u32| self.universe.describe(members[*rank as usize]);
        match failure {
            Failure::Transfer {
                rank,
                error: CompletionError::PeerLost,
            } => {
                let peer = members[*rank as usize];
                let why = self
                    .transport
                    .router()
                    .peers()
                    .lost(peer)
                    .map_or("the connection was lost".to_string(), |e| e.message.clone());
                err(ErrorClass::PeerLost, format!("{creating}: {}: {why}", who(rank)))
            }
            Failure::Transfer { rank, error } => err(
                ErrorClass::Comm,
                format!("{creating}: the agreement with {} failed: {}", who(rank), completion_words(*error)),
            ),
            Failure::ShortMessage { rank, got, expected } => err(
                ErrorClass::Comm,
                format!(
                    "{creating}: {} sent {got} bytes of agreement where {expected} were expected: the members called different functions",
                    who(rank)
                ),
            ),
        }
    }

    /// Frees a communicator; operations on it already started complete.
    pub fn comm_free(&mut self, handle: i32) -> Result<()> {
        self.comms.remove(handle).map(|_| ())
    }
}

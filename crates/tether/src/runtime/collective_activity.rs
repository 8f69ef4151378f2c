//! Collectives as activities ([`super::activities`]): a non-blocking
//! collective while its rounds run, and a failed collective (blocking or
//! not) while transfers it posted are still in flight.

use tether_proto::{Completion, CompletionError, ReqId};

use super::activities::{Activity, Progress};
use super::ANY_TAG;
use crate::coll::{Failure, Running};
use crate::error::{err, Error, ErrorClass};
use crate::peers::Peers;
use crate::universe::Universe;

/// One collective and its request.
pub(super) struct Collective {
    /// Its generalized request; `None` for a failed blocking collective.
    request: Option<ReqId>,
    phase: Phase,
}

enum Phase {
    /// Its rounds move as transfers complete; its request is pending.
    /// `what` and `comm` name it in the error should it fail.
    Running {
        running: Running,
        what: &'static str,
        comm: i32,
    },
    /// It failed and its request completed with the error's class. Kept
    /// while transfers it posted are in flight, with the running
    /// collective (its scratch buffers) and a buffer of the runtime's own
    /// when it ran on one, which those transfers use; and while the
    /// detailed error waits for the request to be taken.
    Failed {
        error: Option<Error>,
        transfers: Vec<ReqId>,
        _running: Running,
        _buffer: Option<Box<[u64]>>,
    },
    /// It succeeded: nothing is left of it.
    Finished,
}

impl Collective {
    /// A non-blocking collective about to run, completing `request`.
    pub(super) fn running(
        request: ReqId,
        what: &'static str,
        comm: i32,
        running: Running,
    ) -> Collective {
        Collective {
            request: Some(request),
            phase: Phase::Running {
                running,
                what,
                comm,
            },
        }
    }

    /// A blocking collective that failed (its caller got the error) with
    /// `transfers` still posted: kept, with `running` and `buffer`, until
    /// they finish. `None` when no transfer is left, so nothing is kept.
    pub(super) fn orphaned(
        transfers: Vec<ReqId>,
        running: Running,
        buffer: Option<Box<[u64]>>,
    ) -> Option<Collective> {
        if transfers.is_empty() {
            return None;
        }
        Some(Collective {
            request: None,
            phase: Phase::Failed {
                error: None,
                transfers,
                _running: running,
                _buffer: buffer,
            },
        })
    }

    /// Ends the running phase with `outcome`: recycles the scratch buffers
    /// of a success; keeps a failure's posted transfers and error.
    fn end(&mut self, outcome: Result<(), Failure>, progress: &mut Progress<'_>) {
        let Phase::Running {
            running,
            what,
            comm,
        } = std::mem::replace(&mut self.phase, Phase::Finished)
        else {
            unreachable!("only a running collective ends");
        };
        let mut completion = Completion {
            source: u32::MAX,
            tag: ANY_TAG,
            bytes: 0,
            error: None,
        };
        match outcome {
            Ok(()) => running.recycle(progress.scratch),
            Err(failure) => {
                let (class, error) = describe_failure(
                    progress.universe,
                    progress.peers,
                    what,
                    comm,
                    &running,
                    &failure,
                );
                completion.error = Some(class);
                let mut running = running;
                let transfers = running.orphans(progress.engine);
                self.phase = Phase::Failed {
                    error: Some(error),
                    transfers,
                    _running: running,
                    _buffer: None,
                };
            }
        }
        if let Some(request) = self.request {
            progress.engine.complete_generalized(request, completion);
        }
    }
}

impl Activity for Collective {
    fn advance(&mut self, progress: &mut Progress<'_>) {
        if let Phase::Running { running, .. } = &mut self.phase {
            match running.advance_via(progress.engine, progress.shortcut) {
                Some(outcome) => self.end(outcome, progress),
                None => return,
            }
        }
        if let Phase::Failed { transfers, .. } = &mut self.phase {
            let engine = &mut *progress.engine;
            transfers.retain(|r| engine.take_completion(*r).is_none());
        }
    }

    fn needs_progress(&self) -> bool {
        match &self.phase {
            Phase::Running { .. } => true,
            Phase::Failed { transfers, .. } => !transfers.is_empty(),
            Phase::Finished => false,
        }
    }

    fn take_error(&mut self, req: ReqId) -> Option<Error> {
        if self.request != Some(req) {
            return None;
        }
        match &mut self.phase {
            Phase::Failed { error, .. } => error.take(),
            _ => None,
        }
    }

    fn is_done(&self) -> bool {
        match &self.phase {
            Phase::Running { .. } => false,
            Phase::Failed {
                error, transfers, ..
            } => error.is_none() && transfers.is_empty(),
            Phase::Finished => true,
        }
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// The class a failed collective's request completes with, and the error
/// its status carries: which member failed it and why.
pub(super) fn describe_failure(
    universe: &Universe,
    peers: &Peers,
    what: &str,
    comm: i32,
    running: &Running,
    failure: &Failure,
) -> (CompletionError, Error) {
    let members = &running.channel().members;
    let who = |rank: u32| {
        format!(
            "rank {rank} ({})",
            universe.describe(members[rank as usize])
        )
    };
    let prefix = format!("{what} on communicator {comm}");
    match failure {
        Failure::Transfer {
            rank,
            error: CompletionError::PeerLost,
        } => {
            let peer = members[*rank as usize];
            let why = peers
                .lost(peer)
                .map_or("the connection was lost".to_string(), |e| e.message.clone());
            (
                CompletionError::PeerLost,
                err(ErrorClass::PeerLost, format!("{prefix}: {}: {why}", who(*rank))),
            )
        }
        Failure::Transfer { rank, error } => (
            CompletionError::Truncated,
            err(
                ErrorClass::Truncate,
                format!(
                    "{prefix}: {} sent more bytes than this process expects ({}): the processes passed different counts",
                    who(*rank),
                    crate::error::completion_words(*error)
                ),
            ),
        ),
        Failure::ShortMessage {
            rank,
            got,
            expected,
        } => (
            CompletionError::Truncated,
            err(
                ErrorClass::Count,
                format!(
                    "{prefix}: {} sent {got} bytes where {expected} were expected: the processes passed different counts",
                    who(*rank)
                ),
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tether_proto::{Engine, EngineConfig, Region};

    use super::*;
    use crate::coll::{tree, Buffers, Channel, NoShortcut, Schedule, ScratchPool, Shape};
    use crate::identity::Identity;
    use crate::runtime::activities::Activities;

    /// Universe rank 0 of two, with what progress needs beside the list.
    struct Rank0 {
        engine: Engine,
        scratch: ScratchPool,
        universe: Universe,
        peers: Peers,
    }

    impl Rank0 {
        fn new() -> Rank0 {
            let me = Identity {
                program: "sim".into(),
                rank: 0,
                size: 2,
            };
            Rank0 {
                engine: Engine::new(EngineConfig {
                    me: 0,
                    eager_limit: 4096,
                }),
                scratch: ScratchPool::default(),
                universe: Universe::new(&[("sim".into(), 2)], &me).unwrap(),
                peers: Peers::default(),
            }
        }

        fn running(&mut self, schedule: Schedule, recv: &mut [u8]) -> Running {
            Running::new(
                schedule.into(),
                Channel {
                    members: Arc::from([0, 1]),
                    context: 5,
                    tag: 0,
                },
                Buffers {
                    send: std::ptr::null(),
                    send_len: 0,
                    recv: recv.as_mut_ptr(),
                    recv_len: recv.len(),
                },
                None,
                &mut self.scratch,
            )
        }

        fn advance(&mut self, activities: &mut Activities) {
            activities.advance(&mut Progress {
                engine: &mut self.engine,
                shortcut: &mut NoShortcut,
                scratch: &mut self.scratch,
                universe: &self.universe,
                peers: &self.peers,
            });
        }
    }

    #[test]
    fn an_orphaned_collective_keeps_the_list_busy_until_its_transfers_finish() {
        let mut rank = Rank0::new();
        let data = [1u8; 8];
        let send = rank
            .engine
            .isend(1, 5, 0, Region::from_const(data.as_ptr(), data.len()));
        let running = rank.running(Schedule::new(), &mut []);
        let orphan = Collective::orphaned(vec![send], running, None).expect("a transfer is left");
        let mut activities = Activities::default();
        activities.push(Box::new(orphan));
        assert!(!activities.is_idle(), "its send still uses its buffers");
        rank.advance(&mut activities);
        assert!(!activities.is_idle(), "the send is not handed over yet");

        let frame = rank.engine.poll_transmit().expect("the eager frame");
        rank.engine
            .transmit_done(frame.completes.expect("completes the send"));
        rank.advance(&mut activities);
        assert!(activities.is_idle());
        assert_eq!(activities.len(), 0, "dropped with its transfers done");
        assert!(!rank.engine.is_live(send), "its request was freed");
    }

    #[test]
    fn a_failed_collective_reports_its_error_once_when_its_request_is_taken() {
        let mut rank = Rank0::new();
        let mut recv = [0u8; 8];
        let me = Shape { rank: 0, size: 2 };
        let running = rank.running(tree::bcast(me, 1, recv.len()), &mut recv);
        let request = rank.engine.start_generalized();
        let mut activities = Activities::default();
        activities.push(Box::new(Collective::running(request, "bcast", 7, running)));
        rank.advance(&mut activities);
        assert!(!activities.is_idle(), "waits for the root's message");

        rank.engine.peer_lost(1);
        rank.advance(&mut activities);
        let completion = rank.engine.completion(request).expect("failed");
        assert_eq!(completion.error, Some(CompletionError::PeerLost));
        assert!(activities.is_idle(), "nothing of it is in flight");
        assert_eq!(activities.len(), 1, "its error waits for the request");

        let other = rank.engine.start_generalized();
        assert!(activities.take_error(other).is_none());
        let error = activities.take_error(request).expect("its error");
        assert_eq!(error.class, ErrorClass::PeerLost);
        assert!(
            error
                .message
                .starts_with("bcast on communicator 7: rank 1 (sim:1)"),
            "{}",
            error.message
        );
        assert_eq!(activities.len(), 0, "reported: nothing is left of it");
        assert!(activities.take_error(request).is_none(), "reported once");
    }
}

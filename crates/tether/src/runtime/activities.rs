//! The runtime's one list of activities: work that lives across calls and
//! moves only when the runtime makes progress.
//!
//! Collectives are the first kind ([`super::collective_activity`]): a
//! non-blocking collective while it runs, and a failed one (blocking or
//! not) while transfers it posted are still in flight. One-sided epochs
//! and field transfers are meant to be the next kinds: each implements
//! [`Activity`] in a file of its own and is pushed here, and nothing else
//! in the runtime changes for it: the progress loop advances the list,
//! `take` reports an activity's error, and the blocking short path
//! (`direct.rs`) and the deferred receives of blocking collectives stand
//! aside while [`Activities::is_idle`] is false.

use tether_proto::{Engine, ReqId};

use crate::coll::{ScratchPool, Shortcut};
use crate::error::Error;
use crate::peers::Peers;
use crate::universe::Universe;

/// What an activity may use while it advances: the runtime's parts,
/// borrowed for one pass over the list.
pub(super) struct Progress<'a> {
    pub engine: &'a mut Engine,
    /// Moves a transfer without an engine request when it can (the
    /// shared-memory short path); the engine takes the rest.
    pub shortcut: &'a mut dyn Shortcut,
    /// Scratch buffers of finished collectives, for the next ones.
    pub scratch: &'a mut ScratchPool,
    /// Names peers in error messages.
    pub universe: &'a Universe,
    /// The peer records: why a peer can no longer be reached, for error
    /// messages.
    pub peers: &'a Peers,
}

/// Work that the runtime's progress moves (see the module documentation).
///
/// Lifecycle: pushed while it [needs progress](Activity::needs_progress);
/// [advanced](Activity::advance) on every round of progress until it no
/// longer does; dropped once it is [done](Activity::is_done). An activity
/// with a request completes that request (a generalized request of the
/// engine) itself; if it failed, the detailed error waits in the
/// activity until the request is taken ([`Activities::take_error`]).
///
/// Ownership: an activity owns the buffers its posted transfers use (the
/// user's buffers are the caller's promise, as for any request), so it
/// must not be dropped while [`Activity::needs_progress`] holds.
pub(super) trait Activity: Send {
    /// Moves as far as it can now, without blocking; completes its
    /// request when it ends.
    fn advance(&mut self, progress: &mut Progress<'_>);

    /// Whether it still needs rounds of progress: it is running, or it
    /// keeps buffers for transfers still posted.
    fn needs_progress(&self) -> bool;

    /// The detailed error of its failed request `req`, once; `None` if
    /// `req` is not one of its requests, did not fail, or its error was
    /// given already.
    fn take_error(&mut self, req: ReqId) -> Option<Error>;

    /// Whether nothing is left to do or report: it may be dropped.
    fn is_done(&self) -> bool;

    /// Itself, for [`Activities::find`]: an activity that lives as long as
    /// a user's handle (a field) is found again by its kind.
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
}

/// The activities of one runtime, in the order they started.
#[derive(Default)]
pub(super) struct Activities {
    list: Vec<Box<dyn Activity>>,
}

impl Activities {
    /// Whether no activity needs progress: the runtime may then move a
    /// blocking call's message without a progress round (the short path),
    /// since no one else waits for one. A failed activity whose error
    /// waits for its request to be taken needs none.
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.list.iter().all(|a| !a.needs_progress())
    }

    /// Adds `activity`, which the next round of progress advances (its
    /// caller advances it at once when it must).
    pub fn push(&mut self, activity: Box<dyn Activity>) {
        self.list.push(activity);
    }

    /// Advances every activity that needs it, in the order they started,
    /// and drops those that are done.
    pub fn advance(&mut self, progress: &mut Progress<'_>) {
        for activity in &mut self.list {
            if activity.needs_progress() {
                activity.advance(progress);
            }
        }
        self.list.retain(|a| !a.is_done());
    }

    /// The detailed error of the activity that failed request `req`,
    /// once; drops the activity if nothing else is left of it. Called when
    /// a request is taken; costs a comparison when no activity is listed.
    #[inline]
    pub fn take_error(&mut self, req: ReqId) -> Option<Error> {
        if self.list.is_empty() {
            return None;
        }
        let (index, error) = self
            .list
            .iter_mut()
            .enumerate()
            .find_map(|(i, a)| a.take_error(req).map(|e| (i, e)))?;
        if self.list[index].is_done() {
            self.list.remove(index);
        }
        Some(error)
    }

    /// The first activity of kind `T` that `select` accepts.
    pub fn find<T: Activity + 'static>(
        &mut self,
        mut select: impl FnMut(&T) -> bool,
    ) -> Option<&mut T> {
        self.list
            .iter_mut()
            .filter_map(|a| a.as_any_mut().downcast_mut::<T>())
            .find(|a| select(a))
    }

    /// How many activities are listed (running, failed with transfers in
    /// flight, or holding an error for their request).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.list.len()
    }
}

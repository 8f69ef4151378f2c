//! The last schedules a communicator ran, by what they were built from.
//!
//! A program calls the same collective in a loop (a barrier per step, an
//! allreduce of the same vector), and building its schedule again each
//! time was a visible share of a small collective's instructions
//! (docs/journal/2026-11-24-collectives.md).
//! A schedule is a function of its [`Key`] and of the communicator's
//! shape, which never changes, so each communicator keeps its last few and
//! runs them again.

use std::sync::Arc;

use super::schedule::{Schedule, Span};

/// What a cached schedule was built from, besides the communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Barrier,
    Bcast {
        root: u32,
        len: usize,
    },
    Allreduce {
        len: usize,
        elem: usize,
        input: Span,
    },
}

/// Schedules kept per communicator; the oldest is replaced when full.
const CAPACITY: usize = 8;

#[derive(Debug, Default, Clone)]
pub struct ScheduleCache {
    entries: Vec<(Key, Arc<Schedule>)>,
    /// The entry replaced next once the cache is full.
    next: usize,
}

impl ScheduleCache {
    /// The schedule for `key`, built by `build` if it is not kept.
    pub fn get_or_build(&mut self, key: Key, build: impl FnOnce() -> Schedule) -> Arc<Schedule> {
        if let Some((_, schedule)) = self.entries.iter().find(|(k, _)| *k == key) {
            return Arc::clone(schedule);
        }
        let schedule = Arc::new(build());
        if self.entries.len() < CAPACITY {
            self.entries.push((key, Arc::clone(&schedule)));
        } else {
            self.entries[self.next] = (key, Arc::clone(&schedule));
            self.next = (self.next + 1) % CAPACITY;
        }
        schedule
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_schedule_is_reused_and_the_oldest_replaced() {
        let mut cache = ScheduleCache::default();
        let builds = std::cell::Cell::new(0);
        let mut get = |root| {
            cache.get_or_build(Key::Bcast { root, len: 8 }, || {
                builds.set(builds.get() + 1);
                Schedule::new()
            })
        };
        let first = get(0);
        assert!(Arc::ptr_eq(&first, &get(0)));
        for root in 1..=CAPACITY as u32 {
            get(root);
        }
        // Root 0 was the oldest and was replaced by the ninth key.
        assert!(!Arc::ptr_eq(&first, &get(0)));
        assert_eq!(builds.get(), CAPACITY + 2);
    }
}

//! MPI message matching: the posted-receive queue and the unexpected-message
//! queue.
//!
//! Both queues keep arrival order, and both are searched front to back, so
//! a message matches the oldest receive that accepts it and a receive takes
//! the oldest message it accepts. With one ordered link per peer this gives
//! MPI's non-overtaking rule per (source, tag, context).

use std::collections::VecDeque;

use crate::request::ReqId;

/// Who sent a message, in which context, with which tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    pub source: u32,
    pub context: u32,
    pub tag: i32,
}

/// What a receive accepts: `None` is a wildcard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selector {
    pub source: Option<u32>,
    pub context: u32,
    pub tag: Option<i32>,
}

impl Selector {
    pub fn matches(&self, envelope: &Envelope) -> bool {
        self.context == envelope.context
            && self.source.is_none_or(|s| s == envelope.source)
            && self.tag.is_none_or(|t| t == envelope.tag)
    }

    /// Whether some message matches both selectors.
    pub fn overlaps(&self, other: &Selector) -> bool {
        self.context == other.context
            && both_accept(self.source, other.source)
            && both_accept(self.tag, other.tag)
    }
}

/// Whether one value passes both fields of a selector (`None`: any).
fn both_accept<T: PartialEq>(a: Option<T>, b: Option<T>) -> bool {
    a.is_none() || b.is_none() || a == b
}

/// Receives that were posted before their message arrived.
#[derive(Debug, Default)]
pub struct PostedQueue {
    items: VecDeque<(Selector, ReqId)>,
}

impl PostedQueue {
    pub fn push(&mut self, selector: Selector, req: ReqId) {
        self.items.push_back((selector, req));
    }

    /// Removes and returns the oldest receive that accepts `envelope`.
    pub fn take_match(&mut self, envelope: &Envelope) -> Option<ReqId> {
        let at = self.items.iter().position(|(s, _)| s.matches(envelope))?;
        take_at(&mut self.items, at).map(|(_, req)| req)
    }

    /// The oldest receive that accepts `envelope`, left in place.
    pub fn peek_match(&self, envelope: &Envelope) -> Option<ReqId> {
        if self.items.is_empty() {
            return None;
        }
        self.items
            .iter()
            .find(|(s, _)| s.matches(envelope))
            .map(|(_, req)| *req)
    }

    /// Whether a waiting receive matches some message that `selector`
    /// matches.
    #[inline]
    pub fn overlaps(&self, selector: &Selector) -> bool {
        self.items.iter().any(|(s, _)| s.overlaps(selector))
    }

    /// Removes `req` if it is still waiting; tells whether it was.
    pub fn remove(&mut self, req: ReqId) -> bool {
        match self.items.iter().position(|(_, r)| *r == req) {
            Some(at) => {
                self.items.remove(at);
                true
            }
            None => false,
        }
    }

    /// Removes every receive that names `source` explicitly.
    pub fn take_from_source(&mut self, source: u32) -> Vec<ReqId> {
        let mut taken = Vec::new();
        self.items.retain(|(s, r)| {
            let hit = s.source == Some(source);
            if hit {
                taken.push(*r);
            }
            !hit
        });
        taken
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// The sources that posted receives name (wildcards left out).
    pub fn sources(&self) -> impl Iterator<Item = u32> + '_ {
        self.items.iter().filter_map(|(s, _)| s.source)
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Messages that arrived before a receive accepted them, with whatever the
/// engine keeps for each (`T`: the data, or a pending rendezvous).
#[derive(Debug)]
pub struct UnexpectedQueue<T> {
    items: VecDeque<(Envelope, T)>,
    /// The most it held at once.
    deepest: usize,
    /// The context whose arrivals are counted ([`UnexpectedQueue::watch`]).
    watched: Option<u32>,
    watched_arrivals: u64,
}

impl<T> Default for UnexpectedQueue<T> {
    fn default() -> Self {
        UnexpectedQueue {
            items: VecDeque::new(),
            deepest: 0,
            watched: None,
            watched_arrivals: 0,
        }
    }
}

impl<T> UnexpectedQueue<T> {
    pub fn push(&mut self, envelope: Envelope, item: T) {
        self.watched_arrivals += u64::from(self.watched == Some(envelope.context));
        self.items.push_back((envelope, item));
        self.deepest = self.deepest.max(self.items.len());
    }

    /// Counts the messages of `context` that arrive from now on, so that
    /// whoever takes them by probing (active messages) probes only when
    /// one came, instead of searching the queue on every call.
    pub fn watch(&mut self, context: u32) {
        self.watched = Some(context);
    }

    /// Messages of the watched context that arrived so far.
    pub fn watched_arrivals(&self) -> u64 {
        self.watched_arrivals
    }

    /// The most messages it held at once.
    pub fn deepest(&self) -> usize {
        self.deepest
    }

    /// Removes and returns the oldest message `selector` accepts.
    pub fn take_match(&mut self, selector: &Selector) -> Option<(Envelope, T)> {
        let at = self.items.iter().position(|(e, _)| selector.matches(e))?;
        take_at(&mut self.items, at)
    }

    /// The oldest message `selector` accepts, left in place (probe).
    pub fn peek_match(&self, selector: &Selector) -> Option<(&Envelope, &T)> {
        if self.items.is_empty() {
            return None;
        }
        self.items
            .iter()
            .find(|(e, _)| selector.matches(e))
            .map(|(e, t)| (e, t))
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Removes the item at `at`; the oldest (the usual match) by the cheaper
/// `pop_front`.
fn take_at<T>(items: &mut VecDeque<T>, at: usize) -> Option<T> {
    if at == 0 {
        items.pop_front()
    } else {
        items.remove(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(source: u32, tag: i32) -> Envelope {
        Envelope {
            source,
            context: 0,
            tag,
        }
    }

    fn id(slot: u32) -> ReqId {
        ReqId {
            slot,
            generation: 0,
        }
    }

    #[test]
    fn selectors_overlap_when_one_message_matches_both() {
        let sel = |source, tag| Selector {
            source,
            context: 0,
            tag,
        };
        let exact = sel(Some(1), Some(5));
        assert!(exact.overlaps(&sel(Some(1), Some(5))));
        assert!(exact.overlaps(&sel(None, Some(5))));
        assert!(exact.overlaps(&sel(Some(1), None)));
        assert!(sel(None, None).overlaps(&exact));
        assert!(!exact.overlaps(&sel(Some(2), Some(5))));
        assert!(!exact.overlaps(&sel(Some(1), Some(6))));
        assert!(!exact.overlaps(&Selector {
            context: 1,
            ..exact
        }));
        let mut posted = PostedQueue::default();
        assert!(!posted.overlaps(&exact));
        posted.push(sel(Some(1), Some(6)), id(0));
        assert!(!posted.overlaps(&exact));
        assert!(posted.overlaps(&sel(Some(1), None)));
    }

    #[test]
    fn oldest_matching_receive_wins() {
        let mut posted = PostedQueue::default();
        let any = Selector {
            source: None,
            context: 0,
            tag: None,
        };
        let exact = Selector {
            source: Some(1),
            context: 0,
            tag: Some(5),
        };
        posted.push(exact, id(0));
        posted.push(any, id(1));
        assert_eq!(posted.take_match(&env(2, 5)), Some(id(1)));
        assert_eq!(posted.take_match(&env(1, 5)), Some(id(0)));
        assert_eq!(posted.take_match(&env(1, 5)), None);
    }

    #[test]
    fn contexts_never_cross() {
        let mut posted = PostedQueue::default();
        posted.push(
            Selector {
                source: None,
                context: 1,
                tag: None,
            },
            id(0),
        );
        assert_eq!(posted.take_match(&env(0, 0)), None);
    }

    #[test]
    fn oldest_matching_message_wins_and_probe_leaves_it() {
        let mut queue = UnexpectedQueue::default();
        queue.push(env(1, 7), "a");
        queue.push(env(1, 8), "b");
        queue.push(env(1, 7), "c");
        let sel = Selector {
            source: Some(1),
            context: 0,
            tag: Some(7),
        };
        assert_eq!(queue.peek_match(&sel).map(|(_, t)| *t), Some("a"));
        assert_eq!(queue.take_match(&sel).map(|(_, t)| t), Some("a"));
        assert_eq!(queue.take_match(&sel).map(|(_, t)| t), Some("c"));
        assert_eq!(queue.len(), 1);
    }

    #[test]
    fn lost_source_takes_only_explicit_receives() {
        let mut posted = PostedQueue::default();
        posted.push(
            Selector {
                source: Some(3),
                context: 0,
                tag: None,
            },
            id(0),
        );
        posted.push(
            Selector {
                source: None,
                context: 0,
                tag: None,
            },
            id(1),
        );
        assert_eq!(posted.take_from_source(3), vec![id(0)]);
        assert_eq!(posted.len(), 1);
    }
}

//! Which receive took which send: the k-th message from one process to
//! another with one (context, tag) is the k-th both counted (the
//! ordinals of `tether_proto::Engine::enable_ordinals`).

use std::collections::HashMap;

use super::load::Process;

/// A span: (index of its process, index of the span in it).
pub type At = (usize, usize);

/// Every send paired with its receive, both ways.
pub fn pairs(processes: &[Process]) -> HashMap<At, At> {
    let mut receives = HashMap::new();
    for (pi, p) in processes.iter().enumerate() {
        for (si, s) in p.spans.iter().enumerate().filter(|(_, s)| s.what == "recv") {
            if let (Some(peer), Some(context), Some(tag), Some(ordinal)) =
                (s.peer, s.context, s.tag, s.ordinal)
            {
                receives.insert((peer, p.universe_rank, context, tag, ordinal), (pi, si));
            }
        }
    }
    let mut pairs = HashMap::new();
    for (pi, p) in processes.iter().enumerate() {
        for (si, s) in p.spans.iter().enumerate().filter(|(_, s)| s.what == "send") {
            let (Some(peer), Some(context), Some(tag), Some(ordinal)) =
                (s.peer, s.context, s.tag, s.ordinal)
            else {
                continue;
            };
            if let Some(&recv) = receives.get(&(p.universe_rank, peer, context, tag, ordinal)) {
                pairs.insert((pi, si), recv);
                pairs.insert(recv, (pi, si));
            }
        }
    }
    pairs
}

//! A map from peers (universe ranks) to what a transport, or the peer
//! record (`crate::peers`), keeps for each, for the lookups on every
//! message: an index by rank finds an entry in a few instructions (a hash
//! map takes several times that, and a small message needs several
//! lookups), and the entries sit in a dense vector, so walking them costs
//! what the entries cost, not what the universe's size does. An entry
//! stays once made: what is kept for a peer outlives its links.

/// Entries by peer. Iteration order is unspecified.
#[derive(Debug)]
pub struct PeerTable<T> {
    entries: Vec<(u32, T)>,
    /// Position + 1 in `entries` of each peer's entry, by rank; 0: none.
    index: Vec<u32>,
}

impl<T> Default for PeerTable<T> {
    fn default() -> Self {
        PeerTable {
            entries: Vec::new(),
            index: Vec::new(),
        }
    }
}

impl<T> PeerTable<T> {
    #[inline(always)]
    fn position(&self, peer: u32) -> Option<usize> {
        match self.index.get(peer as usize) {
            Some(&at) if at > 0 => Some(at as usize - 1),
            _ => None,
        }
    }

    #[inline(always)]
    pub fn get(&self, peer: &u32) -> Option<&T> {
        self.position(*peer).map(|at| &self.entries[at].1)
    }

    #[inline(always)]
    pub fn get_mut(&mut self, peer: &u32) -> Option<&mut T> {
        self.position(*peer).map(|at| &mut self.entries[at].1)
    }

    /// Sets `peer`'s entry; returns the one it replaces.
    pub fn insert(&mut self, peer: u32, value: T) -> Option<T> {
        if let Some(at) = self.position(peer) {
            return Some(std::mem::replace(&mut self.entries[at].1, value));
        }
        let slot = peer as usize;
        if self.index.len() <= slot {
            self.index.resize(slot + 1, 0);
        }
        self.entries.push((peer, value));
        self.index[slot] = self.entries.len() as u32;
        None
    }

    /// `peer`'s entry, made by `make` if it has none.
    pub fn get_or_insert_with(&mut self, peer: u32, make: impl FnOnce() -> T) -> &mut T {
        let at = match self.position(peer) {
            Some(at) => at,
            None => {
                self.insert(peer, make());
                self.entries.len() - 1
            }
        };
        &mut self.entries[at].1
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn keys(&self) -> impl Iterator<Item = &u32> {
        self.entries.iter().map(|(peer, _)| peer)
    }

    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.entries.iter().map(|(_, value)| value)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.entries.iter_mut().map(|(_, value)| value)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&u32, &T)> {
        self.entries.iter().map(|(peer, value)| (peer, value))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&u32, &mut T)> {
        self.entries.iter_mut().map(|(peer, value)| (&*peer, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_found_by_peer_after_inserts() {
        let mut table = PeerTable::default();
        assert_eq!(table.len(), 0);
        assert_eq!(table.insert(7, "seven"), None);
        assert_eq!(table.insert(2, "two"), None);
        assert_eq!(table.insert(9, "nine"), None);
        assert_eq!(table.insert(2, "TWO"), Some("two"));
        assert_eq!(table.len(), 3);
        assert_eq!(table.get(&2), Some(&"TWO"));
        assert_eq!(table.get(&3), None);
        assert_eq!(table.get(&1000), None, "past the index");
        assert_eq!(
            (table.get(&9), table.get(&7)),
            (Some(&"nine"), Some(&"seven"))
        );
        *table.get_or_insert_with(7, || "new") = "again";
        assert_eq!(*table.get_or_insert_with(7, || "unused"), "again");
        assert_eq!(*table.get_or_insert_with(4, || "four"), "four");
        let mut keys: Vec<u32> = table.keys().copied().collect();
        keys.sort();
        assert_eq!(keys, [2, 4, 7, 9]);
        assert_eq!(table.values().count(), 4);
        for value in table.values_mut() {
            *value = "x";
        }
        assert!(table.iter().all(|(_, v)| *v == "x"));
    }
}

//! The server's table of values, owned by its serving thread.

use std::collections::HashMap;

/// The most bytes of keys and values the server holds. A run's entries
/// are a few hundred bytes per process (a run of 16,384 processes holds
/// about 4 MiB), so this leaves room for many runs and stops a client
/// that writes junk (without a key, anyone who reaches the server may)
/// from taking the launcher's memory.
pub(crate) const MAX_STORE_BYTES: usize = 64 << 20;

/// Keys and values in memory.
#[derive(Default)]
pub(crate) struct Store {
    values: HashMap<String, String>,
    /// Bytes of every key and value held.
    bytes: usize,
}

/// [`Store::put`] would pass [`MAX_STORE_BYTES`].
#[derive(Debug)]
pub(crate) struct Full;

impl Store {
    /// Stores `value` under `key`, unless the store would then hold
    /// more than [`MAX_STORE_BYTES`] (counting the value it replaces as
    /// gone).
    pub(crate) fn put(&mut self, key: &str, value: &str) -> Result<(), Full> {
        let old = self.values.get(key).map_or(0, |v| key.len() + v.len());
        let bytes = self.bytes - old + key.len() + value.len();
        if bytes > MAX_STORE_BYTES {
            return Err(Full);
        }
        self.bytes = bytes;
        self.values.insert(key.to_owned(), value.to_owned());
        Ok(())
    }

    pub(crate) fn get(&self, key: &str) -> Option<String> {
        self.values.get(key).cloned()
    }

    pub(crate) fn remove(&mut self, key: &str) {
        if let Some(value) = self.values.remove(key) {
            self.bytes -= key.len() + value.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_takes_at_most_its_bound_counting_replaced_values_as_gone() {
        let mut store = Store::default();
        let big = "x".repeat(60 << 10);
        let mut taken = 0;
        while store.put(&format!("junk/{taken}"), &big).is_ok() {
            taken += 1;
        }
        assert!(
            taken * (60 << 10) <= MAX_STORE_BYTES && taken > 1000,
            "{taken}"
        );
        // Replacing a value with one of the same size still fits; removing
        // one makes room.
        store.put("junk/0", &big).unwrap();
        assert!(store.put("other", &big).is_err());
        store.remove("junk/1");
        store.put("other", &big).unwrap();
        assert_eq!(store.get("other").as_deref(), Some(big.as_str()));
    }
}

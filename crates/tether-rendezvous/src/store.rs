//! The server's table of values, shared by its connection threads.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The most bytes of keys and values the server holds. A run's entries
/// are a few hundred bytes per process (a run of 16,384 processes holds
/// about 4 MiB), so this leaves room for many runs and stops a client
/// that writes junk (without a key, anyone who reaches the server may)
/// from taking the launcher's memory.
pub(crate) const MAX_STORE_BYTES: usize = 64 << 20;

#[derive(Default)]
struct State {
    values: HashMap<String, String>,
    /// Bytes of every key and value held.
    bytes: usize,
    stopping: bool,
}

/// [`Store::put`] would pass [`MAX_STORE_BYTES`].
#[derive(Debug)]
pub(crate) struct Full;

/// Keys and values in memory, with waiting for a key to appear.
#[derive(Default)]
pub(crate) struct Store {
    state: Mutex<State>,
    changed: Condvar,
}

/// [`Store::wait`] was cut short by [`Store::stop`].
#[derive(Debug)]
pub(crate) struct Stopped;

impl Store {
    /// Stores `value` under `key`, unless the store would then hold
    /// more than [`MAX_STORE_BYTES`] (counting the value it replaces as
    /// gone).
    pub(crate) fn put(&self, key: &str, value: &str) -> Result<(), Full> {
        let mut state = self.lock();
        let old = state.values.get(key).map_or(0, |v| key.len() + v.len());
        let bytes = state.bytes - old + key.len() + value.len();
        if bytes > MAX_STORE_BYTES {
            return Err(Full);
        }
        state.bytes = bytes;
        state.values.insert(key.to_owned(), value.to_owned());
        drop(state);
        self.changed.notify_all();
        Ok(())
    }

    pub(crate) fn get(&self, key: &str) -> Option<String> {
        self.lock().values.get(key).cloned()
    }

    pub(crate) fn remove(&self, key: &str) {
        let mut state = self.lock();
        if let Some(value) = state.values.remove(key) {
            state.bytes -= key.len() + value.len();
        }
    }

    /// Blocks until `key` has a value, `timeout` passes (`Ok(None)`) or the
    /// store is stopped.
    pub(crate) fn wait(&self, key: &str, timeout: Duration) -> Result<Option<String>, Stopped> {
        let deadline = Instant::now().checked_add(timeout);
        let mut state = self.lock();
        loop {
            if state.stopping {
                return Err(Stopped);
            }
            if let Some(value) = state.values.get(key) {
                return Ok(Some(value.clone()));
            }
            let left = match deadline {
                Some(deadline) => deadline.saturating_duration_since(Instant::now()),
                None => Duration::MAX,
            };
            if left.is_zero() {
                return Ok(None);
            }
            state = match self.changed.wait_timeout(state, left) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Ends every current and future [`Store::wait`] with [`Stopped`].
    pub(crate) fn stop(&self) {
        self.lock().stopping = true;
        self.changed.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update is a single map operation, so a panicking holder
        // cannot leave the table half-changed.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn wait_sees_a_later_put_and_times_out_otherwise() {
        let store = Arc::new(Store::default());
        assert_eq!(store.wait("k", Duration::from_millis(20)).unwrap(), None);
        let writer = Arc::clone(&store);
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            writer.put("k", "v").unwrap();
        });
        let got = store.wait("k", Duration::from_secs(10)).unwrap();
        assert_eq!(got.as_deref(), Some("v"));
        thread.join().unwrap();
        store.stop();
        assert!(store.wait("other", Duration::from_secs(10)).is_err());
    }

    #[test]
    fn the_store_takes_at_most_its_bound_counting_replaced_values_as_gone() {
        let store = Store::default();
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
    }
}

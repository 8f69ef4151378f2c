//! The server's table of values, shared by its connection threads.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Default)]
struct State {
    values: HashMap<String, String>,
    stopping: bool,
}

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
    pub(crate) fn put(&self, key: &str, value: &str) {
        self.lock().values.insert(key.to_owned(), value.to_owned());
        self.changed.notify_all();
    }

    pub(crate) fn get(&self, key: &str) -> Option<String> {
        self.lock().values.get(key).cloned()
    }

    pub(crate) fn remove(&self, key: &str) {
        self.lock().values.remove(key);
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
            writer.put("k", "v");
        });
        let got = store.wait("k", Duration::from_secs(10)).unwrap();
        assert_eq!(got.as_deref(), Some("v"));
        thread.join().unwrap();
        store.stop();
        assert!(store.wait("other", Duration::from_secs(10)).is_err());
    }
}

//! Poisoning: the boundary's memory of a panic it caught.
//!
//! A panic inside a call can leave the state half-updated (a collective
//! half-advanced, a request registered twice), and continuing on it could
//! corrupt user memory or hang. So the first panic caught at the boundary
//! poisons the library for the rest of the process: every later call
//! fails at once with `TETHER_ERR_INTERNAL`, and its message names the
//! original panic and the call it happened in, so that the report a user
//! files points at the cause rather than at a later symptom.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use tether::error::{err, Error, ErrorClass};

pub(crate) struct Poison {
    /// Set once, after `reason`: readers that see it find the reason.
    poisoned: AtomicBool,
    /// The first panic: the call it happened in and its message.
    reason: Mutex<String>,
}

impl Poison {
    pub const fn new() -> Poison {
        Poison {
            poisoned: AtomicBool::new(false),
            reason: Mutex::new(String::new()),
        }
    }

    /// Records that `call` panicked with `message`. Only the first panic
    /// is kept: later ones are consequences or coincidences, and the first
    /// is the one to report.
    pub fn set(&self, call: &str, message: &str) {
        let mut reason = self
            .reason
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if reason.is_empty() {
            *reason = format!("a panic in {call}: {message}");
        }
        self.poisoned.store(true, Ordering::Release);
    }

    /// Fails with `TETHER_ERR_INTERNAL` naming the first panic once one
    /// was recorded; costs one load while none was.
    #[inline(always)]
    pub fn check(&self, call: &str) -> Result<(), Error> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(self.error(call));
        }
        Ok(())
    }

    #[cold]
    fn error(&self, call: &str) -> Error {
        let reason = self
            .reason
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        err(
            ErrorClass::Internal,
            format!(
                "{call} refused: Tether is unusable in this process after an internal error \
                 (please report): {reason}"
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poison_names_the_first_panic_and_its_call() {
        let poison = Poison::new();
        assert!(poison.check("tether_send").is_ok());
        poison.set("tether_wait", "index out of bounds");
        poison.set("tether_test", "a later panic");
        let error = poison.check("tether_send").unwrap_err();
        assert_eq!(error.class, ErrorClass::Internal);
        assert_eq!(
            error.message,
            "tether_send refused: Tether is unusable in this process after an internal error \
             (please report): a panic in tether_wait: index out of bounds"
        );
    }
}

//! The progress thread (`TETHER_PROGRESS_THREAD=1`, hint
//! `PROGRESS_THREAD`): makes progress while the program computes, so that
//! one-sided operations and active messages aimed at this process are
//! served without it calling Tether.
//!
//! It lives at the C boundary because progress needs the boundary's lock:
//! every `TETHER_PROGRESS_INTERVAL_US` it takes the lock (waiting while
//! the program is inside a call, which makes progress itself), runs one
//! round of progress without waiting, and lets go. Its first lock
//! revokes the lock's bias for the program's thread for good (`lock.rs`):
//! that, a few percent of a core, and handlers that may run on this
//! thread are the price, which is why it is off by default.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use tether::error::{err, ErrorClass, Result};

use crate::ffi::{guard, state};
use crate::types::TETHER_SUCCESS;

struct Running {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

/// The thread, while it runs.
static THREAD: Mutex<Option<Running>> = Mutex::new(None);

/// Starts or stops the thread to match the settings (after init and after
/// every hint). Called with the boundary's lock released: stopping joins
/// a thread that may be waiting for it.
pub(crate) fn sync() -> Result<()> {
    let wanted = {
        let mut st = state("tether progress thread")?;
        st.runtime
            .as_mut()
            .map(|rt| rt.settings().progress_thread())
            .unwrap_or(false)
    };
    let mut running = THREAD.lock().unwrap_or_else(|e| e.into_inner());
    match (wanted, running.is_some()) {
        (true, false) => *running = Some(start()?),
        (false, true) => stop(running.take().expect("running")),
        _ => {}
    }
    Ok(())
}

/// Stops the thread if it runs (finalize), with the lock released.
pub(crate) fn shut_down() {
    let taken = THREAD.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(running) = taken {
        stop(running);
    }
}

fn start() -> Result<Running> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("tether-progress".into())
        .spawn(move || {
            while !flag.load(Ordering::Acquire) {
                let mut interval = Duration::from_micros(100);
                guard("tether progress thread", || {
                    let mut st = state("tether progress thread")?;
                    if let Some(rt) = st.runtime.as_mut() {
                        rt.progress();
                        interval = Duration::from_micros(rt.settings().progress_interval_us());
                    }
                    Ok(TETHER_SUCCESS)
                });
                std::thread::sleep(interval);
            }
        })
        .map_err(|e| {
            err(
                ErrorClass::Internal,
                format!("cannot start the progress thread (TETHER_PROGRESS_THREAD): {e}"),
            )
        })?;
    Ok(Running { stop, thread })
}

fn stop(running: Running) {
    running.stop.store(true, Ordering::Release);
    let _ = running.thread.join();
}

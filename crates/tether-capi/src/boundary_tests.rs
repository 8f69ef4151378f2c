//! The boundary's two refusals, on a boundary of the test's own (the
//! process-wide one is shared by every test and poisoning is for good):
//! a call made from inside another call on the same thread, and every call
//! after a caught panic.

use std::cell::Cell;
use std::ffi::c_int;

use crate::ffi::{last_error, Boundary};
use crate::types::{TETHER_ERR_INTERNAL, TETHER_SUCCESS};

/// A call whose body runs and succeeds: the body's code, and whether it ran.
fn plain_call(boundary: &Boundary, call: &'static str) -> (c_int, bool) {
    let ran = Cell::new(false);
    let code = boundary.guard(call, || {
        ran.set(true);
        Ok(TETHER_SUCCESS)
    });
    (code, ran.get())
}

/// A handler run inside `tether_wait` (holding the state) that calls
/// `tether_isend` gets `TETHER_ERR_INTERNAL` naming both calls, instead of
/// a second `&mut State`; the outer call goes on, and nothing is poisoned.
#[test]
fn a_call_from_inside_a_call_on_the_same_thread_is_refused() {
    std::thread::spawn(|| {
        let boundary = Boundary::new();
        let outer = boundary.guard("tether_wait", || {
            let mut st = boundary.state("tether_wait")?;
            let inner = boundary.guard("tether_isend", || {
                let _second = boundary.state("tether_isend")?;
                Ok(TETHER_SUCCESS)
            });
            assert_eq!(inner, TETHER_ERR_INTERNAL);
            st.early_hints.push(("still".into(), "usable".into()));
            Ok(TETHER_SUCCESS)
        });
        assert_eq!(outer, TETHER_SUCCESS);
        let message = last_error();
        assert!(
            message.contains(
                "tether_isend called from inside another Tether call on this thread \
                 (tether_wait) (re-entry)"
            ),
            "{message}"
        );
        assert_eq!(plain_call(&boundary, "tether_test"), (TETHER_SUCCESS, true));
        assert_eq!(boundary.state("tether_test").unwrap().early_hints.len(), 1);
    })
    .join()
    .unwrap();
}

/// A panic caught in one call poisons the boundary: later calls fail with
/// `TETHER_ERR_INTERNAL` without running their bodies, and their message
/// names the panic and the call it happened in; the error-reporting calls
/// still run.
#[test]
fn a_panic_makes_every_later_call_fail_naming_it() {
    let boundary = Boundary::new();
    let panicked = boundary.guard("tether_allreduce", || {
        panic!("reduction operands overlap");
    });
    assert_eq!(panicked, TETHER_ERR_INTERNAL);
    let first = last_error();
    assert!(
        first.contains("in tether_allreduce: reduction operands overlap")
            && first.contains("every later call fails with TETHER_ERR_INTERNAL"),
        "{first}"
    );

    assert_eq!(
        plain_call(&boundary, "tether_send"),
        (TETHER_ERR_INTERNAL, false)
    );
    assert_eq!(
        last_error(),
        "TETHER_ERR_INTERNAL: tether_send refused: Tether is unusable in this process after an \
         internal error (please report): a panic in tether_allreduce: reduction operands overlap"
    );

    let reported = boundary.guard_even_if_poisoned("tether_last_error", || Ok(TETHER_SUCCESS));
    assert_eq!(reported, TETHER_SUCCESS);
}

//! Creating and freeing communicators (DESIGN 3.2).

use std::ffi::c_int;

use tether::error::{err, ErrorClass, Result};

use crate::ffi::{out, run, state};
use crate::types::{tether_comm, TETHER_COMM_NULL};

/// A checked input array of `n` ints.
pub(crate) fn ints<'a>(ptr: *const c_int, n: c_int, name: &str) -> Result<&'a [c_int]> {
    if n < 0 {
        return Err(err(
            ErrorClass::Count,
            format!("{name}: length {n} is negative"),
        ));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(err(ErrorClass::Arg, format!("argument `{name}` is NULL")));
    }
    // SAFETY: the caller passes an array of `n` ints (API contract).
    Ok(unsafe { std::slice::from_raw_parts(ptr, n as usize) })
}

/// A communicator of every joined process of the `nprograms` programs
/// listed (ranked program by program, in the order given). Collective over
/// those processes; a process outside them gets `TETHER_COMM_NULL` at once.
#[no_mangle]
pub extern "C" fn tether_comm_create(
    nprograms: c_int,
    programs: *const c_int,
    comm: *mut tether_comm,
) -> c_int {
    run("tether_comm_create", || {
        let comm = out(comm, "comm")?;
        let programs = ints(programs, nprograms, "programs")?;
        *comm = state("tether_comm_create")?
            .runtime()?
            .comm_create(programs)?;
        Ok(())
    })
}

/// A communicator whose rank i is universe rank `universe_ranks[i]`.
/// Collective over those processes; others get `TETHER_COMM_NULL` at once.
#[no_mangle]
pub extern "C" fn tether_comm_create_ranks(
    n: c_int,
    universe_ranks: *const c_int,
    comm: *mut tether_comm,
) -> c_int {
    run("tether_comm_create_ranks", || {
        let comm = out(comm, "comm")?;
        let ranks = ints(universe_ranks, n, "universe_ranks")?;
        *comm = state("tether_comm_create_ranks")?
            .runtime()?
            .comm_create_ranks(ranks)?;
        Ok(())
    })
}

/// Frees `*comm` and sets it to `TETHER_COMM_NULL`. Operations already
/// started on it complete; later use of the handle is `TETHER_ERR_COMM`.
#[no_mangle]
pub extern "C" fn tether_comm_free(comm: *mut tether_comm) -> c_int {
    run("tether_comm_free", || {
        let comm = out(comm, "comm")?;
        state("tether_comm_free")?.runtime()?.comm_free(*comm)?;
        *comm = TETHER_COMM_NULL;
        Ok(())
    })
}

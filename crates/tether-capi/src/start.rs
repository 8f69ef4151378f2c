//! Start-up, the universe and its programs (DESIGN 3.1), and the queries on
//! communicators (DESIGN 3.2).

use std::ffi::{c_char, c_int};

use tether::error::{err, ErrorClass, Result};
use tether::identity;
use tether::Runtime;

use crate::ffi::{in_str, out, run, state, write_str};
use crate::progress_thread;
use crate::types::tether_comm;

fn start(call: &'static str, identity: Option<identity::Identity>) -> Result<()> {
    let mut st = state(call)?;
    if st.runtime.is_some() {
        return Err(err(ErrorClass::Init, "tether is already initialized"));
    }
    if st.finalized {
        return Err(err(
            ErrorClass::Init,
            "tether_init after tether_finalize: a process joins a universe once (as MPI_Init cannot follow MPI_Finalize); start a new process to join again",
        ));
    }
    let mut runtime = Runtime::init(identity)?;
    for (key, value) in std::mem::take(&mut st.early_hints) {
        runtime.hint(&key, &value)?;
    }
    st.runtime = Some(runtime);
    Ok(())
}

/// Joins the universe with the identity from the environment (DESIGN 3.9).
/// `argc` and `argv` may be NULL; they are not changed. A process joins
/// once: after `tether_finalize`, `tether_init` (and `tether_init_as`)
/// fail with `TETHER_ERR_INIT`, as MPI forbids `MPI_Init` after
/// `MPI_Finalize`; start a new process to join again.
#[no_mangle]
pub extern "C" fn tether_init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    run("tether_init", || {
        start("tether_init", None)?;
        progress_thread::sync()
    })
}

/// Joins the universe as rank `rank` of program `program`, which has `size`
/// joining processes.
#[no_mangle]
pub extern "C" fn tether_init_as(program: *const c_char, rank: c_int, size: c_int) -> c_int {
    run("tether_init_as", || {
        let program = in_str(program, "program")?;
        start(
            "tether_init_as",
            Some(identity::explicit(program, rank.into(), size.into())?),
        )?;
        progress_thread::sync()
    })
}

/// Leaves the universe after delivering what is in flight (see docs).
/// A process joins once: a later `tether_init` fails with
/// `TETHER_ERR_INIT`, as MPI forbids `MPI_Init` after `MPI_Finalize`.
#[no_mangle]
pub extern "C" fn tether_finalize() -> c_int {
    run("tether_finalize", || {
        progress_thread::shut_down();
        let mut st = state("tether_finalize")?;
        let runtime = st.runtime.take().ok_or_else(|| {
            err(
                ErrorClass::NotInitialized,
                "tether_finalize without tether_init",
            )
        })?;
        st.requests.clear();
        st.dists.clear();
        st.finalized = true;
        runtime.finalize()
    })
}

/// `*flag` = 1 between a successful init and finalize, else 0.
#[no_mangle]
pub extern "C" fn tether_initialized(flag: *mut c_int) -> c_int {
    run("tether_initialized", || {
        let flag = out(flag, "flag")?;
        *flag = c_int::from(state("tether_initialized")?.runtime.is_some());
        Ok(())
    })
}

/// Ends every process of the universe with exit code `code`. Returns only
/// if it cannot (never, in practice). Works after an internal error too;
/// called from inside another Tether call (a handler) it ends only this
/// process, whose peers then see it lost.
#[no_mangle]
pub extern "C" fn tether_abort(code: c_int) -> c_int {
    // Outside `guard` and its poison check: aborting is the way out of a
    // poisoned library.
    let Ok(mut st) = state("tether_abort") else {
        // The runtime is in use further up this thread's stack.
        std::process::exit(code)
    };
    match st.runtime.as_mut() {
        Some(runtime) => runtime.abort(code),
        None => std::process::exit(code),
    }
}

/// Runs query `call` (its C name, for errors) on the runtime.
fn query(call: &'static str, body: impl FnOnce(&Runtime) -> Result<()>) -> c_int {
    run(call, || {
        let mut st = state(call)?;
        body(st.runtime()?)
    })
}

#[no_mangle]
pub extern "C" fn tether_universe_rank(rank: *mut c_int) -> c_int {
    query("tether_universe_rank", |rt| {
        *out(rank, "rank")? = rt.universe().my_universe_rank() as c_int;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn tether_universe_size(size: *mut c_int) -> c_int {
    query("tether_universe_size", |rt| {
        *out(size, "size")? = rt.universe().size() as c_int;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn tether_program_count(count: *mut c_int) -> c_int {
    query("tether_program_count", |rt| {
        *out(count, "count")? = rt.universe().programs.len() as c_int;
        Ok(())
    })
}

/// My program's id: its index among the programs ordered by name.
#[no_mangle]
pub extern "C" fn tether_program_id(id: *mut c_int) -> c_int {
    query("tether_program_id", |rt| {
        *out(id, "id")? = rt.universe().my_program as c_int;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn tether_program_rank(rank: *mut c_int) -> c_int {
    query("tether_program_rank", |rt| {
        *out(rank, "rank")? = rt.universe().my_rank as c_int;
        Ok(())
    })
}

fn program(rt: &Runtime, id: c_int) -> Result<&tether::universe::Program> {
    let programs = &rt.universe().programs;
    usize::try_from(id)
        .ok()
        .and_then(|i| programs.get(i))
        .ok_or_else(|| {
            err(
                ErrorClass::Arg,
                format!("program id {id} is outside 0..{}", programs.len()),
            )
        })
}

/// Joined processes of program `id`.
#[no_mangle]
pub extern "C" fn tether_program_size(id: c_int, size: *mut c_int) -> c_int {
    query("tether_program_size", |rt| {
        let p = program(rt, id)?;
        *out(size, "size")? = p.size as c_int;
        Ok(())
    })
}

/// Universe rank of rank `rank` of program `id`: programs are ordered by
/// name and their ranks concatenated, so this is the universe rank of the
/// program's rank 0 plus `rank`. `TETHER_ERR_ARG` for an id outside
/// 0..count-1, `TETHER_ERR_RANK` for a rank outside 0..size-1 of that
/// program (as `tether_comm_universe_rank`).
#[no_mangle]
pub extern "C" fn tether_program_universe_rank(
    id: c_int,
    rank: c_int,
    universe_rank: *mut c_int,
) -> c_int {
    query("tether_program_universe_rank", |rt| {
        let p = program(rt, id)?;
        let inside = u32::try_from(rank).ok().filter(|r| *r < p.size);
        let Some(r) = inside else {
            return Err(err(
                ErrorClass::Rank,
                format!(
                    "rank {rank} is outside program {:?} (id {id}): its {} processes have ranks 0 to {}",
                    p.name,
                    p.size,
                    p.size.saturating_sub(1)
                ),
            ));
        };
        *out(universe_rank, "universe_rank")? = (p.first + r) as c_int;
        Ok(())
    })
}

/// Name of program `id` into `name` (`len` bytes, `TETHER_MAX_PROGRAM_NAME` always suffice).
#[no_mangle]
pub extern "C" fn tether_program_name(id: c_int, name: *mut c_char, len: c_int) -> c_int {
    query("tether_program_name", |rt| {
        write_str(&program(rt, id)?.name, name, len, "name")
    })
}

/// Id of the program called `name`; `TETHER_ERR_ARG` if there is none.
#[no_mangle]
pub extern "C" fn tether_program_find(name: *const c_char, id: *mut c_int) -> c_int {
    query("tether_program_find", |rt| {
        let name = in_str(name, "name")?;
        let found = rt.universe().find(name).ok_or_else(|| {
            let names: Vec<&str> = rt
                .universe()
                .programs
                .iter()
                .map(|p| p.name.as_str())
                .collect();
            err(
                ErrorClass::Arg,
                format!("no program {name:?} in the universe ({})", names.join(", ")),
            )
        })?;
        *out(id, "id")? = found as c_int;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn tether_comm_rank(comm: tether_comm, rank: *mut c_int) -> c_int {
    query("tether_comm_rank", |rt| {
        let c = rt.comm(comm)?;
        *out(rank, "rank")? = c.my_rank as c_int;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn tether_comm_size(comm: tether_comm, size: *mut c_int) -> c_int {
    query("tether_comm_size", |rt| {
        let c = rt.comm(comm)?;
        *out(size, "size")? = c.size() as c_int;
        Ok(())
    })
}

/// Universe rank of rank `rank` of `comm`.
#[no_mangle]
pub extern "C" fn tether_comm_universe_rank(
    comm: tether_comm,
    rank: c_int,
    universe_rank: *mut c_int,
) -> c_int {
    query("tether_comm_universe_rank", |rt| {
        let u = rt.comm(comm)?.universe_rank(rank)?;
        *out(universe_rank, "universe_rank")? = u as c_int;
        Ok(())
    })
}

//! Collectives (DESIGN 3.5): each blocking call starts the non-blocking
//! one and waits for it. Argument order and meaning are MPI's; buffers,
//! counts and types that MPI calls significant only at the root are read
//! only there. `TETHER_IN_PLACE` is accepted where MPI accepts
//! `MPI_IN_PLACE`.

use std::ffi::{c_int, c_void};

use tether::error::Result;
use tether::{Arg, Layout, ReqId, Runtime};

use crate::ffi::{guard, out, record, run, state};
use crate::types::*;

/// Runs, for exported function `call`, a collective that the runtime
/// completes in the call.
fn in_call(call: &'static str, body: impl FnOnce(&mut Runtime) -> Result<()>) -> c_int {
    run(call, || body(state(call)?.runtime()?))
}

/// Starts a collective for exported function `call` and waits for it;
/// returns its error class.
fn blocking(call: &'static str, start: impl FnOnce(&mut Runtime) -> Result<ReqId>) -> c_int {
    guard(call, || {
        let mut st = state(call)?;
        let rt = st.runtime()?;
        let req = start(rt)?;
        let status = rt.wait(req)?;
        Ok(status.error.as_ref().map_or(TETHER_SUCCESS, record))
    })
}

/// Starts a collective and writes its request to `*req`.
fn nonblocking(
    call: &'static str,
    req: *mut tether_request,
    start: impl FnOnce(&mut Runtime) -> Result<ReqId>,
) -> c_int {
    guard(call, || {
        let req = out(req, "req")?;
        let mut st = state(call)?;
        let id = start(st.runtime()?)?;
        *req = st.register(id);
        Ok(TETHER_SUCCESS)
    })
}

fn arg(buf: *const c_void, count: i64, datatype: tether_datatype) -> Arg {
    Arg::new(buf.cast(), count, datatype)
}

/// Counts and displacements of a v-collective: arrays of the communicator's
/// size, or NULL where they are not significant.
fn layout<'a>(
    rt: &Runtime,
    comm: tether_comm,
    counts: *const c_int,
    displs: *const c_int,
) -> Result<Layout<'a>> {
    let size = rt.comm(comm)?.size() as usize;
    // SAFETY: non-null arrays hold one int per rank of `comm` (API contract).
    let array =
        |p: *const c_int| (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p, size) });
    Ok(Layout {
        counts: array(counts),
        displs: array(displs),
    })
}

/// Blocks until every process of `comm` has entered the barrier.
#[no_mangle]
pub extern "C" fn tether_barrier(comm: tether_comm) -> c_int {
    in_call("tether_barrier", |rt| rt.barrier(comm))
}

/// Non-blocking `tether_barrier`: completes through `tether_wait`/`tether_test`.
#[no_mangle]
pub extern "C" fn tether_ibarrier(comm: tether_comm, req: *mut tether_request) -> c_int {
    nonblocking("tether_ibarrier", req, |rt| rt.ibarrier(comm))
}

/// Broadcasts `count` elements from `root`'s `buf` into every other `buf`.
#[no_mangle]
pub extern "C" fn tether_bcast(
    buf: *mut c_void,
    count: i64,
    datatype: tether_datatype,
    root: c_int,
    comm: tether_comm,
) -> c_int {
    // SAFETY: the runtime reads and writes the buffers only during this
    // call, and the API contract makes them valid for it; it checks
    // their counts, datatypes and NULLs, and refuses aliased ones.
    in_call("tether_bcast", |rt| unsafe {
        rt.bcast(arg(buf, count, datatype), root, comm)
    })
}

/// Non-blocking `tether_bcast`: completes through `tether_wait`/`tether_test`.
#[no_mangle]
pub extern "C" fn tether_ibcast(
    buf: *mut c_void,
    count: i64,
    datatype: tether_datatype,
    root: c_int,
    comm: tether_comm,
    req: *mut tether_request,
) -> c_int {
    // SAFETY: the API contract makes the caller keep the buffers valid
    // (and the send buffer unchanged) until the request completes, as
    // the runtime requires; it checks counts, datatypes and NULLs.
    nonblocking("tether_ibcast", req, |rt| unsafe {
        rt.ibcast(arg(buf, count, datatype), root, comm)
    })
}

/// Combines every process's `sendbuf` with `op` into `root`'s `recvbuf`.
#[no_mangle]
pub extern "C" fn tether_reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: tether_datatype,
    op: tether_op,
    root: c_int,
    comm: tether_comm,
) -> c_int {
    // SAFETY: the collective is waited for before this call returns, and
    // the API contract makes the buffers valid for the call; the runtime
    // checks their counts, datatypes and NULLs, and refuses aliased ones.
    blocking("tether_reduce", |rt| unsafe {
        rt.ireduce(
            sendbuf.cast(),
            recvbuf.cast(),
            count,
            datatype,
            op,
            root,
            comm,
        )
    })
}

/// Non-blocking `tether_reduce`: completes through `tether_wait`/`tether_test`.
#[no_mangle]
pub extern "C" fn tether_ireduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: tether_datatype,
    op: tether_op,
    root: c_int,
    comm: tether_comm,
    req: *mut tether_request,
) -> c_int {
    // SAFETY: the API contract makes the caller keep the buffers valid
    // (and the send buffer unchanged) until the request completes, as
    // the runtime requires; it checks counts, datatypes and NULLs.
    nonblocking("tether_ireduce", req, |rt| unsafe {
        rt.ireduce(
            sendbuf.cast(),
            recvbuf.cast(),
            count,
            datatype,
            op,
            root,
            comm,
        )
    })
}

/// Combines every process's `sendbuf` with `op` into every `recvbuf`.
#[no_mangle]
pub extern "C" fn tether_allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: tether_datatype,
    op: tether_op,
    comm: tether_comm,
) -> c_int {
    // SAFETY: the runtime reads and writes the buffers only during this
    // call, and the API contract makes them valid for it; it checks
    // their counts, datatypes and NULLs, and refuses aliased ones.
    in_call("tether_allreduce", |rt| unsafe {
        rt.allreduce(sendbuf.cast(), recvbuf.cast(), count, datatype, op, comm)
    })
}

/// Non-blocking `tether_allreduce`: completes through `tether_wait`/`tether_test`.
#[no_mangle]
pub extern "C" fn tether_iallreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: tether_datatype,
    op: tether_op,
    comm: tether_comm,
    req: *mut tether_request,
) -> c_int {
    // SAFETY: the API contract makes the caller keep the buffers valid
    // (and the send buffer unchanged) until the request completes, as
    // the runtime requires; it checks counts, datatypes and NULLs.
    nonblocking("tether_iallreduce", req, |rt| unsafe {
        rt.iallreduce(sendbuf.cast(), recvbuf.cast(), count, datatype, op, comm)
    })
}

/// Collects `recvcount` elements from each process, in rank order, into `root`'s `recvbuf`.
#[no_mangle]
pub extern "C" fn tether_gather(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: tether_datatype,
    root: c_int,
    comm: tether_comm,
) -> c_int {
    // SAFETY: the collective is waited for before this call returns, and
    // the API contract makes the buffers valid for the call; the runtime
    // checks their counts, datatypes and NULLs, and refuses aliased ones.
    blocking("tether_gather", |rt| unsafe {
        rt.igather(
            arg(sendbuf, sendcount, sendtype),
            arg(recvbuf, recvcount, recvtype),
            root,
            comm,
        )
    })
}

/// Non-blocking `tether_gather`: completes through `tether_wait`/`tether_test`.
#[no_mangle]
pub extern "C" fn tether_igather(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: tether_datatype,
    root: c_int,
    comm: tether_comm,
    req: *mut tether_request,
) -> c_int {
    // SAFETY: the API contract makes the caller keep the buffers valid
    // (and the send buffer unchanged) until the request completes, as
    // the runtime requires; it checks counts, datatypes and NULLs.
    nonblocking("tether_igather", req, |rt| unsafe {
        rt.igather(
            arg(sendbuf, sendcount, sendtype),
            arg(recvbuf, recvcount, recvtype),
            root,
            comm,
        )
    })
}

/// Collects `recvcounts[r]` elements from rank r at `displs[r]` (in elements) of `root`'s `recvbuf`.
#[no_mangle]
pub extern "C" fn tether_gatherv(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: tether_datatype,
    root: c_int,
    comm: tether_comm,
) -> c_int {
    // SAFETY: the collective is waited for before this call returns, and
    // the API contract makes the buffers valid for the call; the runtime
    // checks their counts, datatypes and NULLs, and refuses aliased ones.
    blocking("tether_gatherv", |rt| unsafe {
        rt.igatherv(
            arg(sendbuf, sendcount, sendtype),
            recvbuf.cast(),
            layout(rt, comm, recvcounts, displs)?,
            recvtype,
            root,
            comm,
        )
    })
}

/// Non-blocking `tether_gatherv`: completes through `tether_wait`/`tether_test`.
#[no_mangle]
pub extern "C" fn tether_igatherv(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: tether_datatype,
    root: c_int,
    comm: tether_comm,
    req: *mut tether_request,
) -> c_int {
    // SAFETY: the API contract makes the caller keep the buffers valid
    // (and the send buffer unchanged) until the request completes, as
    // the runtime requires; it checks counts, datatypes and NULLs.
    nonblocking("tether_igatherv", req, |rt| unsafe {
        rt.igatherv(
            arg(sendbuf, sendcount, sendtype),
            recvbuf.cast(),
            layout(rt, comm, recvcounts, displs)?,
            recvtype,
            root,
            comm,
        )
    })
}

/// Sends block r of `sendcount` elements of `root`'s `sendbuf` to rank r.
#[no_mangle]
pub extern "C" fn tether_scatter(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: tether_datatype,
    root: c_int,
    comm: tether_comm,
) -> c_int {
    // SAFETY: the collective is waited for before this call returns, and
    // the API contract makes the buffers valid for the call; the runtime
    // checks their counts, datatypes and NULLs, and refuses aliased ones.
    blocking("tether_scatter", |rt| unsafe {
        rt.iscatter(
            arg(sendbuf, sendcount, sendtype),
            arg(recvbuf, recvcount, recvtype),
            root,
            comm,
        )
    })
}

/// Non-blocking `tether_scatter`: completes through `tether_wait`/`tether_test`.
#[no_mangle]
pub extern "C" fn tether_iscatter(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: tether_datatype,
    root: c_int,
    comm: tether_comm,
    req: *mut tether_request,
) -> c_int {
    // SAFETY: the API contract makes the caller keep the buffers valid
    // (and the send buffer unchanged) until the request completes, as
    // the runtime requires; it checks counts, datatypes and NULLs.
    nonblocking("tether_iscatter", req, |rt| unsafe {
        rt.iscatter(
            arg(sendbuf, sendcount, sendtype),
            arg(recvbuf, recvcount, recvtype),
            root,
            comm,
        )
    })
}

/// Sends `sendcounts[r]` elements at `displs[r]` of `root`'s `sendbuf` to rank r.
#[no_mangle]
pub extern "C" fn tether_scatterv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: tether_datatype,
    root: c_int,
    comm: tether_comm,
) -> c_int {
    // SAFETY: the collective is waited for before this call returns, and
    // the API contract makes the buffers valid for the call; the runtime
    // checks their counts, datatypes and NULLs, and refuses aliased ones.
    blocking("tether_scatterv", |rt| unsafe {
        rt.iscatterv(
            sendbuf.cast(),
            layout(rt, comm, sendcounts, displs)?,
            sendtype,
            arg(recvbuf, recvcount, recvtype),
            root,
            comm,
        )
    })
}

/// Non-blocking `tether_scatterv`: completes through `tether_wait`/`tether_test`.
#[no_mangle]
pub extern "C" fn tether_iscatterv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: tether_datatype,
    root: c_int,
    comm: tether_comm,
    req: *mut tether_request,
) -> c_int {
    // SAFETY: the API contract makes the caller keep the buffers valid
    // (and the send buffer unchanged) until the request completes, as
    // the runtime requires; it checks counts, datatypes and NULLs.
    nonblocking("tether_iscatterv", req, |rt| unsafe {
        rt.iscatterv(
            sendbuf.cast(),
            layout(rt, comm, sendcounts, displs)?,
            sendtype,
            arg(recvbuf, recvcount, recvtype),
            root,
            comm,
        )
    })
}

/// Collects `recvcount` elements from each process, in rank order, into every `recvbuf`.
#[no_mangle]
pub extern "C" fn tether_allgather(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: tether_datatype,
    comm: tether_comm,
) -> c_int {
    // SAFETY: the collective is waited for before this call returns, and
    // the API contract makes the buffers valid for the call; the runtime
    // checks their counts, datatypes and NULLs, and refuses aliased ones.
    blocking("tether_allgather", |rt| unsafe {
        rt.iallgather(
            arg(sendbuf, sendcount, sendtype),
            arg(recvbuf, recvcount, recvtype),
            comm,
        )
    })
}

/// Non-blocking `tether_allgather`: completes through `tether_wait`/`tether_test`.
#[no_mangle]
pub extern "C" fn tether_iallgather(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: tether_datatype,
    comm: tether_comm,
    req: *mut tether_request,
) -> c_int {
    // SAFETY: the API contract makes the caller keep the buffers valid
    // (and the send buffer unchanged) until the request completes, as
    // the runtime requires; it checks counts, datatypes and NULLs.
    nonblocking("tether_iallgather", req, |rt| unsafe {
        rt.iallgather(
            arg(sendbuf, sendcount, sendtype),
            arg(recvbuf, recvcount, recvtype),
            comm,
        )
    })
}

/// Collects `recvcounts[r]` elements from rank r at `displs[r]` of every `recvbuf`.
#[no_mangle]
pub extern "C" fn tether_allgatherv(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: tether_datatype,
    comm: tether_comm,
) -> c_int {
    // SAFETY: the collective is waited for before this call returns, and
    // the API contract makes the buffers valid for the call; the runtime
    // checks their counts, datatypes and NULLs, and refuses aliased ones.
    blocking("tether_allgatherv", |rt| unsafe {
        rt.iallgatherv(
            arg(sendbuf, sendcount, sendtype),
            recvbuf.cast(),
            layout(rt, comm, recvcounts, displs)?,
            recvtype,
            comm,
        )
    })
}

/// Non-blocking `tether_allgatherv`: completes through `tether_wait`/`tether_test`.
#[no_mangle]
pub extern "C" fn tether_iallgatherv(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: tether_datatype,
    comm: tether_comm,
    req: *mut tether_request,
) -> c_int {
    // SAFETY: the API contract makes the caller keep the buffers valid
    // (and the send buffer unchanged) until the request completes, as
    // the runtime requires; it checks counts, datatypes and NULLs.
    nonblocking("tether_iallgatherv", req, |rt| unsafe {
        rt.iallgatherv(
            arg(sendbuf, sendcount, sendtype),
            recvbuf.cast(),
            layout(rt, comm, recvcounts, displs)?,
            recvtype,
            comm,
        )
    })
}

/// Sends block r of `sendbuf` to rank r and receives rank r's block into block r of `recvbuf`.
#[no_mangle]
pub extern "C" fn tether_alltoall(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: tether_datatype,
    comm: tether_comm,
) -> c_int {
    // SAFETY: the collective is waited for before this call returns, and
    // the API contract makes the buffers valid for the call; the runtime
    // checks their counts, datatypes and NULLs, and refuses aliased ones.
    blocking("tether_alltoall", |rt| unsafe {
        rt.ialltoall(
            arg(sendbuf, sendcount, sendtype),
            arg(recvbuf, recvcount, recvtype),
            comm,
        )
    })
}

/// Non-blocking `tether_alltoall`: completes through `tether_wait`/`tether_test`.
#[no_mangle]
pub extern "C" fn tether_ialltoall(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: tether_datatype,
    comm: tether_comm,
    req: *mut tether_request,
) -> c_int {
    // SAFETY: the API contract makes the caller keep the buffers valid
    // (and the send buffer unchanged) until the request completes, as
    // the runtime requires; it checks counts, datatypes and NULLs.
    nonblocking("tether_ialltoall", req, |rt| unsafe {
        rt.ialltoall(
            arg(sendbuf, sendcount, sendtype),
            arg(recvbuf, recvcount, recvtype),
            comm,
        )
    })
}

/// All-to-all with per-rank counts and displacements (in elements) on both sides.
#[no_mangle]
pub extern "C" fn tether_alltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: tether_datatype,
    comm: tether_comm,
) -> c_int {
    // SAFETY: the collective is waited for before this call returns, and
    // the API contract makes the buffers valid for the call; the runtime
    // checks their counts, datatypes and NULLs, and refuses aliased ones.
    blocking("tether_alltoallv", |rt| unsafe {
        rt.ialltoallv(
            sendbuf.cast(),
            layout(rt, comm, sendcounts, sdispls)?,
            sendtype,
            recvbuf.cast(),
            layout(rt, comm, recvcounts, rdispls)?,
            recvtype,
            comm,
        )
    })
}

/// Non-blocking `tether_alltoallv`: completes through `tether_wait`/`tether_test`.
#[no_mangle]
pub extern "C" fn tether_ialltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: tether_datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: tether_datatype,
    comm: tether_comm,
    req: *mut tether_request,
) -> c_int {
    // SAFETY: the API contract makes the caller keep the buffers valid
    // (and the send buffer unchanged) until the request completes, as
    // the runtime requires; it checks counts, datatypes and NULLs.
    nonblocking("tether_ialltoallv", req, |rt| unsafe {
        rt.ialltoallv(
            sendbuf.cast(),
            layout(rt, comm, sendcounts, sdispls)?,
            sendtype,
            recvbuf.cast(),
            layout(rt, comm, recvcounts, rdispls)?,
            recvtype,
            comm,
        )
    })
}

/// Combines every process's `sendbuf` (p blocks of `recvcount`) with `op`; rank r gets block r.
#[no_mangle]
pub extern "C" fn tether_reduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: i64,
    datatype: tether_datatype,
    op: tether_op,
    comm: tether_comm,
) -> c_int {
    // SAFETY: the collective is waited for before this call returns, and
    // the API contract makes the buffers valid for the call; the runtime
    // checks their counts, datatypes and NULLs, and refuses aliased ones.
    blocking("tether_reduce_scatter_block", |rt| unsafe {
        rt.ireduce_scatter_block(
            sendbuf.cast(),
            recvbuf.cast(),
            recvcount,
            datatype,
            op,
            comm,
        )
    })
}

/// Non-blocking `tether_reduce_scatter_block`: completes through `tether_wait`/`tether_test`.
#[no_mangle]
pub extern "C" fn tether_ireduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: i64,
    datatype: tether_datatype,
    op: tether_op,
    comm: tether_comm,
    req: *mut tether_request,
) -> c_int {
    // SAFETY: the API contract makes the caller keep the buffers valid
    // (and the send buffer unchanged) until the request completes, as
    // the runtime requires; it checks counts, datatypes and NULLs.
    nonblocking("tether_ireduce_scatter_block", req, |rt| unsafe {
        rt.ireduce_scatter_block(
            sendbuf.cast(),
            recvbuf.cast(),
            recvcount,
            datatype,
            op,
            comm,
        )
    })
}

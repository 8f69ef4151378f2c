"""Every collective from Python, checked against numpy references computed
from what each rank contributes. One scenario per run (first argument), on
the universe and on communicators made from programs and from ranks;
every process prints `ok <scenario>`."""

import sys

import numpy as np

import tether

N = 7  # elements per rank: odd, not a power of two


def data(rank, dtype="f8", n=N):
    """What rank `rank` contributes: distinct, negative values included."""
    return ((np.arange(n) - 3) * (rank + 1) + 10 * rank).astype(dtype)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def same(a, b, what):
    check(a.shape == b.shape and np.array_equal(a, b), f"{what}: {a} != {b}")


def run_all(comm, variant):
    """Every buffer collective, blocking (variant "") or not ("I")."""
    me, p = comm.rank, comm.size

    def call(name, *args, **kw):
        fn = getattr(comm, variant + (name[0].lower() if variant else name[0]) + name[1:])
        result = fn(*args, **kw)
        if variant:
            check(isinstance(result, tether.Request), f"{variant}{name} returns a Request")
            result.wait()

    # Barrier and Bcast from every root.
    call("Barrier")
    for root in range(p):
        buf = data(root) if me == root else np.zeros(N)
        call("Bcast", buf, root)
        same(buf, data(root), f"Bcast root {root}")

    # Reduce and Allreduce: dtypes x ops against numpy folds.
    all_f = np.stack([data(r) for r in range(p)])
    all_i = np.stack([data(r, "i4") for r in range(p)])
    all_u = np.stack([data(r, "i8") & 0xFF for r in range(p)]).astype("u8")
    cases = [
        (all_f, tether.SUM, all_f.sum(0)),
        (all_f, tether.PROD, all_f.prod(0)),
        (all_f, tether.MIN, all_f.min(0)),
        (all_f, tether.MAX, all_f.max(0)),
        (all_i, tether.SUM, all_i.sum(0, dtype="i4")),
        (all_i, tether.MAX, all_i.max(0)),
        (all_u, tether.BAND, np.bitwise_and.reduce(all_u, 0)),
        (all_u, tether.BOR, np.bitwise_or.reduce(all_u, 0)),
        (all_u, tether.BXOR, np.bitwise_xor.reduce(all_u, 0)),
        (all_i.astype("f4"), tether.SUM, all_i.astype("f4").sum(0)),
        (all_f.astype("c16"), tether.SUM, all_f.astype("c16").sum(0)),
    ]
    for table, op, want in cases:
        mine = table[me].copy()
        out = np.zeros_like(mine)
        call("Allreduce", mine, out, op)
        check(np.allclose(out, want, rtol=1e-12), f"Allreduce {table.dtype} op {op}: {out} != {want}")
        root = p - 1
        out = np.zeros_like(mine) if me == root else None
        call("Reduce", mine, out, op, root)
        if me == root:
            check(np.allclose(out, want, rtol=1e-12), f"Reduce {table.dtype} op {op}")
    # Logical ops on bytes (numpy bool) and IN_PLACE.
    flags = np.array([(me + k) % 3 == 0 for k in range(N)])
    out = np.zeros(N, dtype=bool)
    call("Allreduce", flags, out, tether.LOR)
    same(out, np.array([any((r + k) % 3 == 0 for r in range(p)) for k in range(N)]), "LOR")
    inplace = data(me)
    call("Allreduce", tether.IN_PLACE, inplace, tether.SUM)
    same(inplace, all_f.sum(0), "Allreduce IN_PLACE")
    # MINLOC/MAXLOC on (double, int) pairs, datatype given.
    pair = np.dtype([("v", "f8"), ("i", "i4")], align=True)
    mine = np.zeros(N, dtype=pair)
    mine["v"], mine["i"] = np.abs(data(me) - 5), me
    out = np.zeros(N, dtype=pair)
    call("Allreduce", mine, out, tether.MINLOC, datatype=tether.DOUBLE_INT)
    vals = np.stack([np.abs(data(r) - 5) for r in range(p)])
    same(out["v"], vals.min(0), "MINLOC value")
    same(out["i"], vals.argmin(0).astype("i4"), "MINLOC index (lowest rank on ties)")

    # Gather / Gatherv / Scatter / Scatterv.
    root = 1 % p
    out = np.zeros((p, N)) if me == root else None
    call("Gather", data(me), out, root)
    if me == root:
        same(out, all_f, "Gather")
    counts = [r + 1 for r in range(p)]
    displs = [sum(counts[:r]) + 2 * r for r in range(p)]  # gaps between blocks
    out = np.full(displs[-1] + counts[-1], -1.0) if me == root else None
    call("Gatherv", data(me, n=me + 1), (out, counts, displs) if me == root else None, root)
    if me == root:
        for r in range(p):
            same(out[displs[r] : displs[r] + counts[r]], data(r, n=r + 1), f"Gatherv block {r}")
    got = np.zeros(N)
    call("Scatter", all_f * 2 if me == root else None, got, root)
    same(got, all_f[me] * 2, "Scatter")
    got = np.zeros(me + 1, dtype="i2")
    whole = np.concatenate([data(r, "i2", r + 1) for r in range(p)])
    call("Scatterv", (whole, counts) if me == root else None, got, root)
    same(got, data(me, "i2", me + 1), "Scatterv (packed displacements)")

    # Allgather / Allgatherv / Alltoall / Alltoallv / Reduce_scatter_block.
    out = np.zeros((p, N), dtype="f4")
    call("Allgather", data(me, "f4"), out)
    same(out, all_f.astype("f4"), "Allgather")
    out = np.zeros(sum(counts), dtype="i8")
    call("Allgatherv", data(me, "i8", me + 1), (out, counts))
    same(out, np.concatenate([data(r, "i8", r + 1) for r in range(p)]), "Allgatherv")
    send = np.array([[100 * me + r] * 3 for r in range(p)], dtype="i4")
    out = np.zeros((p, 3), dtype="i4")
    call("Alltoall", send, out)
    same(out, np.array([[100 * r + me] * 3 for r in range(p)], dtype="i4"), "Alltoall")
    scounts = [(me + r) % 3 + 1 for r in range(p)]
    rcounts = [(r + me) % 3 + 1 for r in range(p)]
    sendv = np.concatenate([np.full(scounts[r], 1000 * me + r, dtype="f8") for r in range(p)])
    outv = np.zeros(sum(rcounts))
    call("Alltoallv", (sendv, scounts), (outv, rcounts))
    same(outv, np.concatenate([np.full(rcounts[r], 1000 * r + me, dtype="f8") for r in range(p)]), "Alltoallv")
    blocks = np.stack([data(me, "i8") + r for r in range(p)])
    out = np.zeros(N, dtype="i8")
    call("Reduce_scatter_block", blocks, out, tether.SUM)
    same(out, sum(data(r, "i8") for r in range(p)) + p * me, "Reduce_scatter_block")


def buffers(comm):
    run_all(comm, "")


def nonblocking(comm):
    run_all(comm, "I")
    # Several collectives in flight at once, completed together.
    me, p = comm.rank, comm.size
    a, b = data(me), np.zeros(N)
    c = np.zeros((p, N))
    reqs = [comm.Iallreduce(a, b, tether.MAX), comm.Iallgather(data(me), c), comm.Ibarrier()]
    tether.Request.waitall(reqs)
    same(b, np.stack([data(r) for r in range(p)]).max(0), "Iallreduce in flight")
    same(c, np.stack([data(r) for r in range(p)]), "Iallgather in flight")


def objects(comm):
    me, p = comm.rank, comm.size
    comm.barrier()
    for root in range(p):
        got = comm.bcast({"root": root, "a": np.arange(50_000.0) + root} if me == root else None, root)
        check(got["root"] == root and np.array_equal(got["a"], np.arange(50_000.0) + root), "bcast")
    check(comm.bcast("small", 0) == "small", "bcast small")
    gathered = comm.gather({"r": me}, root=p - 1)
    check(gathered == ([{"r": r} for r in range(p)] if me == p - 1 else None), f"gather {gathered}")
    got = comm.scatter([("x", r) for r in range(p)] if me == 0 else None, root=0)
    check(got == ("x", me), f"scatter {got}")
    check(comm.allgather(me * me) == [r * r for r in range(p)], "allgather")
    check(comm.alltoall([(me, r) for r in range(p)]) == [(r, me) for r in range(p)], "alltoall")
    check(comm.allreduce(me) == sum(range(p)), "allreduce SUM")
    check(comm.allreduce(me, tether.MAX) == p - 1, "allreduce MAX")
    check(comm.allreduce([me], lambda x, y: x + y) == list(range(p)), "allreduce with a function")
    arr = comm.allreduce(np.full(3, me))
    same(arr, np.full(3, sum(range(p))), "allreduce arrays")
    red = comm.reduce(me + 1, tether.PROD, root=0)
    check(red == (int(np.prod(np.arange(1, p + 1))) if me == 0 else None), f"reduce {red}")


def communicators(comm):
    """Sub-communicators from programs and from ranks run the collectives."""
    me = tether.universe_rank()
    beta = tether.Comm.create(programs=["beta"])
    if tether.programs()[tether.program_id()].name == "beta":
        check(beta is not None and beta.size == tether.programs()[1].size, "beta comm")
        run_all(beta, "")
        check(beta.allgather(me) == [beta.universe_rank(r) for r in range(beta.size)], "ranks of beta")
        beta.free()
    else:
        check(beta is None, "alpha is outside beta")
    both = tether.Comm.create(programs=["beta", "alpha"])
    check(both is not None and both.size == comm.size, "program order as given")
    check(both.universe_rank(0) == tether.programs()[0].size, "beta ranks first")
    run_all(both, "I")
    evens = list(range(0, comm.size, 2))[::-1]
    sub = tether.Comm.create(ranks=evens)
    if me in evens:
        check(sub is not None and sub.rank == evens.index(me), "rank order as given")
        run_all(sub, "")
        objects(sub)
    else:
        check(sub is None, "odd ranks are outside")
    try:
        tether.Comm.create()
        check(False, "Comm.create() without arguments")
    except ValueError:
        pass


def errors(comm):
    """Bad arguments raise the right exceptions, nothing hangs."""
    a = np.zeros(comm.size * 2 + 1)
    for call, kind in (
        (lambda: comm.Allgather(np.zeros(2), a), ValueError),  # not divisible
        (lambda: comm.Allreduce(np.zeros(3, "f2"), np.zeros(3, "f2")), ValueError),  # no datatype
        (lambda: comm.Allreduce(np.zeros(3), np.zeros(3), tether.BAND), tether.OpError),
        (lambda: comm.Bcast(np.zeros(2), comm.size), tether.RankError),
        (lambda: comm.Gatherv(np.zeros(1), (np.zeros(3), [1, 2], [0]), 0), ValueError),
        (lambda: comm.Bcast(np.zeros(4)[::2]), ValueError),
        # Two element types cannot be combined: refused, not garbage.
        (lambda: comm.Allreduce(np.full(3, 2.0), np.zeros(3, "i8")), TypeError),
        (lambda: comm.Iallreduce(np.full(3, 2.0), np.zeros(3, "f4")), TypeError),
        (lambda: comm.Reduce(np.ones(3, "i4"), np.zeros(3, "f4"), tether.SUM, 0), TypeError),
        (lambda: comm.Reduce_scatter_block(np.ones(comm.size), np.zeros(1, "i8")), TypeError),
        # Moving items of two types would reinterpret them: refused too.
        (lambda: comm.Allgather(np.ones(2), np.zeros(2 * comm.size, "i8")), TypeError),
        (lambda: comm.Iallgather(np.ones(2, "f4"), np.zeros(4 * comm.size, "f4")[::1].view("i4")), TypeError),
        (lambda: comm.Alltoall(np.ones(comm.size, "i4"), np.zeros(comm.size, "f4")), TypeError),
        (lambda: comm.Gather(np.ones(1, "i2"), np.zeros(comm.size, "u2"), 0), TypeError),
        (lambda: comm.Scatter(np.ones(comm.size, "f8"), np.zeros(1, "i8"), 0), TypeError),
        (lambda: comm.Allgatherv(np.ones(1), (np.zeros(comm.size, "f4"), [1] * comm.size)), TypeError),
        (lambda: comm.Alltoallv((np.ones(comm.size), [1] * comm.size), (np.zeros(comm.size, "c16"), [1] * comm.size)), TypeError),
    ):
        try:
            call()
            check(False, "no error")
        except kind:
            pass
    try:
        comm.Allreduce(np.full(3, 2.0), np.zeros(3, "i8"))
    except TypeError as e:
        check('format "d" (8 bytes)' in str(e) and ('"l" (8 bytes)' in str(e) or '"q" (8 bytes)' in str(e)), str(e))
    try:
        comm.Allgather(np.ones(2), np.zeros(2 * comm.size, "i8"))
    except TypeError as e:
        check(str(e).startswith("Allgather: sendbuf has items of format \"d\" (8 bytes)"), str(e))
    # One type under two spellings is one type (int64 as "l" and as "q").
    import array
    out = np.zeros(comm.size, "i8")
    comm.Allgather(array.array("q", [comm.rank]), out)
    check(list(out) == list(range(comm.size)), f"Allgather of q into l: {out}")
    comm.Barrier()


SCENARIOS = {f.__name__: f for f in (buffers, nonblocking, objects, communicators, errors)}

if __name__ == "__main__":
    scenario = sys.argv[1]
    tether.init()
    SCENARIOS[scenario](tether.UNIVERSE)
    print(f"ok {scenario}", flush=True)

"""Point-to-point from Python between real processes: one scenario per
run, named by the first argument; every process prints `ok <scenario>`
when its checks passed. Run by tests/test_python.py through `tether run`."""

import gc
import random
import sys
import weakref

import numpy as np

import tether


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def peers(comm):
    return [r for r in range(comm.size) if r != comm.rank]


def pairs(comm):
    """Every pair exchanges arrays of several dtypes, blocking and not."""
    me = comm.rank
    for dtype in ("f8", "f4", "i4", "u1", "c16"):
        reqs, bufs = [], {}
        for p in peers(comm):
            bufs[p] = np.zeros(1000, dtype=dtype)
            reqs.append(comm.Irecv(bufs[p], source=p, tag=3))
        for p in peers(comm):
            comm.Isend((np.arange(1000) * (me + 1)).astype(dtype), dest=p, tag=3)
        statuses = tether.Request.waitall(reqs)
        for p, st in zip(peers(comm), statuses):
            check(st.source == p and st.tag == 3 and st.count == bufs[p].nbytes, f"status {st}")
            check(np.array_equal(bufs[p], (np.arange(1000) * (p + 1)).astype(dtype)), f"{dtype} from {p}")
    # Blocking Send/Recv around a ring, 2-D Fortran-ordered arrays.
    right, left = (me + 1) % comm.size, (me - 1) % comm.size
    out = np.asfortranarray(np.arange(12.0).reshape(3, 4) + me)
    got = np.empty((3, 4), order="F")
    req = comm.Isend(out, right, tag=5)
    st = comm.Recv(got, left, tag=5)
    req.wait()
    check(np.array_equal(got, np.arange(12.0).reshape(3, 4) + left) and st.source == left, "ring")
    # Other buffer-protocol objects: bytearray and memoryview slices.
    if me == 0:
        comm.Send(buf=bytearray(b"hello tether"), tag=6, dest=1)
    elif me == 1:
        target = bytearray(20)
        st = comm.Recv(memoryview(target)[4:16], tag=6, source=0)
        check(bytes(target[4:16]) == b"hello tether" and st.Get_count() == 12, "memoryview")


def objects(comm):
    """Pickled objects: small in band, large arrays out of band; blocking,
    non-blocking, to every peer."""
    me = comm.rank
    big = np.arange(300_000, dtype="f8") * me
    for p in peers(comm):
        comm.isend({"from": me, "list": [me] * 3, "text": "é" * me}, p, tag=1)
        comm.isend({"from": me, "array": big, "two": (big[:10], np.ones(5, "i2"))}, p, tag=2)
    for p in peers(comm):
        small = comm.recv(p, tag=1)
        check(small == {"from": p, "list": [p] * 3, "text": "é" * p}, f"small {small}")
        obj = comm.irecv(source=p, tag=2).wait()
        check(np.array_equal(obj["array"], np.arange(300_000, dtype="f8") * p), "big array")
        check(obj["array"].flags.writeable, "received arrays are writable")
        check(np.array_equal(obj["two"][1], np.ones(5, "i2")), "tuple of arrays")
    # Non-contiguous arrays inside objects travel too (in band).
    if me == 0:
        comm.send(np.arange(20.0)[::2], 1, tag=3)
    elif me == 1:
        check(np.array_equal(comm.recv(0, 3), np.arange(20.0)[::2]), "strided array pickled")
    # irecv into a buffer too small for the pickle: TruncateError.
    if me == 0:
        comm.send(list(range(1000)), 1, tag=4)
    elif me == 1:
        try:
            comm.irecv(bytearray(16), 0, tag=4).wait()
            check(False, "no TruncateError")
        except tether.TruncateError as e:
            check(e.status.count > 16 and e.code == tether.ERR_TRUNCATE, f"status {e.status}")


def wildcards(comm):
    """Rank 0 receives from any source with any tag; statuses say who."""
    me, n = comm.rank, comm.size
    if me == 0:
        seen = set()
        buf = np.zeros(2, dtype="i8")
        for _ in range(n - 1):
            st = comm.Recv(buf, tether.ANY_SOURCE, tether.ANY_TAG)
            check(buf[0] == st.source and buf[1] == st.tag == 10 + st.source, f"{buf} {st}")
            seen.add(st.source)
        check(seen == set(range(1, n)), f"sources {seen}")
        for p in peers(comm):
            comm.send("go", p, tag=30)
        objs = [comm.recv(tag=20) for _ in range(n - 1)]
        check(sorted(o["rank"] for o in objs) == list(range(1, n)), f"objects {objs}")
        st = comm.Probe(tether.ANY_SOURCE, 77)
        check(st.count == 24 and st.tag == 77, f"probe {st}")
        check(comm.Iprobe(tether.ANY_SOURCE, 78) is None, "iprobe of nothing")
        comm.Recv(np.zeros(3), st.source, 77)
    else:
        comm.Send(np.array([me, 10 + me], dtype="i8"), 0, tag=10 + me)
        check(comm.recv(0, 30) == "go", "go")
        comm.send({"rank": me}, 0, tag=20)
        if me == 1:
            comm.Send(np.zeros(3), 0, tag=77)


def truncation(comm):
    """A message longer than the buffer raises TruncateError with the true size."""
    if comm.rank == 0:
        comm.Send(np.arange(100, dtype="f8"), 1, tag=9)
        comm.Send(np.arange(100, dtype="f8"), 1, tag=9)
    elif comm.rank == 1:
        try:
            comm.Recv(np.zeros(10), 0, tag=9)
            check(False, "no TruncateError")
        except tether.TruncateError as e:
            check(e.status.count == 800 and e.status.source == 0 and isinstance(e, tether.TetherError), str(e))
            check("800" in str(e), f"message names the size: {e}")
        req = comm.Irecv(np.zeros(10), 0, tag=9)
        try:
            req.wait()
            check(False, "no TruncateError from wait")
        except tether.TruncateError as e:
            check(e.status.count == 800, str(e))
        check(not req.active, "request completed")


def random_order(comm):
    """Many requests completed in random order, by wait, waitany and testall."""
    rng = random.Random(comm.rank)
    me, n = comm.rank, comm.size
    count = 40
    recvs, bufs = [], []
    for p in peers(comm):
        for k in range(count):
            b = np.zeros(k + 1, dtype="i4")
            bufs.append((p, k, b))
            recvs.append(comm.Irecv(b, p, tag=k))
    sends = []
    for p in peers(comm):
        order = list(range(count))
        rng.shuffle(order)
        for k in order:
            sends.append(comm.Isend(np.full(k + 1, me * 1000 + k, dtype="i4"), p, tag=k))
    idx = list(range(len(recvs)))
    rng.shuffle(idx)
    third = len(idx) // 3
    for i in idx[:third]:
        recvs[i].wait()
    rest = [recvs[i] for i in idx[third:]]
    done = 0
    while done < third:
        i, st = tether.Request.waitany(rest)
        check(i != tether.UNDEFINED and st.error == 0, f"waitany {i} {st}")
        done += 1
    while True:
        flag, statuses = tether.Request.testall(rest)
        if flag:
            break
        tether.progress()
    check(tether.Request.waitany(rest) == (tether.UNDEFINED, None), "waitany of completed")
    tether.Request.waitall(sends)
    for p, k, b in bufs:
        check(np.all(b == p * 1000 + k), f"from {p} tag {k}: {b}")


def dropped_buffers(comm):
    """Buffers the caller dropped while their requests are pending stay valid."""
    me = comm.rank
    if me == 0:
        sends = []
        for k in range(8):
            a = np.full(100_000 + k, k, dtype="f8")  # eager and rendezvous sizes
            sends.append(comm.Isend(a, 1, tag=k))
            del a
        gc.collect()
        junk = [np.full(100_008, -1.0) for _ in range(16)]  # reuse freed memory, if it were freed
        comm.send("go", 1, tag=99)
        tether.Request.waitall(sends)
        del junk
    elif me == 1:
        a = np.zeros(100_007)
        alive = weakref.ref(a)
        req = comm.Irecv(a, 0, tag=7)
        del a
        gc.collect()
        check(alive() is not None, "a pending receive keeps its buffer alive")
        check(comm.recv(0, tag=99) == "go", "go")
        for k in range(7):
            b = np.zeros(100_000 + k)
            comm.Recv(b, 0, tag=k)
            check(np.all(b == k), f"message {k} intact")
        tether.progress()
        a = alive()  # data moved while the caller held no reference
        check(a is not None, "still pending or done, the buffer is alive")
        req.wait()
        check(np.all(a == 7.0), "data landed in the dropped buffer")
        del a, req
        gc.collect()
        check(alive() is None, "the buffer is released once the request completed")


def rejected(comm):
    """Buffers that cannot be used as they are: clear errors, nothing sent."""
    a = np.arange(20.0)
    for bad, kind in ((a[::2], ValueError), (np.arange(12.0).reshape(3, 4)[:, :2], ValueError), ([1, 2], TypeError)):
        for call in (lambda: comm.Send(bad, 0), lambda: comm.Isend(bad, 0), lambda: comm.Irecv(bad, 0)):
            try:
                call()
                check(False, f"{type(bad)} accepted")
            except kind as e:
                check("contiguous" in str(e) or "buffer protocol" in str(e), str(e))
    ro = np.arange(4.0)
    ro.flags.writeable = False
    for target in (ro, b"bytes"):
        try:
            comm.Recv(target, 0)
            check(False, "read-only target accepted")
        except ValueError as e:
            check("read-only" in str(e), str(e))
    # The point-to-point methods bind their arguments as a Python
    # function would, with the same errors.
    for call, words in (
        (lambda: comm.Send(a), "missing required argument 'dest'"),
        (lambda: comm.Recv(), "missing required argument 'buf'"),
        (lambda: comm.Send(a, 0, 1, 2), "at most 3 arguments (4 given)"),
        (lambda: comm.Isend(a, 0, colour=1), "unexpected keyword argument 'colour'"),
        (lambda: comm.Irecv(a, 0, source=0), "multiple values for argument 'source'"),
        (lambda: comm.Send(a, "0"), "argument 'dest'"),
        (lambda: tether.Comm.Send(object(), a, 0), "Comm"),
    ):
        try:
            call()
            check(False, f"no error for {words}")
        except TypeError as e:
            check(words in str(e), str(e))
    for call, kind in (
        (lambda: comm.Send(a, comm.size), tether.RankError),
        (lambda: comm.Send(a, 0, tag=-5), tether.TagError),
        (lambda: tether.hint("NO_SUCH_HINT", "1"), tether.UnknownHintError),
        (lambda: tether.program_find("nobody"), tether.ArgError),
    ):
        try:
            call()
            check(False, "no error")
        except kind as e:
            check(e.code != 0 and e.message, repr(e))
    # TAG_UB is the largest tag: it travels, by buffer and by object; one
    # more is a TagError naming it, from every call that takes a tag.
    check(tether.TAG_UB == 2**31 - 1, f"TAG_UB {tether.TAG_UB}")
    req = comm.Isend(np.full(2, 7.0), comm.rank, tether.TAG_UB)
    got = np.zeros(2)
    status = comm.Recv(got, comm.rank, tag=tether.TAG_UB)
    req.wait()
    check(status.tag == tether.TAG_UB and list(got) == [7.0, 7.0], f"{status} {got}")
    req = comm.isend({"ub": True}, comm.rank, tag=tether.TAG_UB)
    check(comm.recv(comm.rank, tether.TAG_UB) == {"ub": True}, "object with tag TAG_UB")
    req.wait()
    over = tether.TAG_UB + 1
    for call in (
        lambda: comm.Send(a, comm.rank, over),
        lambda: comm.Isend(a, comm.rank, tag=over),
        lambda: comm.Recv(a, comm.rank, over),
        lambda: comm.Irecv(a, comm.rank, over),
        lambda: comm.send(1, comm.rank, over),
        lambda: comm.irecv(None, comm.rank, over),
        lambda: comm.Send(a, comm.rank, -(2**40)),
    ):
        try:
            call()
            check(False, "tag TAG_UB + 1 accepted")
        except tether.TagError as e:
            check(e.code == tether.ERR_TAG and "is invalid" in e.message and "TAG_UB (2147483647)" in e.message, e.message)


def identity(comm):
    """Universe, programs and hints as seen from Python."""
    progs = tether.programs()
    check([p.name for p in progs] == ["alpha", "beta"], f"{progs}")
    check(tether.universe_size() == comm.size == sum(p.size for p in progs), "sizes")
    me = tether.program_id()
    check(tether.universe_rank() == sum(p.size for p in progs[:me]) + tether.program_rank(), "ranks")
    check(comm.universe_rank(comm.rank) == comm.rank, "universe comm")
    check(tether.program_universe_rank(me, tether.program_rank()) == tether.universe_rank(), "my universe rank")
    first = 0
    for p in progs:
        for r in range(p.size):
            check(tether.program_universe_rank(p.name, r) == first + r, f"{p.name}:{r} by name")
            check(tether.program_universe_rank(p.id, r) == first + r, f"{p.name}:{r} by id")
            check(p.universe_rank(r) == first + r, f"Program.universe_rank {p.name}:{r}")
        first += p.size
    for call, kind, words in (
        (lambda: tether.program_universe_rank("beta", progs[1].size), tether.RankError, "rank 2 is outside program"),
        (lambda: tether.program_universe_rank("beta", -1), tether.RankError, "rank -1"),
        (lambda: tether.program_universe_rank(len(progs), 0), tether.ArgError, "program id 2"),
        (lambda: tether.program_universe_rank("nobody", 0), tether.ArgError, "nobody"),
        (lambda: tether.hint("RAILS", "2"), tether.UnknownHintError, "RAILS is a start-up setting"),
        (lambda: tether.hint("RAIL_POLICY", "fastest"), tether.HintValueError, "fastest"),
        (lambda: tether.hint("MAX_LINKS", "many"), tether.HintValueError, "many"),
        (lambda: tether.hint("MAX_LINKS", "-1"), tether.HintValueError, "-1"),
    ):
        try:
            call()
            check(False, f"no error for {words}")
        except kind as e:
            check(words in e.message, e.message)
    with tether.kernel():
        check(tether.hint_get("IN_KERNEL") == "1", "in kernel")
    check(tether.hint_get("IN_KERNEL") == "0", "kernel left")
    tether.hint("RAIL_POLICY", "least_used")
    check(tether.hint_get("RAIL_POLICY") == "least_used", "rail policy hint")
    tether.hint("RAIL_POLICY", "round_robin")
    check(tether.hint_get("MAX_LINKS") == "0", "no link cap by default")
    tether.hint("MAX_LINKS", "4")
    check(tether.hint_get("MAX_LINKS") == "4", "link cap hint")
    tether.hint("MAX_LINKS", "0")


def fail(comm):
    """Rank 1 raises; the others wait for a message that never comes."""
    if comm.rank == 1:
        raise RuntimeError("deliberate failure in rank 1")
    comm.Recv(np.zeros(1), 1, tag=1)


SCENARIOS = {f.__name__: f for f in (pairs, objects, wildcards, truncation, random_order, dropped_buffers, rejected, identity, fail)}

if __name__ == "__main__":
    scenario = sys.argv[1]
    tether.init()
    SCENARIOS[scenario](tether.UNIVERSE)
    print(f"ok {scenario}", flush=True)

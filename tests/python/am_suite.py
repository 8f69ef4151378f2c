"""Active messages from Python (tether.am_register, Comm.am_send) between
every process of a universe of two programs, over tether.UNIVERSE.

    python am_suite.py SCENARIO

Scenarios (each process prints "ok SCENARIO" when all its checks passed):
  reply       a request whose handler answers with am_send from inside
              (which returns None); a blocking call, tether.progress() and
              am_register from inside a handler raise ArgError, and the
              handler goes on;
  many        every rank sends every rank (itself too) messages of 0 B to
              1 MiB payload (bytes and numpy arrays, the array dropped
              right after the send) and 0 to 13 B header; each is
              delivered exactly once with its bytes intact;
  deadlock    rank 0 spins on tether.progress() for a reply while rank 1
              sits in a Barrier that rank 0 joins only after the reply;
  exceptions  a handler that raises: the exception goes to
              sys.unraisablehook, the handler keeps being called and the
              other messages arrive; a bad id, a non-callable handler, a
              bad destination are refused; the progress thread is refused
              while Python handlers are registered.
"""

import sys

import numpy as np

import tether

U = tether.UNIVERSE
SIZES = [0, 1, 100, 4096, 65536, 1 << 20]


def pattern(source, dest, n):
    return np.random.default_rng(source * 7919 + dest * 104729 + n).integers(0, 256, n, dtype=np.uint8)


def wait_until(condition):
    while not condition():
        tether.progress()


def reply(me, size):
    answers = []
    refused = []

    def on_request(source, header, payload):
        value = int.from_bytes(header, "little", signed=True)
        assert payload == b"", payload
        assert U.am_send(source, 8, (3 * value).to_bytes(4, "little", signed=True)) is None
        for name, call in [
            ("Barrier", U.Barrier),
            ("progress", tether.progress),
            ("am_register", lambda: tether.am_register(9, on_request)),
            ("Isend", lambda: U.Isend(np.zeros(1), source)),
        ]:
            try:
                call()
            except tether.ArgError as e:
                assert "handler" in str(e), e
                refused.append(name)
            else:
                raise AssertionError(f"{name} inside a handler was not refused")

    def on_reply(source, header, payload):
        assert isinstance(header, bytes) and isinstance(payload, bytes)
        answers.append((source, int.from_bytes(header, "little", signed=True)))

    tether.am_register(7, on_request)
    tether.am_register(8, on_reply)
    U.Barrier()
    peer = (me + 1) % size
    value = 100 + me
    req = U.am_send(peer, 7, value.to_bytes(4, "little", signed=True))
    assert isinstance(req, tether.Request)
    req.wait()
    wait_until(lambda: answers)
    assert answers == [(peer, 3 * value)], answers
    U.Barrier()
    assert refused == ["Barrier", "progress", "am_register", "Isend"], refused


def many(me, size):
    received = {}
    bad = []

    def on_many(source, header, payload):
        k = len(header)
        if header != bytes((source + i) % 256 for i in range(k)):
            bad.append(("header", source, k))
        n = len(payload)
        if n not in SIZES or k != 2 * SIZES.index(n) + 1:
            bad.append(("size", source, k, n))
        elif payload != pattern(source, me, n).tobytes():
            bad.append(("payload", source, n))
        received[(source, n)] = received.get((source, n), 0) + 1

    tether.am_register(5, on_many)
    U.Barrier()
    reqs = []
    for t in range(size):
        for k, n in enumerate(SIZES):
            header = bytes((me + i) % 256 for i in range(2 * k + 1))
            data = pattern(me, t, n)
            # Alternately bytes and a numpy array that is dropped at once:
            # the request keeps it alive.
            req = U.am_send(t, 5, header, data.tobytes() if k % 2 else data)
            del data
            reqs.append(req)
    tether.Request.waitall(reqs)
    wait_until(lambda: len(received) == size * len(SIZES))
    U.Barrier()
    tether.progress()
    assert not bad, bad
    expected = {(s, n): 1 for s in range(size) for n in SIZES}
    assert received == expected, {k: v for k, v in received.items() if v != 1}


def deadlock(me, size):
    answers = []
    tether.am_register(7, lambda source, header, payload: U.am_send(source, 8, header * 3))
    tether.am_register(8, lambda source, header, payload: answers.append(header))
    U.Barrier()
    both = tether.Comm.create(ranks=[0, 1]) if me <= 1 else None
    if me == 0:
        U.am_send(1, 7, b"ab").wait()
        wait_until(lambda: answers)
        assert answers == [b"ababab"], answers
    if both is not None:
        both.Barrier()
        both.free()


def exceptions(me, size):
    caught = []
    hook = sys.unraisablehook
    sys.unraisablehook = lambda u: caught.append(u)
    arrived = []

    def flaky(source, header, payload):
        arrived.append(header)
        if header.startswith(b"boom"):
            raise ValueError(f"boom from {source}")

    try:
        tether.am_register(11, flaky)
        U.Barrier()
        peer = (me + 1) % size
        for h in (b"boom-1", b"fine-1", b"boom-2", b"fine-2"):
            U.am_send(peer, 11, h).wait()
        wait_until(lambda: len(arrived) == 4)
        U.Barrier()
    finally:
        sys.unraisablehook = hook
    assert sorted(arrived) == [b"boom-1", b"boom-2", b"fine-1", b"fine-2"], arrived
    assert len(caught) == 2, caught
    assert all(isinstance(u.exc_value, ValueError) and u.object is flaky for u in caught), caught

    for bad_id in (-1, 1024):
        try:
            tether.am_register(bad_id, flaky)
        except tether.ArgError:
            pass
        else:
            raise AssertionError(f"id {bad_id} was accepted")
        try:
            U.am_send(0, bad_id)
        except tether.ArgError:
            pass
        else:
            raise AssertionError(f"sending to id {bad_id} was accepted")
    try:
        tether.am_register(12, "not callable")  # type: ignore[arg-type]
    except TypeError:
        pass
    else:
        raise AssertionError("a non-callable handler was accepted")
    try:
        U.am_send(size, 11)
    except tether.RankError:
        pass
    else:
        raise AssertionError("a bad destination was accepted")
    try:
        tether.hint("PROGRESS_THREAD", "1")
    except tether.ArgError as e:
        assert "PROGRESS_THREAD" in str(e), e
    else:
        raise AssertionError("the progress thread started beside Python handlers")
    assert tether.hint_get("PROGRESS_THREAD") == "0"
    tether.am_register(11, None)
    tether.hint("PROGRESS_THREAD", "1")
    try:
        tether.am_register(11, flaky)
    except tether.ArgError as e:
        assert "PROGRESS_THREAD" in str(e), e
    else:
        raise AssertionError("a Python handler was registered beside the progress thread")
    tether.hint("PROGRESS_THREAD", "0")
    U.Barrier()


SCENARIOS = {"reply": reply, "many": many, "deadlock": deadlock, "exceptions": exceptions}


def main():
    scenario = sys.argv[1]
    tether.init()
    me, size = U.rank, U.size
    SCENARIOS[scenario](me, size)
    U.Barrier()
    print(f"ok {scenario}", flush=True)


if __name__ == "__main__":
    main()

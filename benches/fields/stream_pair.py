"""One side of a two-process stream of 2-D double arrays, through ADIOS2's
SST engine or a Tether field, for benches/fields/sst_compare.py.

  python3 stream_pair.py sst|tether|tether-nb put|get ROWS COLS STEPS

The getter prints `<engine> <steps> steps <GB/s>`, timed from the end of
the first step to the end of the last (the first one pays for the
connection). Both engines keep at most two steps queued (SST QueueLimit=2,
Tether FIELD_QUEUE=2, its default) and move the whole array each step:
SST's writer puts one box, its reader selects the whole array.
"""

import sys
import time

import numpy as np


def sst(role, rows, cols, steps):
    import adios2

    adios = adios2.Adios()
    io = adios.declare_io("io")
    io.set_engine("SST")
    # WAN is SST's socket data plane, the one a pip wheel has everywhere.
    io.set_parameters({"DataTransport": "WAN", "QueueLimit": "2", "RendezvousReaderCount": "1",
                       "OpenTimeoutSecs": "120"})
    a = np.empty((rows, cols))
    if role == "put":
        a[...] = np.arange(a.size).reshape(rows, cols)
        var = io.define_variable("t", a, [rows, cols], [0, 0], [rows, cols], True)
        engine = io.open("stream", adios2.Mode.Write)
        for step in range(steps):
            engine.begin_step()
            a[0, 0] = step
            engine.put(var, a)
            engine.end_step()
        engine.close()
        return
    engine = io.open("stream", adios2.Mode.Read)
    got, start = 0, 0.0
    while engine.begin_step() == adios2.StepStatus.OK:
        var = io.inquire_variable("t")
        var.set_selection([[0, 0], [rows, cols]])
        engine.get(var, a)
        engine.end_step()
        assert a[0, 0] == got, (a[0, 0], got)
        if got == 0:
            start = time.perf_counter()
        got += 1
    elapsed = time.perf_counter() - start
    engine.close()
    print(f"sst {got} steps {(got - 1) * a.nbytes / elapsed / 1e9:.3f}", flush=True)


def tether_field(role, rows, cols, steps, nonblocking=False):
    """Blocking put/get, or (`nonblocking`) iput/iget with two steps in
    flight on two arrays: the producer's array is then sent as it lies,
    where put copies it so that it may be reused at once."""
    import tether

    tether.init()
    dist = tether.Dist((rows, cols), grid=(1, 1), kinds=(tether.DIST_BLOCK, tether.DIST_NONE))
    arrays = [np.empty((rows, cols)), np.empty((rows, cols))]
    pending = [None, None]
    name = "tether-nb" if nonblocking else "tether"
    if role == "put":
        for a in arrays:
            a[...] = np.arange(a.size).reshape(rows, cols)
        with tether.Field("t", np.float64, dist, peers="get", mode="put") as field:
            for step in range(steps):
                a = arrays[step % 2]
                if nonblocking:
                    if pending[step % 2] is not None:
                        pending[step % 2].wait()
                    a[0, 0] = step
                    pending[step % 2] = field.iput(step, a)
                else:
                    a[0, 0] = step
                    field.put(step, a)
            for req in pending:
                if req is not None:
                    req.wait()
        return
    start = 0.0
    with tether.Field("t", np.float64, dist, peers="put", mode="get") as field:
        for step in range(steps + (1 if nonblocking else 0)):
            if nonblocking:
                # Post the next step's get before checking this one.
                if step < steps:
                    pending[step % 2] = field.iget(step, arrays[step % 2])
                if step == 0:
                    continue
                done = step - 1
                pending[done % 2].wait()
            else:
                done = step
                field.get(step, arrays[0])
            a = arrays[done % 2] if nonblocking else arrays[0]
            assert a[0, 0] == done, (a[0, 0], done)
            if done == 0:
                start = time.perf_counter()
    elapsed = time.perf_counter() - start
    print(f"{name} {steps} steps {(steps - 1) * arrays[0].nbytes / elapsed / 1e9:.3f}", flush=True)


if __name__ == "__main__":
    engine, role = sys.argv[1], sys.argv[2]
    rows, cols, steps = (int(v) for v in sys.argv[3:6])
    if engine == "sst":
        sst(role, rows, cols, steps)
    else:
        tether_field(role, rows, cols, steps, nonblocking=engine == "tether-nb")

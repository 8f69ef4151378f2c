"""Fields from Python (tests/test_python.py): the same scenarios and
values as tests/c/field_suite.c, so a Python program can put to or get
from C ones. Program "prod" puts; every other program gets. Arguments:
shape=12x9 elem=8 steps=N <program>=R:<grid>:<kinds>:<order> (regular
distributions; kinds B, C, N, BC<k>; order C or F), nonblocking=1."""

import sys

import numpy as np

import tether

DTYPES = {1: np.uint8, 2: np.int16, 4: np.float32, 8: np.float64, 16: np.complex128}
KINDS = {"B": tether.DIST_BLOCK, "C": tether.DIST_CYCLIC, "N": tether.DIST_NONE}


def arg(key):
    values = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith(key + "=")]
    return values[-1] if values else None


def parse_dist(spec, shape):
    _, grid, kinds, order = spec.split(":")
    grid = [int(g) for g in grid.split("x")]
    codes, blocks = [], []
    for k in kinds.split(","):
        if k.startswith("BC"):
            codes.append(tether.DIST_BLOCK_CYCLIC)
            blocks.append(int(k[2:]))
        else:
            codes.append(KINDS[k])
            blocks.append(0)
    return grid, codes, blocks, "F" if order == "F" else "C"


def coords(rank, grid, order):
    c = [0] * len(grid)
    dims = range(len(grid)) if order == "F" else reversed(range(len(grid)))
    for d in dims:
        c[d] = rank % grid[d]
        rank //= grid[d]
    return c


def global_indices(shape, grid, codes, blocks, order, rank, local_shape):
    """Each local element's C-order global index, as an array of local_shape."""
    c = coords(rank, grid, order)
    axes = []
    for d, n in enumerate(shape):
        p = grid[d]
        b = {tether.DIST_BLOCK: max(1, -(-n // p)), tether.DIST_CYCLIC: 1,
             tether.DIST_NONE: max(1, n)}.get(codes[d], blocks[d])
        idx = np.arange(local_shape[d], dtype=np.uint64)
        axes.append(((idx // b) * p + c[d]) * b + idx % b)
    g = np.zeros(tuple(local_shape), dtype=np.uint64)
    for d, a in enumerate(axes):
        g = g * np.uint64(shape[d]) + a.reshape([-1 if e == d else 1 for e in range(len(shape))])
    return g


def values(step, g, elem):
    """tests/c/common.h's pattern_byte(step * 1000003 + g, k) for k < elem."""
    seed = np.uint64(step) * np.uint64(1000003) + g
    k = np.arange(elem, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = seed[..., None] * np.uint64(0x9E3779B97F4A7C15) + k * np.uint64(0xBF58476D1CE4E5B9)
    return (x >> np.uint64(56)).astype(np.uint8)


def main():
    tether.init()
    me = tether.programs()[tether._native.program_id()]
    rank = tether._native.program_rank()
    shape = [int(n) for n in arg("shape").split("x")]
    elem, steps = int(arg("elem")), int(arg("steps"))
    dtype = np.dtype(DTYPES[elem])
    grid, codes, blocks, order = parse_dist(arg(me.name), shape)
    dist = tether.Dist(shape, grid, codes, blocks, order=order)
    local_shape = dist.local_shape
    g = global_indices(shape, grid, codes, blocks, order, rank, local_shape)
    producer = me.name == "prod"
    peers = [p.name for p in tether.programs() if p.name != "prod"] if producer else "prod"
    arrays = [np.zeros(local_shape, dtype=dtype, order=order) for _ in range(2)]
    checked = 0
    with tether.Field("values", dtype, dist, peers=peers, mode="put" if producer else "get") as field:
        pending = []
        for i in range(steps):
            a = arrays[i % 2]
            if len(pending) == 2:
                checked += finish(pending.pop(0), producer, g, elem)
            if producer:
                a[...] = values(i * 3, g, elem).view(dtype)[..., 0]
            else:
                a[...] = 0
            if arg("nonblocking"):
                req = field.iput(i * 3, a) if producer else field.iget(i * 3, a)
                pending.append((req, a, i * 3))
            else:
                field.put(i * 3, a) if producer else field.get(i * 3, a)
                checked += finish((None, a, i * 3), producer, g, elem)
        for p in pending:
            checked += finish(p, producer, g, elem)
    print(f"ok field {steps} {checked}", flush=True)


def finish(pending, producer, g, elem):
    req, a, step = pending
    if req is not None:
        req.wait()
    if producer:
        return 0
    got = np.ascontiguousarray(a).view(np.uint8).reshape(a.shape + (elem,))
    want = values(step, g, elem)
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"step {step}: first wrong byte at {bad[0].tolist()}"
    return got.size


if __name__ == "__main__":
    main()

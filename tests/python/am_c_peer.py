"""Active messages between a Python program and a C one: the Python side of
tests/c/am_py_peer.c, which describes the steps. Prints "ok c-python am"."""

import numpy as np

import tether

U = tether.UNIVERSE


def payload_of(source, n):
    return ((np.arange(n, dtype=np.int64) * 31 + source) & 0xFF).astype(np.uint8)


def main():
    tether.init()
    u, size = U.rank, U.size
    partner = (u + size // 2) % size
    answers = []
    damaged = []

    def on_request(source, header, payload):
        n = int.from_bytes(header, "little", signed=True)
        if payload != payload_of(source, n).tobytes():
            damaged.append(source)
        assert U.am_send(source, 8, (3 * n).to_bytes(4, "little", signed=True), payload) is None

    def on_answer(source, header, payload):
        answers.append((source, int.from_bytes(header, "little", signed=True), payload))

    tether.am_register(7, on_request)
    tether.am_register(8, on_answer)
    U.Barrier()
    n = (1 << 20) + u
    sent = payload_of(u, n)
    U.am_send(partner, 7, n.to_bytes(4, "little", signed=True), sent).wait()
    while not answers:
        tether.progress()
    U.Barrier()
    assert not damaged, damaged
    assert len(answers) == 1, len(answers)
    source, answer, echoed = answers[0]
    assert (source, answer) == (partner, 3 * n), (source, answer)
    assert echoed == sent.tobytes()
    print("ok c-python am", flush=True)


if __name__ == "__main__":
    main()

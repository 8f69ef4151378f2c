"""Fields between real programs (DESIGN 3.8), through `tether run`: every
element of every step is checked inside the programs (tests/c/field_suite.c
computes the expected value of each local element from its global index
and the step), over TCP, shared memory, files, the hybrid transport and
two pretend hosts; every distribution kind, boxes, both storage orders,
1-D to 3-D, process counts 1, 2, 3 and 5 on either side, zero-size local
parts, element sizes 1 to 16 bytes; a producer running ahead, two
consumer programs, mismatches of type, shape and distribution, steps out
of order, and a consumer killed mid-run."""

import pytest

from conftest import clean_env, tether_run

SETUPS = {
    "tcp": {"TETHER_TRANSPORTS": "tcp"},
    "shm": {"TETHER_TRANSPORTS": "shm"},
    "file": {"TETHER_TRANSPORTS": "file"},
    "hybrid": {"TETHER_TRANSPORTS": "hybrid", "TETHER_HYBRID_THRESHOLD": "4096"},
    "mixed": {"TETHER_TRANSPORTS": "shm,tcp"},
}

# (name, producer processes, consumer processes, arguments)
CASES = [
    # The example: a 2x2 block grid to 3 ranks, block-cyclic rows,
    # the consumer in Fortran order.
    ("2d-block-to-block-cyclic", 4, 3,
     ["shape=12x9", "elem=8", "prod=R:2x2:B,B:C", "cons=R:3x1:BC2,N:F"]),
    ("1d-cyclic-5-to-3", 5, 3, ["shape=23", "elem=1", "prod=R:5:C:C", "cons=R:3:BC4:C"]),
    ("3d-fortran-to-c", 2, 2,
     ["shape=5x4x3", "elem=16", "prod=R:1x2x1:N,B,N:F", "cons=R:2x1x1:C,N,N:C"]),
    ("boxes-rows-to-overlapping", 3, 2, ["shape=10x7", "elem=4", "prod=X:rows:C", "cons=X:overlap:F"]),
    ("zero-size-parts", 5, 2, ["shape=3", "elem=2", "prod=R:5:B:C", "cons=R:2:BC2:C"]),
    ("one-element", 1, 3, ["shape=1", "elem=8", "prod=R:1:B:C", "cons=R:3:C:C"]),
    ("block-cyclic-both", 3, 5,
     ["shape=17x11", "elem=8", "prod=R:3x1:BC2,N:C", "cons=R:1x5:N,BC3:F"]),
    ("regular-to-boxes", 2, 3, ["shape=9x6", "elem=4", "prod=R:2x1:C,N:F", "cons=X:rows:C"]),
    # Both Fortran: planned mirrored, so neither side transposes.
    ("fortran-to-fortran", 3, 2,
     ["shape=7x10x3", "elem=8", "prod=R:3x1x1:BC2,N,N:F", "cons=R:1x2x1:N,C,N:F"]),
    ("fortran-boxes-to-fortran", 2, 3, ["shape=11x5", "elem=2", "prod=X:rows:F", "cons=X:overlap:F"]),
]


def field_run(p, q, prog, args, env, consumers=("cons",), timeout=120, check=True):
    cmd = ["--name", "prod", "-n", str(p), prog, *args]
    for c in consumers:
        cmd += [":", "--name", c, "-n", str(q), prog, *args]
    return tether_run(cmd, timeout=timeout, env=env, check=check)


@pytest.fixture
def suite(program):
    return program("field_suite")


def setup_env(setup, tmp_path, **extra):
    env = clean_env(**SETUPS[setup], **extra)
    env["TETHER_FILE_DIR"] = str(tmp_path)
    return env


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_element_of_every_step_arrives(built, suite, case, tmp_path):
    _, p, q, args = case
    proc = field_run(p, q, suite, [*args, "steps=20"], setup_env("tcp", tmp_path))
    assert proc.stdout.count("ok field 20") == p + q, proc.stdout


@pytest.mark.parametrize("p", [1, 2, 3, 5])
@pytest.mark.parametrize("q", [1, 2, 3, 5])
def test_every_pair_of_process_counts(built, suite, p, q, tmp_path):
    args = ["shape=29x4", "elem=4", f"prod=R:{p}x1:BC3,N:C", f"cons=R:1x{q}:N,C:F", "steps=4"]
    if q > 4:
        args[-2] = f"cons=R:{q}x1:C,N:F"
    proc = field_run(p, q, suite, args, setup_env("shm", tmp_path))
    assert proc.stdout.count("ok field 4") == p + q, proc.stdout


@pytest.mark.parametrize("setup", ["shm", "file", "hybrid", "mixed"])
def test_every_transport_carries_fields(built, suite, setup, tmp_path):
    args = ["shape=64x48", "elem=8", "prod=R:2x2:B,B:C", "cons=R:3x1:BC5,N:F", "steps=6"]
    proc = field_run(4, 3, suite, args, setup_env(setup, tmp_path))
    assert proc.stdout.count("ok field 6") == 7, proc.stdout


# Strided producer parts that iput hands to the transport as they lie.
STRIDED = {
    # Rows of 8 KiB dealt two at a time to 3 consumers: runs of 16 KiB with
    # gaps, gathered as iovecs (writev, process_vm_writev; packed for files).
    "long-runs": ["shape=96x1024", "prod=R:2x1:B,N:C", "cons=R:3x1:BC2,N:C"],
    # Columns dealt 64 at a time: 700 KB of 512-byte runs, more than a
    # ring or tcp's stage holds, copied from the runs as the transport
    # writes (tcp through its stage, shm into the ring).
    "short-runs": ["shape=512x1024", "prod=R:2x1:B,N:C", "cons=R:1x3:N,BC64:C"],
}


@pytest.mark.parametrize("runs", STRIDED)
@pytest.mark.parametrize("setup", ["tcp", "shm", "file", "hybrid"])
def test_iput_hands_strided_parts_to_the_transport(built, suite, setup, runs, tmp_path):
    args = [*STRIDED[runs], "elem=8", "steps=4", "nonblocking=1"]
    proc = field_run(2, 3, suite, args, setup_env(setup, tmp_path))
    assert proc.stdout.count("ok field 4") == 5, proc.stdout


def test_large_steps_go_by_rendezvous_into_place(built, suite, tmp_path):
    # 512x512 doubles: every message is far above the eager limit.
    args = ["shape=512x512", "elem=8", "prod=R:2x1:B,N:C", "cons=R:3x1:B,N:C", "steps=4"]
    proc = field_run(2, 3, suite, args, setup_env("shm", tmp_path))
    assert proc.stdout.count("ok field 4") == 5, proc.stdout


def test_a_producer_running_ahead_blocks_at_the_queue_and_loses_nothing(built, suite, tmp_path):
    args = ["shape=40x30", "elem=8", "prod=R:2x1:B,N:C", "cons=R:1x3:N,C:C", "steps=20",
            "slow=cons", "nonblocking=1"]
    proc = field_run(2, 3, suite, args, setup_env("tcp", tmp_path, TETHER_FIELD_QUEUE=1))
    assert proc.stdout.count("ok field 20") == 5, proc.stdout


def test_fields_created_in_different_orders_on_the_two_sides(built, suite, tmp_path):
    args = ["shape=16x12", "elem=8", "prod=R:2x2:B,C:C", "cons=R:3x1:BC3,N:C", "steps=10", "twofields=1"]
    proc = field_run(4, 3, suite, args, setup_env("tcp", tmp_path))
    assert proc.stdout.count("ok field 10") == 7, proc.stdout


def test_a_producer_at_the_queue_limit_holds_the_next_step_back(built, suite, tmp_path):
    # With FIELD_QUEUE=1 the producer's iput of the second step stays
    # pending (tested 100 times) while the consumer, held back by a
    # point-to-point message, has not taken the first; then both arrive.
    args = ["shape=16x8", "elem=8", "prod=R:1x1:B,N:C", "cons=R:1x1:N,C:F", "queuecheck=1", "steps=2"]
    for setup in ("tcp", "shm"):
        proc = field_run(1, 1, suite, args, setup_env(setup, tmp_path, TETHER_FIELD_QUEUE=1))
        assert "[prod:0] ok queue: step 3 waited for step 0 to be taken" in proc.stdout, proc.stdout
        assert "[cons:0] ok queue: got steps 0 and 3" in proc.stdout, proc.stdout


@pytest.mark.parametrize("setup", ["tcp", "shm"])
def test_a_name_used_again_gets_nothing_of_the_field_before(built, suite, setup, tmp_path):
    # The first "values" is left by its consumers after one step while the
    # producer puts five more, then freed by both without waiting for each
    # other: its data, end announcement and leave acknowledgements still in
    # flight must not be taken for the second field's.
    args = ["shape=24x16", "elem=8", "prod=R:2x1:B,N:C", "cons=R:1x3:N,C:F", "steps=10", "reuse=1"]
    for _ in range(3):
        proc = field_run(2, 3, suite, args, setup_env(setup, tmp_path, TETHER_FIELD_QUEUE=4))
        assert proc.stdout.count("ok field 10") == 5, proc.stdout


def test_two_consumer_programs_each_get_every_step(built, suite, tmp_path):
    args = ["shape=30x20", "elem=4", "prod=R:3x1:B,N:C", "cons=R:2x1:C,N:C",
            "cons2=R:1x2:N,BC3:F", "steps=20", "slow=cons2"]
    proc = field_run(3, 2, suite, args, setup_env("tcp", tmp_path), consumers=("cons", "cons2"))
    assert proc.stdout.count("ok field 20") == 7, proc.stdout


@pytest.mark.parametrize("what,extra", [
    ("type", ["constype=INT64"]),
    ("shape", ["consshape=12x8"]),
    ("distribution", ["prod=X:half:C"]),
])
def test_a_mismatch_is_reported_on_both_sides(built, suite, what, extra, tmp_path):
    args = ["shape=12x9", "elem=8", "prod=R:2x1:B,N:C", "cons=R:3x1:B,N:C", "steps=3",
            "expect=mismatch", *extra]
    proc = field_run(2, 3, suite, args, setup_env("tcp", tmp_path))
    assert proc.stdout.count("ok mismatch") == 5, proc.stdout
    assert "TETHER_ERR_FIELD_MISMATCH" in proc.stdout or "disagrees" in proc.stdout
    assert '"values"' in proc.stdout, "the message names the field"


def test_steps_out_of_order_are_refused_and_nothing_is_lost(built, suite, tmp_path):
    args = ["shape=8x8", "elem=8", "prod=R:2x1:B,N:C", "cons=R:2x1:C,N:C", "steps=5",
            "wrongstep=1"]
    proc = field_run(2, 2, suite, args, setup_env("tcp", tmp_path))
    assert proc.stdout.count("ok field 5") == 4, proc.stdout
    assert "step 0 after step 0: steps must increase" in proc.stdout
    assert "get of step 3, but the producer's next step is 0" in proc.stdout


def test_a_consumer_killed_mid_run_fails_the_producer_with_peer_lost(built, suite, tmp_path):
    args = ["shape=20x20", "elem=8", "prod=R:2x1:B,N:C", "cons=R:2x1:B,N:C", "steps=50",
            "die=cons:1:5"]
    proc = field_run(2, 2, suite, args, setup_env("tcp", tmp_path, TETHER_FIELD_QUEUE=1), timeout=90)
    assert proc.stdout.count("ok lost") >= 2, proc.stdout


def test_a_producer_killed_mid_run_fails_its_consumers_and_nothing_hangs(built, suite, tmp_path):
    # prod:1 feeds cons:1 only: cons:1 must see PEER_LOST; prod:0 and
    # cons:0 exchange nothing with it and complete every step.
    args = ["shape=20x20", "elem=8", "prod=R:2x1:B,N:C", "cons=R:2x1:B,N:C", "steps=50",
            "die=prod:1:5"]
    proc = field_run(2, 2, suite, args, setup_env("tcp", tmp_path), timeout=90)
    assert "[cons:1] ok lost: TETHER_ERR_PEER_LOST" in proc.stdout, proc.stdout
    assert "prod:1" in proc.stdout.split("[cons:1] ok lost:")[1].splitlines()[0], "names the lost process"
    assert "[cons:0] ok field 50" in proc.stdout, proc.stdout


def test_a_consumer_program_that_never_starts_fails_the_producer_with_timeout(built, suite, tmp_path):
    # Every program joins before tether_init returns: the producer's init
    # fails, naming the program that did not come, instead of steps
    # queuing for ever.
    import subprocess

    env = clean_env(TETHER_RENDEZVOUS=str(tmp_path), TETHER_PROGRAM="prod", TETHER_PROGRAMS="prod,cons",
                    TETHER_RANK="0", TETHER_SIZE="1", TETHER_CONNECT_TIMEOUT="1")
    proc = subprocess.run([suite, "shape=4", "elem=8", "prod=R:1:B:C", "cons=R:1:B:C", "steps=2"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode != 0
    assert "TETHER_ERR_TIMEOUT: program(s) cons did not join within 1 s" in proc.stderr, proc.stderr

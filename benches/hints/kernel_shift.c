/* The experiment of the hint paper ("What communication library can do
 * with a little hint from programmers?"), on Tether: a preparation phase
 * that talks to everybody (a 64-byte all-to-all among all ranks) and a
 * kernel that talks to one neighbour (a shift to the right, 100 B to
 * 1 MiB), with IN_KERNEL around the kernel when HINT=1. Each process
 * prints its memory (peak resident, plus what its links hold in the
 * kernel and in touched shared rings) and the kernel's time per shift;
 * benches/hints/kernel_shift.py runs it for growing process counts.
 *
 * Output (every rank): "memory_kib <k> links <l> links_peak <p> retires
 * <r>" (links now, the most at once, and retires under TETHER_MAX_LINKS;
 * counted after up to 200 ms of progress outside the kernel, in which
 * the cap retires the links over it)
 * and, from rank 0,
 * "shift <bytes> <us per iteration>". */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hints_bench.h"

#define U TETHER_COMM_UNIVERSE

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void check(int rc, const char *what) {
    if (rc == TETHER_SUCCESS) return;
    char detail[TETHER_MAX_ERROR_STRING];
    tether_last_error(detail, sizeof detail);
    fprintf(stderr, "%s: %s\n", what, detail);
    exit(1);
}

int main(int argc, char **argv) {
    check(tether_init(&argc, &argv), "init");
    int me, n;
    check(tether_universe_rank(&me), "rank");
    check(tether_comm_size(U, &n), "size");
    int hint = getenv("HINT") && !strcmp(getenv("HINT"), "1");
    int right = (me + 1) % n, left = (me + n - 1) % n;
    size_t sizes[] = {100, 1024, 16384, 1 << 20};
    char *a2a_out = calloc((size_t)n, 64), *a2a_in = calloc((size_t)n, 64);
    char *out = malloc(1 << 20), *in = malloc(1 << 20);
    memset(out, me, 1 << 20);
    for (int round = 0; round < 3; round++) {
        for (int p = 0; p < 10; p++)
            check(tether_alltoall(a2a_out, 64, TETHER_BYTE, a2a_in, 64, TETHER_BYTE, U), "alltoall");
        if (hint) check(tether_hint("IN_KERNEL", "1"), "hint");
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            int iters = sizes[s] >= (1 << 20) ? 50 : 1000;
            check(tether_barrier(U), "barrier");
            double t = now_us();
            for (int i = 0; i < iters; i++) {
                tether_request reqs[2];
                check(tether_irecv(in, (int64_t)sizes[s], TETHER_BYTE, left, 1, U, &reqs[0]), "irecv");
                check(tether_isend(out, (int64_t)sizes[s], TETHER_BYTE, right, 1, U, &reqs[1]), "isend");
                check(tether_waitall(2, reqs, TETHER_STATUSES_IGNORE), "waitall");
            }
            double per = (now_us() - t) / iters;
            if (me == 0 && round == 2) printf("shift %zu %.2f\n", sizes[s], per);
        }
        if (hint) check(tether_hint("IN_KERNEL", "0"), "hint");
    }
    /* Outside a kernel the cap retires the links over it (inside one it
     * waits): let progress run a moment, as the next preparation phase
     * would, before the links and their kernel buffers are counted. */
    const char *cap_env = getenv("TETHER_MAX_LINKS");
    int cap = cap_env ? atoi(cap_env) : 0;
    check(tether_barrier(U), "barrier");
    double settle_until = now_us() + 200e3;
    while (cap > 0 && stat_of("links") > cap && now_us() < settle_until) {
        int flag;
        check(tether_iprobe(TETHER_ANY_SOURCE, 99, U, &flag, TETHER_STATUS_IGNORE), "iprobe");
    }
    check(tether_barrier(U), "barrier");
    long kib = status_kib("VmHWM:") + (long)((stat_of("link_kernel_bytes") + stat_of("link_ring_resident_bytes") +
                                              stat_of("mailbox_resident_bytes")) /
                                             1024);
    printf("memory_kib %ld links %lld links_peak %lld retires %lld anon_kib %ld shmem_kib %ld\n", kib,
           (long long)stat_of("links"), (long long)stat_of("links_peak"), (long long)stat_of("link_retires"),
           status_kib("RssAnon:"), status_kib("RssShmem:"));
    fflush(stdout);
    check(tether_finalize(), "finalize");
    return 0;
}

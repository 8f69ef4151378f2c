/* What an idle peer costs: every process of a universe of N exchanges
 * messages with its two neighbours in a ring (the kernel of a shift)
 * and with nobody else, then prints its resident memory (VmRSS), its
 * links and their memory (the stats), so that benches/hints/idle_peers.py
 * can compare universes of different sizes: the peers a process never
 * contacts should cost it (almost) nothing.
 *
 *   tether run --name p -n N ./idle_peers
 *
 * Output (every rank): "rss_kib <k> links <l> link_bytes <b>". */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hints_bench.h"

int main(int argc, char **argv) {
    if (tether_init(&argc, &argv) != TETHER_SUCCESS) return 1;
    int me, n;
    tether_universe_rank(&me);
    tether_comm_size(TETHER_COMM_UNIVERSE, &n);
    int right = (me + 1) % n, left = (me + n - 1) % n;
    /* Every receive is posted before any message is sent, so that no
     * message waits in the unexpected queue: with many processes on few
     * cores a neighbour runs ahead, and the buffers that queue keeps
     * (up to 16 spare ones) would grow with N for reasons of timing, not
     * of idle peers. */
    enum { ROUNDS = 100, BYTES = 4096 };
    static char out[BYTES], in[ROUNDS][BYTES];
    memset(out, me, sizeof out);
    tether_request reqs[2 * ROUNDS];
    for (int i = 0; i < ROUNDS; i++)
        tether_irecv(in[i], BYTES, TETHER_BYTE, left, 0, TETHER_COMM_UNIVERSE, &reqs[i]);
    for (int i = 0; i < ROUNDS; i++)
        tether_isend(out, BYTES, TETHER_BYTE, right, 0, TETHER_COMM_UNIVERSE, &reqs[ROUNDS + i]);
    if (tether_waitall(2 * ROUNDS, reqs, TETHER_STATUSES_IGNORE) != TETHER_SUCCESS) return 2;
    long bytes = (long)(stat_of("link_user_bytes") + stat_of("link_kernel_bytes") +
                        stat_of("link_ring_resident_bytes"));
    printf("rss_kib %ld links %lld link_bytes %ld\n", status_kib("VmRSS:"), (long long)stat_of("links"), bytes);
    fflush(stdout);
    /* IDLE_PAUSE=s: stay that long before finalizing, for a look at
     * /proc/<pid>/smaps. */
    const char *pause = getenv("IDLE_PAUSE");
    if (pause) nanosleep(&(struct timespec){.tv_sec = atoi(pause)}, NULL);
    tether_finalize();
    return 0;
}

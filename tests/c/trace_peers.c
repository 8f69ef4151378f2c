/* The trace test's C program (tests/test_trace.py; the same scenario as
   tests/fortran/trace_peers.f90 and tests/python/trace_peers.py): for
   `rounds` rounds, every process posts a receive from and a send of 8
   doubles to every process of the other programs (tag round*1000 +
   sender's universe rank) and waits for all; the processes of program
   `late` sleep `delay_ms` before sending. Then an allreduce over the
   universe, checked.

   usage: trace_peers ROUNDS LATE DELAY_MS */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    int rounds = atoi(argv[1]), delay_ms = atoi(argv[3]);
    int me, n, id, rank, size;
    char name[TETHER_MAX_PROGRAM_NAME];
    CHECK(tether_universe_rank(&me));
    CHECK(tether_universe_size(&n));
    CHECK(tether_program_id(&id));
    CHECK(tether_program_rank(&rank));
    CHECK(tether_program_size(id, &size));
    CHECK(tether_program_name(id, name, sizeof name));
    int first = me - rank, late = !strcmp(name, argv[2]);
    double *in = calloc((size_t)n * 8, sizeof *in), out[8];
    tether_request *reqs = calloc((size_t)n * 2, sizeof *reqs);
    for (int round = 0; round < rounds; round++) {
        int k = 0;
        for (int q = 0; q < n; q++)
            if (q < first || q >= first + size)
                CHECK(tether_irecv(in + q * 8, 8, TETHER_DOUBLE, q, round * 1000 + q, TETHER_COMM_UNIVERSE, &reqs[k++]));
        if (late) {
            struct timespec pause = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
            nanosleep(&pause, NULL);
        }
        for (int i = 0; i < 8; i++) out[i] = me * 100 + round + i;
        for (int q = 0; q < n; q++)
            if (q < first || q >= first + size)
                CHECK(tether_isend(out, 8, TETHER_DOUBLE, q, round * 1000 + me, TETHER_COMM_UNIVERSE, &reqs[k++]));
        CHECK(tether_waitall(k, reqs, TETHER_STATUSES_IGNORE));
        for (int q = 0; q < n; q++)
            if (q < first || q >= first + size)
                EXPECT(in[q * 8 + 7] == q * 100 + round + 7, "round %d: wrong data from %d", round, q);
    }
    double one = 1, all = 0;
    CHECK(tether_allreduce(&one, &all, 1, TETHER_DOUBLE, TETHER_SUM, TETHER_COMM_UNIVERSE));
    EXPECT(all == n, "allreduce gave %g, expected %d", all, n);
    printf("ok trace %s:%d\n", name, rank);
    free(in);
    free(reqs);
    CHECK(tether_finalize());
    return 0;
}

/* tether_finalize with a send still pending returns within
 * TETHER_FINALIZE_TIMEOUT. Rank 0 starts a 64 MiB send that rank 1 never
 * receives, sends one small message that rank 1 does receive (so both
 * know the other is alive), and finalizes: rank 1 meanwhile computes for
 * 20 s without calling Tether, so neither the data nor its goodbye comes.
 * Rank 0 prints how long its finalize took. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "common.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    int me;
    CHECK(tether_universe_rank(&me));
    int token = 42;
    if (me == 0) {
        const int64_t len = 64 << 20;
        unsigned char *big = xmalloc((size_t)len);
        memset(big, 7, (size_t)len);
        tether_request pending;
        CHECK(tether_isend(big, len, TETHER_BYTE, 1, 1, TETHER_COMM_UNIVERSE, &pending));
        CHECK(tether_send(&token, 1, TETHER_INT, 1, 2, TETHER_COMM_UNIVERSE));
        double t0 = now_s();
        CHECK(tether_finalize());
        printf("finalized in %.2f s with a send pending\n", now_s() - t0);
        fflush(stdout);
        return 0;
    }
    CHECK(tether_recv(&token, 1, TETHER_INT, 0, 2, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
    printf("received the small message; computing\n");
    fflush(stdout);
    double until = now_s() + 20;
    volatile double x = 0;
    while (now_s() < until)
        x += 1;
    CHECK(tether_finalize());
    return 0;
}

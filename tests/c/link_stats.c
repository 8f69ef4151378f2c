/* The links and their memory as the stats report them, for
 * tests/test_link_stats.py. Every process exchanges one message with
 * every other (so each holds a link to each), prints its pid and the
 * link figures, then waits (without calling Tether) until the file
 * named by TEST_GATE exists, so that the test can compare the figures
 * with what /proc and `ss -m` say, and finalizes. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include <unistd.h>

#include "common.h"

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    int me, n;
    CHECK(tether_universe_rank(&me));
    CHECK(tether_comm_size(TETHER_COMM_UNIVERSE, &n));
    for (int peer = 0; peer < n; peer++) {
        if (peer == me) continue;
        int out = me, in = -1;
        tether_request reqs[2];
        CHECK(tether_irecv(&in, 1, TETHER_INT, peer, 1, TETHER_COMM_UNIVERSE, &reqs[0]));
        CHECK(tether_isend(&out, 1, TETHER_INT, peer, 1, TETHER_COMM_UNIVERSE, &reqs[1]));
        CHECK(tether_waitall(2, reqs, TETHER_STATUSES_IGNORE));
        EXPECT(in == peer, "got %d from %d", in, peer);
    }
    const char *names[] = {"links", "tcp.links", "shm.links", "link_user_bytes", "link_kernel_bytes",
                           "link_ring_bytes", "link_ring_resident_bytes", "link_bytes_peak",
                           "tcp_shared_bytes"};
    printf("pid %d\n", (int)getpid());
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int64_t value = 0;
        int rc = tether_stats_read(names[i], &value);
        printf("%s %lld\n", names[i], rc == TETHER_SUCCESS ? (long long)value : -1LL);
    }
    printf("ready\n");
    fflush(stdout);
    const char *gate = getenv("TEST_GATE");
    while (gate && access(gate, F_OK) != 0)
        nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
    CHECK(tether_finalize());
    return 0;
}

/* First contact: rank 0 waits 300 ms (every other rank meanwhile waits in
 * a blocking receive from it), then sends each rank an int and waits for
 * its answer, twice, and prints each round trip. The first round is a
 * first contact (the route to the peer settles then); the second is not.
 *
 *   TETHER_TRANSPORTS=shm tether run --name a -n 4 ./first_contact
 *
 * (docs/journal/2026-11-28-first-contact.md) */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "tether.h"

#define U TETHER_COMM_UNIVERSE

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    tether_init(&argc, &argv);
    int me, n, x = 0;
    tether_comm_rank(U, &me);
    tether_comm_size(U, &n);
    if (me == 0) {
        usleep(300000);
        const char *round[2] = {"first", "second"};
        for (int r = 0; r < 2; r++) {
            for (int p = 1; p < n; p++) {
                double t = now_ms();
                tether_send(&x, 1, TETHER_INT, p, 1, U);
                tether_recv(&x, 1, TETHER_INT, p, 2, U, TETHER_STATUS_IGNORE);
                printf("%s rtt to %d: %.3f ms\n", round[r], p, now_ms() - t);
            }
        }
    } else {
        for (int r = 0; r < 2; r++) {
            tether_recv(&x, 1, TETHER_INT, 0, 1, U, TETHER_STATUS_IGNORE);
            tether_send(&x, 1, TETHER_INT, 0, 2, U);
        }
    }
    tether_finalize();
    return 0;
}

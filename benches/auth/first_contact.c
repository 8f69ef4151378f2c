/* What a link costs to set up: universe rank 0 times its first round trip
 * with rank 1 (which includes the connection and the handshake) and then
 * the mean of --iters round trips on the open link, and prints both in
 * microseconds. Run twice, with and without TETHER_KEY, to see what the
 * authenticated handshake adds (benches/auth/compare.py):
 *
 *   first_contact [iters]
 *
 * Output (rank 0): "first_rtt_us <x>" and "rtt_us <y>".
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <tether.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void check(int rc, const char *what)
{
    if (rc == TETHER_SUCCESS)
        return;
    char detail[TETHER_MAX_ERROR_STRING];
    tether_last_error(detail, sizeof detail);
    fprintf(stderr, "%s failed: %s\n", what, detail);
    exit(1);
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 1000;
    check(tether_init(&argc, &argv), "tether_init");
    int me;
    check(tether_comm_rank(TETHER_COMM_UNIVERSE, &me), "tether_comm_rank");
    int peer = 1 - me;
    char byte = 0;
    /* Both are in the universe and neither has contacted the other (links
     * are made on first use). Rank 0 waits until rank 1 surely sits in its
     * receive, so that the first round trip times the link's set-up, not
     * the other process's start. */
    if (me == 0)
        nanosleep(&(struct timespec){.tv_nsec = 300000000}, NULL);
    double first = 0, total = 0;
    for (int i = 0; i <= iters; i++) {
        double t0 = now_us();
        if (me == 0) {
            check(tether_send(&byte, 1, TETHER_BYTE, peer, 1, TETHER_COMM_UNIVERSE), "send");
            check(tether_recv(&byte, 1, TETHER_BYTE, peer, 1, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE), "recv");
        } else {
            check(tether_recv(&byte, 1, TETHER_BYTE, peer, 1, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE), "recv");
            check(tether_send(&byte, 1, TETHER_BYTE, peer, 1, TETHER_COMM_UNIVERSE), "send");
        }
        double dt = now_us() - t0;
        if (i == 0)
            first = dt;
        else
            total += dt;
    }
    if (me == 0)
        printf("first_rtt_us %.2f\nrtt_us %.3f\n", first, total / iters);
    check(tether_finalize(), "tether_finalize");
    return 0;
}

/* The C half of the per-call cost measurement of benches/python/compare.py:
 * one process (a universe of one) sends 8 bytes to itself and receives
 * them, ITERS times, after a warm-up, and prints `self <bytes> <us per
 * send+recv pair>`. pingpong.py --self makes the same calls from Python,
 * so the difference is what Python adds to one send and one receive,
 * without the scheduling noise of two processes waking each other. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <tether.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    if (tether_init_as("self", 0, 1) != TETHER_SUCCESS) return 1;
    unsigned char s[8] = {1}, r[8];
    double t0 = 0;
    for (long i = 0; i < iters + iters / 10; i++) {
        if (i == iters / 10) t0 = now_us();
        if (tether_send(s, 8, TETHER_BYTE, 0, 1, TETHER_COMM_UNIVERSE) != TETHER_SUCCESS ||
            tether_recv(r, 8, TETHER_BYTE, 0, 1, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE) != TETHER_SUCCESS)
            return 1;
    }
    printf("self 8 %.3f\n", (now_us() - t0) / (double)iters);
    return tether_finalize() == TETHER_SUCCESS ? 0 : 1;
}

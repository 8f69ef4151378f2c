/* One-sided operations and active messages between two processes of
 * Tether, beside its two-sided ping-pong in the same run
 * (benches/compare_rma.py runs it with mpi_rma.c's MPI figures).
 *
 * Rank 0 is the origin; rank 1 the target, waiting in tether_recv (a
 * blocking call, which serves remote accesses) until rank 0 is done.
 * Output (rank 0), one line per measurement, microseconds per operation
 * or MB/s (1 MB = 1e6 bytes):
 *   pingpong_rtt 8 <us>   two-sided round trip
 *   put_flush 8 <us>      put, then flush of the target
 *   get_flush 8 <us>
 *   fetch_op 8 <us>       fetch_and_op INT64 SUM, then flush
 *   am_rtt 8 <us>         active message answered from its handler
 *   put_bw <bytes> <MB/s> a window of 16 puts, then one flush */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tether.h"

#define U TETHER_COMM_UNIVERSE
#define CHECK(call)                                                          \
    do {                                                                     \
        int rc_ = (call);                                                    \
        if (rc_) {                                                           \
            char m_[TETHER_MAX_ERROR_STRING];                                \
            tether_last_error(m_, sizeof m_);                                \
            fprintf(stderr, "%s:%d: %s: %d %s\n", __FILE__, __LINE__, #call, \
                    rc_, m_);                                                \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int me;
static volatile int replies;

static void on_ping(void *ctx, int source, const void *h, size_t hl, const void *p, size_t pl) {
    (void)ctx, (void)h, (void)hl;
    tether_request r;
    CHECK(tether_am_send(source, 2, NULL, 0, p, pl, U, &r));
}

static void on_pong(void *ctx, int source, const void *h, size_t hl, const void *p, size_t pl) {
    (void)ctx, (void)source, (void)h, (void)hl, (void)p, (void)pl;
    replies++;
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 20000;
    CHECK(tether_init(&argc, &argv));
    CHECK(tether_comm_rank(U, &me));
    CHECK(tether_am_register(1, on_ping, NULL));
    CHECK(tether_am_register(2, on_pong, NULL));
    size_t big = 16 << 20;
    unsigned char *window = calloc(big, 1), *buf = calloc(big, 1);
    tether_win win;
    CHECK(tether_win_create(window, (int64_t)big, U, &win));
    if (me == 0) {
        char small[8] = {0};
        double t = 0;
        long warm = iters / 10;
        for (long i = -warm; i < iters; i++) {
            if (i == 0) t = now_us();
            CHECK(tether_send(small, 8, TETHER_BYTE, 1, 1, U));
            CHECK(tether_recv(small, 8, TETHER_BYTE, 1, 1, U, TETHER_STATUS_IGNORE));
        }
        printf("pingpong_rtt 8 %.3f\n", (now_us() - t) / iters);
        for (long i = -warm; i < iters; i++) {
            if (i == 0) t = now_us();
            CHECK(tether_put(small, 8, TETHER_BYTE, 1, 0, win));
            CHECK(tether_win_flush(1, win));
        }
        printf("put_flush 8 %.3f\n", (now_us() - t) / iters);
        for (long i = -warm; i < iters; i++) {
            if (i == 0) t = now_us();
            CHECK(tether_get(small, 8, TETHER_BYTE, 1, 0, win));
            CHECK(tether_win_flush(1, win));
        }
        printf("get_flush 8 %.3f\n", (now_us() - t) / iters);
        int64_t one = 1, old;
        for (long i = -warm; i < iters; i++) {
            if (i == 0) t = now_us();
            CHECK(tether_fetch_and_op(&one, &old, TETHER_INT64, 1, 64, TETHER_SUM, win));
            CHECK(tether_win_flush(1, win));
        }
        printf("fetch_op 8 %.3f\n", (now_us() - t) / iters);
        for (long i = -warm; i < iters; i++) {
            if (i == 0) t = now_us();
            int before = replies;
            tether_request r;
            CHECK(tether_am_send(1, 1, NULL, 0, small, 8, U, &r));
            CHECK(tether_wait(&r, TETHER_STATUS_IGNORE));
            while (replies == before) CHECK(tether_progress());
        }
        printf("am_rtt 8 %.3f\n", (now_us() - t) / iters);
        size_t sizes[] = {1 << 20, 16 << 20};
        for (int s = 0; s < 2; s++) {
            size_t len = sizes[s];
            int chunks = 16, rounds = len >= (16 << 20) ? 10 : 40;
            size_t part = len / chunks;
            for (int r = -2; r < rounds; r++) {
                if (r == 0) t = now_us();
                for (int c = 0; c < chunks; c++)
                    CHECK(tether_put(buf + c * part, (int64_t)part, TETHER_BYTE, 1, (int64_t)(c * part), win));
                CHECK(tether_win_flush(1, win));
            }
            printf("put_bw %zu %.1f\n", len, (double)len * rounds / (now_us() - t));
        }
        int done = 1;
        CHECK(tether_send(&done, 1, TETHER_INT, 1, 9, U));
    } else {
        char small[8];
        long warm = iters / 10;
        for (long i = -warm; i < iters; i++) {
            CHECK(tether_recv(small, 8, TETHER_BYTE, 0, 1, U, TETHER_STATUS_IGNORE));
            CHECK(tether_send(small, 8, TETHER_BYTE, 0, 1, U));
        }
        int done;
        CHECK(tether_recv(&done, 1, TETHER_INT, 0, 9, U, TETHER_STATUS_IGNORE));
    }
    CHECK(tether_win_free(&win));
    CHECK(tether_finalize());
    free(window), free(buf);
    return 0;
}

/* A 2-D heat halo exchange: an N x N grid in bands of rows, one band per
 * process; every step each band sends its edge rows to its neighbours'
 * ghost rows and relaxes its interior. Two versions of the exchange in
 * one run, the same computation around them:
 *   isend   tether_irecv/tether_isend of the edge rows, then waitall;
 *   put     tether_put of the edge rows into the neighbours' windows
 *           (their ghost rows), then tether_win_fence.
 * Prints, from rank 0:  halo_<version> <N> <us per step>
 * and checks that both versions computed the same grid, bit for bit. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tether.h"

#define U TETHER_COMM_UNIVERSE
#define CHECK(call)                                                            \
    do {                                                                       \
        int rc_ = (call);                                                      \
        if (rc_) {                                                             \
            char m_[TETHER_MAX_ERROR_STRING];                                  \
            tether_last_error(m_, sizeof m_);                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, m_); \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static int me, size, n, rows;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* Row r of a band of `rows` rows with a ghost row above (0) and below (rows+1). */
#define AT(g, r, c) ((g)[(size_t)(r) * n + (c)])

static void relax(const double *old, double *new) {
    for (int r = 1; r <= rows; r++)
        for (int c = 1; c < n - 1; c++)
            AT(new, r, c) = 0.25 * (AT(old, r - 1, c) + AT(old, r + 1, c) + AT(old, r, c - 1) + AT(old, r, c + 1));
}

static void exchange_isend(double *g) {
    tether_request reqs[4];
    int k = 0;
    if (me > 0) {
        CHECK(tether_irecv(&AT(g, 0, 0), n, TETHER_DOUBLE, me - 1, 1, U, &reqs[k++]));
        CHECK(tether_isend(&AT(g, 1, 0), n, TETHER_DOUBLE, me - 1, 2, U, &reqs[k++]));
    }
    if (me < size - 1) {
        CHECK(tether_irecv(&AT(g, rows + 1, 0), n, TETHER_DOUBLE, me + 1, 2, U, &reqs[k++]));
        CHECK(tether_isend(&AT(g, rows, 0), n, TETHER_DOUBLE, me + 1, 1, U, &reqs[k++]));
    }
    CHECK(tether_waitall(k, reqs, TETHER_STATUSES_IGNORE));
}

static void exchange_put(double *g, tether_win win) {
    int64_t row = (int64_t)n * 8;
    if (me > 0) CHECK(tether_put(&AT(g, 1, 0), n, TETHER_DOUBLE, me - 1, (rows + 1) * row, win));
    if (me < size - 1) CHECK(tether_put(&AT(g, rows, 0), n, TETHER_DOUBLE, me + 1, 0, win));
    CHECK(tether_win_fence(win));
}

static double *run(int steps, int use_put, double *us) {
    size_t cells = (size_t)(rows + 2) * n;
    double *a = calloc(cells, 8), *b = calloc(cells, 8);
    for (int r = 0; r < rows + 2; r++)
        for (int c = 0; c < n; c++) AT(a, r, c) = AT(b, r, c) = (me * rows + r) % 7 + c % 5;
    tether_win wa = 0, wb = 0;
    if (use_put) {
        CHECK(tether_win_create(a, (int64_t)cells * 8, U, &wa));
        CHECK(tether_win_create(b, (int64_t)cells * 8, U, &wb));
    }
    CHECK(tether_barrier(U));
    double t = now_us();
    for (int s = 0; s < steps; s++) {
        double *old = s % 2 ? b : a, *new = s % 2 ? a : b;
        if (use_put) exchange_put(old, s % 2 ? wb : wa);
        else exchange_isend(old);
        relax(old, new);
    }
    CHECK(tether_barrier(U));
    *us = (now_us() - t) / steps;
    if (use_put) {
        CHECK(tether_win_free(&wa));
        CHECK(tether_win_free(&wb));
    }
    free(steps % 2 ? a : b);
    return steps % 2 ? b : a;
}

int main(int argc, char **argv) {
    n = argc > 1 ? atoi(argv[1]) : 1024;
    int steps = argc > 2 ? atoi(argv[2]) : 200;
    CHECK(tether_init(&argc, &argv));
    CHECK(tether_comm_rank(U, &me));
    CHECK(tether_comm_size(U, &size));
    rows = n / size;
    double t_isend, t_put;
    double *x = run(steps, 0, &t_isend);
    double *y = run(steps, 1, &t_put);
    for (int r = 1; r <= rows; r++)
        for (int c = 0; c < n; c++)
            if (AT(x, r, c) != AT(y, r, c)) {
                fprintf(stderr, "rank %d: the versions differ at row %d column %d\n", me, r, c);
                return 1;
            }
    if (me == 0) {
        printf("halo_isend %d %.2f\n", n, t_isend);
        printf("halo_put %d %.2f\n", n, t_put);
    }
    free(x), free(y);
    CHECK(tether_finalize());
    return 0;
}

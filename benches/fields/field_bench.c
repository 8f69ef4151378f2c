/* Field throughput against point-to-point of the same bytes, in one run.
 *
 * Program "prod" (P ranks) holds a ROWS x COLS array of doubles in block
 * rows; program "cons" (Q ranks) wants it in block-cyclic columns (block
 * BLOCK). Each step moves the whole array: every producer rank sends each
 * consumer rank a strided piece (its rows of the consumer's columns).
 * The reference moves exactly the same bytes between the same rank pairs
 * as contiguous tether_isend/tether_irecv messages. Both are timed over
 * STEPS steps after a warm-up step, between universe barriers; consumer
 * rank 0 prints one line per method:
 *   field <GB/s> p2p <GB/s> ratio <field/p2p> bytes <per step>
 * Usage (see benches/compare_fields.py):
 *   tether run --name prod -n 4 field_bench ROWS COLS STEPS BLOCK [nb] : --name cons -n 3 field_bench ...
 * With `nb`, steps go by tether_field_iput/iget, two in flight on two
 * buffers (the producer's parts are then sent from its array, gathered by
 * the transport); without, by blocking put/get (put copies the step).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tether.h"

#define CHECK(call)                                                              \
    do {                                                                         \
        int rc_ = (call);                                                        \
        if (rc_ != TETHER_SUCCESS) {                                             \
            char msg_[TETHER_MAX_ERROR_STRING];                                  \
            tether_last_error(msg_, sizeof msg_);                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, msg_); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Elements of a BLOCK share or a block-cyclic share of n over p, for c. */
static int64_t block_share(int64_t n, int64_t p, int64_t c) {
    int64_t b = (n + p - 1) / p, lo = c * b, hi = lo + b > n ? n : lo + b;
    return hi > lo ? hi - lo : 0;
}

static int64_t cyclic_share(int64_t n, int64_t p, int64_t b, int64_t c) {
    int64_t pb = p * b, rest = n % pb - c * b;
    return (n / pb) * b + (rest < 0 ? 0 : rest > b ? b : rest);
}

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    if (argc < 5) {
        fprintf(stderr, "usage: field_bench ROWS COLS STEPS BLOCK\n");
        return 2;
    }
    int64_t rows = atoll(argv[1]), cols = atoll(argv[2]), block = atoll(argv[4]);
    int steps = atoi(argv[3]);
    int nonblocking = argc > 5 && strcmp(argv[5], "nb") == 0;
    int id, rank, prod_id, cons_id, P, Q;
    char me[TETHER_MAX_PROGRAM_NAME];
    CHECK(tether_program_id(&id));
    CHECK(tether_program_rank(&rank));
    CHECK(tether_program_name(id, me, sizeof me));
    CHECK(tether_program_find("prod", &prod_id));
    CHECK(tether_program_find("cons", &cons_id));
    CHECK(tether_program_size(prod_id, &P));
    CHECK(tether_program_size(cons_id, &Q));
    int producer = id == prod_id;

    int64_t shape[2] = {rows, cols};
    tether_dist dist;
    if (producer) {
        int grid[2] = {P, 1}, kinds[2] = {TETHER_DIST_BLOCK, TETHER_DIST_NONE};
        CHECK(tether_dist_create(2, shape, grid, kinds, NULL, TETHER_ORDER_C, &dist));
    } else {
        int grid[2] = {1, Q}, kinds[2] = {TETHER_DIST_NONE, TETHER_DIST_BLOCK_CYCLIC};
        int64_t blocks[2] = {0, block};
        CHECK(tether_dist_create(2, shape, grid, kinds, blocks, TETHER_ORDER_C, &dist));
    }
    int64_t local[2];
    CHECK(tether_dist_local_shape(dist, local));
    size_t n = (size_t)(local[0] * local[1]);
    double *a = malloc((n ? n : 1) * sizeof *a);
    double *a2 = malloc((n ? n : 1) * sizeof *a2);
    for (size_t i = 0; i < n; i++) a[i] = a2[i] = (double)i;
    tether_request inflight[2] = {TETHER_REQUEST_NULL, TETHER_REQUEST_NULL};

    tether_field field;
    double t0 = now();
    CHECK(tether_field_create("bench", TETHER_DOUBLE, dist, producer ? "cons" : "prod",
                              producer ? TETHER_FIELD_PUT : TETHER_FIELD_GET, &field));
    double created = now() - t0;
    for (int s = 0; s <= steps; s++) {
        if (s == 1) {
            CHECK(tether_barrier(TETHER_COMM_UNIVERSE));
            t0 = now();
        }
        if (nonblocking) {
            double *buf = s % 2 ? a2 : a;
            if (inflight[s % 2] != TETHER_REQUEST_NULL) CHECK(tether_wait(&inflight[s % 2], TETHER_STATUS_IGNORE));
            if (producer)
                CHECK(tether_field_iput(field, s, buf, &inflight[s % 2]));
            else
                CHECK(tether_field_iget(field, s, buf, &inflight[s % 2]));
        } else if (producer) {
            CHECK(tether_field_put(field, s, a));
        } else {
            CHECK(tether_field_get(field, s, a));
        }
    }
    for (int i = 0; i < 2; i++)
        if (inflight[i] != TETHER_REQUEST_NULL) CHECK(tether_wait(&inflight[i], TETHER_STATUS_IGNORE));
    CHECK(tether_field_free(&field));
    CHECK(tether_barrier(TETHER_COMM_UNIVERSE));
    double field_time = now() - t0;

    /* The reference: the same bytes per (producer, consumer) pair, each as
       one contiguous message. */
    int64_t my_rows = producer ? block_share(rows, P, rank) : 0;
    int peers = producer ? Q : P;
    size_t *count = calloc((size_t)peers, sizeof *count);
    size_t total = 0;
    for (int r = 0; r < peers; r++) {
        int64_t pr = producer ? my_rows : block_share(rows, P, r);
        int64_t qc = producer ? cyclic_share(cols, Q, block, r) : local[1];
        count[r] = (size_t)(pr * qc);
        total += count[r];
    }
    double *buf = malloc((total ? total : 1) * sizeof *buf);
    memset(buf, 1, (total ? total : 1) * sizeof *buf);
    tether_request *reqs = malloc((size_t)peers * sizeof *reqs);
    for (int s = 0; s <= steps; s++) {
        if (s == 1) {
            CHECK(tether_barrier(TETHER_COMM_UNIVERSE));
            t0 = now();
        }
        size_t off = 0;
        /* Universe ranks follow program names: cons's come before prod's. */
        int first = producer ? 0 : Q;
        for (int r = 0; r < peers; r++) {
            if (producer)
                CHECK(tether_isend(buf + off, (int64_t)count[r], TETHER_DOUBLE, first + r, s, TETHER_COMM_UNIVERSE, &reqs[r]));
            else
                CHECK(tether_irecv(buf + off, (int64_t)count[r], TETHER_DOUBLE, first + r, s, TETHER_COMM_UNIVERSE, &reqs[r]));
            off += count[r];
        }
        CHECK(tether_waitall(peers, reqs, TETHER_STATUSES_IGNORE));
    }
    CHECK(tether_barrier(TETHER_COMM_UNIVERSE));
    double p2p_time = now() - t0;

    if (!producer && rank == 0) {
        double bytes = (double)rows * (double)cols * 8.0;
        double field_gbs = bytes * steps / field_time / 1e9, p2p_gbs = bytes * steps / p2p_time / 1e9;
        printf("field %.3f p2p %.3f ratio %.3f bytes %.0f create_ms %.3f\n", field_gbs, p2p_gbs,
               field_gbs / p2p_gbs, bytes, created * 1e3);
    }
    free(a);
    free(a2);
    free(buf);
    free(count);
    free(reqs);
    CHECK(tether_finalize());
    return 0;
}

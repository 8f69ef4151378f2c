/* One-sided operations between a C program and a Python one: the C side
 * of tests/python/rma_c_peer.py, which follows the same steps. Programs
 * `csim` and `pymodel` of n ranks each; universe rank u's partner is
 * (u + n) % 2n, the rank of the same index in the other program. Over
 * TETHER_COMM_UNIVERSE, every process exposes 64 INT64 and 8 DOUBLE:
 *   1. puts u*1000+k (k < 8) into its partner's INT64 window, flushes;
 *   2. accumulates SUM u+1 (INT64, element 16) and 0.5*(u+1) (DOUBLE,
 *      element 0) into every rank of the other program;
 *   3. fetch_and_op SUM 1 ten times on element 20 of the other program's
 *      rank 0 (fetched values increase);
 *   fence: checks its own windows against what the other side did;
 *   4. gets its partner's elements 0-7 back, compare_and_swap 0 -> u+1
 *      on its partner's element 24, reads it back.
 * Prints "ok c-python rma". */
#include "common.h"

#define U TETHER_COMM_UNIVERSE

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    int u, size;
    CHECK(tether_comm_rank(U, &u));
    CHECK(tether_comm_size(U, &size));
    int n = size / 2, partner = (u + n) % size, other0 = u < n ? n : 0;

    static int64_t w[64];
    static double d[8];
    tether_win win, dwin;
    CHECK(tether_win_create(w, sizeof w, U, &win));
    CHECK(tether_win_create(d, sizeof d, U, &dwin));

    int64_t out[8];
    for (int k = 0; k < 8; k++) out[k] = (int64_t)u * 1000 + k;
    CHECK(tether_put(out, 8, TETHER_INT64, partner, 0, win));
    CHECK(tether_win_flush(partner, win));

    int64_t mine = u + 1;
    double half = 0.5 * (u + 1);
    for (int t = other0; t < other0 + n; t++) {
        CHECK(tether_accumulate(&mine, 1, TETHER_INT64, t, 16 * 8, TETHER_SUM, win));
        CHECK(tether_accumulate(&half, 1, TETHER_DOUBLE, t, 0, TETHER_SUM, dwin));
    }
    int64_t one = 1, fetched, last = -1;
    for (int k = 0; k < 10; k++) {
        CHECK(tether_fetch_and_op(&one, &fetched, TETHER_INT64, other0, 20 * 8, TETHER_SUM, win));
        CHECK(tether_win_flush(other0, win));
        EXPECT(fetched > last && fetched < 10 * n, "fetched %lld after %lld", (long long)fetched, (long long)last);
        last = fetched;
    }
    CHECK(tether_win_fence(win));
    CHECK(tether_win_fence(dwin));

    int64_t sum = 0;
    for (int v = other0; v < other0 + n; v++) sum += v + 1;
    for (int k = 0; k < 8; k++)
        EXPECT(w[k] == (int64_t)partner * 1000 + k, "w[%d] = %lld from rank %d", k, (long long)w[k], partner);
    EXPECT(w[16] == sum, "accumulated %lld, want %lld", (long long)w[16], (long long)sum);
    EXPECT(d[0] == 0.5 * (double)sum, "accumulated %f, want %f", d[0], 0.5 * (double)sum);
    if (u == 0 || u == n) EXPECT(w[20] == 10 * n, "counter %lld", (long long)w[20]);

    int64_t back[8], swap = u + 1, zero = 0, old = -1, now = -1;
    CHECK(tether_get(back, 8, TETHER_INT64, partner, 0, win));
    CHECK(tether_compare_and_swap(&swap, &zero, &old, TETHER_INT64, partner, 24 * 8, win));
    CHECK(tether_win_flush(partner, win));
    CHECK(tether_get(&now, 1, TETHER_INT64, partner, 24 * 8, win));
    CHECK(tether_win_flush_all(win));
    for (int k = 0; k < 8; k++) EXPECT(back[k] == out[k], "back[%d] = %lld", k, (long long)back[k]);
    EXPECT(old == 0 && now == u + 1, "compare_and_swap fetched %lld, then %lld", (long long)old, (long long)now);

    CHECK(tether_win_free(&win));
    CHECK(tether_win_free(&dwin));
    printf("ok c-python rma\n");
    CHECK(tether_finalize());
    return 0;
}

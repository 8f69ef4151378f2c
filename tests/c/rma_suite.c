/* One-sided operations under `tether run`, checked byte-exactly or
 * against a serial model.
 *
 *   rma_suite SCENARIO
 *
 * Scenarios (each prints "ok SCENARIO" on success):
 *   putget   windows of different sizes (rank 1's is 0 bytes); every
 *            origin in turn puts and gets 0 B to 9 MiB to every other
 *            rank, blocking and request-based, checked after flush, and a
 *            put checked by its target after a fence;
 *   atomics  accumulate SUM on INT64 and DOUBLE from every rank into rank
 *            0; 1000 fetch_and_op per rank on one counter (final value
 *            exact, every fetched value distinct); a compare_and_swap
 *            lock around a non-atomic get/put increment (no lost update);
 *   range    out-of-window accesses refused with TETHER_ERR_RMA_RANGE,
 *            the target's memory byte-identical; invalid pairs refused;
 *   passive  rank 0 sits in tether_recv while the others put into its
 *            window and flush; then the last one sends to it;
 *   computing rank 0 turns the progress thread on (hint PROGRESS_THREAD)
 *            and computes without calling Tether until rank 1's put of a
 *            flag lands in its window, after rank 1's data (at most
 *            60 s: a target nobody serves fails);
 *   lost     rank 1 exits without finalizing after creating its window:
 *            rank 0's put, then its flush, and an rget's wait end in
 *            TETHER_ERR_PEER_LOST naming it; nothing hangs. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "common.h"

#define MIB (1024 * 1024)
#define BIG (9 * MIB)
#define U TETHER_COMM_UNIVERSE

static int me, size;

static size_t window_bytes(int rank) { return rank == 1 ? 0 : BIG + 4096; }

static uint64_t seed_of(int origin, int target, size_t len) {
    return (uint64_t)origin * 1000003u + (uint64_t)target * 1009u + len;
}

static void put_and_get(tether_win win, unsigned char *out, unsigned char *in) {
    static const size_t lens[] = {0, 1, 7, 4096, 65536, MIB, BIG};
    for (int t = 0; t < size; t++) {
        if (t == me || window_bytes(t) == 0) continue;
        for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
            size_t len = lens[k];
            int64_t offset = (int64_t)(k % 2) * 4096 % (int64_t)(window_bytes(t) - len + 1);
            int requests = (k % 2) == 1;
            fill(out, len, seed_of(me, t, len));
            memset(in, 0, len);
            if (requests) {
                tether_request r;
                CHECK(tether_rput(out, (int64_t)len, TETHER_BYTE, t, offset, win, &r));
                CHECK(tether_wait(&r, TETHER_STATUS_IGNORE));
                CHECK(tether_win_flush(t, win));
                CHECK(tether_rget(in, (int64_t)len, TETHER_BYTE, t, offset, win, &r));
                CHECK(tether_wait(&r, TETHER_STATUS_IGNORE));
            } else {
                CHECK(tether_put(out, (int64_t)len, TETHER_BYTE, t, offset, win));
                CHECK(tether_win_flush(t, win));
                CHECK(tether_get(in, (int64_t)len, TETHER_BYTE, t, offset, win));
                CHECK(tether_win_flush_all(win));
            }
            long long bad = first_mismatch(in, len, seed_of(me, t, len));
            EXPECT(bad < 0, "%zu bytes read back from rank %d differ at byte %lld", len, t, bad);
        }
    }
}

static void putget(void) {
    unsigned char *base = xmalloc(window_bytes(me));
    tether_win win;
    CHECK(tether_win_create(window_bytes(me) ? base : NULL, (int64_t)window_bytes(me), U, &win));
    unsigned char *out = xmalloc(BIG), *in = xmalloc(BIG);
    for (int origin = 0; origin < size; origin++) {
        if (origin == me) put_and_get(win, out, in);
        CHECK(tether_win_fence(win));
    }
    /* The last origin's fenced puts: rank size-1 wrote 9 MiB at offset 0
     * of every other non-empty window. */
    int last = size - 1;
    if (me != last && window_bytes(me) > 0) {
        long long bad = first_mismatch(base, BIG, seed_of(last, me, BIG));
        EXPECT(bad < 0, "window of rank %d after fence differs at byte %lld", me, bad);
    }
    /* A put to oneself lands at once. */
    if (window_bytes(me) > 0) {
        fill(out, 100, 77);
        CHECK(tether_put(out, 100, TETHER_BYTE, me, 5, win));
        CHECK(tether_win_flush(me, win));
        EXPECT(first_mismatch(base + 5, 100, 77) < 0, "a put to oneself");
    }
    CHECK(tether_win_free(&win));
    EXPECT(win == TETHER_WIN_NULL, "free resets the handle");
    EXPECT(tether_win_flush_all(win) == TETHER_ERR_ARG, "a freed window is refused");
    tether_win stale = 12345;
    EXPECT(tether_win_free(&stale) == TETHER_ERR_ARG && stale == 12345, "freeing no window");
    EXPECT(tether_win_free(&win) == TETHER_ERR_ARG, "freeing TETHER_WIN_NULL");
    free(base), free(out), free(in);
}

#define ELEMS 1000
#define FETCHES 1000
#define LOCKED 100

/* Rank 0's window: ELEMS int64 sums, ELEMS double sums, the fetch
 * counter, the lock word, the locked counter. */
struct atomics_window {
    int64_t sums[ELEMS];
    double dsums[ELEMS];
    int64_t counter, lock, locked;
};

static void atomics(void) {
    struct atomics_window w;
    memset(&w, 0, sizeof w);
    tether_win win;
    CHECK(tether_win_create(&w, sizeof w, U, &win));
    int64_t values[ELEMS];
    double dvalues[ELEMS];
    for (int i = 0; i < ELEMS; i++) {
        values[i] = (int64_t)(me + 1) * 1000 + i - 7;
        dvalues[i] = (me + 1) * 0.5 + i;
    }
    CHECK(tether_accumulate(values, ELEMS, TETHER_INT64, 0, 0, TETHER_SUM, win));
    CHECK(tether_accumulate(dvalues, ELEMS, TETHER_DOUBLE, 0,
                            (int64_t)offsetof(struct atomics_window, dsums), TETHER_SUM, win));
    int64_t *fetched = xmalloc(sizeof(int64_t) * FETCHES);
    int64_t one = 1;
    int64_t counter_at = (int64_t)offsetof(struct atomics_window, counter);
    for (int i = 0; i < FETCHES; i++) {
        CHECK(tether_fetch_and_op(&one, &fetched[i], TETHER_INT64, 0, counter_at, TETHER_SUM, win));
        if (i % 10 == 9) CHECK(tether_win_flush(0, win));
    }
    CHECK(tether_win_flush(0, win));
    for (int i = 1; i < FETCHES; i++)
        EXPECT(fetched[i] > fetched[i - 1], "fetches from one origin increase: %lld then %lld",
               (long long)fetched[i - 1], (long long)fetched[i]);
    /* A lock by compare_and_swap around a plain get, add and put. */
    int64_t lock_at = (int64_t)offsetof(struct atomics_window, lock);
    int64_t locked_at = (int64_t)offsetof(struct atomics_window, locked);
    int64_t free_word = 0, mine = me + 1;
    for (int i = 0; i < LOCKED; i++) {
        int64_t old;
        do {
            CHECK(tether_compare_and_swap(&mine, &free_word, &old, TETHER_INT64, 0, lock_at, win));
            CHECK(tether_win_flush(0, win));
        } while (old != 0);
        int64_t value;
        CHECK(tether_get(&value, 1, TETHER_INT64, 0, locked_at, win));
        CHECK(tether_win_flush(0, win));
        value += 1;
        CHECK(tether_put(&value, 1, TETHER_INT64, 0, locked_at, win));
        CHECK(tether_win_flush(0, win));
        CHECK(tether_compare_and_swap(&free_word, &mine, &old, TETHER_INT64, 0, lock_at, win));
        CHECK(tether_win_flush(0, win));
        EXPECT(old == mine, "the lock was held by %lld", (long long)old);
    }
    int64_t *all = me == 0 ? xmalloc(sizeof(int64_t) * FETCHES * size) : NULL;
    CHECK(tether_gather(fetched, FETCHES, TETHER_INT64, all, FETCHES, TETHER_INT64, 0, U));
    CHECK(tether_win_fence(win));
    if (me == 0) {
        for (int i = 0; i < ELEMS; i++) {
            int64_t want = 0;
            double dwant = 0;
            for (int r = 0; r < size; r++) {
                want += (int64_t)(r + 1) * 1000 + i - 7;
                dwant += (r + 1) * 0.5 + i;
            }
            EXPECT(w.sums[i] == want, "sum %d is %lld, not %lld", i, (long long)w.sums[i], (long long)want);
            EXPECT(w.dsums[i] == dwant, "double sum %d is %g, not %g", i, w.dsums[i], dwant);
        }
        int64_t n = (int64_t)FETCHES * size;
        EXPECT(w.counter == n, "counter is %lld, not %lld", (long long)w.counter, (long long)n);
        unsigned char *seen = calloc((size_t)n, 1);
        for (int64_t i = 0; i < n; i++) {
            EXPECT(all[i] >= 0 && all[i] < n, "fetched %lld", (long long)all[i]);
            EXPECT(!seen[all[i]], "value %lld fetched twice", (long long)all[i]);
            seen[all[i]] = 1;
        }
        EXPECT(w.locked == (int64_t)LOCKED * size, "locked counter is %lld, not %lld (lost update)",
               (long long)w.locked, (long long)LOCKED * size);
        EXPECT(w.lock == 0, "the lock is free at the end");
        free(seen), free(all);
    }
    CHECK(tether_win_free(&win));
    free(fetched);
}

static int last_error_has(const char *needle) {
    char msg[TETHER_MAX_ERROR_STRING];
    tether_last_error(msg, sizeof msg);
    return strstr(msg, needle) != NULL;
}

static void range(void) {
    size_t bytes = me == 1 ? 0 : 1000;
    unsigned char *base = xmalloc(bytes);
    fill(base, bytes, 500 + me);
    tether_win win;
    CHECK(tether_win_create(bytes ? base : NULL, (int64_t)bytes, U, &win));
    unsigned char out[64];
    memset(out, 0xAB, sizeof out);
    int t = me == 0 ? 2 : 0; /* a non-empty window of another rank */
    {
        EXPECT(tether_put(out, 8, TETHER_BYTE, t, 997, win) == TETHER_ERR_RMA_RANGE, "past the end");
        EXPECT(last_error_has("1000 bytes"), "the error names the window's size");
        EXPECT(tether_put(out, 1, TETHER_BYTE, t, -1, win) == TETHER_ERR_RMA_RANGE, "negative offset");
        EXPECT(tether_get(out, 2, TETHER_INT64, t, 990, win) == TETHER_ERR_RMA_RANGE, "get past the end");
        EXPECT(tether_put(out, INT64_MAX / 2, TETHER_INT64, t, 0, win) != TETHER_SUCCESS, "overflow");
        CHECK(tether_put(out, 0, TETHER_BYTE, t, 1000, win)); /* 0 bytes at the end: legal */
        int64_t v = 1, r;
        EXPECT(tether_fetch_and_op(&v, &r, TETHER_INT64, t, 4, TETHER_SUM, win) == TETHER_ERR_RMA_RANGE,
               "misaligned atomic");
        EXPECT(tether_fetch_and_op(&v, &r, TETHER_FLOAT_COMPLEX, t, 0, TETHER_SUM, win) == TETHER_ERR_TYPE,
               "fetch_and_op on a complex type");
        double d = 1, dr, dc = 0;
        EXPECT(tether_compare_and_swap(&d, &dc, &dr, TETHER_DOUBLE, t, 0, win) == TETHER_ERR_TYPE,
               "compare_and_swap on a double");
        EXPECT(tether_accumulate(out, 2, TETHER_DOUBLE, t, 0, TETHER_BAND, win) == TETHER_ERR_OP,
               "BAND on doubles");
        EXPECT(tether_accumulate(out, 1, TETHER_INT64, t, 0, 99, win) == TETHER_ERR_OP, "op 99");
        EXPECT(tether_put(out, 1, TETHER_BYTE, size, 0, win) == TETHER_ERR_RANK, "target outside");
    }
    /* Rank 1's window is empty: 0 bytes at offset 0 are legal, 1 is not. */
    if (me != 1) {
        CHECK(tether_put(NULL, 0, TETHER_BYTE, 1, 0, win));
        EXPECT(tether_put(out, 1, TETHER_BYTE, 1, 0, win) == TETHER_ERR_RMA_RANGE, "empty window");
    }
    CHECK(tether_win_fence(win));
    long long bad = first_mismatch(base, bytes, 500 + me);
    EXPECT(bad < 0, "refused accesses changed rank %d's window at byte %lld", me, bad);
    /* Replace and no-op: an atomic write, then an atomic read. */
    if (me != 1) {
        int64_t v = 4242, old, none = 0, now;
        CHECK(tether_fetch_and_op(&v, &old, TETHER_INT64, me, 8, TETHER_REPLACE, win));
        CHECK(tether_fetch_and_op(&none, &now, TETHER_INT64, me, 8, TETHER_NO_OP, win));
        CHECK(tether_win_flush(me, win));
        EXPECT(now == 4242, "NO_OP read %lld", (long long)now);
    }
    EXPECT(tether_allreduce(out, out + 8, 1, TETHER_INT64, TETHER_REPLACE, U) == TETHER_ERR_OP,
           "collectives refuse TETHER_REPLACE");
    CHECK(tether_win_free(&win));
    free(base);
}

static void passive(void) {
    size_t bytes = (size_t)size * 4096;
    unsigned char *base = calloc(bytes, 1);
    tether_win win;
    CHECK(tether_win_create(base, (int64_t)bytes, U, &win));
    int last = size - 1;
    if (me == 0) {
        int token;
        CHECK(tether_recv(&token, 1, TETHER_INT, last, 9, U, TETHER_STATUS_IGNORE));
        for (int r = 1; r < size; r++) {
            long long bad = first_mismatch(base + r * 4096, 4096, 900 + r);
            EXPECT(bad < 0, "rank %d's put differs at byte %lld", r, bad);
        }
    } else {
        unsigned char out[4096];
        fill(out, sizeof out, 900 + me);
        CHECK(tether_put(out, sizeof out, TETHER_BYTE, 0, (int64_t)me * 4096, win));
        CHECK(tether_win_flush(0, win));
        /* Everyone's flush returned before the last one tells rank 0. */
        tether_comm others;
        int ranks[64];
        for (int r = 1; r < size; r++) ranks[r - 1] = r;
        CHECK(tether_comm_create_ranks(size - 1, ranks, &others));
        CHECK(tether_barrier(others));
        CHECK(tether_comm_free(&others));
        if (me == last) {
            int token = 1;
            CHECK(tether_send(&token, 1, TETHER_INT, 0, 9, U));
        }
    }
    CHECK(tether_win_free(&win));
    free(base);
}

static void computing(void) {
    CHECK(tether_hint("PROGRESS_THREAD", "1"));
    size_t bytes = 8 + 65536;
    unsigned char *base = calloc(bytes, 1);
    tether_win win;
    CHECK(tether_win_create(base, (int64_t)bytes, U, &win));
    if (me == 0) {
        volatile int64_t *flag = (volatile int64_t *)base;
        struct timespec start, now;
        clock_gettime(CLOCK_MONOTONIC, &start);
        double waited = 0;
        while (*flag == 0 && waited < 60) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            waited = (double)(now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9;
        }
        EXPECT(*flag == 1, "the flag never landed while the target computed (%.0f s)", waited);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        long long bad = first_mismatch(base + 8, 65536, 4242);
        EXPECT(bad < 0, "the data put before the flag differs at byte %lld", bad);
    } else if (me == 1) {
        unsigned char *out = xmalloc(65536);
        fill(out, 65536, 4242);
        CHECK(tether_put(out, 65536, TETHER_BYTE, 0, 8, win));
        CHECK(tether_win_flush(0, win));
        int64_t one = 1;
        CHECK(tether_put(&one, 1, TETHER_INT64, 0, 0, win));
        CHECK(tether_win_flush(0, win));
        free(out);
    }
    CHECK(tether_win_free(&win));
    CHECK(tether_hint("PROGRESS_THREAD", "0"));
    free(base);
}

static void lost(void) {
    unsigned char *base = calloc(4096, 1);
    tether_win win;
    CHECK(tether_win_create(base, 4096, U, &win));
    if (me == 1) {
        int bye = 1;
        CHECK(tether_send(&bye, 1, TETHER_INT, 0, 5, U));
        fflush(stdout);
        _Exit(0);
    }
    if (me == 0) {
        int bye;
        CHECK(tether_recv(&bye, 1, TETHER_INT, 1, 5, U, TETHER_STATUS_IGNORE));
        unsigned char out[64] = {0}, in[64];
        int rc = tether_put(out, 64, TETHER_BYTE, 1, 0, win);
        if (rc == TETHER_SUCCESS) rc = tether_win_flush(1, win);
        char msg[TETHER_MAX_ERROR_STRING];
        tether_last_error(msg, sizeof msg);
        EXPECT(rc == TETHER_ERR_PEER_LOST, "a put and flush to a lost target: %d: %s", rc, msg);
        tether_request r;
        rc = tether_rget(in, 64, TETHER_BYTE, 1, 0, win, &r);
        if (rc == TETHER_SUCCESS) rc = tether_wait(&r, TETHER_STATUS_IGNORE);
        EXPECT(rc == TETHER_ERR_PEER_LOST, "an rget from a lost target: %d", rc);
        /* The other targets still serve. */
        CHECK(tether_put(out, 64, TETHER_BYTE, 2, 0, win));
        CHECK(tether_win_flush(2, win));
        for (int r = 2; r < size; r++) CHECK(tether_send(&bye, 1, TETHER_INT, r, 6, U));
    } else {
        int done;
        CHECK(tether_recv(&done, 1, TETHER_INT, 0, 6, U, TETHER_STATUS_IGNORE));
    }
    /* No collective free (the lost member cannot join it), so the memory
     * stays the window's until the process ends. */
}

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    CHECK(tether_comm_rank(U, &me));
    CHECK(tether_comm_size(U, &size));
    const char *scenario = argc > 1 ? argv[1] : "putget";
    if (!strcmp(scenario, "putget")) putget();
    else if (!strcmp(scenario, "atomics")) atomics();
    else if (!strcmp(scenario, "range")) range();
    else if (!strcmp(scenario, "passive")) passive();
    else if (!strcmp(scenario, "computing")) computing();
    else if (!strcmp(scenario, "lost")) lost();
    else EXPECT(0, "unknown scenario %s", scenario);
    CHECK(tether_finalize());
    if (me == 0) printf("ok %s\n", scenario);
    return 0;
}

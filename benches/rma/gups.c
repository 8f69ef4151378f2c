/* GUPS (HPCC RandomAccess) by remote atomics, between processes of one
 * or two programs: every process owns a table of 2^LOG_TABLE 64-bit
 * words in a window; each update XORs a random value into a random word
 * of a random process's table (accumulate with BXOR), in batches of
 * BATCH followed by a flush of every target. Prints, from rank 0:
 *   gups <processes> <updates per second, all processes>
 * and checks the tables: applying every update again (XOR is its own
 * inverse) must leave every table at its start.
 *
 * Built twice by benches/compare_rma.py: with Tether, and with -DUSE_MPI
 * against MPI's one-sided calls (MPI_Accumulate + MPI_Win_flush_all). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef USE_MPI
#include <mpi.h>
typedef MPI_Win win_t;
#define SETUP(argc, argv) MPI_Init(&argc, &argv)
#define RANK(r) MPI_Comm_rank(MPI_COMM_WORLD, r)
#define SIZE(s) MPI_Comm_size(MPI_COMM_WORLD, s)
#define CREATE(base, bytes, w)                                                     \
    do {                                                                           \
        MPI_Win_create(base, (MPI_Aint)(bytes), 8, MPI_INFO_NULL, MPI_COMM_WORLD, w); \
        MPI_Win_lock_all(0, *(w));                                                 \
    } while (0)
#define XOR(v, t, i, w) MPI_Accumulate(v, 1, MPI_UINT64_T, t, (MPI_Aint)(i), 1, MPI_UINT64_T, MPI_BXOR, w)
#define FLUSH(w) MPI_Win_flush_all(w)
#define BARRIER() MPI_Barrier(MPI_COMM_WORLD)
#define FREE(w) (MPI_Win_unlock_all(*(w)), MPI_Win_free(w))
#define FINISH() MPI_Finalize()
#else
#include "tether.h"
typedef tether_win win_t;
#define SETUP(argc, argv) tether_init(&argc, &argv)
#define RANK(r) tether_comm_rank(TETHER_COMM_UNIVERSE, r)
#define SIZE(s) tether_comm_size(TETHER_COMM_UNIVERSE, s)
#define CREATE(base, bytes, w) tether_win_create(base, (int64_t)(bytes), TETHER_COMM_UNIVERSE, w)
#define XOR(v, t, i, w) tether_accumulate(v, 1, TETHER_UINT64, t, (int64_t)(i) * 8, TETHER_BXOR, w)
#define FLUSH(w) tether_win_flush_all(w)
#define BARRIER() tether_barrier(TETHER_COMM_UNIVERSE)
#define FREE(w) tether_win_free(w)
#define FINISH() tether_finalize()
#endif

#define LOG_TABLE 16
#define BATCH 1024

static uint64_t next(uint64_t x) { /* HPCC's generator */
    return (x << 1) ^ ((int64_t)x < 0 ? 0x0000000000000007ull : 0);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void run(uint64_t seed, long updates, int size, win_t win) {
    uint64_t x = seed;
    for (long u = 0; u < updates; u += BATCH) {
        for (int b = 0; b < BATCH && u + b < updates; b++) {
            x = next(x);
            static uint64_t value[BATCH];
            value[b] = x;
            int target = (int)((x >> LOG_TABLE) % (uint64_t)size);
            uint64_t index = x & ((1u << LOG_TABLE) - 1);
            XOR(&value[b], target, index, win);
        }
        FLUSH(win);
    }
}

int main(int argc, char **argv) {
    long updates = argc > 1 ? atol(argv[1]) : 1 << 18;
    SETUP(argc, argv);
    int me, size;
    RANK(&me);
    SIZE(&size);
    size_t words = (size_t)1 << LOG_TABLE;
    uint64_t *table = malloc(words * 8);
    for (size_t i = 0; i < words; i++) table[i] = i + (uint64_t)me * words;
    win_t win;
    CREATE(table, words * 8, &win);
    uint64_t seed = 0x1234567ull * (uint64_t)(me + 1);
    BARRIER();
    double t = now_s();
    run(seed, updates, size, win);
    BARRIER();
    t = now_s() - t;
    run(seed, updates, size, win);
    BARRIER();
    long bad = 0;
    for (size_t i = 0; i < words; i++) bad += table[i] != i + (uint64_t)me * words;
    if (bad) {
        fprintf(stderr, "rank %d: %ld table words wrong after undoing every update\n", me, bad);
        return 1;
    }
    if (me == 0) printf("gups %d %.0f\n", size, (double)updates * size / t);
    FREE(&win);
    free(table);
    FINISH();
    return 0;
}

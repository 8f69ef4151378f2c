/* Collective latency, osu_barrier/osu_bcast/osu_allreduce style, written
 * once for Tether and for MPI (compile with -DBENCH_MPI and mpicc).
 *
 *   coll_bench [--sizes 8,65536,4194304] [--iters N | --budget-ms MS]
 *              [--ops barrier,bcast,allreduce]
 *
 * Each size runs warm-up iterations, then timed ones; the figure is the
 * slowest rank's mean time per operation (microseconds), printed by rank 0:
 *   barrier 0 <us>
 *   bcast <bytes> <us>
 *   allreduce <bytes> <us>      (doubles, SUM)
 * The root of bcast rotates, as in osu_bcast's default. Results are checked
 * once per size so a fast wrong answer cannot pass. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef BENCH_MPI
#include <mpi.h>
#define COMM MPI_COMM_WORLD
#define BARRIER() MPI_Barrier(COMM)
#define BCAST(buf, n, root) MPI_Bcast(buf, (int)(n), MPI_BYTE, root, COMM)
#define ALLREDUCE(in, out, n) MPI_Allreduce(in, out, (int)(n), MPI_DOUBLE, MPI_SUM, COMM)
#define MAX_DOUBLE(in, out) MPI_Allreduce(in, out, 1, MPI_DOUBLE, MPI_MAX, COMM)
#else
#include "tether.h"
#define COMM TETHER_COMM_UNIVERSE
#define BARRIER() tether_barrier(COMM)
#define BCAST(buf, n, root) tether_bcast(buf, n, TETHER_BYTE, root, COMM)
#define ALLREDUCE(in, out, n) tether_allreduce(in, out, n, TETHER_DOUBLE, TETHER_SUM, COMM)
#define MAX_DOUBLE(in, out) tether_allreduce(in, out, 1, TETHER_DOUBLE, TETHER_MAX, COMM)
#endif

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static long iterations(long bytes, long forced) {
    if (forced > 0) return forced;
    return bytes <= 8192 ? 2000 : bytes <= (1 << 20) ? 200 : 40;
}

/* --budget-ms: the timed iterations of each size fill about this long
 * (between 20 and 20000 of them), from the slowest rank's mean time of 10
 * calibration iterations; 0 (default): the counts of `iterations`. */
static double budget_us = 0;

#define BUDGET_MIN 20
#define BUDGET_MAX 20000

/* Untimed iterations before the measurement: with --budget-ms, as
 * osu_* skip them (200 up to 8 KiB, 10 above), so that one-time set-up
 * (a library's first message to each peer) is not timed; with fixed
 * counts, a tenth of them. */
static long warmups(long bytes, long n) {
    if (budget_us <= 0) return n / 10;
    return bytes <= 8192 ? 200 : 10;
}

/* The timed iteration count for an operation whose 10 calibration
 * iterations started at `t0` on this rank; every rank gets the same. */
static long fitted(double t0, long n) {
    if (budget_us <= 0) return n;
    double mine = (now_us() - t0) / 10, worst;
    MAX_DOUBLE(&mine, &worst);
    double k = budget_us / (worst > 0.01 ? worst : 0.01);
    return k < BUDGET_MIN ? BUDGET_MIN : k > BUDGET_MAX ? BUDGET_MAX : (long)k;
}

static void fail(const char *what) {
    fprintf(stderr, "coll_bench: %s\n", what);
    exit(1);
}

int main(int argc, char **argv) {
    long sizes[16] = {8, 65536, 4194304};
    int nsizes = 3;
    long forced = 0;
    const char *ops = "barrier,bcast,allreduce";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--sizes") == 0) {
            nsizes = 0;
            for (char *s = strtok(argv[i + 1], ","); s && nsizes < 16; s = strtok(NULL, ",")) sizes[nsizes++] = atol(s);
        } else if (strcmp(argv[i], "--iters") == 0) {
            forced = atol(argv[i + 1]);
        } else if (strcmp(argv[i], "--budget-ms") == 0) {
            budget_us = atof(argv[i + 1]) * 1000;
        } else if (strcmp(argv[i], "--ops") == 0) {
            ops = argv[i + 1];
        }
    }
    int rank, size;
#ifdef BENCH_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(COMM, &rank);
    MPI_Comm_size(COMM, &size);
#else
    if (tether_init(&argc, &argv) != TETHER_SUCCESS) fail("tether_init failed");
    tether_comm_rank(COMM, &rank);
    tether_comm_size(COMM, &size);
#endif
    long largest = 8;
    for (int s = 0; s < nsizes; s++) if (sizes[s] > largest) largest = sizes[s];
    char *buf = malloc(largest);
    double *in = malloc(largest), *out = malloc(largest);
    if (!buf || !in || !out) fail("out of memory");

    if (strstr(ops, "barrier")) {
        long n = iterations(0, forced);
        for (long i = 0; i < warmups(0, n); i++) BARRIER();
        double t0 = now_us();
        for (long i = 0; budget_us > 0 && i < 10; i++) BARRIER();
        n = fitted(t0, n);
        t0 = now_us();
        for (long i = 0; i < n; i++) BARRIER();
        double mine = (now_us() - t0) / n, worst;
        MAX_DOUBLE(&mine, &worst);
        if (rank == 0) printf("barrier 0 %.3f\n", worst);
    }
    for (int s = 0; strstr(ops, "bcast") && s < nsizes; s++) {
        long bytes = sizes[s], n = iterations(bytes, forced);
        memset(buf, rank == 0 ? 7 : 0, bytes);
        if (BCAST(buf, bytes, 0) != 0 || buf[bytes - 1] != 7) fail("bcast result is wrong");
        for (long i = 0; i < warmups(bytes, n); i++) BCAST(buf, bytes, (int)(i % size));
        double t0 = now_us();
        for (long i = 0; budget_us > 0 && i < 10; i++) BCAST(buf, bytes, (int)(i % size));
        n = fitted(t0, n);
        BARRIER();
        t0 = now_us();
        for (long i = 0; i < n; i++) BCAST(buf, bytes, (int)(i % size));
        double mine = (now_us() - t0) / n, worst;
        MAX_DOUBLE(&mine, &worst);
        if (rank == 0) printf("bcast %ld %.3f\n", bytes, worst);
    }
    for (int s = 0; strstr(ops, "allreduce") && s < nsizes; s++) {
        long bytes = sizes[s], count = bytes / 8, n = iterations(bytes, forced);
        for (long i = 0; i < count; i++) in[i] = rank + 1;
        if (ALLREDUCE(in, out, count) != 0 || out[count - 1] != size * (size + 1) / 2.0) fail("allreduce result is wrong");
        for (long i = 0; i < warmups(bytes, n); i++) ALLREDUCE(in, out, count);
        double t0 = now_us();
        for (long i = 0; budget_us > 0 && i < 10; i++) ALLREDUCE(in, out, count);
        n = fitted(t0, n);
        BARRIER();
        t0 = now_us();
        for (long i = 0; i < n; i++) ALLREDUCE(in, out, count);
        double mine = (now_us() - t0) / n, worst;
        MAX_DOUBLE(&mine, &worst);
        if (rank == 0) printf("allreduce %ld %.3f\n", bytes, worst);
    }
    fflush(stdout);
#ifdef BENCH_MPI
    MPI_Finalize();
#else
    tether_finalize();
#endif
    return 0;
}

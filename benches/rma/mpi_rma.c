/* The MPI baseline of tether_rma.c: the same measurements through MPI's
 * own one-sided calls (MPI_Win_create, MPI_Win_lock_all, MPI_Put /
 * MPI_Get / MPI_Fetch_and_op + MPI_Win_flush), beside MPI's two-sided
 * ping-pong, with the same output lines (no active messages in MPI).
 * The target waits in MPI_Recv, which makes MPI's progress. */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long iters = argc > 1 ? atol(argv[1]) : 20000;
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    size_t big = 16 << 20;
    unsigned char *window = calloc(big, 1), *buf = calloc(big, 1);
    MPI_Win win;
    MPI_Win_create(window, (MPI_Aint)big, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_lock_all(0, win);
    long warm = iters / 10;
    if (me == 0) {
        char small[8] = {0};
        double t = 0;
        for (long i = -warm; i < iters; i++) {
            if (i == 0) t = now_us();
            MPI_Send(small, 8, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(small, 8, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        printf("pingpong_rtt 8 %.3f\n", (now_us() - t) / iters);
        for (long i = -warm; i < iters; i++) {
            if (i == 0) t = now_us();
            MPI_Put(small, 8, MPI_BYTE, 1, 0, 8, MPI_BYTE, win);
            MPI_Win_flush(1, win);
        }
        printf("put_flush 8 %.3f\n", (now_us() - t) / iters);
        for (long i = -warm; i < iters; i++) {
            if (i == 0) t = now_us();
            MPI_Get(small, 8, MPI_BYTE, 1, 0, 8, MPI_BYTE, win);
            MPI_Win_flush(1, win);
        }
        printf("get_flush 8 %.3f\n", (now_us() - t) / iters);
        int64_t one = 1, old;
        for (long i = -warm; i < iters; i++) {
            if (i == 0) t = now_us();
            MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 1, 64, MPI_SUM, win);
            MPI_Win_flush(1, win);
        }
        printf("fetch_op 8 %.3f\n", (now_us() - t) / iters);
        size_t sizes[] = {1 << 20, 16 << 20};
        for (int s = 0; s < 2; s++) {
            size_t len = sizes[s];
            int chunks = 16, rounds = len >= (16u << 20) ? 10 : 40;
            size_t part = len / chunks;
            for (int r = -2; r < rounds; r++) {
                if (r == 0) t = now_us();
                for (int c = 0; c < chunks; c++)
                    MPI_Put(buf + c * part, (int)part, MPI_BYTE, 1, (MPI_Aint)(c * part), (int)part, MPI_BYTE, win);
                MPI_Win_flush(1, win);
            }
            printf("put_bw %zu %.1f\n", len, (double)len * rounds / (now_us() - t));
        }
        int done = 1;
        MPI_Send(&done, 1, MPI_INT, 1, 9, MPI_COMM_WORLD);
    } else {
        char small[8];
        for (long i = -warm; i < iters; i++) {
            MPI_Recv(small, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(small, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
        int done;
        MPI_Recv(&done, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    free(window), free(buf);
    MPI_Finalize();
    return 0;
}

/* The MPI reference for tether_pingpong.c: the same loops with MPI_Send /
 * MPI_Recv (latency) and a window of MPI_Isend answered by a 4-byte ack
 * (bandwidth, as osu_bw). Ranks 0 and 1 of MPI_COMM_WORLD; rank 0 prints.
 *
 *   mpicc -O2 -o mpi_pingpong mpi_pingpong.c
 *   MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp UCX_NET_DEVICES=lo \
 *       mpiexec -n 2 -iface lo ./mpi_pingpong
 *
 * (benches/compare_p2p.py runs it that way for "MPICH over TCP"; see
 * docs/journal/2026-11-21-p2p-tcp.md.) Options and output: see bench_common.h.
 */
#include "bench_common.h"

#include <mpi.h>

/* GCC warns about MPI_STATUSES_IGNORE (a null array) in MPI_Waitall; harmless. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

static int g_rank;

static void check_or_abort(const unsigned char *buf, long size, unsigned char mark)
{
    char who[32];
    snprintf(who, sizeof who, "mpi rank %d", g_rank);
    if (bench_check(who, buf, size, mark))
        MPI_Abort(MPI_COMM_WORLD, 2);
}

static void latency(const struct bench_opts *o, long size, unsigned char *sbuf, unsigned char *rbuf)
{
    long iters = bench_lat_iters(o, size), warmup = bench_lat_warmup(o, size);
    long total = iters + warmup;
    int n = (int)size;
    double t0 = 0;
    bench_fill(sbuf, size);
    memset(rbuf, 0, (size_t)size);
    for (long it = 0; it < total; it++) {
        if (it == warmup)
            t0 = bench_now_us();
        if (g_rank == 0) {
            sbuf[0] = bench_mark(it);
            MPI_Send(sbuf, n, MPI_BYTE, 1, BENCH_TAG_DATA, MPI_COMM_WORLD);
            MPI_Recv(rbuf, n, MPI_BYTE, 1, BENCH_TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rbuf, n, MPI_BYTE, 0, BENCH_TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (it == 0)
                check_or_abort(rbuf, size, bench_mark(0));
            MPI_Send(rbuf, n, MPI_BYTE, 0, BENCH_TAG_DATA, MPI_COMM_WORLD);
        }
        if (it == 0 && g_rank == 0)
            check_or_abort(rbuf, size, bench_mark(0));
    }
    double t1 = bench_now_us();
    check_or_abort(rbuf, size, bench_mark(total - 1));
    if (g_rank == 0) {
        printf("latency %ld %.3f\n", size, (t1 - t0) / (2.0 * (double)iters));
        fflush(stdout);
    }
}

static void bandwidth(const struct bench_opts *o, long size, unsigned char *sbuf, unsigned char *rbuf,
                      MPI_Request *reqs)
{
    long iters = bench_bw_iters(o, size), warmup = bench_bw_warmup(o, size);
    long total = iters + warmup;
    int n = (int)size, window = o->window;
    unsigned char ack[BENCH_ACK_BYTES] = {0};
    double t0 = 0;
    bench_fill(sbuf, size);
    memset(rbuf, 0, (size_t)size);
    for (long it = 0; it < total; it++) {
        if (it == warmup)
            t0 = bench_now_us();
        if (g_rank == 0) {
            sbuf[0] = bench_mark(it);
            for (int w = 0; w < window; w++)
                MPI_Isend(sbuf, n, MPI_BYTE, 1, BENCH_TAG_DATA, MPI_COMM_WORLD, &reqs[w]);
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            MPI_Recv(ack, BENCH_ACK_BYTES, MPI_BYTE, 1, BENCH_TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int w = 0; w < window; w++)
                MPI_Irecv(rbuf, n, MPI_BYTE, 0, BENCH_TAG_DATA, MPI_COMM_WORLD, &reqs[w]);
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            if (it == 0)
                check_or_abort(rbuf, size, bench_mark(0));
            MPI_Send(ack, BENCH_ACK_BYTES, MPI_BYTE, 0, BENCH_TAG_ACK, MPI_COMM_WORLD);
        }
    }
    double t1 = bench_now_us();
    if (g_rank == 1)
        check_or_abort(rbuf, size, bench_mark(total - 1));
    if (g_rank == 0) {
        printf("bw %ld %.1f\n", size, (double)size * window * (double)iters / (t1 - t0));
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    MPI_Init(&argc, &argv);
    bench_parse(argc, argv, &o);
    if (o.probe) {
        fprintf(stderr, "--probe is for tether_pingpong only\n");
        return 64;
    }
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        fprintf(stderr, "mpi_pingpong needs 2 ranks, has %d\n", size);
        MPI_Abort(MPI_COMM_WORLD, 64);
    }
    if (bench_max_size(&o) > 0x7fffffffL) {
        fprintf(stderr, "mpi_pingpong: sizes must fit in an int\n");
        MPI_Abort(MPI_COMM_WORLD, 64);
    }
    if (g_rank < 2) {
        long max = bench_max_size(&o);
        unsigned char *sbuf = bench_alloc(max), *rbuf = bench_alloc(max);
        MPI_Request *reqs = calloc((size_t)o.window, sizeof *reqs);
        if (g_rank == 0) {
            char lib[MPI_MAX_LIBRARY_VERSION_STRING];
            int len;
            MPI_Get_library_version(lib, &len);
            char *nl = strchr(lib, '\n');
            if (nl)
                *nl = 0;
            printf("# mpi_pingpong: %d ranks, window %d, %s\n", size, o.window, lib);
            fflush(stdout);
        }
        for (int i = 0; i < o.n_lat; i++)
            latency(&o, o.lat_sizes[i], sbuf, rbuf);
        for (int i = 0; i < o.n_bw; i++)
            bandwidth(&o, o.bw_sizes[i], sbuf, rbuf, reqs);
        free(reqs);
        free(sbuf);
        free(rbuf);
    }
    MPI_Finalize();
    return 0;
}

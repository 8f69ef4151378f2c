/* OSU-style point-to-point benchmark for Tether: ping-pong latency (half
 * round trip of blocking tether_send/tether_recv) and streaming bandwidth
 * (a window of non-blocking isends answered by a small ack, as osu_bw).
 * Universe ranks 0 and 1 take part; rank 0 prints the results. Run through
 * the launcher, e.g.
 *
 *   tether run --name a -n 1 ./tether_pingpong --lat 8,1024 : \
 *              --name b -n 1 ./tether_pingpong --lat 8,1024
 *
 * Options and output: see bench_common.h. raw_tcp.c and mpi_pingpong.c
 * make the same measurements with the same loops.
 */
#include "bench_common.h"

#include <tether.h>

static int g_rank;

static void die_on(int rc, const char *what)
{
    if (rc == TETHER_SUCCESS)
        return;
    char name[TETHER_MAX_ERROR_STRING], detail[TETHER_MAX_ERROR_STRING];
    tether_error_string(rc, name, sizeof name);
    tether_last_error(detail, sizeof detail);
    fprintf(stderr, "rank %d: %s failed: %s (%s)\n", g_rank, what, name, detail);
    tether_abort(3);
    exit(3);
}

#define T(call) die_on((call), #call)

static void check_or_abort(const unsigned char *buf, long size, unsigned char mark)
{
    char who[32];
    snprintf(who, sizeof who, "tether rank %d", g_rank);
    if (bench_check(who, buf, size, mark)) {
        tether_abort(2);
        exit(2);
    }
}

/* With --probe: waits with tether_probe until the next message is there,
 * so that the receive after it takes it as an unexpected message. Out of
 * line and called only with --probe: the ping-pong loop makes the same
 * calls as mpi_pingpong.c's and raw_tcp.c's loops, with nothing of its own
 * between them (an out-of-line helper wrapping every receive made the
 * 8-byte shared-memory half round trip 0.079 us against 0.075 us with the
 * receive called directly, alternating runs). */
static void probe_first(long size, int src)
{
    tether_status st;
    T(tether_probe(src, BENCH_TAG_DATA, TETHER_COMM_UNIVERSE, &st));
    if (st.bytes != size) {
        fprintf(stderr, "tether rank %d: probe says %lld bytes, expected %ld\n", g_rank, (long long)st.bytes, size);
        tether_abort(2);
    }
}

static void latency(const struct bench_opts *o, long size, unsigned char *sbuf, unsigned char *rbuf)
{
    long iters = bench_lat_iters(o, size), warmup = bench_lat_warmup(o, size);
    long total = iters + warmup;
    double t0 = 0;
    bench_fill(sbuf, size);
    memset(rbuf, 0, (size_t)size);
    for (long it = 0; it < total; it++) {
        if (it == warmup)
            t0 = bench_now_us();
        if (g_rank == 0) {
            sbuf[0] = bench_mark(it);
            T(tether_send(sbuf, size, TETHER_BYTE, 1, BENCH_TAG_DATA, TETHER_COMM_UNIVERSE));
            if (o->probe)
                probe_first(size, 1);
            T(tether_recv(rbuf, size, TETHER_BYTE, 1, BENCH_TAG_DATA, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
        } else {
            if (o->probe)
                probe_first(size, 0);
            T(tether_recv(rbuf, size, TETHER_BYTE, 0, BENCH_TAG_DATA, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
            if (it == 0)
                check_or_abort(rbuf, size, bench_mark(0));
            T(tether_send(rbuf, size, TETHER_BYTE, 0, BENCH_TAG_DATA, TETHER_COMM_UNIVERSE));
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
                      tether_request *reqs)
{
    long iters = bench_bw_iters(o, size), warmup = bench_bw_warmup(o, size);
    long total = iters + warmup;
    int window = o->window;
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
                T(tether_isend(sbuf, size, TETHER_BYTE, 1, BENCH_TAG_DATA, TETHER_COMM_UNIVERSE, &reqs[w]));
            T(tether_waitall(window, reqs, TETHER_STATUSES_IGNORE));
            T(tether_recv(ack, BENCH_ACK_BYTES, TETHER_BYTE, 1, BENCH_TAG_ACK, TETHER_COMM_UNIVERSE,
                          TETHER_STATUS_IGNORE));
        } else {
            for (int w = 0; w < window; w++)
                T(tether_irecv(rbuf, size, TETHER_BYTE, 0, BENCH_TAG_DATA, TETHER_COMM_UNIVERSE, &reqs[w]));
            T(tether_waitall(window, reqs, TETHER_STATUSES_IGNORE));
            if (it == 0)
                check_or_abort(rbuf, size, bench_mark(0));
            T(tether_send(ack, BENCH_ACK_BYTES, TETHER_BYTE, 0, BENCH_TAG_ACK, TETHER_COMM_UNIVERSE));
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
    T(tether_init(&argc, &argv));
    bench_parse(argc, argv, &o);
    int size;
    T(tether_universe_rank(&g_rank));
    T(tether_universe_size(&size));
    if (size < 2) {
        fprintf(stderr, "tether_pingpong needs 2 processes in the universe, has %d\n", size);
        tether_abort(64);
    }
    if (g_rank < 2) {
        long max = bench_max_size(&o);
        unsigned char *sbuf = bench_alloc(max), *rbuf = bench_alloc(max);
        tether_request *reqs = calloc((size_t)o.window, sizeof *reqs);
        if (g_rank == 0) {
            printf("# tether_pingpong: universe of %d, ranks 0 and 1, window %d%s\n", size, o.window,
                   o.probe ? ", ping-pong receives probed first (unexpected messages)" : "");
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
    T(tether_finalize());
    return 0;
}

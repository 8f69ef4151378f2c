/* Shared by the three point-to-point benchmarks (tether_pingpong.c,
 * raw_tcp.c, mpi_pingpong.c) so that they parse the same arguments, time
 * with the same clock, use the same iteration counts and check data the
 * same way. Only the transport calls differ between them.
 *
 * Arguments (all optional):
 *   --lat SIZES       comma-separated ping-pong sizes in bytes ("" = none)
 *                     default 8,1024,65536
 *   --bw SIZES        comma-separated streaming sizes in bytes ("" = none)
 *                     default 1048576,16777216
 *   --iters N         timed ping-pong iterations   (default: OSU-like, by size)
 *   --warmup N        untimed ping-pong iterations (default: OSU-like, by size)
 *   --bw-iters N      timed windows                (default: OSU-like, by size)
 *   --bw-warmup N     untimed windows              (default: OSU-like, by size)
 *   --window N        messages in flight per window (default 64, as osu_bw)
 *   --probe 1         (tether_pingpong only) ping-pong in which each side
 *                     probes until the message is there and only then posts
 *                     the receive: the message arrives unexpected, so the
 *                     eager path pays its copy out of the unexpected queue
 *                     and the rendezvous path its handshake after the probe
 *
 * Output (rank 0 only, one line per size, machine readable):
 *   latency <bytes> <microseconds, half round trip>
 *   bw <bytes> <MB/s, 1 MB = 1e6 bytes>
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_MAX_SIZES 32
#define BENCH_TAG_DATA 100
#define BENCH_TAG_ACK 101
#define BENCH_ACK_BYTES 4

struct bench_opts {
    long lat_sizes[BENCH_MAX_SIZES];
    int n_lat;
    long bw_sizes[BENCH_MAX_SIZES];
    int n_bw;
    long iters, warmup, bw_iters, bw_warmup; /* <= 0: by size */
    int window;
    int probe;
};

static double bench_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int bench_parse_sizes(const char *s, long *out)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v <= 0 || n == BENCH_MAX_SIZES) {
            fprintf(stderr, "bad size list '%s'\n", s);
            exit(64);
        }
        out[n++] = v;
        p = end;
        if (*p == ',')
            p++;
        else if (*p) {
            fprintf(stderr, "bad size list '%s'\n", s);
            exit(64);
        }
    }
    return n;
}

static long bench_parse_long(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end) {
        fprintf(stderr, "bad number '%s'\n", s);
        exit(64);
    }
    return v;
}

/* Parses the options above; unknown arguments are an error (the Tether
 * launcher and mpiexec pass the program's own arguments through). */
static void bench_parse(int argc, char **argv, struct bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->n_lat = bench_parse_sizes("8,1024,65536", o->lat_sizes);
    o->n_bw = bench_parse_sizes("1048576,16777216", o->bw_sizes);
    o->window = 64;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "option %s needs a value\n", a);
            exit(64);
        }
        if (!strcmp(a, "--lat"))
            o->n_lat = bench_parse_sizes(v, o->lat_sizes);
        else if (!strcmp(a, "--bw"))
            o->n_bw = bench_parse_sizes(v, o->bw_sizes);
        else if (!strcmp(a, "--iters"))
            o->iters = bench_parse_long(v);
        else if (!strcmp(a, "--warmup"))
            o->warmup = bench_parse_long(v);
        else if (!strcmp(a, "--bw-iters"))
            o->bw_iters = bench_parse_long(v);
        else if (!strcmp(a, "--bw-warmup"))
            o->bw_warmup = bench_parse_long(v);
        else if (!strcmp(a, "--window"))
            o->window = (int)bench_parse_long(v);
        else if (!strcmp(a, "--probe"))
            o->probe = (int)bench_parse_long(v);
        else {
            fprintf(stderr, "unknown option %s\n", a);
            exit(64);
        }
        i++;
    }
    if (o->window < 1) {
        fprintf(stderr, "--window must be >= 1\n");
        exit(64);
    }
}

/* OSU-like defaults: many iterations for small messages, fewer for large. */
static long bench_lat_iters(const struct bench_opts *o, long size)
{
    if (o->iters > 0)
        return o->iters;
    return size <= 8192 ? 10000 : 1000;
}

static long bench_lat_warmup(const struct bench_opts *o, long size)
{
    if (o->warmup > 0)
        return o->warmup;
    return size <= 8192 ? 1000 : 100;
}

static long bench_bw_iters(const struct bench_opts *o, long size)
{
    if (o->bw_iters > 0)
        return o->bw_iters;
    return size <= (1L << 20) ? 50 : 10;
}

static long bench_bw_warmup(const struct bench_opts *o, long size)
{
    if (o->bw_warmup > 0)
        return o->bw_warmup;
    return size <= (1L << 20) ? 5 : 2;
}

static long bench_max_size(const struct bench_opts *o)
{
    long m = BENCH_ACK_BYTES;
    for (int i = 0; i < o->n_lat; i++)
        if (o->lat_sizes[i] > m)
            m = o->lat_sizes[i];
    for (int i = 0; i < o->n_bw; i++)
        if (o->bw_sizes[i] > m)
            m = o->bw_sizes[i];
    return m;
}

static void *bench_alloc(long size)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, (size_t)size)) {
        fprintf(stderr, "out of memory (%ld bytes)\n", size);
        exit(70);
    }
    memset(p, 0, (size_t)size); /* fault the pages in before timing */
    return p;
}

/* The payload of every message of `size` bytes: depends on the size, so a
 * message of the wrong length or from the wrong size step is caught. Byte 0
 * is the iteration marker (see bench_mark). */
static void bench_fill(unsigned char *buf, long size)
{
    for (long i = 0; i < size; i++)
        buf[i] = (unsigned char)((i * 131 + size * 7 + 1) & 0xff);
}

/* Per-iteration marker: rank 0 stores it in byte 0 before each ping, so
 * that the value seen after the last iteration proves the last message
 * was really delivered (not left over from the first). */
static unsigned char bench_mark(long iteration)
{
    return (unsigned char)((iteration * 37 + 11) & 0xff);
}

/* Returns 0 when buf holds the payload of size `size` with marker `mark`
 * in byte 0; otherwise prints where it differs and returns -1. */
static int bench_check(const char *who, const unsigned char *buf, long size, unsigned char mark)
{
    for (long i = 0; i < size; i++) {
        unsigned char want = i == 0 ? mark : (unsigned char)((i * 131 + size * 7 + 1) & 0xff);
        if (buf[i] != want) {
            fprintf(stderr, "%s: DATA CHECK FAILED at size %ld: byte %ld is 0x%02x, expected 0x%02x\n",
                    who, size, i, buf[i], want);
            return -1;
        }
    }
    return 0;
}

#endif

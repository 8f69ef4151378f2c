/* The reference for tether_pingpong.c: the same measurements over one plain
 * TCP connection on 127.0.0.1, written only for the benchmark, with no
 * framing, matching or progress engine.
 *
 * One binary: it listens on 127.0.0.1 (ephemeral port), forks, the child
 * connects and plays rank 1, the parent plays rank 0 and prints.
 *
 *   latency: TCP_NODELAY, non-blocking socket, both sides busy-poll
 *            read()/write() (never sleep in the kernel) -- the "raw
 *            busy-polling TCP ping-pong" of the performance targets.
 *   bw:      TCP_NODELAY, blocking socket: rank 0 writes `window` messages
 *            of `size` bytes back to back and reads a 4-byte ack; rank 1
 *            reads them into one buffer and writes the ack (as osu_bw).
 *            With --bw-poll (first argument) the socket stays non-blocking
 *            and both sides busy-poll here too (never sleep in the kernel),
 *            as MPI libraries do while they wait: a second reference.
 *
 * Options and output: see bench_common.h.
 */
#include "bench_common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int g_rank;

static void fail(const char *what)
{
    fprintf(stderr, "raw_tcp rank %d: %s: %s\n", g_rank, what, strerror(errno));
    exit(3);
}

static void set_nonblocking(int fd, int on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK)) < 0)
        fail("fcntl");
}

/* Works on blocking and non-blocking sockets alike; on a non-blocking one
 * it busy-polls (EAGAIN -> try again at once). */
static void write_all(int fd, const unsigned char *p, long n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, (size_t)n);
        if (k > 0) {
            p += k;
            n -= k;
        } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            continue;
        } else {
            fail("write");
        }
    }
}

static void read_all(int fd, unsigned char *p, long n)
{
    while (n > 0) {
        ssize_t k = read(fd, p, (size_t)n);
        if (k > 0) {
            p += k;
            n -= k;
        } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            continue;
        } else if (k == 0) {
            fprintf(stderr, "raw_tcp rank %d: peer closed the connection\n", g_rank);
            exit(3);
        } else {
            fail("read");
        }
    }
}

static void check_or_exit(const unsigned char *buf, long size, unsigned char mark)
{
    char who[32];
    snprintf(who, sizeof who, "raw_tcp rank %d", g_rank);
    if (bench_check(who, buf, size, mark))
        exit(2);
}

static void latency(int fd, const struct bench_opts *o, long size, unsigned char *sbuf, unsigned char *rbuf)
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
            write_all(fd, sbuf, size);
            read_all(fd, rbuf, size);
        } else {
            read_all(fd, rbuf, size);
            if (it == 0)
                check_or_exit(rbuf, size, bench_mark(0));
            write_all(fd, rbuf, size);
        }
        if (it == 0 && g_rank == 0)
            check_or_exit(rbuf, size, bench_mark(0));
    }
    double t1 = bench_now_us();
    check_or_exit(rbuf, size, bench_mark(total - 1));
    if (g_rank == 0) {
        printf("latency %ld %.3f\n", size, (t1 - t0) / (2.0 * (double)iters));
        fflush(stdout);
    }
}

static void bandwidth(int fd, const struct bench_opts *o, long size, unsigned char *sbuf, unsigned char *rbuf)
{
    long iters = bench_bw_iters(o, size), warmup = bench_bw_warmup(o, size);
    long total = iters + warmup;
    unsigned char ack[BENCH_ACK_BYTES] = {0};
    double t0 = 0;
    bench_fill(sbuf, size);
    memset(rbuf, 0, (size_t)size);
    for (long it = 0; it < total; it++) {
        if (it == warmup)
            t0 = bench_now_us();
        if (g_rank == 0) {
            sbuf[0] = bench_mark(it);
            for (int w = 0; w < o->window; w++)
                write_all(fd, sbuf, size);
            read_all(fd, ack, BENCH_ACK_BYTES);
        } else {
            for (int w = 0; w < o->window; w++)
                read_all(fd, rbuf, size);
            if (it == 0)
                check_or_exit(rbuf, size, bench_mark(0));
            write_all(fd, ack, BENCH_ACK_BYTES);
        }
    }
    double t1 = bench_now_us();
    if (g_rank == 1)
        check_or_exit(rbuf, size, bench_mark(total - 1));
    if (g_rank == 0) {
        printf("bw %ld %.1f\n", size, (double)size * o->window * (double)iters / (t1 - t0));
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    int bw_poll = argc > 1 && !strcmp(argv[1], "--bw-poll");
    if (bw_poll) {
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    bench_parse(argc, argv, &o);
    if (o.probe) {
        fprintf(stderr, "--probe is for tether_pingpong only\n");
        return 64;
    }

    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0)
        fail("socket");
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t alen = sizeof addr;
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(lfd, 1) < 0 ||
        getsockname(lfd, (struct sockaddr *)&addr, &alen) < 0)
        fail("bind/listen");

    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        fail("fork");
    int fd;
    if (child == 0) {
        g_rank = 1;
        close(lfd);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0)
            fail("connect");
    } else {
        g_rank = 0;
        fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            fail("accept");
        close(lfd);
    }
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
        fail("TCP_NODELAY");

    long max = bench_max_size(&o);
    unsigned char *sbuf = bench_alloc(max), *rbuf = bench_alloc(max);
    if (g_rank == 0) {
        printf("# raw_tcp: 127.0.0.1:%d, fork()ed pair, window %d, bw %s\n", ntohs(addr.sin_port), o.window,
               bw_poll ? "busy-polling" : "blocking");
        fflush(stdout);
    }

    set_nonblocking(fd, 1);
    for (int i = 0; i < o.n_lat; i++)
        latency(fd, &o, o.lat_sizes[i], sbuf, rbuf);
    if (!bw_poll)
        set_nonblocking(fd, 0);
    for (int i = 0; i < o.n_bw; i++)
        bandwidth(fd, &o, o.bw_sizes[i], sbuf, rbuf);

    if (g_rank == 1) {
        close(fd);
        return 0;
    }
    close(fd);
    int st = 0;
    if (waitpid(child, &st, 0) < 0)
        fail("waitpid");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "raw_tcp: rank 1 failed (status 0x%x)\n", st);
        return 3;
    }
    return 0;
}

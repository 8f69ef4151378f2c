/*
 * raw_stream: the "raw" reference for Tether's rails. One message of BYTES
 * bytes, cut into CHUNK-sized pieces, striped over one TCP connection per
 * address given, with no library in between. What Tether's rails should
 * approach on the rail test bed (tests/railbed.py); see README.md here.
 *
 *   raw_stream recv [ADDR:]PORT...
 *   raw_stream send ADDR:PORT[,ADDR:PORT...] BYTES CHUNK [round_robin|least_used]
 *
 * BYTES and CHUNK take K, M, G suffixes (KiB, MiB, GiB).
 *
 * Wire format: each connection opens with the message size (u64); then
 * each chunk is a 16-byte header (offset, length; u64, host
 * order, both ends are the same machine) and its payload, like the
 * (message, offset) header of the study's stripe.py: the receiver writes
 * each chunk in place, at its offset, into one buffer. When the sender has
 * written everything it shuts its write side down; the receiver, once
 * every connection reached EOF, writes one byte back on each, and the
 * sender's clock stops when it has read those bytes, so the figure is
 * "all bytes landed", not "all bytes queued in the kernel".
 *
 * Policies (one sender thread per connection):
 *   round_robin  chunk i goes to connection i mod N (fixed in advance, so
 *                the slowest rail bounds the whole: N x its rate);
 *   least_used   the next chunk goes to whichever connection's thread is
 *                free first, i.e. whose send() returned first, which is
 *                the rail with the fewest bytes queued (the kernel send
 *                buffer absorbs up to a few MiB, so at the very end a slow
 *                rail can still hold that much: a small tail).
 *
 * Output, one line each, key=value so scripts can parse it:
 *   recv: "listening port=P" per port once bound, then
 *         "recv bytes=B seconds=S MB/s=R"
 *   send: "send bytes=B chunk=C rails=N policy=P seconds=S MB/s=R
 *          Mbit/s=R shares=s1,s2,..."
 * MB/s is 10^6 bytes per second (Mbit/s = 8 x MB/s).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_RAILS 16

struct chunk_header {
    uint64_t offset;
    uint64_t length;
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static uint64_t parse_size(const char *s) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'B') end++; /* accept "MiB", "MB" loosely */
    if (*end == 'B') end++;
    if (end == s || *end != '\0') {
        fprintf(stderr, "raw_stream: bad size '%s'\n", s);
        exit(2);
    }
    return v;
}

/* "ADDR:PORT" or "PORT" (then ADDR is the wildcard) into a sockaddr. */
static void parse_addr(const char *spec, struct sockaddr_in *sa) {
    char host[256] = "0.0.0.0";
    const char *port = spec;
    const char *colon = strrchr(spec, ':');
    if (colon) {
        size_t n = (size_t)(colon - spec);
        if (n >= sizeof host) n = sizeof host - 1;
        memcpy(host, spec, n);
        host[n] = '\0';
        port = colon + 1;
    }
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)atoi(port));
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
        fprintf(stderr, "raw_stream: bad IPv4 address '%s'\n", host);
        exit(2);
    }
}

static int write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads exactly len bytes; returns 0, or 1 on EOF before the first byte. */
static int read_all(int fd, void *buf, size_t len) {
    char *p = buf;
    size_t got = 0;
    while (got < len) {
        ssize_t n = recv(fd, p + got, len - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("recv");
        }
        if (n == 0) {
            if (got == 0) return 1;
            fprintf(stderr, "raw_stream: connection closed inside a chunk\n");
            exit(1);
        }
        got += (size_t)n;
    }
    return 0;
}

/* ---------------------------------------------------------------- recv -- */

struct receiver {
    int fd;
    char *buf;          /* the whole message: chunks land at their offset */
    uint64_t total;
    uint64_t bytes;
    double first, last;
};

static void *recv_thread(void *arg) {
    struct receiver *r = arg;
    struct chunk_header h;
    while (read_all(r->fd, &h, sizeof h) == 0) {
        if (r->first == 0) r->first = now();
        if (h.offset > r->total || h.length > r->total - h.offset) {
            fprintf(stderr, "raw_stream: chunk [%llu, +%llu) outside the message\n",
                    (unsigned long long)h.offset, (unsigned long long)h.length);
            exit(1);
        }
        if (read_all(r->fd, r->buf + h.offset, h.length) != 0) {
            fprintf(stderr, "raw_stream: EOF after a chunk header\n");
            exit(1);
        }
        r->bytes += h.length;
        r->last = now();
    }
    return NULL;
}

static int cmd_recv(int argc, char **argv) {
    int n = argc;
    if (n < 1 || n > MAX_RAILS) {
        fprintf(stderr, "usage: raw_stream recv [ADDR:]PORT... (1 to %d)\n", MAX_RAILS);
        return 2;
    }
    int lfd[MAX_RAILS];
    for (int i = 0; i < n; i++) {
        struct sockaddr_in sa;
        parse_addr(argv[i], &sa);
        lfd[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (lfd[i] < 0) die("socket");
        int one = 1;
        setsockopt(lfd[i], SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(lfd[i], (struct sockaddr *)&sa, sizeof sa) < 0) die("bind");
        if (listen(lfd[i], 1) < 0) die("listen");
        printf("listening port=%d\n", ntohs(sa.sin_port));
    }
    fflush(stdout);

    struct receiver r[MAX_RAILS];
    pthread_t th[MAX_RAILS];
    uint64_t msg = 0;
    char *buf = NULL;
    for (int i = 0; i < n; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].fd = accept(lfd[i], NULL, NULL);
        if (r[i].fd < 0) die("accept");
        close(lfd[i]);
        /* Each connection opens with the message size (u64), so the buffer
         * is allocated once and every rail writes into it without locks. */
        uint64_t size;
        if (read_all(r[i].fd, &size, sizeof size) != 0) {
            fprintf(stderr, "raw_stream: connection closed before the preamble\n");
            return 1;
        }
        if (i == 0) {
            msg = size;
            buf = malloc(msg ? msg : 1);
            if (!buf) die("malloc");
        } else if (size != msg) {
            fprintf(stderr, "raw_stream: connections disagree on the size\n");
            return 1;
        }
        r[i].buf = buf;
        r[i].total = msg;
    }
    for (int i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, recv_thread, &r[i]) != 0) die("pthread_create");
    uint64_t total = 0;
    double first = 0, last = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        total += r[i].bytes;
        if (r[i].first && (first == 0 || r[i].first < first)) first = r[i].first;
        if (r[i].last > last) last = r[i].last;
    }
    /* Everything landed: tell the sender (one byte per connection). */
    for (int i = 0; i < n; i++) {
        char ack = 'k';
        if (write_all(r[i].fd, &ack, 1) < 0) die("send ack");
        close(r[i].fd);
    }
    double secs = last > first ? last - first : 0;
    if (total != msg) {
        fprintf(stderr, "raw_stream: received %llu of %llu bytes\n", (unsigned long long)total,
                (unsigned long long)msg);
        return 1;
    }
    printf("recv bytes=%llu seconds=%.6f MB/s=%.2f\n", (unsigned long long)total, secs,
           secs > 0 ? (double)total / secs / 1e6 : 0.0);
    free(buf);
    return 0;
}

/* ---------------------------------------------------------------- send -- */

enum policy { ROUND_ROBIN, LEAST_USED };

struct sender {
    int fd, index, nrails;
    enum policy policy;
    const char *data;
    uint64_t total, chunk, nchunks;
    atomic_uint_fast64_t *next; /* least_used: the next chunk to take */
    uint64_t bytes;             /* what this rail carried */
};

/* Chunk i of the message: header, then payload. */
static void send_chunk(struct sender *s, uint64_t i) {
    uint64_t off = i * s->chunk;
    uint64_t len = s->total - off < s->chunk ? s->total - off : s->chunk;
    struct chunk_header h = { off, len };
    if (write_all(s->fd, &h, sizeof h) < 0 || write_all(s->fd, s->data + off, len) < 0)
        die("send");
    s->bytes += len;
}

static void *send_thread(void *arg) {
    struct sender *s = arg;
    if (s->policy == ROUND_ROBIN) {
        for (uint64_t i = (uint64_t)s->index; i < s->nchunks; i += (uint64_t)s->nrails)
            send_chunk(s, i);
    } else {
        /* The thread whose send() returned first takes the next chunk. */
        for (uint64_t i; (i = atomic_fetch_add(s->next, 1)) < s->nchunks;)
            send_chunk(s, i);
    }
    shutdown(s->fd, SHUT_WR);
    return NULL;
}

static int connect_retry(const struct sockaddr_in *sa) {
    /* The receiver may still be starting: retry refused connections for
     * up to 5 s rather than make every caller synchronise. */
    double deadline = now() + 5.0;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) die("socket");
        if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0) return fd;
        int e = errno;
        close(fd);
        if ((e != ECONNREFUSED && e != EINTR) || now() > deadline) {
            errno = e;
            die("connect");
        }
        usleep(20000);
    }
}

static int cmd_send(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: raw_stream send ADDR:PORT[,ADDR:PORT...] BYTES CHUNK "
                        "[round_robin|least_used]\n");
        return 2;
    }
    enum policy policy = ROUND_ROBIN;
    const char *pname = "round_robin";
    if (argc == 4) {
        pname = argv[3];
        if (strcmp(pname, "least_used") == 0) policy = LEAST_USED;
        else if (strcmp(pname, "round_robin") != 0) {
            fprintf(stderr, "raw_stream: policy must be round_robin or least_used\n");
            return 2;
        }
    }
    uint64_t total = parse_size(argv[1]);
    uint64_t chunk = parse_size(argv[2]);
    if (total == 0 || chunk == 0) {
        fprintf(stderr, "raw_stream: BYTES and CHUNK must be > 0\n");
        return 2;
    }

    struct sockaddr_in addrs[MAX_RAILS];
    int n = 0;
    char *list = strdup(argv[0]);
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == MAX_RAILS) {
            fprintf(stderr, "raw_stream: at most %d addresses\n", MAX_RAILS);
            return 2;
        }
        if (!strchr(tok, ':')) {
            fprintf(stderr, "raw_stream: '%s' is not ADDR:PORT\n", tok);
            return 2;
        }
        parse_addr(tok, &addrs[n++]);
    }
    free(list);

    /* The message, touched once so page faults are not timed. */
    char *data = malloc(total);
    if (!data) die("malloc");
    for (uint64_t i = 0; i < total; i += 4096) data[i] = (char)(i >> 12);

    int fds[MAX_RAILS];
    for (int i = 0; i < n; i++) {
        fds[i] = connect_retry(&addrs[i]);
        int one = 1;
        setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (write_all(fds[i], &total, sizeof total) < 0) die("send preamble");
    }

    atomic_uint_fast64_t next = 0;
    struct sender s[MAX_RAILS];
    pthread_t th[MAX_RAILS];
    uint64_t nchunks = (total + chunk - 1) / chunk;
    double t0 = now();
    for (int i = 0; i < n; i++) {
        s[i] = (struct sender){ .fd = fds[i], .index = i, .nrails = n, .policy = policy,
                                .data = data, .total = total, .chunk = chunk,
                                .nchunks = nchunks, .next = &next, .bytes = 0 };
        if (pthread_create(&th[i], NULL, send_thread, &s[i]) != 0) die("pthread_create");
    }
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++) {
        char ack;
        if (read_all(fds[i], &ack, 1) != 0) {
            fprintf(stderr, "raw_stream: receiver closed without acknowledging\n");
            return 1;
        }
    }
    double secs = now() - t0;
    double mbs = (double)total / secs / 1e6;
    printf("send bytes=%llu chunk=%llu rails=%d policy=%s seconds=%.6f MB/s=%.2f "
           "Mbit/s=%.1f shares=",
           (unsigned long long)total, (unsigned long long)chunk, n, pname, secs, mbs, mbs * 8);
    for (int i = 0; i < n; i++)
        printf("%s%.3f", i ? "," : "", (double)s[i].bytes / (double)total);
    printf("\n");
    for (int i = 0; i < n; i++) close(fds[i]);
    free(data);
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 2 && strcmp(argv[1], "recv") == 0) return cmd_recv(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "send") == 0) return cmd_send(argc - 2, argv + 2);
    fprintf(stderr,
            "usage: raw_stream recv [ADDR:]PORT...\n"
            "       raw_stream send ADDR:PORT[,ADDR:PORT...] BYTES CHUNK [round_robin|least_used]\n");
    return 2;
}

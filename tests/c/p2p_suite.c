/* Point-to-point scenarios, one per run: `p2p_suite <scenario>`.
 * Every process of the universe runs the same scenario and checks what it
 * receives byte by byte; any failure exits non-zero with a message. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <time.h>

#include "common.h"

static int me, nprocs;

static uint64_t seed_of(int src, int dst, uint64_t n) { return ((uint64_t)src << 40) ^ ((uint64_t)dst << 20) ^ n; }

/* Sizes across the eager/rendezvous boundary, different for every pair. */
static size_t pair_size(int src, int dst) {
    static const size_t sizes[] = {0, 1, 8, 1000, 65536, 65537, 300000, 4u << 20};
    return sizes[(src * 3 + dst * 5) % 8];
}

/* Every pair exchanges at once, both directions, all requests in flight. */
static void pairs(void) {
    int n = 2 * (nprocs - 1), k = 0;
    tether_request *reqs = xmalloc(sizeof *reqs * (size_t)(n + 1));
    tether_status *st = xmalloc(sizeof *st * (size_t)(n + 1));
    unsigned char **bufs = xmalloc(sizeof *bufs * (size_t)(n + 1));
    for (int p = 0; p < nprocs; p++) {
        if (p == me) continue;
        size_t in = pair_size(p, me), out = pair_size(me, p);
        bufs[k] = xmalloc(in);
        CHECK(tether_irecv(bufs[k], (int64_t)in, TETHER_BYTE, p, p, TETHER_COMM_UNIVERSE, &reqs[k]));
        k++;
        bufs[k] = xmalloc(out);
        fill(bufs[k], out, seed_of(me, p, 0));
        CHECK(tether_isend(bufs[k], (int64_t)out, TETHER_BYTE, p, me, TETHER_COMM_UNIVERSE, &reqs[k]));
        k++;
    }
    CHECK(tether_waitall(n, reqs, st));
    k = 0;
    for (int p = 0; p < nprocs; p++) {
        if (p == me) continue;
        EXPECT(reqs[k] == TETHER_REQUEST_NULL, "waitall resets requests");
        EXPECT(st[k].source == p && st[k].tag == p && st[k].bytes == (int64_t)pair_size(p, me),
               "status from %d: source %d tag %d bytes %lld", p, st[k].source, st[k].tag, (long long)st[k].bytes);
        long long bad = first_mismatch(bufs[k], pair_size(p, me), seed_of(p, me, 0));
        EXPECT(bad < 0, "message from %d wrong at byte %lld", p, bad);
        free(bufs[k]);
        free(bufs[k + 1]);
        k += 2;
    }
    free(reqs);
    free(st);
    free(bufs);
}

/* Deterministic pseudo-random sizes: mostly small, some up to 8 MiB. */
static size_t stream_size(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t r = *state >> 33;
    unsigned bucket = (unsigned)(r % 100);
    if (bucket < 70) return (size_t)(r >> 8) % 257;
    if (bucket < 90) return (size_t)(r >> 8) % 65537;
    if (bucket < 99) return (size_t)(r >> 8) % (1u << 20);
    return (size_t)(r >> 8) % (8u << 20) + 1;
}

/* A ring: each process streams `count` messages of mixed sizes and tags to
 * the next and receives as many from the previous, checking order (the
 * sequence number in the first bytes), tags and content. Receives alternate
 * between the exact tag and TETHER_ANY_TAG. */
struct ring {
    int prev, received;
    uint64_t recv_state;
    unsigned char *rbuf;
};

/* Receives the next message of the ring; when `only_if_there`, only if it
 * has arrived. Returns whether one was received. */
static int ring_receive(struct ring *r, int only_if_there) {
    if (only_if_there) {
        int flag = 0;
        CHECK(tether_iprobe(r->prev, TETHER_ANY_TAG, TETHER_COMM_UNIVERSE, &flag, TETHER_STATUS_IGNORE));
        if (!flag) return 0;
    }
    int n = r->received;
    size_t len = stream_size(&r->recv_state);
    int tag = n % 2 ? n % 4 : TETHER_ANY_TAG;
    tether_status st;
    CHECK(tether_recv(r->rbuf, 8 << 20, TETHER_BYTE, r->prev, tag, TETHER_COMM_UNIVERSE, &st));
    EXPECT(st.bytes == (int64_t)len && st.tag == n % 4 && st.source == r->prev,
           "message %d from %d: %lld bytes tag %d, expected %zu bytes tag %d", n, r->prev, (long long)st.bytes,
           st.tag, len, n % 4);
    if (len >= 4) {
        int seq;
        memcpy(&seq, r->rbuf, 4);
        EXPECT(seq == n, "message overtaken: got sequence %d, expected %d", seq, n);
        fill(r->rbuf, 4, seed_of(r->prev, me, (uint64_t)n));
    }
    long long bad = first_mismatch(r->rbuf, len, seed_of(r->prev, me, (uint64_t)n));
    EXPECT(bad < 0, "message %d from %d wrong at byte %lld", n, r->prev, bad);
    r->received++;
    return 1;
}

static void stream(int count) {
    int next = (me + 1) % nprocs;
    enum { WINDOW = 8 };
    tether_request sreq[WINDOW];
    unsigned char *sbuf[WINDOW];
    for (int w = 0; w < WINDOW; w++) {
        sreq[w] = TETHER_REQUEST_NULL;
        sbuf[w] = NULL;
    }
    struct ring r = {(me + nprocs - 1) % nprocs, 0, 0, xmalloc(8u << 20)};
    r.recv_state = (uint64_t)r.prev + 1;
    uint64_t send_state = (uint64_t)me + 1;
    for (int sent = 0; sent < count; sent++) {
        int w = sent % WINDOW, flag = 0;
        /* Keep receiving while the oldest send waits: its receiver may be
         * waiting for us too. */
        while (!flag) {
            CHECK(tether_test(&sreq[w], &flag, TETHER_STATUS_IGNORE));
            if (!flag && !(r.received < count && ring_receive(&r, 1))) CHECK(tether_progress());
        }
        free(sbuf[w]);
        size_t len = stream_size(&send_state);
        sbuf[w] = xmalloc(len);
        fill(sbuf[w], len, seed_of(me, next, (uint64_t)sent));
        if (len >= 4) memcpy(sbuf[w], &sent, 4);
        CHECK(tether_isend(sbuf[w], (int64_t)len, TETHER_BYTE, next, sent % 4, TETHER_COMM_UNIVERSE, &sreq[w]));
        while (r.received < count && ring_receive(&r, 1)) {
        }
    }
    while (r.received < count) ring_receive(&r, 0);
    CHECK(tether_waitall(WINDOW, sreq, TETHER_STATUSES_IGNORE));
    for (int w = 0; w < WINDOW; w++) free(sbuf[w]);
    free(r.rbuf);
}

/* Rank 0 receives everything with both wildcards; per source the order
 * must be the send order. */
static void wildcards(void) {
    enum { PER = 50 };
    if (me == 0) {
        int *seen = calloc((size_t)nprocs, sizeof *seen);
        for (int i = 0; i < PER * (nprocs - 1); i++) {
            int payload[2];
            tether_status st;
            CHECK(tether_recv(payload, 2, TETHER_INT, TETHER_ANY_SOURCE, TETHER_ANY_TAG, TETHER_COMM_UNIVERSE, &st));
            EXPECT(st.source > 0 && st.source < nprocs, "source %d", st.source);
            EXPECT(payload[0] == st.source && payload[1] == seen[st.source] && st.tag == 100 + seen[st.source] % 3,
                   "from %d got (%d,%d) tag %d, expected sequence %d", st.source, payload[0], payload[1], st.tag,
                   seen[st.source]);
            int64_t count;
            CHECK(tether_get_count(&st, TETHER_INT, &count));
            EXPECT(count == 2, "get_count %lld", (long long)count);
            seen[st.source]++;
        }
        free(seen);
    } else {
        for (int i = 0; i < PER; i++) {
            int payload[2] = {me, i};
            CHECK(tether_send(payload, 2, TETHER_INT, 0, 100 + i % 3, TETHER_COMM_UNIVERSE));
        }
    }
}

/* A message longer than the buffer: TETHER_ERR_TRUNCATE, true size in the
 * status, the prefix delivered, and the link still usable. */
static void truncation(void) {
    static const size_t sizes[] = {100, 1u << 20};
    if (me == 0) {
        for (int i = 0; i < 2; i++) {
            unsigned char *buf = xmalloc(sizes[i]);
            fill(buf, sizes[i], seed_of(0, 1, (uint64_t)i));
            CHECK(tether_send(buf, (int64_t)sizes[i], TETHER_BYTE, 1, 7, TETHER_COMM_UNIVERSE));
            CHECK(tether_send(buf, 16, TETHER_BYTE, 1, 8, TETHER_COMM_UNIVERSE));
            free(buf);
        }
    } else if (me == 1) {
        for (int i = 0; i < 2; i++) {
            unsigned char small[10];
            tether_status st;
            int rc = tether_recv(small, 10, TETHER_BYTE, 0, 7, TETHER_COMM_UNIVERSE, &st);
            EXPECT(rc == TETHER_ERR_TRUNCATE && st.error == TETHER_ERR_TRUNCATE, "rc %d error %d", rc, st.error);
            EXPECT(st.bytes == (int64_t)sizes[i] && st.source == 0 && st.tag == 7, "bytes %lld", (long long)st.bytes);
            EXPECT(first_mismatch(small, 10, seed_of(0, 1, (uint64_t)i)) < 0, "prefix of truncated message");
            char msg[TETHER_MAX_ERROR_STRING];
            CHECK(tether_last_error(msg, sizeof msg));
            EXPECT(strstr(msg, "longer than the receive buffer") != NULL, "last error: %s", msg);
            unsigned char after[16];
            CHECK(tether_recv(after, 16, TETHER_BYTE, 0, 8, TETHER_COMM_UNIVERSE, &st));
            EXPECT(first_mismatch(after, 16, seed_of(0, 1, (uint64_t)i)) < 0, "message after truncation");
        }
    }
}

/* Probe a message of unknown size, then receive exactly it. */
static void probe(void) {
    if (me == 0) {
        for (int dst = 1; dst < nprocs; dst++) {
            size_t len = (size_t)dst * 40000;
            unsigned char *buf = xmalloc(len);
            fill(buf, len, seed_of(0, dst, 9));
            CHECK(tether_send(buf, (int64_t)len, TETHER_BYTE, dst, 3, TETHER_COMM_UNIVERSE));
            free(buf);
        }
    } else {
        tether_status st;
        int flag = 0;
        CHECK(tether_iprobe(0, 4, TETHER_COMM_UNIVERSE, &flag, &st));
        EXPECT(flag == 0, "no message with tag 4 exists");
        CHECK(tether_probe(TETHER_ANY_SOURCE, 3, TETHER_COMM_UNIVERSE, &st));
        int64_t count;
        CHECK(tether_get_count(&st, TETHER_BYTE, &count));
        EXPECT(st.source == 0 && count == me * 40000, "probe: source %d count %lld", st.source, (long long)count);
        CHECK(tether_iprobe(0, 3, TETHER_COMM_UNIVERSE, &flag, &st));
        EXPECT(flag == 1 && st.bytes == count, "iprobe after probe sees the same message");
        unsigned char *buf = xmalloc((size_t)count);
        CHECK(tether_recv(buf, count, TETHER_BYTE, st.source, st.tag, TETHER_COMM_UNIVERSE, &st));
        EXPECT(first_mismatch(buf, (size_t)count, seed_of(0, me, 9)) < 0, "probed message content");
        free(buf);
    }
}

/* A cancelled receive completes as cancelled and takes no message. */
static void cancel(void) {
    if (me == 1) {
        int dummy = 0, value = 0;
        tether_request req;
        tether_status st;
        CHECK(tether_irecv(&dummy, 1, TETHER_INT, 0, 99, TETHER_COMM_UNIVERSE, &req));
        CHECK(tether_cancel(&req));
        CHECK(tether_wait(&req, &st));
        EXPECT(st.error == TETHER_ERR_CANCELLED && req == TETHER_REQUEST_NULL, "status error %d", st.error);
        CHECK(tether_send(&value, 1, TETHER_INT, 0, 98, TETHER_COMM_UNIVERSE));
        CHECK(tether_recv(&value, 1, TETHER_INT, 0, 99, TETHER_COMM_UNIVERSE, &st));
        EXPECT(value == 4242 && dummy == 0, "value %d dummy %d", value, dummy);
    } else if (me == 0) {
        int value = 4242;
        CHECK(tether_recv(&value, 1, TETHER_INT, 1, 98, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
        value = 4242;
        CHECK(tether_send(&value, 1, TETHER_INT, 1, 99, TETHER_COMM_UNIVERSE));
    }
}

/* Zero-byte messages, NULL buffers, self-sends, waitany and testall. */
static void odd_cases(void) {
    int other = (me + 1) % nprocs, from = (me + nprocs - 1) % nprocs;
    tether_request reqs[3];
    CHECK(tether_irecv(NULL, 0, TETHER_BYTE, from, 0, TETHER_COMM_UNIVERSE, &reqs[0]));
    CHECK(tether_isend(NULL, 0, TETHER_BYTE, other, 0, TETHER_COMM_UNIVERSE, &reqs[1]));
    double self_in = 0, self_out = 2.5;
    CHECK(tether_isend(&self_out, 1, TETHER_DOUBLE, me, 1, TETHER_COMM_UNIVERSE, &reqs[2]));
    CHECK(tether_recv(&self_in, 1, TETHER_DOUBLE, me, 1, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
    EXPECT(self_in == 2.5, "self-send delivered %g", self_in);
    int done = 0, index;
    tether_status st;
    while (done < 3) {
        CHECK(tether_waitany(3, reqs, &index, &st));
        EXPECT(index >= 0 && index < 3 && reqs[index] == TETHER_REQUEST_NULL, "waitany index %d", index);
        if (index == 0) EXPECT(st.bytes == 0 && st.source == from, "zero-byte status");
        done++;
    }
    CHECK(tether_waitany(3, reqs, &index, &st));
    EXPECT(index == TETHER_UNDEFINED, "waitany on no active request gives TETHER_UNDEFINED");
    int flag = 0;
    CHECK(tether_testall(3, reqs, &flag, TETHER_STATUSES_IGNORE));
    EXPECT(flag == 1, "testall of null requests");
}

/* Blocking receives keep MPI's matching order when a small message could
 * go straight from the link into the caller's buffer (the short path of
 * runtime/direct.rs): a receive posted earlier takes the message it
 * matches first, a message that arrived earlier is taken before a newer
 * one, a rendezvous message before the eager one behind it, and a message
 * of another communicator is left for that one. Between ranks 0 and 1. */
static void blocking_order(void) {
    int both[2] = {0, 1};
    tether_comm pair;
    CHECK(tether_comm_create_ranks(2, both, &pair));
    if (me > 1) return;
    enum { BIG = 1 << 20 };
    unsigned char *big = xmalloc(BIG);
    int64_t v, got;
    tether_status st;
    if (me == 0) {
        /* 1: two messages of one envelope; an irecv posted first takes the first. */
        for (v = 1; v <= 2; v++) CHECK(tether_send(&v, 1, TETHER_INT64, 1, 5, TETHER_COMM_UNIVERSE));
        /* 2: a message that waits in the unexpected queue, then a newer one. */
        v = 3;
        CHECK(tether_send(&v, 1, TETHER_INT64, 1, 7, TETHER_COMM_UNIVERSE));
        CHECK(tether_recv(&got, 1, TETHER_INT64, 1, 70, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
        v = 4;
        CHECK(tether_send(&v, 1, TETHER_INT64, 1, 7, TETHER_COMM_UNIVERSE));
        /* 3: rendezvous, then an eager message of the same envelope. */
        fill(big, BIG, seed_of(0, 1, 99));
        CHECK(tether_send(big, BIG, TETHER_BYTE, 1, 9, TETHER_COMM_UNIVERSE));
        v = 5;
        CHECK(tether_send(&v, 1, TETHER_INT64, 1, 9, TETHER_COMM_UNIVERSE));
        /* 4: another communicator's message first, then the universe's. */
        v = 6;
        CHECK(tether_send(&v, 1, TETHER_INT64, 1, 11, pair));
        v = 7;
        CHECK(tether_send(&v, 1, TETHER_INT64, 1, 11, TETHER_COMM_UNIVERSE));
        /* 5: a wildcard tag takes the oldest message of the source. */
        for (v = 8; v <= 9; v++) CHECK(tether_send(&v, 1, TETHER_INT64, 1, 20 + (int)v, TETHER_COMM_UNIVERSE));
        /* 6: an irecv posted for another tag leaves the blocking receive
         * its message; with a wildcard tag the irecv still comes first. */
        for (v = 10; v <= 13; v++) CHECK(tether_send(&v, 1, TETHER_INT64, 1, 30 + (int)v % 2, TETHER_COMM_UNIVERSE));
    } else {
        int64_t first = 0;
        tether_request req;
        v = 0;
        CHECK(tether_irecv(&first, 1, TETHER_INT64, TETHER_ANY_SOURCE, 5, TETHER_COMM_UNIVERSE, &req));
        CHECK(tether_recv(&got, 1, TETHER_INT64, 0, 5, TETHER_COMM_UNIVERSE, &st));
        CHECK(tether_wait(&req, TETHER_STATUS_IGNORE));
        EXPECT(first == 1 && got == 2, "posted irecv got %lld, blocking recv %lld (expected 1, 2)",
               (long long)first, (long long)got);

        CHECK(tether_probe(0, 7, TETHER_COMM_UNIVERSE, &st));
        CHECK(tether_send(&v, 1, TETHER_INT64, 0, 70, TETHER_COMM_UNIVERSE));
        CHECK(tether_recv(&got, 1, TETHER_INT64, 0, 7, TETHER_COMM_UNIVERSE, &st));
        EXPECT(got == 3, "blocking recv after a probe got %lld, expected the probed 3", (long long)got);
        CHECK(tether_recv(&got, 1, TETHER_INT64, 0, 7, TETHER_COMM_UNIVERSE, &st));
        EXPECT(got == 4, "got %lld, expected 4", (long long)got);

        memset(big, 0, BIG);
        CHECK(tether_recv(big, BIG, TETHER_BYTE, 0, 9, TETHER_COMM_UNIVERSE, &st));
        EXPECT(st.bytes == BIG && first_mismatch(big, BIG, seed_of(0, 1, 99)) < 0, "rendezvous first: %lld bytes",
               (long long)st.bytes);
        CHECK(tether_recv(&got, 1, TETHER_INT64, 0, 9, TETHER_COMM_UNIVERSE, &st));
        EXPECT(got == 5 && st.bytes == 8, "eager after rendezvous got %lld", (long long)got);

        CHECK(tether_recv(&got, 1, TETHER_INT64, 0, 11, TETHER_COMM_UNIVERSE, &st));
        EXPECT(got == 7, "universe receive got %lld, expected 7 (6 is the pair communicator's)", (long long)got);
        CHECK(tether_recv(&got, 1, TETHER_INT64, 0, 11, pair, &st));
        EXPECT(got == 6, "pair communicator receive got %lld", (long long)got);

        for (int64_t want = 8; want <= 9; want++) {
            CHECK(tether_recv(&got, 1, TETHER_INT64, 0, TETHER_ANY_TAG, TETHER_COMM_UNIVERSE, &st));
            EXPECT(got == want && st.tag == 20 + (int)want && st.source == 0 && st.bytes == 8,
                   "wildcard tag got %lld tag %d source %d", (long long)got, st.tag, st.source);
        }

        int64_t posted = 0;
        CHECK(tether_irecv(&posted, 1, TETHER_INT64, 0, 31, TETHER_COMM_UNIVERSE, &req));
        CHECK(tether_recv(&got, 1, TETHER_INT64, 0, 30, TETHER_COMM_UNIVERSE, &st));
        EXPECT(got == 10 && st.tag == 30, "recv of tag 30 beside an irecv of 31 got %lld tag %d", (long long)got,
               st.tag);
        CHECK(tether_wait(&req, &st));
        EXPECT(posted == 11 && st.tag == 31, "irecv of tag 31 got %lld tag %d", (long long)posted, st.tag);
        CHECK(tether_irecv(&posted, 1, TETHER_INT64, 0, 30, TETHER_COMM_UNIVERSE, &req));
        CHECK(tether_recv(&got, 1, TETHER_INT64, 0, TETHER_ANY_TAG, TETHER_COMM_UNIVERSE, &st));
        EXPECT(got == 13 && st.tag == 31, "wildcard recv after an irecv of tag 30 got %lld tag %d (12 is the irecv's)",
               (long long)got, st.tag);
        CHECK(tether_wait(&req, &st));
        EXPECT(posted == 12 && st.tag == 30, "irecv of tag 30 got %lld tag %d", (long long)posted, st.tag);
    }
    free(big);
    CHECK(tether_comm_free(&pair));
}

/* Wrong arguments give the documented classes and a message. */
static void errors(void) {
    int x = 0;
    tether_request req;
    char msg[TETHER_MAX_ERROR_STRING];
    EXPECT(tether_send(&x, 1, TETHER_INT, nprocs, 0, TETHER_COMM_UNIVERSE) == TETHER_ERR_RANK, "rank");
    CHECK(tether_last_error(msg, sizeof msg));
    EXPECT(strstr(msg, "outside") != NULL, "rank message: %s", msg);
    EXPECT(tether_send(&x, 1, TETHER_INT, 0, -5, TETHER_COMM_UNIVERSE) == TETHER_ERR_TAG, "tag");
    /* TETHER_TAG_UB is the largest tag: it travels; INT_MIN, what
     * TETHER_TAG_UB + 1 wraps to, is refused with a message naming it. */
    _Static_assert(TETHER_TAG_UB == INT_MAX, "every non-negative int is a tag");
    int y = -1;
    tether_status ub;
    x = 41 + me;
    CHECK(tether_isend(&x, 1, TETHER_INT, me, TETHER_TAG_UB, TETHER_COMM_UNIVERSE, &req));
    CHECK(tether_recv(&y, 1, TETHER_INT, me, TETHER_TAG_UB, TETHER_COMM_UNIVERSE, &ub));
    CHECK(tether_wait(&req, TETHER_STATUS_IGNORE));
    EXPECT(y == 41 + me && ub.tag == TETHER_TAG_UB, "tag TETHER_TAG_UB: got %d with tag %d", y, ub.tag);
    EXPECT(tether_send(&x, 1, TETHER_INT, me, INT_MIN, TETHER_COMM_UNIVERSE) == TETHER_ERR_TAG, "tag INT_MIN");
    CHECK(tether_last_error(msg, sizeof msg));
    EXPECT(strstr(msg, "-2147483648") && strstr(msg, "TETHER_TAG_UB (2147483647)"), "tag message: %s", msg);
    x = 0;
    EXPECT(tether_send(&x, 1, 999, 0, 0, TETHER_COMM_UNIVERSE) == TETHER_ERR_TYPE, "type");
    EXPECT(tether_send(&x, 1, TETHER_INT, 0, 0, 12345) == TETHER_ERR_COMM, "comm");
    EXPECT(tether_send(&x, -1, TETHER_INT, 0, 0, TETHER_COMM_UNIVERSE) == TETHER_ERR_COUNT, "count");
    EXPECT(tether_isend(&x, 1, TETHER_INT, 0, 0, TETHER_COMM_UNIVERSE, NULL) == TETHER_ERR_ARG, "null req");
    EXPECT(tether_send(NULL, 4, TETHER_INT, 0, 0, TETHER_COMM_UNIVERSE) == TETHER_ERR_ARG, "null buffer");
    req = 777;
    EXPECT(tether_wait(&req, TETHER_STATUS_IGNORE) == TETHER_ERR_REQUEST, "unknown request");
    EXPECT(req == 777, "outputs untouched on error");
    EXPECT(tether_hint("NO_SUCH_HINT", "1") == TETHER_ERR_UNKNOWN_HINT, "unknown hint");
    EXPECT(tether_hint("IN_KERNEL", "maybe") == TETHER_ERR_HINT_VALUE, "hint value");
    CHECK(tether_hint("IN_KERNEL", "1"));
    char value[16];
    CHECK(tether_hint_get("IN_KERNEL", value, sizeof value));
    EXPECT(strcmp(value, "1") == 0, "hint read back: %s", value);
    CHECK(tether_hint("IN_KERNEL", "0"));
    EXPECT(tether_hint("MAX_LINKS", "-1") == TETHER_ERR_HINT_VALUE, "MAX_LINKS -1");
    CHECK(tether_hint("MAX_LINKS", "4"));
    CHECK(tether_hint_get("MAX_LINKS", value, sizeof value));
    EXPECT(strcmp(value, "4") == 0, "MAX_LINKS read back: %s", value);
    CHECK(tether_hint("MAX_LINKS", "0"));
    CHECK(tether_error_string(TETHER_ERR_PEER_LOST, msg, sizeof msg));
    EXPECT(strncmp(msg, "TETHER_ERR_PEER_LOST", 20) == 0, "error string: %s", msg);
    int size;
    CHECK(tether_type_size(TETHER_DOUBLE_INT, &size));
    EXPECT(size == 16, "DOUBLE_INT size %d", size);
}

/* Identity: universe rank = programs ordered by name, ranks concatenated. */
static void identity(void) {
    int count, id, prank, total = 0, urank;
    CHECK(tether_program_count(&count));
    CHECK(tether_program_id(&id));
    CHECK(tether_program_rank(&prank));
    CHECK(tether_universe_rank(&urank));
    char name[TETHER_MAX_PROGRAM_NAME], prev[TETHER_MAX_PROGRAM_NAME] = "";
    char msg[TETHER_MAX_ERROR_STRING];
    int first = 0;
    for (int p = 0; p < count; p++) {
        int size, found;
        CHECK(tether_program_name(p, name, sizeof name));
        CHECK(tether_program_size(p, &size));
        CHECK(tether_program_find(name, &found));
        EXPECT(found == p && strcmp(prev, name) < 0, "programs ordered by name: %s after %s", name, prev);
        for (int r = 0; r < size; r++) {
            int u = -1;
            CHECK(tether_program_universe_rank(p, r, &u));
            EXPECT(u == total + r, "program %d rank %d is universe rank %d, not %d", p, r, total + r, u);
        }
        int u = -7;
        EXPECT(tether_program_universe_rank(p, size, &u) == TETHER_ERR_RANK && u == -7,
               "rank %d of program %d of %d", size, p, size);
        CHECK(tether_last_error(msg, sizeof msg));
        EXPECT(strstr(msg, "rank") && strstr(msg, name), "bad rank message names rank and program: %s", msg);
        EXPECT(tether_program_universe_rank(p, -1, &u) == TETHER_ERR_RANK, "rank -1");
        if (p == id) first = total;
        total += size;
        strcpy(prev, name);
    }
    EXPECT(total == nprocs && urank == first + prank, "universe rank %d = %d + %d of %d", urank, first, prank, total);
    int u;
    CHECK(tether_comm_universe_rank(TETHER_COMM_UNIVERSE, me, &u));
    EXPECT(u == me, "universe communicator is the identity");
    EXPECT(tether_program_find("no-such-program", &u) == TETHER_ERR_ARG, "unknown program");
    CHECK(tether_program_universe_rank(id, prank, &u));
    EXPECT(u == urank, "my own universe rank %d from (program %d, rank %d): %d", urank, id, prank, u);
    EXPECT(tether_program_universe_rank(count, 0, &u) == TETHER_ERR_ARG, "program id %d of %d", count, count);
    CHECK(tether_last_error(msg, sizeof msg));
    EXPECT(strstr(msg, "program id") != NULL, "bad id message: %s", msg);
    EXPECT(tether_program_universe_rank(0, 0, NULL) == TETHER_ERR_ARG, "NULL output");
    CHECK(tether_program_name(id, name, sizeof name));
    printf("identity %s rank %d universe %d of %d\n", name, prank, urank, nprocs);
}

/* Rank 1 says hello and dies without finalizing; rank 0's pending and new
 * operations with it end in TETHER_ERR_PEER_LOST instead of hanging. */
static void lost(void) {
    int x = 1;
    if (me == 1) {
        CHECK(tether_send(&x, 1, TETHER_INT, 0, 1, TETHER_COMM_UNIVERSE));
        fflush(stdout);
        _Exit(0);
    } else if (me == 0) {
        CHECK(tether_recv(&x, 1, TETHER_INT, 1, 1, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
        tether_status st;
        int rc = tether_recv(&x, 1, TETHER_INT, 1, 2, TETHER_COMM_UNIVERSE, &st);
        char msg[TETHER_MAX_ERROR_STRING];
        CHECK(tether_last_error(msg, sizeof msg));
        EXPECT(rc == TETHER_ERR_PEER_LOST && st.error == TETHER_ERR_PEER_LOST, "rc %d: %s", rc, msg);
        EXPECT(strstr(msg, "alpha:1") != NULL, "message names the peer: %s", msg);
        static char big[1 << 20];
        rc = tether_send(big, sizeof big, TETHER_BYTE, 1, 3, TETHER_COMM_UNIVERSE);
        EXPECT(rc == TETHER_ERR_PEER_LOST, "send to a lost peer: %d", rc);
        char sent[TETHER_MAX_ERROR_STRING];
        CHECK(tether_last_error(sent, sizeof sent));
        EXPECT(strstr(sent, "alpha:1") != NULL && strstr(sent, "alpha:0") == NULL,
               "the send's error names the lost peer, not this process: %s", sent);
        /* So does creating a communicator with it, in words (no Rust debug
         * output such as "Transfer { rank: 1, error: PeerLost }"). */
        tether_comm with_lost;
        int both[2] = {0, 1};
        rc = tether_comm_create_ranks(2, both, &with_lost);
        CHECK(tether_last_error(sent, sizeof sent));
        EXPECT(rc == TETHER_ERR_PEER_LOST && strstr(sent, "alpha:1") != NULL && strchr(sent, '{') == NULL,
               "creating a communicator with a lost peer: %d: %s", rc, sent);
        printf("peer loss reported: %s\n", msg);
    }
}

/* Universe rank 0 starts FLOOD eager sends of 1 to 2 KiB to rank 1 at
 * once and waits for them all, while rank 1 computes outside Tether for
 * a while before it receives: the links fill, frames wait in the
 * router's queue (back-pressure), the eager sends still complete at the
 * sender (copied), and rank 1 receives everything in order. */
static void flood(void) {
    enum { FLOOD = 3000, MAX = 2048 };
    if (me == 0) {
        tether_request *reqs = xmalloc(FLOOD * sizeof *reqs);
        unsigned char *bufs = xmalloc((size_t)FLOOD * MAX);
        for (int i = 0; i < FLOOD; i++) {
            size_t len = 1024 + (size_t)(i * 37) % (MAX - 1024);
            fill(bufs + (size_t)i * MAX, len, seed_of(0, 1, (uint64_t)i));
            CHECK(tether_isend(bufs + (size_t)i * MAX, (int64_t)len, TETHER_BYTE, 1, 3, TETHER_COMM_UNIVERSE, &reqs[i]));
        }
        CHECK(tether_waitall(FLOOD, reqs, TETHER_STATUSES_IGNORE));
        int64_t full = 0;
        CHECK(tether_stats_read("link_full", &full));
        printf("flood: the link was full %lld times\n", (long long)full);
        free(reqs);
        free(bufs);
    } else if (me == 1) {
        struct timespec ts = {0, 300 * 1000 * 1000};
        nanosleep(&ts, NULL);
        unsigned char buf[MAX];
        for (int i = 0; i < FLOOD; i++) {
            tether_status st;
            CHECK(tether_recv(buf, MAX, TETHER_BYTE, 0, 3, TETHER_COMM_UNIVERSE, &st));
            size_t len = 1024 + (size_t)(i * 37) % (MAX - 1024);
            EXPECT(st.bytes == (int64_t)len, "message %d: %lld bytes, expected %zu", i, (long long)st.bytes, len);
            EXPECT(first_mismatch(buf, len, seed_of(0, 1, (uint64_t)i)) < 0, "message %d changed or out of order", i);
        }
    }
}

/* Rank 1 aborts the universe with code 7 once linked with rank 0, which is
 * blocked in a receive: rank 0 must exit with that code too. */
static void abort_universe(void) {
    int x = 0;
    if (me == 1) {
        CHECK(tether_send(&x, 1, TETHER_INT, 0, 1, TETHER_COMM_UNIVERSE));
        tether_abort(7);
    } else if (me == 0) {
        CHECK(tether_recv(&x, 1, TETHER_INT, 1, 1, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
        tether_recv(&x, 1, TETHER_INT, 1, 2, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE);
        fprintf(stderr, "rank 0 outlived the abort\n");
        exit(1);
    }
}

/* Rank 1 links with rank 0 and waits to be killed (kill -9 by the test)
 * with a receive pending; rank 0 has a rendezvous send and a receive in
 * flight with it when that happens, and both must end in
 * TETHER_ERR_PEER_LOST. */
static void victim(void) {
    int x = 1;
    static unsigned char big[8u << 20];
    if (me == 1) {
        tether_request r;
        CHECK(tether_send(&x, 1, TETHER_INT, 0, 1, TETHER_COMM_UNIVERSE));
        CHECK(tether_irecv(big, sizeof big, TETHER_BYTE, 0, 9, TETHER_COMM_UNIVERSE, &r));
        printf("victim ready\n");
        fflush(stdout);
        for (;;) {
            CHECK(tether_progress());
            struct timespec ts = {0, 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    } else if (me == 0) {
        tether_request reqs[2];
        tether_status st[2];
        CHECK(tether_recv(&x, 1, TETHER_INT, 1, 1, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
        CHECK(tether_isend(big, sizeof big, TETHER_BYTE, 1, 5, TETHER_COMM_UNIVERSE, &reqs[0]));
        CHECK(tether_irecv(&x, 1, TETHER_INT, 1, 6, TETHER_COMM_UNIVERSE, &reqs[1]));
        printf("survivor waiting\n");
        fflush(stdout);
        int rc = tether_waitall(2, reqs, st);
        EXPECT(rc == TETHER_ERR_PEER_LOST && st[0].error == TETHER_ERR_PEER_LOST && st[1].error == TETHER_ERR_PEER_LOST,
               "rc %d, statuses %d %d", rc, st[0].error, st[1].error);
        char msg[TETHER_MAX_ERROR_STRING];
        CHECK(tether_last_error(msg, sizeof msg));
        printf("lost ok: %s\n", msg);
    }
}

/* Waits until the file named by TEST_GATE exists (tests that act on a
 * running universe first). */
static void wait_for_gate(void) {
    const char *gate = getenv("TEST_GATE");
    if (!gate) return;
    for (int i = 0; i < 6000; i++) {
        FILE *f = fopen(gate, "r");
        if (f) {
            fclose(f);
            return;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "gate %s never opened\n", gate);
    exit(1);
}

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    wait_for_gate();
    CHECK(tether_universe_rank(&me));
    CHECK(tether_comm_size(TETHER_COMM_UNIVERSE, &nprocs));
    const char *what = argc > 1 ? argv[1] : "all";
    int all = strcmp(what, "all") == 0;
    if (all || !strcmp(what, "identity")) identity();
    if (all || !strcmp(what, "pairs")) pairs();
    if (all || !strcmp(what, "stream")) stream(argc > 2 ? atoi(argv[2]) : 2000);
    if (all || !strcmp(what, "wildcards")) wildcards();
    if (all || !strcmp(what, "truncation")) truncation();
    if (all || !strcmp(what, "probe")) probe();
    if (all || !strcmp(what, "cancel")) cancel();
    if (all || !strcmp(what, "odd")) odd_cases();
    if (all || !strcmp(what, "errors")) errors();
    if (all || !strcmp(what, "blocking_order")) blocking_order();
    if (!strcmp(what, "flood")) flood();
    if (!strcmp(what, "lost")) lost();
    if (!strcmp(what, "abort")) abort_universe();
    if (!strcmp(what, "victim")) victim();
    CHECK(tether_finalize());
    /* A process joins once (as MPI): a second init is refused. */
    int flag = 1, again = tether_init(&argc, &argv);
    EXPECT(again == TETHER_ERR_INIT, "tether_init after tether_finalize returned %d, not TETHER_ERR_INIT", again);
    CHECK(tether_initialized(&flag));
    EXPECT(flag == 0, "tether_initialized says 1 after finalize");
    printf("ok %s\n", what);
    return 0;
}

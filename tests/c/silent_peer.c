/* A peer that goes silent, for tests/test_liveness.py.
 *
 *   silent_peer SCENARIO BYTES [SECONDS]
 *
 * Universe ranks: 0 the survivor, 1 the victim (stopped, resumed or
 * computing by the test's choice), 2 (when there is one) a third process
 * that exchanges with the survivor after the victim is lost. Every
 * process first exchanges a message with the survivor, so that links
 * exist, then:
 *
 *   recv     the survivor waits for a receive of BYTES from the victim,
 *            which never sends: the wait must end in TETHER_ERR_PEER_LOST
 *            once the test stopped the victim (SIGSTOP); a new send to
 *            the victim must fail at once with the same class, and the
 *            third process's messages must still flow.
 *   send     the same with a send of BYTES to the victim, which never
 *            receives it (the test makes it rendezvous).
 *   barrier  the survivor and the third process enter a barrier that the
 *            victim never joins: both must fail with TETHER_ERR_PEER_LOST
 *            once the test stopped the victim ("lost <ms> <message>").
 *   bulk     the survivor sends BYTES to the victim, which acknowledges
 *            them: a transfer slower than the timeout (the test throttles
 *            the link) must not lose either ("bulk ok <ms>").
 *   compute  the victim computes for SECONDS without calling Tether, then
 *            sends BYTES: the survivor's receive completes.
 *   resume   the survivor sends 64 messages of BYTES to the victim and
 *            waits for its acknowledgement; the test stops the victim for
 *            a while (less than the timeout) and resumes it: every
 *            message arrives intact.
 *
 * Lines the test reads: "ready <rank>" once linked, then the survivor's
 * result ("lost <ms> <message>", "new lost", "third ok", "compute ok",
 * "resume ok"), and "done <rank>" after finalize. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "common.h"

static int me, nprocs;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void say(const char *fmt, int value) {
    printf(fmt, value);
    printf("\n");
    fflush(stdout);
}

/* Every other process exchanges one int with the survivor. */
static void link_up(void) {
    int x = me;
    if (me == 0) {
        for (int peer = 1; peer < nprocs; peer++) {
            CHECK(tether_recv(&x, 1, TETHER_INT, peer, 1, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
            CHECK(tether_send(&x, 1, TETHER_INT, peer, 2, TETHER_COMM_UNIVERSE));
        }
    } else {
        CHECK(tether_send(&x, 1, TETHER_INT, 0, 1, TETHER_COMM_UNIVERSE));
        CHECK(tether_recv(&x, 1, TETHER_INT, 0, 2, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
    }
}

/* The third process and the survivor exchange 100 messages. */
static void third(void) {
    int x = 0;
    for (int i = 0; i < 100; i++) {
        if (me == 0) {
            CHECK(tether_send(&i, 1, TETHER_INT, 2, 10, TETHER_COMM_UNIVERSE));
            CHECK(tether_recv(&x, 1, TETHER_INT, 2, 11, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
        } else {
            CHECK(tether_recv(&x, 1, TETHER_INT, 0, 10, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
            CHECK(tether_send(&x, 1, TETHER_INT, 0, 11, TETHER_COMM_UNIVERSE));
        }
        EXPECT(x == i, "message %d of the third process carried %d", i, x);
    }
    if (me == 0) say("third ok", 0);
}

static void lost(const char *what, size_t bytes) {
    unsigned char *buf = xmalloc(bytes);
    fill(buf, bytes, 7);
    if (me == 1) {
        say("ready %d", me);
        /* Never sends, never receives what the survivor sends: blocks in
         * a receive nobody answers until the test stops and kills it. */
        int x;
        int rc = tether_recv(&x, 1, TETHER_INT, 0, 99, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE);
        char msg[TETHER_MAX_ERROR_STRING];
        tether_last_error(msg, sizeof msg);
        printf("victim %d %s\n", rc, msg);
        fflush(stdout);
        exit(3);
    }
    if (me == 2) {
        say("ready %d", me);
        third();
        free(buf);
        return;
    }
    tether_request req;
    if (!strcmp(what, "recv"))
        CHECK(tether_irecv(buf, (int64_t)bytes, TETHER_BYTE, 1, 5, TETHER_COMM_UNIVERSE, &req));
    else
        CHECK(tether_isend(buf, (int64_t)bytes, TETHER_BYTE, 1, 5, TETHER_COMM_UNIVERSE, &req));
    say("ready %d", me);
    double start = now_ms();
    tether_status st;
    int rc = tether_wait(&req, &st);
    double took = now_ms() - start;
    char msg[TETHER_MAX_ERROR_STRING];
    tether_last_error(msg, sizeof msg);
    EXPECT(rc == TETHER_ERR_PEER_LOST && st.error == TETHER_ERR_PEER_LOST && req == TETHER_REQUEST_NULL,
           "wait returned %d, status %d: %s", rc, st.error, msg);
    printf("lost %.0f %s\n", took, msg);
    fflush(stdout);
    /* A new operation with the lost peer fails at once. */
    start = now_ms();
    int x = 1;
    rc = tether_send(&x, 1, TETHER_INT, 1, 6, TETHER_COMM_UNIVERSE);
    tether_last_error(msg, sizeof msg);
    EXPECT(rc == TETHER_ERR_PEER_LOST && now_ms() - start < 500, "a new send returned %d after %.0f ms: %s", rc,
           now_ms() - start, msg);
    say("new lost", 0);
    if (nprocs > 2) third();
    /* Stays a while without calling Tether, when asked (its heartbeat
     * thread answers meanwhile). */
    const char *linger = getenv("LINGER_S");
    if (linger) {
        struct timespec ts = {atoi(linger), 0};
        nanosleep(&ts, NULL);
    }
    free(buf);
}

static void barrier(void) {
    if (me == 1) {
        say("ready %d", me);
        int x;
        tether_recv(&x, 1, TETHER_INT, 0, 99, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE);
        exit(3);
    }
    say("ready %d", me);
    double start = now_ms();
    int rc = tether_barrier(TETHER_COMM_UNIVERSE);
    char msg[TETHER_MAX_ERROR_STRING];
    tether_last_error(msg, sizeof msg);
    EXPECT(rc == TETHER_ERR_PEER_LOST, "barrier returned %d: %s", rc, msg);
    printf("lost %.0f %s\n", now_ms() - start, msg);
    fflush(stdout);
}

static void bulk(size_t bytes) {
    unsigned char *buf = xmalloc(bytes);
    int ack = 0;
    double start = now_ms();
    if (me == 0) {
        fill(buf, bytes, 21);
        CHECK(tether_send(buf, (int64_t)bytes, TETHER_BYTE, 1, 5, TETHER_COMM_UNIVERSE));
        CHECK(tether_recv(&ack, 1, TETHER_INT, 1, 6, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
        EXPECT(ack == 1, "acknowledged %d", ack);
        printf("bulk ok %.0f\n", now_ms() - start);
        fflush(stdout);
    } else if (me == 1) {
        CHECK(tether_recv(buf, (int64_t)bytes, TETHER_BYTE, 0, 5, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
        long long bad = first_mismatch(buf, bytes, 21);
        EXPECT(bad < 0, "byte %lld of the bulk transfer is wrong", bad);
        ack = 1;
        CHECK(tether_send(&ack, 1, TETHER_INT, 0, 6, TETHER_COMM_UNIVERSE));
    }
    free(buf);
}

static void compute(size_t bytes, double seconds) {
    unsigned char *buf = xmalloc(bytes);
    if (me == 1) {
        say("ready %d", me);
        /* Busy, outside Tether: its heartbeat thread must answer. */
        volatile uint64_t spin = 0;
        double until = now_ms() + seconds * 1e3;
        while (now_ms() < until) spin++;
        fill(buf, bytes, 11);
        CHECK(tether_send(buf, (int64_t)bytes, TETHER_BYTE, 0, 5, TETHER_COMM_UNIVERSE));
    } else if (me == 0) {
        tether_request req;
        CHECK(tether_irecv(buf, (int64_t)bytes, TETHER_BYTE, 1, 5, TETHER_COMM_UNIVERSE, &req));
        say("ready %d", me);
        CHECK(tether_wait(&req, TETHER_STATUS_IGNORE));
        long long bad = first_mismatch(buf, bytes, 11);
        EXPECT(bad < 0, "byte %lld of the computing peer's message is wrong", bad);
        say("compute ok", 0);
    }
    free(buf);
}

enum { RESUME_MESSAGES = 64 };

static void resume(size_t bytes) {
    unsigned char *buf = xmalloc(bytes * RESUME_MESSAGES);
    int ack = 0;
    if (me == 1) {
        say("ready %d", me);
        for (int i = 0; i < RESUME_MESSAGES; i++) {
            unsigned char *m = buf + (size_t)i * bytes;
            CHECK(tether_recv(m, (int64_t)bytes, TETHER_BYTE, 0, 5, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
            long long bad = first_mismatch(m, bytes, 100 + i);
            EXPECT(bad < 0, "byte %lld of message %d is wrong after the resume", bad, i);
        }
        ack = RESUME_MESSAGES;
        CHECK(tether_send(&ack, 1, TETHER_INT, 0, 6, TETHER_COMM_UNIVERSE));
    } else if (me == 0) {
        tether_request reqs[RESUME_MESSAGES + 1];
        for (int i = 0; i < RESUME_MESSAGES; i++) {
            unsigned char *m = buf + (size_t)i * bytes;
            fill(m, bytes, 100 + i);
            CHECK(tether_isend(m, (int64_t)bytes, TETHER_BYTE, 1, 5, TETHER_COMM_UNIVERSE, &reqs[i]));
        }
        CHECK(tether_irecv(&ack, 1, TETHER_INT, 1, 6, TETHER_COMM_UNIVERSE, &reqs[RESUME_MESSAGES]));
        say("ready %d", me);
        CHECK(tether_waitall(RESUME_MESSAGES + 1, reqs, TETHER_STATUSES_IGNORE));
        EXPECT(ack == RESUME_MESSAGES, "acknowledged %d", ack);
        say("resume ok", 0);
    }
    free(buf);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: silent_peer recv|send|compute|resume BYTES [SECONDS]\n");
        return 2;
    }
    const char *what = argv[1];
    size_t bytes = (size_t)strtoull(argv[2], NULL, 10);
    CHECK(tether_init(&argc, &argv));
    CHECK(tether_universe_rank(&me));
    CHECK(tether_comm_size(TETHER_COMM_UNIVERSE, &nprocs));
    link_up();
    if (!strcmp(what, "recv") || !strcmp(what, "send"))
        lost(what, bytes);
    else if (!strcmp(what, "bulk"))
        bulk(bytes);
    else if (!strcmp(what, "barrier"))
        barrier();
    else if (!strcmp(what, "compute"))
        compute(bytes, argc > 3 ? atof(argv[3]) : 6.0);
    else if (!strcmp(what, "resume"))
        resume(bytes);
    else
        EXPECT(0, "unknown scenario %s", what);
    CHECK(tether_finalize());
    say("done %d", me);
    return 0;
}

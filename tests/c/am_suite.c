/* Active messages under `tether run`.
 *
 *   am_suite SCENARIO
 *
 * Scenarios (rank 0 prints "ok SCENARIO"):
 *   many     every rank sends every rank (itself too) messages of 0 B to
 *            4 MiB payload and 0 to 16 B header; each is delivered exactly
 *            once with its bytes intact;
 *   reply    a request whose handler answers with tether_am_send from
 *            inside; a blocking call from inside a handler is refused
 *            with TETHER_ERR_ARG;
 *   deadlock rank 0 spins on tether_progress for a reply while rank 1
 *            sits in a barrier that rank 0 joins only after the reply
 *            (the MVAPICH2-X lesson);
 *   unregistered  a message for an id nobody registered is dropped with
 *            a warning, and later messages still arrive. */
#include "common.h"

#define U TETHER_COMM_UNIVERSE

static int me, size;

static const size_t LENS[] = {0, 1, 100, 4096, 65536, 1 << 20, 4 << 20};
#define NLENS (sizeof LENS / sizeof *LENS)

static uint64_t seed_of(int from, int to, size_t len) { return (uint64_t)from * 7919u + (uint64_t)to * 104729u + len; }

/* many: received[source][len index] counts deliveries. */
static int received[64][NLENS];
static int bad_messages;

static void on_many(void *ctx, int source, const void *header, size_t header_len, const void *payload,
                    size_t payload_len) {
    (void)ctx;
    size_t k = NLENS;
    for (size_t i = 0; i < NLENS; i++)
        if (LENS[i] == payload_len) k = i;
    if (source < 0 || source >= size || k == NLENS || header_len != k * 2 + 1) {
        bad_messages++;
        return;
    }
    const unsigned char *h = header;
    for (size_t i = 0; i < header_len; i++)
        if (h[i] != (unsigned char)(source + i)) bad_messages++;
    if (payload_len == 0 ? payload != NULL : first_mismatch(payload, payload_len, seed_of(source, me, payload_len)) >= 0)
        bad_messages++;
    received[source][k]++;
}

static int all_arrived(void) {
    for (int s = 0; s < size; s++)
        for (size_t k = 0; k < NLENS; k++)
            if (received[s][k] < 1) return 0;
    return 1;
}

static void many(void) {
    CHECK(tether_am_register(5, on_many, NULL));
    CHECK(tether_barrier(U));
    unsigned char *payload = xmalloc(4 << 20);
    unsigned char header[64];
    for (int i = 0; i < 64; i++) header[i] = (unsigned char)(me + i);
    tether_request reqs[64 * NLENS];
    int n = 0;
    for (int t = 0; t < size; t++) {
        for (size_t k = 0; k < NLENS; k++) {
            unsigned char *p = xmalloc(LENS[k]);
            fill(p, LENS[k], seed_of(me, t, LENS[k]));
            CHECK(tether_am_send(t, 5, header, k * 2 + 1, LENS[k] ? p : NULL, LENS[k], U, &reqs[n]));
            CHECK(tether_wait(&reqs[n], TETHER_STATUS_IGNORE));
            free(p);
            n++;
        }
    }
    while (!all_arrived()) CHECK(tether_progress());
    CHECK(tether_barrier(U));
    CHECK(tether_progress());
    for (int s = 0; s < size; s++)
        for (size_t k = 0; k < NLENS; k++)
            EXPECT(received[s][k] == 1, "%d messages of %zu bytes from %d", received[s][k], LENS[k], s);
    EXPECT(bad_messages == 0, "%d messages arrived damaged", bad_messages);
    free(payload);
}

static volatile int replies, refused_blocking;

static void on_request(void *ctx, int source, const void *header, size_t header_len, const void *payload,
                       size_t payload_len) {
    (void)ctx, (void)payload, (void)payload_len;
    int value;
    EXPECT(header_len == sizeof value, "a request header of %zu bytes", header_len);
    memcpy(&value, header, sizeof value);
    value *= 3;
    tether_request r = 42;
    CHECK(tether_am_send(source, 8, &value, sizeof value, NULL, 0, U, &r));
    EXPECT(r == TETHER_REQUEST_NULL, "a send from a handler gives a null request");
    if (tether_barrier(U) == TETHER_ERR_ARG) refused_blocking++;
    char msg[TETHER_MAX_ERROR_STRING];
    tether_last_error(msg, sizeof msg);
    EXPECT(strstr(msg, "handler") != NULL, "the error says why: %s", msg);
}

static int answer = -1;

static void on_reply(void *ctx, int source, const void *header, size_t header_len, const void *payload,
                     size_t payload_len) {
    (void)ctx, (void)source, (void)payload, (void)payload_len;
    EXPECT(header_len == sizeof answer, "a reply header of %zu bytes", header_len);
    memcpy(&answer, header, sizeof answer);
    replies++;
}

static void reply(void) {
    CHECK(tether_am_register(7, on_request, NULL));
    CHECK(tether_am_register(8, on_reply, NULL));
    CHECK(tether_barrier(U));
    int value = 100 + me;
    tether_request r;
    CHECK(tether_am_send((me + 1) % size, 7, &value, sizeof value, NULL, 0, U, &r));
    CHECK(tether_wait(&r, TETHER_STATUS_IGNORE));
    while (!replies) CHECK(tether_progress());
    EXPECT(answer == 3 * value, "answer %d", answer);
    CHECK(tether_barrier(U));
    EXPECT(refused_blocking == 1, "the blocking call in the handler was refused %d times", refused_blocking);
}

static void deadlock(void) {
    CHECK(tether_am_register(7, on_request, NULL));
    CHECK(tether_am_register(8, on_reply, NULL));
    CHECK(tether_barrier(U));
    if (me > 1) return;
    int pair[2] = {0, 1};
    tether_comm both;
    CHECK(tether_comm_create_ranks(2, pair, &both));
    if (me == 0) {
        int value = 5;
        tether_request r;
        CHECK(tether_am_send(1, 7, &value, sizeof value, NULL, 0, U, &r));
        CHECK(tether_wait(&r, TETHER_STATUS_IGNORE));
        while (!replies) CHECK(tether_progress());
        EXPECT(answer == 15, "answer %d", answer);
    }
    CHECK(tether_barrier(both));
    CHECK(tether_comm_free(&both));
}

static int plain;

static void on_plain(void *ctx, int source, const void *header, size_t header_len, const void *payload,
                     size_t payload_len) {
    (void)ctx, (void)source, (void)header, (void)header_len, (void)payload, (void)payload_len;
    plain++;
}

static void unregistered(void) {
    CHECK(tether_am_register(3, on_plain, NULL));
    CHECK(tether_am_register(4, on_plain, NULL));
    CHECK(tether_am_register(4, NULL, NULL)); /* unregistered again */
    CHECK(tether_barrier(U));
    tether_request r;
    if (me != 0) {
        CHECK(tether_am_send(0, 999, NULL, 0, NULL, 0, U, &r));
        CHECK(tether_wait(&r, TETHER_STATUS_IGNORE));
        CHECK(tether_am_send(0, 4, NULL, 0, NULL, 0, U, &r));
        CHECK(tether_wait(&r, TETHER_STATUS_IGNORE));
        CHECK(tether_am_send(0, 3, NULL, 0, NULL, 0, U, &r));
        CHECK(tether_wait(&r, TETHER_STATUS_IGNORE));
    } else {
        EXPECT(tether_am_send(0, 1024, NULL, 0, NULL, 0, U, &r) == TETHER_ERR_ARG, "id 1024");
        EXPECT(tether_am_register(-1, on_plain, NULL) == TETHER_ERR_ARG, "id -1");
        while (plain < size - 1) CHECK(tether_progress());
    }
    CHECK(tether_barrier(U));
}

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    CHECK(tether_comm_rank(U, &me));
    CHECK(tether_comm_size(U, &size));
    const char *scenario = argc > 1 ? argv[1] : "many";
    if (!strcmp(scenario, "many")) many();
    else if (!strcmp(scenario, "reply")) reply();
    else if (!strcmp(scenario, "deadlock")) deadlock();
    else if (!strcmp(scenario, "unregistered")) unregistered();
    else EXPECT(0, "unknown scenario %s", scenario);
    CHECK(tether_finalize());
    if (me == 0) printf("ok %s\n", scenario);
    return 0;
}

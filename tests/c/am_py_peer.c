/* Active messages between a C program and a Python one: the C side of
 * tests/python/am_c_peer.py, which follows the same steps. Programs
 * `csim` and `pymodel` of n ranks each; universe rank u's partner is
 * (u + n) % 2n, the rank of the same index in the other program. Over
 * TETHER_COMM_UNIVERSE each process registers id 7 (a request: its
 * header is an int32 length L, its payload L bytes (i * 31 + source) &
 * 0xff, checked; the handler answers from inside with id 8, header 3 * L
 * and the payload echoed) and id 8 (the answer), sends its partner a
 * request of L = 1 MiB + u bytes (by rendezvous), spins on
 * tether_progress until the answer is there and checks it.
 * Prints "ok c-python am". */
#include "common.h"

#define U TETHER_COMM_UNIVERSE

static unsigned char *expected;
static int32_t expected_len;
static volatile int answered, damaged;

static void on_request(void *ctx, int source, const void *header, size_t header_len, const void *payload,
                       size_t payload_len) {
    (void)ctx;
    int32_t len;
    EXPECT(header_len == sizeof len, "a request header of %zu bytes", header_len);
    memcpy(&len, header, sizeof len);
    EXPECT(payload_len == (size_t)len, "a payload of %zu bytes for %d", payload_len, len);
    const unsigned char *p = payload;
    for (size_t i = 0; i < payload_len; i++)
        if (p[i] != (unsigned char)((i * 31 + (size_t)source) & 0xff)) damaged++;
    int32_t answer = 3 * len;
    tether_request r = 42;
    CHECK(tether_am_send(source, 8, &answer, sizeof answer, payload, payload_len, U, &r));
    EXPECT(r == TETHER_REQUEST_NULL, "a send from a handler gives a null request");
}

static void on_answer(void *ctx, int source, const void *header, size_t header_len, const void *payload,
                      size_t payload_len) {
    (void)ctx, (void)source;
    int32_t answer;
    EXPECT(header_len == sizeof answer, "an answer header of %zu bytes", header_len);
    memcpy(&answer, header, sizeof answer);
    EXPECT(answer == 3 * expected_len, "answer %d for %d", answer, expected_len);
    EXPECT(payload_len == (size_t)expected_len && memcmp(payload, expected, payload_len) == 0,
           "the echoed payload (%zu bytes) differs", payload_len);
    answered++;
}

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    int u, size;
    CHECK(tether_comm_rank(U, &u));
    CHECK(tether_comm_size(U, &size));
    int n = size / 2, partner = (u + n) % size;

    CHECK(tether_am_register(7, on_request, NULL));
    CHECK(tether_am_register(8, on_answer, NULL));
    CHECK(tether_barrier(U));

    expected_len = (1 << 20) + u;
    expected = malloc((size_t)expected_len);
    for (int32_t i = 0; i < expected_len; i++) expected[i] = (unsigned char)((i * 31 + u) & 0xff);
    tether_request r;
    CHECK(tether_am_send(partner, 7, &expected_len, sizeof expected_len, expected, (size_t)expected_len, U, &r));
    CHECK(tether_wait(&r, TETHER_STATUS_IGNORE));
    while (!answered) CHECK(tether_progress());
    CHECK(tether_barrier(U));
    EXPECT(answered == 1 && damaged == 0, "%d answers, %d damaged bytes", answered, damaged);
    free(expected);
    printf("ok c-python am\n");
    CHECK(tether_finalize());
    return 0;
}

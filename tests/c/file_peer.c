/* Two processes (universe ranks 0 and 1) exchange messages of every
 * protocol size in both directions and check every byte: the program the
 * file-transport tests run where nothing but a directory is shared.
 *
 *   file_peer [rounds]
 *   file_peer receive      (rank 1 only: prints one message from rank 0)
 *
 * Prints "exchanged N ok" on success. Any failing call prints
 * "error <class>: <detail>" and exits 3, so a test can check which error a
 * misconfigured run ends with. */
#include "common.h"

static void fail(int rc) {
    char cls[TETHER_MAX_ERROR_STRING], detail[TETHER_MAX_ERROR_STRING];
    tether_error_string(rc, cls, sizeof cls);
    tether_last_error(detail, sizeof detail);
    printf("error %s: %s\n", cls, detail);
    fflush(stdout);
    exit(3);
}

#define TRY(call)                          \
    do {                                   \
        int rc_ = (call);                  \
        if (rc_ != TETHER_SUCCESS) fail(rc_); \
    } while (0)

static const size_t SIZES[] = {0, 1, 100, 4096, 200000, 3u << 20};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

/* Receives one message from universe rank 0, whatever its tag, and
 * prints it (a test writes that message by hand). */
static void receive_one(void) {
    char text[256] = {0};
    tether_status st;
    TRY(tether_recv(text, sizeof text - 1, TETHER_CHAR, 0, TETHER_ANY_TAG, TETHER_COMM_UNIVERSE, &st));
    int64_t got;
    TRY(tether_get_count(&st, TETHER_CHAR, &got));
    printf("received %lld bytes tag %d: %s\n", (long long)got, st.tag, text);
}

int main(int argc, char **argv) {
    TRY(tether_init(&argc, &argv));
    if (argc > 1 && !strcmp(argv[1], "receive")) {
        receive_one();
        TRY(tether_finalize());
        return 0;
    }
    int rounds = argc > 1 ? atoi(argv[1]) : 12;
    int me, size;
    TRY(tether_universe_rank(&me));
    TRY(tether_universe_size(&size));
    EXPECT(size == 2, "a universe of 2, got %d", size);
    int peer = 1 - me;
    unsigned char *out = xmalloc(SIZES[NSIZES - 1]);
    unsigned char *in = xmalloc(SIZES[NSIZES - 1]);
    for (int i = 0; i < rounds; i++) {
        size_t len = SIZES[i % NSIZES];
        uint64_t mine = (uint64_t)i * 2 + (uint64_t)me, theirs = (uint64_t)i * 2 + (uint64_t)peer;
        fill(out, len, mine);
        memset(in, 0xEE, len);
        tether_request reqs[2];
        tether_status st[2];
        TRY(tether_irecv(in, (int64_t)len, TETHER_BYTE, peer, i, TETHER_COMM_UNIVERSE, &reqs[0]));
        TRY(tether_isend(out, (int64_t)len, TETHER_BYTE, peer, i, TETHER_COMM_UNIVERSE, &reqs[1]));
        TRY(tether_waitall(2, reqs, st));
        int64_t got;
        TRY(tether_get_count(&st[0], TETHER_BYTE, &got));
        EXPECT(got == (int64_t)len && st[0].source == peer && st[0].tag == i, "round %d: %lld bytes from %d tag %d",
               i, (long long)got, st[0].source, st[0].tag);
        long long bad = first_mismatch(in, len, theirs);
        EXPECT(bad < 0, "round %d (%zu bytes): byte %lld differs", i, len, bad);
    }
    printf("exchanged %d ok\n", rounds);
    free(out);
    free(in);
    TRY(tether_finalize());
    return 0;
}

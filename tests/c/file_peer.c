/* Two processes (universe ranks 0 and 1) exchange messages of every
 * protocol size in both directions and check every byte: the program the
 * file-transport tests run where nothing but a directory is shared.
 *
 *   file_peer [rounds]
 *   file_peer sizes N,N,...  (each size once in both directions)
 *   file_peer interleave K   (K large and small messages, one tag, in order)
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

/* Sends `len` bytes to `peer` while receiving as many from it (tag
 * `round`), and checks every byte and the status. */
static void exchange(int me, int peer, int round, size_t len, unsigned char *out, unsigned char *in) {
    uint64_t mine = (uint64_t)round * 2 + (uint64_t)me, theirs = (uint64_t)round * 2 + (uint64_t)peer;
    fill(out, len, mine);
    memset(in, 0xEE, len);
    tether_request reqs[2];
    tether_status st[2];
    TRY(tether_irecv(in, (int64_t)len, TETHER_BYTE, peer, round, TETHER_COMM_UNIVERSE, &reqs[0]));
    TRY(tether_isend(out, (int64_t)len, TETHER_BYTE, peer, round, TETHER_COMM_UNIVERSE, &reqs[1]));
    TRY(tether_waitall(2, reqs, st));
    int64_t got;
    TRY(tether_get_count(&st[0], TETHER_BYTE, &got));
    EXPECT(got == (int64_t)len && st[0].source == peer && st[0].tag == round,
           "round %d: %lld bytes from %d tag %d", round, (long long)got, st[0].source, st[0].tag);
    long long bad = first_mismatch(in, len, theirs);
    EXPECT(bad < 0, "round %d (%zu bytes): byte %lld differs", round, len, bad);
}

/* Each size of the comma-separated list once in both directions. */
static void sizes(int me, int peer, const char *list) {
    size_t lens[64];
    int n = 0;
    size_t max = 1;
    for (const char *p = list; *p && n < 64; n++) {
        char *end;
        lens[n] = strtoull(p, &end, 10);
        max = lens[n] > max ? lens[n] : max;
        p = *end == ',' ? end + 1 : end;
    }
    unsigned char *out = xmalloc(max), *in = xmalloc(max);
    for (int i = 0; i < n; i++)
        exchange(me, peer, i, lens[i], out, in);
    printf("sizes %d ok\n", n);
    free(out);
    free(in);
}

/* Both processes send `count` messages to each other, large (several
 * files each over `file`) and small (one file) in turn, all on one tag,
 * all in flight at once; the receives are posted in order on that tag,
 * so MPI's order says the i-th receive gets the i-th message: checked by
 * its length and its bytes. */
static void interleave(int me, int peer, int count) {
    static const size_t LENS[] = {9u << 20, 10, (4u << 20) + 1, 0, 1000, (8u << 20) + 3, 4u << 20, 64};
    enum { NLENS = sizeof LENS / sizeof LENS[0] };
    unsigned char **outs = calloc((size_t)count, sizeof *outs), **ins = calloc((size_t)count, sizeof *ins);
    tether_request *reqs = calloc((size_t)count * 2, sizeof *reqs);
    tether_status *st = calloc((size_t)count * 2, sizeof *st);
    for (int i = 0; i < count; i++) {
        size_t len = LENS[i % NLENS];
        outs[i] = xmalloc(len + 1);
        ins[i] = xmalloc(len + 1);
        fill(outs[i], len, (uint64_t)i * 2 + (uint64_t)me);
        memset(ins[i], 0xEE, len + 1);
        TRY(tether_irecv(ins[i], (int64_t)len, TETHER_BYTE, peer, 5, TETHER_COMM_UNIVERSE, &reqs[i]));
    }
    for (int i = 0; i < count; i++)
        TRY(tether_isend(outs[i], (int64_t)LENS[i % NLENS], TETHER_BYTE, peer, 5, TETHER_COMM_UNIVERSE,
                         &reqs[count + i]));
    TRY(tether_waitall(count * 2, reqs, st));
    for (int i = 0; i < count; i++) {
        size_t len = LENS[i % NLENS];
        int64_t got;
        TRY(tether_get_count(&st[i], TETHER_BYTE, &got));
        EXPECT(got == (int64_t)len, "receive %d: %lld bytes, message %d has %zu", i, (long long)got, i, len);
        long long bad = first_mismatch(ins[i], len, (uint64_t)i * 2 + (uint64_t)peer);
        EXPECT(bad < 0, "receive %d (%zu bytes): byte %lld is not message %d's", i, len, bad, i);
        EXPECT(ins[i][len] == 0xEE, "receive %d: written past its %zu bytes", i, len);
        free(outs[i]);
        free(ins[i]);
    }
    printf("interleaved %d ok\n", count);
    free(outs);
    free(ins);
    free(reqs);
    free(st);
}

int main(int argc, char **argv) {
    TRY(tether_init(&argc, &argv));
    if (argc > 1 && !strcmp(argv[1], "receive")) {
        receive_one();
        TRY(tether_finalize());
        return 0;
    }
    int me, size;
    TRY(tether_universe_rank(&me));
    TRY(tether_universe_size(&size));
    EXPECT(size == 2, "a universe of 2, got %d", size);
    int peer = 1 - me;
    if (argc > 2 && !strcmp(argv[1], "sizes")) {
        sizes(me, peer, argv[2]);
        TRY(tether_finalize());
        return 0;
    }
    if (argc > 2 && !strcmp(argv[1], "interleave")) {
        interleave(me, peer, atoi(argv[2]));
        TRY(tether_finalize());
        return 0;
    }
    int rounds = argc > 1 ? atoi(argv[1]) : 12;
    unsigned char *out = xmalloc(SIZES[NSIZES - 1]);
    unsigned char *in = xmalloc(SIZES[NSIZES - 1]);
    for (int i = 0; i < rounds; i++)
        exchange(me, peer, i, SIZES[i % NSIZES], out, in);
    printf("exchanged %d ok\n", rounds);
    free(out);
    free(in);
    TRY(tether_finalize());
    return 0;
}

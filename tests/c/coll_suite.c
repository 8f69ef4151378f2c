/* Conformance suite for communicators and collectives, run under
 * `tether run` on several universes. Every result is checked against a
 * serial reference computed here (coll_reference.h for reductions, byte
 * patterns for data movement).
 *
 *   coll_suite SCENARIO [quick]
 *
 * Scenarios: reductions, movement (every data-moving collective), comms
 * (communicators from programs and from universe ranks, each running the
 * movement and reduction suites, the odd ranks' one with every count; two
 * overlapping ones used alternately, each collective on each in turn),
 * nonblocking (collectives interleaved with each other and with
 * point-to-point, completed in varying orders), errors.
 * `quick` leaves out the 1 MiB counts of the reductions and movement
 * scenarios. Prints "ok SCENARIO" on success. */
#include "common.h"
#include "coll_reference.h"

typedef struct { tether_comm comm; int rank, size; } comm_t;

static int quick;
static unsigned calls; /* alternates blocking and non-blocking forms */

static comm_t describe(tether_comm comm) {
    comm_t c = {comm, 0, 0};
    CHECK(tether_comm_rank(comm, &c.rank));
    CHECK(tether_comm_size(comm, &c.size));
    return c;
}

/* Runs a collective in its blocking form or, every other call, its
 * non-blocking form completed by tether_wait or a tether_test loop. */
#define COLL(name, ...)                                                               \
    do {                                                                              \
        if (calls++ % 2 == 0) {                                                       \
            CHECK(tether_##name(__VA_ARGS__));                                        \
        } else {                                                                      \
            tether_request req_;                                                      \
            CHECK(tether_i##name(__VA_ARGS__, &req_));                                \
            if (calls % 4 == 0) {                                                     \
                int flag_ = 0;                                                        \
                while (!flag_) CHECK(tether_test(&req_, &flag_, TETHER_STATUS_IGNORE)); \
            } else {                                                                  \
                tether_status st_;                                                    \
                CHECK(tether_wait(&req_, &st_));                                      \
                EXPECT(st_.error == TETHER_SUCCESS, "status error %d", st_.error);    \
            }                                                                         \
            EXPECT(req_ == TETHER_REQUEST_NULL, "request reset");                     \
        }                                                                             \
    } while (0)

static int64_t counts_of(int k, int size_of_type) {
    static const int64_t small[] = {0, 1, 7, 1000};
    return k < 4 ? small[k] : (int64_t)(1 << 20) / size_of_type;
}

static void expect_same(const type_info *t, const char *what, const unsigned char *got,
                        const unsigned char *want, int64_t count, tether_op op) {
    for (int64_t i = 0; i < count; i++)
        EXPECT(same_element(t, got + i * t->size, want + i * t->size),
               "%s %s %s: element %lld of %lld differs", what, t->name,
               op ? OPS[op - 1].name : "", (long long)i, (long long)count);
}

/* ---- reductions: every valid (type, op) x counts, allreduce (also in
 * place), reduce to a rotating root (in place at the root every other
 * time), reduce_scatter_block; invalid pairs give TETHER_ERR_OP. ---- */

/* Every reduction once for (type, op) and `count` elements on `c`. The
 * roots and in-place choices follow `calls`: equal on all members. */
static void reduce_with(comm_t c, const type_info *t, tether_op op, int64_t count) {
    size_t len = (size_t)count * t->size;
    unsigned char *mine = xmalloc(len), *want = xmalloc(len), *scratch = xmalloc(len);
    unsigned char *got = xmalloc(len);
    make_contribution(t, op, c.rank, count, mine);
    reference(t, op, c.size, count, want, scratch);

    memset(got, 0xAB, len);
    COLL(allreduce, mine, got, count, t->type, op, c.comm);
    expect_same(t, "allreduce", got, want, count, op);
    if (count <= 1000) {
        memcpy(got, mine, len);
        COLL(allreduce, TETHER_IN_PLACE, got, count, t->type, op, c.comm);
        expect_same(t, "allreduce in place", got, want, count, op);
    }

    int root = (int)(calls % (unsigned)c.size);
    int in_place = c.rank == root && calls % 3 == 0;
    memset(got, 0xCD, len);
    if (in_place) memcpy(got, mine, len);
    COLL(reduce, in_place ? TETHER_IN_PLACE : mine, c.rank == root ? got : NULL, count,
         t->type, op, root, c.comm);
    if (c.rank == root) expect_same(t, "reduce", got, want, count, op);

    int64_t block = count >= c.size ? count / c.size : count;
    size_t whole = (size_t)(block * c.size) * t->size;
    unsigned char *input = mine, *expected = want;
    if ((int64_t)block * c.size > count) {
        input = xmalloc(whole);
        expected = xmalloc(whole);
        unsigned char *tmp = xmalloc(whole);
        make_contribution(t, op, c.rank, block * c.size, input);
        reference(t, op, c.size, block * c.size, expected, tmp);
        free(tmp);
    }
    unsigned char *part = xmalloc((size_t)block * t->size);
    COLL(reduce_scatter_block, input, part, block, t->type, op, c.comm);
    expect_same(t, "reduce_scatter_block", part, expected + (size_t)(c.rank * block) * t->size,
                block, op);
    if (block <= 1000) {
        unsigned char *inout = xmalloc(whole);
        memcpy(inout, input, whole);
        COLL(reduce_scatter_block, TETHER_IN_PLACE, inout, block, t->type, op, c.comm);
        expect_same(t, "reduce_scatter_block in place", inout,
                    expected + (size_t)(c.rank * block) * t->size, block, op);
        free(inout);
    }
    if (input != mine) { free(input); free(expected); }
    free(part); free(mine); free(want); free(scratch); free(got);
}

/* The first `ncounts` of counts_of: 4 leaves out the 1 MiB counts. */
static void reductions(comm_t c, int ncounts) {
    calls = 0; /* roots and in-place choices follow it: equal on all members */
    int pairs = 0;
    for (int ti = 0; ti < NTYPES; ti++) {
        const type_info *t = &TYPES[ti];
        for (int oi = 0; oi < NOPS; oi++) {
            tether_op op = OPS[oi].op;
            if (!valid_pair(t, op)) {
                unsigned char a[32] = {0}, b[32];
                EXPECT(tether_allreduce(a, b, 1, t->type, op, c.comm) == TETHER_ERR_OP,
                       "%s on %s is invalid", OPS[oi].name, t->name);
                continue;
            }
            pairs++;
            for (int k = 0; k < ncounts; k++) reduce_with(c, t, op, counts_of(k, t->size));
        }
    }
    EXPECT(pairs == 160, "160 valid pairs, counted %d", pairs);
}

/* ---- data movement ---- */

/* Seed of the block rank `from` sends to rank `to` in call `call`. */
static uint64_t seed(int from, int to, unsigned call) { return ((uint64_t)call << 32) ^ (uint64_t)(from * 1009 + to); }

/* The elements of a v-collective's receive buffer outside every block
 * (zeroed before the call) are still zero. */
static void expect_gaps(const unsigned char *buf, size_t len, const int *counts, const int *displs, size_t p,
                        size_t sz, const char *what) {
    size_t at = 0;
    for (size_t r = 0; r <= p; r++) {
        size_t end = r < p ? (size_t)displs[r] * sz : len;
        for (; at < end; at++) EXPECT(buf[at] == 0, "%s wrote byte %zu, in a gap", what, at);
        if (r < p) at += (size_t)counts[r] * sz;
    }
}

static void movement_with(comm_t c, const type_info *t, int64_t count) {
    size_t sz = t->size, block = (size_t)count * sz, p = (size_t)c.size;
    int me = c.rank;
    unsigned call = calls;
    int root = (int)(call % p);

    /* bcast */
    unsigned char *buf = xmalloc(block);
    if (me == root) fill(buf, block, seed(root, 0, call)); else memset(buf, 0, block);
    COLL(bcast, buf, count, t->type, root, c.comm);
    EXPECT(first_mismatch(buf, block, seed(root, 0, call)) < 0, "bcast %s %lld", t->name, (long long)count);
    free(buf);

    /* gather and scatter (in place at the root every other time) */
    unsigned char *one = xmalloc(block), *all = xmalloc(block * p);
    int in_place = call % 2 == 0;
    fill(one, block, seed(me, root, call));
    memset(all, 0, block * p);
    if (me == root && in_place) memcpy(all + me * block, one, block);
    COLL(gather, me == root && in_place ? TETHER_IN_PLACE : one, count, t->type, me == root ? all : NULL,
         count, t->type, root, c.comm);
    if (me == root)
        for (size_t r = 0; r < p; r++)
            EXPECT(first_mismatch(all + r * block, block, seed((int)r, root, call)) < 0, "gather block %zu", r);
    if (me == root)
        for (size_t r = 0; r < p; r++) fill(all + r * block, block, seed(root, (int)r, call + 1));
    memset(one, 0, block);
    COLL(scatter, me == root ? all : NULL, count, t->type, me == root && in_place ? TETHER_IN_PLACE : one,
         count, t->type, root, c.comm);
    if (!(me == root && in_place))
        EXPECT(first_mismatch(one, block, seed(root, me, call + 1)) < 0, "scatter %s", t->name);

    /* allgather, in place every other time */
    memset(all, 0, block * p);
    fill(one, block, seed(me, -1, call));
    if (in_place) memcpy(all + me * block, one, block);
    COLL(allgather, in_place ? TETHER_IN_PLACE : one, count, t->type, all, count, t->type, c.comm);
    for (size_t r = 0; r < p; r++)
        EXPECT(first_mismatch(all + r * block, block, seed((int)r, -1, call)) < 0, "allgather block %zu", r);

    /* alltoall, in place every other time */
    unsigned char *out = xmalloc(block * p);
    for (size_t r = 0; r < p; r++) fill(out + r * block, block, seed(me, (int)r, call));
    if (in_place) memcpy(all, out, block * p);
    COLL(alltoall, in_place ? TETHER_IN_PLACE : out, count, t->type, all, count, t->type, c.comm);
    for (size_t r = 0; r < p; r++)
        EXPECT(first_mismatch(all + r * block, block, seed((int)r, me, call)) < 0, "alltoall from %zu", r);
    free(one); free(all); free(out);

    /* v-variants: rank r's block has count + r % 3 elements, one element of
     * gap between blocks; in place every other time (gatherv and scatterv
     * at the root only, as MPI), the gaps left as they were. */
    int *counts = xmalloc(p * sizeof(int)), *displs = xmalloc(p * sizeof(int));
    int extent = 0;
    for (size_t r = 0; r < p; r++) {
        counts[r] = (int)count + (int)(r % 3);
        displs[r] = extent;
        extent += counts[r] + 1;
    }
    size_t mine = (size_t)counts[me] * sz;
    int root_in_place = me == root && in_place;
    unsigned char *vin = xmalloc(mine), *vall = xmalloc((size_t)extent * sz);
    fill(vin, mine, seed(me, root, call + 2));
    memset(vall, 0, (size_t)extent * sz);
    if (root_in_place) memcpy(vall + displs[me] * sz, vin, mine);
    COLL(gatherv, root_in_place ? TETHER_IN_PLACE : vin, counts[me], t->type, me == root ? vall : NULL,
         me == root ? counts : NULL, me == root ? displs : NULL, t->type, root, c.comm);
    if (me == root) {
        for (size_t r = 0; r < p; r++)
            EXPECT(first_mismatch(vall + displs[r] * sz, counts[r] * sz, seed((int)r, root, call + 2)) < 0,
                   "gatherv%s %s block %zu", in_place ? " in place" : "", t->name, r);
        expect_gaps(vall, (size_t)extent * sz, counts, displs, p, sz, "gatherv");
    }
    if (me == root)
        for (size_t r = 0; r < p; r++) fill(vall + displs[r] * sz, counts[r] * sz, seed(root, (int)r, call + 3));
    memset(vin, 0, mine);
    COLL(scatterv, me == root ? vall : NULL, me == root ? counts : NULL, me == root ? displs : NULL, t->type,
         root_in_place ? TETHER_IN_PLACE : vin, counts[me], t->type, root, c.comm);
    if (root_in_place) /* the root's own block stays where it is */
        EXPECT(first_mismatch(vall + displs[me] * sz, mine, seed(root, me, call + 3)) < 0,
               "scatterv in place %s: the root's block", t->name);
    else
        EXPECT(first_mismatch(vin, mine, seed(root, me, call + 3)) < 0, "scatterv %s", t->name);
    fill(vin, mine, seed(me, -2, call));
    memset(vall, 0, (size_t)extent * sz);
    if (in_place) memcpy(vall + displs[me] * sz, vin, mine);
    COLL(allgatherv, in_place ? TETHER_IN_PLACE : vin, counts[me], t->type, vall, counts, displs, t->type,
         c.comm);
    for (size_t r = 0; r < p; r++)
        EXPECT(first_mismatch(vall + displs[r] * sz, counts[r] * sz, seed((int)r, -2, call)) < 0,
               "allgatherv%s %s block %zu", in_place ? " in place" : "", t->name, r);
    expect_gaps(vall, (size_t)extent * sz, counts, displs, p, sz, "allgatherv");

    /* alltoallv: rank i sends count + (i + j) % 3 elements to rank j (the
     * same number j sends back, as in place needs); in place, the blocks
     * go out of recvbuf by recvcounts and rdispls, and the send counts and
     * displacements are not significant (NULL here). */
    int *sc = xmalloc(p * sizeof(int)), *sd = xmalloc(p * sizeof(int));
    int *rc = xmalloc(p * sizeof(int)), *rd = xmalloc(p * sizeof(int));
    int sext = 0, rext = 0;
    for (size_t r = 0; r < p; r++) {
        sc[r] = (int)count + (int)((me + r) % 3); sd[r] = sext; sext += sc[r] + 1;
        rc[r] = (int)count + (int)((me + r) % 3); rd[r] = rext; rext += rc[r] + 2;
    }
    unsigned char *sbuf = xmalloc((size_t)sext * sz), *rbuf = xmalloc((size_t)rext * sz);
    memset(rbuf, 0, (size_t)rext * sz);
    for (size_t r = 0; r < p; r++) {
        fill(sbuf + sd[r] * sz, sc[r] * sz, seed(me, (int)r, call + 4));
        if (in_place) fill(rbuf + rd[r] * sz, rc[r] * sz, seed(me, (int)r, call + 4));
    }
    if (in_place)
        COLL(alltoallv, TETHER_IN_PLACE, NULL, NULL, t->type, rbuf, rc, rd, t->type, c.comm);
    else
        COLL(alltoallv, sbuf, sc, sd, t->type, rbuf, rc, rd, t->type, c.comm);
    for (size_t r = 0; r < p; r++)
        EXPECT(first_mismatch(rbuf + rd[r] * sz, rc[r] * sz, seed((int)r, me, call + 4)) < 0,
               "alltoallv%s %s from %zu", in_place ? " in place" : "", t->name, r);
    expect_gaps(rbuf, (size_t)rext * sz, rc, rd, p, sz, "alltoallv");
    free(counts); free(displs); free(vin); free(vall); free(sc); free(sd); free(rc); free(rd); free(sbuf); free(rbuf);
    /* The next call: its 9 collectives moved calls on by 9; 11 in all is odd,
     * so that the in-place and blocking forms alternate from one call to the
     * next, and prime to every communicator size here, so the root rotates
     * over every rank. */
    calls = call + 11;
}

static const type_info *type_of(tether_datatype type) {
    for (int j = 0; j < NTYPES; j++)
        if (TYPES[j].type == type) return &TYPES[j];
    EXPECT(0, "datatype %d is listed", type);
    return NULL;
}

/* Element sizes 1, 2, 4, 8 and 16, and a pair type with padding. */
static const tether_datatype MOVE_TYPES[] = {TETHER_BYTE,   TETHER_INT16,          TETHER_INT32,
                                             TETHER_DOUBLE, TETHER_DOUBLE_COMPLEX, TETHER_DOUBLE_INT};
#define NMOVE ((int)(sizeof MOVE_TYPES / sizeof MOVE_TYPES[0]))

/* The first `ncounts` of counts_of: 4 leaves out the 1 MiB counts. */
static void movement(comm_t c, int ncounts) {
    calls = 0; /* roots and seeds follow it: equal on all members */
    for (int k = 0; k < ncounts; k++)
        for (int i = 0; i < NMOVE; i++) {
            const type_info *t = type_of(MOVE_TYPES[i]);
            movement_with(c, t, counts_of(k, t->size));
        }
    COLL(barrier, c.comm);
}

/* The sum over the members of a communicator of (universe rank + 1) * (i + 1). */
static void check_sum(comm_t c, int64_t n) {
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), total = 0;
    for (int r = 0; r < c.size; r++) {
        int u;
        CHECK(tether_comm_universe_rank(c.comm, r, &u));
        total += u + 1;
    }
    int me;
    CHECK(tether_universe_rank(&me));
    for (int64_t i = 0; i < n; i++) in[i] = (int64_t)(me + 1) * (i + 1);
    COLL(allreduce, in, out, n, TETHER_INT64, TETHER_SUM, c.comm);
    for (int64_t i = 0; i < n; i++) EXPECT(out[i] == total * (i + 1), "sum element %lld", (long long)i);
    free(in); free(out);
}

/* A representative set of (type, op) pairs, which the overlapping
 * communicators take in turn and the program communicator runs: signed and
 * unsigned integers of every width (SUM and PROD wrapping past the
 * extremes), floats with MIN/MAX, complex, the pair types, logical and
 * bitwise operations. */
static const struct { tether_datatype type; tether_op op; } ALTERNATE[] = {
    {TETHER_INT8, TETHER_SUM},                  {TETHER_INT16, TETHER_PROD},
    {TETHER_INT32, TETHER_MAX},                 {TETHER_INT64, TETHER_MIN},
    {TETHER_UINT16, TETHER_SUM},                {TETHER_UINT64, TETHER_BXOR},
    {TETHER_FLOAT, TETHER_MIN},                 {TETHER_DOUBLE, TETHER_SUM},
    {TETHER_DOUBLE_COMPLEX, TETHER_PROD},       {TETHER_FLOAT_INT, TETHER_MINLOC},
    {TETHER_DOUBLE_INT, TETHER_MAXLOC},         {TETHER_2INT, TETHER_MINLOC},
    {TETHER_LOGICAL, TETHER_LAND},              {TETHER_BYTE, TETHER_BOR},
    {TETHER_INT, TETHER_LXOR},                  {TETHER_LONG_LONG, TETHER_BAND},
    {TETHER_UINT8, TETHER_PROD},                {TETHER_REAL, TETHER_MAX},
    {TETHER_2DOUBLE_PRECISION, TETHER_MAXLOC},  {TETHER_UINT32, TETHER_LOR},
};
#define NALTERNATE ((int)(sizeof ALTERNATE / sizeof ALTERNATE[0]))

/* Turn `k` of the alternation (round k / 2, communicator k % 2) on `c`:
 * every collective once (barrier, the data-moving ones of movement_with,
 * the reductions of reduce_with), with a movement type, a (type, op) pair
 * and a count that change with the round and differ between the two
 * communicators, and seeds and roots from k (`calls`), so that a message
 * delivered on the other communicator would show. Over 20 rounds each
 * communicator meets every pair once, 4 of them at 1 MiB worth. */
static void every_collective(comm_t c, int k) {
    int round = k / 2, other = k % 2; /* the second communicator is shifted */
    calls = (unsigned)k * 64 + (unsigned)(round % 2); /* in place every other round */
    COLL(barrier, c.comm);
    const type_info *mt = type_of(MOVE_TYPES[(round + other) % NMOVE]);
    int pair = (round + other * NALTERNATE / 2) % NALTERNATE, which = (round + 2 * other) % 5;
    const type_info *rt = type_of(ALTERNATE[pair].type);
    movement_with(c, mt, counts_of(which, mt->size));
    reduce_with(c, rt, ALTERNATE[pair].op, counts_of(which, rt->size));
}

/* ---- communicators ---- */
static void comms(void) {
    int usize, urank, nprog;
    CHECK(tether_universe_size(&usize));
    CHECK(tether_universe_rank(&urank));
    CHECK(tether_program_count(&nprog));

    /* From programs, last program first: movement with every count, and
     * the reductions of the ALTERNATE pairs at counts up to 1000 (the odd
     * ranks below take every pair at every count). */
    int programs[2] = {nprog - 1, 0}, myprog;
    CHECK(tether_program_id(&myprog));
    tether_comm pc;
    CHECK(tether_comm_create(nprog > 1 ? 2 : 1, programs, &pc));
    int member = myprog == programs[0] || myprog == 0;
    EXPECT((pc != TETHER_COMM_NULL) == member, "membership of the program communicator");
    if (member) {
        comm_t c = describe(pc);
        int first_last, first_u;
        CHECK(tether_program_size(nprog - 1, &first_last));
        CHECK(tether_comm_universe_rank(pc, 0, &first_u));
        EXPECT(first_u == usize - first_last, "rank 0 is the last program's rank 0 (universe %d)", first_u);
        check_sum(c, 1000);
        movement(c, 5);
        calls = 0;
        for (int i = 0; i < NALTERNATE; i++) {
            const type_info *t = type_of(ALTERNATE[i].type);
            for (int k = 0; k < 4; k++) reduce_with(c, t, ALTERNATE[i].op, counts_of(k, t->size));
        }
        CHECK(tether_comm_free(&pc));
        EXPECT(pc == TETHER_COMM_NULL, "freed handle reset");
    }

    /* From universe ranks: the odd ones, in reverse order. Every collective,
     * every valid (type, op), every count up to 1 MiB worth. */
    int odd[64], n = 0;
    for (int u = usize - 1; u >= 0; u--) if (u % 2 == 1) odd[n++] = u;
    tether_comm oc;
    CHECK(tether_comm_create_ranks(n, odd, &oc));
    if (urank % 2 == 1) {
        comm_t c = describe(oc);
        EXPECT(c.rank == (n - 1) - (urank - 1) / 2, "rank in the reversed communicator");
        int u;
        CHECK(tether_comm_universe_rank(oc, c.rank, &u));
        EXPECT(u == urank, "rank translation");
        check_sum(c, 7);
        reductions(c, 5);
        movement(c, 5);
        CHECK(tether_comm_free(&oc));
    } else {
        EXPECT(oc == TETHER_COMM_NULL, "non-member gets TETHER_COMM_NULL");
    }

    /* Two overlapping communicators used alternately: A = the first
     * usize - 1 ranks, B = the last usize - 1, reversed. Each round runs
     * every collective on A, then on B (turns 2 * round and 2 * round + 1),
     * then a sum on the universe. */
    if (usize >= 3) {
        int a[64], b[64];
        for (int i = 0; i < usize - 1; i++) { a[i] = i; b[i] = usize - 1 - i; }
        tether_comm ca = TETHER_COMM_NULL, cb = TETHER_COMM_NULL;
        CHECK(tether_comm_create_ranks(usize - 1, a, &ca));
        CHECK(tether_comm_create_ranks(usize - 1, b, &cb));
        for (int round = 0; round < 20; round++) {
            if (ca != TETHER_COMM_NULL) {
                check_sum(describe(ca), round * 50 + 1);
                every_collective(describe(ca), 2 * round);
            }
            if (cb != TETHER_COMM_NULL) {
                check_sum(describe(cb), round * 50 + 1);
                every_collective(describe(cb), 2 * round + 1);
            }
            check_sum(describe(TETHER_COMM_UNIVERSE), 3);
        }
        if (ca != TETHER_COMM_NULL) CHECK(tether_comm_free(&ca));
        if (cb != TETHER_COMM_NULL) CHECK(tether_comm_free(&cb));
    }
}

/* ---- non-blocking collectives interleaved with each other and with
 * point-to-point on other communicators, completed in varying orders ---- */
static void nonblocking(void) {
    int usize, urank;
    CHECK(tether_universe_size(&usize));
    CHECK(tether_universe_rank(&urank));
    int all[64];
    for (int i = 0; i < usize; i++) all[i] = usize - 1 - i;
    tether_comm rev;
    CHECK(tether_comm_create_ranks(usize, all, &rev));
    comm_t u = describe(TETHER_COMM_UNIVERSE), r = describe(rev);
    enum { N = 4096 };
    for (int round = 0; round < 12; round++) {
        int64_t *sum_in = xmalloc(N * 8), *sum_out = xmalloc(N * 8);
        for (int i = 0; i < N; i++) sum_in[i] = urank * 10 + i + round;
        unsigned char *bc = xmalloc(N), *gath = xmalloc((size_t)N * r.size), *mine = xmalloc(N);
        int bcast_root = round % usize;
        if (u.rank == bcast_root) fill(bc, N, seed(bcast_root, 0, round)); else memset(bc, 0, N);
        fill(mine, N, seed(r.rank, 1, round));
        unsigned char *p2p_out = xmalloc(N), *p2p_in = xmalloc(N);
        fill(p2p_out, N, seed(urank, 2, round));
        tether_request reqs[6];
        CHECK(tether_iallreduce(sum_in, sum_out, N, TETHER_INT64, TETHER_SUM, TETHER_COMM_UNIVERSE, &reqs[0]));
        CHECK(tether_ibcast(bc, N, TETHER_BYTE, bcast_root, TETHER_COMM_UNIVERSE, &reqs[1]));
        CHECK(tether_iallgather(mine, N, TETHER_BYTE, gath, N, TETHER_BYTE, rev, &reqs[2]));
        CHECK(tether_irecv(p2p_in, N, TETHER_BYTE, (urank + usize - 1) % usize, round, TETHER_COMM_UNIVERSE, &reqs[3]));
        CHECK(tether_isend(p2p_out, N, TETHER_BYTE, (urank + 1) % usize, round, TETHER_COMM_UNIVERSE, &reqs[4]));
        CHECK(tether_ibarrier(rev, &reqs[5]));
        switch (round % 3) {
        case 0: CHECK(tether_waitall(6, reqs, TETHER_STATUSES_IGNORE)); break;
        case 1:
            for (int i = 5; i >= 0; i--) CHECK(tether_wait(&reqs[i], TETHER_STATUS_IGNORE));
            break;
        case 2:
            for (int left = 6; left > 0; left--) {
                int index;
                tether_status st;
                CHECK(tether_waitany(6, reqs, &index, &st));
                EXPECT(index >= 0 && reqs[index] == TETHER_REQUEST_NULL, "waitany index %d", index);
            }
            break;
        }
        for (int i = 0; i < N; i++) {
            int64_t want = 0;
            for (int k = 0; k < usize; k++) want += k * 10 + i + round;
            EXPECT(sum_out[i] == want, "iallreduce element %d", i);
        }
        EXPECT(first_mismatch(bc, N, seed(bcast_root, 0, round)) < 0, "ibcast");
        for (int k = 0; k < r.size; k++)
            EXPECT(first_mismatch(gath + (size_t)k * N, N, seed(k, 1, round)) < 0, "iallgather block %d", k);
        EXPECT(first_mismatch(p2p_in, N, seed((urank + usize - 1) % usize, 2, round)) < 0, "p2p beside collectives");
        free(sum_in); free(sum_out); free(bc); free(gath); free(mine); free(p2p_out); free(p2p_in);
    }
    CHECK(tether_comm_free(&rev));
}

/* ---- errors ---- */
#define EXPECT_CODE(call, code)                                                        \
    do {                                                                               \
        int got_ = (call);                                                             \
        EXPECT(got_ == (code), "%s returned %d, not %s", #call, got_, #code);          \
    } while (0)

/* Send and receive buffers that share bytes are refused up front with
 * TETHER_ERR_ARG naming both (MPI forbids them; TETHER_IN_PLACE is the way
 * to use one buffer), before any transfer, so the collectives after them
 * run normally. The self block of an alltoallv must be as long as it is
 * received (it is copied locally). Collective: every rank passes the same
 * kind of arguments. */
static void aliased_buffers(int urank, int usize) {
    int64_t v[32] = {0};
    char msg[TETHER_MAX_ERROR_STRING];
    EXPECT_CODE(tether_allreduce(v, v, 4, TETHER_INT64, TETHER_SUM, TETHER_COMM_UNIVERSE), TETHER_ERR_ARG);
    tether_last_error(msg, sizeof msg);
    EXPECT(strstr(msg, "allreduce: sendbuf (32 bytes at ") && strstr(msg, "overlaps recvbuf (32 bytes at "),
           "the message names both buffers: %s", msg);
    printf("aliasing reported: %s\n", msg);
    EXPECT_CODE(tether_allreduce(v, v + 3, 4, TETHER_INT64, TETHER_SUM, TETHER_COMM_UNIVERSE), TETHER_ERR_ARG);
    tether_request req = TETHER_REQUEST_NULL;
    EXPECT_CODE(tether_iallreduce(v + 3, v, 4, TETHER_INT64, TETHER_MAX, TETHER_COMM_UNIVERSE, &req),
                TETHER_ERR_ARG);
    EXPECT(req == TETHER_REQUEST_NULL, "a refused collective leaves *req alone");
    /* Only the root's receive buffer is significant in a reduce, so only
     * a root alone can be refused without leaving others waiting for it. */
    if (usize == 1)
        EXPECT_CODE(tether_reduce(v, v, 4, TETHER_INT64, TETHER_SUM, 0, TETHER_COMM_UNIVERSE), TETHER_ERR_ARG);
    if (usize <= 16) {
        /* An allgather whose send block is its own slot of the receive
         * buffer, without TETHER_IN_PLACE. */
        EXPECT_CODE(tether_allgather(v + urank, 1, TETHER_INT64, v, 1, TETHER_INT64, TETHER_COMM_UNIVERSE),
                    TETHER_ERR_ARG);
        int counts[16], displs[16], more[16];
        for (int i = 0; i < usize; i++) counts[i] = 1, displs[i] = i, more[i] = i == urank ? 2 : 1;
        int64_t out[32] = {0};
        EXPECT_CODE(tether_alltoallv(v, more, displs, TETHER_INT64, out, counts, displs, TETHER_INT64,
                                     TETHER_COMM_UNIVERSE), TETHER_ERR_COUNT);
        tether_last_error(msg, sizeof msg);
        EXPECT(strstr(msg, "the block to itself"), "the message names the self block: %s", msg);
    }
}

static void errors(void) {
    int usize, urank, nprog;
    CHECK(tether_universe_size(&usize));
    CHECK(tether_universe_rank(&urank));
    CHECK(tether_program_count(&nprog));
    int64_t a[4] = {1, 2, 3, 4}, b[8];
    EXPECT_CODE(tether_bcast(a, 4, TETHER_INT64, usize, TETHER_COMM_UNIVERSE), TETHER_ERR_RANK);
    EXPECT_CODE(tether_reduce(a, b, 4, TETHER_INT64, TETHER_SUM, -1, TETHER_COMM_UNIVERSE), TETHER_ERR_RANK);
    EXPECT_CODE(tether_allreduce(a, b, 4, TETHER_INT64, 99, TETHER_COMM_UNIVERSE), TETHER_ERR_OP);
    EXPECT_CODE(tether_allreduce(a, b, 4, 99, TETHER_SUM, TETHER_COMM_UNIVERSE), TETHER_ERR_TYPE);
    EXPECT_CODE(tether_allreduce(a, b, -1, TETHER_INT64, TETHER_SUM, TETHER_COMM_UNIVERSE), TETHER_ERR_COUNT);
    EXPECT_CODE(tether_allreduce(a, NULL, 4, TETHER_INT64, TETHER_SUM, TETHER_COMM_UNIVERSE), TETHER_ERR_ARG);
    EXPECT_CODE(tether_barrier(12345), TETHER_ERR_COMM);
    if (usize > 1) {
        int root = 0;
        if (urank != root)
            EXPECT_CODE(tether_gather(TETHER_IN_PLACE, 1, TETHER_INT64, NULL, 1, TETHER_INT64, root,
                                      TETHER_COMM_UNIVERSE), TETHER_ERR_ARG);
        else
            EXPECT_CODE(tether_gather(a, 2, TETHER_INT64, b, 1, TETHER_INT64, root, TETHER_COMM_UNIVERSE),
                        TETHER_ERR_COUNT);
    }
    /* Elements of two sizes in one pair: the types were mixed up (int32
     * sent, int64 received), said as such, before anything is sent. */
    if (usize <= 8) {
        int32_t mine[1] = {urank};
        int64_t all[8];
        EXPECT_CODE(tether_allgather(mine, 1, TETHER_INT32, all, 1, TETHER_INT64, TETHER_COMM_UNIVERSE),
                    TETHER_ERR_TYPE);
        char why[TETHER_MAX_ERROR_STRING];
        tether_last_error(why, sizeof why);
        EXPECT(strstr(why, "sendtype TETHER_INT32 has 4-byte elements but recvtype TETHER_INT64 8-byte ones"),
               "the message names both types: %s", why);
    }
    aliased_buffers(urank, usize);
    int bad_program = nprog;
    tether_comm c;
    EXPECT_CODE(tether_comm_create(1, &bad_program, &c), TETHER_ERR_ARG);
    int twice[2] = {0, 0};
    EXPECT_CODE(tether_comm_create_ranks(2, twice, &c), TETHER_ERR_RANK);
    tether_comm universe = TETHER_COMM_UNIVERSE;
    EXPECT_CODE(tether_comm_free(&universe), TETHER_ERR_COMM);

    /* A freed communicator is an error everywhere. */
    int everyone[64];
    for (int i = 0; i < usize; i++) everyone[i] = i;
    CHECK(tether_comm_create_ranks(usize, everyone, &c));
    tether_comm stale = c;
    CHECK(tether_comm_free(&c));
    EXPECT_CODE(tether_barrier(stale), TETHER_ERR_COMM);
    EXPECT_CODE(tether_allreduce(a, b, 4, TETHER_INT64, TETHER_SUM, stale), TETHER_ERR_COMM);
    EXPECT_CODE(tether_comm_free(&stale), TETHER_ERR_COMM);

    /* Mismatched counts between two processes are detected, and the
     * communicator still works afterwards. */
    if (usize >= 2) {
        int pair[2] = {0, 1};
        tether_comm two;
        CHECK(tether_comm_create_ranks(2, pair, &two));
        if (two != TETHER_COMM_NULL) {
            int64_t n = urank == 0 ? 8 : 4;
            int64_t in[8] = {1, 1, 1, 1, 1, 1, 1, 1}, out[8];
            int rc = tether_allreduce(in, out, n, TETHER_INT64, TETHER_SUM, two);
            char msg[TETHER_MAX_ERROR_STRING];
            tether_last_error(msg, sizeof msg);
            if (urank == 0)
                EXPECT(rc == TETHER_ERR_COUNT, "the longer side sees a short message (%d: %s)", rc, msg);
            else
                EXPECT(rc == TETHER_ERR_TRUNCATE, "the shorter side is truncated (%d: %s)", rc, msg);
            printf("mismatch reported: %s\n", msg);
            check_sum(describe(two), 5);
            CHECK(tether_comm_free(&two));
        }
    }
    check_sum(describe(TETHER_COMM_UNIVERSE), 10);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: coll_suite SCENARIO [quick]\n");
        return 2;
    }
    quick = argc > 2 && strcmp(argv[2], "quick") == 0;
    CHECK(tether_init(&argc, &argv));
    const char *s = argv[1];
    comm_t u = describe(TETHER_COMM_UNIVERSE);
    if (strcmp(s, "reductions") == 0) reductions(u, quick ? 4 : 5);
    else if (strcmp(s, "movement") == 0) movement(u, quick ? 4 : 5);
    else if (strcmp(s, "comms") == 0) comms();
    else if (strcmp(s, "nonblocking") == 0) nonblocking();
    else if (strcmp(s, "errors") == 0) errors();
    else {
        fprintf(stderr, "unknown scenario %s\n", s);
        return 2;
    }
    printf("ok %s\n", s);
    fflush(stdout);
    CHECK(tether_finalize());
    return 0;
}

/* Fields between real programs, checked element by element.
 *
 * Every process of program "prod" puts a field; every other program gets
 * it. Arguments are key=value pairs:
 *   shape=12x9        global shape (1 to 3 dimensions)
 *   elem=8            element size: 1, 2, 4, 8 or 16 bytes
 *   steps=20          steps put and got (step numbers 0, 3, 6, ...: gaps)
 *   <program>=SPEC    the distribution of that program (prod, or a consumer)
 *   <program>type=T   a different element type there (INT64 against DOUBLE)
 *   <program>shape=S  a different global shape there
 *   nonblocking=1     iput/iget with two steps in flight
 *   slow=<program>    that program sleeps between steps: the producer runs ahead
 *   expect=mismatch   every process must see TETHER_ERR_FIELD_MISMATCH
 *   die=<prog>:<rank>:<step>  that process exits without a word at that step;
 *                     the others must see TETHER_ERR_PEER_LOST
 *   twofields=1       a second field "mirror" of the same values, created in
 *                     the other order on the consumers, got before "values"
 *   queuecheck=1      (one rank each side, FIELD_QUEUE=1) the producer's iput
 *                     of step 1 must stay pending while the consumer, held
 *                     back by a point-to-point message, has not taken step 0
 *   wrongstep=1       the producer repeats step 0 and the consumer first asks
 *                     for step 3: both must get TETHER_ERR_ARG, then go on
 * SPEC is R:<grid>:<kinds>:<order>, e.g. R:2x2:B,BC3:C (kinds B, C, N, BC<k>;
 * order C or F), or X:<boxes>:<order> with boxes rows (a band of the first
 * dimension per rank), overlap (two overlapping boxes and an empty one per
 * rank), half (bands of the first half only) or all (rank 0 holds all).
 * The value of element g (C-order global index) at step s is a pattern of
 * (s, g), so every element of every step is checked, and a consumer
 * element that no step should touch keeps its marker. Prints "ok field
 * <steps> <elements checked>" or "ok mismatch" / "ok lost". */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include <unistd.h>

#include "common.h"

#define MAXD 3

static int ndims;
static int64_t shape[MAXD];

struct layout {
    int regular;
    int grid[MAXD], kinds[MAXD];
    int64_t blocks[MAXD];
    int order;
    int nboxes;
    int64_t starts[3 * MAXD], counts[3 * MAXD];
};

/* The value of the last `key=value` argument (later ones override). */
static const char *arg(int argc, char **argv, const char *key) {
    size_t n = strlen(key);
    for (int i = argc - 1; i >= 1; i--)
        if (strncmp(argv[i], key, n) == 0 && argv[i][n] == '=') return argv[i] + n + 1;
    return NULL;
}

static int parse_dims(const char *s, int64_t *out) {
    int n = 0;
    while (*s && n < MAXD) {
        out[n++] = strtoll(s, (char **)&s, 10);
        if (*s == 'x') s++;
    }
    return n;
}

/* Rank `rank`'s grid coordinates (DESIGN 3.8: C last fastest, F first). */
static void coords(const struct layout *l, int rank, int *c) {
    if (l->order == TETHER_ORDER_C) {
        for (int d = ndims - 1; d >= 0; d--) { c[d] = rank % l->grid[d]; rank /= l->grid[d]; }
    } else {
        for (int d = 0; d < ndims; d++) { c[d] = rank % l->grid[d]; rank /= l->grid[d]; }
    }
}

static int64_t block_of(const struct layout *l, int d) {
    int64_t p = l->grid[d];
    switch (l->kinds[d]) {
    case TETHER_DIST_BLOCK: return shape[d] == 0 ? 1 : (shape[d] + p - 1) / p;
    case TETHER_DIST_CYCLIC: return 1;
    case TETHER_DIST_NONE: return shape[d] == 0 ? 1 : shape[d];
    default: return l->blocks[d];
    }
}

static int64_t local_extent(const struct layout *l, int d, int c) {
    int64_t b = block_of(l, d), pb = b * l->grid[d], n = shape[d];
    int64_t rest = n % pb - (int64_t)c * b;
    return (n / pb) * b + (rest < 0 ? 0 : rest > b ? b : rest);
}

static void make_boxes(struct layout *l, const char *how, int rank, int size) {
    l->nboxes = 0;
    int64_t n0 = shape[0];
    if (!strcmp(how, "rows") || !strcmp(how, "half")) {
        int64_t total = !strcmp(how, "half") ? n0 / 2 : n0;
        int64_t lo = total * rank / size, hi = total * (rank + 1) / size;
        l->nboxes = 1;
        for (int d = 0; d < ndims; d++) { l->starts[d] = 0; l->counts[d] = shape[d]; }
        l->starts[0] = lo;
        l->counts[0] = hi - lo;
    } else if (!strcmp(how, "all")) {
        l->nboxes = rank == 0 ? 1 : 0;
        for (int d = 0; d < ndims; d++) { l->starts[d] = 0; l->counts[d] = shape[d]; }
    } else if (!strcmp(how, "overlap")) {
        /* Two boxes that overlap, then an empty one. */
        l->nboxes = 3;
        for (int b = 0; b < 3; b++)
            for (int d = 0; d < ndims; d++) {
                int64_t n = shape[d], lo = (n * (rank + b)) / (size + 2);
                int64_t hi = n == 0 ? 0 : lo + (n + 1) / 2;
                if (hi > n) hi = n;
                l->starts[b * ndims + d] = b == 2 ? n / 2 : lo;
                l->counts[b * ndims + d] = b == 2 ? 0 : hi - lo;
            }
    } else {
        fprintf(stderr, "unknown boxes %s\n", how);
        exit(2);
    }
}

static void parse_layout(const char *spec, struct layout *l, int rank, int size) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL, *kind = strtok_r(buf, ":", &save);
    l->regular = kind[0] == 'R';
    if (l->regular) {
        int64_t g[MAXD];
        int n = parse_dims(strtok_r(NULL, ":", &save), g);
        EXPECT(n == ndims, "grid of %d dimensions for a %d-D shape", n, ndims);
        for (int d = 0; d < ndims; d++) l->grid[d] = (int)g[d];
        char *kinds = strtok_r(NULL, ":", &save), *ksave = NULL;
        int d = 0;
        for (char *k = strtok_r(kinds, ",", &ksave); k; k = strtok_r(NULL, ",", &ksave), d++) {
            l->blocks[d] = 0;
            if (!strncmp(k, "BC", 2)) { l->kinds[d] = TETHER_DIST_BLOCK_CYCLIC; l->blocks[d] = atoll(k + 2); }
            else if (k[0] == 'B') l->kinds[d] = TETHER_DIST_BLOCK;
            else if (k[0] == 'C') l->kinds[d] = TETHER_DIST_CYCLIC;
            else l->kinds[d] = TETHER_DIST_NONE;
        }
        EXPECT(d == ndims, "%d kinds for %d dimensions", d, ndims);
    } else {
        make_boxes(l, strtok_r(NULL, ":", &save), rank, size);
    }
    l->order = strtok_r(NULL, ":", &save)[0] == 'F' ? TETHER_ORDER_FORTRAN : TETHER_ORDER_C;
}

/* Global C-order index of every local element, in local storage order. */
static int64_t map_local(const struct layout *l, int rank, int64_t *global) {
    int64_t count = 0;
    int nb = l->regular ? 1 : l->nboxes;
    for (int b = 0; b < nb; b++) {
        int64_t ext[MAXD], first[MAXD] = {0}, total = 1;
        int c[MAXD];
        if (l->regular) {
            coords(l, rank, c);
            for (int d = 0; d < ndims; d++) ext[d] = local_extent(l, d, c[d]);
        } else {
            for (int d = 0; d < ndims; d++) { ext[d] = l->counts[b * ndims + d]; first[d] = l->starts[b * ndims + d]; }
        }
        for (int d = 0; d < ndims; d++) total *= ext[d];
        for (int64_t i = 0; i < total; i++) {
            int64_t rest = i, idx[MAXD];
            if (l->order == TETHER_ORDER_C)
                for (int d = ndims - 1; d >= 0; d--) { idx[d] = rest % ext[d]; rest /= ext[d]; }
            else
                for (int d = 0; d < ndims; d++) { idx[d] = rest % ext[d]; rest /= ext[d]; }
            int64_t g = 0;
            for (int d = 0; d < ndims; d++) {
                int64_t gi;
                if (l->regular) {
                    int64_t bl = block_of(l, d);
                    gi = ((idx[d] / bl) * l->grid[d] + c[d]) * bl + idx[d] % bl;
                } else {
                    gi = first[d] + idx[d];
                }
                g = g * shape[d] + gi;
            }
            if (global) global[count] = g;
            count++;
        }
    }
    return count;
}

static unsigned char value_byte(int64_t step, int64_t g, int k) {
    return pattern_byte((uint64_t)step * 1000003u + (uint64_t)g, (size_t)k);
}

static int type_of(const char *name, int elem) {
    if (name && !strcmp(name, "INT64")) return TETHER_INT64;
    switch (elem) {
    case 1: return TETHER_UINT8;
    case 2: return TETHER_INT16;
    case 4: return TETHER_FLOAT;
    case 8: return TETHER_DOUBLE;
    default: return TETHER_DOUBLE_COMPLEX;
    }
}

static void pause_ms(int ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Exits 0 after printing `what` when `rc` is the expected error, else fails. */
static void expect_code(int rc, int code, const char *what) {
    char msg[TETHER_MAX_ERROR_STRING];
    tether_last_error(msg, sizeof msg);
    EXPECT(rc == code, "error %d, got %d: %s", code, rc, msg);
    printf("ok %s: %s\n", what, msg);
    fflush(stdout);
    tether_finalize();
    exit(0);
}

/* What a run expects and checks. */
struct run {
    int producer, expect_mismatch, may_lose;
    int elem;
    int64_t n;
    const int64_t *global;
    int64_t *checked;
};

/* Handles the code of a field call: an expected error ends the process. */
static void outcome(const struct run *r, int rc) {
    if (rc == TETHER_ERR_PEER_LOST && r->may_lose) expect_code(rc, rc, "lost");
    if (r->expect_mismatch) expect_code(rc, TETHER_ERR_FIELD_MISMATCH, "mismatch");
    CHECK(rc);
}

/* Completes step index i (waiting for its request if any) and, on a
   consumer, checks every element. */
static void finish(const struct run *r, tether_request *req, const unsigned char *buf, int i) {
    if (req) outcome(r, tether_wait(req, TETHER_STATUS_IGNORE));
    if (r->producer) return;
    for (int64_t e = 0; e < r->n; e++)
        for (int k = 0; k < r->elem; k++) {
            unsigned char got = buf[e * r->elem + k];
            unsigned char want = value_byte((int64_t)i * 3, r->global[e], k);
            EXPECT(got == want, "step %d element %lld (global %lld) byte %d: %u, expected %u", i * 3,
                   (long long)e, (long long)r->global[e], k, got, want);
            (*r->checked)++;
        }
}

/* The queue limit, checked without clocks: with FIELD_QUEUE=1 the
   producer's step 1 cannot leave before the consumer took step 0, and the
   consumer does not take it before the producer says so. */
static void queue_check(tether_field field, int producer, const struct run *r, unsigned char *buf) {
    /* One process per program: universe ranks follow program ids. */
    int go = 1, cons0, prod0;
    CHECK(tether_program_find("cons", &cons0));
    CHECK(tether_program_find("prod", &prod0));
    size_t bytes = (size_t)r->n * (size_t)r->elem;
    if (producer) {
        for (int64_t step = 0; step < 2; step++)
            for (int64_t e = 0; e < r->n; e++)
                for (int k = 0; k < r->elem; k++) buf[step * bytes + e * r->elem + k] = value_byte(step * 3, r->global[e], k);
        CHECK(tether_field_put(field, 0, buf));
        tether_request req;
        CHECK(tether_field_iput(field, 3, buf + bytes, &req));
        for (int i = 0; i < 100; i++) {
            int flag = 1;
            CHECK(tether_test(&req, &flag, TETHER_STATUS_IGNORE));
            EXPECT(!flag, "step 3 held back by FIELD_QUEUE=1 while step 0 is not taken (try %d)", i);
        }
        CHECK(tether_send(&go, 1, TETHER_INT, cons0, 77, TETHER_COMM_UNIVERSE));
        CHECK(tether_wait(&req, TETHER_STATUS_IGNORE));
        printf("ok queue: step 3 waited for step 0 to be taken\n");
    } else {
        CHECK(tether_recv(&go, 1, TETHER_INT, prod0, 77, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
        for (int i = 0; i < 2; i++) {
            CHECK(tether_field_get(field, i * 3, buf));
            finish(r, NULL, buf, i);
        }
        printf("ok queue: got steps 0 and 3\n");
    }
}

/* A first field named "values" that the consumers leave after one step
   while the producer goes on putting (and then frees it, announcing the
   end to consumers that are gone): none of its messages may reach the
   field created next under the same name, whose steps are checked. While
   it lives, the name cannot be created again. */
static void reuse_name(int type, tether_dist dist, const char *peers, int mode, int producer, int64_t bytes) {
    tether_field first;
    CHECK(tether_field_create("values", type, dist, peers, mode, &first));
    tether_field again;
    int rc = tether_field_create("values", type, dist, peers, mode, &again);
    EXPECT(rc == TETHER_ERR_ARG, "a second live field of one name is refused, got %d", rc);
    unsigned char *buf = xmalloc(bytes ? (size_t)bytes : 1);
    memset(buf, 0x5A, bytes ? (size_t)bytes : 1);
    for (int64_t step = 100; step < (producer ? 106 : 101); step++) {
        if (producer)
            CHECK(tether_field_put(first, step, bytes ? buf : NULL));
        else
            CHECK(tether_field_get(first, step, bytes ? buf : NULL));
    }
    CHECK(tether_field_free(&first));
    free(buf);
}

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    int id, rank, size;
    char me[TETHER_MAX_PROGRAM_NAME], key[96];
    CHECK(tether_program_id(&id));
    CHECK(tether_program_rank(&rank));
    CHECK(tether_program_size(id, &size));
    CHECK(tether_program_name(id, me, sizeof me));
    int producer = !strcmp(me, "prod");

    snprintf(key, sizeof key, "%sshape", me);
    ndims = parse_dims(arg(argc, argv, key) ? arg(argc, argv, key) : arg(argc, argv, "shape"), shape);
    int elem = atoi(arg(argc, argv, "elem"));
    int steps = atoi(arg(argc, argv, "steps"));
    int nonblocking = arg(argc, argv, "nonblocking") != NULL;
    int wrongstep = arg(argc, argv, "wrongstep") != NULL;
    const char *slow = arg(argc, argv, "slow");
    const char *expect = arg(argc, argv, "expect");
    int expect_mismatch = expect && !strcmp(expect, "mismatch");
    const char *die = arg(argc, argv, "die");
    int die_step = -1;
    if (die) {
        char prog[64];
        int r, s;
        if (sscanf(die, "%63[^:]:%d:%d", prog, &r, &s) == 3 && !strcmp(prog, me) && r == rank) die_step = s;
    }
    snprintf(key, sizeof key, "%stype", me);
    int type = type_of(arg(argc, argv, key), elem);

    struct layout l;
    parse_layout(arg(argc, argv, me), &l, rank, size);
    tether_dist dist;
    if (l.regular)
        CHECK(tether_dist_create(ndims, shape, l.grid, l.kinds, l.blocks, l.order, &dist));
    else
        CHECK(tether_dist_create_boxes(ndims, shape, l.nboxes, l.starts, l.counts, l.order, &dist));
    int64_t n = map_local(&l, rank, NULL);
    int64_t *global = xmalloc((size_t)n * sizeof *global);
    map_local(&l, rank, global);
    if (l.regular || l.nboxes == 1) {
        int64_t ls[MAXD], prod = 1;
        CHECK(tether_dist_local_shape(dist, ls));
        for (int d = 0; d < ndims; d++) prod *= ls[d];
        EXPECT(prod == n, "local shape of %lld elements, %lld expected", (long long)prod, (long long)n);
    }

    char peers[256] = "";
    if (producer) {
        int count;
        CHECK(tether_program_count(&count));
        for (int p = 0; p < count; p++) {
            char name[TETHER_MAX_PROGRAM_NAME];
            CHECK(tether_program_name(p, name, sizeof name));
            if (strcmp(name, "prod")) {
                if (peers[0]) strcat(peers, ",");
                strcat(peers, name);
            }
        }
    } else {
        strcpy(peers, "prod");
    }
    tether_field field;
    int twofields = arg(argc, argv, "twofields") != NULL;
    int mode = producer ? TETHER_FIELD_PUT : TETHER_FIELD_GET;
    tether_field mirror = TETHER_FIELD_NULL;
    /* Programs need not create their fields in the same order. */
    if (twofields && !producer) CHECK(tether_field_create("mirror", type, dist, peers, mode, &mirror));
    if (arg(argc, argv, "reuse")) reuse_name(type, dist, peers, mode, producer, map_local(&l, rank, NULL) * elem);
    int rc = tether_field_create("values", type, dist, peers, mode, &field);
    if (twofields && producer) CHECK(tether_field_create("mirror", type, dist, peers, mode, &mirror));
    CHECK(tether_dist_free(&dist));
    EXPECT(dist == TETHER_DIST_NULL, "a freed dist is TETHER_DIST_NULL");
    if (rc != TETHER_SUCCESS && expect_mismatch) expect_code(rc, TETHER_ERR_FIELD_MISMATCH, "mismatch");
    CHECK(rc);

    size_t bytes = (size_t)n * (size_t)elem;
    unsigned char *buf[2] = {xmalloc(bytes), xmalloc(bytes)};
    tether_request req[2] = {TETHER_REQUEST_NULL, TETHER_REQUEST_NULL};
    int64_t checked = 0;
    struct run r = {producer, expect_mismatch, die != NULL, elem, n, global, &checked};
    if (arg(argc, argv, "queuecheck")) {
        unsigned char *two = xmalloc(2 * bytes);
        queue_check(field, producer, &r, two);
        free(two);
        CHECK(tether_field_free(&field));
        CHECK(tether_finalize());
        return 0;
    }
    if (wrongstep && !producer) {
        char msg[TETHER_MAX_ERROR_STRING];
        rc = tether_field_get(field, 3, n ? buf[0] : NULL);
        tether_last_error(msg, sizeof msg);
        EXPECT(rc == TETHER_ERR_ARG, "a get of a step not next is refused, got %d", rc);
        printf("refused: %s\n", msg);
    }
    for (int i = 0; i < steps; i++) {
        int slot = i % 2;
        if (nonblocking && i >= 2) finish(&r, &req[slot], buf[slot], i - 2);
        if (i == die_step) _exit(0);
        int64_t step = (int64_t)i * 3;
        if (producer) {
            for (int64_t e = 0; e < n; e++)
                for (int k = 0; k < elem; k++) buf[slot][e * elem + k] = value_byte(step, global[e], k);
            if (twofields) CHECK(tether_field_put(mirror, step, n ? buf[slot] : NULL));
            rc = nonblocking ? tether_field_iput(field, step, n ? buf[slot] : NULL, &req[slot])
                             : tether_field_put(field, step, n ? buf[slot] : NULL);
        } else {
            if (twofields) {
                memset(buf[slot], 0xA5, bytes);
                CHECK(tether_field_get(mirror, step, n ? buf[slot] : NULL));
                finish(&r, NULL, buf[slot], i);
            }
            memset(buf[slot], 0xA5, bytes);
            rc = nonblocking ? tether_field_iget(field, step, n ? buf[slot] : NULL, &req[slot])
                             : tether_field_get(field, step, n ? buf[slot] : NULL);
        }
        outcome(&r, rc);
        if (wrongstep && i == 0 && producer) {
            char msg[TETHER_MAX_ERROR_STRING];
            rc = tether_field_put(field, 0, n ? buf[slot] : NULL);
            tether_last_error(msg, sizeof msg);
            EXPECT(rc == TETHER_ERR_ARG, "a repeated step is refused, got %d", rc);
            printf("refused: %s\n", msg);
        }
        if (!nonblocking) finish(&r, NULL, buf[slot], i);
        if (slow && !strcmp(slow, me)) pause_ms(20);
    }
    for (int i = nonblocking ? (steps > 2 ? steps - 2 : 0) : steps; i < steps; i++)
        finish(&r, &req[i % 2], buf[i % 2], i);
    if (expect_mismatch) {
        fprintf(stderr, "expected a mismatch, got none\n");
        return 1;
    }
    if (die) {
        /* The field may have outlived the process that left: its steps
           were all taken before it died. Freeing still must not hang. */
        rc = tether_field_free(&field);
        if (rc == TETHER_ERR_PEER_LOST) expect_code(rc, rc, "lost");
        CHECK(rc);
    } else {
        CHECK(tether_field_free(&field));
        EXPECT(field == TETHER_FIELD_NULL, "a freed field is TETHER_FIELD_NULL");
        if (twofields) CHECK(tether_field_free(&mirror));
    }
    printf("ok field %d %lld\n", steps, (long long)checked);
    free(buf[0]);
    free(buf[1]);
    free(global);
    CHECK(tether_finalize());
    return 0;
}

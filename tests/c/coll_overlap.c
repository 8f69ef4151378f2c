/* A non-blocking collective advances while its starter only posts
 * point-to-point operations (DESIGN 3.5: it advances whenever the engine
 * progresses, not only in test and wait).
 *
 *   coll_overlap MARKER   (2 processes)
 *
 * Rank 0 starts a broadcast large enough to need a rendezvous (its data
 * goes only after rank 1 granted it), then posts sends and receives to
 * itself and looks for MARKER, a file rank 1 creates once its blocking
 * broadcast returned. Without progress in those posts the data never
 * leaves and the marker never appears: rank 0 gives up after 20 s. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include <unistd.h>

#include "common.h"

#define BYTES (4 << 20)
#define POSTS 200

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    EXPECT(argc == 2, "usage: coll_overlap MARKER");
    const char *marker = argv[1];
    CHECK(tether_init(&argc, &argv));
    int rank, size;
    CHECK(tether_comm_rank(TETHER_COMM_UNIVERSE, &rank));
    CHECK(tether_comm_size(TETHER_COMM_UNIVERSE, &size));
    EXPECT(size == 2, "2 processes, got %d", size);
    unsigned char *buf = malloc(BYTES);
    EXPECT(buf != NULL, "memory");
    memset(buf, rank == 0 ? 0x5a : 0, BYTES);
    if (rank == 1) {
        CHECK(tether_bcast(buf, BYTES, TETHER_BYTE, 0, TETHER_COMM_UNIVERSE));
        EXPECT(buf[0] == 0x5a && buf[BYTES - 1] == 0x5a, "broadcast data");
        FILE *f = fopen(marker, "w");
        EXPECT(f != NULL, "cannot create %s", marker);
        fclose(f);
    } else {
        tether_request bcast, posted[2 * POSTS];
        int token[POSTS], got[POSTS], n = 0;
        CHECK(tether_ibcast(buf, BYTES, TETHER_BYTE, 0, TETHER_COMM_UNIVERSE, &bcast));
        double deadline = seconds() + 20;
        int seen = 0;
        while (!seen && seconds() < deadline && n < POSTS) {
            token[n] = n;
            CHECK(tether_irecv(&got[n], 1, TETHER_INT, 0, 7, TETHER_COMM_UNIVERSE, &posted[2 * n]));
            CHECK(tether_isend(&token[n], 1, TETHER_INT, 0, 7, TETHER_COMM_UNIVERSE, &posted[2 * n + 1]));
            n++;
            seen = access(marker, F_OK) == 0;
            if (!seen) nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
        }
        EXPECT(seen, "rank 1's broadcast did not finish while rank 0 posted %d sends and receives", n);
        CHECK(tether_waitall(2 * n, posted, TETHER_STATUSES_IGNORE));
        for (int i = 0; i < n; i++) EXPECT(got[i] == i, "self message %d holds %d", i, got[i]);
        CHECK(tether_wait(&bcast, TETHER_STATUS_IGNORE));
    }
    free(buf);
    CHECK(tether_finalize());
    printf("ok overlap\n");
    return 0;
}

/* The "heat" program: an explicit 1-D heat solver split over its ranks,
 * which exchange halo cells with each other through Tether. Rank 0 takes its
 * left boundary from the sensor program every step and reports back the
 * mean temperature of the whole rod (gathered from all ranks). */
#include <stdio.h>
#include <stdlib.h>

#include "coupling.h"

enum { CELLS = 1000, SUBSTEPS = 200 };

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    int me, rank, nranks, heat;
    CHECK(tether_universe_rank(&me));
    CHECK(tether_program_rank(&rank));
    CHECK(tether_program_id(&heat));
    CHECK(tether_program_size(heat, &nranks));
    int heat0 = me - rank, sensor0 = first_universe_rank("sensor");
    if (sensor0 < 0) {
        fprintf(stderr, "heat: no program called sensor in the universe\n");
        return 1;
    }
    int n = CELLS / nranks;
    double *u = calloc((size_t)n + 2, sizeof *u), *next = calloc((size_t)n + 2, sizeof *next);
    const int steps = argc > 1 ? atoi(argv[1]) : 10;
    for (int step = 0; step < steps; step++) {
        double boundary = 0;
        if (rank == 0) CHECK(tether_recv(&boundary, 1, TETHER_DOUBLE, sensor0, step, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
        for (int s = 0; s < SUBSTEPS; s++) {
            tether_request reqs[4];
            int k = 0;
            if (rank > 0) {
                CHECK(tether_irecv(&u[0], 1, TETHER_DOUBLE, me - 1, 1, TETHER_COMM_UNIVERSE, &reqs[k++]));
                CHECK(tether_isend(&u[1], 1, TETHER_DOUBLE, me - 1, 2, TETHER_COMM_UNIVERSE, &reqs[k++]));
            } else {
                u[0] = boundary;
            }
            if (rank < nranks - 1) {
                CHECK(tether_irecv(&u[n + 1], 1, TETHER_DOUBLE, me + 1, 2, TETHER_COMM_UNIVERSE, &reqs[k++]));
                CHECK(tether_isend(&u[n], 1, TETHER_DOUBLE, me + 1, 1, TETHER_COMM_UNIVERSE, &reqs[k++]));
            } else {
                u[n + 1] = 0.0;
            }
            CHECK(tether_waitall(k, reqs, TETHER_STATUSES_IGNORE));
            for (int i = 1; i <= n; i++) next[i] = u[i] + 0.4 * (u[i - 1] - 2 * u[i] + u[i + 1]);
            double *t = u;
            u = next;
            next = t;
        }
        double sum = 0;
        for (int i = 1; i <= n; i++) sum += u[i];
        if (rank == 0) {
            for (int r = 1; r < nranks; r++) {
                double part;
                CHECK(tether_recv(&part, 1, TETHER_DOUBLE, heat0 + r, 3, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
                sum += part;
            }
            double mean = sum / (n * nranks);
            CHECK(tether_send(&mean, 1, TETHER_DOUBLE, sensor0, step, TETHER_COMM_UNIVERSE));
        } else {
            CHECK(tether_send(&sum, 1, TETHER_DOUBLE, heat0, 3, TETHER_COMM_UNIVERSE));
        }
    }
    if (rank == 0) printf("heat: %d steps of %d cells on %d ranks done\n", steps, n * nranks, nranks);
    free(u);
    free(next);
    CHECK(tether_finalize());
    return 0;
}

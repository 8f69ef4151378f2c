/* The "simulation" of the Python coupling example (the shape of NICAM
 * coupled with an ML model): a 1-D periodic temperature field of CELLS
 * cells split over the ranks of program `sim`. Every step each rank
 * diffuses and forces its block, sends it to the model (program `ml`,
 * rank 0) and applies the correction the model sends back.
 *
 *   usage: sim STEPS        (run by python_coupling_demo.sh)
 */
#include <math.h>
#include <stdlib.h>

#include "coupling.h"

#define CELLS 4096
#define TAG_FIELD 1
#define TAG_CORRECTION 2

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 5;
    CHECK(tether_init(&argc, &argv));
    int me, ranks, sim_id;
    CHECK(tether_program_rank(&me));
    CHECK(tether_program_id(&sim_id));
    CHECK(tether_program_size(sim_id, &ranks));
    int model = first_universe_rank("ml");
    if (model < 0) {
        fprintf(stderr, "sim: no program `ml` in the universe\n");
        return 1;
    }
    int n = CELLS / ranks, first = me * n;
    double *t = malloc(sizeof *t * (size_t)(n + 2)), *fix = malloc(sizeof *fix * (size_t)n);
    for (int i = 0; i < n; i++) t[i + 1] = 15.0 + 10.0 * sin(2 * M_PI * (first + i) / CELLS);

    for (int step = 0; step < steps; step++) {
        /* Explicit diffusion with edge cells copied (the halo exchange of
         * the real model is not the point here), plus a heating term. */
        t[0] = t[1];
        t[n + 1] = t[n];
        double next[CELLS];
        for (int i = 1; i <= n; i++)
            next[i - 1] = t[i] + 0.2 * (t[i - 1] - 2 * t[i] + t[i + 1]) + 0.05 * cos(0.01 * (first + i) + step);
        for (int i = 0; i < n; i++) t[i + 1] = next[i];

        CHECK(tether_send(t + 1, n, TETHER_DOUBLE, model, TAG_FIELD, TETHER_COMM_UNIVERSE));
        CHECK(tether_recv(fix, n, TETHER_DOUBLE, model, TAG_CORRECTION, TETHER_COMM_UNIVERSE,
                          TETHER_STATUS_IGNORE));
        double norm = 0;
        for (int i = 0; i < n; i++) {
            t[i + 1] += fix[i];
            norm += fix[i] * fix[i];
        }
        if (me == 0) printf("step %d: sent %d cells, correction norm %.4f\n", step, n, sqrt(norm));
    }
    free(t);
    free(fix);
    CHECK(tether_finalize());
    return 0;
}

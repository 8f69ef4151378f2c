/* The "sensor" program: every step it sends a boundary temperature to the
 * heat solver's rank 0 and receives the solver's mean temperature back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "coupling.h"

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    int heat0 = first_universe_rank("heat");
    if (heat0 < 0) {
        fprintf(stderr, "sensor: no program called heat in the universe\n");
        return 1;
    }
    const int steps = argc > 1 ? atoi(argv[1]) : 10;
    for (int step = 0; step < steps; step++) {
        double boundary = 100.0 * sin(0.3 * step) + 100.0, mean;
        CHECK(tether_send(&boundary, 1, TETHER_DOUBLE, heat0, step, TETHER_COMM_UNIVERSE));
        CHECK(tether_recv(&mean, 1, TETHER_DOUBLE, heat0, step, TETHER_COMM_UNIVERSE, TETHER_STATUS_IGNORE));
        printf("step %2d: sent boundary %7.3f, solver mean %7.3f\n", step, boundary, mean);
    }
    CHECK(tether_finalize());
    return 0;
}

/* The fields example's picture writer: 2 ranks get "temperature" from
 * `sim` as boxes: rank 0 the whole field, rank 1 a zoom on its middle
 * (consumers' boxes may overlap). Every EVERY steps each writes a PGM
 * image (viz-<rank>-<step>.pgm) in the directory given. */
#include <stdio.h>
#include <stdlib.h>

#include "tether.h"

#define CHECK(call)                                                         \
    do {                                                                    \
        if ((call) != TETHER_SUCCESS) {                                     \
            char msg_[TETHER_MAX_ERROR_STRING];                             \
            tether_last_error(msg_, sizeof msg_);                           \
            fprintf(stderr, "viz: %s: %s\n", #call, msg_);                  \
            exit(1);                                                        \
        }                                                                   \
    } while (0)

enum { EVERY = 10 };

static void write_pgm(const char *dir, int rank, int step, const double *t, int64_t rows, int64_t cols) {
    char path[512];
    snprintf(path, sizeof path, "%s/viz-%d-%02d.pgm", dir, rank, step);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fprintf(f, "P5\n%lld %lld\n255\n", (long long)cols, (long long)rows);
    for (int64_t i = 0; i < rows * cols; i++) {
        double v = (t[i] - 10.0) / 70.0 * 255.0;
        fputc(v < 0 ? 0 : v > 255 ? 255 : (int)v, f);
    }
    fclose(f);
}

int main(int argc, char **argv) {
    CHECK(tether_init(&argc, &argv));
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    const char *dir = argc > 2 ? argv[2] : ".";
    int rank;
    CHECK(tether_program_rank(&rank));
    int64_t shape[2] = {96, 64};
    int64_t starts[2] = {rank == 0 ? 0 : 32, rank == 0 ? 0 : 16};
    int64_t counts[2] = {rank == 0 ? 96 : 32, rank == 0 ? 64 : 32};
    tether_dist dist;
    tether_field field;
    CHECK(tether_dist_create_boxes(2, shape, 1, starts, counts, TETHER_ORDER_C, &dist));
    CHECK(tether_field_create("temperature", TETHER_DOUBLE, dist, "sim", TETHER_FIELD_GET, &field));
    CHECK(tether_dist_free(&dist));
    double *t = malloc((size_t)(counts[0] * counts[1]) * sizeof *t);
    int written = 0;
    for (int step = 0; step < steps; step++) {
        CHECK(tether_field_get(field, step, t));
        if (step % EVERY == 0 || step == steps - 1) {
            write_pgm(dir, rank, step, t, counts[0], counts[1]);
            written++;
        }
    }
    CHECK(tether_field_free(&field));
    printf("viz: rank %d wrote %d pictures of %lldx%lld\n", rank, written, (long long)counts[0], (long long)counts[1]);
    free(t);
    CHECK(tether_finalize());
    return 0;
}

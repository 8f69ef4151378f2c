/* Output of a process that joins under `tether run` without -n (through
 * its own MPI launcher, whose PMI_RANK/PMI_SIZE give its identity):
 * `labelled_output LINES finalize|exit`. It prints a line before init,
 * LINES numbered lines to stdout and one to stderr after init, a last
 * line without a newline, and then finalizes and prints once more, or
 * exits without finalizing (stdio flushed by exit). The test checks that
 * every line after init is labelled [name:rank] and none is lost. */
#include "common.h"

int main(int argc, char **argv) {
    EXPECT(argc == 3, "usage: labelled_output LINES finalize|exit");
    int lines = atoi(argv[1]);
    int finalize = strcmp(argv[2], "finalize") == 0;
    printf("before init\n");
    CHECK(tether_init(&argc, &argv));
    int rank;
    CHECK(tether_program_rank(&rank));
    for (int i = 0; i < lines; i++) printf("line %d of rank %d\n", i, rank);
    fprintf(stderr, "stderr of rank %d\n", rank);
    printf("last line of rank %d without a newline", rank);
    if (!finalize) exit(0);
    fflush(stdout);
    CHECK(tether_finalize());
    printf("\nafter finalize of rank %d\n", rank);
    return 0;
}

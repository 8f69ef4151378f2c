/* An MPI program coupled with another program built by a different MPI
 * (tests/test_mpi_pair.py): compiled once by MPICH's mpicc and once by
 * Open MPI's, each started by its own launcher inside one `tether run`.
 * Usage: mpi_pair SELF OTHER
 *
 * Every MPI rank joins with tether_init_mpi(MPI_COMM_WORLD, SELF), then
 *   1. sums its ranks with its own MPI (MPI_Allreduce on MPI_COMM_WORLD);
 *   2. exchanges with every process of OTHER over TETHER_COMM_UNIVERSE, each
 *      way a greeting naming both ends (tag 1) and PAYLOAD int32 that depend
 *      on both (tag 2, large enough not to go eagerly);
 *   3. takes part in allreduces over TETHER_COMM_UNIVERSE, which span both
 *      programs and so both MPIs: a sum of COUNT doubles and a max;
 * and prints one line saying which MPI it ran on and what it checked.
 * Every check failure exits with 1. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tether_mpi.h>

#define MAX_PEERS 16
#define TEXT 64
#define PAYLOAD (1 << 16)
#define COUNT 1000
#define TAG_TEXT 1
#define TAG_DATA 2

static void fail(const char *message, const char *detail)
{
    fprintf(stderr, "mpi_pair: %s %s\n", message, detail);
    exit(1);
}

static void check(int code, const char *what)
{
    if (code != TETHER_SUCCESS) {
        char name[TETHER_MAX_ERROR_STRING], detail[TETHER_MAX_ERROR_STRING];
        tether_error_string(code, name, sizeof name);
        tether_last_error(detail, sizeof detail);
        fprintf(stderr, "mpi_pair: %s failed: %s (%s)\n", what, name, detail);
        exit(1);
    }
}

/* The first words of MPI_Get_library_version, up to a line end or comma
 * ("MPICH Version: 4.0.2", "Open MPI v4.1.4"). */
static const char *mpi_library(void)
{
    static char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length;
    MPI_Get_library_version(version, &length);
    version[strcspn(version, ",\n")] = '\0';
    for (char *c = version; *c; c++) {
        if (*c == '\t') {
            *c = ' ';
        }
    }
    return version;
}

static void greeting(char *text, const char *from, int from_rank, const char *to, int to_rank)
{
    snprintf(text, TEXT, "greeting from %s:%d to %s:%d", from, from_rank, to, to_rank);
}

static int32_t payload(int from, int to, int i)
{
    return (int32_t)(from * 1000003 + to * 7919 + i);
}

/* Universe rank of rank 0 of program `id`: programs are concatenated in id order. */
static int first_universe_rank(int id)
{
    int first = 0;
    for (int p = 0; p < id; p++) {
        int size;
        check(tether_program_size(p, &size), "tether_program_size");
        first += size;
    }
    return first;
}

/* Exchanges with every process of `other` as self:rank; returns how many. */
static int exchange(const char *self, int rank, const char *other)
{
    static char sent_text[MAX_PEERS][TEXT], got_text[MAX_PEERS][TEXT];
    static int32_t sent_data[MAX_PEERS][PAYLOAD], got_data[MAX_PEERS][PAYLOAD];
    tether_request reqs[4 * MAX_PEERS];
    int id, peers, first, n = 0;
    check(tether_program_find(other, &id), "tether_program_find");
    check(tether_program_size(id, &peers), "tether_program_size");
    if (peers < 1 || peers > MAX_PEERS) {
        fail("no or too many processes in", other);
    }
    first = first_universe_rank(id);
    for (int j = 0; j < peers; j++) {
        greeting(sent_text[j], self, rank, other, j);
        for (int i = 0; i < PAYLOAD; i++) {
            sent_data[j][i] = payload(rank, j, i);
        }
        check(tether_irecv(got_text[j], TEXT, TETHER_CHAR, first + j, TAG_TEXT, TETHER_COMM_UNIVERSE, &reqs[n++]),
              "tether_irecv");
        check(tether_irecv(got_data[j], PAYLOAD, TETHER_INT32, first + j, TAG_DATA, TETHER_COMM_UNIVERSE,
                           &reqs[n++]),
              "tether_irecv");
        check(tether_isend(sent_text[j], TEXT, TETHER_CHAR, first + j, TAG_TEXT, TETHER_COMM_UNIVERSE, &reqs[n++]),
              "tether_isend");
        check(tether_isend(sent_data[j], PAYLOAD, TETHER_INT32, first + j, TAG_DATA, TETHER_COMM_UNIVERSE,
                           &reqs[n++]),
              "tether_isend");
    }
    check(tether_waitall(n, reqs, TETHER_STATUSES_IGNORE), "tether_waitall");
    for (int j = 0; j < peers; j++) {
        char expected[TEXT];
        greeting(expected, other, j, self, rank);
        if (strncmp(got_text[j], expected, TEXT) != 0) {
            got_text[j][TEXT - 1] = '\0';
            fail("wrong greeting:", got_text[j]);
        }
        for (int i = 0; i < PAYLOAD; i++) {
            if (got_data[j][i] != payload(j, rank, i)) {
                fail("wrong payload with", expected);
            }
        }
    }
    return peers;
}

/* Allreduces over the universe: element i of the sum is (i + 1) * U(U+1)/2
 * over U processes contributing (urank + 1) * (i + 1) (exact in doubles);
 * the max of (urank + 1) is U. Returns U. */
static int universe_allreduce(void)
{
    static double mine[COUNT], sum[COUNT];
    int urank, usize, top = 0, contribution;
    check(tether_universe_rank(&urank), "tether_universe_rank");
    check(tether_universe_size(&usize), "tether_universe_size");
    for (int i = 0; i < COUNT; i++) {
        mine[i] = (double)(urank + 1) * (i + 1);
    }
    check(tether_allreduce(mine, sum, COUNT, TETHER_DOUBLE, TETHER_SUM, TETHER_COMM_UNIVERSE), "tether_allreduce");
    for (int i = 0; i < COUNT; i++) {
        if (sum[i] != (double)(i + 1) * usize * (usize + 1) / 2) {
            char at[64];
            snprintf(at, sizeof at, "element %d: %.17g", i, sum[i]);
            fail("wrong universe sum at", at);
        }
    }
    contribution = urank + 1;
    check(tether_allreduce(&contribution, &top, 1, TETHER_INT, TETHER_MAX, TETHER_COMM_UNIVERSE), "tether_allreduce");
    if (top != usize) {
        fail("wrong universe max", "");
    }
    return usize;
}

int main(int argc, char **argv)
{
    int mpi_rank, mpi_size, mpi_sum = 0, one, rank, peers, usize;
    const char *library;
    if (argc != 3) {
        fprintf(stderr, "usage: mpi_pair SELF OTHER\n");
        return 2;
    }
    const char *self = argv[1], *other = argv[2];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    library = mpi_library();

    one = mpi_rank + 1;
    MPI_Allreduce(&one, &mpi_sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (mpi_sum != mpi_size * (mpi_size + 1) / 2) {
        fail("wrong MPI_Allreduce sum on", library);
    }

    check(tether_init_mpi(MPI_COMM_WORLD, self), "tether_init_mpi");
    check(tether_program_rank(&rank), "tether_program_rank");
    if (rank != mpi_rank) {
        fail("program rank is not the MPI rank in", self);
    }
    peers = exchange(self, rank, other);
    usize = universe_allreduce();
    check(tether_barrier(TETHER_COMM_UNIVERSE), "tether_barrier");
    printf("mpi_pair: %s:%d of %d on %s: exchanged with %d of %s, universe allreduce over %d\n", self, rank,
           mpi_size, library, peers, other, usize);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    check(tether_finalize(), "tether_finalize");
    MPI_Finalize();
    return 0;
}

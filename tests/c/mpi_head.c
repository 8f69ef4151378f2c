/* An MPI program coupled through tether_mpi.h, and its plain peer
 * (tests/test_mpi_head.py). Usage: mpi_head ROLE SELF OTHER
 *
 *   head  an MPI job (mpiexec) of program SELF whose rank 0 alone joins
 *         (tether_init_mpi_head), exchanges with every process of OTHER,
 *         then MPI_Bcasts what it got; every MPI rank checks it.
 *   all   an MPI job whose every rank joins (tether_init_mpi) and
 *         exchanges with every process of OTHER.
 *   peer  a plain rank of SELF under `tether run -n N` (no MPI call): it
 *         exchanges with every joined process of OTHER.
 *
 * An exchange between two processes is, each way, a greeting naming both
 * ends (tag 1) and a payload of PAYLOAD ints that depends on both (tag 2),
 * large enough not to go eagerly. Every check failure exits with 1. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tether_mpi.h>

#define MAX_PEERS 16
#define TEXT 64
#define PAYLOAD (1 << 16)
#define TAG_TEXT 1
#define TAG_DATA 2

/* What one process received from every joined process of the other program. */
struct received {
    int peers;
    char text[MAX_PEERS][TEXT];
    int32_t data[MAX_PEERS][PAYLOAD];
};

/* Prints "mpi_head: MESSAGE DETAIL" and exits with 1. */
static void fail(const char *message, const char *detail)
{
    fprintf(stderr, "mpi_head: %s %s\n", message, detail);
    exit(1);
}

/* Fails with the name of `code` and the detailed message when `code` is an error. */
static void check(int code, const char *what)
{
    if (code != TETHER_SUCCESS) {
        char name[TETHER_MAX_ERROR_STRING], detail[TETHER_MAX_ERROR_STRING];
        tether_error_string(code, name, sizeof name);
        tether_last_error(detail, sizeof detail);
        fprintf(stderr, "mpi_head: %s failed: %s (%s)\n", what, name, detail);
        exit(1);
    }
}

static void greeting(char *text, const char *from, int from_rank, const char *to, int to_rank)
{
    snprintf(text, TEXT, "greeting from %s:%d to %s:%d", from, from_rank, to, to_rank);
}

static int32_t payload(int from_rank, int to_rank, int i)
{
    return (int32_t)(from_rank * 1000003 + to_rank * 7919 + i);
}

/* Checks that `text` and `data` are what from:from_rank sends to:to_rank. */
static void check_message(const char *from, int from_rank, const char *to, int to_rank,
                          const char *text, const int32_t *data)
{
    char expected[TEXT];
    greeting(expected, from, from_rank, to, to_rank);
    if (strncmp(text, expected, TEXT) != 0) {
        char shown[TEXT + 1] = "";
        memcpy(shown, text, TEXT);
        fail("wrong greeting:", shown);
    }
    for (int i = 0; i < PAYLOAD; i++) {
        if (data[i] != payload(from_rank, to_rank, i)) {
            fail("wrong payload with", expected);
        }
    }
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

/* Exchanges with every joined process of program `other` as SELF:rank, and
 * checks what arrives. */
static void exchange(const char *self, int rank, const char *other, struct received *got)
{
    int id, first;
    check(tether_program_find(other, &id), "tether_program_find");
    check(tether_program_size(id, &got->peers), "tether_program_size");
    if (got->peers > MAX_PEERS) {
        fail("too many processes in", other);
    }
    first = first_universe_rank(id);

    static char sent_text[MAX_PEERS][TEXT];
    static int32_t sent_data[MAX_PEERS][PAYLOAD];
    tether_request reqs[4 * MAX_PEERS];
    int n = 0;
    for (int j = 0; j < got->peers; j++) {
        int peer = first + j;
        greeting(sent_text[j], self, rank, other, j);
        for (int i = 0; i < PAYLOAD; i++) {
            sent_data[j][i] = payload(rank, j, i);
        }
        check(tether_irecv(got->text[j], TEXT, TETHER_CHAR, peer, TAG_TEXT, TETHER_COMM_UNIVERSE, &reqs[n++]),
              "tether_irecv");
        check(tether_irecv(got->data[j], PAYLOAD, TETHER_INT32, peer, TAG_DATA, TETHER_COMM_UNIVERSE, &reqs[n++]),
              "tether_irecv");
        check(tether_isend(sent_text[j], TEXT, TETHER_CHAR, peer, TAG_TEXT, TETHER_COMM_UNIVERSE, &reqs[n++]),
              "tether_isend");
        check(tether_isend(sent_data[j], PAYLOAD, TETHER_INT32, peer, TAG_DATA, TETHER_COMM_UNIVERSE, &reqs[n++]),
              "tether_isend");
    }
    check(tether_waitall(n, reqs, TETHER_STATUSES_IGNORE), "tether_waitall");
    for (int j = 0; j < got->peers; j++) {
        check_message(other, j, self, rank, got->text[j], got->data[j]);
    }
}

/* Checks that this process did (or did not) join, as `expected`. */
static void check_joined(int expected)
{
    int flag = -1;
    check(tether_initialized(&flag), "tether_initialized");
    if (flag != expected) {
        fail("tether_initialized says", flag ? "joined" : "not joined");
    }
}

/* Rank 0 of the MPI job joined and exchanged; it relays everything to its
 * MPI ranks, which check it as rank 0 would. */
static void relay(const char *self, const char *other, struct received *got, int mpi_rank, int mpi_size)
{
    MPI_Bcast(&got->peers, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (got->peers < 1 || got->peers > MAX_PEERS) {
        fail("bad peer count relayed by", "MPI rank 0");
    }
    MPI_Bcast(got->text, got->peers * TEXT, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(got->data, got->peers * PAYLOAD, MPI_INT32_T, 0, MPI_COMM_WORLD);
    for (int j = 0; j < got->peers; j++) {
        check_message(other, j, self, 0, got->text[j], got->data[j]);
    }
    printf("mpi_head: MPI rank %d of %d checked %d messages from %s\n", mpi_rank, mpi_size,
           got->peers, other);
}

static void run_mpi(int head, const char *self, const char *other, struct received *got, int *argc,
                    char ***argv)
{
    int mpi_rank, mpi_size, rank, size, id;
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    if (head) {
        check(tether_init_mpi_head(MPI_COMM_WORLD, self), "tether_init_mpi_head");
        check_joined(mpi_rank == 0);
    } else {
        check(tether_init_mpi(MPI_COMM_WORLD, self), "tether_init_mpi");
        check_joined(1);
    }
    if (!head || mpi_rank == 0) {
        check(tether_program_rank(&rank), "tether_program_rank");
        check(tether_program_find(self, &id), "tether_program_find");
        check(tether_program_size(id, &size), "tether_program_size");
        if (rank != (head ? 0 : mpi_rank) || size != (head ? 1 : mpi_size)) {
            fail("wrong program rank or size in", self);
        }
        exchange(self, rank, other, got);
        printf("mpi_head: %s:%d (MPI rank %d of %d) exchanged with %d of %s\n", self, rank, mpi_rank,
               mpi_size, got->peers, other);
        fflush(stdout);
    }
    if (head) {
        relay(self, other, got, mpi_rank, mpi_size);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (!head || mpi_rank == 0) {
        check(tether_finalize(), "tether_finalize");
    }
    MPI_Finalize();
}

static void run_peer(const char *self, const char *other, struct received *got, int *argc, char ***argv)
{
    int id, me, rank;
    check(tether_init(argc, argv), "tether_init");
    check(tether_program_find(self, &id), "tether_program_find");
    check(tether_program_id(&me), "tether_program_id");
    if (id != me) {
        fail("this process is not in program", self);
    }
    check(tether_program_rank(&rank), "tether_program_rank");
    exchange(self, rank, other, got);
    printf("mpi_head: %s:%d exchanged with %d of %s\n", self, rank, got->peers, other);
    check(tether_finalize(), "tether_finalize");
}

int main(int argc, char **argv)
{
    static struct received got;
    if (argc != 4) {
        fprintf(stderr, "usage: mpi_head head|all|peer SELF OTHER\n");
        return 2;
    }
    const char *role = argv[1], *self = argv[2], *other = argv[3];
    if (strcmp(role, "head") == 0 || strcmp(role, "all") == 0) {
        run_mpi(strcmp(role, "head") == 0, self, other, &got, &argc, &argv);
    } else if (strcmp(role, "peer") == 0) {
        run_peer(self, other, &got, &argc, &argv);
    } else {
        fprintf(stderr, "mpi_head: unknown role %s\n", role);
        return 2;
    }
    return 0;
}

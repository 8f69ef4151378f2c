/* A user's program, built against an installed Tether (pkg-config or
 * CMake) by tests/test_install.py: run as two programs under `tether run`,
 * every process exchanges one greeting with every process of the other
 * program and checks what it got. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tether.h>

#define MAX_PEERS 64
#define TEXT 96
#define TAG 7

static void check(int code, const char *what)
{
    if (code != TETHER_SUCCESS) {
        char name[TETHER_MAX_ERROR_STRING], detail[TETHER_MAX_ERROR_STRING];
        tether_error_string(code, name, sizeof name);
        tether_last_error(detail, sizeof detail);
        fprintf(stderr, "exchange: %s failed: %s (%s)\n", what, name, detail);
        exit(1);
    }
}

static void greeting(char *text, const char *from, int from_rank, const char *to, int to_rank)
{
    snprintf(text, TEXT, "greeting from %s:%d to %s:%d", from, from_rank, to, to_rank);
}

int main(int argc, char **argv)
{
    check(tether_init(&argc, &argv), "tether_init");
    int programs, me, rank;
    check(tether_program_count(&programs), "tether_program_count");
    if (programs != 2) {
        fprintf(stderr, "exchange: expected 2 programs, found %d\n", programs);
        return 1;
    }
    check(tether_program_id(&me), "tether_program_id");
    check(tether_program_rank(&rank), "tether_program_rank");
    int other = 1 - me, peers, first = 0;
    check(tether_program_size(other, &peers), "tether_program_size");
    if (other == 1) {
        check(tether_program_size(0, &first), "tether_program_size");
    }
    if (peers > MAX_PEERS) {
        fprintf(stderr, "exchange: at most %d peers\n", MAX_PEERS);
        return 1;
    }
    char my_name[TETHER_MAX_PROGRAM_NAME], other_name[TETHER_MAX_PROGRAM_NAME];
    check(tether_program_name(me, my_name, sizeof my_name), "tether_program_name");
    check(tether_program_name(other, other_name, sizeof other_name), "tether_program_name");

    static char sent[MAX_PEERS][TEXT], got[MAX_PEERS][TEXT];
    tether_request reqs[2 * MAX_PEERS];
    tether_status statuses[2 * MAX_PEERS];
    for (int j = 0; j < peers; j++) {
        int peer = first + j; /* universe ranks follow program order */
        greeting(sent[j], my_name, rank, other_name, j);
        check(tether_irecv(got[j], TEXT, TETHER_CHAR, peer, TAG, TETHER_COMM_UNIVERSE, &reqs[2 * j]),
              "tether_irecv");
        check(tether_isend(sent[j], TEXT, TETHER_CHAR, peer, TAG, TETHER_COMM_UNIVERSE, &reqs[2 * j + 1]),
              "tether_isend");
    }
    check(tether_waitall(2 * peers, reqs, statuses), "tether_waitall");
    for (int j = 0; j < peers; j++) {
        char expected[TEXT];
        greeting(expected, other_name, j, my_name, rank);
        if (statuses[2 * j].source != first + j || strcmp(got[j], expected) != 0) {
            fprintf(stderr, "exchange: from universe rank %d got \"%.*s\", expected \"%s\"\n",
                    statuses[2 * j].source, TEXT, got[j], expected);
            return 1;
        }
    }
    printf("exchange ok: %s:%d with %d of %s\n", my_name, rank, peers, other_name);
    check(tether_finalize(), "tether_finalize");
    return 0;
}

/* What both demo programs need: checked calls and where a program's ranks
 * start in the universe (programs are ordered by name, ranks concatenated). */
#ifndef COUPLING_H
#define COUPLING_H

#include <stdio.h>

#include "tether.h"

#define CHECK(call)                                                    \
    do {                                                               \
        int rc_ = (call);                                              \
        if (rc_) {                                                     \
            char m_[TETHER_MAX_ERROR_STRING];                          \
            tether_last_error(m_, sizeof m_);                          \
            fprintf(stderr, "%s failed: %s\n", #call, m_);             \
            return 1;                                                  \
        }                                                              \
    } while (0)

/* Universe rank of rank 0 of the program called `name`, or -1. */
static inline int first_universe_rank(const char *name) {
    int id, first;
    if (tether_program_find(name, &id) != TETHER_SUCCESS) return -1;
    if (tether_program_universe_rank(id, 0, &first) != TETHER_SUCCESS) return -1;
    return first;
}

#endif

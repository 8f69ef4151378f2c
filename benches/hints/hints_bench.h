/* Helpers shared by the benchmarks of benches/hints/: a process's
 * memory as /proc reports it, and one of Tether's counters. */
#ifndef TETHER_HINTS_BENCH_H
#define TETHER_HINTS_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tether.h"

/* The value in KiB of `field` ("VmRSS:", "VmHWM:") of /proc/self/status,
 * or -1. */
static inline long status_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    size_t len = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, len)) kib = atol(line + len);
    if (f) fclose(f);
    return kib;
}

/* Counter `name` now, or 0 when no counter has that name. */
static inline int64_t stat_of(const char *name) {
    int64_t value = 0;
    return tether_stats_read(name, &value) == TETHER_SUCCESS ? value : 0;
}

#endif

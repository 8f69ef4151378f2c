/* Helpers shared by the C test programs: checked calls and data patterns. */
#ifndef TETHER_TEST_COMMON_H
#define TETHER_TEST_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tether.h"

#define CHECK(call)                                                              \
    do {                                                                         \
        int rc_ = (call);                                                        \
        if (rc_ != TETHER_SUCCESS) {                                             \
            char msg_[TETHER_MAX_ERROR_STRING];                                  \
            tether_last_error(msg_, sizeof msg_);                                \
            fprintf(stderr, "%s:%d: %s returned %d: %s\n", __FILE__, __LINE__,   \
                    #call, rc_, msg_);                                           \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

#define EXPECT(cond, ...)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: expected %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                        \
            fprintf(stderr, "\n");                                               \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

/* The byte at `i` of the message `seed` identifies. */
static inline unsigned char pattern_byte(uint64_t seed, size_t i) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
    return (unsigned char)(x >> 56);
}

static inline void fill(unsigned char *buf, size_t len, uint64_t seed) {
    for (size_t i = 0; i < len; i++) buf[i] = pattern_byte(seed, i);
}

/* Index of the first wrong byte, or -1. */
static inline long long first_mismatch(const unsigned char *buf, size_t len, uint64_t seed) {
    for (size_t i = 0; i < len; i++)
        if (buf[i] != pattern_byte(seed, i)) return (long long)i;
    return -1;
}

static inline void *xmalloc(size_t len) {
    void *p = malloc(len ? len : 1);
    if (!p) {
        fprintf(stderr, "out of memory allocating %zu bytes\n", len);
        exit(1);
    }
    return p;
}

#endif

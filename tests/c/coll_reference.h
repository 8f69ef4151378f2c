/* A serial reference for reductions: every datatype, its kind, the values
 * each rank contributes (negatives, zero, the minimum and maximum of each
 * integer width, NaN, infinities and FLT_MAX/DBL_MAX for floats, ties for
 * MINLOC/MAXLOC) and every operation
 * written out in plain C, folded in rank order. Independent of the library's
 * own implementation. */
#ifndef TETHER_TEST_COLL_REFERENCE_H
#define TETHER_TEST_COLL_REFERENCE_H

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tether.h"

typedef enum {
    K_SIGNED, K_UNSIGNED, K_BYTE, K_CHAR, K_F32, K_F64, K_C32, K_C64, K_LOGICAL,
    K_FLOAT_INT, K_DOUBLE_INT, K_INT_INT, K_FLOAT_FLOAT, K_DOUBLE_DOUBLE
} kind_t;

typedef struct { tether_datatype type; const char *name; kind_t kind; int size; } type_info;

typedef struct { float v; int i; } float_int;
typedef struct { double v; int i; } double_int;

static const type_info TYPES[] = {
    {TETHER_BYTE, "BYTE", K_BYTE, 1},
    {TETHER_CHAR, "CHAR", K_CHAR, 1},
    {TETHER_INT8, "INT8", K_SIGNED, 1},
    {TETHER_INT16, "INT16", K_SIGNED, 2},
    {TETHER_INT32, "INT32", K_SIGNED, 4},
    {TETHER_INT64, "INT64", K_SIGNED, 8},
    {TETHER_UINT8, "UINT8", K_UNSIGNED, 1},
    {TETHER_UINT16, "UINT16", K_UNSIGNED, 2},
    {TETHER_UINT32, "UINT32", K_UNSIGNED, 4},
    {TETHER_UINT64, "UINT64", K_UNSIGNED, 8},
    {TETHER_INT, "INT", K_SIGNED, sizeof(int)},
    {TETHER_LONG, "LONG", K_SIGNED, sizeof(long)},
    {TETHER_LONG_LONG, "LONG_LONG", K_SIGNED, sizeof(long long)},
    {TETHER_FLOAT, "FLOAT", K_F32, 4},
    {TETHER_DOUBLE, "DOUBLE", K_F64, 8},
    {TETHER_FLOAT_COMPLEX, "FLOAT_COMPLEX", K_C32, 8},
    {TETHER_DOUBLE_COMPLEX, "DOUBLE_COMPLEX", K_C64, 16},
    {TETHER_FLOAT_INT, "FLOAT_INT", K_FLOAT_INT, sizeof(float_int)},
    {TETHER_DOUBLE_INT, "DOUBLE_INT", K_DOUBLE_INT, sizeof(double_int)},
    {TETHER_2INT, "2INT", K_INT_INT, 8},
    {TETHER_INTEGER, "INTEGER", K_SIGNED, 4},
    {TETHER_REAL, "REAL", K_F32, 4},
    {TETHER_DOUBLE_PRECISION, "DOUBLE_PRECISION", K_F64, 8},
    {TETHER_COMPLEX, "COMPLEX", K_C32, 8},
    {TETHER_LOGICAL, "LOGICAL", K_LOGICAL, 4},
    {TETHER_2INTEGER, "2INTEGER", K_INT_INT, 8},
    {TETHER_2REAL, "2REAL", K_FLOAT_FLOAT, 8},
    {TETHER_2DOUBLE_PRECISION, "2DOUBLE_PRECISION", K_DOUBLE_DOUBLE, 16},
};
#define NTYPES ((int)(sizeof TYPES / sizeof TYPES[0]))

static const struct { tether_op op; const char *name; } OPS[] = {
    {TETHER_SUM, "SUM"},   {TETHER_PROD, "PROD"}, {TETHER_MIN, "MIN"},       {TETHER_MAX, "MAX"},
    {TETHER_LAND, "LAND"}, {TETHER_LOR, "LOR"},   {TETHER_LXOR, "LXOR"},     {TETHER_BAND, "BAND"},
    {TETHER_BOR, "BOR"},   {TETHER_BXOR, "BXOR"}, {TETHER_MINLOC, "MINLOC"}, {TETHER_MAXLOC, "MAXLOC"},
};
#define NOPS ((int)(sizeof OPS / sizeof OPS[0]))

/* MPI's table of valid (type, op) pairs. */
static int valid_pair(const type_info *t, tether_op op) {
    int integer = t->kind == K_SIGNED || t->kind == K_UNSIGNED;
    int real = t->kind == K_F32 || t->kind == K_F64;
    int complex = t->kind == K_C32 || t->kind == K_C64;
    int pair = t->kind >= K_FLOAT_INT;
    switch (op) {
    case TETHER_SUM: case TETHER_PROD: return integer || real || complex;
    case TETHER_MIN: case TETHER_MAX: return integer || real;
    case TETHER_LAND: case TETHER_LOR: case TETHER_LXOR: return integer || t->kind == K_LOGICAL;
    case TETHER_BAND: case TETHER_BOR: case TETHER_BXOR: return integer || t->kind == K_BYTE;
    case TETHER_MINLOC: case TETHER_MAXLOC: return pair;
    }
    return 0;
}

static uint64_t mix(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* An integer of `size` bytes for (rank, i), as the low bytes of a 64-bit
 * pattern: zero, +-1, the minimum and maximum of that width (signed; the
 * unsigned maximum is -1 and the unsigned minimum 0), values next to them,
 * small negatives and noise. The first ten elements take the ten kinds in
 * turn from an offset of the rank, so that counts of 1 and 7 meet the
 * extremes too; later elements take them at random. */
static uint64_t int_pattern(int rank, int64_t i, int size) {
    uint64_t h = mix((uint64_t)rank * 1000003u + (uint64_t)i);
    uint64_t smin = 1ull << (8 * size - 1), smax = smin - 1;
    switch (i < 10 ? (uint64_t)(rank + i) % 10 : h % 10) {
    case 0: return 0;
    case 1: return 1;
    case 2: return (uint64_t)-1;            /* -1, or the unsigned maximum */
    case 3: return smin;                    /* the signed minimum of the width */
    case 4: return smax;                    /* the signed maximum of the width */
    case 5: return smin + (h >> 60);        /* at or just above the minimum */
    case 6: return smax - (h >> 60);        /* at or just below the maximum */
    case 7: return (uint64_t)-(int64_t)(h >> 40 & 0xff);
    default: return h >> 3;
    }
}

/* Small integers (exact sums and products), with inf, -inf and NaN, and
 * `big`, the type's largest finite value (FLT_MAX or DBL_MAX), placed so
 * that the result does not depend on the order the library combines in:
 * on element i % 37 == 5 every rank gives big with one sign (SUM and PROD
 * give +-big on one rank and +-inf beyond), on i % 37 == 6 rank 0 alone
 * gives +-big and the others small integers for SUM, +-1 for PROD (the
 * result is +-big exactly: big + 4 rounds to big). MIN and MAX take any
 * value, the extremes of both widths included. */
static double float_value(int rank, int64_t i, tether_op op, double big) {
    uint64_t h = mix((uint64_t)rank * 7919u + (uint64_t)i * 31u + 5);
    if (op == TETHER_MIN || op == TETHER_MAX) {
        const double extremes[] = {0.0, -0.0, 1.0, -1.0, big, -big, FLT_MAX, -FLT_MAX, FLT_MIN, 1e-40, -2.5, 3.0};
        if (h % 23 == 0) return NAN;
        if (h % 19 == 0) return (h & 1) ? INFINITY : -INFINITY;
        return extremes[h % 12];
    }
    double sign = (i / 37) % 2 ? -1.0 : 1.0;
    if (i % 37 == 5) return sign * big;
    if (i % 37 == 6) {
        if (rank == 0) return sign * big;
        if (op == TETHER_PROD) return (h & 1) ? -1.0 : 1.0;
        return (double)((int64_t)(h % 9) - 4);
    }
    if (i % 53 == 7 && rank == 0) return INFINITY;
    if (i % 53 == 7 && rank == 1) return -INFINITY; /* with rank 0: NaN */
    if (i % 61 == 11) return INFINITY;
    if (i % 67 == 13 && rank == 0) return NAN;
    return (double)((int64_t)(h % 9) - 4);
}

/* Fills element i of rank `rank`'s contribution for (type, op). */
static void make_element(const type_info *t, tether_op op, int rank, int64_t i, unsigned char *out) {
    int width = t->kind == K_SIGNED || t->kind == K_UNSIGNED ? t->size : 8;
    uint64_t bits = int_pattern(rank, i, width);
    switch (t->kind) {
    case K_SIGNED: case K_UNSIGNED: case K_BYTE: case K_CHAR:
        memcpy(out, &bits, t->size); /* little-endian: the low bytes */
        break;
    case K_LOGICAL: { int32_t v = (int32_t)(bits % 3 == 0 ? 0 : 1); memcpy(out, &v, 4); break; }
    case K_F32: { float v = (float)float_value(rank, i, op, FLT_MAX); memcpy(out, &v, 4); break; }
    case K_F64: { double v = float_value(rank, i, op, DBL_MAX); memcpy(out, &v, 8); break; }
    case K_C32: { float v[2] = {(float)((int)(bits % 5) - 2), (float)((int)(bits / 5 % 5) - 2)}; memcpy(out, v, 8); break; }
    case K_C64: { double v[2] = {(double)((int)(bits % 5) - 2), (double)((int)(bits / 5 % 5) - 2)}; memcpy(out, v, 16); break; }
    case K_FLOAT_INT: {
        float_int v; memset(&v, 0, sizeof v);
        v.v = (i % 29 == 3 && rank % 2) ? NAN : (float)((bits % 4) - 2.0); v.i = rank * 3 + (int)(i % 2);
        memcpy(out, &v, sizeof v); break;
    }
    case K_DOUBLE_INT: {
        double_int v; memset(&v, 0, sizeof v);
        v.v = (i % 29 == 3 && rank % 2) ? NAN : (double)((bits % 4) - 2.0); v.i = rank * 3 + (int)(i % 2);
        memcpy(out, &v, sizeof v); break;
    }
    case K_INT_INT: { /* with INT32_MIN and INT32_MAX tied across ranks */
        int32_t v[2] = {(int32_t)(bits % 4) - 2, rank * 3 + (int)(i % 2)};
        if (i % 11 == 4) v[0] = rank % 2 ? INT32_MIN : INT32_MAX;
        memcpy(out, v, 8); break;
    }
    case K_FLOAT_FLOAT: { float v[2] = {(float)((bits % 4) - 2.0), (float)(rank * 3 + i % 2)}; memcpy(out, v, 8); break; }
    case K_DOUBLE_DOUBLE: { double v[2] = {(double)((bits % 4) - 2.0), (double)(rank * 3 + i % 2)}; memcpy(out, v, 16); break; }
    }
}

static void make_contribution(const type_info *t, tether_op op, int rank, int64_t count, unsigned char *out) {
    for (int64_t i = 0; i < count; i++) make_element(t, op, rank, i, out + i * t->size);
}

/* Integer SUM and PROD wrap (DESIGN 3.4): computed in uint64_t, where
 * nothing overflows (uint16_t operands would be promoted to int, whose
 * overflow is undefined), cut to the width in U and read back as T. */
#define INT_OPS(T, U)                                                                       \
    static T wrap_##T(uint64_t x) { U u = (U)x; T t; memcpy(&t, &u, sizeof t); return t; } \
    static T op_##T(tether_op op, T a, T b) {                                              \
        switch (op) {                                                                       \
        case TETHER_SUM: return wrap_##T((uint64_t)(U)a + (uint64_t)(U)b);                 \
        case TETHER_PROD: return wrap_##T((uint64_t)(U)a * (uint64_t)(U)b);                \
        case TETHER_MIN: return a < b ? a : b;                                              \
        case TETHER_MAX: return a > b ? a : b;                                              \
        case TETHER_LAND: return (T)((a != 0) && (b != 0));                                 \
        case TETHER_LOR: return (T)((a != 0) || (b != 0));                                  \
        case TETHER_LXOR: return (T)((a != 0) != (b != 0));                                 \
        case TETHER_BAND: return (T)(a & b);                                                \
        case TETHER_BOR: return (T)(a | b);                                                 \
        case TETHER_BXOR: return (T)(a ^ b);                                                \
        }                                                                                   \
        return 0;                                                                           \
    }
INT_OPS(int8_t, uint8_t)
INT_OPS(int16_t, uint16_t)
INT_OPS(int32_t, uint32_t)
INT_OPS(int64_t, uint64_t)
INT_OPS(uint8_t, uint8_t)
INT_OPS(uint16_t, uint16_t)
INT_OPS(uint32_t, uint32_t)
INT_OPS(uint64_t, uint64_t)

/* IEEE 754-2019 minimum/maximum: NaN propagates, -0 < +0. */
#define FLOAT_OPS(T)                                                                        \
    static T op_##T(tether_op op, T a, T b) {                                              \
        if (op == TETHER_SUM) return a + b;                                                 \
        if (op == TETHER_PROD) return a * b;                                                \
        if (isnan(a)) return a;                                                             \
        if (isnan(b)) return b;                                                             \
        if (a == b) return (op == TETHER_MIN) == (signbit(a) != 0) ? a : b;                 \
        if (op == TETHER_MIN) return a < b ? a : b;                                         \
        return a > b ? a : b;                                                               \
    }
FLOAT_OPS(float)
FLOAT_OPS(double)

/* MINLOC/MAXLOC: a NaN value wins; ties go to the lower index. Returns 1
 * when b is the result. */
static int loc_takes_b(tether_op op, double av, double bv, double ai, double bi) {
    int an = isnan(av), bn = isnan(bv);
    if (an && !bn) return 0;
    if (bn && !an) return 1;
    if (!an && !bn && av != bv) return op == TETHER_MINLOC ? bv < av : bv > av;
    return bi < ai;
}

/* acc = acc (op) x, one element. */
static void combine_element(const type_info *t, tether_op op, unsigned char *acc, const unsigned char *x) {
#define APPLY(T) do { T a_, b_; memcpy(&a_, acc, sizeof a_); memcpy(&b_, x, sizeof b_); a_ = op_##T(op, a_, b_); memcpy(acc, &a_, sizeof a_); } while (0)
    switch (t->kind) {
    case K_SIGNED:
        if (t->size == 1) APPLY(int8_t); else if (t->size == 2) APPLY(int16_t);
        else if (t->size == 4) APPLY(int32_t); else APPLY(int64_t);
        break;
    case K_UNSIGNED: case K_BYTE:
        if (t->size == 1) APPLY(uint8_t); else if (t->size == 2) APPLY(uint16_t);
        else if (t->size == 4) APPLY(uint32_t); else APPLY(uint64_t);
        break;
    case K_LOGICAL: APPLY(int32_t); break;
    case K_F32: APPLY(float); break;
    case K_F64: APPLY(double); break;
    case K_C32: case K_C64: {
        double a[2], b[2];
        if (t->kind == K_C32) { float f[2], g[2]; memcpy(f, acc, 8); memcpy(g, x, 8); a[0] = f[0]; a[1] = f[1]; b[0] = g[0]; b[1] = g[1]; }
        else { memcpy(a, acc, 16); memcpy(b, x, 16); }
        double r[2];
        if (op == TETHER_SUM) { r[0] = a[0] + b[0]; r[1] = a[1] + b[1]; }
        else { r[0] = a[0] * b[0] - a[1] * b[1]; r[1] = a[0] * b[1] + a[1] * b[0]; }
        if (t->kind == K_C32) { float f[2] = {(float)r[0], (float)r[1]}; memcpy(acc, f, 8); }
        else memcpy(acc, r, 16);
        break;
    }
    case K_FLOAT_INT: { float_int a, b; memcpy(&a, acc, sizeof a); memcpy(&b, x, sizeof b);
        if (loc_takes_b(op, a.v, b.v, a.i, b.i)) { a.v = b.v; a.i = b.i; }
        memcpy(acc, &a, sizeof a);
        break; }
    case K_DOUBLE_INT: { double_int a, b; memcpy(&a, acc, sizeof a); memcpy(&b, x, sizeof b);
        if (loc_takes_b(op, a.v, b.v, a.i, b.i)) { a.v = b.v; a.i = b.i; }
        memcpy(acc, &a, sizeof a);
        break; }
    case K_INT_INT: { int32_t a[2], b[2]; memcpy(a, acc, 8); memcpy(b, x, 8);
        if (loc_takes_b(op, a[0], b[0], a[1], b[1])) { memcpy(acc, b, 8); }
        break; }
    case K_FLOAT_FLOAT: { float a[2], b[2]; memcpy(a, acc, 8); memcpy(b, x, 8);
        if (loc_takes_b(op, a[0], b[0], a[1], b[1])) { memcpy(acc, b, 8); }
        break; }
    case K_DOUBLE_DOUBLE: { double a[2], b[2]; memcpy(a, acc, 16); memcpy(b, x, 16);
        if (loc_takes_b(op, a[0], b[0], a[1], b[1])) { memcpy(acc, b, 16); }
        break; }
    case K_CHAR: break;
    }
#undef APPLY
}

/* Whether two elements are equal: bit for bit, except that any NaN equals
 * any NaN, the padding of DOUBLE_INT is ignored, and complex parts compare
 * as numbers (the sign of a zero part of a complex product depends on the
 * order of the products, in IEEE arithmetic). */
static int same_element(const type_info *t, const unsigned char *a, const unsigned char *b) {
    switch (t->kind) {
    case K_C32: {
        float x[2], y[2]; memcpy(x, a, 8); memcpy(y, b, 8);
        return x[0] == y[0] && x[1] == y[1];
    }
    case K_C64: {
        double x[2], y[2]; memcpy(x, a, 16); memcpy(y, b, 16);
        return x[0] == y[0] && x[1] == y[1];
    }
    case K_F32: case K_FLOAT_FLOAT: {
        for (int k = 0; k < t->size / 4; k++) {
            float x, y; memcpy(&x, a + 4 * k, 4); memcpy(&y, b + 4 * k, 4);
            if (isnan(x) || isnan(y)) { if (!(isnan(x) && isnan(y))) return 0; }
            else if (memcmp(&x, &y, 4) != 0) return 0;
        }
        return 1;
    }
    case K_F64: case K_DOUBLE_DOUBLE: {
        for (int k = 0; k < t->size / 8; k++) {
            double x, y; memcpy(&x, a + 8 * k, 8); memcpy(&y, b + 8 * k, 8);
            if (isnan(x) || isnan(y)) { if (!(isnan(x) && isnan(y))) return 0; }
            else if (memcmp(&x, &y, 8) != 0) return 0;
        }
        return 1;
    }
    case K_FLOAT_INT: { float_int x, y; memcpy(&x, a, sizeof x); memcpy(&y, b, sizeof y);
        return x.i == y.i && ((isnan(x.v) && isnan(y.v)) || memcmp(&x.v, &y.v, 4) == 0); }
    case K_DOUBLE_INT: { double_int x, y; memcpy(&x, a, sizeof x); memcpy(&y, b, sizeof y);
        return x.i == y.i && ((isnan(x.v) && isnan(y.v)) || memcmp(&x.v, &y.v, 8) == 0); }
    default: return memcmp(a, b, t->size) == 0;
    }
}

/* The reduction over ranks 0..size-1 of their contributions, in rank order. */
static void reference(const type_info *t, tether_op op, int size, int64_t count, unsigned char *out,
                      unsigned char *scratch) {
    make_contribution(t, op, 0, count, out);
    for (int r = 1; r < size; r++) {
        make_contribution(t, op, r, count, scratch);
        for (int64_t i = 0; i < count; i++) combine_element(t, op, out + i * t->size, scratch + i * t->size);
    }
}

#endif

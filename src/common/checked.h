/* Checked size arithmetic: the one way the library multiplies and adds sizes.
 *
 * Every entry point bounds what it is given by the limits of grouplin.h — each dimension in
 * [0, GLN_MAX_DIM], each tensor or buffer at most GLN_MAX_ELEMS elements — with the status
 * checks below (gln_check_dim / gln_check_shape / gln_check_elems), at the boundary, naming the
 * argument.  Byte sizes and other internal products of sizes go through gln_bytes or the
 * overflow predicates, so a size that would wrap is an error, never a small buffer.
 *
 * Why 2^56 for both limits: an element count <= 2^56 times an element size <= 8 is < 2^59, and
 * the padded scale grids of every quantized layout stay below 2^61 elements for any tensor
 * within the limits (tensor.c), so int64 and 64-bit size_t have room to spare; the sharded
 * weight group bounds its flat buffer the same way. */
#ifndef GLN_COMMON_CHECKED_H
#define GLN_COMMON_CHECKED_H

#include <stddef.h>
#include <stdint.h>

#include "grouplin.h"

/* *r = a·b or a + b; the return value is 1 when the exact result does not fit (*r is then
 * unspecified), 0 when it does.  The compilers' builtins where available. */
static inline int gln_mul_overflow_i64(int64_t a, int64_t b, int64_t *r) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_mul_overflow(a, b, r);
#else
    if (a != 0 && b != 0) {
        if (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a)
                  : (b > 0 ? a < INT64_MIN / b : a < INT64_MAX / b))
            return 1;
    }
    *r = a * b;
    return 0;
#endif
}

static inline int gln_add_overflow_i64(int64_t a, int64_t b, int64_t *r) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_add_overflow(a, b, r);
#else
    if (b > 0 ? a > INT64_MAX - b : a < INT64_MIN - b) return 1;
    *r = a + b;
    return 0;
#endif
}

static inline int gln_mul_overflow_size(size_t a, size_t b, size_t *r) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_mul_overflow(a, b, r);
#else
    if (b != 0 && a > SIZE_MAX / b) return 1;
    *r = a * b;
    return 0;
#endif
}

static inline int gln_add_overflow_size(size_t a, size_t b, size_t *r) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_add_overflow(a, b, r);
#else
    if (a > SIZE_MAX - b) return 1;
    *r = a + b;
    return 0;
#endif
}

/* Status checks; messages "<fn>: <name> ..." name the call and the argument. */

/* One dimension `name` (e.g. "cfg->in_features", "tokens"): in [0, GLN_MAX_DIM]. */
gln_status_t gln_check_dim(const char *fn, const char *name, int64_t v);
/* A tensor `name` of shape [rows, cols]: each dimension checked as "<name>->rows" /
 * "<name>->cols" (bare "rows" / "cols" when name is NULL), and rows·cols <= GLN_MAX_ELEMS.
 * *elems (may be NULL) receives rows·cols. */
gln_status_t gln_check_shape(const char *fn, const char *name, int64_t rows, int64_t cols,
                             int64_t *elems);
/* A buffer of a·b elements (a, b >= 0) that is not one tensor argument, described by `what`
 * (e.g. "cfg: num_experts x out_features x in_features"): a·b <= GLN_MAX_ELEMS.  *elems (may be
 * NULL) receives the product. */
gln_status_t gln_check_elems(const char *fn, const char *what, int64_t a, int64_t b, int64_t *elems);
/* *bytes = count·esize (count >= 0) when it fits a size_t; fails naming `what` otherwise. */
gln_status_t gln_bytes(const char *fn, const char *what, int64_t count, size_t esize, size_t *bytes);
/* *bytes = rows·cols·esize for an internal buffer of shape [rows, cols] (rows, cols >= 0). */
gln_status_t gln_shape_bytes(const char *fn, const char *what, int64_t rows, int64_t cols, size_t esize,
                             size_t *bytes);

#endif

/* Checked size arithmetic: the status checks of checked.h. */
#include "common/checked.h"

#include <stdio.h>

#include "common/error.h"

gln_status_t gln_check_dim(const char *fn, const char *name, int64_t v) {
    GLN_REQUIRE_ARG(v >= 0, "%s: %s %lld must be >= 0", fn, name, (long long)v);
    GLN_REQUIRE_ARG(v <= GLN_MAX_DIM, "%s: %s %lld exceeds GLN_MAX_DIM (2^56)", fn, name,
                    (long long)v);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_check_shape(const char *fn, const char *name, int64_t rows, int64_t cols,
                             int64_t *elems) {
    char rn[160], cn[160];
    snprintf(rn, sizeof rn, "%s%srows", name ? name : "", name ? "->" : "");
    snprintf(cn, sizeof cn, "%s%scols", name ? name : "", name ? "->" : "");
    GLN_TRY(gln_check_dim(fn, rn, rows));
    GLN_TRY(gln_check_dim(fn, cn, cols));
    int64_t n;
    GLN_REQUIRE_ARG(!gln_mul_overflow_i64(rows, cols, &n) && n <= GLN_MAX_ELEMS,
                    "%s: %s [%lld, %lld] exceeds 2^56 elements (GLN_MAX_ELEMS)", fn,
                    name ? name : "rows x cols", (long long)rows, (long long)cols);
    if (elems) *elems = n;
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_check_elems(const char *fn, const char *what, int64_t a, int64_t b, int64_t *elems) {
    int64_t n;
    GLN_REQUIRE_ARG(a >= 0 && b >= 0 && !gln_mul_overflow_i64(a, b, &n) && n <= GLN_MAX_ELEMS,
                    "%s: %s (%lld x %lld) exceeds 2^56 elements (GLN_MAX_ELEMS)", fn, what,
                    (long long)a, (long long)b);
    if (elems) *elems = n;
    return GLN_STATUS_SUCCESS;
}

/* count fits a size_t (always on 64-bit targets). */
static int fits_size(int64_t count) {
#if SIZE_MAX < INT64_MAX
    return count <= (int64_t)SIZE_MAX;
#else
    (void)count;
    return 1;
#endif
}

gln_status_t gln_bytes(const char *fn, const char *what, int64_t count, size_t esize, size_t *bytes) {
    GLN_REQUIRE_ARG(count >= 0 && fits_size(count) &&
                        !gln_mul_overflow_size((size_t)count, esize, bytes),
                    "%s: %s needs %lld x %zu bytes, more than this address space holds", fn, what,
                    (long long)count, esize);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_shape_bytes(const char *fn, const char *what, int64_t rows, int64_t cols, size_t esize,
                             size_t *bytes) {
    int64_t n;
    GLN_REQUIRE_ARG(rows >= 0 && cols >= 0 && !gln_mul_overflow_i64(rows, cols, &n),
                    "%s: %s [%lld, %lld] overflows int64", fn, what, (long long)rows, (long long)cols);
    return gln_bytes(fn, what, n, esize, bytes);
}

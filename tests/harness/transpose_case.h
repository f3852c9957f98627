/* One case of the transpose_batched backend slot (test_transpose.c: the CPU slot, and
 * test_cuda_transpose.c: the CUDA slot): a shape, random source bytes (NaN bit patterns too:
 * elements move as bits), destinations poisoned with 0xA5, and the checks of a result against
 * the source by hand. */
#ifndef GLN_TEST_TRANSPOSE_CASE_H
#define GLN_TEST_TRANSPOSE_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/transpose.h"

typedef struct gln_transpose_shape {
    size_t es;
    int64_t batch, rows, cols, src_pad, dst_pad, src_gap, dst_gap; /* ld = dim + pad; stride gaps */
} gln_transpose_shape_t;

typedef struct gln_transpose_case {
    const gln_transpose_shape_t *s;
    gln_transpose_t t; /* src set, dst NULL: the caller points it at want, got or a device copy */
    uint8_t *src, *want, *got; /* want and got poisoned with 0xA5 */
    size_t src_bytes, dst_bytes;
    char name[160];
} gln_transpose_case_t;

/* Returns 0 (the failure recorded) when the host buffers cannot be allocated; free the case
 * either way. */
int gln_transpose_case_new(gln_transpose_case_t *c, const gln_transpose_shape_t *s);
/* dst (a destination of c's transpose): one element equals its source element, and the
 * destination's padding is still poisoned. */
void gln_transpose_case_spot_check(const gln_transpose_case_t *c, const uint8_t *dst);
void gln_transpose_case_free(gln_transpose_case_t *c);

#endif

/* The transpose_batched backend slot (the sharded group's columnwise FP8 copies and transposed
 * 128x128 tile grids): the CUDA kernel (cuda_transpose.cu) equals the CPU reference
 * (gln_transpose_batched_ref) bit for bit, for 1- and 4-byte elements (NaN payloads included:
 * elements move as bits), bytes with 4-byte aligned rows (the word kernel, byte tails at the
 * edges) and without (the element kernel), shapes with partial tiles, single rows and columns, padded
 * leading dimensions and batch strides on both sides, and more tiles than one grid covers (the
 * grid-stride loop).  The destination is poisoned first and its padding must stay poisoned: the
 * slot writes the transposed elements and nothing else.  Without a CUDA device: skipped (77). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "backend/backend.h"
#include "backend/context.h"

static gln_context_t *cpu, *cuda;

typedef struct shape {
    size_t es;
    int64_t batch, rows, cols, src_pad, dst_pad, src_gap, dst_gap; /* ld = dim + pad; stride gaps */
} shape_t;

static void run_shape(const shape_t *s) {
    gln_transpose_t t = {s->es, s->batch, s->rows, s->cols, NULL, s->cols + s->src_pad, 0, NULL, s->rows + s->dst_pad, 0};
    t.src_stride = t.rows * t.src_ld + s->src_gap;
    t.dst_stride = t.cols * t.dst_ld + s->dst_gap;
    const size_t src_bytes = (size_t)(t.batch * t.src_stride) * s->es, dst_bytes = (size_t)(t.batch * t.dst_stride) * s->es;
    uint8_t *src = malloc(src_bytes), *want = malloc(dst_bytes), *got = malloc(dst_bytes);
    gln_rng_t r = gln_rng_seed((uint64_t)(s->rows * 131 + s->cols));
    for (size_t i = 0; i < src_bytes; i++) src[i] = (uint8_t)gln_rng_int(&r, 0, 255); /* NaN bit patterns too */
    memset(want, 0xA5, dst_bytes);
    t.src = src;
    t.dst = want;
    CHECK_OK(cpu->ops->transpose_batched(cpu, &t));
    void *sd = NULL, *dd = NULL;
    CHECK_OK(gln_malloc(cuda, src_bytes, &sd));
    CHECK_OK(gln_malloc(cuda, dst_bytes, &dd));
    if (sd && dd) {
        memset(got, 0xA5, dst_bytes);
        CHECK_OK(gln_memcpy(cuda, sd, src, src_bytes, GLN_COPY_HOST_TO_BACKEND));
        CHECK_OK(gln_memcpy(cuda, dd, got, dst_bytes, GLN_COPY_HOST_TO_BACKEND));
        gln_transpose_t d = t;
        d.src = sd;
        d.dst = dd;
        CHECK_OK(cuda->ops->transpose_batched(cuda, &d));
        CHECK_OK(gln_memcpy(cuda, got, dd, dst_bytes, GLN_COPY_BACKEND_TO_HOST));
        char what[160];
        snprintf(what, sizeof what, "transpose es %zu batch %lld [%lld, %lld] pads %lld/%lld gaps %lld/%lld", s->es,
                 (long long)s->batch, (long long)s->rows, (long long)s->cols, (long long)s->src_pad,
                 (long long)s->dst_pad, (long long)s->src_gap, (long long)s->dst_gap);
        CHECK(gln_check_bitwise(what, got, want, dst_bytes));
    }
    /* the reference itself: one element checked by hand, padding untouched */
    if (t.rows > 1 && t.cols > 2) {
        int64_t b = t.batch - 1, rr = t.rows - 1, cc = 2;
        CHECK(memcmp(want + (size_t)(b * t.dst_stride + cc * t.dst_ld + rr) * s->es,
                     src + (size_t)(b * t.src_stride + rr * t.src_ld + cc) * s->es, s->es) == 0);
    }
    if (s->dst_pad) CHECK(want[(size_t)(t.rows) * s->es] == 0xA5);
    gln_free(cuda, sd);
    gln_free(cuda, dd);
    free(src);
    free(want);
    free(got);
}

static void test_transpose_cuda_vs_cpu(void) {
    static const shape_t shapes[] = {
        {1, 5, 200, 160, 0, 0, 0, 0},       /* FP8 experts, partial tiles both ways */
        {1, 3, 200, 160, 0, 0, 56 * 160, 0}, /* padded experts (128x128 layout) */
        {1, 1, 1, 1000, 0, 0, 0, 0},
        {1, 2, 1000, 1, 0, 0, 0, 0},
        {1, 1, 32, 32, 0, 0, 0, 0},
        {4, 5, 2, 2, 2, 2, 0, 0},           /* tile grids: pitch pad4 on both sides */
        {4, 7, 3, 5, 3, 1, 0, 4},
        {4, 2, 33, 65, 7, 3, 5, 9},
        {1, 2, 198, 161, 3, 2, 0, 0},       /* word tiles with byte tails in both directions */
        {1, 5, 4096, 4096, 0, 0, 0, 0},     /* 20480 word tiles, more than one grid: the grid-stride loop */
        {1, 1, 4097, 3001, 0, 0, 0, 0},     /* unaligned rows: the element tile, 12126 tiles, grid-stride */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) run_shape(&shapes[i]);
}

GLN_TEST_CUDA_MAIN(cpu, cuda, GLN_CASE(test_transpose_cuda_vs_cpu))

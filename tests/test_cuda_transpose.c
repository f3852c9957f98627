/* The transpose_batched backend slot (the sharded group's columnwise FP8 copies and transposed
 * 128x128 tile grids): the CUDA kernel (cuda_transpose.cu) equals the CPU reference
 * (gln_transpose_batched_ref) bit for bit, for 1- and 4-byte elements (NaN payloads included:
 * elements move as bits), bytes with 4-byte aligned rows (the word kernel, byte tails at the
 * edges) and without (the element kernel), shapes with partial tiles, single rows and columns, padded
 * leading dimensions and batch strides on both sides, and more tiles than one grid covers (the
 * grid-stride loop).  The destination is poisoned first and its padding must stay poisoned: the
 * slot writes the transposed elements and nothing else.  Without a CUDA device: skipped (77). */
#include "harness.h"
#include "transpose_case.h"

#include "backend/backend.h"
#include "backend/context.h"

static gln_context_t *cpu, *cuda;

static void run_shape(const gln_transpose_shape_t *s) {
    gln_transpose_case_t c;
    void *sd = NULL, *dd = NULL;
    if (!gln_transpose_case_new(&c, s)) goto out;
    c.t.dst = c.want;
    CHECK_OK(cpu->ops->transpose_batched(cpu, &c.t));
    CHECK_OK(gln_malloc(cuda, c.src_bytes, &sd));
    CHECK_OK(gln_malloc(cuda, c.dst_bytes, &dd));
    if (sd && dd) {
        CHECK_OK(gln_memcpy(cuda, sd, c.src, c.src_bytes, GLN_COPY_HOST_TO_BACKEND));
        CHECK_OK(gln_memcpy(cuda, dd, c.got, c.dst_bytes, GLN_COPY_HOST_TO_BACKEND)); /* poisoned */
        gln_transpose_t d = c.t;
        d.src = sd;
        d.dst = dd;
        CHECK_OK(cuda->ops->transpose_batched(cuda, &d));
        CHECK_OK(gln_memcpy(cuda, c.got, dd, c.dst_bytes, GLN_COPY_BACKEND_TO_HOST));
        CHECK(gln_check_bitwise(c.name, c.got, c.want, c.dst_bytes));
    }
    gln_transpose_case_spot_check(&c, c.want); /* the reference itself */
out:
    gln_free(cuda, sd);
    gln_free(cuda, dd);
    gln_transpose_case_free(&c);
}

static void test_transpose_cuda_vs_cpu(void) {
    static const gln_transpose_shape_t shapes[] = {
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

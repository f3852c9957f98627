/* The device group plan (gln_cuda_plan_make with device-resident splits, cuda_plan.cu's
 * gln_group_plan_kernel) against the same sums made on the host here, for every scaling mode and
 * member counts from 1 to 600 and around the kernel's pass of 1024 members (one, two and three
 * passes): row offsets (clamped prefix sums of the
 * splits) and the rowwise / columnwise scale offsets (prefix sums of gln_member_scale_elems),
 * every entry exact.  Bad splits: the first bad member in member order is the one reported
 * (a negative split counts as 0, a sum past the rows is clamped to the rows), also when the bad
 * member is in a later pass or the splits are near INT64_MAX (the device sums saturate).
 *
 * Skips (exit 77) without a CUDA device. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#ifdef GLN_TEST_HAVE_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend.h"
#include "tensor/scale_layout.h"

static gln_context_t *g_cu, *g_cpu;

/* The plan of `num` device splits over `rows` rows compared with the host's sums; returns the
 * context's async error status. */
static gln_status_t plan_case(const int64_t *splits, int32_t num, int64_t rows, int64_t cols,
                              gln_scaling_mode_t mode) {
    const size_t n1 = (size_t)num + 1;
    int64_t *want = malloc(3 * n1 * sizeof *want), *got = malloc(3 * n1 * sizeof *got);
    int64_t sum = 0, sr = 0, sc = 0;
    want[0] = want[n1] = want[2 * n1] = 0;
    for (int32_t i = 0; i < num; i++) {
        int64_t m = splits[i] < 0 ? 0 : splits[i];
        if (m > rows - sum) m = rows - sum;
        want[i + 1] = sum += m;
        want[n1 + i + 1] = sr += gln_member_scale_elems(mode, m, cols, 0);
        want[2 * n1 + i + 1] = sc += gln_member_scale_elems(mode, m, cols, 1);
    }
    int64_t *d = NULL;
    CHECK_OK(gln_malloc(g_cu, (size_t)num * sizeof *d, (void **)&d));
    CHECK_OK(gln_memcpy(g_cu, d, splits, (size_t)num * sizeof *d, GLN_COPY_HOST_TO_BACKEND));
    gln_grouped_tensor_t g = {num, d, 1, gln_tensor_make(GLN_DTYPE_BF16, rows, cols, NULL)};
    gln_cuda_plan_t p;
    CHECK_OK(gln_cuda_plan_make(g_cu, &g, mode, &p, "test_cuda_plan"));
    memset(got, 0xA5, 3 * n1 * sizeof *got);
    CHECK_OK(gln_memcpy(g_cu, got, p.rows, n1 * sizeof *got, GLN_COPY_BACKEND_TO_HOST));
    CHECK_OK(gln_memcpy(g_cu, got + n1, p.srow, n1 * sizeof *got, GLN_COPY_BACKEND_TO_HOST));
    CHECK_OK(gln_memcpy(g_cu, got + 2 * n1, p.scol, n1 * sizeof *got, GLN_COPY_BACKEND_TO_HOST));
    static const char *names[3] = {"rows", "srow", "scol"};
    for (size_t i = 0; i < 3 * n1; i++)
        if (got[i] != want[i]) {
            CHECK_MSG(0, "plan num %d mode %d: %s[%zu] = %lld, want %lld", (int)num, (int)mode, names[i / n1],
                      i % n1, (long long)got[i], (long long)want[i]);
            break;
        }
    gln_cuda_plan_free(g_cu, &p);
    gln_status_t st = gln_context_async_error(g_cu);
    CHECK_OK(gln_free(g_cu, d));
    free(want);
    free(got);
    return st;
}

static void test_plan_sums(void) {
    static const int32_t nums[] = {1, 2, 3, 31, 32, 33, 64, 128, 255, 256, 257, 600, 1023, 1024, 1025, 2100};
    gln_rng_t r = gln_rng_seed(11);
    for (size_t n = 0; n < sizeof nums / sizeof nums[0]; n++) {
        const int32_t num = nums[n];
        int64_t *s = malloc((size_t)num * sizeof *s), rows = 0;
        for (int32_t i = 0; i < num; i++) rows += s[i] = gln_rng_int(&r, 0, 3) ? gln_rng_int(&r, 0, 300) : 0;
        for (int mode = GLN_SCALING_NONE; mode <= GLN_SCALING_BLOCK_2D; mode++)
            CHECK_OK(plan_case(s, num, rows + (mode & 1) * 7, 300, (gln_scaling_mode_t)mode));
        free(s);
    }
}

static void test_plan_bad_splits(void) {
    int64_t s[300];
    for (int i = 0; i < 300; i++) s[i] = 2;
    /* past the rows at member 270 (second tile) and negative at member 280: the first is reported */
    s[280] = -5;
    CHECK_STATUS(plan_case(s, 300, 2 * 270, 64, GLN_SCALING_MXFP8_1D), GLN_STATUS_INVALID_ARGUMENT, "past");
    /* negative first (member 3), past the rows later */
    s[3] = -1;
    CHECK_STATUS(plan_case(s, 300, 100, 64, GLN_SCALING_BLOCK_1D), GLN_STATUS_INVALID_ARGUMENT, "negative");
    CHECK_OK(gln_context_async_error(g_cu)); /* cleared */
    /* a later pass of the kernel: past the rows at member 1500, negative at 1800 */
    int64_t *t = malloc(2100 * sizeof *t);
    for (int i = 0; i < 2100; i++) t[i] = 1;
    t[1800] = -3;
    CHECK_STATUS(plan_case(t, 2100, 1500, 64, GLN_SCALING_BLOCK_2D), GLN_STATUS_INVALID_ARGUMENT, "past");
    /* negative at 1100 (second pass) before the sum passes the rows */
    t[1100] = -7;
    CHECK_STATUS(plan_case(t, 2100, 3000, 64, GLN_SCALING_MXFP8_1D), GLN_STATUS_INVALID_ARGUMENT, "negative");
    free(t);
    CHECK_OK(gln_context_async_error(g_cu));
    /* splits near INT64_MAX: clamped to the rows without overflowing the sums */
    const int64_t huge[4] = {3, INT64_MAX - 5, INT64_MAX - 5, 2};
    CHECK_STATUS(plan_case(huge, 4, 10, 256, GLN_SCALING_MXFP8_1D), GLN_STATUS_INVALID_ARGUMENT, "past");
    CHECK_OK(gln_context_async_error(g_cu));
}

#endif

GLN_TEST_CUDA_ONLY_MAIN(g_cpu, g_cu, GLN_CASE(test_plan_sums), GLN_CASE(test_plan_bad_splits))

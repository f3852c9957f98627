/* MXFP8 scales in the swizzled GEMM layout on CUDA against the CPU, bit for bit:
 *   - the standalone swizzle (gln_mxfp8_swizzle_scales on a CUDA context) of random compact grids,
 *     rowwise and columnwise, shapes 1x1, 3x33, 129x31, 130x257, 256x64, 0x5, 300x1;
 *   - the grouped MXFP8 quantize that writes both grids swizzled straight from the kernel
 *     (gln_cuda_grouped_quantize_mxfp8_swizzled) against the CPU's grouped quantize followed by
 *     the CPU swizzle of each member's compact grid at its offset: data, both grids (padding 0),
 *     and the bytes past the members (poison kept); fp32 / bf16 / fp16, E4M3 / E5M2, both E8M0
 *     rules, host and device splits, members of 0 / 1 / 3 / 129 / 130 / 257 rows, 1 member of 1 row,
 *     empty members only; 1 / 31 / 33 / 64 / 257 columns.
 *
 * Skips (exit 77) without a CUDA device. */
#include <math.h>
#include <stdlib.h>

#include "quant_check.h" /* g_cu, g_cpu, swizzled_case */

#ifdef GLN_TEST_HAVE_CUDA

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/* ---- the standalone swizzle ------------------------------------------------------------------ */

static void swizzle_case(int64_t rows, int64_t cols, int columnwise, gln_rng_t *rng) {
    const int64_t I = columnwise ? cols : rows, J = ceil_div(columnwise ? rows : cols, 32);
    const size_t n = (size_t)(round_up(I, 128) * round_up(J, 4));
    uint8_t *c = malloc(n + 1);
    for (size_t i = 0; i < n; i++) c[i] = (uint8_t)gln_rng_u64(rng);
    gln_twin_t in = gln_twin_input(g_cu, c, n, 0), out = gln_twin_new(g_cu, n, 0xA5u, 0);
    CHECK_OK(gln_mxfp8_swizzle_scales(g_cpu, rows, cols, columnwise, in.h, out.h));
    CHECK_OK(gln_mxfp8_swizzle_scales(g_cu, rows, cols, columnwise, in.d, out.d));
    CHECK_OK(gln_synchronize(g_cu));
    char what[96];
    snprintf(what, sizeof what, "swizzle [%lld, %lld] %s", (long long)rows, (long long)cols,
             columnwise ? "columnwise" : "rowwise");
    gln_twin_check(g_cu, &out, 1, what, "swizzled", NULL, NULL);
    gln_twin_free(g_cu, &in), gln_twin_free(g_cu, &out);
    free(c);
}

static void test_swizzle(void) {
    static const int64_t shapes[][2] = {{1, 1}, {3, 33}, {129, 31}, {130, 257}, {256, 64}, {0, 5}, {300, 1}};
    gln_rng_t rng = gln_rng_seed(3);
    for (size_t s = 0; s < COUNT(shapes); s++)
        for (int col = 0; col < 2; col++) swizzle_case(shapes[s][0], shapes[s][1], col, &rng);
}

/* ---- the quantize writing swizzled grids ------------------------------------------------------ */

static void *plain_input(gln_rng_t *rng, gln_dtype_t dt, int64_t rows, int64_t cols) {
    void *h = malloc((size_t)(rows * cols) * gln_dtype_size(dt) + 1);
    for (int64_t r = 0; r < rows; r++) {
        const double s = ldexp(1.0, (int)gln_rng_int(rng, -20, 20));
        for (int64_t j = 0; j < cols; j++) gln_store(h, dt, (size_t)(r * cols + j), gln_rng_normal(rng) * s);
    }
    return h;
}

/* The swizzled quantize (swizzled_case, quant_check.c) of plain inputs: normal values times a
 * per-row power of two. */
static void quant_case(const gln_quant_config_t *cfg, gln_dtype_t dt, int32_t num, const int64_t *splits,
                       int64_t cols, int dev_splits, gln_rng_t *rng) {
    void *h = plain_input(rng, dt, splits_sum(num, splits), cols);
    swizzled_case(cfg, dt, num, splits, cols, dev_splits, h, 0, 0);
    free(h);
}

static const int64_t k_sp_awkward[] = {0, 1, 3, 129, 130, 257};
static const int64_t k_sp_one[] = {1};
static const int64_t k_sp_empty[] = {0, 0, 0};

static void test_quantize_swizzled(void) {
    static const int64_t cols[] = {1, 31, 33, 64, 257};
    static const gln_dtype_t dts[] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};
    gln_rng_t rng = gln_rng_seed(9);
    int turn = 0;
    for (size_t d = 0; d < COUNT(dts); d++)
        for (size_t c = 0; c < COUNT(cols); c++, turn++) {
            gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
            cfg.mode = GLN_SCALING_MXFP8_1D, cfg.rowwise = 1, cfg.columnwise = 1;
            cfg.fp8_dtype = turn & 1 ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
            cfg.e8m0_rounding = turn & 2 ? GLN_E8M0_ROUND_FLOOR : GLN_E8M0_ROUND_UP;
            quant_case(&cfg, dts[d], 6, k_sp_awkward, cols[c], turn & 1, &rng);
            quant_case(&cfg, dts[d], 1, k_sp_one, cols[c], !(turn & 1), &rng);
            quant_case(&cfg, dts[d], 3, k_sp_empty, cols[c], turn & 1, &rng);
        }
}

#endif

GLN_TEST_CUDA_ONLY_MAIN(g_cpu, g_cu, GLN_CASE(test_swizzle), GLN_CASE(test_quantize_swizzled))

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
#include <stdlib.h>
#include <string.h>

#include "device_twin.h"
#include "harness.h"

#ifdef GLN_TEST_HAVE_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend.h"

static gln_context_t *g_cu, *g_cpu;

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

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

static void *make_input(gln_rng_t *rng, gln_dtype_t dt, int64_t rows, int64_t cols) {
    void *h = malloc((size_t)(rows * cols) * gln_dtype_size(dt) + 1);
    for (int64_t r = 0; r < rows; r++) {
        const double s = ldexp(1.0, (int)gln_rng_int(rng, -20, 20));
        for (int64_t j = 0; j < cols; j++) gln_store(h, dt, (size_t)(r * cols + j), gln_rng_normal(rng) * s);
    }
    return h;
}

static void quant_case(const gln_quant_config_t *cfg, gln_dtype_t dt, int32_t num, const int64_t *splits,
                       int64_t cols, int dev_splits, gln_rng_t *rng) {
    int64_t rows = 0;
    for (int32_t i = 0; i < num; i++) rows += splits[i];
    const size_t nd = (size_t)(rows * cols);
    void *h = make_input(rng, dt, rows, cols);
    gln_twin_t x = gln_twin_input(g_cu, h, nd * gln_dtype_size(dt), 0);
    gln_twin_t sp = gln_twin_input(g_cu, splits, (size_t)num * sizeof(int64_t), 0);
    int64_t sr = 0, sc = 0;
    CHECK_OK(gln_grouped_scale_bound(cfg->mode, num, rows, cols, &sr, &sc));
    gln_twin_t q = gln_twin_new(g_cu, nd, 0xA5u, 0), qt = gln_twin_new(g_cu, nd, 0xA5u, 0);
    gln_twin_t s = gln_twin_new(g_cu, (size_t)sr, 0xEEu, 0), cs = gln_twin_new(g_cu, (size_t)sc, 0xEEu, 0);
    /* the CPU: compact grids into scratch, then each member's grid swizzled at its offset */
    uint8_t *cs_compact = malloc((size_t)sr + 1), *cc_compact = malloc((size_t)sc + 1);
    memcpy(cs_compact, s.h, (size_t)sr), memcpy(cc_compact, cs.h, (size_t)sc);
    gln_grouped_tensor_t hin = {num, splits, 0, gln_tensor_make(dt, rows, cols, x.h)};
    gln_grouped_tensor_t hout = {num, splits, 0,
                                 {cfg->fp8_dtype, rows, cols, q.h, cfg->mode, cs_compact, qt.h, cc_compact, NULL, NULL}};
    CHECK_OK(gln_grouped_quantize(g_cpu, cfg, &hin, &hout));
    int64_t *ro = malloc((size_t)(num + 1) * sizeof *ro), *co = malloc((size_t)(num + 1) * sizeof *co);
    CHECK_OK(gln_grouped_scale_offsets(cfg->mode, num, splits, cols, ro, co));
    for (int32_t i = 0; i < num; i++) {
        CHECK_OK(gln_mxfp8_swizzle_scales(g_cpu, splits[i], cols, 0, cs_compact + ro[i], (uint8_t *)s.h + ro[i]));
        CHECK_OK(gln_mxfp8_swizzle_scales(g_cpu, splits[i], cols, 1, cc_compact + co[i], (uint8_t *)cs.h + co[i]));
    }
    /* CUDA: one call */
    gln_grouped_tensor_t din = {num, dev_splits ? (const int64_t *)sp.d : splits, dev_splits,
                                gln_tensor_make(dt, rows, cols, x.d)};
    gln_grouped_tensor_t dout = din;
    const gln_tensor_t td = {cfg->fp8_dtype, rows, cols, q.d, cfg->mode, s.d, qt.d, cs.d, NULL, NULL};
    dout.packed = td;
    CHECK_OK(gln_cuda_grouped_quantize_mxfp8_swizzled(g_cu, cfg, &din, &dout));
    CHECK_OK(gln_synchronize(g_cu));
    CHECK_OK(gln_context_async_error(g_cu));
    char what[200];
    snprintf(what, sizeof what, "swizzled quantize %s %s %s, %d members, %lld cols, %s splits", gln_dtype_name(dt),
             gln_dtype_name(cfg->fp8_dtype), cfg->e8m0_rounding == GLN_E8M0_ROUND_FLOOR ? "floor" : "up", (int)num,
             (long long)cols, dev_splits ? "device" : "host");
    gln_twin_check(g_cu, &q, 1, what, "data", NULL, NULL);
    gln_twin_check(g_cu, &qt, 1, what, "col_data", NULL, NULL);
    gln_twin_check(g_cu, &s, 1, what, "scale_inv (swizzled)", NULL, NULL);
    gln_twin_check(g_cu, &cs, 1, what, "col_scale_inv (swizzled)", NULL, NULL);
    gln_twin_t *all[] = {&x, &sp, &q, &qt, &s, &cs};
    for (size_t k = 0; k < COUNT(all); k++) gln_twin_free(g_cu, all[k]);
    free(ro), free(co), free(cs_compact), free(cc_compact), free(h);
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

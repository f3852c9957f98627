/* The CUDA MXFP8 quantizer (cuda_quant_mxfp8.cu: mxq_tma_kernel, mxq_general_kernel) against the
 * CPU reference, bit for bit: both copies, both E8M0 grids (padding included), compact and
 * swizzled, and every byte the quantizer must leave alone.
 *
 * Cases: every 16-bit input pattern, single tensors and groups of awkward shapes (cols 8 / 40 /
 * 136 / 264: a row's last chunk half full, 8-byte stores; 128 / 256 / 392 / 1032; members of 0,
 * 1, 31, 33, 127, 128, 129, 300 rows), NaN / Inf, E4M3 / E5M2, both E8M0 rules, both NaN rules,
 * one or both copies, host and device splits, trailing packed rows, compact and swizzled grids.
 * They run on the TMA kernel (bf16 / fp16, 16-byte aligned buffers: every twin here, checked
 * through gln_cuda_quant_last_kernel), on the general kernel through misaligned outputs and an
 * FP32 input (which the TMA kernel refuses), and with every grid capped at 1 and 3 blocks
 * (GLN_CUDA_QUANT_GRID) so that a block walks many tiles, members and turns of its stage ring.
 * test_cuda_grouped_quant.c has the grouped dispatch's shared cases (graph, bad splits).
 *
 * Skips (exit 77) without a CUDA device. */
#define _DEFAULT_SOURCE /* setenv */
#include <stdlib.h>
#include <string.h>

#include "quant_check.h"

#ifdef GLN_TEST_HAVE_CUDA
#include "backend/cuda/cuda_backend.h" /* gln_cuda_grouped_quantize_mxfp8_swizzled, gln_cuda_quant_last_kernel */

static const gln_dtype_t k_mx_dt[] = {GLN_DTYPE_BF16, GLN_DTYPE_FP16};

/* The general kernel's cases instead of the TMA kernel's: misaligned outputs (1) or input (2). */
static int g_general;

/* The last call ran on `kernel` (mxq_tma_kernel on the aligned twins, else mxq_general_kernel). */
static void expect_kernel(const char *what) {
    const char *want = g_general ? "mxq_general_kernel" : "mxq_tma_kernel", *ran = gln_cuda_quant_last_kernel();
    CHECK_MSG(ran && strcmp(ran, want) == 0, "%s ran on %s, want %s", what, ran ? ran : "(none)", want);
}


/* MXFP8 of a given host input [rows, cols] on both backends. */
static void mx_input_case(const gln_quant_config_t *cfg, gln_dtype_t dt, const void *h, int64_t rows, int64_t cols,
                           const char *label) {
    gln_quant_layout_t lay;
    CHECK_OK(gln_quant_layout(cfg->mode, cfg->fp8_dtype, rows, cols, &lay));
    const size_t skew_in = g_general == 2 ? gln_dtype_size(dt) : 0, skew_out = g_general == 1 ? 4 : 0;
    gln_twin_t x = gln_twin_input(g_cu, h, (size_t)rows * (size_t)cols * gln_dtype_size(dt), skew_in);
    qout_t o = qout_new(cfg, lay.data_bytes, lay.scale_bytes, lay.col_scale_bytes, 1, NULL, NULL, skew_out);
    gln_tensor_t hin = gln_tensor_make(dt, rows, cols, x.h), din = gln_tensor_make(dt, rows, cols, x.d);
    gln_tensor_t hq = qout_tensor(cfg, &o, rows, cols, 0), dq = qout_tensor(cfg, &o, rows, cols, 1);
    CHECK_OK(gln_quantize(g_cpu, cfg, &hin, &hq));
    CHECK_OK(gln_quantize(g_cu, cfg, &din, &dq));
    char what[300], c[160];
    cfg_name(cfg, dt, c, sizeof c);
    snprintf(what, sizeof what, "%s %lldx%lld %s", label, (long long)rows, (long long)cols, c);
    expect_kernel(what);
    layout_t L;
    layout_set(&L, cfg->mode, 1, &rows, cols);
    qout_check(&o, &L, what);
    qout_free(&o);
    gln_twin_free(g_cu, &x);
}

/* Every bf16 / fp16 bit pattern (NaN payloads and signs, ±Inf, subnormals) in rows of 1024 and of
 * 40 columns (half-full last chunks), consecutive patterns sharing a block; the NaN rule off,
 * since negative NaNs meet NaN multipliers under it (neg_nan_ok). */
static void test_mx_sweep(void) {
    const int64_t rows40 = 65536 / 40 + 1;
    uint16_t *b = malloc((size_t)rows40 * 40 * 2);
    for (uint32_t i = 0; i < (uint32_t)(rows40 * 40); i++) b[i] = (uint16_t)i;
    for (size_t d = 0; d < COUNT(k_mx_dt); d++)
        for (int m = M_MX_UP; m <= M_MX_FLOOR; m++)
            for (int e5 = 0; e5 < 2; e5++) {
                const gln_quant_config_t cfg = make_cfg(m, 3, e5 ? 4 : 0);
                mx_input_case(&cfg, k_mx_dt[d], b, 64, 1024, "MXFP8 sweep of every 16-bit input");
                mx_input_case(&cfg, k_mx_dt[d], b, rows40, 40, "MXFP8 sweep of every 16-bit input");
            }
    free(b);
}

static void test_mx_single(void) {
    static const int64_t shapes[][2] = {{1, 8},    {3, 40},   {129, 24}, {130, 264}, {31, 136},
                                        {33, 8},   {300, 392}, {128, 128}, {127, 1032}, {257, 64}};
    gln_rng_t rng = gln_rng_seed(81);
    for (size_t s = 0; s < COUNT(shapes); s++)
        for (int m = M_MX_UP; m <= M_MX_FLOOR; m++)
            for (int copies = 1; copies <= 3; copies++)
                for (int v = 0; v < 8; v++) {
                    const gln_quant_config_t cfg = make_cfg(m, copies, v);
                    const gln_dtype_t dt = k_mx_dt[(s + (size_t)copies + (size_t)v) % COUNT(k_mx_dt)];
                    single_case(&cfg, dt, shapes[s][0], shapes[s][1], v >= 2, 0, g_general == 2 ? gln_dtype_size(dt) : 0,
                                g_general == 1 ? 4 : 0, &rng);
                    expect_kernel("MXFP8 one tensor");
                }
}

static const int64_t k_mx_sp_awkward[] = {0, 1, 31, 33, 127, 129, 300};
static const int64_t k_mx_sp_tiles[] = {128, 0, 129, 1, 256};
static const int64_t k_mx_sp_one[] = {300};
static const int64_t k_mx_sp_empty[] = {0, 0};
static const splits_set_t k_mx_sets[] = {
    {7, k_mx_sp_awkward}, {5, k_mx_sp_tiles}, {1, k_mx_sp_one}, {2, k_mx_sp_empty}};

static void test_mx_grouped(void) {
    static const int64_t cols[] = {8, 40, 136, 264, 128, 256};
    gln_rng_t rng = gln_rng_seed(82);
    for (size_t s = 0; s < COUNT(k_mx_sets); s++)
        for (size_t c = 0; c < COUNT(cols); c++)
            for (int m = M_MX_UP; m <= M_MX_FLOOR; m++)
                for (int copies = 1; copies <= 3; copies++)
                    for (int v = 0; v < 8; v += 1 + (int)((s + c + (size_t)copies) % 2)) {
                        const gln_quant_config_t cfg = make_cfg(m, copies, v);
                        const int64_t sum = splits_sum(k_mx_sets[s].num, k_mx_sets[s].splits);
                        gcase_t g = {&cfg, k_mx_dt[(s + c + (size_t)v) % COUNT(k_mx_dt)], k_mx_sets[s].num,
                                     k_mx_sets[s].splits, sum + (v & 1) * 5, cols[c]};
                        grouped_case(&g, (v + copies + m) % 3, v >= 2, 0, &rng);
                        if (g.rows > 0) expect_kernel("MXFP8 grouped"); /* an empty pass runs nothing */
                    }
}

/* The grouped quantize with both grids swizzled by the kernel against the CPU's compact grids
 * swizzled member by member (gln_mxfp8_swizzle_scales at each member's offset). */
static void mx_swizzled_case(const gln_quant_config_t *cfg, gln_dtype_t dt, int32_t num, const int64_t *splits,
                              int64_t cols, int dev_splits, gln_rng_t *rng) {
    const int64_t rows = splits_sum(num, splits);
    const size_t nd = (size_t)rows * (size_t)cols;
    void *h = make_input(rng, dt, rows, cols, 1, neg_nan_ok(cfg));
    const size_t skew_in = g_general == 2 ? gln_dtype_size(dt) : 0, skew_out = g_general == 1 ? 4 : 0;
    gln_twin_t x = gln_twin_input(g_cu, h, nd * gln_dtype_size(dt), skew_in);
    gln_twin_t sp = gln_twin_input(g_cu, splits, (size_t)num * sizeof(int64_t), 0);
    int64_t sr = 0, sc = 0;
    CHECK_OK(gln_grouped_scale_bound(cfg->mode, num, rows, cols, &sr, &sc));
    gln_twin_t q = gln_twin_new(g_cu, nd, DATA_POISON, skew_out), qt = gln_twin_new(g_cu, nd, DATA_POISON, skew_out);
    gln_twin_t s = gln_twin_new(g_cu, (size_t)sr, SCALE_POISON, 0), cs = gln_twin_new(g_cu, (size_t)sc, SCALE_POISON, 0);
    uint8_t *s_compact = malloc((size_t)sr + 1), *cs_compact = malloc((size_t)sc + 1);
    memcpy(s_compact, s.h, (size_t)sr), memcpy(cs_compact, cs.h, (size_t)sc);
    gln_grouped_tensor_t hin = {num, splits, 0, gln_tensor_make(dt, rows, cols, x.h)};
    gln_grouped_tensor_t hout = {num, splits, 0,
                                 {cfg->fp8_dtype, rows, cols, q.h, cfg->mode, s_compact, qt.h, cs_compact, NULL, NULL}};
    CHECK_OK(gln_grouped_quantize(g_cpu, cfg, &hin, &hout));
    int64_t *ro = malloc((size_t)(num + 1) * sizeof *ro), *co = malloc((size_t)(num + 1) * sizeof *co);
    CHECK_OK(gln_grouped_scale_offsets(cfg->mode, num, splits, cols, ro, co));
    for (int32_t i = 0; i < num; i++) {
        CHECK_OK(gln_mxfp8_swizzle_scales(g_cpu, splits[i], cols, 0, s_compact + ro[i], (uint8_t *)s.h + ro[i]));
        CHECK_OK(gln_mxfp8_swizzle_scales(g_cpu, splits[i], cols, 1, cs_compact + co[i], (uint8_t *)cs.h + co[i]));
    }
    gln_grouped_tensor_t din = {num, dev_splits ? (const int64_t *)sp.d : splits, dev_splits,
                                gln_tensor_make(dt, rows, cols, x.d)};
    gln_grouped_tensor_t dout = din;
    const gln_tensor_t td = {cfg->fp8_dtype, rows, cols, q.d, cfg->mode, s.d, qt.d, cs.d, NULL, NULL};
    dout.packed = td;
    CHECK_OK(gln_cuda_grouped_quantize_mxfp8_swizzled(g_cu, cfg, &din, &dout));
    if (rows > 0) expect_kernel("MXFP8 swizzled grids");
    CHECK_OK(gln_synchronize(g_cu));
    CHECK_OK(gln_context_async_error(g_cu));
    char what[300], c[160];
    cfg_name(cfg, dt, c, sizeof c);
    snprintf(what, sizeof what, "swizzled grids %s, %d members, %lld cols, %s splits", c, (int)num, (long long)cols,
             dev_splits ? "device" : "host");
    gln_twin_check(g_cu, &q, 1, what, "data", NULL, NULL);
    gln_twin_check(g_cu, &qt, 1, what, "col_data", NULL, NULL);
    gln_twin_check(g_cu, &s, 1, what, "scale_inv (swizzled)", NULL, NULL);
    gln_twin_check(g_cu, &cs, 1, what, "col_scale_inv (swizzled)", NULL, NULL);
    gln_twin_t *all[] = {&x, &sp, &q, &qt, &s, &cs};
    for (size_t k = 0; k < COUNT(all); k++) gln_twin_free(g_cu, all[k]);
    free(ro), free(co), free(s_compact), free(cs_compact), free(h);
}

static void test_mx_swizzled(void) {
    static const int64_t cols[] = {8, 40, 136, 264, 256};
    gln_rng_t rng = gln_rng_seed(83);
    int turn = 0;
    for (size_t c = 0; c < COUNT(cols); c++)
        for (size_t s = 0; s < COUNT(k_mx_sets); s++, turn++) {
            const int m = turn & 1 ? M_MX_FLOOR : M_MX_UP;
            const gln_quant_config_t cfg = make_cfg(m, 3, (turn * 3) & 7);
            mx_swizzled_case(&cfg, k_mx_dt[turn % 2], k_mx_sets[s].num, k_mx_sets[s].splits, cols[c], (turn >> 1) & 1,
                              &rng);
        }
}

/* The general kernel on the same cases: misaligned outputs (scalar stores), then a misaligned
 * input (scalar loads), then FP32 input, which only it takes. */
static void test_mx_general(void) {
    for (g_general = 1; g_general <= 2; g_general++) {
        test_mx_sweep();
        test_mx_single();
        test_mx_swizzled();
    }
    g_general = 2;
    g_misalign_input = 1;
    test_mx_grouped();
    g_misalign_input = 0;
    g_general = 1;
    gln_rng_t rng = gln_rng_seed(84);
    for (int m = M_MX_UP; m <= M_MX_FLOOR; m++)
        for (int v = 0; v < 8; v++) {
            const gln_quant_config_t cfg = make_cfg(m, 1 + v % 3, v);
            single_case(&cfg, GLN_DTYPE_FP32, 130, 264, v >= 2, 0, 0, 0, &rng);
            expect_kernel("MXFP8 fp32");
        }
    g_general = 0;
}

/* Every grid capped at 1 and 3 blocks (read at every call): a block walks many tiles and members
 * and turns its stage ring many times. */
static void test_mx_grid_cap(void) {
    static const char *const blocks[] = {"1", "3"};
    for (size_t k = 0; k < COUNT(blocks); k++) {
        CHECK(setenv("GLN_CUDA_QUANT_GRID", blocks[k], 1) == 0);
        test_mx_single();
        test_mx_grouped();
        test_mx_swizzled();
        g_general = 2;
        g_misalign_input = 1;
        test_mx_grouped();
        g_misalign_input = 0;
        g_general = 0;
        CHECK(unsetenv("GLN_CUDA_QUANT_GRID") == 0);
    }
}

#endif

GLN_TEST_CUDA_ONLY_MAIN(g_cpu, g_cu, GLN_CASE(test_mx_sweep), GLN_CASE(test_mx_single), GLN_CASE(test_mx_grouped),
                        GLN_CASE(test_mx_swizzled), GLN_CASE(test_mx_general), GLN_CASE(test_mx_grid_cap))

/* FP8 block scaling (the DeepSeek recipe) on the CUDA grouped path: CUTLASS's block-scaled
 * grouped GEMMs (cuda_grouped_blockwise.h) against the CPU backend, through gln_grouped_gemm.
 *
 * Operands: bf16 random normals whose rows differ in magnitude by up to 37x (so the 1×128 and
 * 128×128 blocks get different scales), quantized by the CPU backend to E4M3 with FP32 scales or
 * power-of-two scales (both through the same kernel): x / dy 1×128 (rowwise for fprop / dgrad,
 * columnwise along the tokens for wgrad), W 128×128 (rowwise for fprop, the transposed copy for
 * dgrad).  Cases: fprop TN (with and without a bf16 bias per expert), dgrad NN, wgrad NT into fp32
 * main_grad; with and without accumulation; host and device splits; experts of 1, 5, 17, 129 rows,
 * empty experts, every expert empty, one expert holding every row, a mix of wgrad experts whose
 * row count is / is not a multiple of 16 (read in place / from zero-padded copies), 70 experts (more than
 * one setup chunk), K and N multiples of 128 and not.  Outputs NaN-poisoned (old values when
 * accumulating or past the experts' rows), followed by guard bytes; an empty expert's wgrad must
 * be exactly 0 (or untouched when accumulating); the rows past the experts' keep their bytes.
 * A CUDA-graph case captures an FP32-scale fprop and wgrad with device splits and replays them
 * with other splits.  Every call must be taken by the block-scaled kernels (when CUTLASS is built);
 * fprop / dgrad also run on the 2×1-cluster kernel the heuristic keeps for large experts
 * (GLN_CUTLASS_BLOCKWISE=cluster).
 *
 * Skips (exit 77) without a CUDA device. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_compare.h" /* the GEMM tolerance */
#include "device_twin.h"
#include "grouped_operands.h" /* the quantized operands (host and device twins) */
#include "harness.h"
#include "tensor/tensor.h"

#ifdef GLN_TEST_HAVE_CUDA
#include <cuda_runtime.h>
/* The block-scaled dispatch (internal, cuda_grouped_blockwise.c): did its kernels take the call? */
gln_status_t gln_cuda_grouped_gemm_blockwise(gln_context_t *ctx, const gln_grouped_gemm_args_t *args, int *handled);
#endif

/* ---- tolerances -------------------------------------------------------------------------------
 * Both backends multiply the same FP8 values and apply the same FP32 block scales to FP32 partial
 * sums per 128-wide K block, in a different order (CPU: OpenBLAS on raw values per block, or on
 * exactly dequantized values for power-of-two scales), and round the output once:
 *   |cuda - cpu| <= OUT_ULPS · ulp(cpu) + (2 · (k + 2) · u + FP8_ACC_REL) · S,
 * S = Σ|a·b| over the dequantized operands (+ |bias| + |old D|), u = 2^-24: the per-tensor FP8
 * GEMM tolerance of tests/harness/cuda_compare.h (GLN_CMP_GEMM_*), whose FP8_ACC_REL covers the
 * FP8 tensor cores' reduced-precision accumulation inside each 128-block as well. */

#define MAXE 80

static gln_context_t *g_cu, *g_cpu;

/* ---- device buffers: device twins (tests/harness/device_twin.h), guard after the device copy ---- */

typedef gln_twin_t dbuf_t;

/* `bytes` on the device holding init (zeros when NULL), the twin's guard after them. */
static dbuf_t dev_new(const void *init, size_t bytes) {
    return init ? gln_twin_input(g_cu, init, bytes, 0) : gln_twin_new(g_cu, bytes, 0, 0);
}

static void dev_put(dbuf_t b, const void *src) {
    if (b.d && b.bytes) gln_twin_set(g_cu, &b, src);
}

static void dev_free(dbuf_t *b) { gln_twin_free(g_cu, b); }

/* ---- quantized operands, made by the CPU backend (gln_gop_qoperand_t) ---------------------- */

/* bf16 normals, every third row 37x larger (different block scales), rows past `valid` zero. */
static void *values_new(gln_rng_t *rng, int64_t rows, int64_t cols, int64_t valid) {
    void *h = calloc((size_t)(rows * cols) + 1, 2);
    for (int64_t r = 0; r < valid; r++)
        for (int64_t c = 0; c < cols; c++)
            gln_store(h, GLN_DTYPE_BF16, (size_t)(r * cols + c), gln_rng_normal(rng) * (r % 3 == 0 ? 37.0 : 1.0));
    return h;
}

static gln_quant_config_t qconfig(gln_scaling_mode_t mode, int pow2) {
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.mode = mode;
    cfg.fp8_dtype = GLN_DTYPE_FP8_E4M3;
    cfg.rowwise = cfg.columnwise = 1;
    cfg.power_2_scale = pow2;
    return cfg;
}

/* A weight [rows, cols], 128×128 blocks. */
static gln_gop_qoperand_t qweight_new(gln_rng_t *rng, int64_t rows, int64_t cols, int pow2) {
    gln_quant_layout_t lay;
    CHECK_OK(gln_quant_layout(GLN_SCALING_BLOCK_2D, GLN_DTYPE_FP8_E4M3, rows, cols, &lay));
    const size_t bytes[4] = {lay.data_bytes, lay.col_data_bytes, lay.scale_bytes, lay.col_scale_bytes};
    gln_gop_qoperand_t q = gln_gop_qoperand_new(GLN_SCALING_BLOCK_2D, rows, cols, bytes);
    void *v = values_new(rng, rows, cols, rows);
    const gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, rows, cols, v);
    const gln_quant_config_t cfg = qconfig(GLN_SCALING_BLOCK_2D, pow2);
    CHECK_OK(gln_quantize(g_cpu, &cfg, &in, &q.h));
    free(v);
    gln_gop_qoperand_upload(g_cu, &q);
    return q;
}

/* A grouped tensor of `rows` packed rows, 1×128 blocks rowwise and columnwise. */
static gln_gop_qoperand_t qgrouped_new(gln_rng_t *rng, int num, const int64_t *splits, int64_t rows, int64_t cols,
                                       int pow2) {
    int64_t ro[MAXE + 1], co[MAXE + 1], total = 0;
    for (int i = 0; i < num; i++) total += splits[i];
    CHECK_OK(gln_grouped_scale_offsets(GLN_SCALING_BLOCK_1D, num, splits, cols, ro, co));
    const size_t n = (size_t)(rows * cols);
    const size_t bytes[4] = {n, n, (size_t)ro[num] * 4, (size_t)co[num] * 4};
    gln_gop_qoperand_t q = gln_gop_qoperand_new(GLN_SCALING_BLOCK_1D, rows, cols, bytes);
    void *v = values_new(rng, rows, cols, total);
    const gln_grouped_tensor_t in = {num, splits, 0, gln_tensor_make(GLN_DTYPE_BF16, rows, cols, v)};
    gln_grouped_tensor_t out = {num, splits, 0, q.h};
    const gln_quant_config_t cfg = qconfig(GLN_SCALING_BLOCK_1D, pow2);
    CHECK_OK(gln_grouped_quantize(g_cpu, &cfg, &in, &out));
    free(v);
    gln_gop_qoperand_upload(g_cu, &q);
    return q;
}

/* |dequantized values| [rows, cols] (doubles) of a grouped operand's rowwise or columnwise copy,
 * member by member (rows past the members: 0). */
static double *grouped_abs(const gln_gop_qoperand_t *q, int num, const int64_t *splits, int columnwise) {
    const int64_t rows = q->h.rows, cols = q->h.cols;
    double *out = calloc((size_t)(rows * cols) + 1, sizeof(double));
    const gln_grouped_tensor_t g = {num, splits, 0, q->h};
    int64_t r0 = 0;
    for (int i = 0; i < num; i++) {
        gln_tensor_t m;
        CHECK_OK(gln_grouped_member(&g, i, &m));
        float *f = calloc((size_t)(splits[i] * cols) + 1, sizeof(float));
        gln_tensor_t o = gln_tensor_make(GLN_DTYPE_FP32, splits[i], cols, f);
        if (splits[i]) CHECK_OK(gln_dequantize(g_cpu, &m, columnwise, &o));
        for (int64_t e = 0; e < splits[i] * cols; e++) out[r0 * cols + e] = fabs((double)f[e]);
        free(f);
        r0 += splits[i];
    }
    return out;
}

static double *tensor_abs(const gln_tensor_t *t, int columnwise) {
    const size_t n = (size_t)(t->rows * t->cols);
    float *f = calloc(n + 1, sizeof(float));
    gln_tensor_t o = gln_tensor_make(GLN_DTYPE_FP32, t->rows, t->cols, f);
    CHECK_OK(gln_dequantize(g_cpu, t, columnwise, &o));
    double *out = calloc(n + 1, sizeof(double));
    for (size_t e = 0; e < n; e++) out[e] = fabs((double)f[e]);
    free(f);
    return out;
}

/* One output element: within the tolerance above (S given), NaN only where the CPU has NaN. */
static int close_enough(double got, double ref, gln_dtype_t dtype, int64_t k, double s) {
    if (isnan(got) || isnan(ref)) return isnan(got) && isnan(ref);
    const double tol = GLN_CMP_GEMM_OUT_ULPS * gln_cmp_ulp(ref, dtype) +
                       (2.0 * ((double)k + GLN_CMP_GEMM_SUM_TERMS_EXTRA) * GLN_CMP_U32 + GLN_CMP_GEMM_FP8_ACC_REL) * s;
    return fabs(got - ref) <= tol;
}

/* ---- one case ------------------------------------------------------------------------------ */

typedef struct bcase {
    gln_gemm_layout_t layout;
    int num;
    const int64_t *splits;
    int64_t kin, kout;
    int pow2, dev_splits, accumulate, bias;
} bcase_t;

static void describe(const bcase_t *c, char *buf, size_t n) {
    int len = snprintf(buf, n, "%s E%d kin %lld kout %lld %s scales%s acc=%d bias=%d splits {",
                       c->layout == GLN_LAYOUT_TN ? "TN" : c->layout == GLN_LAYOUT_NN ? "NN" : "NT", c->num,
                       (long long)c->kin, (long long)c->kout, c->pow2 ? "pow2" : "fp32",
                       c->dev_splits ? " device splits" : "", c->accumulate, c->bias);
    for (int i = 0; i < c->num && len > 0 && (size_t)len < n; i++)
        len += snprintf(buf + len, n - (size_t)len, "%s%lld", i ? "," : "", (long long)c->splits[i]);
    if (len > 0 && (size_t)len < n) snprintf(buf + len, n - (size_t)len, "}");
}

/* Run the CUDA call, through the block-scaled entry point (which must take it when CUTLASS is
 * built) or gln_grouped_gemm. */
static void run_cuda(const gln_grouped_gemm_args_t *da, int direct, const char *what) {
#if defined(GLN_TEST_HAVE_CUDA)
    if (direct) {
        int handled = -1;
        CHECK_OK(gln_cuda_grouped_gemm_blockwise(g_cu, da, &handled));
#if defined(GLN_TEST_HAVE_CUTLASS)
        CHECK_MSG(handled == 1, "%s: the block-scaled kernels did not take the call", what);
#else
        CHECK_MSG(handled == 0, "%s: built without CUTLASS but a block-scaled kernel ran", what);
        if (!handled) CHECK_OK(gln_grouped_gemm(g_cu, da));
#endif
        return;
    }
#endif
    (void)direct, (void)what;
    CHECK_OK(gln_grouped_gemm(g_cu, da));
}

/* fprop TN: y [rows, kout] = x · W_iᵀ (+ bias_i); dgrad NN: dx [rows, kin] = dy · W_i. */
static void case_tn_nn(gln_rng_t *rng, const bcase_t *c, const int64_t *sp_d, int64_t total, int64_t rows,
                       const char *what) {
    const int tn = c->layout == GLN_LAYOUT_TN;
    const int64_t k = tn ? c->kin : c->kout, n = tn ? c->kout : c->kin;
    gln_gop_qoperand_t w[MAXE], b = qgrouped_new(rng, c->num, c->splits, rows, k, c->pow2);
    gln_tensor_t hw[MAXE], cw[MAXE], hbias[MAXE], cbias[MAXE];
    void *bias_h[MAXE];
    dbuf_t bias_d[MAXE];
    for (int i = 0; i < c->num; i++) {
        w[i] = qweight_new(rng, c->kout, c->kin, c->pow2);
        hw[i] = w[i].h, cw[i] = w[i].d;
        bias_h[i] = values_new(rng, 1, c->kout, 1);
        bias_d[i] = dev_new(bias_h[i], (size_t)c->kout * 2);
        hbias[i] = gln_tensor_make(GLN_DTYPE_BF16, 1, c->kout, bias_h[i]);
        cbias[i] = gln_tensor_make(GLN_DTYPE_BF16, 1, c->kout, bias_d[i].d);
    }
    /* D: old values everywhere; the experts' rows NaN unless accumulating */
    const size_t dn = (size_t)(rows * n), dbytes = dn * 2;
    void *old = values_new(rng, rows, n, rows), *want = malloc(dbytes + 1);
    if (!c->accumulate) gln_poison(old, GLN_DTYPE_BF16, (size_t)(total * n));
    memcpy(want, old, dbytes);
    dbuf_t dd = dev_new(old, dbytes);
    gln_grouped_tensor_t hb = {c->num, c->splits, 0, b.h}, cb = {c->num, sp_d, c->dev_splits, b.d};
    gln_grouped_tensor_t hd = {c->num, c->splits, 0, gln_tensor_make(GLN_DTYPE_BF16, rows, n, want)};
    gln_grouped_tensor_t cd = {c->num, sp_d, c->dev_splits, gln_tensor_make(GLN_DTYPE_BF16, rows, n, dd.d)};
    gln_grouped_gemm_args_t ha = GLN_GROUPED_GEMM_ARGS_INIT, da = GLN_GROUPED_GEMM_ARGS_INIT;
    ha.layout = da.layout = c->layout;
    ha.accumulate = da.accumulate = c->accumulate;
    ha.block_scales_pow2 = da.block_scales_pow2 = c->pow2;
    ha.a_list = hw, ha.b = &hb, ha.d_grouped = &hd;
    da.a_list = cw, da.b = &cb, da.d_grouped = &cd;
    if (c->bias) ha.bias_list = hbias, da.bias_list = cbias;
    CHECK_OK(gln_grouped_gemm(g_cpu, &ha));
    /* S per element from the dequantized operands */
    double *ab = grouped_abs(&b, c->num, c->splits, 0);
    /* gln_grouped_gemm, the block-scaled entry (cooperative), and its 2×1-cluster kernel */
    for (int way = 0; way < 3; way++) {
        static const char *ways[] = {"gln_grouped_gemm", "block-scaled entry", "block-scaled entry, 2x1 clusters"};
        char w2[600];
        snprintf(w2, sizeof w2, "%s [%s]", what, ways[way]);
        dev_put(dd, old);
        if (way == 2) setenv("GLN_CUTLASS_BLOCKWISE", "cluster", 1);
        run_cuda(&da, way > 0, w2);
        unsetenv("GLN_CUTLASS_BLOCKWISE");
        unsigned char *got = gln_twin_fetch(g_cu, &dd, w2);
        /* rows past the experts': untouched */
        gln_check_bitwise(w2, got + (size_t)(total * n) * 2, (const char *)old + (size_t)(total * n) * 2,
                          (size_t)((rows - total) * n) * 2);
        int bad = 0;
        int64_t r0 = 0;
        for (int i = 0; i < c->num; i++) {
            double *aw = tensor_abs(&hw[i], !tn);
            for (int64_t r = r0; r < r0 + c->splits[i]; r++)
                for (int64_t j = 0; j < n; j++) {
                    double s = 0.0;
                    for (int64_t t = 0; t < k; t++) s += ab[r * k + t] * (tn ? aw[j * k + t] : aw[t * n + j]);
                    if (c->bias) s += fabs(gln_load(bias_h[i], GLN_DTYPE_BF16, (size_t)j));
                    if (c->accumulate) s += fabs(gln_load(old, GLN_DTYPE_BF16, (size_t)(r * n + j)));
                    const double g = gln_load(got, GLN_DTYPE_BF16, (size_t)(r * n + j));
                    const double ref = gln_load(want, GLN_DTYPE_BF16, (size_t)(r * n + j));
                    if (!close_enough(g, ref, GLN_DTYPE_BF16, k, s) && bad++ < 5)
                        CHECK_MSG(0, "%s: D[%lld,%lld] (expert %d) cuda %.9g cpu %.9g S %.3g", w2, (long long)r,
                                  (long long)j, i, g, ref, s);
                }
            free(aw);
            r0 += c->splits[i];
        }
        if (bad > 5) CHECK_MSG(0, "%s: %d elements out of tolerance", w2, bad);
        free(got);
    }
    free(ab), free(old), free(want);
    dev_free(&dd);
    gln_gop_qoperand_free(g_cu, &b);
    for (int i = 0; i < c->num; i++) gln_gop_qoperand_free(g_cu, &w[i]), free(bias_h[i]), dev_free(&bias_d[i]);
}

/* wgrad NT: dW_i [kout, kin] = dy_iᵀ · x_i into fp32. */
static void case_nt(gln_rng_t *rng, const bcase_t *c, const int64_t *sp_d, int64_t rows, const char *what) {
    const int64_t m = c->kout, n = c->kin, dn = m * n;
    gln_gop_qoperand_t x = qgrouped_new(rng, c->num, c->splits, rows, n, c->pow2);
    gln_gop_qoperand_t dy = qgrouped_new(rng, c->num, c->splits, rows, m, c->pow2);
    gln_tensor_t hd[MAXE], cd[MAXE];
    float *old[MAXE], *want[MAXE];
    dbuf_t dd[MAXE];
    for (int i = 0; i < c->num; i++) {
        old[i] = malloc((size_t)dn * 4 + 4), want[i] = malloc((size_t)dn * 4 + 4);
        for (int64_t e = 0; e < dn; e++) old[i][e] = c->accumulate ? (float)gln_rng_normal(rng) : NAN;
        memcpy(want[i], old[i], (size_t)dn * 4);
        dd[i] = dev_new(old[i], (size_t)dn * 4);
        hd[i] = gln_tensor_make(GLN_DTYPE_FP32, m, n, want[i]);
        cd[i] = gln_tensor_make(GLN_DTYPE_FP32, m, n, dd[i].d);
    }
    gln_grouped_tensor_t hx = {c->num, c->splits, 0, x.h}, cx = {c->num, sp_d, c->dev_splits, x.d};
    gln_grouped_tensor_t hdy = {c->num, c->splits, 0, dy.h}, cdy = {c->num, sp_d, c->dev_splits, dy.d};
    gln_grouped_gemm_args_t ha = GLN_GROUPED_GEMM_ARGS_INIT, da = GLN_GROUPED_GEMM_ARGS_INIT;
    ha.layout = da.layout = GLN_LAYOUT_NT;
    ha.accumulate = da.accumulate = c->accumulate;
    ha.block_scales_pow2 = da.block_scales_pow2 = c->pow2;
    ha.a_grouped = &hx, ha.b = &hdy, ha.d_list = hd;
    da.a_grouped = &cx, da.b = &cdy, da.d_list = cd;
    CHECK_OK(gln_grouped_gemm(g_cpu, &ha));
    double *ax = grouped_abs(&x, c->num, c->splits, 1), *ady = grouped_abs(&dy, c->num, c->splits, 1);
    for (int direct = 0; direct < 2; direct++) {
        char w2[600];
        snprintf(w2, sizeof w2, "%s [%s]", what, direct ? "block-scaled entry" : "gln_grouped_gemm");
        for (int i = 0; i < c->num; i++) dev_put(dd[i], old[i]);
        run_cuda(&da, direct, w2);
        int64_t r0 = 0;
        for (int i = 0; i < c->num; i++) {
            float *got = gln_twin_fetch(g_cu, &dd[i], w2);
            int bad = 0;
            for (int64_t a = 0; a < m; a++)
                for (int64_t b = 0; b < n; b++) {
                    const size_t e = (size_t)(a * n + b);
                    if (c->splits[i] == 0) { /* exactly 0, or the old value */
                        const float expect = c->accumulate ? old[i][e] : 0.0f;
                        if (memcmp(&got[e], &expect, 4) && bad++ < 5)
                            CHECK_MSG(0, "%s: empty expert %d dW[%lld,%lld] = %.9g, expected %.9g", w2, i, (long long)a,
                                      (long long)b, got[e], expect);
                        continue;
                    }
                    double s = c->accumulate ? fabs((double)old[i][e]) : 0.0;
                    for (int64_t r = r0; r < r0 + c->splits[i]; r++) s += ady[r * m + a] * ax[r * n + b];
                    if (!close_enough(got[e], want[i][e], GLN_DTYPE_FP32, c->splits[i], s) && bad++ < 5)
                        CHECK_MSG(0, "%s: expert %d dW[%lld,%lld] cuda %.9g cpu %.9g S %.3g", w2, i, (long long)a,
                                  (long long)b, got[e], want[i][e], s);
                }
            if (bad > 5) CHECK_MSG(0, "%s: expert %d: %d elements out of tolerance", w2, i, bad);
            free(got);
            r0 += c->splits[i];
        }
    }
    free(ax), free(ady);
    for (int i = 0; i < c->num; i++) free(old[i]), free(want[i]), dev_free(&dd[i]);
    gln_gop_qoperand_free(g_cu, &x), gln_gop_qoperand_free(g_cu, &dy);
}

static void run_case(gln_rng_t *rng, const bcase_t *c) {
    char what[700];
    describe(c, what, sizeof what);
    int64_t total = 0;
    for (int i = 0; i < c->num; i++) total += c->splits[i];
    const int64_t rows = total + 3; /* packed rows past the experts' */
    dbuf_t ds = dev_new(c->splits, (size_t)c->num * sizeof(int64_t));
    const int64_t *sp_d = c->dev_splits ? (const int64_t *)ds.d : c->splits;
    if (c->layout == GLN_LAYOUT_NT) case_nt(rng, c, sp_d, rows, what);
    else case_tn_nn(rng, c, sp_d, total, rows, what);
    dev_free(&ds);
}

/* ---- the matrix ---------------------------------------------------------------------------- */

static const int64_t s_odd[] = {1, 5, 17, 129};
static const int64_t s_one[] = {0, 0, 300, 0};
static const int64_t s_none[] = {0, 0, 0, 0};
static const int64_t s_wgrad[] = {16, 0, 48, 144, 5, 130}; /* in place and zero-padded */

static void test_matrix(void) {
    gln_rng_t rng = gln_rng_seed(1651);
    int64_t s70[70];
    for (int i = 0; i < 70; i++) s70[i] = i % 7 == 2 ? 0 : gln_rng_int(&rng, 1, 40);
    const struct {
        int num;
        const int64_t *splits;
        int64_t kin, kout;
    } shapes[] = {{4, s_odd, 256, 384}, {4, s_one, 128, 256}, {4, s_none, 128, 128},
                  {6, s_wgrad, 384, 128}, {4, s_odd, 208, 144}, /* K, N not multiples of 128 */
                  {70, s70, 128, 256}};
    const gln_gemm_layout_t layouts[] = {GLN_LAYOUT_TN, GLN_LAYOUT_NN, GLN_LAYOUT_NT};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t l = 0; l < 3; l++)
            for (int v = 0; v < 8; v++) {
                bcase_t c = {layouts[l], shapes[s].num, shapes[s].splits, shapes[s].kin, shapes[s].kout,
                             v & 1, (v >> 1) & 1, (v >> 2) & 1, 0};
                c.bias = layouts[l] == GLN_LAYOUT_TN && (v == 0 || v == 5); /* two bias variants */
                if (shapes[s].num > 8 && v != 0 && v != 7) continue;      /* the big one: two variants */
                run_case(&rng, &c);
            }
}

#ifdef GLN_TEST_HAVE_CUDA
/* Zeroed device buffers of a grouped block-quantized tensor large enough for any splits. */
static gln_tensor_t device_bound_new(int num, int64_t rows, int64_t cols, dbuf_t d[4]) {
    int64_t se_r, se_c;
    CHECK_OK(gln_grouped_scale_bound(GLN_SCALING_BLOCK_1D, num, rows, cols, &se_r, &se_c));
    const size_t n = (size_t)(rows * cols);
    const size_t bytes[4] = {n, n, (size_t)se_r * 4, (size_t)se_c * 4};
    for (int k = 0; k < 4; k++) d[k] = dev_new(NULL, bytes[k]);
    gln_tensor_t t = gln_tensor_make(GLN_DTYPE_FP8_E4M3, rows, cols, d[0].d);
    t.scaling = GLN_SCALING_BLOCK_1D, t.col_data = d[1].d, t.scale_inv = d[2].d, t.col_scale_inv = d[3].d;
    return t;
}

static void upload_into(gln_context_t *cu, const gln_gop_qoperand_t *q, dbuf_t d[4]) {
    for (int k = 0; k < 4; k++)
        if (q->db[k].bytes) CHECK_OK(gln_memcpy(cu, d[k].d, q->hb[k], q->db[k].bytes, GLN_COPY_HOST_TO_BACKEND));
}

/* Capture an FP32-scale fprop and wgrad (fp32, accumulating) with device splits on a caller's
 * stream; replay after writing other splits and operands quantized for them into the same
 * buffers: each replay matches the CPU within the tolerance (no host sync inside, or the capture
 * would fail). */
static void test_graph_capture(void) {
    gln_rng_t rng = gln_rng_seed(1652);
    enum { E = 4 };
    const int64_t kin = 256, kout = 128, rows = 200;
    const int64_t sets[3][E] = {{5, 0, 17, 1}, {0, 0, 129, 0}, {48, 48, 48, 48}};
    cudaStream_t user = NULL;
    CHECK(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking) == cudaSuccess);
    gln_context_t *cu = gln_test_cuda_context(user);
    if (!cu) return;
    gln_context_t *saved = g_cu;
    g_cu = cu;
    gln_gop_qoperand_t w[E];
    gln_tensor_t hw[E], cw[E];
    for (int i = 0; i < E; i++) {
        w[i] = qweight_new(&rng, kout, kin, 0);
        hw[i] = w[i].h, cw[i] = w[i].d;
    }
    dbuf_t xd[4], dyd[4];
    const gln_tensor_t xt = device_bound_new(E, rows, kin, xd), dyt = device_bound_new(E, rows, kout, dyd);
    dbuf_t yd = dev_new(NULL, (size_t)(rows * kout) * 2), dwd[E];
    gln_tensor_t cdw[E], hdw[E];
    float *dw_old = malloc((size_t)(kout * kin) * 4), *dw_want[E];
    for (int64_t e = 0; e < kout * kin; e++) dw_old[e] = (float)gln_rng_normal(&rng);
    for (int i = 0; i < E; i++) {
        dwd[i] = dev_new(dw_old, (size_t)(kout * kin) * 4);
        cdw[i] = gln_tensor_make(GLN_DTYPE_FP32, kout, kin, dwd[i].d);
        dw_want[i] = malloc((size_t)(kout * kin) * 4);
        hdw[i] = gln_tensor_make(GLN_DTYPE_FP32, kout, kin, dw_want[i]);
    }
    dbuf_t ds = dev_new(sets[0], sizeof sets[0]);
    gln_grouped_tensor_t cx = {E, ds.d, 1, xt}, cdy = {E, ds.d, 1, dyt};
    gln_grouped_tensor_t cy = {E, ds.d, 1, gln_tensor_make(GLN_DTYPE_BF16, rows, kout, yd.d)};
    gln_grouped_gemm_args_t fa = GLN_GROUPED_GEMM_ARGS_INIT, wa = GLN_GROUPED_GEMM_ARGS_INIT;
    fa.layout = GLN_LAYOUT_TN, fa.a_list = cw, fa.b = &cx, fa.d_grouped = &cy;
    wa.layout = GLN_LAYOUT_NT, wa.a_grouped = &cx, wa.b = &cdy, wa.d_list = cdw, wa.accumulate = 1;
    CHECK_OK(gln_synchronize(cu));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamBeginCapture(user, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    CHECK_OK(gln_grouped_gemm(cu, &fa));
    CHECK_OK(gln_grouped_gemm(cu, &wa));
    CHECK(cudaStreamEndCapture(user, &graph) == cudaSuccess);
    CHECK(graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    for (int s = 0; s < 3 && exec; s++) {
        gln_gop_qoperand_t x = qgrouped_new(&rng, E, sets[s], rows, kin, 0);
        gln_gop_qoperand_t dy = qgrouped_new(&rng, E, sets[s], rows, kout, 0);
        upload_into(cu, &x, xd), upload_into(cu, &dy, dyd);
        dev_put(ds, sets[s]);
        for (int i = 0; i < E; i++) dev_put(dwd[i], dw_old), memcpy(dw_want[i], dw_old, (size_t)(kout * kin) * 4);
        CHECK(cudaGraphLaunch(exec, user) == cudaSuccess);
        CHECK_OK(gln_synchronize(cu));
        int64_t total = 0;
        for (int i = 0; i < E; i++) total += sets[s][i];
        void *ywant = calloc((size_t)(rows * kout) + 1, 2);
        gln_grouped_tensor_t hx = {E, sets[s], 0, x.h}, hdy = {E, sets[s], 0, dy.h};
        gln_grouped_tensor_t hy = {E, sets[s], 0, gln_tensor_make(GLN_DTYPE_BF16, rows, kout, ywant)};
        gln_grouped_gemm_args_t hf = fa, hwg = wa;
        hf.a_list = hw, hf.b = &hx, hf.d_grouped = &hy;
        hwg.a_grouped = &hx, hwg.b = &hdy, hwg.d_list = hdw;
        CHECK_OK(gln_grouped_gemm(g_cpu, &hf));
        CHECK_OK(gln_grouped_gemm(g_cpu, &hwg));
        char what[80];
        snprintf(what, sizeof what, "graph replay %d", s);
        /* loose check of the replay (the matrix checks the element bounds): relative to the
         * largest |y| / |dW|, GLN_CMP_GEMM_FP8_ACC_REL-sized differences, plus two bf16 ulps (2^-6) for y */
        unsigned char *y = gln_twin_fetch(g_cu, &yd, what);
        double ymax = 0.0, yerr = 0.0;
        for (int64_t e = 0; e < total * kout; e++) {
            const double r = gln_load(ywant, GLN_DTYPE_BF16, (size_t)e), g = gln_load(y, GLN_DTYPE_BF16, (size_t)e);
            ymax = fmax(ymax, fabs(r));
            yerr = isnan(g) ? INFINITY : fmax(yerr, fabs(g - r));
        }
        CHECK_MSG(yerr <= (1.0 / 64.0 + 8.0 * GLN_CMP_GEMM_FP8_ACC_REL) * ymax,
                  "%s: fprop max error %.3g (max |y| %.3g)", what, yerr, ymax);
        for (int i = 0; i < E; i++) {
            float *dw = gln_twin_fetch(g_cu, &dwd[i], what);
            double dmax = 0.0, derr = 0.0;
            for (int64_t e = 0; e < kout * kin; e++) {
                dmax = fmax(dmax, fabs(dw_want[i][e]));
                derr = isnan(dw[e]) ? INFINITY : fmax(derr, fabs((double)dw[e] - dw_want[i][e]));
            }
            CHECK_MSG(derr <= 8.0 * GLN_CMP_GEMM_FP8_ACC_REL * dmax, "%s: wgrad expert %d max error %.3g (max %.3g)",
                      what, i, derr, dmax);
            free(dw);
        }
        free(y), free(ywant);
        gln_gop_qoperand_free(g_cu, &x), gln_gop_qoperand_free(g_cu, &dy);
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    CHECK_OK(gln_context_async_error(cu));
    dev_free(&ds), dev_free(&yd);
    for (int k = 0; k < 4; k++) dev_free(&xd[k]), dev_free(&dyd[k]);
    for (int i = 0; i < E; i++) gln_gop_qoperand_free(g_cu, &w[i]), dev_free(&dwd[i]), free(dw_want[i]);
    free(dw_old);
    g_cu = saved;
    gln_context_destroy(cu);
    cudaStreamDestroy(user);
}
#endif

static const gln_test_case_t k_cases[] = {
    GLN_CASE(test_matrix),
#ifdef GLN_TEST_HAVE_CUDA
    GLN_CASE(test_graph_capture),
#endif
};

int main(int argc, char **argv) {
    return gln_test_cuda_main(argc, argv, &g_cpu, &g_cu, k_cases, sizeof k_cases / sizeof k_cases[0]);
}

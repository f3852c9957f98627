/* The CUDA backend against the CPU backend (the reference), through the public API: amax, cast,
 * quantize / dequantize and grouped quantize (the GEMMs: test_cuda_backend_gemm.c and
 * test_cuda_backend_grouped.c).
 *
 * Skips (exit 77) when CUDA is not compiled in or no device is present.  Otherwise every op runs
 * on awkward shapes (1, 5, 17, 129 rows; 48 and 4096 columns; NaN, Inf and zero blocks:
 * tests/harness/cuda_compare.h) and is compared with the same call on a CPU context:
 *   - quantize (TENSOR current / delayed, MXFP8 both roundings): data, transposed / columnwise
 *     data, every scale byte (padding included), amax and scale bit for bit;
 *   - every amax under both values of amax_nan_propagate (gln_amax_ex, and the quantize /
 *     grouped quantize cases with NaN inputs), so the CUDA NaN rule mirrors the CPU one;
 *   - dequantize, cast, amax: bit for bit (same FP32 operations in the same order);
 *   - quantize BLOCK_1D / BLOCK_2D (power-of-two and FP32 scales) and grouped quantize (TENSOR
 *     current / delayed with per-member scales, MXFP8, BLOCK_*, empty members, host and device
 *     splits): every byte, bit for bit;
 *   - argument and device-side errors (device splits that do not add up or wrap).
 * Device outputs are poisoned (NaN / 0xA5) before each run and followed by guard bytes that must
 * survive (device_twin.h). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_compare.h"
#include "device_twin.h"
#include "harness.h"
#include "numerics/numerics.h"
#include "tensor/tensor.h"

static gln_context_t *g_cu, *g_cpu;

/* ---- device buffers (guarded twins, device_twin.h) ---------------------------------------- */

/* Device copy of n splits. */
static gln_twin_t splits_on_dev_n(const int64_t *splits, int n) { return gln_twin_upload(g_cu, splits, (size_t)n * sizeof(int64_t)); }

/* ---- amax ---------------------------------------------------------------------------------- */

/* gln_amax_ex on both backends under `nanp` (amax_nan_propagate); returns the CPU's result. */
static float amax_case(gln_dtype_t dtype, int64_t rows, int64_t cols, void *h, int nanp, const char *what) {
    gln_tensor_t xh = gln_tensor_make(dtype, rows, cols, h);
    float ref = -1.0f, got_host = -2.0f;
    CHECK_OK(gln_amax_ex(g_cpu, &xh, nanp, &ref));
    gln_twin_t xd = gln_twin_upload(g_cu, h, (size_t)rows * (size_t)cols * gln_dtype_size(dtype));
    gln_tensor_t xt = gln_tensor_make(dtype, rows, cols, xd.d);
    /* host destination */
    CHECK_OK(gln_amax_ex(g_cu, &xt, nanp, &got_host));
    CHECK_MSG(gln_cmp_f32_bits(got_host) == gln_cmp_f32_bits(ref), "amax %s nanp %d %s [%lld,%lld] host: cuda %08x cpu %08x", what,
              nanp, gln_dtype_name(dtype), (long long)rows, (long long)cols, gln_cmp_f32_bits(got_host), gln_cmp_f32_bits(ref));
    /* device destination */
    float poison = gln_cmp_f32_from_bits(0x7FBADBADu);
    gln_twin_t ad = gln_twin_upload(g_cu, &poison, sizeof(float));
    CHECK_OK(gln_amax_ex(g_cu, &xt, nanp, ad.d));
    gln_twin_expect(g_cu, &ad, &ref, "amax (device destination)");
    gln_twin_free(g_cu, &ad);
    gln_twin_free(g_cu, &xd);
    return ref;
}

static void test_amax(void) {
    gln_rng_t rng = gln_rng_seed(11);
    for (size_t d = 0; d < GLN_CMP_COUNT(gln_cmp_hp); d++)
        for (size_t r = 0; r < GLN_CMP_COUNT(gln_cmp_rows); r++)
            for (size_t c = 0; c < GLN_CMP_COUNT(gln_cmp_cols); c++)
                for (int sp = 0; sp < 2; sp++) {
                    void *h = gln_cmp_make_hp(&rng, gln_cmp_hp[d], gln_cmp_rows[r], gln_cmp_cols[c], 3.0, sp ? 2 : 0);
                    for (int nanp = 0; nanp < 2; nanp++)
                        amax_case(gln_cmp_hp[d], gln_cmp_rows[r], gln_cmp_cols[c], h, nanp, sp ? "specials" : "normal");
                    free(h);
                }
    /* Two NaNs with different payloads: ignored (max 3), or under propagation the first one (by
     * index), sign cleared, must win on both backends. */
    const int64_t n = 129 * 48;
    float *x = calloc((size_t)n, sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 7) - 3.0f;
    x[4000] = gln_cmp_f32_from_bits(0x7FC00001u);
    x[2000] = gln_cmp_f32_from_bits(0xFFC00002u);
    CHECK(amax_case(GLN_DTYPE_FP32, 129, 48, x, 0, "two NaNs") == 3.0f);
    CHECK(gln_cmp_f32_bits(amax_case(GLN_DTYPE_FP32, 129, 48, x, 1, "two NaNs")) == 0x7FC00002u);
    /* All zeros (with -0): +0. */
    for (int64_t i = 0; i < n; i++) x[i] = i % 2 ? -0.0f : 0.0f;
    for (int nanp = 0; nanp < 2; nanp++) {
        amax_case(GLN_DTYPE_FP32, 129, 48, x, nanp, "zeros");
        amax_case(GLN_DTYPE_FP32, 0, 48, x, nanp, "empty");
    }
    free(x);
}

/* ---- cast ---------------------------------------------------------------------------------- */

static void test_cast(void) {
    gln_rng_t rng = gln_rng_seed(12);
    for (size_t di = 0; di < GLN_CMP_COUNT(gln_cmp_hp); di++)
        for (size_t dO = 0; dO < GLN_CMP_COUNT(gln_cmp_hp); dO++)
            for (size_t r = 0; r < GLN_CMP_COUNT(gln_cmp_rows); r++) {
                const gln_dtype_t ti = gln_cmp_hp[di], to = gln_cmp_hp[dO];
                const int64_t rows = gln_cmp_rows[r], cols = 48;
                const size_t n = (size_t)rows * (size_t)cols;
                void *h = gln_cmp_make_hp(&rng, ti, rows, cols, 1000.0, 2);
                /* fp32 sources also get values that only a correct RNE handles (ties, subnormals) */
                if (ti == GLN_DTYPE_FP32 && n > 40) {
                    ((float *)h)[33] = gln_cmp_f32_from_bits(0x3F808000u); /* bf16 tie */
                    ((float *)h)[34] = 65520.0f;                   /* fp16 overflow by RNE */
                    ((float *)h)[35] = 1e-7f;                      /* fp16 subnormal */
                }
                void *ref = calloc(n, gln_dtype_size(to));
                gln_tensor_t in_h = gln_tensor_make(ti, rows, cols, h), out_h = gln_tensor_make(to, rows, cols, ref);
                CHECK_OK(gln_cast(g_cpu, &in_h, &out_h));
                gln_twin_t in_d = gln_twin_upload(g_cu, h, n * gln_dtype_size(ti)), out_d = gln_twin_upload(g_cu, NULL, n * gln_dtype_size(to));
                gln_tensor_t in_t = gln_tensor_make(ti, rows, cols, in_d.d), out_t = gln_tensor_make(to, rows, cols, out_d.d);
                CHECK_OK(gln_cast(g_cu, &in_t, &out_t));
                gln_twin_expect(g_cu, &out_d, ref, "cast");
                gln_twin_free(g_cu, &in_d);
                gln_twin_free(g_cu, &out_d);
                free(ref);
                free(h);
            }
}

/* ---- quantize / dequantize ----------------------------------------------------------------- */

/* Buffers of one quantized tensor: host (CPU backend) and device twins. */
typedef struct qpair {
    gln_quant_layout_t lay;
    gln_tensor_t h, d;
    gln_twin_t data, col, s, cs, amax, scale;
} qpair_t;

static void *host_poison(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    memset(p, 0xFF, bytes);
    return p;
}

static void qpair_init(qpair_t *q, const gln_quant_config_t *cfg, int64_t rows, int64_t cols, float amax0,
                       float scale0) {
    memset(q, 0, sizeof *q);
    CHECK_OK(gln_quant_layout(cfg->mode, cfg->fp8_dtype, rows, cols, &q->lay));
    gln_tensor_t t = {cfg->fp8_dtype, rows, cols, NULL, cfg->mode, NULL, NULL, NULL, NULL, NULL};
    q->h = t, q->d = t;
    if (cfg->rowwise) {
        q->h.data = host_poison(q->lay.data_bytes), q->h.scale_inv = host_poison(q->lay.scale_bytes);
        q->data = gln_twin_upload(g_cu, NULL, q->lay.data_bytes), q->s = gln_twin_upload(g_cu, NULL, q->lay.scale_bytes);
        q->d.data = q->data.d, q->d.scale_inv = q->s.d;
    }
    if (cfg->columnwise) {
        q->h.col_data = host_poison(q->lay.col_data_bytes), q->h.col_scale_inv = host_poison(q->lay.col_scale_bytes);
        q->col = gln_twin_upload(g_cu, NULL, q->lay.col_data_bytes), q->cs = gln_twin_upload(g_cu, NULL, q->lay.col_scale_bytes);
        q->d.col_data = q->col.d, q->d.col_scale_inv = q->cs.d;
    }
    if (cfg->mode == GLN_SCALING_TENSOR) {
        q->h.amax = malloc(sizeof(float)), q->h.scale = malloc(sizeof(float));
        *q->h.amax = amax0, *q->h.scale = scale0;
        q->amax = gln_twin_upload(g_cu, &amax0, sizeof(float)), q->scale = gln_twin_upload(g_cu, &scale0, sizeof(float));
        q->d.amax = q->amax.d, q->d.scale = q->scale.d;
    }
}

static void qpair_compare(qpair_t *q, const char *what) {
    char name[256];
#define CMP(buf, host, label)                                                                      \
    if ((buf).d) {                                                                                 \
        snprintf(name, sizeof name, "%s %s", what, label);                                        \
        gln_twin_expect(g_cu, &(buf), (host), name);                                              \
    }
    CMP(q->data, q->h.data, "data");
    CMP(q->col, q->h.col_data, "col_data");
    CMP(q->s, q->h.scale_inv, "scale_inv");
    CMP(q->cs, q->h.col_scale_inv, "col_scale_inv");
    CMP(q->amax, q->h.amax, "amax");
    CMP(q->scale, q->h.scale, "scale");
#undef CMP
}

static void qpair_free(qpair_t *q) {
    free(q->h.data), free(q->h.col_data), free(q->h.scale_inv), free(q->h.col_scale_inv);
    free(q->h.amax), free(q->h.scale);
    gln_twin_free(g_cu, &q->data), gln_twin_free(g_cu, &q->col), gln_twin_free(g_cu, &q->s), gln_twin_free(g_cu, &q->cs);
    gln_twin_free(g_cu, &q->amax), gln_twin_free(g_cu, &q->scale);
}

/* Dequantize each present copy on both backends into `dtype`, compare bit for bit. */
static void dequant_compare(qpair_t *q, gln_dtype_t dtype, const char *what) {
    const size_t n = (size_t)q->h.rows * (size_t)q->h.cols, bytes = n * gln_dtype_size(dtype);
    for (int colw = 0; colw < 2; colw++) {
        if (!(colw ? q->h.col_data : q->h.data)) continue;
        void *ref = host_poison(bytes);
        gln_tensor_t oh = gln_tensor_make(dtype, q->h.rows, q->h.cols, ref);
        CHECK_OK(gln_dequantize(g_cpu, &q->h, colw, &oh));
        gln_twin_t od = gln_twin_upload(g_cu, NULL, bytes);
        gln_tensor_t ot = gln_tensor_make(dtype, q->h.rows, q->h.cols, od.d);
        CHECK_OK(gln_dequantize(g_cu, &q->d, colw, &ot));
        char name[300];
        snprintf(name, sizeof name, "%s dequantize(%s) -> %s", what, colw ? "columnwise" : "rowwise",
                 gln_dtype_name(dtype));
        gln_twin_expect(g_cu, &od, ref, name);
        gln_twin_free(g_cu, &od);
        free(ref);
    }
}

static void quant_case(const gln_quant_config_t *cfg, gln_dtype_t dtype, int64_t rows, int64_t cols, void *h,
                       float amax0, float scale0, const char *label) {
    char what[200];
    snprintf(what, sizeof what, "%s %s %s->%s [%lld,%lld] %s%s%s", label, gln_scaling_name(cfg->mode),
             gln_dtype_name(dtype), gln_dtype_name(cfg->fp8_dtype), (long long)rows, (long long)cols,
             cfg->rowwise ? "R" : "", cfg->columnwise ? "C" : "", cfg->amax_nan_propagate ? " nan-propagate" : "");
    const size_t bytes = (size_t)rows * (size_t)cols * gln_dtype_size(dtype);
    qpair_t q;
    qpair_init(&q, cfg, rows, cols, amax0, scale0);
    gln_tensor_t xh = gln_tensor_make(dtype, rows, cols, h);
    CHECK_OK(gln_quantize(g_cpu, cfg, &xh, &q.h));
    gln_twin_t xd = gln_twin_upload(g_cu, h, bytes);
    gln_tensor_t xt = gln_tensor_make(dtype, rows, cols, xd.d);
    CHECK_OK(gln_quantize(g_cu, cfg, &xt, &q.d));
    qpair_compare(&q, what);
    dequant_compare(&q, GLN_DTYPE_FP32, what);
    dequant_compare(&q, GLN_DTYPE_BF16, what);
    gln_twin_free(g_cu, &xd);
    qpair_free(&q);
}

static void test_quantize_tensor(void) {
    gln_rng_t rng = gln_rng_seed(13);
    const gln_dtype_t fp8s[] = {GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP8_E5M2};
    for (size_t d = 0; d < GLN_CMP_COUNT(gln_cmp_hp); d++)
        for (size_t r = 0; r < GLN_CMP_COUNT(gln_cmp_rows); r++)
            for (size_t c = 0; c < GLN_CMP_COUNT(gln_cmp_cols); c++)
                for (int variant = 0; variant < 7; variant++) {
                    /* 4: NaN / Inf inputs; 5 (current) and 6 (delayed): the same under
                     * amax_nan_propagate */
                    const int64_t rows = gln_cmp_rows[r], cols = gln_cmp_cols[c];
                    void *h = gln_cmp_make_hp(&rng, gln_cmp_hp[d], rows, cols, 2.0, variant >= 4 ? 2 : 0);
                    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
                    cfg.mode = GLN_SCALING_TENSOR;
                    cfg.fp8_dtype = fp8s[variant % 2];
                    cfg.rowwise = 1;
                    cfg.columnwise = variant != 1;
                    cfg.delayed = variant == 2 || variant == 6;
                    cfg.amax_nan_propagate = variant >= 5;
                    cfg.power_2_scale = variant == 3;
                    cfg.amax_epsilon = variant == 3 ? 1e3f : 0.0f;
                    /* delayed: an awkward (non power of two) scale and a prior amax to max with */
                    quant_case(&cfg, gln_cmp_hp[d], rows, cols, h, 1.5f, 37.3f, "tensor");
                    free(h);
                }
    /* an all-zero tensor and an empty one */
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.columnwise = 1;
    void *z = calloc(17 * 48, sizeof(float));
    quant_case(&cfg, GLN_DTYPE_FP32, 17, 48, z, 0.0f, 1.0f, "zeros");
    quant_case(&cfg, GLN_DTYPE_FP32, 0, 48, z, 0.0f, 1.0f, "empty");
    free(z);
}

static void test_quantize_mxfp8(void) {
    gln_rng_t rng = gln_rng_seed(14);
    const int64_t cols_mx[] = {48, 4096, 33};
    for (size_t d = 0; d < GLN_CMP_COUNT(gln_cmp_hp); d++)
        for (size_t r = 0; r < GLN_CMP_COUNT(gln_cmp_rows); r++)
            for (size_t c = 0; c < GLN_CMP_COUNT(cols_mx); c++)
                for (int variant = 0; variant < 4; variant++) {
                    const int64_t rows = gln_cmp_rows[r], cols = cols_mx[c];
                    void *h = gln_cmp_make_hp(&rng, gln_cmp_hp[d], rows, cols, variant == 2 ? 1e-3 : 5.0, variant != 1);
                    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
                    cfg.mode = GLN_SCALING_MXFP8_1D;
                    cfg.fp8_dtype = variant == 3 ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
                    cfg.rowwise = 1;
                    cfg.columnwise = 1;
                    cfg.e8m0_rounding = variant == 2 ? GLN_E8M0_ROUND_FLOOR : GLN_E8M0_ROUND_UP;
                    /* NaN blocks (variant != 1) under both NaN rules; positive NaNs only
                     * (make_hp specials 1), since a NaN element meets the NaN scale here */
                    for (int nanp = 0; nanp < (variant != 1 ? 2 : 1); nanp++) {
                        cfg.amax_nan_propagate = nanp;
                        quant_case(&cfg, gln_cmp_hp[d], rows, cols, h, 0.0f, 1.0f, "mxfp8");
                    }
                    free(h);
                }
}

static void test_quantize_block(void) {
    gln_rng_t rng = gln_rng_seed(20);
    const int64_t rows_b[] = {1, 5, 17, 129, 300};
    const int64_t cols_b[] = {48, 200, 4096};
    for (size_t d = 0; d < GLN_CMP_COUNT(gln_cmp_hp); d++)
        for (size_t r = 0; r < GLN_CMP_COUNT(rows_b); r++)
            for (size_t c = 0; c < GLN_CMP_COUNT(cols_b); c++)
                for (int variant = 0; variant < 7; variant++) {
                    /* 4: NaN / Inf inputs; 5 (1x128) and 6 (128x128): the same under
                     * amax_nan_propagate */
                    const int64_t rows = rows_b[r], cols = cols_b[c];
                    void *h = gln_cmp_make_hp(&rng, gln_cmp_hp[d], rows, cols, variant == 3 ? 1e-3 : 4.0, variant >= 4 ? 2 : 0);
                    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
                    cfg.mode = variant < 2 || variant == 5 ? GLN_SCALING_BLOCK_1D : GLN_SCALING_BLOCK_2D;
                    cfg.amax_nan_propagate = variant >= 5;
                    cfg.fp8_dtype = variant == 1 ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
                    cfg.rowwise = variant != 2;
                    cfg.columnwise = 1;
                    /* power-of-two scales (the recipe default) and plain FP32 ones with an epsilon */
                    cfg.power_2_scale = variant % 2 == 0;
                    cfg.amax_epsilon = variant == 3 ? 1e-2f : 0.0f;
                    quant_case(&cfg, gln_cmp_hp[d], rows, cols, h, 0.0f, 1.0f, "block");
                    free(h);
                }
}

/* ---- grouped quantize ---------------------------------------------------------------------- */

#define NEXP_Q 4
static const int64_t k_qsplits[][NEXP_Q] = {{5, 0, 17, 1}, {0, 0, 129, 0}, {0, 0, 0, 0}, {0, 5, 17, 129}};

/* gln_grouped_quantize on both backends (host or device splits; with device splits `out` gets its
 * own device copy of the splits when separate_out), every buffer compared bit for bit. */
static void grouped_quant_case(const gln_quant_config_t *cfg, gln_dtype_t dtype, const int64_t *splits,
                               int dev_splits, int separate_out, int64_t cols, int specials, gln_rng_t *rng) {
    int64_t total = 0, ro[NEXP_Q + 1], co[NEXP_Q + 1];
    for (int i = 0; i < NEXP_Q; i++) total += splits[i];
    const int64_t rows = total + 3; /* trailing rows: neither read nor written */
    CHECK_OK(gln_grouped_scale_offsets(cfg->mode, NEXP_Q, splits, cols, ro, co));
    const size_t es = gln_scale_elem_size(cfg->mode), nd = (size_t)rows * (size_t)cols;
    const size_t sb = (size_t)ro[NEXP_Q] * es, csb = (size_t)co[NEXP_Q] * es;
    void *h = gln_cmp_make_hp(rng, dtype, rows, cols, 3.0, specials);
    float scale0[NEXP_Q], amax0[NEXP_Q];
    for (int i = 0; i < NEXP_Q; i++) scale0[i] = 20.0f + 7.3f * (float)i, amax0[i] = 0.5f * (float)i;
    const int tensor = cfg->mode == GLN_SCALING_TENSOR;
    /* host (CPU) */
    gln_grouped_tensor_t hin = {NEXP_Q, splits, 0, gln_tensor_make(dtype, rows, cols, h)};
    gln_tensor_t hq = {cfg->fp8_dtype, rows, cols, NULL, cfg->mode, NULL, NULL, NULL, NULL, NULL};
    if (cfg->rowwise) hq.data = host_poison(nd), hq.scale_inv = host_poison(sb);
    if (cfg->columnwise) hq.col_data = host_poison(nd), hq.col_scale_inv = host_poison(csb);
    if (tensor) {
        hq.scale = malloc(sizeof scale0), hq.amax = malloc(sizeof amax0);
        memcpy(hq.scale, scale0, sizeof scale0), memcpy(hq.amax, amax0, sizeof amax0);
    }
    gln_grouped_tensor_t hout = {NEXP_Q, splits, 0, hq};
    CHECK_OK(gln_grouped_quantize(g_cpu, cfg, &hin, &hout));
    /* device */
    gln_twin_t sp = splits_on_dev_n(splits, NEXP_Q), sp2 = splits_on_dev_n(splits, NEXP_Q);
    gln_twin_t xd = gln_twin_upload(g_cu, h, nd * gln_dtype_size(dtype));
    gln_twin_t dd = {0}, ds = {0}, dc = {0}, dcs = {0}, dsc = {0}, dam = {0};
    gln_tensor_t dq = hq;
    dq.data = dq.scale_inv = dq.col_data = dq.col_scale_inv = NULL, dq.scale = dq.amax = NULL;
    if (cfg->rowwise) dd = gln_twin_upload(g_cu, NULL, nd), ds = gln_twin_upload(g_cu, NULL, sb), dq.data = dd.d, dq.scale_inv = ds.d;
    if (cfg->columnwise) dc = gln_twin_upload(g_cu, NULL, nd), dcs = gln_twin_upload(g_cu, NULL, csb), dq.col_data = dc.d, dq.col_scale_inv = dcs.d;
    if (tensor) {
        dsc = gln_twin_upload(g_cu, scale0, sizeof scale0), dam = gln_twin_upload(g_cu, amax0, sizeof amax0);
        dq.scale = dsc.d, dq.amax = dam.d;
    }
    const int64_t *in_sp = dev_splits ? (const int64_t *)sp.d : splits;
    const int64_t *out_sp = dev_splits && separate_out ? (const int64_t *)sp2.d : in_sp;
    gln_grouped_tensor_t din = {NEXP_Q, in_sp, dev_splits, gln_tensor_make(dtype, rows, cols, xd.d)};
    gln_grouped_tensor_t dout = {NEXP_Q, out_sp, dev_splits, dq};
    CHECK_OK(gln_grouped_quantize(g_cu, cfg, &din, &dout));
    char what[200];
    snprintf(what, sizeof what, "grouped %s %s->%s splits {%lld,%lld,%lld,%lld} cols %lld %s%s%s%s%s",
             gln_scaling_name(cfg->mode), gln_dtype_name(dtype), gln_dtype_name(cfg->fp8_dtype), (long long)splits[0],
             (long long)splits[1], (long long)splits[2], (long long)splits[3], (long long)cols,
             cfg->rowwise ? "R" : "", cfg->columnwise ? "C" : "", cfg->delayed ? " delayed" : "",
             dev_splits ? " (device splits)" : "", cfg->amax_nan_propagate ? " nan-propagate" : "");
    char name[260];
#define GQ_CMP(buf, host, label)                                                                   \
    if ((buf).d) {                                                                                 \
        snprintf(name, sizeof name, "%s %s", what, label);                                        \
        gln_twin_expect(g_cu, &(buf), (host), name);                                              \
    }
    GQ_CMP(dd, hq.data, "data");
    GQ_CMP(ds, hq.scale_inv, "scale_inv");
    GQ_CMP(dc, hq.col_data, "col_data");
    GQ_CMP(dcs, hq.col_scale_inv, "col_scale_inv");
    GQ_CMP(dsc, hq.scale, "scale[N]");
    GQ_CMP(dam, hq.amax, "amax[N]");
#undef GQ_CMP
    gln_twin_free(g_cu, &sp), gln_twin_free(g_cu, &sp2), gln_twin_free(g_cu, &xd);
    gln_twin_free(g_cu, &dd), gln_twin_free(g_cu, &ds), gln_twin_free(g_cu, &dc), gln_twin_free(g_cu, &dcs), gln_twin_free(g_cu, &dsc), gln_twin_free(g_cu, &dam);
    free(hq.data), free(hq.scale_inv), free(hq.col_data), free(hq.col_scale_inv), free(hq.scale), free(hq.amax);
    free(h);
}

static void test_grouped_quantize(void) {
    gln_rng_t rng = gln_rng_seed(21);
    const gln_scaling_mode_t modes[] = {GLN_SCALING_TENSOR, GLN_SCALING_TENSOR, GLN_SCALING_MXFP8_1D,
                                        GLN_SCALING_BLOCK_1D, GLN_SCALING_BLOCK_2D};
    const int64_t cols_g[] = {48, 256};
    for (size_t m = 0; m < GLN_CMP_COUNT(modes); m++)
        for (size_t s = 0; s < GLN_CMP_COUNT(k_qsplits); s++)
            for (size_t c = 0; c < GLN_CMP_COUNT(cols_g); c++)
                for (int v = 0; v < 6; v++) {
                    /* 4, 5: NaN / Inf inputs (positive NaNs: MXFP8 NaN blocks multiply a NaN
                     * element by a NaN scale) under each NaN rule */
                    const int specials = v >= 4, nanp = v == 5;
                    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
                    cfg.mode = modes[m];
                    cfg.amax_nan_propagate = nanp;
                    cfg.delayed = m == 1; /* per-member encode scales, max-accumulated amax */
                    cfg.fp8_dtype = v == 3 ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
                    cfg.rowwise = v != 2;
                    cfg.columnwise = v != 1;
                    cfg.power_2_scale = modes[m] >= GLN_SCALING_BLOCK_1D && v != 3;
                    const gln_dtype_t dt = gln_cmp_hp[(s + c + (size_t)v) % GLN_CMP_COUNT(gln_cmp_hp)];
                    grouped_quant_case(&cfg, dt, k_qsplits[s], v & 1, v == 3, cols_g[c], specials, &rng);
                }
}

/* ---- errors -------------------------------------------------------------------------------- */

static void test_errors(void) {
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.backend = GLN_BACKEND_CUDA;
    o.device = 1000;
    gln_context_t *bad = NULL;
    CHECK_STATUS(gln_context_create(&o, &bad), GLN_STATUS_INVALID_ARGUMENT, "device");
    CHECK(bad == NULL);
    /* the MXFP8 scale swizzle runs on CUDA (test_cuda_quant_swizzle checks it against the CPU) */
    uint8_t *sc = NULL;
    CHECK_OK(gln_malloc(g_cu, 2 * 128 * 4, (void **)&sc));
    static const uint8_t zeros[512] = {0};
    CHECK_OK(gln_memcpy(g_cu, sc, zeros, 512, GLN_COPY_HOST_TO_BACKEND));
    CHECK_OK(gln_mxfp8_swizzle_scales(g_cu, 128, 128, 0, sc, sc + 512));
    /* device splits that do not add up: clamped on the device (the call itself succeeds) and
     * reported by gln_context_async_error (test_cuda_grouped_quant checks the clamped results) */
    const int64_t bad_splits[NEXP_Q] = {4, -1, 0, 0};
    gln_twin_t sp = splits_on_dev_n(bad_splits, NEXP_Q);
    gln_twin_t xd = gln_twin_upload(g_cu, NULL, 8 * 48 * 2), qd = gln_twin_upload(g_cu, NULL, 8 * 48), qs = gln_twin_upload(g_cu, NULL, 4 * NEXP_Q);
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    gln_grouped_tensor_t gi = {NEXP_Q, sp.d, 1, gln_tensor_make(GLN_DTYPE_BF16, 8, 48, xd.d)};
    gln_tensor_t q = {GLN_DTYPE_FP8_E4M3, 8, 48, qd.d, GLN_SCALING_TENSOR, qs.d, NULL, NULL, NULL, NULL};
    gln_grouped_tensor_t go = {NEXP_Q, sp.d, 1, q};
    CHECK_OK(gln_grouped_quantize(g_cu, &cfg, &gi, &go));
    CHECK_STATUS(gln_context_async_error(g_cu), GLN_STATUS_INVALID_ARGUMENT, "member 1");
    /* device splits whose int64 sum wraps (2·INT64_MAX + 2 = 0): each is >= 0 and the wrapped sum
     * is <= the rows; the plan compares each split with the rows left, so it clamps at member 0 */
    const int64_t wrap_splits[NEXP_Q] = {INT64_MAX, INT64_MAX, 2, 0};
    gln_twin_t wsp = splits_on_dev_n(wrap_splits, NEXP_Q);
    gi.splits = go.splits = wsp.d;
    CHECK_OK(gln_grouped_quantize(g_cu, &cfg, &gi, &go));
    CHECK_STATUS(gln_context_async_error(g_cu), GLN_STATUS_INVALID_ARGUMENT, "past the packed rows (at member 0");
    CHECK_OK(gln_synchronize(g_cu));
    CHECK_OK(gln_free(g_cu, sc));
    gln_twin_free(g_cu, &sp), gln_twin_free(g_cu, &wsp), gln_twin_free(g_cu, &xd), gln_twin_free(g_cu, &qd), gln_twin_free(g_cu, &qs);
}

GLN_TEST_CUDA_MAIN(g_cpu, g_cu,
    GLN_CASE(test_amax), GLN_CASE(test_cast), GLN_CASE(test_quantize_tensor), GLN_CASE(test_quantize_mxfp8),
    GLN_CASE(test_errors), GLN_CASE(test_quantize_block), GLN_CASE(test_grouped_quantize))

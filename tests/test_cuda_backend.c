/* The CUDA backend against the CPU backend (the reference), through the public API.
 *
 * Skips (exit 77) when CUDA is not compiled in or no device is present.  Otherwise every
 * implemented CUDA op runs on awkward shapes (1, 5, 17, 129 rows; 48 and 4096 columns; NaN, Inf
 * and zero blocks) and is compared with the same call on a CPU context:
 *   - quantize (TENSOR current / delayed, MXFP8 both roundings): data, transposed / columnwise
 *     data, every scale byte (padding included), amax and scale bit for bit;
 *   - every amax under both values of amax_nan_propagate (gln_amax_ex, and the quantize /
 *     grouped quantize cases with NaN inputs), so the CUDA NaN rule mirrors the CPU one;
 *   - dequantize, cast, amax, grouped dbias: bit for bit (same FP32 operations in the same order);
 *   - quantize BLOCK_1D / BLOCK_2D (power-of-two and FP32 scales) and grouped quantize (TENSOR
 *     current / delayed with per-member scales, MXFP8, BLOCK_*, empty members, host and device
 *     splits): every byte, bit for bit;
 *   - GEMMs (plain, per-tensor FP8 — zero-padded when K % 16 != 0 —, MXFP8 and block-scaled)
 *     and grouped GEMMs: within GEMM tolerances (see below).
 * Device outputs are poisoned (NaN / 0xA5) before each run and followed by guard bytes that must
 * survive. */
#include <stdlib.h>
#include <string.h>

#include "device_twin.h"
#include "harness.h"
#include "tensor/tensor.h"

/* ---- tolerances ------------------------------------------------------------------------------
 * GEMMs: both backends multiply the same exact operand values and accumulate in FP32, only in a
 * different order (cuBLASLt tiles / split-K vs OpenBLAS), so the FP32 results differ by at most
 * twice the standard summation bound γ_k·Σ|a·b| (one per backend), u = 2^-24.  The output is
 * then rounded once in each backend; when the FP32 values straddle a rounding boundary the two
 * roundings land one output ulp apart — allow GEMM_OUT_ULPS ulps of the output dtype (2: one for
 * the boundary, one of margin for the FP8 scale product, which cuBLASLt applies as
 * scale_a·scale_b·acc and the CPU as (scale_a·scale_b)·acc).  fp32 products themselves are not
 * exact (FMA vs separate rounding): covered by the (k + 2) term. */
#define GEMM_OUT_ULPS 2.0
/* Per-tensor FP8 GEMMs on Hopper: the FP8 tensor-core MMA accumulates with a reduced-precision
 * (about 14-bit mantissa) accumulator that cuBLASLt promotes to FP32 only between K chunks
 * (DeepSeek-V3 report, §3.3.2, measured on H800), so the GPU result is not within the FP32
 * summation bound of the CPU's.  Differences seen on the H200 reach 2^-14.7·Σ|a·b|; 2^-10·Σ|a·b|
 * leaves ~25x headroom and still catches a wrong scale or operand (errors >= 2^-8 relative). */
#define GEMM_FP8_ACC_REL (1.0 / 1024.0)
#define GEMM_SUM_TERMS_EXTRA 2.0
#define U32 (1.0 / 16777216.0)

static gln_context_t *g_cu, *g_cpu;

/* ---- device buffers (guarded twins, device_twin.h) ---------------------------------------- */

/* Device copy of n splits. */
static gln_twin_t splits_on_dev_n(const int64_t *splits, int n) { return gln_twin_upload(g_cu, splits, (size_t)n * sizeof(int64_t)); }

/* Compare a device buffer with a host reference bit for bit. */
static void check_dev_bitwise(const char *what, gln_twin_t b, const void *ref) {
    void *h = gln_twin_fetch(g_cu, &b, what);
    gln_check_bitwise(what, h, ref, b.bytes);
    free(h);
}

/* ---- data -------------------------------------------------------------------------------------- */

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Host tensor [rows, cols] of dtype with N(0, sigma²) values; with `specials`, row 0 gets a
 * zero block (first 32 columns), and scattered NaN, ±Inf, huge (overflow fp8 / fp16) and tiny
 * values. */
static void *make_hp(gln_rng_t *rng, gln_dtype_t dtype, int64_t rows, int64_t cols, double sigma, int specials) {
    const size_t n = (size_t)rows * (size_t)cols;
    void *h = calloc(n ? n : 1, gln_dtype_size(dtype));
    for (size_t i = 0; i < n; i++) gln_store(h, dtype, i, sigma * gln_rng_normal(rng));
    if (!specials || n == 0) return h;
    for (int64_t c = 0; c < cols && c < 32; c++) gln_store(h, dtype, (size_t)c, c % 2 ? -0.0 : 0.0);
    /* specials == 2 adds a negative NaN, whose sign an FP8 NaN must keep.  (Not used where a NaN
     * element meets a NaN scale — MXFP8 NaN blocks — since which NaN the host's x86 multiply
     * returns there depends on the host compiler's operand order.) */
    const double vals[] = {NAN, INFINITY, -INFINITY, 1e6, -3e38, 1e-30, 70000.0, -NAN};
    const size_t nvals = sizeof vals / sizeof vals[0] - (specials == 2 ? 0 : 1);
    for (size_t v = 0; v < nvals; v++) {
        size_t i = (size_t)gln_rng_int(rng, 0, (int64_t)n - 1);
        if (i < 32) continue; /* keep the zero block */
        gln_store(h, dtype, i, vals[v]);
    }
    return h;
}

static const int64_t k_rows[] = {1, 5, 17, 129};
static const int64_t k_cols[] = {48, 4096};
static const gln_dtype_t k_hp[] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

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
    CHECK_MSG(f32_bits(got_host) == f32_bits(ref), "amax %s nanp %d %s [%lld,%lld] host: cuda %08x cpu %08x", what,
              nanp, gln_dtype_name(dtype), (long long)rows, (long long)cols, f32_bits(got_host), f32_bits(ref));
    /* device destination */
    float poison = f32_from_bits(0x7FBADBADu);
    gln_twin_t ad = gln_twin_upload(g_cu, &poison, sizeof(float));
    CHECK_OK(gln_amax_ex(g_cu, &xt, nanp, ad.d));
    check_dev_bitwise("amax (device destination)", ad, &ref);
    gln_twin_free(g_cu, &ad);
    gln_twin_free(g_cu, &xd);
    return ref;
}

static void test_amax(void) {
    gln_rng_t rng = gln_rng_seed(11);
    for (size_t d = 0; d < COUNT(k_hp); d++)
        for (size_t r = 0; r < COUNT(k_rows); r++)
            for (size_t c = 0; c < COUNT(k_cols); c++)
                for (int sp = 0; sp < 2; sp++) {
                    void *h = make_hp(&rng, k_hp[d], k_rows[r], k_cols[c], 3.0, sp ? 2 : 0);
                    for (int nanp = 0; nanp < 2; nanp++)
                        amax_case(k_hp[d], k_rows[r], k_cols[c], h, nanp, sp ? "specials" : "normal");
                    free(h);
                }
    /* Two NaNs with different payloads: ignored (max 3), or under propagation the first one (by
     * index), sign cleared, must win on both backends. */
    const int64_t n = 129 * 48;
    float *x = calloc((size_t)n, sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 7) - 3.0f;
    x[4000] = f32_from_bits(0x7FC00001u);
    x[2000] = f32_from_bits(0xFFC00002u);
    CHECK(amax_case(GLN_DTYPE_FP32, 129, 48, x, 0, "two NaNs") == 3.0f);
    CHECK(f32_bits(amax_case(GLN_DTYPE_FP32, 129, 48, x, 1, "two NaNs")) == 0x7FC00002u);
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
    for (size_t di = 0; di < COUNT(k_hp); di++)
        for (size_t dO = 0; dO < COUNT(k_hp); dO++)
            for (size_t r = 0; r < COUNT(k_rows); r++) {
                const gln_dtype_t ti = k_hp[di], to = k_hp[dO];
                const int64_t rows = k_rows[r], cols = 48;
                const size_t n = (size_t)rows * (size_t)cols;
                void *h = make_hp(&rng, ti, rows, cols, 1000.0, 2);
                /* fp32 sources also get values that only a correct RNE handles (ties, subnormals) */
                if (ti == GLN_DTYPE_FP32 && n > 40) {
                    ((float *)h)[33] = f32_from_bits(0x3F808000u); /* bf16 tie */
                    ((float *)h)[34] = 65520.0f;                   /* fp16 overflow by RNE */
                    ((float *)h)[35] = 1e-7f;                      /* fp16 subnormal */
                }
                void *ref = calloc(n, gln_dtype_size(to));
                gln_tensor_t in_h = gln_tensor_make(ti, rows, cols, h), out_h = gln_tensor_make(to, rows, cols, ref);
                CHECK_OK(gln_cast(g_cpu, &in_h, &out_h));
                gln_twin_t in_d = gln_twin_upload(g_cu, h, n * gln_dtype_size(ti)), out_d = gln_twin_upload(g_cu, NULL, n * gln_dtype_size(to));
                gln_tensor_t in_t = gln_tensor_make(ti, rows, cols, in_d.d), out_t = gln_tensor_make(to, rows, cols, out_d.d);
                CHECK_OK(gln_cast(g_cu, &in_t, &out_t));
                check_dev_bitwise("cast", out_d, ref);
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
        check_dev_bitwise(name, (buf), (host));                                                    \
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
        check_dev_bitwise(name, od, ref);
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
    for (size_t d = 0; d < COUNT(k_hp); d++)
        for (size_t r = 0; r < COUNT(k_rows); r++)
            for (size_t c = 0; c < COUNT(k_cols); c++)
                for (int variant = 0; variant < 7; variant++) {
                    /* 4: NaN / Inf inputs; 5 (current) and 6 (delayed): the same under
                     * amax_nan_propagate */
                    const int64_t rows = k_rows[r], cols = k_cols[c];
                    void *h = make_hp(&rng, k_hp[d], rows, cols, 2.0, variant >= 4 ? 2 : 0);
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
                    quant_case(&cfg, k_hp[d], rows, cols, h, 1.5f, 37.3f, "tensor");
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
    for (size_t d = 0; d < COUNT(k_hp); d++)
        for (size_t r = 0; r < COUNT(k_rows); r++)
            for (size_t c = 0; c < COUNT(cols_mx); c++)
                for (int variant = 0; variant < 4; variant++) {
                    const int64_t rows = k_rows[r], cols = cols_mx[c];
                    void *h = make_hp(&rng, k_hp[d], rows, cols, variant == 2 ? 1e-3 : 5.0, variant != 1);
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
                        quant_case(&cfg, k_hp[d], rows, cols, h, 0.0f, 1.0f, "mxfp8");
                    }
                    free(h);
                }
}

static void test_quantize_block(void) {
    gln_rng_t rng = gln_rng_seed(20);
    const int64_t rows_b[] = {1, 5, 17, 129, 300};
    const int64_t cols_b[] = {48, 200, 4096};
    for (size_t d = 0; d < COUNT(k_hp); d++)
        for (size_t r = 0; r < COUNT(rows_b); r++)
            for (size_t c = 0; c < COUNT(cols_b); c++)
                for (int variant = 0; variant < 7; variant++) {
                    /* 4: NaN / Inf inputs; 5 (1x128) and 6 (128x128): the same under
                     * amax_nan_propagate */
                    const int64_t rows = rows_b[r], cols = cols_b[c];
                    void *h = make_hp(&rng, k_hp[d], rows, cols, variant == 3 ? 1e-3 : 4.0, variant >= 4 ? 2 : 0);
                    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
                    cfg.mode = variant < 2 || variant == 5 ? GLN_SCALING_BLOCK_1D : GLN_SCALING_BLOCK_2D;
                    cfg.amax_nan_propagate = variant >= 5;
                    cfg.fp8_dtype = variant == 1 ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
                    cfg.rowwise = variant != 2;
                    cfg.columnwise = 1;
                    /* power-of-two scales (the recipe default) and plain FP32 ones with an epsilon */
                    cfg.power_2_scale = variant % 2 == 0;
                    cfg.amax_epsilon = variant == 3 ? 1e-2f : 0.0f;
                    quant_case(&cfg, k_hp[d], rows, cols, h, 0.0f, 1.0f, "block");
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
    void *h = make_hp(rng, dtype, rows, cols, 3.0, specials);
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
        check_dev_bitwise(name, (buf), (host));                                                    \
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
    for (size_t m = 0; m < COUNT(modes); m++)
        for (size_t s = 0; s < COUNT(k_qsplits); s++)
            for (size_t c = 0; c < COUNT(cols_g); c++)
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
                    const gln_dtype_t dt = k_hp[(s + c + (size_t)v) % COUNT(k_hp)];
                    grouped_quant_case(&cfg, dt, k_qsplits[s], v & 1, v == 3, cols_g[c], specials, &rng);
                }
}

/* ---- GEMMs --------------------------------------------------------------------------------- */

/* Logical FP32 values of an operand (high precision, or the dequantized rowwise copy). */
static float *operand_values(const gln_tensor_t *t) {
    const size_t n = (size_t)t->rows * (size_t)t->cols;
    float *v = calloc(n ? n : 1, sizeof(float));
    if (gln_dtype_is_fp8(t->dtype)) {
        const float s = *(const float *)t->scale_inv;
        for (size_t i = 0; i < n; i++) v[i] = gln_fp8_to_fp32(((const uint8_t *)t->data)[i], t->dtype) * s;
    } else {
        for (size_t i = 0; i < n; i++) v[i] = (float)gln_load(t->data, t->dtype, i);
    }
    return v;
}

/* Spacing of dtype values near |x| (one ulp). */
static double ulp_of(double x, gln_dtype_t dtype) {
    const int mbits = dtype == GLN_DTYPE_FP32 ? 23 : dtype == GLN_DTYPE_BF16 ? 7 : 10;
    const int emin = dtype == GLN_DTYPE_FP32 ? -126 : dtype == GLN_DTYPE_BF16 ? -126 : -14;
    int e = x != 0.0 ? (int)floor(log2(fabs(x))) : emin;
    if (e < emin) e = emin;
    return ldexp(1.0, e - mbits);
}

/* CUDA D (downloaded) against CPU D: |cuda - cpu| <= GEMM_OUT_ULPS·ulp(cpu) + 2·(k + 2)·u·S,
 * S = Σ|a·b| + |bias| + |old D|, computed here in double from the operands' values. */
static void gemm_compare(const char *what, gln_gemm_layout_t layout, const float *a, const float *b, int64_t m,
                         int64_t n, int64_t k, int64_t a_cols, int64_t b_cols, const float *bias,
                         const float *d_old, const void *got, const void *ref, gln_dtype_t dtype,
                         double acc_rel) {
    int bad = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0;
            for (int64_t t = 0; t < k; t++) {
                const double bv = layout == GLN_LAYOUT_NT ? b[t * b_cols + i] : b[i * b_cols + t];
                const double av = layout == GLN_LAYOUT_TN ? a[j * a_cols + t] : a[t * a_cols + j];
                s += fabs(av * bv);
            }
            if (bias) s += fabs(bias[j]);
            if (d_old) s += fabs(d_old[i * n + j]);
            const size_t idx = (size_t)(i * n + j);
            const double g = gln_load(got, dtype, idx), r = gln_load(ref, dtype, idx);
            const double tol = GEMM_OUT_ULPS * ulp_of(r, dtype) +
                               (2.0 * ((double)k + GEMM_SUM_TERMS_EXTRA) * U32 + acc_rel) * s;
            if (!(fabs(g - r) <= tol) && !(isnan(g) && isnan(r))) {
                if (bad++ < 5)
                    CHECK_MSG(0, "%s: D[%lld,%lld] cuda %.9g cpu %.9g (tol %.3g)", what, (long long)i, (long long)j, g,
                              r, tol);
            }
        }
    if (bad > 5) CHECK_MSG(0, "%s: %d elements out of tolerance", what, bad);
}

/* Device twin of a quantized or plain host tensor (all buffers uploaded). */
typedef struct dtensor {
    gln_tensor_t t;
    gln_twin_t b[4];
} dtensor_t;

static dtensor_t dtensor_upload(const gln_tensor_t *h) {
    dtensor_t d;
    memset(&d, 0, sizeof d);
    d.t = *h;
    d.t.amax = NULL, d.t.scale = NULL;
    const size_t n = (size_t)h->rows * (size_t)h->cols;
    if (!gln_dtype_is_fp8(h->dtype)) {
        d.b[0] = gln_twin_upload(g_cu, h->data, n * gln_dtype_size(h->dtype));
        d.t.data = d.b[0].d;
        return d;
    }
    if (h->data) d.b[0] = gln_twin_upload(g_cu, h->data, n), d.t.data = d.b[0].d;
    if (h->col_data) d.b[1] = gln_twin_upload(g_cu, h->col_data, n), d.t.col_data = d.b[1].d;
    if (h->scale_inv) d.b[2] = gln_twin_upload(g_cu, h->scale_inv, 4), d.t.scale_inv = d.b[2].d;
    if (h->col_scale_inv) d.b[3] = gln_twin_upload(g_cu, h->col_scale_inv, 4), d.t.col_scale_inv = d.b[3].d;
    return d;
}

static void dtensor_free(dtensor_t *d) {
    for (int i = 0; i < 4; i++) gln_twin_free(g_cu, &d->b[i]);
}

/* Quantize a host tensor with per-tensor current scaling on the CPU (both copies). */
static gln_tensor_t quantize_host(const gln_tensor_t *x, gln_dtype_t fp8) {
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.fp8_dtype = fp8;
    cfg.columnwise = 1;
    const size_t n = (size_t)x->rows * (size_t)x->cols;
    gln_tensor_t q = {fp8, x->rows, x->cols, calloc(n + 1, 1), GLN_SCALING_TENSOR, calloc(1, 4), calloc(n + 1, 1),
                      calloc(1, 4), calloc(1, 4), calloc(1, 4)};
    CHECK_OK(gln_quantize(g_cpu, &cfg, x, &q));
    return q;
}

static void free_host_tensor(gln_tensor_t *t) {
    free(t->data), free(t->col_data), free(t->scale_inv), free(t->col_scale_inv), free(t->amax), free(t->scale);
}

/* Logical shapes of A and B for D [m, n] with reduction k. */
static void operand_shapes(gln_gemm_layout_t layout, int64_t m, int64_t n, int64_t k, int64_t *ar, int64_t *ac,
                           int64_t *br, int64_t *bc) {
    switch (layout) {
    case GLN_LAYOUT_TN: *ar = n, *ac = k, *br = m, *bc = k; break;
    case GLN_LAYOUT_NN: *ar = k, *ac = n, *br = m, *bc = k; break;
    default: *ar = k, *ac = n, *br = k, *bc = m; break;
    }
}

static const char *layout_name(gln_gemm_layout_t l) { return l == GLN_LAYOUT_TN ? "TN" : l == GLN_LAYOUT_NN ? "NN" : "NT"; }

/* One GEMM on both backends.  fp8_a / fp8_b: 0 for high precision in `in_dtype`, else the FP8
 * format the CPU quantizes the operand to.  Returns the CUDA status. */
static gln_status_t gemm_case(gln_rng_t *rng, gln_gemm_layout_t layout, int64_t m, int64_t n, int64_t k,
                              gln_dtype_t in_dtype, gln_dtype_t fp8_a, gln_dtype_t fp8_b, gln_dtype_t d_dtype,
                              gln_dtype_t bias_dtype, int use_bias, int accumulate, int expect_ok) {
    int64_t ar, ac, br, bc;
    operand_shapes(layout, m, n, k, &ar, &ac, &br, &bc);
    void *ah = make_hp(rng, in_dtype, ar, ac, 1.0, 0), *bh = make_hp(rng, in_dtype, br, bc, 1.0, 0);
    gln_tensor_t A = gln_tensor_make(in_dtype, ar, ac, ah), B = gln_tensor_make(in_dtype, br, bc, bh);
    gln_tensor_t Aq = A, Bq = B;
    if (fp8_a) Aq = quantize_host(&A, fp8_a);
    if (fp8_b) Bq = quantize_host(&B, fp8_b);
    void *biash = use_bias ? make_hp(rng, bias_dtype, 1, n, 1.0, 0) : NULL;
    gln_tensor_t bias = gln_tensor_make(bias_dtype, 1, n, biash);
    const size_t dn = (size_t)m * (size_t)n, dbytes = dn * gln_dtype_size(d_dtype);
    void *d0 = make_hp(rng, d_dtype, m, n, 1.0, 0);
    void *dref = malloc(dbytes + 1);
    memcpy(dref, d0, dbytes);
    if (!accumulate) gln_poison(dref, d_dtype, dn);
    gln_tensor_t Dh = gln_tensor_make(d_dtype, m, n, dref);
    CHECK_OK(gln_gemm(g_cpu, layout, &Aq, &Bq, &Dh, use_bias ? &bias : NULL, accumulate));

    dtensor_t Ad = dtensor_upload(&Aq), Bd = dtensor_upload(&Bq);
    gln_twin_t biasd = gln_twin_upload(g_cu, biash, use_bias ? (size_t)n * gln_dtype_size(bias_dtype) : 0);
    gln_tensor_t biast = gln_tensor_make(bias_dtype, 1, n, biasd.d);
    gln_twin_t Dd = gln_twin_upload(g_cu, accumulate ? d0 : NULL, dbytes);
    gln_tensor_t Dt = gln_tensor_make(d_dtype, m, n, Dd.d);
    gln_status_t st = gln_gemm(g_cu, layout, &Ad.t, &Bd.t, &Dt, use_bias ? &biast : NULL, accumulate);
    char what[200];
    snprintf(what, sizeof what, "gemm %s m=%lld n=%lld k=%lld %s/%s/%s -> %s bias=%d acc=%d", layout_name(layout),
             (long long)m, (long long)n, (long long)k, gln_dtype_name(in_dtype), fp8_a ? gln_dtype_name(fp8_a) : "-",
             fp8_b ? gln_dtype_name(fp8_b) : "-", gln_dtype_name(d_dtype), use_bias, accumulate);
    if (expect_ok) CHECK_MSG(st == GLN_STATUS_SUCCESS, "%s: %s (%s)", what, gln_status_string(st), gln_last_error());
    if (st == GLN_STATUS_SUCCESS) {
        void *got = gln_twin_fetch(g_cu, &Dd, what);
        float *av = operand_values(&Aq), *bv = operand_values(&Bq);
        float *biasv = NULL, *dv = NULL;
        if (use_bias) {
            gln_tensor_t bt = gln_tensor_make(bias_dtype, 1, n, biash);
            biasv = operand_values(&bt);
        }
        if (accumulate) {
            gln_tensor_t dt = gln_tensor_make(d_dtype, m, n, d0);
            dv = operand_values(&dt);
        }
        gemm_compare(what, layout, av, bv, m, n, k, ac, bc, biasv, dv, got, dref, d_dtype,
                     fp8_a ? GEMM_FP8_ACC_REL : 0.0);
        free(av), free(bv), free(biasv), free(dv), free(got);
    } else {
        CHECK_MSG(st == GLN_STATUS_NOT_SUPPORTED, "%s: failed with %s (%s)", what, gln_status_string(st),
                  gln_last_error());
        printf("  note: %s -> not supported (%s)\n", what, gln_last_error());
    }
    dtensor_free(&Ad), dtensor_free(&Bd), gln_twin_free(g_cu, &biasd), gln_twin_free(g_cu, &Dd);
    if (fp8_a) free_host_tensor(&Aq);
    if (fp8_b) free_host_tensor(&Bq);
    free(ah), free(bh), free(biash), free(d0), free(dref);
    return st;
}

static void test_gemm_hp(void) {
    gln_rng_t rng = gln_rng_seed(15);
    const gln_gemm_layout_t layouts[] = {GLN_LAYOUT_TN, GLN_LAYOUT_NN, GLN_LAYOUT_NT};
    const gln_dtype_t io[][2] = {{GLN_DTYPE_BF16, GLN_DTYPE_BF16}, {GLN_DTYPE_BF16, GLN_DTYPE_FP32},
                                 {GLN_DTYPE_FP16, GLN_DTYPE_FP16}, {GLN_DTYPE_FP32, GLN_DTYPE_FP32},
                                 {GLN_DTYPE_FP32, GLN_DTYPE_BF16}};
    for (size_t l = 0; l < COUNT(layouts); l++)
        for (size_t t = 0; t < COUNT(io); t++)
            for (size_t r = 0; r < COUNT(k_rows); r++)
                for (int v = 0; v < 4; v++) {
                    const int bias = v & 1, acc = (v >> 1) & 1;
                    gemm_case(&rng, layouts[l], k_rows[r], 48, r == 3 ? 4096 : 48, io[t][0], 0, 0, io[t][1],
                              v == 3 ? GLN_DTYPE_FP32 : io[t][0], bias, acc, 1);
                }
    /* an empty reduction: D = bias (+ old D) */
    gemm_case(&rng, GLN_LAYOUT_NT, 48, 48, 0, GLN_DTYPE_BF16, 0, 0, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 1, 1, 1);
    gemm_case(&rng, GLN_LAYOUT_NT, 48, 48, 0, GLN_DTYPE_BF16, 0, 0, GLN_DTYPE_FP32, GLN_DTYPE_BF16, 0, 0, 1);
}

static void test_gemm_fp8(void) {
    gln_rng_t rng = gln_rng_seed(16);
    const gln_dtype_t E4 = GLN_DTYPE_FP8_E4M3, E5 = GLN_DTYPE_FP8_E5M2;
    const gln_dtype_t outs[] = {GLN_DTYPE_BF16, GLN_DTYPE_FP32};
    for (size_t o = 0; o < COUNT(outs); o++)
        for (int v = 0; v < 4; v++) {
            const int bias = v & 1, acc = (v >> 1) & 1;
            /* fprop: any token count; K multiple of 16 (FP8 leading dimensions) */
            for (size_t r = 0; r < COUNT(k_rows); r++)
                gemm_case(&rng, GLN_LAYOUT_TN, k_rows[r], 48, 64, GLN_DTYPE_BF16, E4, E4, outs[o], GLN_DTYPE_BF16,
                          bias, acc, 1);
            /* dgrad (E4M3 weights x E5M2 gradients) and wgrad with 16-aligned token counts */
            gemm_case(&rng, GLN_LAYOUT_NN, 32, 48, 64, GLN_DTYPE_BF16, E4, E5, outs[o], GLN_DTYPE_BF16, bias, acc, 1);
            gemm_case(&rng, GLN_LAYOUT_NN, 17, 48, 4096, GLN_DTYPE_BF16, E4, E5, outs[o], GLN_DTYPE_BF16, bias, acc, 1);
            gemm_case(&rng, GLN_LAYOUT_NT, 48, 64, 32, GLN_DTYPE_BF16, E4, E5, outs[o], GLN_DTYPE_BF16, bias, acc, 1);
            gemm_case(&rng, GLN_LAYOUT_NT, 48, 64, 128, GLN_DTYPE_FP32, E4, E4, outs[o], GLN_DTYPE_FP32, bias, acc, 1);
            /* unaligned token count in wgrad: zero-padded, must succeed */
            gemm_case(&rng, GLN_LAYOUT_NT, 48, 64, 17, GLN_DTYPE_BF16, E4, E4, outs[o], GLN_DTYPE_BF16, bias, acc, 1);
        }
    /* E5M2 x E5M2 is refused by cuBLASLt on sm_90: reported, not crashed */
    gln_status_t st = gemm_case(&rng, GLN_LAYOUT_TN, 16, 48, 64, GLN_DTYPE_BF16, E5, E5, GLN_DTYPE_BF16,
                                GLN_DTYPE_BF16, 0, 0, 0);
    CHECK(st == GLN_STATUS_NOT_SUPPORTED);
}

/* ---- MXFP8 / block-scaled GEMMs and zero-padded FP8 ------------------------------------------ */

/* Quantize a host tensor on the CPU with cfg (both copies), buffers at their layout sizes. */
static gln_tensor_t quantize_host_cfg(const gln_tensor_t *x, const gln_quant_config_t *cfg_in) {
    gln_quant_config_t cfg = *cfg_in;
    cfg.rowwise = cfg.columnwise = 1;
    gln_quant_layout_t l;
    CHECK_OK(gln_quant_layout(cfg.mode, cfg.fp8_dtype, x->rows, x->cols, &l));
    gln_tensor_t q = {cfg.fp8_dtype, x->rows, x->cols, calloc(l.data_bytes + 1, 1), cfg.mode,
                      calloc(l.scale_bytes + 4, 1), calloc(l.col_data_bytes + 1, 1), calloc(l.col_scale_bytes + 4, 1),
                      NULL, NULL};
    if (cfg.mode == GLN_SCALING_TENSOR) q.amax = calloc(1, 4), q.scale = calloc(1, 4);
    CHECK_OK(gln_quantize(g_cpu, &cfg, x, &q));
    return q;
}

/* Device twin of a quantized host tensor, every buffer at its layout size. */
static dtensor_t dtensor_upload_q(const gln_tensor_t *h) {
    gln_quant_layout_t l;
    CHECK_OK(gln_quant_layout(h->scaling, h->dtype, h->rows, h->cols, &l));
    dtensor_t d;
    memset(&d, 0, sizeof d);
    d.t = *h;
    d.t.amax = NULL, d.t.scale = NULL;
    d.b[0] = gln_twin_upload(g_cu, h->data, l.data_bytes), d.t.data = d.b[0].d;
    d.b[1] = gln_twin_upload(g_cu, h->col_data, l.col_data_bytes), d.t.col_data = d.b[1].d;
    d.b[2] = gln_twin_upload(g_cu, h->scale_inv, l.scale_bytes), d.t.scale_inv = d.b[2].d;
    d.b[3] = gln_twin_upload(g_cu, h->col_scale_inv, l.col_scale_bytes), d.t.col_scale_inv = d.b[3].d;
    return d;
}

/* Logical FP32 values [rows, cols] of one copy of a quantized host tensor (CPU dequantize). */
static float *copy_values(const gln_tensor_t *q, int columnwise) {
    const size_t n = (size_t)q->rows * (size_t)q->cols;
    float *v = calloc(n ? n : 1, sizeof(float));
    gln_tensor_t o = gln_tensor_make(GLN_DTYPE_FP32, q->rows, q->cols, v);
    CHECK_OK(gln_dequantize(g_cpu, q, columnwise, &o));
    return v;
}

/* One GEMM of quantized operands (any scaling mode) on both backends, compared within the GEMM
 * tolerance (acc_rel: the extra accumulator term of the GPU arithmetic used). */
static void gemm_q_case(gln_rng_t *rng, gln_gemm_layout_t layout, int64_t m, int64_t n, int64_t k,
                        const gln_quant_config_t *ca, const gln_quant_config_t *cb, gln_dtype_t d_dtype, int use_bias,
                        int accumulate, double acc_rel) {
    int64_t ar, ac, br, bc;
    operand_shapes(layout, m, n, k, &ar, &ac, &br, &bc);
    const gln_dtype_t in = GLN_DTYPE_BF16;
    void *ah = make_hp(rng, in, ar, ac, 1.0, 0), *bh = make_hp(rng, in, br, bc, 1.0, 0);
    /* rows of very different magnitudes, so block scales differ from block to block */
    for (int64_t r = 0; r < ar; r += 3)
        for (int64_t c = 0; c < ac; c++) gln_store(ah, in, (size_t)(r * ac + c), 37.0 * gln_load(ah, in, (size_t)(r * ac + c)));
    gln_tensor_t A = gln_tensor_make(in, ar, ac, ah), B = gln_tensor_make(in, br, bc, bh);
    gln_tensor_t Aq = quantize_host_cfg(&A, ca), Bq = quantize_host_cfg(&B, cb);
    void *biash = use_bias ? make_hp(rng, GLN_DTYPE_BF16, 1, n, 1.0, 0) : NULL;
    gln_tensor_t bias = gln_tensor_make(GLN_DTYPE_BF16, 1, n, biash);
    const size_t dn = (size_t)m * (size_t)n, dbytes = dn * gln_dtype_size(d_dtype);
    void *d0 = make_hp(rng, d_dtype, m, n, 1.0, 0);
    void *dref = malloc(dbytes + 1);
    memcpy(dref, d0, dbytes);
    if (!accumulate) gln_poison(dref, d_dtype, dn);
    gln_tensor_t Dh = gln_tensor_make(d_dtype, m, n, dref);
    CHECK_OK(gln_gemm(g_cpu, layout, &Aq, &Bq, &Dh, use_bias ? &bias : NULL, accumulate));
    dtensor_t Ad = dtensor_upload_q(&Aq), Bd = dtensor_upload_q(&Bq);
    gln_twin_t biasd = gln_twin_upload(g_cu, biash, use_bias ? (size_t)n * 2 : 0);
    gln_tensor_t biast = gln_tensor_make(GLN_DTYPE_BF16, 1, n, biasd.d);
    gln_twin_t Dd = gln_twin_upload(g_cu, accumulate ? d0 : NULL, dbytes);
    gln_tensor_t Dt = gln_tensor_make(d_dtype, m, n, Dd.d);
    char what[220];
    snprintf(what, sizeof what, "gemm %s m=%lld n=%lld k=%lld %s(%s%s)x%s(%s%s) -> %s bias=%d acc=%d", layout_name(layout),
             (long long)m, (long long)n, (long long)k, gln_scaling_name(ca->mode), gln_dtype_name(ca->fp8_dtype),
             ca->power_2_scale ? ",pow2" : "", gln_scaling_name(cb->mode), gln_dtype_name(cb->fp8_dtype),
             cb->power_2_scale ? ",pow2" : "", gln_dtype_name(d_dtype), use_bias, accumulate);
    gln_status_t st = gln_gemm(g_cu, layout, &Ad.t, &Bd.t, &Dt, use_bias ? &biast : NULL, accumulate);
    CHECK_MSG(st == GLN_STATUS_SUCCESS, "%s: %s (%s)", what, gln_status_string(st), gln_last_error());
    if (st == GLN_STATUS_SUCCESS) {
        void *got = gln_twin_fetch(g_cu, &Dd, what);
        float *av = copy_values(&Aq, layout != GLN_LAYOUT_TN), *bv = copy_values(&Bq, layout == GLN_LAYOUT_NT);
        float *biasv = NULL, *dv = NULL;
        if (use_bias) biasv = operand_values(&bias);
        if (accumulate) {
            gln_tensor_t dt = gln_tensor_make(d_dtype, m, n, d0);
            dv = operand_values(&dt);
        }
        gemm_compare(what, layout, av, bv, m, n, k, ac, bc, biasv, dv, got, dref, d_dtype, acc_rel);
        free(av), free(bv), free(biasv), free(dv), free(got);
    }
    dtensor_free(&Ad), dtensor_free(&Bd), gln_twin_free(g_cu, &biasd), gln_twin_free(g_cu, &Dd);
    free_host_tensor(&Aq), free_host_tensor(&Bq);
    free(ah), free(bh), free(biash), free(d0), free(dref);
}

static gln_quant_config_t qcfg(gln_scaling_mode_t mode, gln_dtype_t fp8, int pow2) {
    gln_quant_config_t c = GLN_QUANT_CONFIG_INIT;
    c.mode = mode;
    c.fp8_dtype = fp8;
    c.power_2_scale = pow2;
    return c;
}

static void test_gemm_mxfp8(void) {
    gln_rng_t rng = gln_rng_seed(22);
    const gln_dtype_t E4 = GLN_DTYPE_FP8_E4M3, E5 = GLN_DTYPE_FP8_E5M2;
    const gln_quant_config_t w = qcfg(GLN_SCALING_MXFP8_1D, E4, 0), g = qcfg(GLN_SCALING_MXFP8_1D, E5, 0);
    const gln_dtype_t outs[] = {GLN_DTYPE_BF16, GLN_DTYPE_FP32};
    /* The operands are dequantized exactly to bf16 and multiplied with FP32 accumulation: the
     * plain GEMM tolerance applies (acc_rel 0). */
    for (size_t o = 0; o < COUNT(outs); o++)
        for (int v = 0; v < 4; v++) {
            const int bias = v & 1, acc = (v >> 1) & 1;
            for (size_t r = 0; r < COUNT(k_rows); r++)
                gemm_q_case(&rng, GLN_LAYOUT_TN, k_rows[r], 48, 96, &w, &w, outs[o], bias, acc, 0.0);
            gemm_q_case(&rng, GLN_LAYOUT_TN, 17, 40, 4096, &w, &w, outs[o], bias, acc, 0.0);
            gemm_q_case(&rng, GLN_LAYOUT_NN, 17, 48, 256, &w, &g, outs[o], bias, acc, 0.0);
            gemm_q_case(&rng, GLN_LAYOUT_NN, 129, 72, 33, &w, &g, outs[o], bias, acc, 0.0);
            for (size_t r = 0; r < COUNT(k_rows); r++)
                gemm_q_case(&rng, GLN_LAYOUT_NT, 48, 64, k_rows[r], &w, &g, outs[o], 0, acc, 0.0);
            gemm_q_case(&rng, GLN_LAYOUT_NT, 48, 64, 0, &w, &g, outs[o], 0, acc, 0.0);
        }
}

static void test_gemm_block(void) {
    gln_rng_t rng = gln_rng_seed(23);
    const gln_dtype_t E4 = GLN_DTYPE_FP8_E4M3, E5 = GLN_DTYPE_FP8_E5M2;
    const gln_dtype_t outs[] = {GLN_DTYPE_BF16, GLN_DTYPE_FP32};
    /* Raw FP8 values (exact in bf16) multiplied per 128-wide K block with FP32 accumulation,
     * partials scaled in FP32 like the CPU: the plain GEMM tolerance applies (acc_rel 0) — except
     * where CUTLASS's block-scaled kernel takes the call (E4M3 × E4M3 -> bf16, K a multiple of 16:
     * the first TN case), whose FP8 tensor cores accumulate each 128-block with ~14-bit precision
     * before the FP32 promotion (GEMM_FP8_ACC_REL). */
    for (int pow2 = 0; pow2 < 2; pow2++)
        for (size_t o = 0; o < COUNT(outs); o++)
            for (int v = 0; v < 4; v++) {
                const int bias = v & 1, acc = (v >> 1) & 1;
                const gln_quant_config_t w2 = qcfg(GLN_SCALING_BLOCK_2D, E4, pow2);
                const gln_quant_config_t x1 = qcfg(GLN_SCALING_BLOCK_1D, E4, pow2);
                const gln_quant_config_t g1 = qcfg(GLN_SCALING_BLOCK_1D, E5, pow2);
                gemm_q_case(&rng, GLN_LAYOUT_TN, 17, 256, 384, &w2, &x1, outs[o], bias, acc, GEMM_FP8_ACC_REL);
                gemm_q_case(&rng, GLN_LAYOUT_TN, 5, 130, 200, &w2, &x1, outs[o], bias, acc, 0.0);
                gemm_q_case(&rng, GLN_LAYOUT_NN, 129, 200, 256, &w2, &g1, outs[o], bias, acc, 0.0);
                gemm_q_case(&rng, GLN_LAYOUT_NT, 48, 64, 129, &x1, &g1, outs[o], 0, acc, 0.0);
                gemm_q_case(&rng, GLN_LAYOUT_NT, 48, 64, 1, &x1, &g1, outs[o], 0, acc, 0.0);
            }
}

/* Per-tensor FP8 with a reduction dimension that is no multiple of 16: zero-padded copies. */
static void test_gemm_fp8_padded(void) {
    gln_rng_t rng = gln_rng_seed(24);
    const gln_dtype_t E4 = GLN_DTYPE_FP8_E4M3, E5 = GLN_DTYPE_FP8_E5M2;
    const gln_dtype_t outs[] = {GLN_DTYPE_BF16, GLN_DTYPE_FP32};
    for (size_t o = 0; o < COUNT(outs); o++)
        for (int v = 0; v < 4; v++) {
            const int bias = v & 1, acc = (v >> 1) & 1;
            for (size_t r = 0; r < COUNT(k_rows); r++)
                gemm_case(&rng, GLN_LAYOUT_NT, 48, 64, k_rows[r], GLN_DTYPE_BF16, E4, E5, outs[o], GLN_DTYPE_BF16, 0,
                          acc, 1);
            gemm_case(&rng, GLN_LAYOUT_TN, 17, 48, 40, GLN_DTYPE_BF16, E4, E4, outs[o], GLN_DTYPE_BF16, bias, acc, 1);
            gemm_case(&rng, GLN_LAYOUT_NN, 5, 48, 24, GLN_DTYPE_BF16, E4, E5, outs[o], GLN_DTYPE_BF16, bias, acc, 1);
        }
}

/* ---- grouped GEMM and dbias ---------------------------------------------------------------- */

#define NEXP 4

/* Splits sets: mixed with empty experts, one expert taking every token. */
static const int64_t k_splits[][NEXP] = {{5, 0, 17, 1}, {0, 0, 129, 0}, {0, 0, 0, 0}};

static gln_twin_t splits_on_device(const int64_t *splits) { return gln_twin_upload(g_cu, splits, NEXP * sizeof(int64_t)); }

static void grouped_case(gln_rng_t *rng, gln_gemm_layout_t layout, const int64_t *splits, int dev_splits,
                         int use_bias, int accumulate) {
    const int64_t kin = 64, kout = 48, extra = 3; /* extra packed rows beyond the splits sum */
    const gln_dtype_t dt = GLN_DTYPE_BF16;
    int64_t total = 0;
    for (int i = 0; i < NEXP; i++) total += splits[i];
    const int64_t rows = total + extra;
    char what[160];
    snprintf(what, sizeof what, "grouped %s splits {%lld,%lld,%lld,%lld}%s bias=%d acc=%d", layout_name(layout),
             (long long)splits[0], (long long)splits[1], (long long)splits[2], (long long)splits[3],
             dev_splits ? " (device splits)" : "", use_bias, accumulate);
    gln_twin_t dsplits = splits_on_device(splits);
    gln_grouped_gemm_args_t ha = GLN_GROUPED_GEMM_ARGS_INIT, da = GLN_GROUPED_GEMM_ARGS_INIT;
    ha.layout = da.layout = layout;
    ha.accumulate = da.accumulate = accumulate;

    if (layout == GLN_LAYOUT_NT) {
        /* wgrad: A = x [rows, kin], B = dy [rows, kout], D_i = [kout, kin] */
        void *xh = make_hp(rng, dt, rows, kin, 1.0, 0), *dyh = make_hp(rng, dt, rows, kout, 1.0, 0);
        gln_grouped_tensor_t gx = {NEXP, splits, 0, gln_tensor_make(dt, rows, kin, xh)};
        gln_grouped_tensor_t gdy = {NEXP, splits, 0, gln_tensor_make(dt, rows, kout, dyh)};
        const size_t dn = (size_t)kout * (size_t)kin;
        gln_tensor_t dh[NEXP], dd[NEXP];
        void *d0[NEXP];
        gln_twin_t ddb[NEXP];
        for (int i = 0; i < NEXP; i++) {
            d0[i] = make_hp(rng, GLN_DTYPE_FP32, kout, kin, 1.0, 0);
            void *ref = malloc(dn * 4);
            memcpy(ref, d0[i], dn * 4);
            if (!accumulate) gln_poison(ref, GLN_DTYPE_FP32, dn);
            dh[i] = gln_tensor_make(GLN_DTYPE_FP32, kout, kin, ref);
            ddb[i] = gln_twin_upload(g_cu, accumulate ? d0[i] : NULL, dn * 4);
            dd[i] = gln_tensor_make(GLN_DTYPE_FP32, kout, kin, ddb[i].d);
        }
        ha.a_grouped = &gx, ha.b = &gdy, ha.d_list = dh;
        CHECK_OK(gln_grouped_gemm(g_cpu, &ha));
        gln_twin_t xd = gln_twin_upload(g_cu, xh, (size_t)rows * kin * 2), dyd = gln_twin_upload(g_cu, dyh, (size_t)rows * kout * 2);
        gln_grouped_tensor_t cx = {NEXP, dev_splits ? dsplits.d : splits, dev_splits, gln_tensor_make(dt, rows, kin, xd.d)};
        gln_grouped_tensor_t cdy = {NEXP, dev_splits ? dsplits.d : splits, dev_splits,
                                    gln_tensor_make(dt, rows, kout, dyd.d)};
        da.a_grouped = &cx, da.b = &cdy, da.d_list = dd;
        CHECK_OK(gln_grouped_gemm(g_cu, &da));
        int64_t row0 = 0;
        for (int i = 0; i < NEXP; i++) {
            void *got = gln_twin_fetch(g_cu, &ddb[i], what);
            float *a = calloc((size_t)(splits[i] * kin) + 1, 4), *b = calloc((size_t)(splits[i] * kout) + 1, 4);
            for (int64_t e = 0; e < splits[i] * kin; e++) a[e] = (float)gln_load(xh, dt, (size_t)(row0 * kin + e));
            for (int64_t e = 0; e < splits[i] * kout; e++) b[e] = (float)gln_load(dyh, dt, (size_t)(row0 * kout + e));
            gemm_compare(what, layout, a, b, kout, kin, splits[i], kin, kout, NULL, accumulate ? d0[i] : NULL, got,
                         dh[i].data, GLN_DTYPE_FP32, 0.0);
            /* an empty expert's wgrad is exactly 0 (or exactly the old value when accumulating) */
            if (splits[i] == 0) gln_check_bitwise(what, got, accumulate ? d0[i] : dh[i].data, dn * 4);
            row0 += splits[i];
            free(a), free(b), free(got);
            free(dh[i].data), free(d0[i]);
            gln_twin_free(g_cu, &ddb[i]);
        }
        gln_twin_free(g_cu, &xd), gln_twin_free(g_cu, &dyd);
        free(xh), free(dyh);
    } else {
        /* fprop (TN: W_i [kout, kin], x [rows, kin] -> y [rows, kout]) or dgrad (NN: W_i, dy
         * [rows, kout] -> dx [rows, kin]) */
        const int tn = layout == GLN_LAYOUT_TN;
        const int64_t bk = tn ? kin : kout, dcols = tn ? kout : kin;
        void *bh = make_hp(rng, dt, rows, bk, 1.0, 0);
        void *d0 = make_hp(rng, dt, rows, dcols, 1.0, 0);
        const size_t dbytes = (size_t)rows * (size_t)dcols * 2;
        void *dref = malloc(dbytes);
        memcpy(dref, d0, dbytes);
        if (!accumulate) gln_poison(dref, dt, (size_t)(total * dcols)); /* trailing rows: untouched */
        void *wh[NEXP], *biash[NEXP];
        gln_tensor_t wl[NEXP], wd[NEXP], bl[NEXP], bd[NEXP];
        gln_twin_t wdb[NEXP], bdb[NEXP];
        for (int i = 0; i < NEXP; i++) {
            wh[i] = make_hp(rng, dt, kout, kin, 1.0, 0);
            biash[i] = make_hp(rng, dt, 1, kout, 1.0, 0);
            wl[i] = gln_tensor_make(dt, kout, kin, wh[i]);
            bl[i] = gln_tensor_make(dt, 1, kout, biash[i]);
            wdb[i] = gln_twin_upload(g_cu, wh[i], (size_t)(kout * kin) * 2);
            bdb[i] = gln_twin_upload(g_cu, biash[i], (size_t)kout * 2);
            wd[i] = gln_tensor_make(dt, kout, kin, wdb[i].d);
            bd[i] = gln_tensor_make(dt, 1, kout, bdb[i].d);
        }
        gln_grouped_tensor_t gb = {NEXP, splits, 0, gln_tensor_make(dt, rows, bk, bh)};
        gln_grouped_tensor_t gd = {NEXP, splits, 0, gln_tensor_make(dt, rows, dcols, dref)};
        ha.a_list = wl, ha.b = &gb, ha.d_grouped = &gd, ha.bias_list = use_bias ? bl : NULL;
        CHECK_OK(gln_grouped_gemm(g_cpu, &ha));
        gln_twin_t bdv = gln_twin_upload(g_cu, bh, (size_t)rows * (size_t)bk * 2);
        /* device D: old values when accumulating, else poison in the split rows and the old
         * values in the trailing rows (which must survive) */
        void *dinit = malloc(dbytes);
        memcpy(dinit, d0, dbytes);
        if (!accumulate) gln_poison(dinit, dt, (size_t)(total * dcols));
        gln_twin_t ddv = gln_twin_upload(g_cu, dinit, dbytes);
        const int64_t *sp = dev_splits ? (const int64_t *)dsplits.d : splits;
        gln_grouped_tensor_t cb = {NEXP, sp, dev_splits, gln_tensor_make(dt, rows, bk, bdv.d)};
        gln_grouped_tensor_t cd = {NEXP, sp, dev_splits, gln_tensor_make(dt, rows, dcols, ddv.d)};
        da.a_list = wd, da.b = &cb, da.d_grouped = &cd, da.bias_list = use_bias ? bd : NULL;
        CHECK_OK(gln_grouped_gemm(g_cu, &da));
        void *got = gln_twin_fetch(g_cu, &ddv, what);
        int64_t row0 = 0;
        for (int i = 0; i < NEXP; i++) {
            const int64_t mi = splits[i];
            float *a = operand_values(&wl[i]);
            float *b = calloc((size_t)(mi * bk) + 1, 4), *old = calloc((size_t)(mi * dcols) + 1, 4), *bv = NULL;
            for (int64_t e = 0; e < mi * bk; e++) b[e] = (float)gln_load(bh, dt, (size_t)(row0 * bk + e));
            for (int64_t e = 0; e < mi * dcols; e++) old[e] = (float)gln_load(d0, dt, (size_t)(row0 * dcols + e));
            if (use_bias) bv = operand_values(&bl[i]);
            const size_t off = (size_t)(row0 * dcols) * 2;
            gemm_compare(what, layout, a, b, mi, dcols, tn ? kin : kout, kin, bk, bv,
                         accumulate ? old : NULL, (char *)got + off, (char *)dref + off, dt, 0.0);
            row0 += mi;
            free(a), free(b), free(old), free(bv);
        }
        /* trailing rows beyond the splits are neither read nor written */
        gln_check_bitwise("grouped trailing rows", (char *)got + (size_t)(total * dcols) * 2,
                          (char *)d0 + (size_t)(total * dcols) * 2, (size_t)(extra * dcols) * 2);
        free(got), free(dinit);
        for (int i = 0; i < NEXP; i++) {
            free(wh[i]), free(biash[i]);
            gln_twin_free(g_cu, &wdb[i]), gln_twin_free(g_cu, &bdb[i]);
        }
        gln_twin_free(g_cu, &bdv), gln_twin_free(g_cu, &ddv);
        free(bh), free(d0), free(dref);
    }
    gln_twin_free(g_cu, &dsplits);
}

static void test_grouped_gemm(void) {
    gln_rng_t rng = gln_rng_seed(17);
    const gln_gemm_layout_t layouts[] = {GLN_LAYOUT_TN, GLN_LAYOUT_NN, GLN_LAYOUT_NT};
    for (size_t l = 0; l < COUNT(layouts); l++)
        for (size_t s = 0; s < COUNT(k_splits); s++)
            for (int v = 0; v < 8; v++)
                grouped_case(&rng, layouts[l], k_splits[s], v & 1, layouts[l] == GLN_LAYOUT_TN && (v & 2), (v >> 2) & 1);
}

static void test_grouped_dbias(void) {
    gln_rng_t rng = gln_rng_seed(18);
    for (size_t d = 0; d < COUNT(k_hp); d++)
        for (size_t s = 0; s < COUNT(k_splits); s++)
            for (size_t c = 0; c < COUNT(k_cols); c++)
                for (int v = 0; v < 4; v++) {
                    const gln_dtype_t dt = k_hp[d], bt = v & 2 ? GLN_DTYPE_FP32 : GLN_DTYPE_BF16;
                    const int accumulate = v & 1, dev_splits = (int)(c + s) % 2;
                    const int64_t cols = k_cols[c];
                    int64_t rows = 2;
                    for (int i = 0; i < NEXP; i++) rows += k_splits[s][i];
                    void *xh = make_hp(&rng, dt, rows, cols, 1.0, 0);
                    gln_grouped_tensor_t gh = {NEXP, k_splits[s], 0, gln_tensor_make(dt, rows, cols, xh)};
                    const size_t bb = (size_t)cols * gln_dtype_size(bt);
                    gln_tensor_t dbh[NEXP], dbd[NEXP];
                    void *old[NEXP];
                    gln_twin_t dbb[NEXP];
                    for (int i = 0; i < NEXP; i++) {
                        old[i] = make_hp(&rng, bt, 1, cols, 1.0, 0);
                        void *ref = malloc(bb);
                        memcpy(ref, old[i], bb);
                        if (!accumulate) gln_poison(ref, bt, (size_t)cols);
                        dbh[i] = gln_tensor_make(bt, 1, cols, ref);
                        dbb[i] = gln_twin_upload(g_cu, accumulate ? old[i] : NULL, bb);
                        dbd[i] = gln_tensor_make(bt, 1, cols, dbb[i].d);
                    }
                    CHECK_OK(gln_grouped_dbias(g_cpu, &gh, dbh, accumulate));
                    gln_twin_t xd = gln_twin_upload(g_cu, xh, (size_t)rows * (size_t)cols * gln_dtype_size(dt));
                    gln_twin_t sd = splits_on_device(k_splits[s]);
                    gln_grouped_tensor_t gd = {NEXP, dev_splits ? sd.d : k_splits[s], dev_splits,
                                               gln_tensor_make(dt, rows, cols, xd.d)};
                    CHECK_OK(gln_grouped_dbias(g_cu, &gd, dbd, accumulate));
                    for (int i = 0; i < NEXP; i++) {
                        char what[120];
                        snprintf(what, sizeof what, "dbias %s->%s cols %lld member %d acc=%d", gln_dtype_name(dt),
                                 gln_dtype_name(bt), (long long)cols, i, accumulate);
                        check_dev_bitwise(what, dbb[i], dbh[i].data);
                        free(dbh[i].data), free(old[i]);
                        gln_twin_free(g_cu, &dbb[i]);
                    }
                    gln_twin_free(g_cu, &xd), gln_twin_free(g_cu, &sd);
                    free(xh);
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
    GLN_CASE(test_gemm_hp), GLN_CASE(test_gemm_fp8), GLN_CASE(test_grouped_gemm),
    GLN_CASE(test_grouped_dbias), GLN_CASE(test_errors), GLN_CASE(test_quantize_block),
    GLN_CASE(test_grouped_quantize), GLN_CASE(test_gemm_mxfp8), GLN_CASE(test_gemm_block),
    GLN_CASE(test_gemm_fp8_padded))

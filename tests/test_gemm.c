/* gln_gemm and gln_grouped_gemm on the CPU backend against a float64 reference computed from
 * the exact (dequantized) operand values.
 *
 * Error model (what the tolerance allows and nothing else): the FP32 accumulation of k
 * products (any summation order, FMA or not) is within γ·Σ|a·b| with γ = (k + extra)·2^-24,
 * then ONE rounding to D's dtype adds at most u_T·|result|.  Outputs are poisoned with NaN
 * (or hold random old values when accumulating) and guarded by sentinel bytes. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tensor/tensor.h"

/* Unit roundoff (half an ulp at 1) of each output dtype: 24, 8 and 11 significant bits. */
#define U_FP32 0x1p-24
#define U_BF16 0x1p-8
#define U_FP16 0x1p-11
/* Absolute floor: half the smallest subnormal of the output dtype (values below it round to 0). */
#define ATOL_FP32 0x1p-150
#define ATOL_BF16 0x1p-134
#define ATOL_FP16 0x1p-25
/* FP32 roundings on top of the k-term sum: alpha (scale_inv product and multiply), bias, old D,
 * and for per-block scaling two per block (scale product, multiply) plus one per block add. */
#define EXTRA_ROUNDINGS 4
#define BLOCK_ROUNDINGS_PER_BLOCK 3

static double unit_roundoff(gln_dtype_t dt) {
    return dt == GLN_DTYPE_FP32 ? U_FP32 : dt == GLN_DTYPE_BF16 ? U_BF16 : U_FP16;
}
static double atol_of(gln_dtype_t dt) {
    return dt == GLN_DTYPE_FP32 ? ATOL_FP32 : dt == GLN_DTYPE_BF16 ? ATOL_BF16 : ATOL_FP16;
}

static const gln_gemm_layout_t LAYOUTS[3] = {GLN_LAYOUT_TN, GLN_LAYOUT_NN, GLN_LAYOUT_NT};
static const char *LAYOUT_NAMES[3] = {"TN", "NN", "NT"};
static const gln_dtype_t HP[3] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};

static gln_context_t *make_ctx(void) {
    gln_context_t *ctx = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    return ctx;
}

/* ---- operands ----------------------------------------------------------------------------- */

/* Logical shapes of A and B for D [m, n] with reduction k. */
static void operand_shapes(gln_gemm_layout_t layout, int64_t m, int64_t n, int64_t k, int64_t *ar,
                           int64_t *ac, int64_t *br, int64_t *bc) {
    switch (layout) {
    case GLN_LAYOUT_TN: *ar = n, *ac = k, *br = m, *bc = k; break;
    case GLN_LAYOUT_NN: *ar = k, *ac = n, *br = m, *bc = k; break;
    default: *ar = k, *ac = n, *br = k, *bc = m; break;
    }
}

/* A test operand: the descriptor handed to the library, its buffers, and the exact logical
 * values of the copy the GEMM reads (double, row-major [rows, cols]). */
typedef struct operand {
    gln_tensor_t t;
    double *v;
    void *buf[6];
} operand_t;

static void operand_free(operand_t *o) {
    for (int i = 0; i < 6; i++) gln_test_free(o->buf[i]);
    free(o->v);
    memset(o, 0, sizeof *o);
}

/* Random high-precision values: normal, magnitude varying by row and column block so that
 * block scales differ from block to block. */
static double sample(gln_rng_t *rng, int64_t r, int64_t c) {
    double mag = 1.0 + (double)((r * 7 + (c / 32) * 3) % 11) / 2.0;
    return gln_rng_normal(rng) * mag;
}

static operand_t make_hp(gln_rng_t *rng, gln_dtype_t dt, int64_t rows, int64_t cols) {
    operand_t o;
    memset(&o, 0, sizeof o);
    size_t n = (size_t)(rows * cols);
    o.buf[0] = gln_test_alloc(n * gln_dtype_size(dt));
    o.t = gln_tensor_make(dt, rows, cols, o.buf[0]);
    o.v = malloc((n ? n : 1) * sizeof(double));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            size_t i = (size_t)(r * cols + c);
            gln_store(o.buf[0], dt, i, sample(rng, r, c));
            o.v[i] = gln_load(o.buf[0], dt, i);
        }
    return o;
}

/* Exact value of logical element (r, c) of one copy of a quantized tensor, decoded here
 * independently of the library's dequantizer: raw FP8 value times its decode scale. */
static double exact_quant_value(const gln_tensor_t *t, int columnwise, int64_t r, int64_t c) {
    const uint8_t *q = columnwise ? t->col_data : t->data;
    const int transposed = columnwise && t->scaling != GLN_SCALING_MXFP8_1D;
    double raw = gln_fp8_to_fp32(transposed ? q[c * t->rows + r] : q[r * t->cols + c], t->dtype);
    int64_t si = gln_scale_index(t->scaling, t->rows, t->cols, columnwise, r, c);
    const void *s = columnwise ? t->col_scale_inv : t->scale_inv;
    double scale = t->scaling == GLN_SCALING_MXFP8_1D ? ldexp(1.0, (int)((const uint8_t *)s)[si] - 127)
                                                      : (double)((const float *)s)[si];
    return raw * scale; /* exact in double: 4 significant bits times 24 */
}

static void exact_values(const gln_tensor_t *t, int columnwise, double *v) {
    for (int64_t r = 0; r < t->rows; r++)
        for (int64_t c = 0; c < t->cols; c++)
            v[r * t->cols + c] = exact_quant_value(t, columnwise, r, c);
}

/* Allocate the buffers of a quantized [rows, cols] tensor for cfg (both copies). */
static void alloc_quant(gln_tensor_t *q, void **buf, const gln_quant_config_t *cfg, int64_t rows,
                        int64_t cols, int num_tensor_scales) {
    gln_quant_layout_t L;
    CHECK_OK(gln_quant_layout(cfg->mode, cfg->fp8_dtype, rows, cols, &L));
    memset(q, 0, sizeof *q);
    q->dtype = cfg->fp8_dtype;
    q->rows = rows;
    q->cols = cols;
    q->scaling = cfg->mode;
    buf[0] = q->data = gln_test_alloc(L.data_bytes);
    buf[1] = q->col_data = gln_test_alloc(L.col_data_bytes);
    buf[2] = q->scale_inv = gln_test_alloc(L.scale_bytes);
    buf[3] = q->col_scale_inv = gln_test_alloc(L.col_scale_bytes);
    if (cfg->mode == GLN_SCALING_TENSOR) {
        buf[4] = q->amax = gln_test_alloc(sizeof(float) * (size_t)num_tensor_scales);
        buf[5] = q->scale = gln_test_alloc(sizeof(float) * (size_t)num_tensor_scales);
    }
}

/* Quantize random high-precision data with gln_quantize (both copies); v holds the exact
 * values of the copy `columnwise`. */
static operand_t make_quant(gln_context_t *ctx, gln_rng_t *rng, const gln_quant_config_t *cfg,
                            int64_t rows, int64_t cols, int columnwise) {
    operand_t hp = make_hp(rng, GLN_DTYPE_FP32, rows, cols), o;
    memset(&o, 0, sizeof o);
    alloc_quant(&o.t, o.buf, cfg, rows, cols, 1);
    CHECK_OK(gln_quantize(ctx, cfg, &hp.t, &o.t));
    o.v = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof(double));
    exact_values(&o.t, columnwise, o.v);
    operand_free(&hp);
    return o;
}

static gln_quant_config_t quant_cfg(gln_scaling_mode_t mode, gln_dtype_t fp8, int pow2) {
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.mode = mode;
    cfg.fp8_dtype = fp8;
    cfg.rowwise = 1;
    cfg.columnwise = 1;
    cfg.power_2_scale = pow2;
    return cfg;
}

/* ---- reference and checks ----------------------------------------------------------------- */

/* ref = Σ_l b(i,l)·a(l,j) (+ bias[j]) (+ old[i,j]); mag = the same sum of magnitudes. */
static void reference(gln_gemm_layout_t layout, const double *A, const double *B, int64_t m, int64_t n,
                      int64_t k, const double *bias, const double *old, double *ref, double *mag) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0, a_s = 0;
            for (int64_t l = 0; l < k; l++) {
                double a = layout == GLN_LAYOUT_TN ? A[j * k + l] : A[l * n + j];
                double b = layout == GLN_LAYOUT_NT ? B[l * m + i] : B[i * k + l];
                s += a * b;
                a_s += fabs(a * b);
            }
            if (bias) s += bias[j], a_s += fabs(bias[j]);
            if (old) s += old[i * n + j], a_s += fabs(old[i * n + j]);
            ref[i * n + j] = s;
            mag[i * n + j] = a_s;
        }
}

/* |got - ref| <= u_T·|ref| + (1 + u_T)·γ·mag + atol_T for every element; no NaN. */
static void check_result(const char *what, const void *got, gln_dtype_t dt, const double *ref,
                         const double *mag, size_t count, int64_t k, int blockwise) {
    const double u = unit_roundoff(dt);
    double roundings = (double)k + EXTRA_ROUNDINGS;
    if (blockwise) roundings += BLOCK_ROUNDINGS_PER_BLOCK * (double)((k + 127) / 128);
    const double gamma = roundings * U_FP32;
    int reported = 0;
    for (size_t i = 0; i < count; i++) {
        double g = gln_load(got, dt, i);
        double tol = u * fabs(ref[i]) + (1 + u) * gamma * mag[i] + atol_of(dt);
        if (!(fabs(g - ref[i]) <= tol) && reported++ < 5)
            gln_test_fail_at(__FILE__, __LINE__, "%s[%zu]: got %.9g want %.9g (tol %.3g)", what, i, g,
                             ref[i], tol);
    }
}

/* An output buffer [rows, cols] of dt: random old values (returned in *old) when
 * accumulating, else NaN. */
static void *make_output(gln_rng_t *rng, gln_dtype_t dt, int64_t rows, int64_t cols, int accumulate,
                         double **old) {
    size_t n = (size_t)(rows * cols);
    void *d = gln_test_alloc(n * gln_dtype_size(dt));
    *old = NULL;
    if (accumulate) {
        *old = malloc((n ? n : 1) * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            gln_store(d, dt, i, gln_rng_normal(rng) * 4.0);
            (*old)[i] = gln_load(d, dt, i);
        }
    } else {
        gln_poison(d, dt, n);
    }
    return d;
}

/* One GEMM of prepared operands into a fresh D (dt), checked against the reference. */
static void run_and_check(gln_context_t *ctx, gln_rng_t *rng, const char *what, gln_gemm_layout_t layout,
                          operand_t *A, operand_t *B, int64_t m, int64_t n, int64_t k, gln_dtype_t dt,
                          int with_bias, int accumulate, int blockwise) {
    operand_t bias;
    memset(&bias, 0, sizeof bias);
    if (with_bias) bias = make_hp(rng, GLN_DTYPE_BF16, 1, n);
    double *old;
    void *d = make_output(rng, dt, m, n, accumulate, &old);
    gln_tensor_t D = gln_tensor_make(dt, m, n, d);
    size_t cnt = (size_t)(m * n);
    double *ref = malloc((cnt ? cnt : 1) * sizeof(double)), *mag = malloc((cnt ? cnt : 1) * sizeof(double));
    reference(layout, A->v, B->v, m, n, k, with_bias ? bias.v : NULL, old, ref, mag);
    CHECK_OK(gln_gemm(ctx, layout, &A->t, &B->t, &D, with_bias ? &bias.t : NULL, accumulate));
    check_result(what, d, dt, ref, mag, cnt, k, blockwise);
    CHECK_MSG(gln_guard_ok(d), "%s: guard bytes after D overwritten", what);
    gln_test_free(d);
    free(old);
    free(ref);
    free(mag);
    operand_free(&bias);
}

/* ---- high-precision GEMMs ------------------------------------------------------------------ */

static const int64_t SHAPES[][3] = {
    {1, 3, 7}, {5, 33, 19}, {17, 10, 130}, {129, 21, 67}, {4, 1, 1}, {2, 257, 5},
};

static void test_gemm_high_precision(void) {
    gln_context_t *ctx = make_ctx();
    gln_rng_t rng = gln_rng_seed(11);
    char what[160];
    for (int li = 0; li < 3; li++)
        for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++)
            for (int di = 0; di < 3; di++)
                for (int acc = 0; acc < 2; acc++)
                    for (int bias = 0; bias < 2; bias++) {
                        const int64_t m = SHAPES[s][0], n = SHAPES[s][1], k = SHAPES[s][2];
                        int64_t ar, ac, br, bc;
                        operand_shapes(LAYOUTS[li], m, n, k, &ar, &ac, &br, &bc);
                        /* input dtypes cycle through fp32 / bf16 / fp16 and one mixed pair */
                        gln_dtype_t adt = HP[(s + di) % 3], bdt = HP[(s + di + acc) % 3];
                        operand_t A = make_hp(&rng, adt, ar, ac), B = make_hp(&rng, bdt, br, bc);
                        snprintf(what, sizeof what, "%s m%lld n%lld k%lld A %s B %s D %s acc%d bias%d",
                                 LAYOUT_NAMES[li], (long long)m, (long long)n, (long long)k,
                                 gln_dtype_name(adt), gln_dtype_name(bdt), gln_dtype_name(HP[di]), acc,
                                 bias);
                        run_and_check(ctx, &rng, what, LAYOUTS[li], &A, &B, m, n, k, HP[di], bias, acc, 0);
                        operand_free(&A);
                        operand_free(&B);
                    }
    gln_context_destroy(ctx);
}

/* Zero-size operands: m = 0 writes nothing; k = 0 gives D = bias (+ old D when accumulating). */
static void test_gemm_zero_sizes(void) {
    gln_context_t *ctx = make_ctx();
    gln_rng_t rng = gln_rng_seed(12);
    char what[120];
    static const int64_t shapes[][3] = {{0, 5, 7}, {5, 0, 7}, {5, 6, 0}, {0, 0, 0}, {3, 4, 0}};
    for (int li = 0; li < 3; li++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int acc = 0; acc < 2; acc++)
                for (int bias = 0; bias < 2; bias++) {
                    const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                    int64_t ar, ac, br, bc;
                    operand_shapes(LAYOUTS[li], m, n, k, &ar, &ac, &br, &bc);
                    operand_t A = make_hp(&rng, GLN_DTYPE_BF16, ar, ac), B = make_hp(&rng, GLN_DTYPE_FP32, br, bc);
                    snprintf(what, sizeof what, "%s m%lld n%lld k%lld acc%d bias%d", LAYOUT_NAMES[li],
                             (long long)m, (long long)n, (long long)k, acc, bias);
                    run_and_check(ctx, &rng, what, LAYOUTS[li], &A, &B, m, n, k, GLN_DTYPE_BF16, bias, acc, 0);
                    operand_free(&A);
                    operand_free(&B);
                }
    gln_context_destroy(ctx);
}

/* ---- quantized GEMMs ---------------------------------------------------------------------- */

static int a_columnwise(gln_gemm_layout_t l) { return l != GLN_LAYOUT_TN; }
static int b_columnwise(gln_gemm_layout_t l) { return l == GLN_LAYOUT_NT; }

typedef struct quant_case {
    const char *name;
    gln_scaling_mode_t mode_a, mode_b;
    gln_dtype_t fp8_a, fp8_b;
    int pow2_a, pow2_b;
    int blockwise; /* the GEMM applies scales per K block (non-power-of-two block scales) */
} quant_case_t;

static const quant_case_t QUANT_CASES[] = {
    {"tensor e4m3 x e4m3", GLN_SCALING_TENSOR, GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP8_E4M3, 0, 0, 0},
    {"tensor e4m3 x e5m2", GLN_SCALING_TENSOR, GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP8_E5M2, 0, 0, 0},
    {"mxfp8 e4m3 x e5m2", GLN_SCALING_MXFP8_1D, GLN_SCALING_MXFP8_1D, GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP8_E5M2, 0, 0, 0},
    {"mxfp8 e4m3 x e4m3", GLN_SCALING_MXFP8_1D, GLN_SCALING_MXFP8_1D, GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP8_E4M3, 0, 0, 0},
    {"block 2d x 1d pow2", GLN_SCALING_BLOCK_2D, GLN_SCALING_BLOCK_1D, GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP8_E4M3, 1, 1, 0},
    {"block 1d x 1d pow2", GLN_SCALING_BLOCK_1D, GLN_SCALING_BLOCK_1D, GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP8_E4M3, 1, 1, 0},
    {"block 2d x 1d fp32", GLN_SCALING_BLOCK_2D, GLN_SCALING_BLOCK_1D, GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP8_E4M3, 0, 0, 1},
    {"block 1d x 1d fp32", GLN_SCALING_BLOCK_1D, GLN_SCALING_BLOCK_1D, GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP8_E4M3, 0, 0, 1},
    {"block pow2 x fp32", GLN_SCALING_BLOCK_2D, GLN_SCALING_BLOCK_1D, GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP8_E4M3, 1, 0, 1},
};

static const int64_t QSHAPES[][3] = {{1, 3, 7}, {5, 33, 130}, {17, 129, 300}, {129, 21, 257}, {33, 64, 128}};

static void test_gemm_quantized(void) {
    gln_context_t *ctx = make_ctx();
    gln_rng_t rng = gln_rng_seed(13);
    char what[200];
    for (size_t qi = 0; qi < sizeof QUANT_CASES / sizeof QUANT_CASES[0]; qi++) {
        const quant_case_t *q = &QUANT_CASES[qi];
        gln_quant_config_t ca = quant_cfg(q->mode_a, q->fp8_a, q->pow2_a);
        gln_quant_config_t cb = quant_cfg(q->mode_b, q->fp8_b, q->pow2_b);
        for (int li = 0; li < 3; li++)
            for (size_t s = 0; s < sizeof QSHAPES / sizeof QSHAPES[0]; s++) {
                const int64_t m = QSHAPES[s][0], n = QSHAPES[s][1], k = QSHAPES[s][2];
                int64_t ar, ac, br, bc;
                operand_shapes(LAYOUTS[li], m, n, k, &ar, &ac, &br, &bc);
                operand_t A = make_quant(ctx, &rng, &ca, ar, ac, a_columnwise(LAYOUTS[li]));
                operand_t B = make_quant(ctx, &rng, &cb, br, bc, b_columnwise(LAYOUTS[li]));
                gln_dtype_t dt = HP[s % 3];
                int acc = (int)(s % 2), bias = (int)((s + qi) % 2);
                snprintf(what, sizeof what, "%s %s m%lld n%lld k%lld D %s acc%d bias%d", q->name,
                         LAYOUT_NAMES[li], (long long)m, (long long)n, (long long)k, gln_dtype_name(dt),
                         acc, bias);
                /* a short reduction (k < 128) has one block: still exact-per-block arithmetic */
                run_and_check(ctx, &rng, what, LAYOUTS[li], &A, &B, m, n, k, dt, bias, acc, q->blockwise);
                operand_free(&A);
                operand_free(&B);
            }
    }
    gln_context_destroy(ctx);
}

/* Per-tensor FP8: D must be sgemm(raw A, raw B) · (scale_inv_a · scale_inv_b) — NOT the GEMM of
 * separately dequantized operands.  Small FP8 values make every raw sum exact in FP32, so the
 * expected result is exactly fl(fl(sa·sb)·S_raw) whatever the summation order; the scales are
 * chosen so that dequantizing first gives a different FP32 result. */
static void test_gemm_tensor_scale_in_alpha(void) {
    gln_context_t *ctx = make_ctx();
    enum { M = 3, N = 4, K = 6 };
    const float sa = 1.0f / 3.0f, sb = 1.0f / 7.0f; /* not powers of two: dequantizing rounds */
    uint8_t *a = gln_test_alloc(N * K), *b = gln_test_alloc(M * K);
    float *sa_buf = gln_test_alloc(sizeof(float)), *sb_buf = gln_test_alloc(sizeof(float));
    *sa_buf = sa;
    *sb_buf = sb;
    static const float vals[] = {1.0f, -1.5f, 2.0f, 3.0f, -0.75f, 5.0f, 7.0f, -6.0f};
    for (int i = 0; i < N * K; i++) a[i] = gln_fp32_to_fp8(vals[(i * 3) % 8], GLN_DTYPE_FP8_E4M3);
    for (int i = 0; i < M * K; i++) b[i] = gln_fp32_to_fp8(vals[(i * 5 + 1) % 8], GLN_DTYPE_FP8_E4M3);
    gln_tensor_t A = gln_tensor_make(GLN_DTYPE_FP8_E4M3, N, K, a), B = gln_tensor_make(GLN_DTYPE_FP8_E4M3, M, K, b);
    A.scaling = B.scaling = GLN_SCALING_TENSOR;
    A.scale_inv = sa_buf;
    B.scale_inv = sb_buf;
    float *d = gln_test_alloc(M * N * sizeof(float));
    gln_poison(d, GLN_DTYPE_FP32, M * N);
    gln_tensor_t D = gln_tensor_make(GLN_DTYPE_FP32, M, N, d);
    CHECK_OK(gln_gemm(ctx, GLN_LAYOUT_TN, &A, &B, &D, NULL, 0));
    const float alpha = sa * sb;
    int differs = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double raw = 0, deq = 0;
            for (int l = 0; l < K; l++) {
                float xa = gln_fp8_to_fp32(a[j * K + l], GLN_DTYPE_FP8_E4M3);
                float xb = gln_fp8_to_fp32(b[i * K + l], GLN_DTYPE_FP8_E4M3);
                raw += (double)xa * xb;                       /* exact */
                deq += (double)(xa * sa) * (double)(xb * sb); /* dequantize-first operands */
            }
            const float want = alpha * (float)raw; /* (float)raw is exact */
            CHECK_MSG(d[i * N + j] == want, "D[%d,%d] = %.9g, want raw-sum x alpha %.9g", i, j, d[i * N + j],
                      want);
            differs += (float)deq != want;
        }
    CHECK_MSG(differs > 0, "test data does not distinguish scale-in-alpha from dequantize-first");
    CHECK(gln_guard_ok(d));
    gln_test_free(a);
    gln_test_free(b);
    gln_test_free(sa_buf);
    gln_test_free(sb_buf);
    gln_test_free(d);
    gln_context_destroy(ctx);
}

/* ---- grouped GEMMs ------------------------------------------------------------------------ */

/* A grouped operand: N members packed in `rows` rows (rows >= Σ splits), exact values of the
 * whole packed tensor for the copy the GEMM reads. */
typedef struct grouped {
    gln_grouped_tensor_t g;
    operand_t o;
} grouped_t;

static grouped_t make_grouped(gln_context_t *ctx, gln_rng_t *rng, const gln_quant_config_t *cfg, gln_dtype_t hp,
                              int32_t num, const int64_t *splits, int64_t rows, int64_t cols, int columnwise) {
    grouped_t G;
    memset(&G, 0, sizeof G);
    G.g.num = num;
    G.g.splits = splits;
    if (!cfg) {
        G.o = make_hp(rng, hp, rows, cols);
        G.g.packed = G.o.t;
        return G;
    }
    int64_t *ro = malloc(sizeof(int64_t) * (size_t)(num + 1)), *co = malloc(sizeof(int64_t) * (size_t)(num + 1));
    CHECK_OK(gln_grouped_scale_offsets(cfg->mode, num, splits, cols, ro, co));
    operand_t hpo = make_hp(rng, GLN_DTYPE_FP32, rows, cols);
    gln_grouped_tensor_t in = {num, splits, 0, hpo.t};
    gln_tensor_t *q = &G.o.t;
    memset(q, 0, sizeof *q);
    q->dtype = cfg->fp8_dtype;
    q->rows = rows;
    q->cols = cols;
    q->scaling = cfg->mode;
    size_t se = cfg->mode == GLN_SCALING_MXFP8_1D ? 1 : sizeof(float);
    G.o.buf[0] = q->data = gln_test_alloc((size_t)(rows * cols));
    G.o.buf[1] = q->col_data = gln_test_alloc((size_t)(rows * cols));
    G.o.buf[2] = q->scale_inv = gln_test_alloc(se * (size_t)ro[num]);
    G.o.buf[3] = q->col_scale_inv = gln_test_alloc(se * (size_t)co[num]);
    if (cfg->mode == GLN_SCALING_TENSOR) {
        G.o.buf[4] = q->amax = gln_test_alloc(sizeof(float) * (size_t)num);
        G.o.buf[5] = q->scale = gln_test_alloc(sizeof(float) * (size_t)num);
    }
    G.g.packed = *q;
    CHECK_OK(gln_grouped_quantize(ctx, cfg, &in, &G.g));
    /* Exact values member by member (each member has its own scale grid). */
    G.o.v = calloc((size_t)(rows * cols > 0 ? rows * cols : 1), sizeof(double));
    int64_t row0 = 0;
    for (int32_t i = 0; i < num; i++) {
        gln_tensor_t mem;
        CHECK_OK(gln_grouped_member(&G.g, i, &mem));
        exact_values(&mem, columnwise, G.o.v + row0 * cols);
        row0 += splits[i];
    }
    operand_free(&hpo);
    free(ro);
    free(co);
    return G;
}

/* A grouped output [rows, cols]: member rows NaN (or old values), rows past Σ splits hold a
 * sentinel (96.5, exact in every dtype) that must survive. */
#define TAIL_SENTINEL 96.5

typedef struct grouped_case {
    gln_gemm_layout_t layout;
    int32_t num;
    int64_t splits[6];
    int64_t extra_rows; /* allocated rows past Σ splits */
    int64_t n, k;       /* TN/NN: D cols n, reduction k.  NT: D_i is [k, n] */
    const quant_case_t *quant;
    gln_dtype_t in_dt, out_dt;
    int bias, accumulate;
} grouped_case_t;

static void run_grouped_case(gln_context_t *ctx, const grouped_case_t *gc) {
    gln_rng_t rng = gln_rng_seed(100 + (uint64_t)gc->layout * 7 + (uint64_t)gc->splits[0]);
    const gln_gemm_layout_t L = gc->layout;
    const int32_t N = gc->num;
    int64_t sum = 0;
    for (int32_t i = 0; i < N; i++) sum += gc->splits[i];
    const int64_t rows = sum + gc->extra_rows;
    char what[200];
    const char *qname = gc->quant ? gc->quant->name : gln_dtype_name(gc->in_dt);
    gln_quant_config_t ca, cb;
    if (gc->quant) {
        ca = quant_cfg(gc->quant->mode_a, gc->quant->fp8_a, gc->quant->pow2_a);
        cb = quant_cfg(gc->quant->mode_b, gc->quant->fp8_b, gc->quant->pow2_b);
    }
    const gln_quant_config_t *pa = gc->quant ? &ca : NULL, *pb = gc->quant ? &cb : NULL;

    gln_grouped_gemm_args_t args = GLN_GROUPED_GEMM_ARGS_INIT;
    args.layout = L;
    args.accumulate = gc->accumulate;
    operand_t As[6], biases[6];
    memset(As, 0, sizeof As);
    memset(biases, 0, sizeof biases);
    gln_tensor_t a_list[6], bias_list[6], d_list[6], d_split[6];
    grouped_t GA, GB;
    memset(&GA, 0, sizeof GA);
    void *dg = NULL, *ds = NULL;
    void *dl[6] = {0}, *dls[6] = {0};
    double *old[6] = {0};
    const size_t osz = gln_dtype_size(gc->out_dt);

    if (L == GLN_LAYOUT_NT) {
        /* A = x [rows, n], B = dy [rows, k], D_i = [k, n] */
        GA = make_grouped(ctx, &rng, pa, gc->in_dt, N, gc->splits, rows, gc->n, 1);
        GB = make_grouped(ctx, &rng, pb, gc->in_dt, N, gc->splits, rows, gc->k, 1);
        args.a_grouped = &GA.g;
        args.b = &GB.g;
        for (int32_t i = 0; i < N; i++) {
            dl[i] = make_output(&rng, gc->out_dt, gc->k, gc->n, gc->accumulate, &old[i]);
            dls[i] = gln_test_alloc((size_t)(gc->k * gc->n) * osz);
            memcpy(dls[i], dl[i], (size_t)(gc->k * gc->n) * osz);
            d_list[i] = gln_tensor_make(gc->out_dt, gc->k, gc->n, dl[i]);
            d_split[i] = gln_tensor_make(gc->out_dt, gc->k, gc->n, dls[i]);
        }
        args.d_list = d_list;
    } else {
        /* A_i = W_i ([n, k] for TN, [k, n] for NN), B = [rows, k], D = [rows, n] */
        for (int32_t i = 0; i < N; i++) {
            int64_t ar = L == GLN_LAYOUT_TN ? gc->n : gc->k, ac = L == GLN_LAYOUT_TN ? gc->k : gc->n;
            As[i] = pa ? make_quant(ctx, &rng, pa, ar, ac, a_columnwise(L)) : make_hp(&rng, gc->in_dt, ar, ac);
            a_list[i] = As[i].t;
            if (gc->bias) {
                biases[i] = make_hp(&rng, GLN_DTYPE_FP32, 1, gc->n);
                bias_list[i] = biases[i].t;
            }
        }
        GB = make_grouped(ctx, &rng, pb, gc->in_dt, N, gc->splits, rows, gc->k, 0);
        args.a_list = a_list;
        args.b = &GB.g;
        args.bias_list = gc->bias ? bias_list : NULL;
        dg = make_output(&rng, gc->out_dt, rows, gc->n, gc->accumulate, &old[0]);
        for (int64_t r = sum; r < rows; r++)
            for (int64_t j = 0; j < gc->n; j++) gln_store(dg, gc->out_dt, (size_t)(r * gc->n + j), TAIL_SENTINEL);
        ds = gln_test_alloc((size_t)(rows * gc->n) * osz);
        memcpy(ds, dg, (size_t)(rows * gc->n) * osz);
    }
    gln_grouped_tensor_t DG = {N, gc->splits, 0, gln_tensor_make(gc->out_dt, rows, gc->n, dg)};
    if (L != GLN_LAYOUT_NT) args.d_grouped = &DG;

    /* the grouped path */
    CHECK_OK(gln_grouped_gemm(ctx, &args));

    /* the split path: N gln_gemm calls on member views, into a copy of the initial output */
    gln_grouped_tensor_t DS = {N, gc->splits, 0, gln_tensor_make(gc->out_dt, rows, gc->n, ds)};
    int64_t row0 = 0;
    for (int32_t i = 0; i < N; i++) {
        gln_tensor_t bm, am, dm;
        CHECK_OK(gln_grouped_member(&GB.g, i, &bm));
        if (L == GLN_LAYOUT_NT) {
            CHECK_OK(gln_grouped_member(&GA.g, i, &am));
            CHECK_OK(gln_gemm(ctx, L, &am, &bm, &d_split[i], NULL, gc->accumulate));
        } else {
            CHECK_OK(gln_grouped_member(&DS, i, &dm));
            CHECK_OK(gln_gemm(ctx, L, &a_list[i], &bm, &dm, gc->bias ? &bias_list[i] : NULL, gc->accumulate));
        }
        /* reference for expert i */
        const int64_t mi = gc->splits[i];
        int64_t m = L == GLN_LAYOUT_NT ? gc->k : mi, k = L == GLN_LAYOUT_NT ? mi : gc->k;
        size_t cnt = (size_t)(m * gc->n);
        double *ref = malloc((cnt ? cnt : 1) * sizeof(double)), *mag = malloc((cnt ? cnt : 1) * sizeof(double));
        snprintf(what, sizeof what, "grouped %s %s expert %d (m_i %lld) D %s acc%d bias%d", LAYOUT_NAMES[L],
                 qname, (int)i, (long long)mi, gln_dtype_name(gc->out_dt), gc->accumulate, gc->bias);
        if (L == GLN_LAYOUT_NT) {
            reference(L, GA.o.v + row0 * gc->n, GB.o.v + row0 * gc->k, m, gc->n, k, NULL, old[i], ref, mag);
            check_result(what, dl[i], gc->out_dt, ref, mag, cnt, k, gc->quant && gc->quant->blockwise);
            CHECK_MSG(gln_check_bitwise(what, dl[i], dls[i], cnt * osz), "%s: grouped != split", what);
            CHECK_MSG(gln_guard_ok(dl[i]), "%s: guard", what);
        } else {
            reference(L, As[i].v, GB.o.v + row0 * gc->k, m, gc->n, k, gc->bias ? biases[i].v : NULL,
                      old[0] ? old[0] + row0 * gc->n : NULL, ref, mag);
            check_result(what, (char *)dg + (size_t)(row0 * gc->n) * osz, gc->out_dt, ref, mag, cnt, k,
                         gc->quant && gc->quant->blockwise);
        }
        free(ref);
        free(mag);
        row0 += mi;
    }
    if (L != GLN_LAYOUT_NT) {
        snprintf(what, sizeof what, "grouped %s %s D %s: grouped vs split", LAYOUT_NAMES[L], qname,
                 gln_dtype_name(gc->out_dt));
        gln_check_bitwise(what, dg, ds, (size_t)(rows * gc->n) * osz);
        for (int64_t r = sum; r < rows; r++)
            for (int64_t j = 0; j < gc->n; j++) {
                double v = gln_load(dg, gc->out_dt, (size_t)(r * gc->n + j));
                CHECK_MSG(v == TAIL_SENTINEL, "%s: row %lld past the splits was written (%g)", what,
                          (long long)r, v);
            }
        CHECK_MSG(gln_guard_ok(dg), "%s: guard", what);
    }

    for (int32_t i = 0; i < N; i++) {
        operand_free(&As[i]);
        operand_free(&biases[i]);
        gln_test_free(dl[i]);
        gln_test_free(dls[i]);
        free(old[i]);
    }
    operand_free(&GA.o);
    operand_free(&GB.o);
    gln_test_free(dg);
    gln_test_free(ds);
}

/* Split patterns: awkward sizes with an empty expert, one expert with every token, all empty. */
static const int64_t SPLITS[][4] = {{5, 0, 17, 1}, {0, 0, 29, 0}, {0, 0, 0, 0}, {129, 3, 0, 64}};

static void test_grouped_high_precision(void) {
    gln_context_t *ctx = make_ctx();
    for (int li = 0; li < 3; li++)
        for (size_t s = 0; s < sizeof SPLITS / sizeof SPLITS[0]; s++)
            for (int di = 0; di < 3; di++) {
                grouped_case_t gc;
                memset(&gc, 0, sizeof gc);
                gc.layout = LAYOUTS[li];
                gc.num = 4;
                memcpy(gc.splits, SPLITS[s], sizeof SPLITS[s]);
                gc.extra_rows = 3;
                gc.n = 19;
                gc.k = 37;
                gc.in_dt = HP[(di + s) % 3];
                gc.out_dt = HP[di];
                gc.bias = LAYOUTS[li] != GLN_LAYOUT_NT && (s % 2 == 0);
                gc.accumulate = (int)((s + di) % 2);
                run_grouped_case(ctx, &gc);
            }
    gln_context_destroy(ctx);
}

static void test_grouped_quantized(void) {
    gln_context_t *ctx = make_ctx();
    for (size_t qi = 0; qi < sizeof QUANT_CASES / sizeof QUANT_CASES[0]; qi++)
        for (int li = 0; li < 3; li++)
            for (size_t s = 0; s < sizeof SPLITS / sizeof SPLITS[0]; s++) {
                grouped_case_t gc;
                memset(&gc, 0, sizeof gc);
                gc.layout = LAYOUTS[li];
                gc.num = 4;
                memcpy(gc.splits, SPLITS[s], sizeof SPLITS[s]);
                gc.extra_rows = 2;
                gc.n = 40;
                gc.k = 150;
                gc.quant = &QUANT_CASES[qi];
                gc.out_dt = HP[(qi + s) % 3];
                gc.bias = LAYOUTS[li] == GLN_LAYOUT_TN && (s % 2 == 1);
                gc.accumulate = (int)((qi + s) % 2);
                run_grouped_case(ctx, &gc);
            }
    gln_context_destroy(ctx);
}

GLN_TEST_MAIN(GLN_CASE(test_gemm_high_precision), GLN_CASE(test_gemm_zero_sizes),
              GLN_CASE(test_gemm_quantized), GLN_CASE(test_gemm_tensor_scale_in_alpha),
              GLN_CASE(test_grouped_high_precision), GLN_CASE(test_grouped_quantized))

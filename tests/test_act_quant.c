/* gln_activation_forward_quantize on the CPU backend (the composition every fused backend is
 * checked against).
 *
 *   - contract: for SwiGLU and GELU, every quantization mode the layer uses (per-tensor current
 *     with both copies, per-tensor delayed, MXFP8 both copies, block 1D, block 2D), E4M3 and
 *     E5M2, several input / hp dtypes, members of 0 / 1 / 5 / 17 rows, trailing packed rows and a
 *     width that is not a multiple of 8: every byte of every output buffer (data, col_data,
 *     scale_inv, col_scale_inv, amax, scale; the delayed amax accumulated onto a prior value)
 *     equals gln_activation_forward into an hp_dtype tensor followed by gln_grouped_quantize, and
 *     what neither writes (trailing rows, guards) stays as poisoned;
 *   - numerics, independently of the library: the dequantized per-tensor output is within the
 *     FP8 rounding (half a step of the format's mantissa, plus the hp rounding and GELU's FP32
 *     cancellation) of the activation computed in double;
 *   - every refusal, with its status and a message naming the call and the argument. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define NM 4
static const int64_t SPL[NM] = {5, 0, 17, 1};
#define ROWS 26 /* 3 trailing rows past the members */
#define DATA_POISON 0xA5
#define SCALE_POISON 0xFF

/* ---------------------------------------------------------------- quantized grouped buffers */

typedef struct qbuf {
    gln_grouped_tensor_t g;
    void *buf[6]; /* data, col_data, scale_inv, col_scale_inv, amax, scale */
    size_t bytes[6];
} qbuf_t;

static void qbuf_make(const gln_quant_config_t *c, int64_t rows, int64_t cols, const int64_t *splits, qbuf_t *q) {
    memset(q, 0, sizeof *q);
    q->g.num = NM;
    q->g.splits = splits;
    int64_t re = NM, ce = NM;
    if (c->mode != GLN_SCALING_TENSOR) {
        int64_t ro[NM + 1], co[NM + 1];
        CHECK_OK(gln_grouped_scale_offsets(c->mode, NM, splits, cols, ro, co));
        re = ro[NM], ce = co[NM];
    }
    const size_t es = c->mode == GLN_SCALING_MXFP8_1D ? 1 : sizeof(float), n = (size_t)(rows * cols);
    q->bytes[0] = c->rowwise ? n : 0;
    q->bytes[1] = c->columnwise ? n : 0;
    q->bytes[2] = c->rowwise ? (size_t)re * es : 0;
    q->bytes[3] = c->columnwise ? (size_t)ce * es : 0;
    q->bytes[4] = q->bytes[5] = c->mode == GLN_SCALING_TENSOR ? NM * sizeof(float) : 0;
    for (int k = 0; k < 6; k++) {
        if (!q->bytes[k]) continue;
        q->buf[k] = gln_test_alloc(q->bytes[k] + 1);
        memset(q->buf[k], k < 2 ? DATA_POISON : SCALE_POISON, q->bytes[k]);
    }
    gln_tensor_t *p = &q->g.packed;
    *p = gln_tensor_make(c->fp8_dtype, rows, cols, q->buf[0]);
    p->scaling = c->mode;
    p->col_data = q->buf[1], p->scale_inv = q->buf[2], p->col_scale_inv = q->buf[3];
    p->amax = q->buf[4], p->scale = q->buf[5];
    if (c->delayed) { /* the given scales and a prior amax to accumulate onto */
        for (int i = 0; i < NM; i++) p->scale[i] = 0.75f * (float)(i + 1), p->amax[i] = 0.125f;
    }
}

static void qbuf_free(qbuf_t *q) {
    for (int k = 0; k < 6; k++) {
        if (!q->buf[k]) continue;
        CHECK_MSG(gln_guard_ok(q->buf[k]), "guard after output buffer %d overwritten", k);
        gln_test_free(q->buf[k]);
    }
    memset(q, 0, sizeof *q);
}

static void qbuf_same(const char *what, const qbuf_t *got, const qbuf_t *want) {
    static const char *names[6] = {"data", "col_data", "scale_inv", "col_scale_inv", "amax", "scale"};
    for (int k = 0; k < 6; k++) {
        if (!want->bytes[k]) continue;
        char label[256];
        snprintf(label, sizeof label, "%s: %s", what, names[k]);
        gln_check_bitwise(label, got->buf[k], want->buf[k], want->bytes[k]);
    }
}

/* ---------------------------------------------------------------- the activation in double */

static double act_ref(gln_activation_t act, double a, double b) {
    if (act == GLN_ACT_GELU) return 0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));
    return a / (1.0 + exp(-a)) * b;
}

/* ---------------------------------------------------------------- the contract */

typedef struct mode_case {
    const char *name;
    gln_scaling_mode_t mode;
    int rowwise, columnwise, delayed;
} mode_case_t;

static const mode_case_t MODES[] = {
    {"current R+C", GLN_SCALING_TENSOR, 1, 1, 0}, {"current R", GLN_SCALING_TENSOR, 1, 0, 0},
    {"delayed R+C", GLN_SCALING_TENSOR, 1, 1, 1}, {"mxfp8 R+C", GLN_SCALING_MXFP8_1D, 1, 1, 0},
    {"block1d R+C", GLN_SCALING_BLOCK_1D, 1, 1, 0}, {"block2d R+C", GLN_SCALING_BLOCK_2D, 1, 1, 0},
};

/* The per-tensor rowwise copy dequantized against the activation in double: |got - ref| <=
 * rtol·|ref| + atol with rtol half a step of the FP8 mantissa plus the hp rounding, atol the
 * FP8 subnormal spacing at the member's scale. */
static void check_tensor_numerics(const char *what, gln_activation_t act, const void *in, gln_dtype_t idt, int64_t w,
                                  int64_t h, gln_dtype_t hp, const qbuf_t *q) {
    const gln_tensor_t *p = &q->g.packed;
    const int e5 = p->dtype == GLN_DTYPE_FP8_E5M2;
    /* (1 + fp8 half step)(1 + hp half step) - 1, with room for the FP32 math */
    const double rtol = (e5 ? 0.125 : 0.0625) + (hp == GLN_DTYPE_BF16 ? 1.0 / 256 : 1.0 / 2048) + 1e-3;
    const double sub = e5 ? ldexp(1.0, -17) : ldexp(1.0, -10); /* half the smallest subnormal */
    int64_t row0 = 0;
    size_t bad = 0;
    for (int i = 0; i < NM; i++) {
        const double sinv = ((const float *)p->scale_inv)[i];
        for (int64_t r = row0; r < row0 + SPL[i]; r++)
            for (int64_t c = 0; c < h; c++) {
                const double a = gln_load(in, idt, (size_t)(r * w + c));
                const double b = act == GLN_ACT_SWIGLU ? gln_load(in, idt, (size_t)(r * w + h + c)) : 0.0;
                const double ref = act_ref(act, a, b);
                /* GELU's 1 + tanh(u) cancels for negative a: the FP32 formula's absolute error
                 * is about 0.5·|a| times a few ulp of 1 (tanhf within 2 ulp, one rounding) */
                const double math = act == GLN_ACT_GELU ? 0.5 * fabs(a) * ldexp(1.0, -21) : 0.0;
                const double got = gln_fp8_to_fp32(((const uint8_t *)p->data)[r * h + c], p->dtype) * sinv;
                if (!(fabs(got - ref) <= rtol * fabs(ref) + sub * sinv + (1.0 + rtol) * math)) {
                    if (bad++ == 0)
                        CHECK_MSG(0, "%s: member %d row %lld col %lld: dequantized %.9g, activation %.9g", what, i,
                                  (long long)(r - row0), (long long)c, got, ref);
                }
            }
        row0 += SPL[i];
    }
    CHECK_MSG(bad == 0, "%s: %zu elements outside the FP8 rounding", what, bad);
}

static void contract_case(gln_activation_t act, const mode_case_t *m, gln_dtype_t fp8, gln_dtype_t idt,
                          gln_dtype_t hp, int64_t h, uint64_t seed) {
    gln_context_t *ctx = gln_test_cpu_context();
    const int64_t w = act == GLN_ACT_SWIGLU ? 2 * h : h;
    gln_rng_t rng = gln_rng_seed(seed);
    void *in = gln_test_alloc((size_t)(ROWS * w) * gln_dtype_size(idt) + 1);
    for (int64_t i = 0; i < ROWS * w; i++) gln_store(in, idt, (size_t)i, 2.0 * gln_rng_normal(&rng));
    gln_quant_config_t c = GLN_QUANT_CONFIG_INIT;
    c.mode = m->mode, c.fp8_dtype = fp8, c.rowwise = m->rowwise, c.columnwise = m->columnwise, c.delayed = m->delayed;
    char what[200];
    snprintf(what, sizeof what, "%s %s %s in %s hp %s H %lld", act == GLN_ACT_SWIGLU ? "swiglu" : "gelu", m->name,
             gln_dtype_name(fp8), gln_dtype_name(idt), gln_dtype_name(hp), (long long)h);

    /* the reference: the activation into hp, then the grouped quantize */
    void *a = gln_test_alloc((size_t)(ROWS * h) * gln_dtype_size(hp) + 1);
    gln_tensor_t tin = gln_tensor_make(idt, ROWS, w, in), ta = gln_tensor_make(hp, ROWS, h, a);
    CHECK_OK(gln_activation_forward(ctx, act, &tin, &ta));
    gln_grouped_tensor_t ga = {NM, SPL, 0, ta}, gin = {NM, SPL, 0, tin};
    qbuf_t want, got;
    qbuf_make(&c, ROWS, h, SPL, &want);
    qbuf_make(&c, ROWS, h, SPL, &got);
    CHECK_OK(gln_grouped_quantize(ctx, &c, &ga, &want.g));
    CHECK_OK(gln_activation_forward_quantize(ctx, act, hp, &c, &gin, &got.g));
    qbuf_same(what, &got, &want);
    /* trailing rows past the members: never written */
    for (int k = 0; k < 2; k++) {
        const uint8_t *d = got.buf[k];
        if (!d) continue;
        size_t touched = 0;
        for (int64_t i = (ROWS - 3) * h; i < ROWS * h; i++) touched += d[i] != DATA_POISON;
        CHECK_MSG(touched == 0, "%s: %zu bytes of the trailing rows written (copy %d)", what, touched, k);
    }
    if (m->mode == GLN_SCALING_TENSOR && !m->delayed) check_tensor_numerics(what, act, in, idt, w, h, hp, &got);
    /* the same through backend-resident splits (host memory on the CPU) */
    qbuf_t got2;
    qbuf_make(&c, ROWS, h, SPL, &got2);
    got2.g.splits_on_backend = 1;
    gln_grouped_tensor_t gin2 = gin;
    gin2.splits_on_backend = 1;
    CHECK_OK(gln_activation_forward_quantize(ctx, act, hp, &c, &gin2, &got2.g));
    qbuf_same(what, &got2, &want);
    qbuf_free(&got2);
    qbuf_free(&got);
    qbuf_free(&want);
    CHECK(gln_guard_ok(in) && gln_guard_ok(a));
    gln_test_free(a);
    gln_test_free(in);
}

static void test_contract(void) {
    uint64_t seed = 1;
    for (int act = 0; act < 2; act++)
        for (size_t m = 0; m < sizeof MODES / sizeof MODES[0]; m++)
            for (int f = 0; f < 2; f++) {
                const gln_dtype_t fp8 = f ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
                contract_case((gln_activation_t)act, &MODES[m], fp8, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 64, seed++);
                contract_case((gln_activation_t)act, &MODES[m], fp8, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 33, seed++);
                contract_case((gln_activation_t)act, &MODES[m], fp8, GLN_DTYPE_FP32, GLN_DTYPE_BF16, 40, seed++);
                contract_case((gln_activation_t)act, &MODES[m], fp8, GLN_DTYPE_FP16, GLN_DTYPE_FP16, 8, seed++);
                contract_case((gln_activation_t)act, &MODES[m], fp8, GLN_DTYPE_BF16, GLN_DTYPE_FP32, 136, seed++);
            }
}

/* Empty: no rows, and every member empty; per-tensor scales are still written (scale 1). */
static void test_empty(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    static const int64_t zero[NM] = {0, 0, 0, 0};
    gln_quant_config_t c = GLN_QUANT_CONFIG_INIT;
    c.columnwise = 1;
    uint16_t in[1] = {0};
    gln_grouped_tensor_t gin = {NM, zero, 0, gln_tensor_make(GLN_DTYPE_BF16, 0, 16, in)};
    gln_grouped_tensor_t ga = {NM, zero, 0, gln_tensor_make(GLN_DTYPE_BF16, 0, 8, in)};
    qbuf_t got, want;
    qbuf_make(&c, 0, 8, zero, &got);
    qbuf_make(&c, 0, 8, zero, &want);
    CHECK_OK(gln_grouped_quantize(ctx, &c, &ga, &want.g));
    CHECK_OK(gln_activation_forward_quantize(ctx, GLN_ACT_SWIGLU, GLN_DTYPE_BF16, &c, &gin, &got.g));
    qbuf_same("empty", &got, &want);
    for (int i = 0; i < NM; i++) CHECK(((float *)got.buf[2])[i] == 1.0f);
    qbuf_free(&got);
    qbuf_free(&want);
}

/* ---------------------------------------------------------------- refusals */

static void test_refusals(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    const int64_t H = 16;
    uint16_t *in = gln_test_alloc(ROWS * 2 * H * 2 + 1);
    gln_quant_config_t c = GLN_QUANT_CONFIG_INIT;
    c.columnwise = 1;
    qbuf_t q;
    qbuf_make(&c, ROWS, H, SPL, &q);
    const gln_grouped_tensor_t gin0 = {NM, SPL, 0, gln_tensor_make(GLN_DTYPE_BF16, ROWS, 2 * H, in)};
    gln_grouped_tensor_t gin = gin0, out = q.g;
    const gln_activation_t SW = GLN_ACT_SWIGLU;
    const gln_dtype_t BF = GLN_DTYPE_BF16;
    CHECK_OK(gln_activation_forward_quantize(ctx, SW, BF, &c, &gin, &out));

    CHECK_STATUS(gln_activation_forward_quantize(NULL, SW, BF, &c, &gin, &out), GLN_STATUS_INVALID_ARGUMENT, "ctx");
    CHECK_STATUS(gln_activation_forward_quantize(ctx, (gln_activation_t)2, BF, &c, &gin, &out),
                 GLN_STATUS_INVALID_ARGUMENT, "act 2 is not an activation");
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, GLN_DTYPE_FP8_E4M3, &c, &gin, &out),
                 GLN_STATUS_INVALID_ARGUMENT, "hp_dtype fp8_e4m3 must be fp32, bf16 or fp16");
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, (gln_dtype_t)99, &c, &gin, &out),
                 GLN_STATUS_INVALID_ARGUMENT, "hp_dtype");
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &c, NULL, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "in must not be NULL");
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &c, &gin, NULL), GLN_STATUS_INVALID_ARGUMENT,
                 "out");
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, NULL, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "cfg");
    gin.num = 0;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &c, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "in->num 0 must be >= 1");
    gin = gin0, gin.packed.dtype = GLN_DTYPE_FP8_E4M3;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &c, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "in->packed->dtype fp8_e4m3");
    gin = gin0, gin.packed.cols = 2 * H - 1;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &c, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "in->packed.cols 31 must be even for swiglu");
    gin = gin0, gin.packed.data = NULL;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &c, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "data");
    gin = gin0;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, GLN_ACT_GELU, BF, &c, &gin, &out),
                 GLN_STATUS_INVALID_ARGUMENT, "out->packed.cols 16 must be the activation's width 32");
    out.packed.cols = H + 1;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &c, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "out->packed.cols 17 must be the activation's width 16 (in->packed.cols / 2 for swiglu)");
    out = q.g;
    gln_quant_config_t bad = c;
    bad.size = 8;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &bad, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "cfg->size 8 is not a known version");
    bad = c, bad.mode = GLN_SCALING_NONE;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &bad, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "cfg->mode 0");
    bad = c, bad.fp8_dtype = GLN_DTYPE_FP8_E5M2;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &bad, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "out->packed->dtype fp8_e4m3 must equal cfg->fp8_dtype fp8_e5m2");
    bad = c, bad.mode = GLN_SCALING_MXFP8_1D;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &bad, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "must equal cfg->mode");
    out = q.g, out.packed.col_data = NULL;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &c, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "out->packed->col_data must not be NULL (cfg->columnwise = 1)");
    out = q.g, out.num = NM - 1;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &c, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "out->num 3 must equal in->num 4");
    static const int64_t other[NM] = {5, 1, 16, 1};
    out = q.g, out.splits = other;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &c, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "out->splits[1] 1 must equal in->splits[1] 0");
    out = q.g, out.splits_on_backend = 1;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &c, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "out->splits_on_backend 1 must equal in->splits_on_backend 0");
    static const int64_t neg[NM] = {5, -1, 17, 1}, over[NM] = {5, 0, 17, 9};
    out = q.g, gin = gin0, gin.splits = neg;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &c, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "in->splits[1] -1 must be >= 0");
    gin.splits = over;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &c, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "in->splits sum exceeds packed.rows 26");
    /* backend-resident splits are host memory on the CPU: checked here too */
    gin.splits_on_backend = 1, out.splits_on_backend = 1;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &c, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "in->splits sum exceeds packed.rows 26");
    gin.splits = SPL, out.splits = other;
    CHECK_STATUS(gln_activation_forward_quantize(ctx, SW, BF, &c, &gin, &out), GLN_STATUS_INVALID_ARGUMENT,
                 "out->splits[1] 1 must equal in->splits[1] 0");
    qbuf_free(&q);
    gln_test_free(in);
}

GLN_TEST_MAIN(GLN_CASE(test_contract), GLN_CASE(test_empty), GLN_CASE(test_refusals))

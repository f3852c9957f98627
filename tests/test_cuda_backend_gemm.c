/* The CUDA backend's GEMMs against the CPU backend's, through the public gln_gemm: high
 * precision, per-tensor FP8 (zero-padded when K % 16 != 0), MXFP8 and block-scaled operands, every
 * layout, with and without bias and accumulation, within the GEMM tolerances of
 * tests/harness/cuda_compare.h (both backends multiply the same exact operand values).
 *
 * Skips (exit 77) when CUDA is not compiled in or no device is present.  Device outputs are
 * poisoned before each run and followed by guard bytes that must survive (device_twin.h). */
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

/* ---- GEMMs --------------------------------------------------------------------------------- */

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

/* The output D [m, n] of one GEMM on both backends: d0 its initial values (read when
 * accumulating), ref the CPU's result (poisoned first unless accumulating), dev the device buffer
 * (d0 when accumulating, else poisoned) and t its device tensor. */
typedef struct dout {
    void *d0, *ref;
    gln_twin_t dev;
    gln_tensor_t t;
} dout_t;

static dout_t dout_new(gln_rng_t *rng, gln_gemm_layout_t layout, const gln_tensor_t *a, const gln_tensor_t *b,
                       const gln_tensor_t *bias, gln_dtype_t d_dtype, int64_t m, int64_t n, int accumulate) {
    dout_t d;
    const size_t dn = (size_t)m * (size_t)n, dbytes = dn * gln_dtype_size(d_dtype);
    d.d0 = gln_cmp_make_hp(rng, d_dtype, m, n, 1.0, 0);
    d.ref = malloc(dbytes + 1);
    memcpy(d.ref, d.d0, dbytes);
    if (!accumulate) gln_poison(d.ref, d_dtype, dn);
    gln_tensor_t Dh = gln_tensor_make(d_dtype, m, n, d.ref);
    CHECK_OK(gln_gemm(g_cpu, layout, a, b, &Dh, bias, accumulate));
    d.dev = gln_twin_upload(g_cu, accumulate ? d.d0 : NULL, dbytes);
    d.t = gln_tensor_make(d_dtype, m, n, d.dev.d);
    return d;
}

/* The initial values as FP32 when accumulating, else NULL (free()). */
static float *dout_initial(const dout_t *d, int accumulate) {
    if (!accumulate) return NULL;
    gln_tensor_t t = gln_tensor_make(d->t.dtype, d->t.rows, d->t.cols, d->d0);
    return gln_cmp_operand_values(&t);
}

static void dout_free(dout_t *d) {
    gln_twin_free(g_cu, &d->dev);
    free(d->d0), free(d->ref);
}

/* One GEMM on both backends.  fp8_a / fp8_b: 0 for high precision in `in_dtype`, else the FP8
 * format the CPU quantizes the operand to.  Returns the CUDA status. */
static gln_status_t gemm_case(gln_rng_t *rng, gln_gemm_layout_t layout, int64_t m, int64_t n, int64_t k,
                              gln_dtype_t in_dtype, gln_dtype_t fp8_a, gln_dtype_t fp8_b, gln_dtype_t d_dtype,
                              gln_dtype_t bias_dtype, int use_bias, int accumulate, int expect_ok) {
    int64_t ar, ac, br, bc;
    operand_shapes(layout, m, n, k, &ar, &ac, &br, &bc);
    void *ah = gln_cmp_make_hp(rng, in_dtype, ar, ac, 1.0, 0), *bh = gln_cmp_make_hp(rng, in_dtype, br, bc, 1.0, 0);
    gln_tensor_t A = gln_tensor_make(in_dtype, ar, ac, ah), B = gln_tensor_make(in_dtype, br, bc, bh);
    gln_tensor_t Aq = A, Bq = B;
    if (fp8_a) Aq = quantize_host(&A, fp8_a);
    if (fp8_b) Bq = quantize_host(&B, fp8_b);
    void *biash = use_bias ? gln_cmp_make_hp(rng, bias_dtype, 1, n, 1.0, 0) : NULL;
    gln_tensor_t bias = gln_tensor_make(bias_dtype, 1, n, biash);
    dout_t D = dout_new(rng, layout, &Aq, &Bq, use_bias ? &bias : NULL, d_dtype, m, n, accumulate);

    dtensor_t Ad = dtensor_upload(&Aq), Bd = dtensor_upload(&Bq);
    gln_twin_t biasd = gln_twin_upload(g_cu, biash, use_bias ? (size_t)n * gln_dtype_size(bias_dtype) : 0);
    gln_tensor_t biast = gln_tensor_make(bias_dtype, 1, n, biasd.d);
    gln_status_t st = gln_gemm(g_cu, layout, &Ad.t, &Bd.t, &D.t, use_bias ? &biast : NULL, accumulate);
    char what[200];
    snprintf(what, sizeof what, "gemm %s m=%lld n=%lld k=%lld %s/%s/%s -> %s bias=%d acc=%d", gln_cmp_layout_name(layout),
             (long long)m, (long long)n, (long long)k, gln_dtype_name(in_dtype), fp8_a ? gln_dtype_name(fp8_a) : "-",
             fp8_b ? gln_dtype_name(fp8_b) : "-", gln_dtype_name(d_dtype), use_bias, accumulate);
    if (expect_ok) CHECK_MSG(st == GLN_STATUS_SUCCESS, "%s: %s (%s)", what, gln_status_string(st), gln_last_error());
    if (st == GLN_STATUS_SUCCESS) {
        void *got = gln_twin_fetch(g_cu, &D.dev, what);
        float *av = gln_cmp_operand_values(&Aq), *bv = gln_cmp_operand_values(&Bq);
        float *biasv = NULL, *dv = dout_initial(&D, accumulate);
        if (use_bias) {
            gln_tensor_t bt = gln_tensor_make(bias_dtype, 1, n, biash);
            biasv = gln_cmp_operand_values(&bt);
        }
        gln_cmp_gemm(what, layout, av, bv, m, n, k, ac, bc, biasv, dv, got, D.ref, d_dtype,
                     fp8_a ? GLN_CMP_GEMM_FP8_ACC_REL : 0.0);
        free(av), free(bv), free(biasv), free(dv), free(got);
    } else {
        CHECK_MSG(st == GLN_STATUS_NOT_SUPPORTED, "%s: failed with %s (%s)", what, gln_status_string(st),
                  gln_last_error());
        printf("  note: %s -> not supported (%s)\n", what, gln_last_error());
    }
    dtensor_free(&Ad), dtensor_free(&Bd), gln_twin_free(g_cu, &biasd), dout_free(&D);
    if (fp8_a) free_host_tensor(&Aq);
    if (fp8_b) free_host_tensor(&Bq);
    free(ah), free(bh), free(biash);
    return st;
}

static void test_gemm_hp(void) {
    gln_rng_t rng = gln_rng_seed(15);
    const gln_gemm_layout_t layouts[] = {GLN_LAYOUT_TN, GLN_LAYOUT_NN, GLN_LAYOUT_NT};
    const gln_dtype_t io[][2] = {{GLN_DTYPE_BF16, GLN_DTYPE_BF16}, {GLN_DTYPE_BF16, GLN_DTYPE_FP32},
                                 {GLN_DTYPE_FP16, GLN_DTYPE_FP16}, {GLN_DTYPE_FP32, GLN_DTYPE_FP32},
                                 {GLN_DTYPE_FP32, GLN_DTYPE_BF16}};
    for (size_t l = 0; l < GLN_CMP_COUNT(layouts); l++)
        for (size_t t = 0; t < GLN_CMP_COUNT(io); t++)
            for (size_t r = 0; r < GLN_CMP_COUNT(gln_cmp_rows); r++)
                for (int v = 0; v < 4; v++) {
                    const int bias = v & 1, acc = (v >> 1) & 1;
                    gemm_case(&rng, layouts[l], gln_cmp_rows[r], 48, r == 3 ? 4096 : 48, io[t][0], 0, 0, io[t][1],
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
    for (size_t o = 0; o < GLN_CMP_COUNT(outs); o++)
        for (int v = 0; v < 4; v++) {
            const int bias = v & 1, acc = (v >> 1) & 1;
            /* fprop: any token count; K multiple of 16 (FP8 leading dimensions) */
            for (size_t r = 0; r < GLN_CMP_COUNT(gln_cmp_rows); r++)
                gemm_case(&rng, GLN_LAYOUT_TN, gln_cmp_rows[r], 48, 64, GLN_DTYPE_BF16, E4, E4, outs[o], GLN_DTYPE_BF16,
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
    void *ah = gln_cmp_make_hp(rng, in, ar, ac, 1.0, 0), *bh = gln_cmp_make_hp(rng, in, br, bc, 1.0, 0);
    /* rows of very different magnitudes, so block scales differ from block to block */
    for (int64_t r = 0; r < ar; r += 3)
        for (int64_t c = 0; c < ac; c++) gln_store(ah, in, (size_t)(r * ac + c), 37.0 * gln_load(ah, in, (size_t)(r * ac + c)));
    gln_tensor_t A = gln_tensor_make(in, ar, ac, ah), B = gln_tensor_make(in, br, bc, bh);
    gln_tensor_t Aq = quantize_host_cfg(&A, ca), Bq = quantize_host_cfg(&B, cb);
    void *biash = use_bias ? gln_cmp_make_hp(rng, GLN_DTYPE_BF16, 1, n, 1.0, 0) : NULL;
    gln_tensor_t bias = gln_tensor_make(GLN_DTYPE_BF16, 1, n, biash);
    dout_t D = dout_new(rng, layout, &Aq, &Bq, use_bias ? &bias : NULL, d_dtype, m, n, accumulate);
    dtensor_t Ad = dtensor_upload_q(&Aq), Bd = dtensor_upload_q(&Bq);
    gln_twin_t biasd = gln_twin_upload(g_cu, biash, use_bias ? (size_t)n * 2 : 0);
    gln_tensor_t biast = gln_tensor_make(GLN_DTYPE_BF16, 1, n, biasd.d);
    char what[220];
    snprintf(what, sizeof what, "gemm %s m=%lld n=%lld k=%lld %s(%s%s)x%s(%s%s) -> %s bias=%d acc=%d", gln_cmp_layout_name(layout),
             (long long)m, (long long)n, (long long)k, gln_scaling_name(ca->mode), gln_dtype_name(ca->fp8_dtype),
             ca->power_2_scale ? ",pow2" : "", gln_scaling_name(cb->mode), gln_dtype_name(cb->fp8_dtype),
             cb->power_2_scale ? ",pow2" : "", gln_dtype_name(d_dtype), use_bias, accumulate);
    gln_status_t st = gln_gemm(g_cu, layout, &Ad.t, &Bd.t, &D.t, use_bias ? &biast : NULL, accumulate);
    CHECK_MSG(st == GLN_STATUS_SUCCESS, "%s: %s (%s)", what, gln_status_string(st), gln_last_error());
    if (st == GLN_STATUS_SUCCESS) {
        void *got = gln_twin_fetch(g_cu, &D.dev, what);
        float *av = copy_values(&Aq, layout != GLN_LAYOUT_TN), *bv = copy_values(&Bq, layout == GLN_LAYOUT_NT);
        float *biasv = NULL, *dv = dout_initial(&D, accumulate);
        if (use_bias) biasv = gln_cmp_operand_values(&bias);
        gln_cmp_gemm(what, layout, av, bv, m, n, k, ac, bc, biasv, dv, got, D.ref, d_dtype, acc_rel);
        free(av), free(bv), free(biasv), free(dv), free(got);
    }
    dtensor_free(&Ad), dtensor_free(&Bd), gln_twin_free(g_cu, &biasd), dout_free(&D);
    free_host_tensor(&Aq), free_host_tensor(&Bq);
    free(ah), free(bh), free(biash);
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
    for (size_t o = 0; o < GLN_CMP_COUNT(outs); o++)
        for (int v = 0; v < 4; v++) {
            const int bias = v & 1, acc = (v >> 1) & 1;
            for (size_t r = 0; r < GLN_CMP_COUNT(gln_cmp_rows); r++)
                gemm_q_case(&rng, GLN_LAYOUT_TN, gln_cmp_rows[r], 48, 96, &w, &w, outs[o], bias, acc, 0.0);
            gemm_q_case(&rng, GLN_LAYOUT_TN, 17, 40, 4096, &w, &w, outs[o], bias, acc, 0.0);
            gemm_q_case(&rng, GLN_LAYOUT_NN, 17, 48, 256, &w, &g, outs[o], bias, acc, 0.0);
            gemm_q_case(&rng, GLN_LAYOUT_NN, 129, 72, 33, &w, &g, outs[o], bias, acc, 0.0);
            for (size_t r = 0; r < GLN_CMP_COUNT(gln_cmp_rows); r++)
                gemm_q_case(&rng, GLN_LAYOUT_NT, 48, 64, gln_cmp_rows[r], &w, &g, outs[o], 0, acc, 0.0);
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
        for (size_t o = 0; o < GLN_CMP_COUNT(outs); o++)
            for (int v = 0; v < 4; v++) {
                const int bias = v & 1, acc = (v >> 1) & 1;
                const gln_quant_config_t w2 = qcfg(GLN_SCALING_BLOCK_2D, E4, pow2);
                const gln_quant_config_t x1 = qcfg(GLN_SCALING_BLOCK_1D, E4, pow2);
                const gln_quant_config_t g1 = qcfg(GLN_SCALING_BLOCK_1D, E5, pow2);
                gemm_q_case(&rng, GLN_LAYOUT_TN, 17, 256, 384, &w2, &x1, outs[o], bias, acc, GLN_CMP_GEMM_FP8_ACC_REL);
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
    for (size_t o = 0; o < GLN_CMP_COUNT(outs); o++)
        for (int v = 0; v < 4; v++) {
            const int bias = v & 1, acc = (v >> 1) & 1;
            for (size_t r = 0; r < GLN_CMP_COUNT(gln_cmp_rows); r++)
                gemm_case(&rng, GLN_LAYOUT_NT, 48, 64, gln_cmp_rows[r], GLN_DTYPE_BF16, E4, E5, outs[o], GLN_DTYPE_BF16, 0,
                          acc, 1);
            gemm_case(&rng, GLN_LAYOUT_TN, 17, 48, 40, GLN_DTYPE_BF16, E4, E4, outs[o], GLN_DTYPE_BF16, bias, acc, 1);
            gemm_case(&rng, GLN_LAYOUT_NN, 5, 48, 24, GLN_DTYPE_BF16, E4, E5, outs[o], GLN_DTYPE_BF16, bias, acc, 1);
        }
}

GLN_TEST_CUDA_MAIN(g_cpu, g_cu,
    GLN_CASE(test_gemm_hp), GLN_CASE(test_gemm_fp8), GLN_CASE(test_gemm_mxfp8), GLN_CASE(test_gemm_block),
    GLN_CASE(test_gemm_fp8_padded))

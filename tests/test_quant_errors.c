/* Quantization calls on invalid input: one check per class, the status and the message naming the
 * call, the argument and the valid range. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "harness.h"
#include "quant_host.h"

/* ---- invalid input: one check per class, status and message ------------------------------ */

static void test_invalid_quantize(void) {
    gln_context_t *ctx = ctx_cpu();
    float x[6] = {0};
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, 2, 3, x);
    qbuf_t q;
    qbuf_init(&q, GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 2, 3);
    gln_quant_config_t c = qcfg(GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 1, 0);
    const gln_status_t INV = GLN_STATUS_INVALID_ARGUMENT;
    CHECK_STATUS(gln_quantize(NULL, &c, &in, &q.t), INV, "gln_quantize: ctx must not be NULL");
    CHECK_STATUS(gln_quantize(ctx, NULL, &in, &q.t), INV, "cfg must not be NULL");
    gln_quant_config_t b = c;
    b.size = 3;
    CHECK_STATUS(gln_quantize(ctx, &b, &in, &q.t), INV, "cfg->size 3 is not a known version");
    b = c;
    b.mode = GLN_SCALING_NONE;
    CHECK_STATUS(gln_quantize(ctx, &b, &in, &q.t), INV, "cfg->mode 0 must be TENSOR");
    b = c;
    b.fp8_dtype = GLN_DTYPE_BF16;
    CHECK_STATUS(gln_quantize(ctx, &b, &in, &q.t), INV, "cfg->fp8_dtype 1 must be FP8_E4M3");
    b = c;
    b.rowwise = 0;
    CHECK_STATUS(gln_quantize(ctx, &b, &in, &q.t), INV, "cfg->rowwise and cfg->columnwise are both 0");
    b = c;
    b.delayed = 1;
    b.mode = GLN_SCALING_MXFP8_1D;
    CHECK_STATUS(gln_quantize(ctx, &b, &in, &q.t), INV, "cfg->delayed 1 needs cfg->mode TENSOR");
    b = c;
    b.amax_epsilon = -1.0f;
    CHECK_STATUS(gln_quantize(ctx, &b, &in, &q.t), INV, "cfg->amax_epsilon -1 must be finite and >= 0");
    b = c;
    b.e8m0_rounding = (gln_e8m0_rounding_t)7;
    CHECK_STATUS(gln_quantize(ctx, &b, &in, &q.t), INV, "cfg->e8m0_rounding 7");
    CHECK_STATUS(gln_quantize(ctx, &c, NULL, &q.t), INV, "gln_quantize: in must not be NULL");
    gln_tensor_t bad = in;
    bad.rows = -3;
    CHECK_STATUS(gln_quantize(ctx, &c, &bad, &q.t), INV, "gln_quantize: in->rows -3 must be >= 0");
    bad = in;
    bad.data = NULL;
    CHECK_STATUS(gln_quantize(ctx, &c, &bad, &q.t), INV, "in->data must not be NULL");
    bad = in;
    bad.dtype = GLN_DTYPE_INT32;
    CHECK_STATUS(gln_quantize(ctx, &c, &bad, &q.t), INV, "in->dtype int32 must be fp32, bf16 or fp16");
    bad = q.t;
    bad.dtype = GLN_DTYPE_FP8_E5M2;
    CHECK_STATUS(gln_quantize(ctx, &c, &in, &bad), INV,
                 "out->dtype fp8_e5m2 must equal cfg->fp8_dtype fp8_e4m3");
    bad = q.t;
    bad.scaling = GLN_SCALING_BLOCK_1D;
    CHECK_STATUS(gln_quantize(ctx, &c, &in, &bad), INV, "out->scaling block_1d must equal cfg->mode tensor");
    bad = q.t;
    bad.cols = 4;
    CHECK_STATUS(gln_quantize(ctx, &c, &in, &bad), INV, "out is 2 x 4, must match in (2 x 3)");
    bad = q.t;
    bad.scale_inv = NULL;
    CHECK_STATUS(gln_quantize(ctx, &c, &in, &bad), INV, "out->scale_inv must not be NULL");
    b = c;
    b.columnwise = 1;
    bad = q.t;
    bad.col_data = NULL;
    CHECK_STATUS(gln_quantize(ctx, &b, &in, &bad), INV, "out->col_data must not be NULL");
    b = c;
    b.delayed = 1;
    bad = q.t;
    bad.scale = NULL;
    CHECK_STATUS(gln_quantize(ctx, &b, &in, &bad), INV, "out->scale must not be NULL (delayed scaling");
    bad = q.t;
    bad.scaling = (gln_scaling_mode_t)9;
    CHECK_STATUS(gln_quantize(ctx, &c, &in, &bad), INV, "out->scaling 9 is not a scaling mode");
    /* empty tensors are legal; nothing but the per-tensor scale is needed */
    gln_tensor_t empty = gln_tensor_make(GLN_DTYPE_BF16, 0, 3, NULL);
    gln_tensor_t eout = q.t;
    eout.rows = 0;
    eout.data = NULL;
    CHECK_OK(gln_quantize(ctx, &c, &empty, &eout));
    CHECK(q.scale == 1.0f && q.amax == 0.0f);
    qbuf_free(&q);
    gln_context_destroy(ctx);
}

static void test_invalid_other_calls(void) {
    gln_context_t *ctx = ctx_cpu();
    const gln_status_t INV = GLN_STATUS_INVALID_ARGUMENT;
    gln_quant_layout_t l;
    CHECK_STATUS(gln_quant_layout((gln_scaling_mode_t)9, GLN_DTYPE_FP8_E4M3, 1, 1, &l), INV,
                 "gln_quant_layout: mode 9 is not a scaling mode");
    CHECK_STATUS(gln_quant_layout(GLN_SCALING_MXFP8_1D, GLN_DTYPE_BF16, 1, 1, &l), INV,
                 "dtype bf16 must be fp8_e4m3 or fp8_e5m2 for scaling mode mxfp8_1d");
    CHECK_STATUS(gln_quant_layout(GLN_SCALING_NONE, GLN_DTYPE_FP32, -1, 1, &l), INV, "rows -1 must be >= 0");
    CHECK_STATUS(gln_quant_layout(GLN_SCALING_NONE, GLN_DTYPE_FP32, 1, 1, NULL), INV,
                 "layout must not be NULL");
    CHECK_STATUS(gln_quant_layout(GLN_SCALING_NONE, GLN_DTYPE_FP32, (int64_t)1 << 40, (int64_t)1 << 40, &l),
                 INV, "exceeds 2^56 elements");

    int64_t sp[3] = {4, -1, 2}, off[4];
    CHECK_STATUS(gln_grouped_scale_offsets(GLN_SCALING_TENSOR, 3, sp, 8, off, off), INV, "splits[1] -1");
    CHECK_STATUS(gln_grouped_scale_offsets(GLN_SCALING_TENSOR, 0, sp, 8, off, off), INV,
                 "num 0 must be >= 1");
    int64_t b1, b2;
    CHECK_STATUS(gln_grouped_scale_bound(GLN_SCALING_TENSOR, 2, -5, 8, &b1, &b2), INV, "rows -5");

    /* dequantize */
    uint8_t d[4] = {0};
    float s[1] = {1.0f}, o[4];
    gln_tensor_t qt = {GLN_DTYPE_FP8_E4M3, 2, 2, d, GLN_SCALING_TENSOR, s, NULL, NULL, NULL, NULL};
    gln_tensor_t out = gln_tensor_make(GLN_DTYPE_FP32, 2, 2, o);
    CHECK_STATUS(gln_dequantize(ctx, &qt, 2, &out), INV, "gln_dequantize: columnwise 2 must be 0 or 1");
    CHECK_STATUS(gln_dequantize(ctx, &qt, 1, &out), INV,
                 "in->col_data must not be NULL (the columnwise copy)");
    gln_tensor_t plain = gln_tensor_make(GLN_DTYPE_FP32, 2, 2, o);
    CHECK_STATUS(gln_dequantize(ctx, &plain, 0, &out), INV, "in->scaling is NONE");
    gln_tensor_t bad = qt;
    bad.dtype = GLN_DTYPE_BF16;
    CHECK_STATUS(gln_dequantize(ctx, &bad, 0, &out), INV, "in->dtype bf16 must be fp8_e4m3 or fp8_e5m2");
    gln_tensor_t bout = out;
    bout.rows = 1;
    CHECK_STATUS(gln_dequantize(ctx, &qt, 0, &bout), INV, "out is 1 x 2, must match in (2 x 2)");
    CHECK_OK(gln_dequantize(ctx, &qt, 0, &out));

    /* grouped quantize */
    float x[12] = {0};
    int64_t splits[2] = {2, 1}, splits_bad[2] = {2, 2}, splits_neg[2] = {3, -1}, splits_other[2] = {1, 2};
    uint8_t gd[12], gcd[12];
    float gs[2], ga[2], gsc[2];
    gln_grouped_tensor_t gin = {2, splits, 0, gln_tensor_make(GLN_DTYPE_FP32, 3, 4, x)};
    gln_grouped_tensor_t gout = {
        2, splits, 0, {GLN_DTYPE_FP8_E4M3, 3, 4, gd, GLN_SCALING_TENSOR, gs, gcd, NULL, ga, gsc}};
    gln_quant_config_t c = qcfg(GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 1, 0);
    CHECK_OK(gln_grouped_quantize(ctx, &c, &gin, &gout));
    gln_grouped_tensor_t g = gin;
    g.num = 0;
    CHECK_STATUS(gln_grouped_quantize(ctx, &c, &g, &gout), INV,
                 "gln_grouped_quantize: in->num 0 must be >= 1");
    g = gin;
    g.splits = splits_neg;
    CHECK_STATUS(gln_grouped_quantize(ctx, &c, &g, &gout), INV, "in->splits[1] -1 must be >= 0");
    g = gin;
    g.splits = splits_bad;
    CHECK_STATUS(gln_grouped_quantize(ctx, &c, &g, &gout), INV, "in->splits sum exceeds packed.rows 3");
    g = gout;
    g.splits = splits_other;
    CHECK_STATUS(gln_grouped_quantize(ctx, &c, &gin, &g), INV, "out->splits[0] 1 must equal in->splits[0] 2");
    g = gout;
    g.packed.cols = 3;
    CHECK_STATUS(gln_grouped_quantize(ctx, &c, &gin, &g), INV,
                 "out->packed.cols 3 must equal in->packed.cols 4");
    g = gin;
    g.splits = NULL;
    CHECK_STATUS(gln_grouped_quantize(ctx, &c, &g, &gout), INV, "in->splits must not be NULL");
    /* splits "on the backend" are host memory on the CPU: the backend checks them itself */
    g = gin;
    g.splits_on_backend = 1;
    gln_grouped_tensor_t g2 = gout;
    g2.splits_on_backend = 1;
    CHECK_OK(gln_grouped_quantize(ctx, &c, &g, &g2));
    g.splits = splits_bad;
    g2.splits = splits_bad;
    CHECK_STATUS(gln_grouped_quantize(ctx, &c, &g, &g2), INV, "in->splits sum exceeds packed.rows 3");

    /* swizzle */
    uint8_t cs[512], sw[512];
    CHECK_STATUS(gln_mxfp8_swizzle_scales(ctx, -1, 32, 0, cs, sw), INV, "rows -1 must be >= 0");
    CHECK_STATUS(gln_mxfp8_swizzle_scales(ctx, 4, 32, 2, cs, sw), INV, "columnwise 2 must be 0 or 1");
    CHECK_STATUS(gln_mxfp8_swizzle_scales(ctx, 4, 32, 0, cs, cs), INV, "swizzled must not alias compact");
    CHECK_STATUS(gln_mxfp8_swizzle_scales(ctx, 4, 32, 0, NULL, sw), INV, "compact must not be NULL");

    /* delayed scaling update */
    float h[2] = {0}, sc[1] = {1}, fm[1] = {448}, fm0[1] = {0};
    CHECK_STATUS(gln_delayed_scaling_update(0, 2, h, sc, fm, 0, GLN_AMAX_ALGO_MAX), INV,
                 "num_slots 0 must be >= 1");
    CHECK_STATUS(gln_delayed_scaling_update(1, 0, h, sc, fm, 0, GLN_AMAX_ALGO_MAX), INV,
                 "history_len 0 must be >= 1");
    CHECK_STATUS(gln_delayed_scaling_update(1, 2, NULL, sc, fm, 0, GLN_AMAX_ALGO_MAX), INV,
                 "amax_history must not be NULL");
    CHECK_STATUS(gln_delayed_scaling_update(1, 2, h, sc, fm, 300, GLN_AMAX_ALGO_MAX), INV,
                 "margin 300 must be in [-126, 126]");
    CHECK_STATUS(gln_delayed_scaling_update(1, 2, h, sc, fm0, 0, GLN_AMAX_ALGO_MAX), INV,
                 "fp8_max[0] 0 must be finite and > 0");
    CHECK_STATUS(gln_delayed_scaling_update(1, 2, h, sc, fm, 0, (gln_amax_algo_t)4), INV,
                 "algo 4 must be MAX");
    gln_context_destroy(ctx);
}

GLN_TEST_MAIN(GLN_CASE(test_invalid_quantize), GLN_CASE(test_invalid_other_calls))

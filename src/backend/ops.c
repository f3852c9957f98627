/* The one funnel from a validated call into the backend's table (ops.h). */
#include "backend/ops.h"

#include "backend/backend.h"
#include "common/context.h"
#include "common/error.h"

gln_status_t gln_backend_missing(const gln_context_t *ctx, const char *call, const char *op) {
    return gln_fail(GLN_STATUS_NOT_SUPPORTED, "%s: operation %s is not implemented by the %s backend",
                    call, op, ctx->ops->name);
}

gln_status_t gln_op_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                             gln_tensor_t *out) {
    if (!ctx->ops->quantize) return gln_backend_missing(ctx, "gln_quantize", "quantize");
    return ctx->ops->quantize(ctx, cfg, in, out);
}

gln_status_t gln_op_grouped_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                     const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out) {
    if (!ctx->ops->grouped_quantize) return gln_backend_missing(ctx, "gln_grouped_quantize", "grouped_quantize");
    return ctx->ops->grouped_quantize(ctx, cfg, in, out);
}

gln_status_t gln_op_dequantize(gln_context_t *ctx, const gln_tensor_t *in, int columnwise,
                               gln_tensor_t *out) {
    if (!ctx->ops->dequantize) return gln_backend_missing(ctx, "gln_dequantize", "dequantize");
    return ctx->ops->dequantize(ctx, in, columnwise, out);
}

gln_status_t gln_op_mxfp8_swizzle(gln_context_t *ctx, int64_t rows, int64_t cols, int columnwise,
                                  const uint8_t *compact, uint8_t *swizzled) {
    if (!ctx->ops->mxfp8_swizzle)
        return gln_backend_missing(ctx, "gln_mxfp8_swizzle_scales", "mxfp8_swizzle");
    return ctx->ops->mxfp8_swizzle(ctx, rows, cols, columnwise, compact, swizzled);
}

gln_status_t gln_op_gemm(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                         const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias, int accumulate) {
    if (!ctx->ops->gemm) return gln_backend_missing(ctx, "gln_gemm", "gemm");
    return ctx->ops->gemm(ctx, layout, A, B, D, bias, accumulate != 0);
}

gln_status_t gln_op_grouped_gemm(gln_context_t *ctx, const gln_grouped_gemm_args_t *args) {
    if (!ctx->ops->grouped_gemm) return gln_backend_missing(ctx, "gln_grouped_gemm", "grouped_gemm");
    return ctx->ops->grouped_gemm(ctx, args);
}

gln_status_t gln_op_grouped_dbias(gln_context_t *ctx, const gln_grouped_tensor_t *dy, gln_tensor_t *dbias,
                                  int accumulate) {
    if (!ctx->ops->grouped_dbias) return gln_backend_missing(ctx, "gln_grouped_dbias", "grouped_dbias");
    return ctx->ops->grouped_dbias(ctx, dy, dbias, accumulate != 0);
}

gln_status_t gln_op_grouped_quantize_dbias(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                           const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                           gln_tensor_t *dbias, int accumulate) {
    if (!ctx->ops->grouped_quantize_dbias)
        return gln_backend_missing(ctx, "grouped quantize + dbias", "grouped_quantize_dbias");
    return ctx->ops->grouped_quantize_dbias(ctx, cfg, in, out, dbias, accumulate != 0);
}

gln_status_t gln_op_cast(gln_context_t *ctx, const gln_tensor_t *in, gln_tensor_t *out) {
    if (!ctx->ops->cast) return gln_backend_missing(ctx, "gln_cast", "cast");
    return ctx->ops->cast(ctx, in, out);
}

gln_status_t gln_op_grouped_quantize_record(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                            const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                            gln_tensor_t *dbias, int accumulate, float *history_row0, int32_t first,
                                            int32_t stride, int nan_propagate) {
    if (ctx->ops->grouped_quantize_record)
        return ctx->ops->grouped_quantize_record(ctx, cfg, in, out, dbias, accumulate != 0, history_row0, first,
                                                 stride, nan_propagate);
    GLN_TRY(dbias ? gln_op_grouped_quantize_dbias(ctx, cfg, in, out, dbias, accumulate)
                  : gln_op_grouped_quantize(ctx, cfg, in, out));
    if (in->num == 0) return GLN_STATUS_SUCCESS;
    if (!ctx->ops->fp8_state_record) return gln_backend_missing(ctx, "delayed scaling", "fp8_state_record");
    return ctx->ops->fp8_state_record(ctx, history_row0, first, stride, in->num, out->packed.amax, nan_propagate);
}

/* Rows of `in` the composition activates: up to the last member's end when the host can read the
 * splits (rows past them are never quantized), else all of in's rows. */
static int64_t act_rows(const gln_context_t *ctx, const gln_grouped_tensor_t *in) {
    if (in->splits_on_backend && ctx->kind != GLN_BACKEND_CPU) return in->packed.rows;
    int64_t sum = 0;
    for (int32_t i = 0; i < in->num; i++) sum += in->splits[i];
    return sum;
}

gln_status_t gln_op_activation_forward_quantize_composed(gln_context_t *ctx, gln_activation_t act,
                                                         gln_dtype_t hp_dtype, const gln_quant_config_t *cfg,
                                                         const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out) {
    static const char *fn = "gln_activation_forward_quantize";
    if (!ctx->ops->activation_forward) return gln_backend_missing(ctx, fn, "activation_forward");
    if (!ctx->ops->grouped_quantize) return gln_backend_missing(ctx, fn, "grouped_quantize");
    const int64_t h = act == GLN_ACT_SWIGLU ? in->packed.cols / 2 : in->packed.cols, rows = act_rows(ctx, in);
    const size_t bytes = (size_t)(rows * h) * gln_dtype_size(hp_dtype);
    void *buf = NULL;
    GLN_TRY(gln_ctx_alloc(ctx, bytes ? bytes : 16, &buf)); /* never NULL: the quantize's member views */
    gln_grouped_tensor_t a = *in; /* the activation's output, members as in's */
    a.packed = gln_tensor_make(hp_dtype, rows, h, buf);
    gln_status_t st = GLN_STATUS_SUCCESS;
    if (rows * h > 0) {
        gln_tensor_t x = in->packed;
        x.rows = rows;
        st = ctx->ops->activation_forward(ctx, act, &x, &a.packed);
    }
    if (st == GLN_STATUS_SUCCESS) st = ctx->ops->grouped_quantize(ctx, cfg, &a, out);
    gln_ctx_free(ctx, buf);
    return st;
}

gln_status_t gln_op_activation_forward_quantize(gln_context_t *ctx, gln_activation_t act, gln_dtype_t hp_dtype,
                                                const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                                gln_grouped_tensor_t *out) {
    if (ctx->ops->activation_forward_quantize && in->packed.rows * in->packed.cols > 0)
        return ctx->ops->activation_forward_quantize(ctx, act, hp_dtype, cfg, in, out);
    return gln_op_activation_forward_quantize_composed(ctx, act, hp_dtype, cfg, in, out);
}

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

/* The one funnel from a validated call into the backend's table (ops.h). */
#include "backend/ops.h"

#include <stdlib.h>

#include "backend/backend.h"
#include "backend/context.h"
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

gln_status_t gln_op_memcpy(gln_context_t *ctx, void *dst, const void *src, size_t bytes, gln_copy_kind_t kind) {
    return ctx->ops->memcpy(ctx, dst, src, bytes, kind);
}

gln_status_t gln_op_host_alloc(gln_context_t *ctx, size_t bytes, void **ptr) {
    *ptr = NULL;
    if (bytes == 0) return GLN_STATUS_SUCCESS;
    if (ctx->ops->host_alloc) return ctx->ops->host_alloc(ctx, bytes, ptr);
    *ptr = malloc(bytes);
    GLN_REQUIRE(*ptr != NULL, GLN_STATUS_OUT_OF_MEMORY,
                "grouplin: staging buffer: cannot allocate %zu bytes of host memory", bytes);
    return GLN_STATUS_SUCCESS;
}

void gln_op_host_free(gln_context_t *ctx, void *ptr) {
    if (!ptr) return;
    if (ctx->ops->host_free) ctx->ops->host_free(ctx, ptr);
    else free(ptr);
}

gln_status_t gln_op_synchronize(gln_context_t *ctx) { return ctx->ops->synchronize(ctx); }

gln_status_t gln_op_stream_capturing(gln_context_t *ctx, int *capturing) {
    *capturing = 0;
    return ctx->ops->stream_capturing ? ctx->ops->stream_capturing(ctx, capturing) : GLN_STATUS_SUCCESS;
}

/* The slot's name (its field in gln_backend_ops_t) and whether ctx's table sets it. */
static int slot_set(const gln_backend_ops_t *o, gln_op_slot_t slot, const char **name) {
#define SLOT(e, f) \
    case e: *name = #f; return o->f != NULL
    switch (slot) {
        SLOT(GLN_SLOT_GET_STREAM, get_stream);
        SLOT(GLN_SLOT_CAST, cast);
        SLOT(GLN_SLOT_GROUPED_AMAX, grouped_amax);
        SLOT(GLN_SLOT_SCALES_FROM_AMAX, scales_from_amax);
        SLOT(GLN_SLOT_MOE_ROUTER_FORWARD, moe_router_forward);
        SLOT(GLN_SLOT_MOE_ROUTER_BACKWARD, moe_router_backward);
        SLOT(GLN_SLOT_MOE_PERMUTE_PLAN, moe_permute_plan);
        SLOT(GLN_SLOT_MOE_PERMUTE, moe_permute);
        SLOT(GLN_SLOT_MOE_PERMUTE_BACKWARD, moe_permute_backward);
        SLOT(GLN_SLOT_MOE_UNPERMUTE, moe_unpermute);
        SLOT(GLN_SLOT_MOE_UNPERMUTE_BACKWARD, moe_unpermute_backward);
        SLOT(GLN_SLOT_ACTIVATION_FORWARD, activation_forward);
        SLOT(GLN_SLOT_ACTIVATION_BACKWARD, activation_backward);
        SLOT(GLN_SLOT_OPTIMIZER_STEP, optimizer_step);
    }
#undef SLOT
    *name = "(unknown)";
    return 0;
}

int gln_op_has(const gln_context_t *ctx, gln_op_slot_t slot) {
    const char *name;
    return slot_set(ctx->ops, slot, &name);
}

gln_status_t gln_op_require(const gln_context_t *ctx, const char *call, gln_op_slot_t slot) {
    const char *name;
    return slot_set(ctx->ops, slot, &name) ? GLN_STATUS_SUCCESS : gln_backend_missing(ctx, call, name);
}

/* The slot `f` called with ctx and the rest, or the missing-slot error under `call`. */
#define DISPATCH(f, call, ...) \
    (ctx->ops->f ? ctx->ops->f(ctx, __VA_ARGS__) : gln_backend_missing(ctx, call, #f))

gln_status_t gln_op_fp8_state_gather(gln_context_t *ctx, const char *call, const float *state_scale, int32_t first,
                                     int32_t stride, int32_t n, float *scale, float *amax) {
    return DISPATCH(fp8_state_gather, call, state_scale, first, stride, n, scale, amax);
}

gln_status_t gln_op_fp8_state_record(gln_context_t *ctx, const char *call, float *history_row0, int32_t first,
                                     int32_t stride, int32_t n, const float *amax, int nan_propagate) {
    return DISPATCH(fp8_state_record, call, history_row0, first, stride, n, amax, nan_propagate);
}

gln_status_t gln_op_fp8_state_update(gln_context_t *ctx, const char *call, int32_t num_slots, int32_t history_len,
                                     float *amax_history, float *scale, const float *fp8_max, int margin,
                                     gln_amax_algo_t algo, const gln_delayed_update_options_t *opts) {
    return DISPATCH(fp8_state_update, call, num_slots, history_len, amax_history, scale, fp8_max, margin, algo,
                    opts);
}

gln_status_t gln_op_grouped_amax(gln_context_t *ctx, const char *call, const gln_grouped_tensor_t *x,
                                 int nan_propagate, float *amax) {
    return DISPATCH(grouped_amax, call, x, nan_propagate, amax);
}

gln_status_t gln_op_add_f32(gln_context_t *ctx, const char *call, float *y, const float *x, int64_t n) {
    return DISPATCH(add_f32, call, y, x, n);
}

gln_status_t gln_op_scales_from_amax(gln_context_t *ctx, const char *call, const float *amax, int32_t n,
                                     float fp8_max, int power_2_scale, float epsilon, float *scale,
                                     float *scale_inv) {
    return DISPATCH(scales_from_amax, call, amax, n, fp8_max, power_2_scale, epsilon, scale, scale_inv);
}

gln_status_t gln_op_transpose_batched(gln_context_t *ctx, const char *call, const gln_transpose_t *t) {
    return DISPATCH(transpose_batched, call, t);
}

gln_status_t gln_op_optimizer_step(gln_context_t *ctx, const char *call, const gln_optimizer_params_t *p,
                                   float *master, const float *grad, float *exp_avg, float *exp_avg_sq, int64_t n,
                                   void *working, gln_dtype_t working_dtype, int32_t nseg, const int64_t *bounds,
                                   int bounds_on_backend, float *amax) {
    return DISPATCH(optimizer_step, call, p, master, grad, exp_avg, exp_avg_sq, n, working, working_dtype, nseg,
                    bounds, bounds_on_backend, amax);
}

gln_status_t gln_op_moe_router_forward(gln_context_t *ctx, const char *call, int64_t tokens, int32_t num_experts,
                                       int32_t k, const float *logits, int32_t *experts, float *gates) {
    return DISPATCH(moe_router_forward, call, tokens, num_experts, k, logits, experts, gates);
}

gln_status_t gln_op_moe_router_backward(gln_context_t *ctx, const char *call, int64_t tokens, int32_t num_experts,
                                        int32_t k, const float *logits, const int32_t *experts,
                                        const float *dgates, float *dlogits) {
    return DISPATCH(moe_router_backward, call, tokens, num_experts, k, logits, experts, dgates, dlogits);
}

gln_status_t gln_op_moe_permute_plan(gln_context_t *ctx, const char *call, int64_t tokens, int32_t num_experts,
                                     int32_t k, int64_t align, const int32_t *experts, int64_t *m_splits,
                                     int64_t *row_of) {
    return DISPATCH(moe_permute_plan, call, tokens, num_experts, k, align, experts, m_splits, row_of);
}

gln_status_t gln_op_moe_permute(gln_context_t *ctx, const char *call, int64_t tokens, int32_t k,
                                const int64_t *row_of, const gln_tensor_t *x, gln_tensor_t *xp) {
    return DISPATCH(moe_permute, call, tokens, k, row_of, x, xp);
}

gln_status_t gln_op_moe_permute_backward(gln_context_t *ctx, const char *call, int64_t tokens, int32_t k,
                                         const int64_t *row_of, const gln_tensor_t *dxp, gln_tensor_t *dx) {
    return DISPATCH(moe_permute_backward, call, tokens, k, row_of, dxp, dx);
}

gln_status_t gln_op_moe_unpermute(gln_context_t *ctx, const char *call, int64_t tokens, int32_t k,
                                  const int64_t *row_of, const float *gates, const gln_tensor_t *yp,
                                  gln_tensor_t *y) {
    return DISPATCH(moe_unpermute, call, tokens, k, row_of, gates, yp, y);
}

gln_status_t gln_op_moe_unpermute_backward(gln_context_t *ctx, const char *call, int64_t tokens, int32_t k,
                                           const int64_t *row_of, const float *gates, const gln_tensor_t *yp,
                                           const gln_tensor_t *dy, gln_tensor_t *dyp, float *dgates) {
    return DISPATCH(moe_unpermute_backward, call, tokens, k, row_of, gates, yp, dy, dyp, dgates);
}

gln_status_t gln_op_activation_forward(gln_context_t *ctx, const char *call, gln_activation_t act,
                                       const gln_tensor_t *in, gln_tensor_t *out) {
    return DISPATCH(activation_forward, call, act, in, out);
}

gln_status_t gln_op_activation_backward(gln_context_t *ctx, const char *call, gln_activation_t act,
                                        const gln_tensor_t *in, const gln_tensor_t *dout, gln_tensor_t *din) {
    return DISPATCH(activation_backward, call, act, in, dout, din);
}

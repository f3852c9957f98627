/* The one way into the backend's table for the library's own modules (the layer, the weights
 * group, the MoE building blocks, the communicators): every backend call from src/layer,
 * src/weights, src/moe and src/comm is one of these functions or one of backend/context.h's
 * (memory, the stream), and those folders never include backend.h (tests/docs/test_layering.py
 * holds them to it).  Each dispatches through the
 * context's table WITHOUT validating, because the caller built the arguments from inputs already
 * checked at a public boundary.  The public functions (gemm_api.c, quant_api.c, reduce_api.c,
 * src/moe) validate and then call these, so each operation has one funnel into the backend.
 *
 * A missing slot reports GLN_STATUS_NOT_SUPPORTED: "<call>: operation <op> is not implemented by
 * the <backend> backend".  The first group names the public call itself; the functions that take
 * `call` name the caller's.  Configs and args must be the current version of their struct (size
 * set by _INIT). */
#ifndef GLN_BACKEND_OPS_H
#define GLN_BACKEND_OPS_H

#include "backend/transpose.h"
#include "grouplin.h"
#include "numerics/optimizer_rule.h"

gln_status_t gln_op_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                             gln_tensor_t *out);
gln_status_t gln_op_grouped_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                     const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out);
gln_status_t gln_op_dequantize(gln_context_t *ctx, const gln_tensor_t *in, int columnwise,
                               gln_tensor_t *out);
gln_status_t gln_op_mxfp8_swizzle(gln_context_t *ctx, int64_t rows, int64_t cols, int columnwise,
                                  const uint8_t *compact, uint8_t *swizzled);
gln_status_t gln_op_gemm(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                         const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias, int accumulate);
gln_status_t gln_op_grouped_gemm(gln_context_t *ctx, const gln_grouped_gemm_args_t *args);
/* Grouped quantize + dbias in the tiled order (backend.h, grouped_quantize_dbias); cfg NULL: the
 * sums alone. */
gln_status_t gln_op_grouped_quantize_dbias(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                           const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                           gln_tensor_t *dbias, int accumulate);
/* Delayed scaling: grouped quantize (+ dbias when dbias is not NULL), then the amax history record
 * history_row0[first + i·stride] = gln_f32_max_amax(that, out->packed.amax[i], nan_propagate) —
 * fused into one launch where the backend can (backend.h, grouped_quantize_record). */
gln_status_t gln_op_grouped_quantize_record(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                            const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                            gln_tensor_t *dbias, int accumulate, float *history_row0, int32_t first,
                                            int32_t stride, int nan_propagate);
gln_status_t gln_op_grouped_dbias(gln_context_t *ctx, const gln_grouped_tensor_t *dy, gln_tensor_t *dbias,
                                  int accumulate);
gln_status_t gln_op_cast(gln_context_t *ctx, const gln_tensor_t *in, gln_tensor_t *out);
/* The activation (SwiGLU: in [rows, 2H]; GELU: in [rows, H]) with its output quantized like
 * grouped_quantize(cfg) does an hp_dtype [rows, H] tensor (backend.h, activation_forward_quantize):
 * the backend's fused slot, or the composition below. */
gln_status_t gln_op_activation_forward_quantize(gln_context_t *ctx, gln_activation_t act, gln_dtype_t hp_dtype,
                                                const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                                gln_grouped_tensor_t *out);
/* The composition: activation_forward into a scratch hp_dtype [rows, H] tensor, then
 * grouped_quantize on it with in's splits (rows past the splits, when the host can read them, are
 * neither activated nor quantized).  The reference of every fused implementation; a backend's
 * slot calls it for what it does not fuse. */
gln_status_t gln_op_activation_forward_quantize_composed(gln_context_t *ctx, gln_activation_t act,
                                                         gln_dtype_t hp_dtype, const gln_quant_config_t *cfg,
                                                         const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out);

/* Memory: every backend has memcpy (no slot check).  Copies that involve host memory return once
 * the host side may be read or reused (backend.h). */
gln_status_t gln_op_memcpy(gln_context_t *ctx, void *dst, const void *src, size_t bytes, gln_copy_kind_t kind);

/* Host staging, for a transport that moves host memory only (the MPI communicator on a device
 * context when MPI is not CUDA-aware).  On a CPU context these are malloc / free, a no-op drain
 * and "never capturing", so the staged path runs and is tested on the CPU too.
 * Host memory for staging (page-locked where the backend has it); 0 bytes gives NULL. */
gln_status_t gln_op_host_alloc(gln_context_t *ctx, size_t bytes, void **ptr);
void gln_op_host_free(gln_context_t *ctx, void *ptr);
/* Wait for everything enqueued on the context's stream. */
gln_status_t gln_op_synchronize(gln_context_t *ctx);
/* *capturing = 1 while the context's stream is being captured into a graph (never on the CPU). */
gln_status_t gln_op_stream_capturing(gln_context_t *ctx, int *capturing);

/* The optional slots a caller asks about before dispatching, when its own checks must come after
 * the "not implemented" answer (the MoE index contents, a multi-launch sequence). */
typedef enum gln_op_slot {
    GLN_SLOT_GET_STREAM,
    GLN_SLOT_CAST,
    GLN_SLOT_GROUPED_AMAX,
    GLN_SLOT_SCALES_FROM_AMAX,
    GLN_SLOT_MOE_ROUTER_FORWARD,
    GLN_SLOT_MOE_ROUTER_BACKWARD,
    GLN_SLOT_MOE_PERMUTE_PLAN,
    GLN_SLOT_MOE_PERMUTE,
    GLN_SLOT_MOE_PERMUTE_BACKWARD,
    GLN_SLOT_MOE_UNPERMUTE,
    GLN_SLOT_MOE_UNPERMUTE_BACKWARD,
    GLN_SLOT_ACTIVATION_FORWARD,
    GLN_SLOT_ACTIVATION_BACKWARD,
    GLN_SLOT_OPTIMIZER_STEP
} gln_op_slot_t;
/* 1 when ctx's backend implements `slot`. */
int gln_op_has(const gln_context_t *ctx, gln_op_slot_t slot);
/* SUCCESS when it does, else the missing-slot error under `call`. */
gln_status_t gln_op_require(const gln_context_t *ctx, const char *call, gln_op_slot_t slot);

/* Delayed-scaling state (backend.h, fp8_state_*), each under the caller's `call`. */
gln_status_t gln_op_fp8_state_gather(gln_context_t *ctx, const char *call, const float *state_scale, int32_t first,
                                     int32_t stride, int32_t n, float *scale, float *amax);
gln_status_t gln_op_fp8_state_record(gln_context_t *ctx, const char *call, float *history_row0, int32_t first,
                                     int32_t stride, int32_t n, const float *amax, int nan_propagate);
gln_status_t gln_op_fp8_state_update(gln_context_t *ctx, const char *call, int32_t num_slots, int32_t history_len,
                                     float *amax_history, float *scale, const float *fp8_max, int margin,
                                     gln_amax_algo_t algo, const gln_delayed_update_options_t *opts);

/* The distributed-weights group (backend.h, grouped_amax / add_f32 / scales_from_amax). */
gln_status_t gln_op_grouped_amax(gln_context_t *ctx, const char *call, const gln_grouped_tensor_t *x,
                                 int nan_propagate, float *amax);
gln_status_t gln_op_add_f32(gln_context_t *ctx, const char *call, float *y, const float *x, int64_t n);
gln_status_t gln_op_scales_from_amax(gln_context_t *ctx, const char *call, const float *amax, int32_t n,
                                     float fp8_max, int power_2_scale, float epsilon, float *scale,
                                     float *scale_inv);

/* The batched transpose (transpose.h; backend.h, transpose_batched) under the caller's `call`. */
gln_status_t gln_op_transpose_batched(gln_context_t *ctx, const char *call, const gln_transpose_t *t);

/* The optimizer step with the per-segment amax of the working values it writes (backend.h,
 * optimizer_step; nseg = 0: none).  gln_optimizer_step is this call with nseg = 0; the sharded
 * group passes its experts' parts of the shard as the segments. */
gln_status_t gln_op_optimizer_step(gln_context_t *ctx, const char *call, const gln_optimizer_params_t *p,
                                   float *master, const float *grad, float *exp_avg, float *exp_avg_sq, int64_t n,
                                   void *working, gln_dtype_t working_dtype, int32_t nseg, const int64_t *bounds,
                                   int bounds_on_backend, float *amax);

/* MoE building blocks (backend.h, moe_* and activation_*), after src/moe validated. */
gln_status_t gln_op_moe_router_forward(gln_context_t *ctx, const char *call, int64_t tokens, int32_t num_experts,
                                       int32_t k, const float *logits, int32_t *experts, float *gates);
gln_status_t gln_op_moe_router_backward(gln_context_t *ctx, const char *call, int64_t tokens, int32_t num_experts,
                                        int32_t k, const float *logits, const int32_t *experts,
                                        const float *dgates, float *dlogits);
gln_status_t gln_op_moe_permute_plan(gln_context_t *ctx, const char *call, int64_t tokens, int32_t num_experts,
                                     int32_t k, int64_t align, const int32_t *experts, int64_t *m_splits,
                                     int64_t *row_of);
gln_status_t gln_op_moe_permute(gln_context_t *ctx, const char *call, int64_t tokens, int32_t k,
                                const int64_t *row_of, const gln_tensor_t *x, gln_tensor_t *xp);
gln_status_t gln_op_moe_permute_backward(gln_context_t *ctx, const char *call, int64_t tokens, int32_t k,
                                         const int64_t *row_of, const gln_tensor_t *dxp, gln_tensor_t *dx);
gln_status_t gln_op_moe_unpermute(gln_context_t *ctx, const char *call, int64_t tokens, int32_t k,
                                  const int64_t *row_of, const float *gates, const gln_tensor_t *yp,
                                  gln_tensor_t *y);
gln_status_t gln_op_moe_unpermute_backward(gln_context_t *ctx, const char *call, int64_t tokens, int32_t k,
                                           const int64_t *row_of, const float *gates, const gln_tensor_t *yp,
                                           const gln_tensor_t *dy, gln_tensor_t *dyp, float *dgates);
gln_status_t gln_op_activation_forward(gln_context_t *ctx, const char *call, gln_activation_t act,
                                       const gln_tensor_t *in, gln_tensor_t *out);
gln_status_t gln_op_activation_backward(gln_context_t *ctx, const char *call, gln_activation_t act,
                                        const gln_tensor_t *in, const gln_tensor_t *dout, gln_tensor_t *din);

#endif

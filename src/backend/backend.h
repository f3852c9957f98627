/* The backend interface: one table of function pointers per backend.
 *
 * Public calls validate their arguments (shapes, dtypes, splits, pointers) and then dispatch
 * through ctx->ops; a backend may therefore assume valid input.  A NULL slot means "not
 * implemented by this backend": the dispatcher reports GLN_STATUS_NOT_SUPPORTED naming the
 * operation and the backend (see gln_backend_missing()).  The CPU backend fills every slot and
 * is the reference the CUDA backend is tested against. */
#ifndef GLN_BACKEND_H
#define GLN_BACKEND_H

#include "backend/transpose.h"
#include "grouplin.h"
#include "numerics/optimizer_rule.h"

typedef struct gln_backend_ops {
    const char *name;
    /* Largest m, n or k one GEMM of this backend takes (the CPU's BLAS counts in int); 0: no
     * limit beyond the size limits of grouplin.h.  Checked at the public boundary (gln_gemm,
     * gln_grouped_gemm, layer create and forward) so that no call fails on it inside. */
    int64_t max_gemm_dim;
    gln_status_t (*init)(gln_context_t *ctx);
    void (*fini)(gln_context_t *ctx);

    /* memory */
    gln_status_t (*malloc)(gln_context_t *ctx, size_t bytes, void **ptr);
    void (*free)(gln_context_t *ctx, void *ptr);
    gln_status_t (*memcpy)(gln_context_t *ctx, void *dst, const void *src, size_t bytes,
                           gln_copy_kind_t kind);
    gln_status_t (*memset)(gln_context_t *ctx, void *dst, int value, size_t bytes);
    gln_status_t (*synchronize)(gln_context_t *ctx);
    /* The library's own buffers (layer activations and weights, saved contexts, scratch): memory
     * usable in stream order on the context's stream, so that a call allocates and frees without
     * waiting for the device and a captured graph allocates nothing when it replays.  NULL: the
     * library uses malloc / free above (the CPU).  malloc / free stay what gln_malloc / gln_free
     * hand to the caller: memory usable from anywhere at once. */
    gln_status_t (*scratch_alloc)(gln_context_t *ctx, size_t bytes, void **ptr);
    void (*scratch_free)(gln_context_t *ctx, void *ptr);
    /* streams and device-side errors (NULL: the backend has no streams and reports every error
     * synchronously) */
    gln_status_t (*set_stream)(gln_context_t *ctx, void *stream);
    void *(*get_stream)(const gln_context_t *ctx);
    gln_status_t (*async_error)(gln_context_t *ctx);
    /* Host staging for transports that move host memory only (the MPI communicator on a device
     * context, through ops.h's gln_op_host_alloc and its neighbours): page-locked host memory
     * that copies to and from the device run at full speed (NULL: malloc / free), and whether the
     * context's stream is being captured into a graph, where a synchronizing transport must
     * refuse (NULL: never). */
    gln_status_t (*host_alloc)(gln_context_t *ctx, size_t bytes, void **ptr);
    void (*host_free)(gln_context_t *ctx, void *ptr);
    gln_status_t (*stream_capturing)(gln_context_t *ctx, int *capturing);

    /* quantization */
    gln_status_t (*quantize)(gln_context_t *ctx, const gln_quant_config_t *cfg,
                             const gln_tensor_t *in, gln_tensor_t *out);
    gln_status_t (*dequantize)(gln_context_t *ctx, const gln_tensor_t *in, int columnwise,
                               gln_tensor_t *out);
    gln_status_t (*grouped_quantize)(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                     const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out);
    gln_status_t (*mxfp8_swizzle)(gln_context_t *ctx, int64_t rows, int64_t cols, int columnwise,
                                  const uint8_t *compact, uint8_t *swizzled);

    /* Delayed-scaling state (src/layer/fp8_state.c): every array in backend memory, slot i of a
     * strided selection is first + i·stride (stride >= 1; n = 0 does nothing).  Enqueued in
     * stream order with no host wait, so a forward + backward can be captured in a graph. */
    /* scale[i] = state_scale[first + i·stride] for i < n, and amax[i] = 0 unless amax is NULL. */
    gln_status_t (*fp8_state_gather)(gln_context_t *ctx, const float *state_scale, int32_t first,
                                     int32_t stride, int32_t n, float *scale, float *amax);
    /* history_row0[first + i·stride] = gln_f32_max_amax(that, amax[i], nan_propagate), i < n. */
    gln_status_t (*fp8_state_record)(gln_context_t *ctx, float *history_row0, int32_t first,
                                     int32_t stride, int32_t n, const float *amax, int nan_propagate);
    /* gln_delayed_scaling_update_ex on backend arrays, bit for bit (quant/delayed_rule.h);
     * arguments already valid, opts non-NULL (a host struct). */
    gln_status_t (*fp8_state_update)(gln_context_t *ctx, int32_t num_slots, int32_t history_len,
                                     float *amax_history, float *scale, const float *fp8_max,
                                     int margin, gln_amax_algo_t algo,
                                     const gln_delayed_update_options_t *opts);

    /* GEMMs and reductions */
    gln_status_t (*gemm)(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                         const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias,
                         int accumulate);
    gln_status_t (*grouped_gemm)(gln_context_t *ctx, const gln_grouped_gemm_args_t *args);
    gln_status_t (*grouped_dbias)(gln_context_t *ctx, const gln_grouped_tensor_t *dy,
                                  gln_tensor_t *dbias, int accumulate);
    /* grouped_quantize of dy and its bias gradients from the same read, summed in the tiled
     * order of quant/dbias_tiled.h (not grouped_dbias's row order); cfg NULL (out unused): the
     * tiled sums alone.  NULL slot: gln_op_grouped_quantize_dbias refuses (NOT_SUPPORTED). */
    gln_status_t (*grouped_quantize_dbias)(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                           const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                           gln_tensor_t *dbias, int accumulate);
    /* Delayed scaling's grouped_quantize (grouped_quantize_dbias when dbias is not NULL) followed
     * by fp8_state_record(history_row0, first, stride, in->num, out->packed.amax, nan_propagate),
     * with the record fused into the launch that finishes the amaxes.  NULL slot:
     * gln_op_grouped_quantize_record makes the two calls. */
    gln_status_t (*grouped_quantize_record)(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                            const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                            gln_tensor_t *dbias, int accumulate, float *history_row0,
                                            int32_t first, int32_t stride, int nan_propagate);
    gln_status_t (*amax)(gln_context_t *ctx, const gln_tensor_t *x, int nan_propagate, float *amax);
    /* amax[i] = the amax slot's value for member i of x (host splits; rows of x->packed), 0 for
     * an empty member, i < x->num; amax is a backend array written in stream order.  One launch
     * for all members on a device (the FP8 all-gather's per-expert shard amaxes). */
    gln_status_t (*grouped_amax)(gln_context_t *ctx, const gln_grouped_tensor_t *x, int nan_propagate,
                                 float *amax);
    gln_status_t (*cast)(gln_context_t *ctx, const gln_tensor_t *in, gln_tensor_t *out);
    /* The distributed-weights group (src/weights), both in stream order on backend arrays:
     * y[i] += x[i] in FP32 for i < n (main_grad accumulation), and scale[i] =
     * gln_scale_from_amax_impl(amax[i], fp8_max, power_2_scale, epsilon, FLT_MAX) for i < n
     * (the current-scaling rule, for shards quantized with a global amax) and scale_inv[i] =
     * 1.0f / scale[i] (the decode scale a per-tensor quantize writes). */
    gln_status_t (*add_f32)(gln_context_t *ctx, float *y, const float *x, int64_t n);
    gln_status_t (*scales_from_amax)(gln_context_t *ctx, const float *amax, int32_t n, float fp8_max,
                                     int power_2_scale, float epsilon, float *scale, float *scale_inv);
    /* transpose.h's batched transpose, in stream order on backend arrays (the quantized shard's
     * columnwise copies); bit for bit gln_transpose_batched_ref. */
    gln_status_t (*transpose_batched)(gln_context_t *ctx, const gln_transpose_t *t);

    /* The optimizer step (gln_optimizer_step; numerics/optimizer_rule.h is the per-element rule,
     * p already resolved): master, exp_avg, exp_avg_sq updated in place over n elements (the
     * moments the kind does not use may be NULL), working (NULL: none) written in the same pass
     * with each new master rounded to working_dtype (fp32: a copy; working may be master).  With
     * nseg > 0, also amax[s] = max |working value| over segment s = [bounds[s], bounds[s+1]) for
     * s < nseg (NaN ignored, 0 for an empty segment; the FP32 master when working is NULL):
     * bounds non-decreasing in [0, n], host memory or (bounds_on_backend) backend memory; amax a
     * backend array, written in stream order.  Elements outside [bounds[0], bounds[nseg]) are
     * updated but counted nowhere. */
    gln_status_t (*optimizer_step)(gln_context_t *ctx, const gln_optimizer_params_t *p, float *master,
                                   const float *grad, float *exp_avg, float *exp_avg_sq, int64_t n, void *working,
                                   gln_dtype_t working_dtype, int32_t nseg, const int64_t *bounds,
                                   int bounds_on_backend, float *amax);

    /* MoE building blocks (src/moe validates, including the contents of experts and row_of, and
     * returns empty calls before dispatching) */
    gln_status_t (*moe_router_forward)(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                       const float *logits, int32_t *experts, float *gates);
    gln_status_t (*moe_router_backward)(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                        const float *logits, const int32_t *experts, const float *dgates,
                                        float *dlogits);
    gln_status_t (*moe_permute_plan)(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                     int64_t align, const int32_t *experts, int64_t *m_splits,
                                     int64_t *row_of);
    gln_status_t (*moe_permute)(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                const gln_tensor_t *x, gln_tensor_t *xp);
    gln_status_t (*moe_permute_backward)(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                         const gln_tensor_t *dxp, gln_tensor_t *dx);
    gln_status_t (*moe_unpermute)(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                  const float *gates, const gln_tensor_t *yp, gln_tensor_t *y);
    gln_status_t (*moe_unpermute_backward)(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                           const float *gates, const gln_tensor_t *yp, const gln_tensor_t *dy,
                                           gln_tensor_t *dyp, float *dgates);
    gln_status_t (*activation_forward)(gln_context_t *ctx, gln_activation_t act, const gln_tensor_t *in,
                                       gln_tensor_t *out);
    gln_status_t (*activation_backward)(gln_context_t *ctx, gln_activation_t act, const gln_tensor_t *in,
                                        const gln_tensor_t *dout, gln_tensor_t *din);
    /* gln_activation_forward_quantize: the bytes of activation_forward into an hp_dtype tensor
     * followed by grouped_quantize(cfg) on it (in: grouped [rows, 2H] or [rows, H]; out: grouped
     * quantized [rows, H]; not called when in has no elements).  NULL slot: the funnel runs that
     * composition itself (gln_op_activation_forward_quantize_composed), which is the CPU backend's
     * implementation and the reference of every fused one. */
    gln_status_t (*activation_forward_quantize)(gln_context_t *ctx, gln_activation_t act, gln_dtype_t hp_dtype,
                                                const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                                gln_grouped_tensor_t *out);

    /* capability query (gln_backend_supports): 1 when this backend runs the query's op with its
     * dtypes / modes / layout.  Called only for a valid query whose op has its slot set and
     * whose operands could meet on any backend; NULL = every such query is supported. */
    int (*supports)(const gln_op_query_t *query);
} gln_backend_ops_t;

/* The table of backend `kind` (select.c): NULL when that backend was not compiled in (or `kind`
 * is not a backend).  Contexts and gln_backend_supports pick their table here. */
const gln_backend_ops_t *gln_backend_ops_for(gln_backend_kind_t kind);

/* The built-in backends.  gln_backend_cuda_ops() returns NULL when CUDA was not compiled in. */
const gln_backend_ops_t *gln_backend_cpu_ops(void);
const gln_backend_ops_t *gln_backend_cuda_ops(void);
/* 1 when a CUDA device can be used (always 0 without the CUDA backend). */
int gln_cuda_device_present(void);
/* The CUDA backend's supports slot (src/backend/cuda/cuda_supports.c): plain C, compiled into
 * every build so that its answers can be tested on machines without CUDA. */
int gln_cuda_supports(const gln_op_query_t *query);

/* Report a missing slot: "<call>: operation <op> is not implemented by the <name> backend". */
gln_status_t gln_backend_missing(const gln_context_t *ctx, const char *call, const char *op);

#endif

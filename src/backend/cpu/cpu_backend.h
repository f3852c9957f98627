/* The CPU backend: host memory, reference quantizers (src/quant), OpenBLAS sgemm on FP32
 * operands (raw FP8 values with the scales in alpha or per K block, or exactly dequantized
 * values: see cpu_gemm_internal.h and docs/numerics.md).  Each slot of the ops table is one of
 * these functions. */
#ifndef GLN_BACKEND_CPU_H
#define GLN_BACKEND_CPU_H

#include "backend/backend.h"

/* cpu_quant.c — per-tensor and MXFP8 quantization through the fast loops of cpu_quant_fast.c
 * (bitwise identical to the host references of src/quant); the rest runs the references */
gln_status_t gln_cpu_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                              gln_tensor_t *out);
gln_status_t gln_cpu_dequantize(gln_context_t *ctx, const gln_tensor_t *in, int columnwise,
                                gln_tensor_t *out);
gln_status_t gln_cpu_grouped_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                      const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out);
gln_status_t gln_cpu_mxfp8_swizzle(gln_context_t *ctx, int64_t rows, int64_t cols, int columnwise,
                                   const uint8_t *compact, uint8_t *swizzled);

/* cpu_gemm.c */
gln_status_t gln_cpu_gemm(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                          const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias,
                          int accumulate);
gln_status_t gln_cpu_grouped_gemm(gln_context_t *ctx, const gln_grouped_gemm_args_t *args);

/* cpu_reduce.c */
gln_status_t gln_cpu_grouped_dbias(gln_context_t *ctx, const gln_grouped_tensor_t *dy,
                                   gln_tensor_t *dbias, int accumulate);
gln_status_t gln_cpu_amax(gln_context_t *ctx, const gln_tensor_t *x, int nan_propagate, float *amax);
gln_status_t gln_cpu_cast(gln_context_t *ctx, const gln_tensor_t *in, gln_tensor_t *out);

/* cpu_optimizer.c — the optimizer step (backend.h, optimizer_step): the reference twin of the
 * CUDA kernel (cuda_optimizer.cu), bit for bit */
gln_status_t gln_cpu_optimizer_step(gln_context_t *ctx, const gln_optimizer_params_t *p, float *master,
                                    const float *grad, float *exp_avg, float *exp_avg_sq, int64_t n, void *working,
                                    gln_dtype_t working_dtype, int32_t nseg, const int64_t *bounds,
                                    int bounds_on_backend, float *amax);

/* cpu_fp8_state.c — the delayed-scaling state slots (the reference of the CUDA kernels) */
gln_status_t gln_cpu_fp8_state_gather(gln_context_t *ctx, const float *state_scale, int32_t first,
                                      int32_t stride, int32_t n, float *scale, float *amax);
gln_status_t gln_cpu_fp8_state_record(gln_context_t *ctx, float *history_row0, int32_t first,
                                      int32_t stride, int32_t n, const float *amax, int nan_propagate);
gln_status_t gln_cpu_fp8_state_update(gln_context_t *ctx, int32_t num_slots, int32_t history_len,
                                      float *amax_history, float *scale, const float *fp8_max, int margin,
                                      gln_amax_algo_t algo, const gln_delayed_update_options_t *opts);

/* cpu_moe.c — router, permutation, activations (the reference of the MoE slots) */
gln_status_t gln_cpu_moe_router_forward(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                        const float *logits, int32_t *experts, float *gates);
gln_status_t gln_cpu_moe_router_backward(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                         const float *logits, const int32_t *experts, const float *dgates,
                                         float *dlogits);
gln_status_t gln_cpu_moe_permute_plan(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                      int64_t align, const int32_t *experts, int64_t *m_splits,
                                      int64_t *row_of);
gln_status_t gln_cpu_moe_permute(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                 const gln_tensor_t *x, gln_tensor_t *xp);
gln_status_t gln_cpu_moe_permute_backward(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                          const gln_tensor_t *dxp, gln_tensor_t *dx);
gln_status_t gln_cpu_moe_unpermute(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                   const float *gates, const gln_tensor_t *yp, gln_tensor_t *y);
gln_status_t gln_cpu_moe_unpermute_backward(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                            const float *gates, const gln_tensor_t *yp, const gln_tensor_t *dy,
                                            gln_tensor_t *dyp, float *dgates);
gln_status_t gln_cpu_activation_forward(gln_context_t *ctx, gln_activation_t act, const gln_tensor_t *in,
                                        gln_tensor_t *out);
gln_status_t gln_cpu_activation_backward(gln_context_t *ctx, gln_activation_t act, const gln_tensor_t *in,
                                         const gln_tensor_t *dout, gln_tensor_t *din);

#endif

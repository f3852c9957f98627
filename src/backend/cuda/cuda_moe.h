/* The CUDA backend's MoE slots (cuda_moe.cu): the top-k softmax router and its backward, the
 * permutation plan computed on the device, permute / unpermute and their backwards, and the
 * SwiGLU / GELU activations.  Everything is enqueued on the context's stream with no host wait,
 * so a step built from them can be captured in a CUDA graph.
 *
 * The dispatchers in src/moe check shapes and pointers; the contents of `experts` and `row_of`
 * live in device memory, so the kernels check them: an out-of-range entry is recorded in the
 * context's async error word (GLN_CUDA_ASYNC_MOE_INDEX, reported by gln_context_async_error)
 * and is clamped (reads) or skipped (writes), so nothing is touched out of bounds.
 *
 * Numerics against the CPU reference (src/backend/cpu/cpu_moe.c), which the tests check:
 *   bitwise   permutation plan (m_splits, row_of), permute, permute backward, unpermute, the
 *             dyp rows of unpermute backward (same FP32 operations in the same order, no
 *             contraction into FMA, one RNE rounding), the router's selection for inputs without
 *             near ties, and exact ties (lower expert index wins, as on the CPU);
 *   tolerance softmax, gates, router backward and activations (the device expf / tanhf differ
 *             from the host's by a few ulp) and dgates (a warp-order dot product).
 * Each result is deterministic run to run: no atomics decide an order or a sum. */
#ifndef GLN_BACKEND_CUDA_MOE_H
#define GLN_BACKEND_CUDA_MOE_H

#include "grouplin.h"

#ifdef __cplusplus
extern "C" {
#endif

gln_status_t gln_cuda_moe_router_forward(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                         const float *logits, int32_t *experts, float *gates);
gln_status_t gln_cuda_moe_router_backward(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                          const float *logits, const int32_t *experts, const float *dgates,
                                          float *dlogits);
gln_status_t gln_cuda_moe_permute_plan(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                       int64_t align, const int32_t *experts, int64_t *m_splits,
                                       int64_t *row_of);
gln_status_t gln_cuda_moe_permute(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                  const gln_tensor_t *x, gln_tensor_t *xp);
gln_status_t gln_cuda_moe_permute_backward(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                           const gln_tensor_t *dxp, gln_tensor_t *dx);
gln_status_t gln_cuda_moe_unpermute(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                    const float *gates, const gln_tensor_t *yp, gln_tensor_t *y);
gln_status_t gln_cuda_moe_unpermute_backward(gln_context_t *ctx, int64_t tokens, int32_t k,
                                             const int64_t *row_of, const float *gates, const gln_tensor_t *yp,
                                             const gln_tensor_t *dy, gln_tensor_t *dyp, float *dgates);
gln_status_t gln_cuda_activation_forward(gln_context_t *ctx, gln_activation_t act, const gln_tensor_t *in,
                                         gln_tensor_t *out);
gln_status_t gln_cuda_activation_backward(gln_context_t *ctx, gln_activation_t act, const gln_tensor_t *in,
                                          const gln_tensor_t *dout, gln_tensor_t *din);

#ifdef __cplusplus
}
#endif
#endif

/* The CUDA backend's delayed-scaling state slots: gather scales, record amaxes into history row
 * 0, and the update step — each one kernel on the context's stream, with no host wait and no
 * allocation, so the state never leaves the device and a step can be captured in a graph.
 *
 * Bitwise equal to the CPU reference (src/backend/cpu/cpu_fp8_state.c): the record uses the
 * same max (gln_f32_max_amax) and the update runs the shared per-slot rule of
 * quant/delayed_rule.h, one thread per slot.  Its only rounding operations are an FP32 multiply
 * by an exact power of two and an IEEE division, which nvcc computes correctly rounded and with
 * subnormals unless built with --use_fast_math (-prec-div=false / -ftz=true), which this
 * library never is. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "numerics/numerics.h"
#include "quant/delayed_rule.h"
}

#include "backend/cuda/cuda_device.h"

__global__ void gln_fp8_state_gather_kernel(const float *state_scale, int32_t first, int32_t stride, int32_t n,
                                            float *scale, float *amax) {
    for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        scale[i] = state_scale[first + (int64_t)i * stride];
        if (amax) amax[i] = 0.0f;
    }
}

__global__ void gln_fp8_state_record_kernel(float *history_row0, int32_t first, int32_t stride, int32_t n,
                                            const float *amax, int nan_propagate) {
    for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float *h = &history_row0[first + (int64_t)i * stride];
        *h = gln_f32_max_amax(*h, amax[i], nan_propagate);
    }
}

__global__ void gln_fp8_state_update_kernel(int32_t num_slots, int32_t history_len, float *amax_history,
                                            float *scale, const float *fp8_max, float pow2_neg_margin,
                                            gln_amax_algo_t algo, int always_roll, int nan_propagate) {
    for (int32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < num_slots; k += gridDim.x * blockDim.x)
        gln_delayed_update_slot(num_slots, history_len, amax_history, scale, fp8_max, k, pow2_neg_margin, algo,
                                always_roll, nan_propagate);
}

extern "C" gln_status_t gln_cuda_fp8_state_gather(gln_context_t *ctx, const float *state_scale, int32_t first,
                                                  int32_t stride, int32_t n, float *scale, float *amax) {
    if (n <= 0) return GLN_STATUS_SUCCESS;
    gln_fp8_state_gather_kernel<<<gln_dev_blocks((size_t)n, GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0,
                                  gln_cuda_state(ctx)->stream>>>(state_scale, first, stride, n, scale, amax);
    return gln_cuda_check_launch("delayed scaling (cuda)", "gln_fp8_state_gather_kernel");
}

extern "C" gln_status_t gln_cuda_fp8_state_record(gln_context_t *ctx, float *history_row0, int32_t first,
                                                  int32_t stride, int32_t n, const float *amax, int nan_propagate) {
    if (n <= 0) return GLN_STATUS_SUCCESS;
    gln_fp8_state_record_kernel<<<gln_dev_blocks((size_t)n, GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0,
                                  gln_cuda_state(ctx)->stream>>>(history_row0, first, stride, n, amax,
                                                                 nan_propagate);
    return gln_cuda_check_launch("delayed scaling (cuda)", "gln_fp8_state_record_kernel");
}

extern "C" gln_status_t gln_cuda_fp8_state_update(gln_context_t *ctx, int32_t num_slots, int32_t history_len,
                                                  float *amax_history, float *scale, const float *fp8_max,
                                                  int margin, gln_amax_algo_t algo,
                                                  const gln_delayed_update_options_t *opts) {
    if (num_slots <= 0) return GLN_STATUS_SUCCESS;
    gln_fp8_state_update_kernel<<<gln_dev_blocks((size_t)num_slots, GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0,
                                  gln_cuda_state(ctx)->stream>>>(
        num_slots, history_len, amax_history, scale, fp8_max, gln_delayed_pow2_neg_margin(margin), algo,
        opts->always_roll, opts->amax_nan_propagate);
    return gln_cuda_check_launch("delayed scaling (cuda)", "gln_fp8_state_update_kernel");
}

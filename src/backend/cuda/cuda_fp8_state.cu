/* The CUDA backend's delayed-scaling state slots: gather scales, record amaxes into history row
 * 0, and the update step — each one kernel on the context's stream, with no host wait and no
 * allocation, so the state never leaves the device and a step can be captured in a graph.
 *
 * Bitwise equal to the CPU reference (src/backend/cpu/cpu_fp8_state.c): the record uses the
 * same max (gln_f32_max_amax) and the update follows quant/delayed_rule.h's per-slot rule (its
 * scale function shared, the window's max and the roll spread over a block: see the kernel).  Its only rounding operations are an FP32 multiply
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

/* The update step, every slot of a block at once: 32 slots (threadIdx.x: consecutive slots, so
 * each history row is read and written as whole 128-byte lines) × 32 row lanes (threadIdx.y).
 * One thread per slot walking a 1024-row history one row after the other took ~340 µs per
 * update on an H200 (twice a layer step); here the row lanes share each slot's column.
 *  1. the window's amax: each row lane takes every 32nd row, the lanes' partial maxima meet in
 *     shared memory (max is exact and order-free: the same amax as the CPU's row-order loop, and
 *     NaN gives a NaN either way, which only decides "keep the old scale");
 *  2. the roll (row i takes row i + 1, the last row takes row 0, row 0 becomes 0), in place, in
 *     chunks of UPD_ROWS · UPD_PER rows from the top: a chunk reads rows base + 1 .. base + 256
 *     into registers, the block synchronizes, then writes rows base .. base + 255.  Row base + 256
 *     belongs to the next chunk, which writes it only after this chunk has read it;
 *  3. the scale, by row lane 0 (quant/delayed_rule.h's rule).
 * A slot that saw nothing this step (row 0 == 0, without always_roll) is left alone, as in
 * gln_delayed_update_slot. */
#define UPD_SLOTS 32
#define UPD_ROWS 32
#define UPD_PER 8

__global__ void __launch_bounds__(UPD_SLOTS *UPD_ROWS)
    gln_fp8_state_update_kernel(int32_t num_slots, int32_t history_len, float *amax_history, float *scale,
                                const float *fp8_max, float pow2_neg_margin, gln_amax_algo_t algo, int always_roll,
                                int nan_propagate) {
    __shared__ float part[UPD_ROWS][UPD_SLOTS + 1];
    const int x = threadIdx.x, y = threadIdx.y;
    const int32_t k = (int32_t)blockIdx.x * UPD_SLOTS + x;
    const int64_t ns = num_slots, L = history_len;
    float *const h = amax_history;
    const float first = k < num_slots ? h[k] : 0.0f;
    const bool active = k < num_slots && (always_roll || first != 0.0f);
    float m = first;
    if (active && algo != GLN_AMAX_ALGO_MOST_RECENT)
        for (int64_t i = 1 + y; i < L; i += UPD_ROWS) m = gln_f32_max_amax(m, h[i * ns + k], nan_propagate);
    part[y][x] = m;
    __syncthreads(); /* every read of the window is done before the roll writes */
    for (int64_t base = 0; base < L; base += UPD_ROWS * UPD_PER) {
        float v[UPD_PER];
#pragma unroll
        for (int j = 0; j < UPD_PER; j++) {
            const int64_t i = base + y + (int64_t)UPD_ROWS * j;
            v[j] = active && i < L ? (i + 1 < L ? h[(i + 1) * ns + k] : first) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < UPD_PER; j++) {
            const int64_t i = base + y + (int64_t)UPD_ROWS * j;
            if (active && i < L) h[i * ns + k] = i == 0 ? 0.0f : v[j];
        }
        __syncthreads();
    }
    if (y == 0 && active) {
        float amax = part[0][x];
        for (int r = 1; r < UPD_ROWS; r++) amax = gln_f32_max_amax(amax, part[r][x], nan_propagate);
        gln_delayed_set_scale(scale, fp8_max, k, amax, pow2_neg_margin);
    }
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
    const unsigned int blocks = (unsigned int)((num_slots + UPD_SLOTS - 1) / UPD_SLOTS);
    gln_fp8_state_update_kernel<<<blocks, dim3(UPD_SLOTS, UPD_ROWS), 0, gln_cuda_state(ctx)->stream>>>(
        num_slots, history_len, amax_history, scale, fp8_max, gln_delayed_pow2_neg_margin(margin), algo,
        opts->always_roll, opts->amax_nan_propagate);
    return gln_cuda_check_launch("delayed scaling (cuda)", "gln_fp8_state_update_kernel");
}

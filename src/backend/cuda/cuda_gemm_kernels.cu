/* Element-wise kernels around the cuBLASLt GEMMs (cuda_gemm.c) for the cases cuBLASLt cannot
 * finish with one rounding in the output dtype (a bias, or inputs whose type pair has no native
 * output type): the FP32 accumulator is prefilled with old D and bias exactly like the CPU
 * backend (acc = D + bias, in that order), cuBLASLt adds the product with beta = 1, and the
 * result is rounded once to D's dtype. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "numerics/numerics.h"
#include "tensor/scale_layout.h"
}

#include "backend/cuda/cuda_device.h"

/* acc[i, j] = (accumulate ? D[i, j] : 0) + (bias ? bias[j] : 0), FP32, row-major [m, n].  With
 * neither, acc = 0. */
__global__ void gln_gemm_prefill_kernel(float *acc, const void *d, int d_dtype, const void *bias, int bias_dtype,
                                        int accumulate, int64_t m, int64_t n) {
    const size_t total = (size_t)m * (size_t)n;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const size_t j = i % (size_t)n;
        float v;
        if (accumulate) {
            v = gln_dev_load(d, d_dtype, i);
            if (bias) v += gln_dev_load(bias, bias_dtype, j);
        } else {
            v = bias ? gln_dev_load(bias, bias_dtype, j) : 0.0f;
        }
        acc[i] = v;
    }
}

__global__ void gln_gemm_narrow_kernel(const float *acc, void *d, int d_dtype, size_t n) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        gln_dev_store(d, d_dtype, i, acc[i]);
}

extern "C" gln_status_t gln_cuda_gemm_prefill(gln_context_t *ctx, float *acc, const gln_tensor_t *D,
                                              const gln_tensor_t *bias, int accumulate, int64_t m, int64_t n,
                                              const char *call) {
    const size_t total = (size_t)m * (size_t)n;
    if (total == 0) return GLN_STATUS_SUCCESS;
    cudaStream_t st = gln_cuda_state(ctx)->stream;
    gln_gemm_prefill_kernel<<<gln_dev_blocks(total, GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0, st>>>(
        acc, D->data, (int)D->dtype, bias ? bias->data : NULL, bias ? (int)bias->dtype : 0, accumulate, m, n);
    return gln_cuda_check_launch(call, "gln_gemm_prefill_kernel");
}

extern "C" gln_status_t gln_cuda_narrow(gln_context_t *ctx, const float *acc, gln_tensor_t *D, size_t count,
                                        const char *call) {
    if (count == 0) return GLN_STATUS_SUCCESS;
    cudaStream_t st = gln_cuda_state(ctx)->stream;
    gln_gemm_narrow_kernel<<<gln_dev_blocks(count, GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0, st>>>(
        acc, D->data, (int)D->dtype, count);
    return gln_cuda_check_launch(call, "gln_gemm_narrow_kernel");
}

/* Block-scaled GEMMs: acc[i, j] += partial[i, j] · (sa · sb), where sa is A's decode scale for
 * output column j and sb is B's for output row i, both at reduction index k0 (the K block of
 * this partial product).  The same FP32 operations, in the same order, as the CPU backend
 * (explicit _rn intrinsics: no contraction into an FMA). */
__device__ __forceinline__ float gln_block_scale_of(gln_cuda_scale_ref_t s, int64_t k0, int64_t idx) {
    const int64_t r = s.k_is_row ? k0 : idx, c = s.k_is_row ? idx : k0;
    return s.scales[gln_scale_index_in_grid((gln_scaling_mode_t)s.mode, s.columnwise, r, c, s.gc)];
}

__global__ void gln_gemm_block_scale_kernel(float *acc, const float *partial, int64_t m, int64_t n, int64_t k0,
                                            gln_cuda_scale_ref_t a, gln_cuda_scale_ref_t b) {
    const size_t total = (size_t)m * (size_t)n;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const int64_t row = (int64_t)(i / (size_t)n), col = (int64_t)(i % (size_t)n);
        const float s = gln_dev_mul(gln_block_scale_of(a, k0, col), gln_block_scale_of(b, k0, row));
        acc[i] = gln_dev_add(acc[i], gln_dev_mul(partial[i], s));
    }
}

extern "C" gln_status_t gln_cuda_gemm_block_scale(gln_context_t *ctx, float *acc, const float *partial, int64_t m,
                                                  int64_t n, int64_t k0, const gln_cuda_scale_ref_t *a,
                                                  const gln_cuda_scale_ref_t *b, const char *call) {
    const size_t total = (size_t)m * (size_t)n;
    if (total == 0) return GLN_STATUS_SUCCESS;
    cudaStream_t st = gln_cuda_state(ctx)->stream;
    gln_gemm_block_scale_kernel<<<gln_dev_blocks(total, GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0, st>>>(
        acc, partial, m, n, k0, *a, *b);
    return gln_cuda_check_launch(call, "gln_gemm_block_scale_kernel");
}

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

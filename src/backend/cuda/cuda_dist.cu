/* CUDA kernels of the distributed-weights group, on the context's stream: y += x in FP32
 * (main_grad accumulation after a reduce-scatter) and the current-scaling scale of each global
 * amax (the FP8 all-gather).  Both are element-wise with one IEEE operation per element, so they
 * equal their CPU twins (cpu_dist.c) bit for bit. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_dist.h"
#include "common/error.h"
#include "numerics/numerics.h"
}
/* after numerics.h: the device helpers build on its scalar conversions */
#include "backend/cuda/cuda_device.h"

__global__ void gln_add_f32_kernel(float *y, const float *x, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = gln_dev_add(y[i], x[i]); /* no contraction; NaN picked like the CPU */
}

__global__ void gln_scales_from_amax_kernel(const float *amax, int32_t n, float fp8_max, int pow2,
                                            float epsilon, float *scale, float *scale_inv) {
    int32_t i = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n) return;
    float s = gln_scale_from_amax_impl(amax[i], fp8_max, pow2, epsilon, GLN_FP32_MAX);
    scale[i] = s;
    scale_inv[i] = 1.0f / s; /* IEEE division (nvcc -prec-div), as the quantize kernels */
}

extern "C" gln_status_t gln_cuda_add_f32(gln_context_t *ctx, float *y, const float *x, int64_t n) {
    if (n <= 0) return GLN_STATUS_SUCCESS;
    unsigned int blocks = gln_dev_blocks((size_t)n, GLN_CUDA_THREADS); /* grid-stride past the cap */
    gln_add_f32_kernel<<<blocks, GLN_CUDA_THREADS, 0, gln_cuda_state(ctx)->stream>>>(y, x, n);
    return gln_cuda_check_launch("gln_sharded_weights (main_grad +=)", "gln_add_f32_kernel");
}

extern "C" gln_status_t gln_cuda_scales_from_amax(gln_context_t *ctx, const float *amax, int32_t n,
                                                  float fp8_max, int power_2_scale, float epsilon,
                                                  float *scale, float *scale_inv) {
    if (n <= 0) return GLN_STATUS_SUCCESS;
    gln_scales_from_amax_kernel<<<gln_dev_blocks((size_t)n, GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0,
                                  gln_cuda_state(ctx)->stream>>>(amax, n, fp8_max, power_2_scale,
                                                                 epsilon, scale, scale_inv);
    return gln_cuda_check_launch("gln_sharded_weights (FP8 gather scales)", "gln_scales_from_amax_kernel");
}

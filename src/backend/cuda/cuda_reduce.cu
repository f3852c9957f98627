/* CUDA reductions and casts: amax and dtype conversion (the grouped bias gradient, which reads
 * the group plan, is in cuda_plan.cu).
 *
 * Both are bitwise equal to the CPU backend (src/backend/cpu/cpu_reduce.c):
 *   amax   max |x| is order independent (compared as FP32 bits, which order like the values for
 *          x >= 0); NaN elements are ignored, as on the CPU (TE's fmaxf rule).  With
 *          nan_propagate a NaN anywhere gives |x[i]| of the lowest NaN index i, which is the
 *          value the CPU's first-NaN loop returns.
 *   cast   widen exactly to FP32, one RNE rounding through numerics.h.
 */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "numerics/numerics.h"
}

#include "backend/cuda/cuda_device.h"

/* ---- amax --------------------------------------------------------------------------------- */

__global__ void gln_amax_partial_kernel(const void *x, int dtype, size_t n, gln_cuda_amax_work_t *work) {
    gln_dev_amax_partial(x, dtype, (size_t)blockIdx.x * blockDim.x + threadIdx.x, n, (size_t)gridDim.x * blockDim.x,
                         &work->max_bits, &work->nan_index);
}

__global__ void gln_amax_final_kernel(const void *x, int dtype, const gln_cuda_amax_work_t *work, float *amax,
                                      int accumulate, int nan_propagate) {
    /* The partial kernel keeps NaN out of max_bits (TE's fmaxf rule) and records the lowest NaN
     * index for the propagating rule. */
    float a = nan_propagate && work->nan_index != GLN_NO_NAN_INDEX
                  ? gln_f32_abs(gln_dev_load(x, dtype, work->nan_index))
                  : gln_f32_from_bits(work->max_bits);
    if (accumulate) a = gln_f32_max_amax(*amax, a, nan_propagate);
    *amax = a;
}

extern "C" gln_status_t gln_cuda_amax_launch(gln_context_t *ctx, const void *x, gln_dtype_t dtype, size_t count,
                                             float *amax, int accumulate, int nan_propagate, const char *call) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    /* nan_index = all ones, max_bits = 0 */
    GLN_TRY(gln_cuda_check(cudaMemsetAsync(&s->amax_work->nan_index, 0xFF, sizeof(unsigned long long), s->stream),
                           call, "cudaMemsetAsync(amax work)"));
    GLN_TRY(gln_cuda_check(cudaMemsetAsync(&s->amax_work->max_bits, 0, sizeof(unsigned int), s->stream), call,
                           "cudaMemsetAsync(amax work)"));
    if (count > 0) {
        gln_amax_partial_kernel<<<gln_dev_blocks(count, GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0, s->stream>>>(
            x, (int)dtype, count, s->amax_work);
        GLN_TRY(gln_cuda_check_launch(call, "gln_amax_partial_kernel"));
    }
    gln_amax_final_kernel<<<1, 1, 0, s->stream>>>(x, (int)dtype, s->amax_work, amax, accumulate, nan_propagate);
    return gln_cuda_check_launch(call, "gln_amax_final_kernel");
}

/* `amax` may be device (or managed) memory, written in stream order, or host memory, filled
 * before returning (the stream is synchronized). */
extern "C" gln_status_t gln_cuda_amax(gln_context_t *ctx, const gln_tensor_t *x, int nan_propagate, float *amax) {
    static const char *fn = "gln_amax (cuda)";
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    const size_t n = (size_t)x->rows * (size_t)x->cols;
    cudaPointerAttributes attr;
    memset(&attr, 0, sizeof attr);
    GLN_TRY(gln_cuda_check(cudaPointerGetAttributes(&attr, amax), fn, "cudaPointerGetAttributes(amax)"));
    if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged)
        return gln_cuda_amax_launch(ctx, x->data, x->dtype, n, amax, 0, nan_propagate, fn);
    GLN_TRY(gln_cuda_amax_launch(ctx, x->data, x->dtype, n, s->amax_tmp, 0, nan_propagate, fn));
    GLN_TRY(gln_cuda_check(cudaMemcpyAsync(amax, s->amax_tmp, sizeof(float), cudaMemcpyDeviceToHost, s->stream),
                           fn, "cudaMemcpyAsync(amax)"));
    return gln_cuda_check(cudaStreamSynchronize(s->stream), fn, "cudaStreamSynchronize");
}

/* ---- cast --------------------------------------------------------------------------------- */

__global__ void gln_cast_kernel(const void *in, int in_dtype, void *out, int out_dtype, size_t n) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        gln_dev_store(out, out_dtype, i, gln_dev_load(in, in_dtype, i));
}

extern "C" gln_status_t gln_cuda_cast(gln_context_t *ctx, const gln_tensor_t *in, gln_tensor_t *out) {
    static const char *fn = "gln_cast (cuda)";
    const size_t n = (size_t)in->rows * (size_t)in->cols;
    if (n == 0) return GLN_STATUS_SUCCESS;
    cudaStream_t st = gln_cuda_state(ctx)->stream;
    gln_cast_kernel<<<gln_dev_blocks(n, GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0, st>>>(
        in->data, (int)in->dtype, out->data, (int)out->dtype, n);
    return gln_cuda_check_launch(fn, "gln_cast_kernel");
}

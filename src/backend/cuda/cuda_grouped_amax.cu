/* The grouped_amax slot: the amax of every member of a grouped tensor with host splits, in one
 * pass over the data (a memset, one partial kernel, one finalize kernel per 256 members) instead
 * of a memset pair and two kernels per member.  The FP8 all-gather uses it for the per-expert
 * amaxes of a rank's shard, which must be all-reduced before any scale is chosen.
 *
 * Bitwise equal to gln_cpu_grouped_amax (each member's gln_cpu_amax): max |x| compared on the
 * FP32 bits (they order like the values for |x|), NaN elements ignored, or with nan_propagate
 * |x| of the member's lowest-index NaN (the CPU loop's first NaN); an empty member gives 0.
 *
 * The member offsets travel in the kernel's parameters (host splits: nothing to upload), so
 * blockIdx.y picks the member and blockIdx.x strides through it. */
#include <cublasLt.h> /* outside extern "C": cuda_backend.h reaches its C++ overloads */
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_dist.h"
#include "common/error.h"
#include "numerics/numerics.h"
}

#include "backend/cuda/cuda_device.h"

enum { GA_BATCH = 256, GA_MAX_BLOCKS_X = 1024 };

/* Element offsets of a batch's members from the packed data: member m is [off[m], off[m+1]). */
typedef struct ga_offsets {
    int64_t off[GA_BATCH + 1];
} ga_offsets_t;

__global__ void gln_grouped_amax_partial_kernel(const void *x, int dtype, ga_offsets_t offs,
                                                unsigned int *bits, unsigned long long *nan_index) {
    const int m = blockIdx.y;
    const size_t lo = (size_t)offs.off[m], hi = (size_t)offs.off[m + 1];
    if (lo + (size_t)blockIdx.x * blockDim.x >= hi) return; /* the whole block: uniform exit */
    gln_dev_amax_partial(x, dtype, lo + (size_t)blockIdx.x * blockDim.x + threadIdx.x, hi,
                         (size_t)gridDim.x * blockDim.x, &bits[m], &nan_index[m]);
}

__global__ void gln_grouped_amax_final_kernel(const void *x, int dtype, int count, const unsigned int *bits,
                                              const unsigned long long *nan_index, int nan_propagate,
                                              float *amax) {
    const int m = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (m >= count) return;
    amax[m] = nan_propagate && nan_index[m] != GLN_NO_NAN_INDEX ? gln_f32_abs(gln_dev_load(x, dtype, nan_index[m]))
                                                         : gln_f32_from_bits(bits[m]);
}

extern "C" gln_status_t gln_cuda_grouped_amax(gln_context_t *ctx, const gln_grouped_tensor_t *x, int nan_propagate,
                                              float *amax) {
    static const char *fn = "grouped amax (cuda)";
    GLN_REQUIRE(!x->splits_on_backend, GLN_STATUS_NOT_SUPPORTED, "%s: splits must be host memory", fn);
    if (x->num <= 0) return GLN_STATUS_SUCCESS;
    cudaStream_t stream = gln_cuda_state(ctx)->stream;
    const int64_t cols = x->packed.cols;
    const int batch_max = x->num < GA_BATCH ? x->num : GA_BATCH;
    /* per batch member: the max |x| bits (0), the lowest NaN index (all ones) */
    const size_t bits_bytes = (size_t)batch_max * sizeof(unsigned int);
    const size_t nan_off = (bits_bytes + 7) & ~(size_t)7;
    void *work = NULL;
    GLN_TRY(gln_cuda_scratch_alloc(ctx, nan_off + (size_t)batch_max * sizeof(unsigned long long), &work, fn));
    unsigned int *bits = (unsigned int *)work;
    unsigned long long *nan_index = (unsigned long long *)((char *)work + nan_off);
    gln_status_t st = GLN_STATUS_SUCCESS;
    int64_t row = 0;
    for (int32_t b0 = 0; b0 < x->num && st == GLN_STATUS_SUCCESS; b0 += GA_BATCH) {
        const int count = x->num - b0 < GA_BATCH ? (int)(x->num - b0) : GA_BATCH;
        ga_offsets_t offs;
        int64_t longest = 0;
        for (int m = 0; m < count; m++) {
            offs.off[m] = row * cols;
            row += x->splits[b0 + m];
            if (x->splits[b0 + m] * cols > longest) longest = x->splits[b0 + m] * cols;
        }
        offs.off[count] = row * cols;
        st = gln_cuda_check(cudaMemsetAsync(bits, 0, (size_t)count * sizeof(unsigned int), stream), fn,
                            "cudaMemsetAsync(amax bits)");
        if (st == GLN_STATUS_SUCCESS)
            st = gln_cuda_check(cudaMemsetAsync(nan_index, 0xFF, (size_t)count * sizeof(unsigned long long), stream),
                                fn, "cudaMemsetAsync(NaN indices)");
        if (st != GLN_STATUS_SUCCESS) break;
        if (longest > 0) {
            unsigned int bx = gln_dev_blocks((size_t)longest, GLN_CUDA_THREADS);
            if (bx > GA_MAX_BLOCKS_X) bx = GA_MAX_BLOCKS_X; /* grid-stride past it */
            gln_grouped_amax_partial_kernel<<<dim3(bx, (unsigned int)count), GLN_CUDA_THREADS, 0, stream>>>(
                x->packed.data, (int)x->packed.dtype, offs, bits, nan_index);
            st = gln_cuda_check_launch(fn, "gln_grouped_amax_partial_kernel");
            if (st != GLN_STATUS_SUCCESS) break;
        }
        gln_grouped_amax_final_kernel<<<gln_dev_blocks((size_t)count, GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0,
                                        stream>>>(x->packed.data, (int)x->packed.dtype, count, bits, nan_index,
                                                  nan_propagate, amax + b0);
        st = gln_cuda_check_launch(fn, "gln_grouped_amax_final_kernel");
    }
    gln_cuda_scratch_free(ctx, work); /* stream-ordered: after the kernels that use it */
    return st;
}

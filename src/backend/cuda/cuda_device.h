/* Device-side helpers shared by the CUDA kernels (included by .cu files only, after
 * numerics/numerics.h): element loads and stores of the high-precision dtypes through the one
 * definition of each rounding in numerics.h, FP8 encode/decode by dtype, warp reductions and
 * launch-size helpers.  Scale grids and scale placement come from tensor/scale_layout.h, the one
 * host-and-device definition of the quantized layouts. */
#ifndef GLN_BACKEND_CUDA_DEVICE_H
#define GLN_BACKEND_CUDA_DEVICE_H

#ifndef __CUDACC__
#error "cuda_device.h is for CUDA sources only"
#endif

#include <string.h>

/* Threads per block of the element-wise kernels. */
#define GLN_CUDA_THREADS 256
/* Upper bound on the blocks of a grid-stride kernel (enough to fill an H200 several times). */
#define GLN_CUDA_MAX_BLOCKS 4096

/* Element i of a fp32 / bf16 / fp16 buffer as FP32 (exact). */
__device__ __forceinline__ float gln_dev_load(const void *p, int dtype, size_t i) {
    if (dtype == GLN_DTYPE_FP32) return ((const float *)p)[i];
    const uint16_t b = ((const uint16_t *)p)[i];
    return dtype == GLN_DTYPE_BF16 ? gln_bf16_bits_to_f32(b) : gln_fp16_bits_to_f32(b);
}

/* Store v rounded (RNE) to a fp32 / bf16 / fp16 buffer. */
__device__ __forceinline__ void gln_dev_store(void *p, int dtype, size_t i, float v) {
    if (dtype == GLN_DTYPE_FP32) {
        ((float *)p)[i] = v;
    } else if (dtype == GLN_DTYPE_BF16) {
        ((uint16_t *)p)[i] = gln_f32_to_bf16_bits(v);
    } else {
        ((uint16_t *)p)[i] = gln_f32_to_fp16_bits(v);
    }
}

__device__ __forceinline__ uint8_t gln_dev_to_fp8(float v, int fp8_dtype) {
    return fp8_dtype == GLN_DTYPE_FP8_E4M3 ? gln_f32_to_e4m3_bits(v) : gln_f32_to_e5m2_bits(v);
}

__device__ __forceinline__ float gln_dev_from_fp8(uint8_t b, int fp8_dtype) {
    return fp8_dtype == GLN_DTYPE_FP8_E4M3 ? gln_e4m3_bits_to_f32(b) : gln_e5m2_bits_to_f32(b);
}

/* max over a warp of non-negative FP32 values, NaN-ignoring like gln_f32_max_fin (TE's fmaxf:
 * NaN only if every lane is NaN), the default amax rule. */
__device__ __forceinline__ float gln_dev_warp_max_fin(float v) {
    for (int off = 16; off > 0; off >>= 1) v = gln_f32_max_fin(v, __shfl_xor_sync(0xFFFFFFFFu, v, off));
    return v;
}

/* max over a warp, NaN-propagating like gln_f32_max_nan (which NaN is unspecified). */
__device__ __forceinline__ float gln_dev_warp_max_nan(float v) {
    for (int off = 16; off > 0; off >>= 1) v = gln_f32_max_nan(v, __shfl_xor_sync(0xFFFFFFFFu, v, off));
    return v;
}

/* The warp max of the amax_nan_propagate option (gln_f32_max_amax): any NaN lane makes every
 * lane's result NaN under 1; NaN lanes are ignored under 0.  Used where only whether the amax
 * is NaN matters (an MXFP8 code or a block scale), not which NaN. */
__device__ __forceinline__ float gln_dev_warp_max_amax(float v, int nan_propagate) {
    return nan_propagate ? gln_dev_warp_max_nan(v) : gln_dev_warp_max_fin(v);
}

/* a·b and a+b with the NaN propagation of the host's SSE arithmetic, which the CPU reference
 * runs on: a NaN operand comes back quieted with its sign and payload (the first operand when
 * both are NaN).  Plain CUDA arithmetic returns the canonical NaN 0x7FFFFFFF instead, which would
 * lose the sign of an FP8 NaN and the payload of a dequantized or summed NaN. */
__device__ __forceinline__ float gln_dev_nan_pick(float a, float b) {
    return gln_f32_from_bits(gln_f32_bits(gln_f32_isnan(a) ? a : b) | 0x00400000u);
}
__device__ __forceinline__ float gln_dev_mul(float a, float b) {
    return gln_f32_isnan(a) || gln_f32_isnan(b) ? gln_dev_nan_pick(a, b) : __fmul_rn(a, b);
}
__device__ __forceinline__ float gln_dev_add(float a, float b) {
    return gln_f32_isnan(a) || gln_f32_isnan(b) ? gln_dev_nan_pick(a, b) : __fadd_rn(a, b);
}

/* The grouped dbias outputs of up to GLN_DBIAS_CHUNK members, by value in a kernel's parameters
 * (no host-to-device copy, so the launch captures in a graph): member first + i's buffer and
 * dtype at i.  Shared by the dbias of the plan (cuda_plan.cu) and the quantizers' fused dbias
 * finalize (cuda_quant_members.cu). */
#define GLN_DBIAS_CHUNK 128
typedef struct gln_dbias_outputs {
    void *data[GLN_DBIAS_CHUNK];
    int dtype[GLN_DBIAS_CHUNK];
} gln_dbias_outputs_t;

/* dbias[first .. first + n) as that parameter (n <= GLN_DBIAS_CHUNK; the rest zero). */
static inline gln_dbias_outputs_t gln_dbias_outputs(const gln_tensor_t *dbias, int32_t first, int32_t n) {
    gln_dbias_outputs_t out;
    memset(&out, 0, sizeof out);
    for (int32_t i = 0; i < n; i++) out.data[i] = dbias[first + i].data, out.dtype[i] = (int)dbias[first + i].dtype;
    return out;
}

static inline unsigned int gln_dev_blocks(size_t work, unsigned int per_block) {
    size_t b = (work + per_block - 1) / per_block;
    if (b < 1) b = 1;
    if (b > GLN_CUDA_MAX_BLOCKS) b = GLN_CUDA_MAX_BLOCKS;
    return (unsigned int)b;
}

#include "backend/cuda/cuda_pdl.cuh"

/* No NaN seen: the sentinel of the lowest-NaN-index reductions. */
#define GLN_NO_NAN_INDEX 0xFFFFFFFFFFFFFFFFull

/* The amax partial of one block over elements first, first + stride, ... below hi (first: this
 * thread's start; stride: the grid's threads): the largest non-NaN |x| as FP32 bits (they order
 * like the values) and the lowest NaN index, reduced over the block; thread 0 folds them into
 * *bits (atomicMax, when nonzero) and *nan_index (atomicMin, when a NaN was seen).  Every thread
 * of a block of GLN_CUDA_THREADS calls it.  The CPU reference: max |x| ignoring NaN, or |x| of the
 * first NaN under nan_propagate (the caller's finalize picks between the two). */
__device__ __forceinline__ void gln_dev_amax_partial(const void *x, int dtype, size_t first, size_t hi,
                                                     size_t stride, unsigned int *bits,
                                                     unsigned long long *nan_index) {
    __shared__ unsigned int s_bits[GLN_CUDA_THREADS / 32];
    __shared__ unsigned long long s_nan[GLN_CUDA_THREADS / 32];
    unsigned int best = 0;
    unsigned long long nan_i = GLN_NO_NAN_INDEX;
    for (size_t i = first; i < hi; i += stride) {
        const unsigned int b = gln_f32_bits(gln_dev_load(x, dtype, i)) & 0x7FFFFFFFu;
        if (b > 0x7F800000u) {
            if (nan_i == GLN_NO_NAN_INDEX) nan_i = i; /* i grows: the first one is this thread's lowest */
        } else if (b > best) {
            best = b;
        }
    }
    for (int off = 16; off > 0; off >>= 1) {
        best = max(best, __shfl_xor_sync(0xFFFFFFFFu, best, off));
        nan_i = min(nan_i, __shfl_xor_sync(0xFFFFFFFFu, nan_i, off));
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) s_bits[warp] = best, s_nan[warp] = nan_i;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < (int)(blockDim.x / 32); w++) {
            best = max(best, s_bits[w]);
            nan_i = min(nan_i, s_nan[w]);
        }
        if (best) atomicMax(bits, best);
        if (nan_i != GLN_NO_NAN_INDEX) atomicMin(nan_index, nan_i);
    }
}

#endif

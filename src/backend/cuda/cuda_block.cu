/* CUDA FP8 block-scaling quantization (BLOCK_1D: 1x128 rowwise / 128x1 columnwise blocks;
 * BLOCK_2D: 128x128 tiles shared by both copies), bitwise equal to gln_quantize_block_ref
 * (src/quant/quant_block.c): per block, amax = NaN-ignoring max of |x| over its valid
 * elements (TE's fmaxf rule; NaN-propagating under cfg->amax_nan_propagate), scale = gln_scale_from_amax_impl(amax, fp8_max, power_2_scale, epsilon, max finite
 * of the input dtype), stored decode scale = 1 / scale (IEEE division), data = one saturating RNE
 * encode of x·scale.  Which NaN a NaN block's amax holds does not matter: any NaN gives scale 1.
 * Scale buffers are zeroed first, padding included, as in the reference.
 *
 *   BLOCK_1D rowwise     one warp per (row, 128-column block), 4 elements per lane;
 *   BLOCK_1D columnwise  one thread per (128-row block, column), coalesced across columns,
 *                        writing the transposed copy [C, R];
 *   BLOCK_2D             one thread block per 128x128 tile (block-wide amax reduction), writing
 *                        the rowwise and / or the transposed copy. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "numerics/numerics.h"
#include "quant/quant.h"
#include "tensor/scale_layout.h"
#include "tensor/tensor.h"
}

#include "backend/cuda/cuda_device.h"

#define GLN_BLK 128
/* Threads of the 2-D tile kernel (8 warps). */
#define GLN_BLK2D_THREADS 256

/* Scale-rule parameters shared by the kernels. */
typedef struct blk_rule {
    float fp8_max, epsilon, value_for_inf;
    int pow2, fp8;
    int nan_prop; /* amax_nan_propagate */
} blk_rule_t;

__device__ __forceinline__ float blk_scale(float amax, blk_rule_t k) {
    return gln_scale_from_amax_impl(amax, k.fp8_max, k.pow2, k.epsilon, k.value_for_inf);
}

__global__ void gln_block1d_rowwise_kernel(const void *x, int dtype, int64_t R, int64_t C, blk_rule_t k,
                                           uint8_t *q, float *s, int64_t gc) {
    const int64_t nblk = (C + GLN_BLK - 1) / GLN_BLK, total = R * nblk;
    const int lane = threadIdx.x % 32;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; w < total; w += warps) {
        const int64_t r = w / nblk, cb = w % nblk;
        float v[4], amax = 0.0f;
        for (int j = 0; j < 4; j++) {
            const int64_t c = cb * GLN_BLK + j * 32 + lane;
            v[j] = c < C ? gln_dev_load(x, dtype, (size_t)r * (size_t)C + (size_t)c) : 0.0f;
            amax = gln_f32_max_amax(amax, gln_f32_abs(v[j]), k.nan_prop);
        }
        const float scale = blk_scale(gln_dev_warp_max_amax(amax, k.nan_prop), k);
        for (int j = 0; j < 4; j++) {
            const int64_t c = cb * GLN_BLK + j * 32 + lane;
            if (c < C) q[(size_t)r * (size_t)C + (size_t)c] = gln_dev_to_fp8(gln_dev_mul(v[j], scale), k.fp8);
        }
        if (lane == 0) s[gln_scale_index_in_grid(GLN_SCALING_BLOCK_1D, 0, r, cb * GLN_BLK, gc)] = 1.0f / scale;
    }
}

__global__ void gln_block1d_colwise_kernel(const void *x, int dtype, int64_t R, int64_t C, blk_rule_t k,
                                           uint8_t *qt, float *s, int64_t gc) {
    const int64_t total = (R + GLN_BLK - 1) / GLN_BLK * C;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
        const int64_t rb = t / C, c = t % C, r0 = rb * GLN_BLK;
        const int64_t n = R - r0 < GLN_BLK ? R - r0 : GLN_BLK;
        float amax = 0.0f;
        for (int64_t i = 0; i < n; i++)
            amax = gln_f32_max_amax(amax, gln_f32_abs(gln_dev_load(x, dtype, (size_t)(r0 + i) * (size_t)C + (size_t)c)),
                                    k.nan_prop);
        const float scale = blk_scale(amax, k);
        for (int64_t i = 0; i < n; i++) {
            const float v = gln_dev_load(x, dtype, (size_t)(r0 + i) * (size_t)C + (size_t)c);
            qt[(size_t)c * (size_t)R + (size_t)(r0 + i)] = gln_dev_to_fp8(gln_dev_mul(v, scale), k.fp8);
        }
        s[gln_scale_index_in_grid(GLN_SCALING_BLOCK_1D, 1, r0, c, gc)] = 1.0f / scale;
    }
}

/* One thread block per 128x128 tile; q (rowwise [R, C]) and qt (transposed [C, R]) may be NULL,
 * and so may their scale buffers s (grid width gc) and cs (grid width gcc). */
__global__ void gln_block2d_kernel(const void *x, int dtype, int64_t R, int64_t C, blk_rule_t k, uint8_t *q,
                                   float *s, int64_t gc, uint8_t *qt, float *cs, int64_t gcc) {
    __shared__ float warp_amax[GLN_BLK2D_THREADS / 32];
    const int64_t tiles_c = (C + GLN_BLK - 1) / GLN_BLK, tiles = (R + GLN_BLK - 1) / GLN_BLK * tiles_c;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int64_t tr = tile / tiles_c, tc = tile % tiles_c, r0 = tr * GLN_BLK, c0 = tc * GLN_BLK;
        const int64_t rows = R - r0 < GLN_BLK ? R - r0 : GLN_BLK, cols = C - c0 < GLN_BLK ? C - c0 : GLN_BLK;
        float amax = 0.0f;
        for (int64_t e = threadIdx.x; e < rows * cols; e += blockDim.x) {
            const size_t i = (size_t)(r0 + e / cols) * (size_t)C + (size_t)(c0 + e % cols);
            amax = gln_f32_max_amax(amax, gln_f32_abs(gln_dev_load(x, dtype, i)), k.nan_prop);
        }
        amax = gln_dev_warp_max_amax(amax, k.nan_prop);
        if (threadIdx.x % 32 == 0) warp_amax[threadIdx.x / 32] = amax;
        __syncthreads();
        amax = 0.0f;
        for (int w = 0; w < GLN_BLK2D_THREADS / 32; w++) amax = gln_f32_max_amax(amax, warp_amax[w], k.nan_prop);
        const float scale = blk_scale(amax, k);
        for (int64_t e = threadIdx.x; e < rows * cols; e += blockDim.x) {
            const int64_t r = r0 + e / cols, c = c0 + e % cols;
            const uint8_t b = gln_dev_to_fp8(gln_dev_mul(gln_dev_load(x, dtype, (size_t)r * (size_t)C + (size_t)c), scale),
                                             k.fp8);
            if (q) q[(size_t)r * (size_t)C + (size_t)c] = b;
            if (qt) qt[(size_t)c * (size_t)R + (size_t)r] = b;
        }
        if (threadIdx.x == 0) {
            if (s) s[gln_scale_index_in_grid(GLN_SCALING_BLOCK_2D, 0, r0, c0, gc)] = 1.0f / scale;
            if (cs) cs[gln_scale_index_in_grid(GLN_SCALING_BLOCK_2D, 1, r0, c0, gcc)] = 1.0f / scale;
        }
        __syncthreads(); /* warp_amax is reused by the next tile */
    }
}

static gln_status_t zero_scales(gln_context_t *ctx, gln_scaling_mode_t mode, int64_t R, int64_t C, int columnwise,
                                void *buf, const char *fn) {
    const size_t bytes = (size_t)gln_member_scale_elems(mode, R, C, columnwise) * sizeof(float);
    if (!bytes) return GLN_STATUS_SUCCESS;
    return gln_cuda_check(cudaMemsetAsync(buf, 0, bytes, gln_cuda_state(ctx)->stream), fn,
                          "cudaMemsetAsync(block scales)");
}

extern "C" gln_status_t gln_cuda_quantize_block(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                const gln_tensor_t *in, gln_tensor_t *out, const char *fn) {
    cudaStream_t st = gln_cuda_state(ctx)->stream;
    const gln_scaling_mode_t mode = cfg->mode;
    const int64_t R = in->rows, C = in->cols;
    blk_rule_t k;
    k.fp8_max = gln_fp8_max(cfg->fp8_dtype);
    k.epsilon = cfg->amax_epsilon;
    k.value_for_inf = gln_hp_max(in->dtype);
    k.pow2 = cfg->power_2_scale;
    k.fp8 = (int)cfg->fp8_dtype;
    k.nan_prop = cfg->amax_nan_propagate;
    gln_quant_layout_t lay;
    GLN_TRY(gln_layout_compute(fn, mode, cfg->fp8_dtype, R, C, &lay));
    if (cfg->rowwise) GLN_TRY(zero_scales(ctx, mode, R, C, 0, out->scale_inv, fn));
    if (cfg->columnwise) GLN_TRY(zero_scales(ctx, mode, R, C, 1, out->col_scale_inv, fn));
    if (R == 0 || C == 0) return GLN_STATUS_SUCCESS;
    if (mode == GLN_SCALING_BLOCK_2D) {
        const size_t tiles = (size_t)gln_ceil_div(R, GLN_BLK) * (size_t)gln_ceil_div(C, GLN_BLK);
        gln_block2d_kernel<<<gln_dev_blocks(tiles, 1), GLN_BLK2D_THREADS, 0, st>>>(
            in->data, (int)in->dtype, R, C, k, cfg->rowwise ? (uint8_t *)out->data : NULL,
            cfg->rowwise ? (float *)out->scale_inv : NULL, lay.scale_cols,
            cfg->columnwise ? (uint8_t *)out->col_data : NULL, cfg->columnwise ? (float *)out->col_scale_inv : NULL,
            lay.col_scale_cols);
        return gln_cuda_check_launch(fn, "gln_block2d_kernel");
    }
    if (cfg->rowwise) {
        const size_t warps = (size_t)R * (size_t)gln_ceil_div(C, GLN_BLK);
        gln_block1d_rowwise_kernel<<<gln_dev_blocks(warps * 32, GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0, st>>>(
            in->data, (int)in->dtype, R, C, k, (uint8_t *)out->data, (float *)out->scale_inv, lay.scale_cols);
        GLN_TRY(gln_cuda_check_launch(fn, "gln_block1d_rowwise_kernel"));
    }
    if (cfg->columnwise) {
        const size_t threads = (size_t)gln_ceil_div(R, GLN_BLK) * (size_t)C;
        gln_block1d_colwise_kernel<<<gln_dev_blocks(threads, GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0, st>>>(
            in->data, (int)in->dtype, R, C, k, (uint8_t *)out->col_data, (float *)out->col_scale_inv,
            lay.col_scale_cols);
        GLN_TRY(gln_cuda_check_launch(fn, "gln_block1d_colwise_kernel"));
    }
    return GLN_STATUS_SUCCESS;
}

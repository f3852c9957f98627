/* CUDA quantization and dequantization, bitwise equal to the host reference quantizers
 * (src/quant): every element goes through the same numerics.h functions with the same FP32
 * operations in the same order (x·scale then one saturating RNE encode; block amax with
 * the NaN-ignoring max of TE, or the NaN-propagating one under cfg->amax_nan_propagate; E8M0
 * code and its exact inverse).
 *
 *   TENSOR    current scaling: amax kernel → one-thread scale kernel (gln_scale_from_amax_impl,
 *             IEEE division) → cast kernel reading the scale from device memory, so the whole
 *             sequence stays on the stream without a host round trip.  Delayed scaling: the
 *             given scale, amax max-accumulated.  The cast writes the rowwise copy and, through
 *             a 32x32 shared-memory tile, the transposed columnwise copy in one pass.
 *   MXFP8_1D  rowwise: one warp per 32-element block of a row; columnwise: one thread per
 *             (32-row block, column), coalesced across columns.  Scale buffers are zeroed first
 *             (padding reads 0, as in the reference).
 *   BLOCK_*   cuda_block.cu.
 * Dequantization: fp8 value × decode scale in FP32, one rounding to the output dtype (or, for the
 * block-scaled GEMMs, the raw FP8 values widened exactly). */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "numerics/numerics.h"
#include "tensor/scale_layout.h"
#include "tensor/tensor.h"
}

#include "backend/cuda/cuda_device.h"

/* Tile edge of the transposing cast and the rows of threads that sweep one tile. */
#define GLN_TILE 32
#define GLN_TILE_ROWS 8
/* Grid y limit (row tiles beyond it are covered by a loop). */
#define GLN_MAX_GRID_Y 65535

static float fp8_max_of(gln_dtype_t fp8) { return fp8 == GLN_DTYPE_FP8_E5M2 ? GLN_FP8_E5M2_MAX : GLN_FP8_E4M3_MAX; }
/* emax_elem of the OCP E8M0 rule: exponent of the largest power of two <= the format max. */
static int fp8_emax_of(gln_dtype_t fp8) { return fp8 == GLN_DTYPE_FP8_E5M2 ? 15 : 8; }

/* ---- per-tensor scaling ------------------------------------------------------------------- */

/* current = 1: scale from the amax just computed (written to *scale); 0: delayed, *scale is
 * the given encode scale.  Then scale_inv = 1/scale (IEEE division) for each present copy. */
__global__ void gln_tensor_scale_kernel(const float *amax, float *scale, int current, float fp8_max, int pow2,
                                        float epsilon, float *scale_inv, float *col_scale_inv) {
    float s = current ? gln_scale_from_amax_impl(*amax, fp8_max, pow2, epsilon, GLN_FP32_MAX) : *scale;
    if (current) *scale = s;
    const float inv = 1.0f / s;
    if (scale_inv) *scale_inv = inv;
    if (col_scale_inv) *col_scale_inv = inv;
}

/* q[r, c] and qt[c, r] (either may be NULL) = fp8(x[r, c] · scale). */
__global__ void gln_tensor_cast_kernel(const void *x, int dtype, int64_t R, int64_t C, const float *scale, int fp8,
                                       uint8_t *q, uint8_t *qt) {
    __shared__ uint8_t tile[GLN_TILE][GLN_TILE + 1];
    const float s = *scale;
    const int64_t c0 = (int64_t)blockIdx.x * GLN_TILE;
    for (int64_t r0 = (int64_t)blockIdx.y * GLN_TILE; r0 < R; r0 += (int64_t)gridDim.y * GLN_TILE) {
        for (int k = threadIdx.y; k < GLN_TILE; k += GLN_TILE_ROWS) {
            const int64_t r = r0 + k, c = c0 + threadIdx.x;
            if (r < R && c < C) {
                const size_t i = (size_t)r * (size_t)C + (size_t)c;
                const uint8_t b = gln_dev_to_fp8(gln_dev_mul(gln_dev_load(x, dtype, i), s), fp8);
                if (q) q[i] = b;
                tile[k][threadIdx.x] = b;
            }
        }
        if (!qt) continue;
        __syncthreads();
        for (int k = threadIdx.y; k < GLN_TILE; k += GLN_TILE_ROWS) {
            const int64_t c = c0 + k, r = r0 + threadIdx.x;
            if (c < C && r < R) qt[(size_t)c * (size_t)R + (size_t)r] = tile[threadIdx.x][k];
        }
        __syncthreads(); /* the tile is reused by the next row tile */
    }
}

static gln_status_t quantize_tensor(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                                    gln_tensor_t *out, const char *fn) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    const int64_t R = in->rows, C = in->cols;
    const size_t n = (size_t)R * (size_t)C;
    float *scale_inv = cfg->rowwise ? (float *)out->scale_inv : NULL;
    float *col_scale_inv = cfg->columnwise ? (float *)out->col_scale_inv : NULL;
    float *scale = out->scale;
    if (cfg->delayed) {
        if (!scale) return gln_fail(GLN_STATUS_INVALID_ARGUMENT, "%s: delayed scaling needs out->scale", fn);
        if (out->amax)
            GLN_TRY(gln_cuda_amax_launch(ctx, in->data, in->dtype, n, out->amax, 1, cfg->amax_nan_propagate, fn));
        gln_tensor_scale_kernel<<<1, 1, 0, s->stream>>>(NULL, scale, 0, 0.0f, 0, 0.0f, scale_inv, col_scale_inv);
    } else {
        float *amax = out->amax ? out->amax : s->amax_tmp;
        if (!scale) scale = s->scale_tmp;
        GLN_TRY(gln_cuda_amax_launch(ctx, in->data, in->dtype, n, amax, 0, cfg->amax_nan_propagate, fn));
        gln_tensor_scale_kernel<<<1, 1, 0, s->stream>>>(amax, scale, 1, fp8_max_of(cfg->fp8_dtype),
                                                        cfg->power_2_scale, cfg->amax_epsilon, scale_inv,
                                                        col_scale_inv);
    }
    GLN_TRY(gln_cuda_check_launch(fn, "gln_tensor_scale_kernel"));
    if (n == 0) return GLN_STATUS_SUCCESS;
    const int64_t tiles_r = gln_ceil_div(R, GLN_TILE);
    dim3 grid((unsigned int)gln_ceil_div(C, GLN_TILE),
              (unsigned int)(tiles_r < GLN_MAX_GRID_Y ? tiles_r : GLN_MAX_GRID_Y));
    dim3 block(GLN_TILE, GLN_TILE_ROWS);
    gln_tensor_cast_kernel<<<grid, block, 0, s->stream>>>(in->data, (int)in->dtype, R, C, scale,
                                                          (int)cfg->fp8_dtype,
                                                          cfg->rowwise ? (uint8_t *)out->data : NULL,
                                                          cfg->columnwise ? (uint8_t *)out->col_data : NULL);
    return gln_cuda_check_launch(fn, "gln_tensor_cast_kernel");
}

/* ---- MXFP8 -------------------------------------------------------------------------------- */

__device__ __forceinline__ uint8_t gln_mx_code(float amax, float fp8_max, int emax, int floor_rule) {
    return gln_e8m0_from_amax_impl(amax, fp8_max, emax, floor_rule);
}

/* One warp per (row, 32-column block): lane l handles column c0 + l. */
__global__ void gln_mx_rowwise_kernel(const void *x, int dtype, int64_t R, int64_t C, int fp8, float fp8_max,
                                      int emax, int floor_rule, int nan_prop, uint8_t *q, uint8_t *scales,
                                      int64_t scale_cols) {
    const int64_t nblk = (C + 31) / 32;
    const int64_t total = R * nblk;
    const int lane = threadIdx.x % 32;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; w < total; w += warps) {
        const int64_t r = w / nblk, blk = w % nblk, c = blk * 32 + lane;
        const size_t i = (size_t)r * (size_t)C + (size_t)c;
        const float v = c < C ? gln_dev_load(x, dtype, i) : 0.0f;
        const float amax = gln_dev_warp_max_amax(gln_f32_abs(v), nan_prop);
        const uint8_t code = gln_mx_code(amax, fp8_max, emax, floor_rule);
        if (c < C) q[i] = gln_dev_to_fp8(gln_dev_mul(v, gln_e8m0_inverse_bits(code)), fp8);
        if (lane == 0) scales[gln_scale_index_in_grid(GLN_SCALING_MXFP8_1D, 0, r, blk * 32, scale_cols)] = code;
    }
}

/* One thread per (32-row block, column); threads of a warp take adjacent columns. */
__global__ void gln_mx_colwise_kernel(const void *x, int dtype, int64_t R, int64_t C, int fp8, float fp8_max,
                                      int emax, int floor_rule, int nan_prop, uint8_t *q, uint8_t *scales,
                                      int64_t scale_cols) {
    const int64_t total = (R + 31) / 32 * C;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
        const int64_t rb = t / C, c = t % C, r0 = rb * 32;
        const int64_t n = R - r0 < 32 ? R - r0 : 32;
        float amax = 0.0f;
        for (int64_t k = 0; k < n; k++)
            amax = gln_f32_max_amax(amax, gln_f32_abs(gln_dev_load(x, dtype, (size_t)(r0 + k) * (size_t)C + (size_t)c)),
                                    nan_prop);
        const uint8_t code = gln_mx_code(amax, fp8_max, emax, floor_rule);
        const float mult = gln_e8m0_inverse_bits(code);
        for (int64_t k = 0; k < n; k++) {
            const size_t i = (size_t)(r0 + k) * (size_t)C + (size_t)c;
            q[i] = gln_dev_to_fp8(gln_dev_mul(gln_dev_load(x, dtype, i), mult), fp8);
        }
        scales[gln_scale_index_in_grid(GLN_SCALING_MXFP8_1D, 1, r0, c, scale_cols)] = code;
    }
}

static gln_status_t quantize_mxfp8(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                                   gln_tensor_t *out, const char *fn) {
    cudaStream_t st = gln_cuda_state(ctx)->stream;
    const gln_scaling_mode_t mode = GLN_SCALING_MXFP8_1D;
    const int64_t R = in->rows, C = in->cols;
    const float fmax = fp8_max_of(cfg->fp8_dtype);
    const int emax = fp8_emax_of(cfg->fp8_dtype), floor_rule = cfg->e8m0_rounding == GLN_E8M0_ROUND_FLOOR;
    gln_quant_layout_t lay;
    GLN_TRY(gln_layout_compute(fn, mode, cfg->fp8_dtype, R, C, &lay));
    if (cfg->rowwise) {
        const size_t bytes = (size_t)gln_member_scale_elems(mode, R, C, 0);
        if (bytes)
            GLN_TRY(gln_cuda_check(cudaMemsetAsync(out->scale_inv, 0, bytes, st), fn, "cudaMemsetAsync(scale_inv)"));
        const size_t warps = (size_t)R * (size_t)gln_ceil_div(C, 32);
        if (warps) {
            gln_mx_rowwise_kernel<<<gln_dev_blocks(warps * 32, GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0, st>>>(
                in->data, (int)in->dtype, R, C, (int)cfg->fp8_dtype, fmax, emax, floor_rule, cfg->amax_nan_propagate,
                (uint8_t *)out->data, (uint8_t *)out->scale_inv, lay.scale_cols);
            GLN_TRY(gln_cuda_check_launch(fn, "gln_mx_rowwise_kernel"));
        }
    }
    if (cfg->columnwise) {
        const size_t bytes = (size_t)gln_member_scale_elems(mode, R, C, 1);
        if (bytes)
            GLN_TRY(gln_cuda_check(cudaMemsetAsync(out->col_scale_inv, 0, bytes, st), fn,
                                   "cudaMemsetAsync(col_scale_inv)"));
        const size_t threads = (size_t)gln_ceil_div(R, 32) * (size_t)C;
        if (threads) {
            gln_mx_colwise_kernel<<<gln_dev_blocks(threads, GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0, st>>>(
                in->data, (int)in->dtype, R, C, (int)cfg->fp8_dtype, fmax, emax, floor_rule, cfg->amax_nan_propagate,
                (uint8_t *)out->col_data, (uint8_t *)out->col_scale_inv, lay.col_scale_cols);
            GLN_TRY(gln_cuda_check_launch(fn, "gln_mx_colwise_kernel"));
        }
    }
    return GLN_STATUS_SUCCESS;
}

extern "C" gln_status_t gln_cuda_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                                          gln_tensor_t *out) {
    static const char *fn = "gln_quantize (cuda)";
    switch (cfg->mode) {
    case GLN_SCALING_TENSOR: return quantize_tensor(ctx, cfg, in, out, fn);
    case GLN_SCALING_MXFP8_1D: return quantize_mxfp8(ctx, cfg, in, out, fn);
    case GLN_SCALING_BLOCK_1D:
    case GLN_SCALING_BLOCK_2D: return gln_cuda_quantize_block(ctx, cfg, in, out, fn);
    default: break;
    }
    return gln_fail(GLN_STATUS_NOT_SUPPORTED, "%s: scaling mode %s is not implemented by the cuda backend yet", fn,
                    gln_scaling_name(cfg->mode));
}

/* ---- dequantization ----------------------------------------------------------------------- */

/* raw = 1: the FP8 values themselves (decode scale 1), for the block-scaled GEMM, which applies
 * the scales to partial products instead. */
__global__ void gln_dequant_kernel(const uint8_t *q, int fp8, int64_t R, int64_t C, int transposed, int mode,
                                   int columnwise, const void *scales, int64_t gc, void *out, int out_dtype,
                                   int raw) {
    const size_t n = (size_t)R * (size_t)C;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int64_t r = (int64_t)(i / (size_t)C), c = (int64_t)(i % (size_t)C);
        const uint8_t b = transposed ? q[(size_t)c * (size_t)R + (size_t)r] : q[i];
        const int64_t k = gln_scale_index_in_grid((gln_scaling_mode_t)mode, columnwise, r, c, gc);
        if (raw) {
            gln_dev_store(out, out_dtype, i, gln_dev_from_fp8(b, fp8));
            continue;
        }
        const float scale = mode == GLN_SCALING_MXFP8_1D ? gln_e8m0_decode(((const uint8_t *)scales)[k])
                                                         : ((const float *)scales)[k];
        /* Operands in the order the host build was seen to use when both are NaN (a NaN element
         * in an MXFP8 block whose scale is NaN): gcc emitted scale as the first operand, so the
         * scale's NaN comes out.  (Which NaN wins there is up to the host compiler.) */
        gln_dev_store(out, out_dtype, i, gln_dev_mul(scale, gln_dev_from_fp8(b, fp8)));
    }
}

static gln_status_t dequantize_copy(gln_context_t *ctx, const gln_tensor_t *in, int columnwise, int raw,
                                    gln_tensor_t *out, const char *fn) {
    const int64_t R = in->rows, C = in->cols;
    const size_t n = (size_t)R * (size_t)C;
    if (n == 0) return GLN_STATUS_SUCCESS;
    gln_quant_layout_t lay;
    GLN_TRY(gln_layout_compute(fn, in->scaling, in->dtype, R, C, &lay));
    const int transposed = columnwise && gln_scaling_transposes(in->scaling);
    cudaStream_t st = gln_cuda_state(ctx)->stream;
    gln_dequant_kernel<<<gln_dev_blocks(n, GLN_CUDA_THREADS), GLN_CUDA_THREADS, 0, st>>>(
        (const uint8_t *)(columnwise ? in->col_data : in->data), (int)in->dtype, R, C, transposed, (int)in->scaling,
        columnwise, columnwise ? in->col_scale_inv : in->scale_inv, columnwise ? lay.col_scale_cols : lay.scale_cols,
        out->data, (int)out->dtype, raw);
    return gln_cuda_check_launch(fn, "gln_dequant_kernel");
}

extern "C" gln_status_t gln_cuda_dequantize(gln_context_t *ctx, const gln_tensor_t *in, int columnwise,
                                            gln_tensor_t *out) {
    return dequantize_copy(ctx, in, columnwise, 0, out, "gln_dequantize (cuda)");
}

extern "C" gln_status_t gln_cuda_widen_raw(gln_context_t *ctx, const gln_tensor_t *in, int columnwise,
                                           gln_tensor_t *out, const char *call) {
    return dequantize_copy(ctx, in, columnwise, 1, out, call);
}

/* CUDA quantization and dequantization of one tensor, bitwise equal to the host reference
 * quantizers (src/quant).
 *
 *   TENSOR, MXFP8_1D  the grouped kernels of cuda_quant_members.cu with the tensor as a group of one
 *                     member (one implementation per mode for gln_quantize and
 *                     gln_grouped_quantize).
 *   BLOCK_*           cuda_block.cu.
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

extern "C" gln_status_t gln_cuda_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                                          gln_tensor_t *out) {
    static const char *fn = "gln_quantize (cuda)";
    switch (cfg->mode) {
    case GLN_SCALING_TENSOR:
    case GLN_SCALING_MXFP8_1D: return gln_cuda_quantize_members(ctx, cfg, in, out, 1, NULL, fn);
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

/* Presenting one GEMM operand to sgemm as an FP32 matrix (see cpu_gemm_internal.h for the four
 * kinds of computation).  fp32 operands are used in place; everything else is converted once
 * per call into caller-provided scratch. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_convert.h"
#include "backend/cpu/cpu_gemm_internal.h"
#include "backend/cpu/cpu_quant_fast.h"
#include "common/error.h"
#include "quant/quant.h"
#include "tensor/tensor.h"

int gln_cpu_layout_a_columnwise(gln_gemm_layout_t layout) { return layout != GLN_LAYOUT_TN; }
int gln_cpu_layout_b_columnwise(gln_gemm_layout_t layout) { return layout == GLN_LAYOUT_NT; }

gln_cpu_gemm_dims_t gln_cpu_gemm_dims(gln_gemm_layout_t layout, const gln_tensor_t *A,
                                      const gln_tensor_t *B) {
    gln_cpu_gemm_dims_t d;
    switch (layout) {
    case GLN_LAYOUT_TN: d.m = B->rows, d.n = A->rows, d.k = A->cols; break;
    case GLN_LAYOUT_NN: d.m = B->rows, d.n = A->cols, d.k = B->cols; break;
    default: d.m = B->cols, d.n = A->cols, d.k = A->rows; break; /* NT */
    }
    return d;
}

float gln_cpu_block_scale(const gln_tensor_t *t, int columnwise, int64_t r, int64_t c) {
    const float *s = columnwise ? t->col_scale_inv : t->scale_inv;
    return s[gln_scale_index(t->scaling, t->rows, t->cols, columnwise, r, c)];
}

/* A power of two multiplies every FP8 value exactly (a finite normal FP32 with zero mantissa). */
static int is_pow2(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return isnormal(x) && x > 0.0f && (bits & 0x7FFFFFu) == 0;
}

/* 1 when every scale a block-scaled copy uses (its valid blocks, not the padding) is a power
 * of two. */
static int block_scales_pow2(const gln_tensor_t *t, int columnwise) {
    const int two_d = t->scaling == GLN_SCALING_BLOCK_2D;
    /* One representative element per block: 1x128 rowwise, 128x1 columnwise, 128x128 in 2-D. */
    const int64_t step_r = (two_d || columnwise) ? GLN_CPU_BLOCK_K : 1;
    const int64_t step_c = (two_d || !columnwise) ? GLN_CPU_BLOCK_K : 1;
    for (int64_t r = 0; r < t->rows; r += step_r)
        for (int64_t c = 0; c < t->cols; c += step_c)
            if (!is_pow2(gln_cpu_block_scale(t, columnwise, r, c))) return 0;
    return 1;
}

gln_cpu_gemm_kind_t gln_cpu_gemm_kind(gln_gemm_layout_t layout, const gln_tensor_t *A,
                                      const gln_tensor_t *B) {
    if (!gln_dtype_is_fp8(A->dtype)) return GLN_CPU_GEMM_KIND_PLAIN;
    if (A->scaling == GLN_SCALING_TENSOR) return GLN_CPU_GEMM_KIND_TENSOR;
    if (A->scaling == GLN_SCALING_MXFP8_1D) return GLN_CPU_GEMM_KIND_DEQUANT;
    if (block_scales_pow2(A, gln_cpu_layout_a_columnwise(layout)) &&
        block_scales_pow2(B, gln_cpu_layout_b_columnwise(layout)))
        return GLN_CPU_GEMM_KIND_DEQUANT;
    return GLN_CPU_GEMM_KIND_BLOCK;
}

size_t gln_cpu_operand_floats(const gln_tensor_t *t, gln_cpu_gemm_kind_t kind) {
    if (kind == GLN_CPU_GEMM_KIND_PLAIN && t->dtype == GLN_DTYPE_FP32) return 0;
    return (size_t)t->rows * (size_t)t->cols;
}

gln_status_t gln_cpu_operand_prepare(const gln_tensor_t *t, int columnwise, gln_cpu_gemm_kind_t kind,
                                     float *scratch, gln_cpu_operand_t *op) {
    const size_t count = (size_t)t->rows * (size_t)t->cols;
    op->t = t;
    op->columnwise = columnwise;
    op->transposed = 0;
    op->ld = t->cols;
    op->decode_scale = 1.0f;
    switch (kind) {
    case GLN_CPU_GEMM_KIND_PLAIN:
        if (t->dtype == GLN_DTYPE_FP32) {
            op->values = t->data; /* no copy: sgemm reads the caller's buffer */
        } else {
            gln_cpu_widen(t->data, t->dtype, count, scratch);
            op->values = scratch;
        }
        return GLN_STATUS_SUCCESS;
    case GLN_CPU_GEMM_KIND_DEQUANT:
        op->values = scratch;
        return count ? gln_cpu_dequantize_to_f32(t, columnwise, scratch) : GLN_STATUS_SUCCESS;
    case GLN_CPU_GEMM_KIND_TENSOR:
    case GLN_CPU_GEMM_KIND_BLOCK:
        /* Raw FP8 values of the copy, in its physical orientation. */
        gln_cpu_widen_fp8(columnwise ? t->col_data : t->data, t->dtype, count, scratch);
        op->values = scratch;
        /* TENSOR and BLOCK columnwise copies are stored [cols, rows]: sgemm flips its flag. */
        op->transposed = columnwise && gln_scaling_transposes(t->scaling);
        op->ld = op->transposed ? t->rows : t->cols;
        if (kind == GLN_CPU_GEMM_KIND_TENSOR)
            op->decode_scale = *(const float *)(columnwise ? t->col_scale_inv : t->scale_inv);
        return GLN_STATUS_SUCCESS;
    }
    return gln_fail(GLN_STATUS_INTERNAL_ERROR, "cpu gemm: unknown operand kind %d", (int)kind);
}

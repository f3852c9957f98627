/* Exact dequantization of MXFP8 operands for the CPU GEMMs (the DEQUANT kind of
 * cpu_gemm_internal.h), bitwise identical to gln_dequantize_to_f32_ref: every element is
 * decode(fp8) · decode(E8M0 code), one FP32 product.  Faster by loop shape only: FP8 values
 * from the branch-free decoders of cpu_fp8.h, each block's scale decoded once (a row of per-column scales per
 * row, or per 32-row block for the columnwise copy) instead of one index computation per
 * element, rows split over the BLAS thread count.  Block-scaled copies (power-of-two scales)
 * run the reference. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif

#include <stdlib.h>

#include "backend/cpu/cpu_fp8.h"
#include "backend/cpu/cpu_quant_fast.h"
#include "backend/cpu/cpu_simd.h"
#include "backend/cpu/cpu_threads.h"
#include "numerics/numerics.h"
#include "quant/quant.h"
#include "tensor/tensor.h"

/* out[c] = decode(q[c]) * scale[c] for one row (branch-free decoders of cpu_fp8.h, identical
 * to the reference's for all 256 codes, so the loop vectorizes). */
GLN_CPU_HOT
static void dequant_row(const uint8_t *q, gln_dtype_t fp8, const float *scale, int64_t C, float *out) {
    if (fp8 == GLN_DTYPE_FP8_E5M2) {
        for (int64_t c = 0; c < C; c++) out[c] = gln_cpu_fp8_dequant(q[c], scale[c], 1);
    } else {
        for (int64_t c = 0; c < C; c++) out[c] = gln_cpu_fp8_dequant(q[c], scale[c], 0);
    }
}

/* out[c] = decode(q[c]) * scale for n elements sharing one scale. */
GLN_CPU_HOT
static void dequant_span(const uint8_t *q, gln_dtype_t fp8, float scale, int64_t n, float *out) {
    if (fp8 == GLN_DTYPE_FP8_E5M2) {
        for (int64_t c = 0; c < n; c++) out[c] = gln_cpu_fp8_dequant(q[c], scale, 1);
    } else {
        for (int64_t c = 0; c < n; c++) out[c] = gln_cpu_fp8_dequant(q[c], scale, 0);
    }
}

/* Rows [r0, r1) of an MXFP8 copy (both copies are [rows, cols]); r0 is a multiple of 32.
 * Rowwise: one scale per 32 elements of a row.  Columnwise: one per column per 32-row block,
 * decoded into `scale` (C floats of scratch) once per block. */
static void dequant_mx_rows(const gln_tensor_t *in, int columnwise, int64_t r0, int64_t r1, float *scale,
                            float *out) {
    const int64_t R = in->rows, C = in->cols;
    const uint8_t *q = columnwise ? in->col_data : in->data;
    const uint8_t *codes = columnwise ? in->col_scale_inv : in->scale_inv;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *s = codes + gln_scale_index(GLN_SCALING_MXFP8_1D, R, C, columnwise, r, 0);
        if (!columnwise) {
            for (int64_t c0 = 0; c0 < C; c0 += 32)
                dequant_span(q + r * C + c0, in->dtype, gln_e8m0_decode(s[c0 / 32]), C - c0 < 32 ? C - c0 : 32,
                             out + r * C + c0);
            continue;
        }
        if (r == r0 || r % 32 == 0)
            for (int64_t c = 0; c < C; c++) scale[c] = gln_e8m0_decode(s[c]);
        dequant_row(q + r * C, in->dtype, scale, C, out + r * C);
    }
}

/* Elements per thread below which a dequantization runs on one thread. */
#define GLN_CPU_DEQUANT_MIN 131072

typedef struct dequant_job {
    const gln_tensor_t *in;
    int columnwise;
    float *scale; /* C floats per thread */
    float *out;
} dequant_job_t;

/* Chunks [k0, k1) of 32 rows: a columnwise block's scales are decoded once per chunk. */
static void dequant_range(void *arg, int thread, int64_t k0, int64_t k1) {
    const dequant_job_t *j = arg;
    const int64_t R = j->in->rows;
    const int64_t r1 = k1 * 32 < R ? k1 * 32 : R;
    dequant_mx_rows(j->in, j->columnwise, k0 * 32, r1, j->scale + (size_t)thread * (size_t)j->in->cols,
                    j->out);
}

gln_status_t gln_cpu_dequantize_to_f32(const gln_tensor_t *in, int columnwise, float *out) {
    if (in->scaling != GLN_SCALING_MXFP8_1D) return gln_dequantize_to_f32_ref(in, columnwise, out);
    const int64_t R = in->rows, C = in->cols;
    const int nt = gln_cpu_threads((size_t)(R * C), GLN_CPU_DEQUANT_MIN);
    float *scale = malloc((size_t)nt * (size_t)(C > 0 ? C : 1) * sizeof(float));
    if (!scale) return gln_dequantize_to_f32_ref(in, columnwise, out); /* needs no scratch */
    dequant_job_t j = {in, columnwise, scale, out};
    gln_cpu_parallel_for(nt, gln_ceil_div(R, 32), dequant_range, &j);
    free(scale);
    return GLN_STATUS_SUCCESS;
}

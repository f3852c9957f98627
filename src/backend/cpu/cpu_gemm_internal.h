/* Internals of the CPU GEMMs, shared by cpu_operand.c (turning an operand into an FP32 matrix
 * for sgemm) and cpu_gemm.c (the per-problem kernel, gln_cpu_gemm, gln_cpu_grouped_gemm).
 *
 * How a GEMM on quantized operands is computed (docs/numerics.md):
 *   PLAIN    high precision: fp32 used in place, bf16/fp16 widened exactly;
 *   TENSOR   per-tensor FP8: raw FP8 values (exact in FP32), sgemm alpha = scale_inv_a·scale_inv_b;
 *   DEQUANT  MXFP8, or block scaling whose scales are all powers of two: exact dequantization;
 *   BLOCK    block scaling with any other FP32 scale: one sgemm of raw values per 128-wide block
 *            of the reduction dimension, each partial product scaled per element by
 *            scale_a·scale_b and added to the FP32 accumulator. */
#ifndef GLN_BACKEND_CPU_GEMM_INTERNAL_H
#define GLN_BACKEND_CPU_GEMM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "grouplin.h"

/* Width of a block of the reduction dimension in FP8 block scaling. */
#define GLN_CPU_BLOCK_K 128

typedef enum gln_cpu_gemm_kind {
    GLN_CPU_GEMM_KIND_PLAIN = 0,
    GLN_CPU_GEMM_KIND_TENSOR = 1,
    GLN_CPU_GEMM_KIND_DEQUANT = 2,
    GLN_CPU_GEMM_KIND_BLOCK = 3
} gln_cpu_gemm_kind_t;

/* An operand as sgemm sees it. */
typedef struct gln_cpu_operand {
    const gln_tensor_t *t;  /* logical tensor [rows, cols] */
    int columnwise;         /* which copy of a quantized tensor the layout reads */
    const float *values;    /* FP32 matrix (row-major) */
    int transposed;         /* values hold the logical matrix transposed ([cols, rows]) */
    int64_t ld;             /* row length of `values` */
    float decode_scale;     /* TENSOR: scale_inv of the copy read; 1 otherwise */
} gln_cpu_operand_t;

/* Problem sizes of one GEMM: D is [m, n], reduction over k (for every layout). */
typedef struct gln_cpu_gemm_dims {
    int64_t m, n, k;
} gln_cpu_gemm_dims_t;

/* FP32 scratch of one GEMM, carved out of one allocation.  Sizes are in floats. */
typedef struct gln_cpu_gemm_ws {
    float *a, *b;        /* converted operands */
    float *acc;          /* FP32 accumulator when D is not fp32 */
    float *partial;      /* BLOCK: one block's partial product */
    float *bias;         /* bias widened to FP32 */
    float *scale_a;      /* BLOCK: per-column scales of the current K block */
    float *scale_b;      /* BLOCK: per-row scales of the current K block */
    size_t a_n, b_n, acc_n, partial_n, bias_n, scale_a_n, scale_b_n;
} gln_cpu_gemm_ws_t;

gln_cpu_gemm_dims_t gln_cpu_gemm_dims(gln_gemm_layout_t layout, const gln_tensor_t *A,
                                      const gln_tensor_t *B);
/* Copy of A / B that a layout reads (0 rowwise, 1 columnwise). */
int gln_cpu_layout_a_columnwise(gln_gemm_layout_t layout);
int gln_cpu_layout_b_columnwise(gln_gemm_layout_t layout);

/* Which computation (see above) a GEMM of these operands takes. */
gln_cpu_gemm_kind_t gln_cpu_gemm_kind(gln_gemm_layout_t layout, const gln_tensor_t *A,
                                      const gln_tensor_t *B);
/* FP32 scratch (floats) needed to present operand t to sgemm for `kind` (0: used in place). */
size_t gln_cpu_operand_floats(const gln_tensor_t *t, gln_cpu_gemm_kind_t kind);
/* Fill op for tensor t read through copy `columnwise`, converting into scratch if needed. */
gln_status_t gln_cpu_operand_prepare(const gln_tensor_t *t, int columnwise, gln_cpu_gemm_kind_t kind,
                                     float *scratch, gln_cpu_operand_t *op);
/* Decode scale of logical element (r, c) of a block-scaled tensor's copy. */
float gln_cpu_block_scale(const gln_tensor_t *t, int columnwise, int64_t r, int64_t c);

/* Scratch sizes for one GEMM (max-ed into *ws sizes, so one workspace can serve many). */
void gln_cpu_gemm_ws_need(gln_gemm_layout_t layout, const gln_tensor_t *A, const gln_tensor_t *B,
                          const gln_tensor_t *D, const gln_tensor_t *bias, gln_cpu_gemm_ws_t *ws);
/* Allocate the buffers for the sizes in *ws (one allocation, returned in *block). */
gln_status_t gln_cpu_gemm_ws_alloc(gln_context_t *ctx, gln_cpu_gemm_ws_t *ws, void **block);
/* One GEMM with valid arguments, using scratch from ws. */
gln_status_t gln_cpu_gemm_run(gln_gemm_layout_t layout, const gln_tensor_t *A, const gln_tensor_t *B,
                              gln_tensor_t *D, const gln_tensor_t *bias, int accumulate,
                              const gln_cpu_gemm_ws_t *ws);

#endif

/* The operands of the grouped GEMM tests (test_cuda_grouped_gemm.c, test_cuda_grouped_gemm_graph.c):
 * matrices on both sides, host bytes for the CPU context and a guarded device copy for the CUDA
 * one (device_twin.h), with exact values so that every product and FP32 sum of a GEMM is exact
 * and the backends must agree bit for bit.  `cpu` / `cu` are the two contexts; failures are
 * recorded with CHECK_OK / CHECK_MSG. */
#ifndef GLN_TEST_GROUPED_OPERANDS_H
#define GLN_TEST_GROUPED_OPERANDS_H

#include <stddef.h>
#include <stdint.h>

#include "device_twin.h"
#include "grouplin.h"
#include "harness.h"

#define GLN_GOP_MAXE 32

/* The operand kinds of a case: bf16, per-tensor E4M3, HYBRID (E5M2 dy), MXFP8, FP8 block. */
typedef enum gln_gop_kind {
    GLN_GOP_KIND_BF16,
    GLN_GOP_KIND_E4M3,
    GLN_GOP_KIND_HYBRID,
    GLN_GOP_KIND_MXFP8,
    GLN_GOP_KIND_BLOCK
} gln_gop_kind_t;
const char *gln_gop_kind_name(gln_gop_kind_t k);

/* A matrix on both sides: host bytes (for the CPU context) and a device copy. */
typedef struct gln_gop_operand {
    gln_dtype_t dtype;
    int64_t rows, cols;
    void *h, *h_col;       /* data and, for FP8, the transposed copy [cols, rows] */
    gln_twin_t d, d_col;
} gln_gop_operand_t;

const char *gln_gop_kind_name(gln_gop_kind_t k);
/* The FP8 code of an exactly representable value v. */
uint8_t gln_gop_fp8_code(gln_dtype_t dt, float v);
/* An FP8 operand's transposed copy [cols, rows] of its host bytes (host side only). */
void gln_gop_host_transpose(gln_gop_operand_t *o);
/* rows x cols integers in [-4, 4] (with transpose for FP8), or bf16 / fp32 of `fill` (NaN
 * poison when fill is NAN). */
gln_gop_operand_t gln_gop_operand_new(gln_context_t *cu, gln_rng_t *rng, gln_dtype_t dt, int64_t rows, int64_t cols,
                                      int random, float fill);
void gln_gop_operand_free(gln_context_t *cu, gln_gop_operand_t *o);
/* The tensor view of an operand on the host or the device; FP8 with its decode scale(s) and,
 * for a single tensor (not the packed tensor of a group), its transposed copy. */
gln_tensor_t gln_gop_view(const gln_gop_operand_t *o, int dev, const float *scale_h, const float *scale_d);
gln_tensor_t gln_gop_view_with_col(const gln_gop_operand_t *o, int dev, const float *scale_h, const float *scale_d);
/* An FP8 operand as the columnwise copy of a grouped tensor holds it: each member's rows
 * transposed in place, [cols, m_i] at element row_start·cols (the rows past the members: 0). */
void gln_gop_grouped_transpose(gln_context_t *cu, gln_gop_operand_t *o, int num, const int64_t *splits);
/* Powers of two 2^-3 .. 2^3 on the host and the device. */
void gln_gop_scales_new(gln_context_t *cu, gln_rng_t *rng, int n, float *h, gln_twin_t *d);

/* MXFP8 and block-scaled operands, quantized by the CPU backend: bf16 small integers times
 * 2^-1 .. 2^1 (the exponent changing across rows and columns, so the blocks get different
 * power-of-two scales) quantized with gln_quantize / gln_grouped_quantize on the CPU context and
 * uploaded: the layouts are the library's own, every FP8 value and scale is exact, and every
 * product and FP32 sum of the GEMM stays exact. */

/* The four buffers of a quantized tensor on both sides. */
typedef struct gln_gop_qoperand {
    gln_tensor_t h, d;
    void *hb[4];  /* data, col_data, scale_inv, col_scale_inv */
    gln_twin_t db[4];
} gln_gop_qoperand_t;

/* 1 for MXFP8 and FP8 block. */
int gln_gop_is_quant_kind(gln_gop_kind_t k);
/* bf16 [rows, cols]: small integers times 2^-1 .. 2^1 (free()). */
void *gln_gop_values_new(gln_rng_t *rng, int64_t rows, int64_t cols);
/* The quantize config of a scaling mode (E4M3, rowwise and columnwise, power-of-two scales). */
gln_quant_config_t gln_gop_quant_config(gln_scaling_mode_t mode);
/* Host buffers of bytes[4] (data, col_data, scale_inv, col_scale_inv), zeroed; no device copy yet. */
gln_gop_qoperand_t gln_gop_qoperand_new(gln_scaling_mode_t mode, int64_t rows, int64_t cols, const size_t bytes[4]);
/* After the host buffers are filled: the device copies and view. */
void gln_gop_qoperand_upload(gln_context_t *cu, gln_gop_qoperand_t *q);
void gln_gop_qoperand_free(gln_context_t *cu, gln_gop_qoperand_t *q);
/* One [rows, cols] tensor (a weight). */
gln_gop_qoperand_t gln_gop_qtensor_new(gln_context_t *cpu, gln_context_t *cu, gln_rng_t *rng, gln_scaling_mode_t mode,
                                       int64_t rows, int64_t cols);
/* A grouped tensor of `rows` packed rows (those past the splits' sum stay 0). */
gln_gop_qoperand_t gln_gop_qgrouped_new(gln_context_t *cpu, gln_context_t *cu, gln_rng_t *rng, gln_scaling_mode_t mode,
                                        int num, const int64_t *splits, int64_t rows, int64_t cols);

#endif

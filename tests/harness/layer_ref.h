/* A float64 reference of the grouped linear layer, built from the public API only.
 *
 * The operands are quantized with the public gln_quantize, using the per-role configuration the
 * layer documents for its recipe (x, W in E4M3; dy in E5M2 under HYBRID; per expert block of
 * rows), dequantized exactly, and multiplied in float64:
 *   fprop  y_i  = x_i(rowwise) · W_i(rowwise)ᵀ + b_i
 *   dgrad  dx_i = dy_i(rowwise) · W_i(columnwise)
 *   wgrad  dW_i = dy_i(columnwise)ᵀ · x_i(columnwise)
 *   dbias  db_i = Σ_rows dy_i (high precision)
 * Next to every reference value it keeps an error bound for an FP32-accumulating
 * implementation: (k + GLN_REF_EXTRA_OPS)·2^-24·Σ|a·b| (k = reduction length, Σ over the
 * products of that output, bias included).  gln_layer_ref_check() adds the rounding of the
 * output dtype on top. */
#ifndef GLN_TEST_LAYER_REF_H
#define GLN_TEST_LAYER_REF_H

#include <stddef.h>
#include <stdint.h>

#include "grouplin.h"

#define GLN_REF_MAX_EXPERTS 16

/* Unit roundoff of FP32 (24-bit significand): the error of one FP32 operation, relative. */
#define GLN_REF_U_FP32 (1.0 / 16777216.0)  /* 2^-24 */
/* One rounding to bf16 (8-bit significand) / fp16 (11-bit significand), relative. */
#define GLN_REF_U_BF16 (1.0 / 256.0)       /* 2^-8 */
#define GLN_REF_U_FP16 (1.0 / 2048.0)      /* 2^-11 */
/* Underflow floors: half the subnormal spacing of each output dtype (absolute). */
#define GLN_REF_TINY_FP32 0x1p-150
#define GLN_REF_TINY_BF16 0x1p-134
#define GLN_REF_TINY_FP16 0x1p-25
/* FP32 operations beyond the k multiply-adds of a dot product: the bias add (or the add into
 * an accumulating main_grad), the product of the two per-tensor decode scales and the
 * multiplication of the sum by that product (sgemm's alpha). */
#define GLN_REF_EXTRA_OPS 3

/* What the reference needs to know about the layer's quantization. */
typedef struct gln_layer_ref_spec {
    gln_recipe_t recipe;
    gln_fp8_format_t fp8_format;
    int power_2_scales;
    int block_fp32_scales;
    float amax_epsilon;
    gln_e8m0_rounding_t e8m0_rounding;
    int32_t num_experts;
    /* FP8_DELAYED: the encode scales the layer will use (snapshot of its state). */
    float fwd_scale[3 * GLN_REF_MAX_EXPERTS]; /* slot 3i: input, 3i+1: weight */
    float bwd_scale[2 * GLN_REF_MAX_EXPERTS]; /* slot 2i: grad_output */
    /* Delayed scale of the weight copy quantized again for the dgrad (distributed weights).
     * The layer replays the forward's weight scales (fwd_scale[3i+1], what capture_scales
     * sets); gln_layer_ref_capture_w_bwd_scales reads the state's current ones instead. */
    float w_bwd_scale[GLN_REF_MAX_EXPERTS];
} gln_layer_ref_spec_t;

/* Spec from a layer config; scales set to 1 (call gln_layer_ref_capture_scales for delayed). */
void gln_layer_ref_spec_init(gln_layer_ref_spec_t *spec, const gln_grouped_linear_config_t *cfg);
/* Copy the layer's current delayed-scaling encode scales into the spec (w_bwd_scale too). */
gln_status_t gln_layer_ref_capture_scales(gln_layer_ref_spec_t *spec, gln_grouped_linear_t *layer);
/* Only w_bwd_scale, from the layer's current weight slots (call between forward and backward
 * for weights that are quantized again in backward). */
gln_status_t gln_layer_ref_capture_w_bwd_scales(gln_layer_ref_spec_t *spec,
                                                gln_grouped_linear_t *layer);

/* The roles of the quantized operands. */
typedef enum gln_ref_role {
    GLN_REF_X = 0,
    GLN_REF_W = 1,
    GLN_REF_DY = 2,
    GLN_REF_W_BWD = 3 /* the weight quantized for dgrad (scale w_bwd_scale) */
} gln_ref_role_t;

/* The quantizer config the layer uses for `role` (mode, dtype, options; both copies). */
gln_quant_config_t gln_layer_ref_quant_config(const gln_layer_ref_spec_t *spec, gln_ref_role_t role);

/* Quantize `hp` ([rows, cols] of `dtype`) as the layer does for (role, expert) and write the
 * exactly dequantized copy (columnwise = 0: rowwise copy, 1: columnwise copy) as float64,
 * logical [rows, cols].  Recipe NONE: the values cast to `cast_dtype` (the activation dtype). */
gln_status_t gln_layer_ref_operand(gln_context_t *ctx, const gln_layer_ref_spec_t *spec,
                                   gln_ref_role_t role, int32_t expert, const void *hp,
                                   gln_dtype_t dtype, int64_t rows, int64_t cols, int columnwise,
                                   gln_dtype_t cast_dtype, double *out);

/* Inputs of one forward + backward. */
typedef struct gln_layer_ref_inputs {
    int32_t num;
    int64_t k_in, k_out;
    const int64_t *splits;        /* [num] */
    gln_dtype_t act_dtype;        /* x, dy, y, dx */
    const void *x;                /* [M, k_in] */
    const void *dy;               /* [M, k_out] (NULL: forward only) */
    gln_dtype_t w_dtype;          /* dtype of the weights given below */
    const void *const *w_fwd;     /* [num] weights the forward GEMM sees */
    const void *const *w_bwd;     /* [num] weights re-materialized for the dgrad GEMM and
                                     quantized again (scale w_bwd_scale); NULL: the dgrad uses
                                     the forward's quantization of w_fwd */
    gln_dtype_t bias_dtype;
    const void *const *bias;      /* [num] or NULL */
} gln_layer_ref_inputs_t;

/* Results: value and FP32-accumulation error bound per element (malloc'd). */
typedef struct gln_layer_ref_out {
    int64_t rows;
    double *y, *y_err;     /* [M, k_out] */
    double *dx, *dx_err;   /* [M, k_in] */
    double *dw, *dw_err;   /* [num, k_out, k_in] */
    double *db, *db_err;   /* [num, k_out] */
} gln_layer_ref_out_t;

gln_status_t gln_layer_ref_run(gln_context_t *ctx, const gln_layer_ref_spec_t *spec,
                               const gln_layer_ref_inputs_t *in, gln_layer_ref_out_t *out);
void gln_layer_ref_out_free(gln_layer_ref_out_t *out);

/* Rounding unit and underflow floor of an output dtype. */
double gln_layer_ref_unit(gln_dtype_t dtype);
double gln_layer_ref_tiny(gln_dtype_t dtype);

/* Compare `count` elements of `got` (dtype) with the reference: the tolerance of element j is
 *   u·(|ref_j| + err_j) + err_j + tiny
 * (u, tiny of the dtype: one rounding of the FP32 result to the output dtype).  NaN anywhere
 * fails.  Returns the worst |got - ref| / tolerance (<= 1 passes); reports violations. */
double gln_layer_ref_check(const char *what, const void *got, gln_dtype_t dtype, const double *ref,
                           const double *err, size_t count);

/* Small helpers for tests. */
void gln_layer_ref_fill_normal(void *buf, gln_dtype_t dtype, size_t count, double stddev,
                               uint64_t seed);
int64_t gln_layer_ref_total_rows(int32_t num, const int64_t *splits);

#endif

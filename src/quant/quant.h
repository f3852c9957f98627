/* Host reference quantizers: pure functions on host memory, the numerics every backend must
 * reproduce bit for bit.  Arguments are assumed validated (the public wrappers in quant_api.c
 * check them once).  The CPU backend calls these directly; the CUDA backend is tested
 * against them.
 *
 * Conventions shared by every mode:
 *   - inputs are widened to FP32, data = sat_rn_fp8(x · encode_scale) with one FP32 multiply;
 *   - partial blocks at the edges use the amax of their valid elements;
 *   - amax ignores NaN elements (TE's fmaxf rule: a NaN still encodes as FP8 NaN, but does not
 *     poison the scale; an all-NaN block has amax 0); with cfg->amax_nan_propagate the first NaN
 *     in the reduction order wins (gln_f32_max_nan): per-tensor scale 1 (current) or a NaN
 *     accumulated amax (delayed), MXFP8 code 255, block scale 1;
 *   - padding entries of every scale buffer are written as 0. */
#ifndef GLN_QUANT_QUANT_H
#define GLN_QUANT_QUANT_H

#include "grouplin.h"
#include "numerics/numerics.h"

/* Quantize `in` (fp32 / bf16 / fp16) into `out` following cfg (mode, copies, scaling). */
gln_status_t gln_quantize_ref(const gln_quant_config_t *cfg, const gln_tensor_t *in, gln_tensor_t *out);
/* Dequantize one copy of `in` into the high-precision tensor `out` ([rows, cols], logical
 * orientation): FP32 product fp8 · scale_inv, then RNE to out's dtype (as the GPU does). */
gln_status_t gln_dequantize_ref(const gln_tensor_t *in, int columnwise, gln_tensor_t *out);
/* Dequantization of one copy into FP32, logical [rows, cols] row-major (fp8 value times its
 * decode scale, one FP32 multiply: exact for power-of-two scales). */
gln_status_t gln_dequantize_to_f32_ref(const gln_tensor_t *in, int columnwise, float *out);
/* Per-member quantization of a grouped tensor (host-readable splits; out uses in's splits). */
gln_status_t gln_grouped_quantize_ref(const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                      gln_grouped_tensor_t *out);
/* The same per-member loop with another single-tensor quantizer (e.g. the CPU fast path). */
typedef gln_status_t (*gln_quantize_fn)(const gln_quant_config_t *cfg, const gln_tensor_t *in,
                                        gln_tensor_t *out);
gln_status_t gln_grouped_quantize_each(const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                       gln_grouped_tensor_t *out, gln_quantize_fn quantize);
/* Compact → cuBLAS 128x4-tile order for MXFP8 scales; padding becomes 0. */
gln_status_t gln_mxfp8_swizzle_ref(int64_t rows, int64_t cols, int columnwise, const uint8_t *compact,
                                   uint8_t *swizzled);

/* Per-mode pieces of gln_quantize_ref. */
gln_status_t gln_quantize_tensor_ref(const gln_quant_config_t *cfg, const gln_tensor_t *in,
                                     gln_tensor_t *out);
gln_status_t gln_quantize_mxfp8_ref(const gln_quant_config_t *cfg, const gln_tensor_t *in, gln_tensor_t *out);
gln_status_t gln_quantize_block_ref(const gln_quant_config_t *cfg, const gln_tensor_t *in, gln_tensor_t *out);

/* Per-tensor scaling bookkeeping shared by every per-tensor quantizer: returns the encode scale
 * for data whose max |x| is `amax`.  Delayed: the scale in out->scale[0] (the previous steps'),
 * amax max-accumulated into out->amax[0] for future scales.  Current: the scale from this amax
 * (epsilon, power-of-two, FLT_MAX on overflow), written to out->scale / out->amax when given. */
float gln_tensor_scale_step(const gln_quant_config_t *cfg, float amax, gln_tensor_t *out);

/* max |x| over a high-precision tensor in index order: NaN elements ignored, or with
 * nan_propagate the first NaN (sign cleared) wins. */
float gln_amax_ref(const gln_tensor_t *in, int nan_propagate);

/* Element access for high-precision dtypes (fp32 / bf16 / fp16). */
static inline float gln_hp_load(const void *p, gln_dtype_t dtype, int64_t i) {
    switch (dtype) {
    case GLN_DTYPE_BF16: return gln_bf16_bits_to_f32(((const uint16_t *)p)[i]);
    case GLN_DTYPE_FP16: return gln_fp16_bits_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}
static inline void gln_hp_store(void *p, gln_dtype_t dtype, int64_t i, float v) {
    switch (dtype) {
    case GLN_DTYPE_BF16: ((uint16_t *)p)[i] = gln_f32_to_bf16_bits(v); break;
    case GLN_DTYPE_FP16: ((uint16_t *)p)[i] = gln_f32_to_fp16_bits(v); break;
    default: ((float *)p)[i] = v; break;
    }
}
static inline uint8_t gln_fp8_encode(float x, gln_dtype_t fp8) {
    return fp8 == GLN_DTYPE_FP8_E5M2 ? gln_f32_to_e5m2_bits(x) : gln_f32_to_e4m3_bits(x);
}
static inline float gln_fp8_decode(uint8_t b, gln_dtype_t fp8) {
    return fp8 == GLN_DTYPE_FP8_E5M2 ? gln_e5m2_bits_to_f32(b) : gln_e4m3_bits_to_f32(b);
}
/* Max finite value of a high-precision dtype: block scaling's value_for_inf. */
static inline float gln_hp_max(gln_dtype_t dtype) {
    if (dtype == GLN_DTYPE_BF16) return GLN_BF16_MAX;
    if (dtype == GLN_DTYPE_FP16) return GLN_FP16_MAX;
    return GLN_FP32_MAX;
}

#endif

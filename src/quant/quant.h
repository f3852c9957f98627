/* Host reference quantizers: pure functions on host memory, the numerics every backend must
 * reproduce bit for bit.  Arguments are assumed validated (the public wrappers in quant_api.c
 * check them once).  The CPU backend calls these directly; the CUDA backend is tested
 * against them. */
#ifndef GLN_QUANT_QUANT_H
#define GLN_QUANT_QUANT_H

#include "grouplin.h"

/* Quantize `in` (fp32 / bf16 / fp16) into `out` following cfg (mode, copies, scaling). */
gln_status_t gln_quantize_ref(const gln_quant_config_t *cfg, const gln_tensor_t *in,
                              gln_tensor_t *out);
/* Dequantize one copy of `in` into the high-precision tensor `out` ([rows, cols], logical
 * orientation), one rounding from the exact FP32 value. */
gln_status_t gln_dequantize_ref(const gln_tensor_t *in, int columnwise, gln_tensor_t *out);
/* Exact dequantization of one copy into FP32, logical [rows, cols] row-major. */
gln_status_t gln_dequantize_to_f32_ref(const gln_tensor_t *in, int columnwise, float *out);
/* Per-member quantization of a grouped tensor (host splits). */
gln_status_t gln_grouped_quantize_ref(const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                      gln_grouped_tensor_t *out);
/* Compact → cuBLAS 128x4-tile order for MXFP8 scales; padding becomes 0. */
gln_status_t gln_mxfp8_swizzle_ref(int64_t rows, int64_t cols, int columnwise, const uint8_t *compact,
                                   uint8_t *swizzled);

#endif

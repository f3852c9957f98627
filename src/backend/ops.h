/* Internal entry points of the backend operations, for the library's own modules (the layer, the
 * weights group): dispatch through the context's table WITHOUT validating, because the caller
 * built the arguments from inputs already checked at a public boundary.  The public functions
 * (gemm_api.c, quant_api.c, reduce_api.c) validate and then call these, so each operation has
 * one funnel into the backend.  A missing slot reports NOT_SUPPORTED under the public call's
 * name.  Configs and args must be the current version of their struct (size set by _INIT). */
#ifndef GLN_BACKEND_OPS_H
#define GLN_BACKEND_OPS_H

#include "grouplin.h"

gln_status_t gln_op_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                             gln_tensor_t *out);
gln_status_t gln_op_grouped_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                     const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out);
gln_status_t gln_op_dequantize(gln_context_t *ctx, const gln_tensor_t *in, int columnwise,
                               gln_tensor_t *out);
gln_status_t gln_op_mxfp8_swizzle(gln_context_t *ctx, int64_t rows, int64_t cols, int columnwise,
                                  const uint8_t *compact, uint8_t *swizzled);
gln_status_t gln_op_gemm(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                         const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias, int accumulate);
gln_status_t gln_op_grouped_gemm(gln_context_t *ctx, const gln_grouped_gemm_args_t *args);
/* Grouped quantize + dbias in the tiled order (backend.h, grouped_quantize_dbias); cfg NULL: the
 * sums alone. */
gln_status_t gln_op_grouped_quantize_dbias(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                           const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                           gln_tensor_t *dbias, int accumulate);
/* Delayed scaling: grouped quantize (+ dbias when dbias is not NULL), then the amax history record
 * history_row0[first + i·stride] = gln_f32_max_amax(that, out->packed.amax[i], nan_propagate) —
 * fused into one launch where the backend can (backend.h, grouped_quantize_record). */
gln_status_t gln_op_grouped_quantize_record(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                            const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                            gln_tensor_t *dbias, int accumulate, float *history_row0, int32_t first,
                                            int32_t stride, int nan_propagate);
gln_status_t gln_op_grouped_dbias(gln_context_t *ctx, const gln_grouped_tensor_t *dy, gln_tensor_t *dbias,
                                  int accumulate);
gln_status_t gln_op_cast(gln_context_t *ctx, const gln_tensor_t *in, gln_tensor_t *out);
/* The activation (SwiGLU: in [rows, 2H]; GELU: in [rows, H]) with its output quantized like
 * grouped_quantize(cfg) does an hp_dtype [rows, H] tensor (backend.h, activation_forward_quantize):
 * the backend's fused slot, or the composition below. */
gln_status_t gln_op_activation_forward_quantize(gln_context_t *ctx, gln_activation_t act, gln_dtype_t hp_dtype,
                                                const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                                gln_grouped_tensor_t *out);
/* The composition: activation_forward into a scratch hp_dtype [rows, H] tensor, then
 * grouped_quantize on it with in's splits (rows past the splits, when the host can read them, are
 * neither activated nor quantized).  The reference of every fused implementation; a backend's
 * slot calls it for what it does not fuse. */
gln_status_t gln_op_activation_forward_quantize_composed(gln_context_t *ctx, gln_activation_t act,
                                                         gln_dtype_t hp_dtype, const gln_quant_config_t *cfg,
                                                         const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out);

#endif

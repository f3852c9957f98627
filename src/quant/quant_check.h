/* Argument checks of the public quantization calls (quant_api.c) shared with other public calls
 * that quantize (gln_activation_forward_quantize, src/moe/activation.c).  Each records a message
 * naming the call `fn` and the argument, and returns GLN_STATUS_INVALID_ARGUMENT. */
#ifndef GLN_QUANT_QUANT_CHECK_H
#define GLN_QUANT_QUANT_CHECK_H

#include "grouplin.h"

/* Copy a versioned quantization config into *c (known versions: the first, up to
 * e8m0_rounding, and the current one; later fields keep their defaults) and check every field:
 * mode TENSOR..BLOCK_2D, an FP8 dtype, rowwise / columnwise / delayed / power_2_scale /
 * amax_nan_propagate 0 or 1 (at least one copy; delayed only with TENSOR), amax_epsilon finite
 * and >= 0, e8m0_rounding UP or FLOOR.  The one definition of a valid config: the quantization
 * calls and the sharded group's fp8_quant use it.  `prefix` spells the argument in messages
 * ("cfg->", "cfg->fp8_quant."). */
gln_status_t gln_quant_config_read(const char *fn, const char *prefix, const gln_quant_config_t *cfg,
                                   gln_quant_config_t *c);

/* Every check of gln_grouped_quantize: cfg (a known version, each field in range; *c receives
 * the current-version copy the backends take), both grouped headers, in high precision, out
 * quantized with the buffers cfg writes, and in / out agreeing on num, cols and splits (host
 * splits compared here; backend-resident ones by the backend). */
gln_status_t gln_grouped_quantize_check(const char *fn, const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                        const gln_grouped_tensor_t *out, gln_quant_config_t *c);

#endif

/* Argument checks of the public quantization calls (quant_api.c) shared with other public calls
 * that quantize (gln_activation_forward_quantize, src/moe/activation.c).  Each records a message
 * naming the call `fn` and the argument, and returns GLN_STATUS_INVALID_ARGUMENT. */
#ifndef GLN_QUANT_QUANT_CHECK_H
#define GLN_QUANT_QUANT_CHECK_H

#include "grouplin.h"

/* Every check of gln_grouped_quantize: cfg (a known version, each field in range; *c receives
 * the current-version copy the backends take), both grouped headers, in high precision, out
 * quantized with the buffers cfg writes, and in / out agreeing on num, cols and splits (host
 * splits compared here; backend-resident ones by the backend). */
gln_status_t gln_grouped_quantize_check(const char *fn, const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                        const gln_grouped_tensor_t *out, gln_quant_config_t *c);

#endif

/* CPU backend quantization slots: the host reference quantizers run as they are. */
#include "backend/cpu/cpu_backend.h"
#include "quant/quant.h"

gln_status_t gln_cpu_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                              gln_tensor_t *out)
{
    (void)ctx;
    return gln_quantize_ref(cfg, in, out);
}

gln_status_t gln_cpu_dequantize(gln_context_t *ctx, const gln_tensor_t *in, int columnwise,
                                gln_tensor_t *out)
{
    (void)ctx;
    return gln_dequantize_ref(in, columnwise, out);
}

gln_status_t gln_cpu_grouped_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                      const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out)
{
    (void)ctx;
    return gln_grouped_quantize_ref(cfg, in, out);
}

gln_status_t gln_cpu_mxfp8_swizzle(gln_context_t *ctx, int64_t rows, int64_t cols, int columnwise,
                                   const uint8_t *compact, uint8_t *swizzled)
{
    (void)ctx;
    return gln_mxfp8_swizzle_ref(rows, cols, columnwise, compact, swizzled);
}

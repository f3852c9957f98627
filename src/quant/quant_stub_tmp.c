/* Temporary stubs (replaced within the hour by the real reference quantizers). */
#include "quant/quant.h"

gln_status_t gln_quantize_ref(const gln_quant_config_t *cfg, const gln_tensor_t *in, gln_tensor_t *out)
{
    (void)cfg; (void)in; (void)out;
    return GLN_STATUS_NOT_SUPPORTED;
}
gln_status_t gln_dequantize_ref(const gln_tensor_t *in, int columnwise, gln_tensor_t *out)
{
    (void)in; (void)columnwise; (void)out;
    return GLN_STATUS_NOT_SUPPORTED;
}
gln_status_t gln_dequantize_to_f32_ref(const gln_tensor_t *in, int columnwise, float *out)
{
    (void)in; (void)columnwise; (void)out;
    return GLN_STATUS_NOT_SUPPORTED;
}
gln_status_t gln_grouped_quantize_ref(const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                      gln_grouped_tensor_t *out)
{
    (void)cfg; (void)in; (void)out;
    return GLN_STATUS_NOT_SUPPORTED;
}
gln_status_t gln_mxfp8_swizzle_ref(int64_t rows, int64_t cols, int columnwise, const uint8_t *compact,
                                   uint8_t *swizzled)
{
    (void)rows; (void)cols; (void)columnwise; (void)compact; (void)swizzled;
    return GLN_STATUS_NOT_SUPPORTED;
}

/* CPU backend quantization slots: the fast quantizers of cpu_quant_fast.c (bitwise identical
 * to the host references of src/quant); dequantization and the swizzle run the references.
 * Splits "on the backend" are host memory here, so this backend checks them itself. */
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_quant_fast.h"
#include "common/error.h"
#include "quant/quant.h"
#include "tensor/tensor.h"

gln_status_t gln_cpu_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                              gln_tensor_t *out) {
    (void)ctx;
    return gln_cpu_quantize_fast(cfg, in, out);
}

gln_status_t gln_cpu_dequantize(gln_context_t *ctx, const gln_tensor_t *in, int columnwise,
                                gln_tensor_t *out) {
    (void)ctx;
    return gln_dequantize_ref(in, columnwise, out);
}

gln_status_t gln_cpu_grouped_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                      const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out) {
    static const char *fn = "gln_grouped_quantize";
    (void)ctx;
    if (in->splits_on_backend) {
        GLN_TRY(gln_grouped_validate_splits(fn, "in", in));
        GLN_TRY(gln_grouped_validate_splits(fn, "out", out));
        for (int32_t i = 0; i < in->num; i++)
            GLN_REQUIRE_ARG(out->splits[i] == in->splits[i],
                            "%s: out->splits[%d] %lld must equal in->splits[%d] %lld", fn, (int)i,
                            (long long)out->splits[i], (int)i, (long long)in->splits[i]);
    }
    return gln_grouped_quantize_each(cfg, in, out, gln_cpu_quantize_fast);
}

gln_status_t gln_cpu_mxfp8_swizzle(gln_context_t *ctx, int64_t rows, int64_t cols, int columnwise,
                                   const uint8_t *compact, uint8_t *swizzled) {
    (void)ctx;
    return gln_mxfp8_swizzle_ref(rows, cols, columnwise, compact, swizzled);
}

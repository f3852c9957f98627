/* Per-tensor FP8 quantization: delayed scaling (encode scale given, amax accumulated) and
 * current scaling (scale from this tensor's amax). */
#include "numerics/numerics.h"
#include "quant/quant.h"

float gln_amax_ref(const gln_tensor_t *in, int nan_propagate) {
    float amax = 0.0f;
    int64_t n = in->rows * in->cols;
    for (int64_t i = 0; i < n; i++)
        amax = gln_f32_max_amax(amax, gln_f32_abs(gln_hp_load(in->data, in->dtype, i)), nan_propagate);
    return amax;
}

float gln_tensor_scale_step(const gln_quant_config_t *cfg, float amax, gln_tensor_t *out) {
    if (cfg->delayed) {
        /* data uses the previous steps' scale; this tensor's amax feeds future scales */
        out->amax[0] = gln_f32_max_amax(out->amax[0], amax, cfg->amax_nan_propagate);
        return out->scale[0];
    }
    float scale = gln_scale_from_amax_impl(amax, gln_fp8_max(cfg->fp8_dtype), cfg->power_2_scale,
                                           cfg->amax_epsilon, GLN_FP32_MAX);
    if (out->scale) out->scale[0] = scale;
    if (out->amax) out->amax[0] = amax;
    return scale;
}

gln_status_t gln_quantize_tensor_ref(const gln_quant_config_t *cfg, const gln_tensor_t *in,
                                     gln_tensor_t *out) {
    const int64_t R = in->rows, C = in->cols;
    const float scale = gln_tensor_scale_step(cfg, gln_amax_ref(in, cfg->amax_nan_propagate), out);
    const float scale_inv = 1.0f / scale;
    uint8_t *q = (uint8_t *)out->data;
    uint8_t *qt = (uint8_t *)out->col_data;
    for (int64_t r = 0; r < R && C > 0; r++) { /* [R, 0]: no R empty steps */
        for (int64_t c = 0; c < C; c++) {
            uint8_t b = gln_fp8_encode(gln_hp_load(in->data, in->dtype, r * C + c) * scale, cfg->fp8_dtype);
            if (cfg->rowwise) q[r * C + c] = b;
            if (cfg->columnwise) qt[c * R + r] = b; /* transposed copy [C, R] */
        }
    }
    if (cfg->rowwise) ((float *)out->scale_inv)[0] = scale_inv;
    if (cfg->columnwise) ((float *)out->col_scale_inv)[0] = scale_inv;
    return GLN_STATUS_SUCCESS;
}

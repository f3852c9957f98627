/* Reference quantizer entry points: mode dispatch, dequantization and grouped quantization. */
#include "quant/quant.h"

#include "common/error.h"
#include "tensor/tensor.h"

gln_status_t gln_quantize_ref(const gln_quant_config_t *cfg, const gln_tensor_t *in, gln_tensor_t *out) {
    /* empty: only a per-tensor scale is written (gln_tensor_is_empty) */
    if (cfg->mode != GLN_SCALING_TENSOR && gln_tensor_is_empty(in)) return GLN_STATUS_SUCCESS;
    switch (cfg->mode) {
    case GLN_SCALING_TENSOR: return gln_quantize_tensor_ref(cfg, in, out);
    case GLN_SCALING_MXFP8_1D: return gln_quantize_mxfp8_ref(cfg, in, out);
    case GLN_SCALING_BLOCK_1D:
    case GLN_SCALING_BLOCK_2D: return gln_quantize_block_ref(cfg, in, out);
    default: break;
    }
    return gln_fail(GLN_STATUS_INTERNAL_ERROR, "gln_quantize_ref: scaling mode %d", (int)cfg->mode);
}

/* Decode scale of logical element (r, c) of one copy. */
static float gln_decode_scale(const gln_tensor_t *in, int columnwise, int64_t r, int64_t c) {
    const void *s = columnwise ? in->col_scale_inv : in->scale_inv;
    int64_t k = gln_scale_index(in->scaling, in->rows, in->cols, columnwise, r, c);
    if (in->scaling == GLN_SCALING_MXFP8_1D) return gln_e8m0_decode(((const uint8_t *)s)[k]);
    return ((const float *)s)[k];
}

gln_status_t gln_dequantize_to_f32_ref(const gln_tensor_t *in, int columnwise, float *out) {
    const int64_t R = in->rows, C = in->cols;
    if (gln_tensor_is_empty(in)) return GLN_STATUS_SUCCESS;
    const uint8_t *q = (const uint8_t *)(columnwise ? in->col_data : in->data);
    const int transposed = columnwise && gln_scaling_transposes(in->scaling);
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
            uint8_t b = transposed ? q[c * R + r] : q[r * C + c];
            out[r * C + c] = gln_fp8_decode(b, in->dtype) * gln_decode_scale(in, columnwise, r, c);
        }
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_dequantize_ref(const gln_tensor_t *in, int columnwise, gln_tensor_t *out) {
    const int64_t R = in->rows, C = in->cols;
    if (gln_tensor_is_empty(in)) return GLN_STATUS_SUCCESS;
    const uint8_t *q = (const uint8_t *)(columnwise ? in->col_data : in->data);
    const int transposed = columnwise && gln_scaling_transposes(in->scaling);
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
            uint8_t b = transposed ? q[c * R + r] : q[r * C + c];
            float v = gln_fp8_decode(b, in->dtype) * gln_decode_scale(in, columnwise, r, c);
            gln_hp_store(out->data, out->dtype, r * C + c, v);
        }
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_grouped_quantize_each(const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                       gln_grouped_tensor_t *out, gln_quantize_fn quantize) {
    /* out's members follow in's splits (the caller checked they agree) */
    gln_grouped_tensor_t o = *out;
    o.splits = in->splits;
    for (int32_t i = 0; i < in->num; i++) {
        gln_tensor_t mi, mo;
        GLN_TRY(gln_grouped_member(in, i, &mi));
        GLN_TRY(gln_grouped_member(&o, i, &mo));
        GLN_TRY(quantize(cfg, &mi, &mo));
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_grouped_quantize_ref(const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                      gln_grouped_tensor_t *out) {
    return gln_grouped_quantize_each(cfg, in, out, gln_quantize_ref);
}

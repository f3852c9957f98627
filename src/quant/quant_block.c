/* FP8 block scaling (DeepSeek style): 1x128 rowwise / 128x1 columnwise blocks (BLOCK_1D) or
 * 128x128 tiles shared by both copies (BLOCK_2D).  FP32 decode scales (power-of-two with
 * power_2_scale); the scale rule is the current-scaling one with value_for_inf = the input
 * dtype's max finite value.  Columnwise data is stored transposed ([cols, rows]). */
#include <string.h>

#include "numerics/numerics.h"
#include "quant/quant.h"
#include "tensor/tensor.h"

typedef struct gln_block_rect {
    int64_t r0, r1, c0, c1; /* [r0, r1) x [c0, c1) */
} gln_block_rect_t;

static float gln_block_scale(const gln_quant_config_t *cfg, const gln_tensor_t *in, gln_block_rect_t b) {
    float amax = 0.0f;
    for (int64_t r = b.r0; r < b.r1; r++)
        for (int64_t c = b.c0; c < b.c1; c++)
            amax = gln_f32_max_amax(amax, gln_f32_abs(gln_hp_load(in->data, in->dtype, r * in->cols + c)),
                                    cfg->amax_nan_propagate);
    return gln_scale_from_amax_impl(amax, gln_fp8_max(cfg->fp8_dtype), cfg->power_2_scale, cfg->amax_epsilon,
                                    gln_hp_max(in->dtype));
}

/* Encode block b with `scale` into rowwise data (q, [R,C]) and/or transposed data (qt, [C,R]). */
static void gln_block_encode(const gln_quant_config_t *cfg, const gln_tensor_t *in, gln_block_rect_t b,
                             float scale, uint8_t *q, uint8_t *qt) {
    const int64_t R = in->rows, C = in->cols;
    for (int64_t r = b.r0; r < b.r1; r++)
        for (int64_t c = b.c0; c < b.c1; c++) {
            uint8_t v = gln_fp8_encode(gln_hp_load(in->data, in->dtype, r * C + c) * scale, cfg->fp8_dtype);
            if (q) q[r * C + c] = v;
            if (qt) qt[c * R + r] = v;
        }
}

static int64_t gln_min64(int64_t a, int64_t b) { return a < b ? a : b; }

static void gln_quantize_block_1d(const gln_quant_config_t *cfg, const gln_tensor_t *in, gln_tensor_t *out,
                                  int columnwise) {
    const int64_t R = in->rows, C = in->cols;
    const gln_scaling_mode_t mode = GLN_SCALING_BLOCK_1D;
    float *s = (float *)(columnwise ? out->col_scale_inv : out->scale_inv);
    memset(s, 0, (size_t)gln_member_scale_elems(mode, R, C, columnwise) * sizeof(float));
    for (int64_t r = 0; r < R; r += columnwise ? 128 : 1)
        for (int64_t c = 0; c < C; c += columnwise ? 1 : 128) {
            gln_block_rect_t b = {r, columnwise ? gln_min64(r + 128, R) : r + 1, c,
                                  columnwise ? c + 1 : gln_min64(c + 128, C)};
            float scale = gln_block_scale(cfg, in, b);
            s[gln_scale_index(mode, R, C, columnwise, r, c)] = 1.0f / scale;
            gln_block_encode(cfg, in, b, scale, columnwise ? NULL : out->data,
                             columnwise ? out->col_data : NULL);
        }
}

static void gln_quantize_block_2d(const gln_quant_config_t *cfg, const gln_tensor_t *in, gln_tensor_t *out) {
    const int64_t R = in->rows, C = in->cols;
    const gln_scaling_mode_t mode = GLN_SCALING_BLOCK_2D;
    float *s = cfg->rowwise ? (float *)out->scale_inv : NULL;
    float *cs = cfg->columnwise ? (float *)out->col_scale_inv : NULL;
    if (s) memset(s, 0, (size_t)gln_member_scale_elems(mode, R, C, 0) * sizeof(float));
    if (cs) memset(cs, 0, (size_t)gln_member_scale_elems(mode, R, C, 1) * sizeof(float));
    for (int64_t r = 0; r < R; r += 128)
        for (int64_t c = 0; c < C; c += 128) {
            gln_block_rect_t b = {r, gln_min64(r + 128, R), c, gln_min64(c + 128, C)};
            float scale = gln_block_scale(cfg, in, b);
            if (s) s[gln_scale_index(mode, R, C, 0, r, c)] = 1.0f / scale;
            if (cs) cs[gln_scale_index(mode, R, C, 1, r, c)] = 1.0f / scale;
            gln_block_encode(cfg, in, b, scale, s ? out->data : NULL, cs ? out->col_data : NULL);
        }
}

gln_status_t gln_quantize_block_ref(const gln_quant_config_t *cfg, const gln_tensor_t *in,
                                    gln_tensor_t *out) {
    if (gln_tensor_is_empty(in)) return GLN_STATUS_SUCCESS; /* no data, no scale */
    if (cfg->mode == GLN_SCALING_BLOCK_2D) {
        gln_quantize_block_2d(cfg, in, out);
        return GLN_STATUS_SUCCESS;
    }
    if (cfg->rowwise) gln_quantize_block_1d(cfg, in, out, 0);
    if (cfg->columnwise) gln_quantize_block_1d(cfg, in, out, 1);
    return GLN_STATUS_SUCCESS;
}

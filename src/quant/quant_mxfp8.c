/* MXFP8 (1x32 blocks, E8M0 scales): quantization and the cuBLAS scale swizzle.  Rowwise blocks
 * run along cols, columnwise blocks along rows; both copies keep the [rows, cols] data layout. */
#include <string.h>

#include "numerics/numerics.h"
#include "quant/quant.h"
#include "tensor/tensor.h"

/* emax_elem of the OCP rule: exponent of the largest power of two <= the format max. */
static int gln_mx_emax(gln_dtype_t fp8) { return fp8 == GLN_DTYPE_FP8_E5M2 ? 15 : 8; }

static uint8_t gln_mx_code(const gln_quant_config_t *cfg, float amax) {
    return gln_e8m0_from_amax_impl(amax, gln_fp8_max(cfg->fp8_dtype), gln_mx_emax(cfg->fp8_dtype),
                                   cfg->e8m0_rounding == GLN_E8M0_ROUND_FLOOR);
}

/* One block of `n` elements at stride `stride` from element `start`: scale code and data. */
static uint8_t gln_mx_block(const gln_quant_config_t *cfg, const gln_tensor_t *in, int64_t start, int64_t n,
                            int64_t stride, uint8_t *q) {
    float amax = 0.0f;
    for (int64_t k = 0; k < n; k++)
        amax = gln_f32_max_amax(amax, gln_f32_abs(gln_hp_load(in->data, in->dtype, start + k * stride)),
                                cfg->amax_nan_propagate);
    uint8_t code = gln_mx_code(cfg, amax);
    float mult = gln_e8m0_inverse_bits(code); /* exact 2^(127-code) */
    for (int64_t k = 0; k < n; k++) {
        int64_t i = start + k * stride;
        q[i] = gln_fp8_encode(gln_hp_load(in->data, in->dtype, i) * mult, cfg->fp8_dtype);
    }
    return code;
}

gln_status_t gln_quantize_mxfp8_ref(const gln_quant_config_t *cfg, const gln_tensor_t *in,
                                    gln_tensor_t *out) {
    const int64_t R = in->rows, C = in->cols;
    const gln_scaling_mode_t mode = GLN_SCALING_MXFP8_1D;
    if (gln_tensor_is_empty(in)) return GLN_STATUS_SUCCESS; /* no data, no scale */
    if (cfg->rowwise) {
        uint8_t *s = (uint8_t *)out->scale_inv;
        memset(s, 0, (size_t)gln_member_scale_elems(mode, R, C, 0));
        for (int64_t r = 0; r < R; r++)
            for (int64_t c0 = 0; c0 < C; c0 += 32) {
                int64_t n = C - c0 < 32 ? C - c0 : 32;
                s[gln_scale_index(mode, R, C, 0, r, c0)] = gln_mx_block(cfg, in, r * C + c0, n, 1, out->data);
            }
    }
    if (cfg->columnwise) {
        uint8_t *s = (uint8_t *)out->col_scale_inv;
        memset(s, 0, (size_t)gln_member_scale_elems(mode, R, C, 1));
        for (int64_t r0 = 0; r0 < R; r0 += 32) {
            int64_t n = R - r0 < 32 ? R - r0 : 32;
            for (int64_t c = 0; c < C; c++)
                s[gln_scale_index(mode, R, C, 1, r0, c)] =
                    gln_mx_block(cfg, in, r0 * C + c, n, C, out->col_data);
        }
    }
    return GLN_STATUS_SUCCESS;
}

/* Position of compact entry (i, j) in the 128x4-tile layout, T tiles per tile-row. */
static int64_t gln_swizzle_index(int64_t i, int64_t j, int64_t T) {
    return ((i / 128) * T + j / 4) * 512 + (i % 32) * 16 + ((i % 128) / 32) * 4 + (j % 4);
}

gln_status_t gln_mxfp8_swizzle_ref(int64_t rows, int64_t cols, int columnwise, const uint8_t *compact,
                                   uint8_t *swizzled) {
    /* Rowwise grid: i = data row, j = block along cols.  Columnwise: the transposed grid,
     * i = data column, j = block along rows (compact entry at [j, i]). */
    const int64_t I = columnwise ? cols : rows;
    const int64_t J = gln_ceil_div(columnwise ? rows : cols, 32);
    const int64_t Ip = gln_round_up(I, 128), Jp = gln_round_up(J, 4);
    const int64_t width = columnwise ? Ip : Jp; /* row length of the compact buffer */
    const int64_t T = Jp / 4;
    for (int64_t i = 0; i < Ip; i++)
        for (int64_t j = 0; j < Jp; j++) {
            uint8_t v = 0;
            if (i < I && j < J) v = columnwise ? compact[j * width + i] : compact[i * width + j];
            swizzled[gln_swizzle_index(i, j, T)] = v;
        }
    return GLN_STATUS_SUCCESS;
}

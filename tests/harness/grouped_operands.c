/* The operands of the grouped GEMM tests (grouped_operands.h). */
#include "grouped_operands.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "numerics/numerics.h"

const char *gln_gop_kind_name(gln_gop_kind_t k) {
    static const char *names[] = {"bf16", "e4m3", "hybrid", "mxfp8", "fp8-block (pow2)"};
    return names[k];
}

uint8_t gln_gop_fp8_code(gln_dtype_t dt, float v) {
    return dt == GLN_DTYPE_FP8_E4M3 ? gln_f32_to_e4m3_bits(v) : gln_f32_to_e5m2_bits(v);
}

void gln_gop_host_transpose(gln_gop_operand_t *o) {
    for (int64_t r = 0; r < o->rows; r++)
        for (int64_t c = 0; c < o->cols; c++)
            ((uint8_t *)o->h_col)[c * o->rows + r] = ((uint8_t *)o->h)[r * o->cols + c];
}

gln_gop_operand_t gln_gop_operand_new(gln_context_t *cu, gln_rng_t *rng, gln_dtype_t dt, int64_t rows, int64_t cols,
                                      int random, float fill) {
    gln_gop_operand_t o = {dt, rows, cols, NULL, NULL, {0}, {0}};
    const size_t n = (size_t)rows * (size_t)cols, es = gln_dtype_size(dt);
    o.h = calloc(n + 1, es);
    for (size_t i = 0; i < n; i++) {
        const float v = random ? (float)gln_rng_int(rng, -4, 4) : fill;
        if (gln_dtype_is_fp8(dt)) ((uint8_t *)o.h)[i] = gln_gop_fp8_code(dt, v);
        else gln_store(o.h, dt, i, v);
    }
    o.d = gln_twin_upload(cu, o.h, n * es);
    if (gln_dtype_is_fp8(dt)) {
        o.h_col = calloc(n + 1, 1);
        gln_gop_host_transpose(&o);
        o.d_col = gln_twin_upload(cu, o.h_col, n);
    }
    return o;
}

void gln_gop_operand_free(gln_context_t *cu, gln_gop_operand_t *o) {
    gln_twin_free(cu, &o->d), gln_twin_free(cu, &o->d_col);
    free(o->h), free(o->h_col);
}

gln_tensor_t gln_gop_view(const gln_gop_operand_t *o, int dev, const float *scale_h, const float *scale_d) {
    gln_tensor_t t = gln_tensor_make(o->dtype, o->rows, o->cols, dev ? o->d.d : o->h);
    if (gln_dtype_is_fp8(o->dtype)) {
        t.scaling = GLN_SCALING_TENSOR;
        t.scale_inv = (void *)(dev ? scale_d : scale_h);
    }
    return t;
}

gln_tensor_t gln_gop_view_with_col(const gln_gop_operand_t *o, int dev, const float *scale_h, const float *scale_d) {
    gln_tensor_t t = gln_gop_view(o, dev, scale_h, scale_d);
    if (gln_dtype_is_fp8(o->dtype)) {
        t.col_data = dev ? o->d_col.d : o->h_col;
        t.col_scale_inv = t.scale_inv;
    }
    return t;
}

void gln_gop_grouped_transpose(gln_context_t *cu, gln_gop_operand_t *o, int num, const int64_t *splits) {
    const size_t n = (size_t)o->rows * (size_t)o->cols;
    memset(o->h_col, 0, n);
    int64_t r0 = 0;
    for (int i = 0; i < num; i++) {
        const int64_t m = splits[i];
        uint8_t *dst = (uint8_t *)o->h_col + r0 * o->cols;
        for (int64_t r = 0; r < m; r++)
            for (int64_t c = 0; c < o->cols; c++) dst[c * m + r] = ((uint8_t *)o->h)[(r0 + r) * o->cols + c];
        r0 += m;
    }
    gln_twin_set(cu, &o->d_col, o->h_col);
}

void gln_gop_scales_new(gln_context_t *cu, gln_rng_t *rng, int n, float *h, gln_twin_t *d) {
    for (int i = 0; i < n; i++) h[i] = ldexpf(1.0f, (int)gln_rng_int(rng, -3, 3));
    *d = gln_twin_upload(cu, h, (size_t)n * sizeof(float));
}

int gln_gop_is_quant_kind(gln_gop_kind_t k) { return k == GLN_GOP_KIND_MXFP8 || k == GLN_GOP_KIND_BLOCK; }

void *gln_gop_values_new(gln_rng_t *rng, int64_t rows, int64_t cols) {
    void *h = calloc((size_t)rows * (size_t)cols + 1, 2);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            const int e = (int)((r / 3 + c / 40) % 3) - 1;
            gln_store(h, GLN_DTYPE_BF16, (size_t)(r * cols + c), ldexp((double)gln_rng_int(rng, -4, 4), e));
        }
    return h;
}

gln_quant_config_t gln_gop_quant_config(gln_scaling_mode_t mode) {
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.mode = mode;
    cfg.fp8_dtype = GLN_DTYPE_FP8_E4M3;
    cfg.rowwise = cfg.columnwise = 1;
    cfg.power_2_scale = 1;
    return cfg;
}

gln_gop_qoperand_t gln_gop_qoperand_new(gln_scaling_mode_t mode, int64_t rows, int64_t cols, const size_t bytes[4]) {
    gln_gop_qoperand_t q;
    memset(&q, 0, sizeof q);
    for (int k = 0; k < 4; k++) q.hb[k] = calloc(bytes[k] + 1, 1), q.db[k].bytes = bytes[k];
    q.h = gln_tensor_make(GLN_DTYPE_FP8_E4M3, rows, cols, q.hb[0]);
    q.h.scaling = mode;
    q.h.col_data = q.hb[1], q.h.scale_inv = q.hb[2], q.h.col_scale_inv = q.hb[3];
    return q;
}

void gln_gop_qoperand_upload(gln_context_t *cu, gln_gop_qoperand_t *q) {
    for (int k = 0; k < 4; k++) q->db[k] = gln_twin_upload(cu, q->hb[k], q->db[k].bytes);
    q->d = q->h;
    q->d.data = q->db[0].d, q->d.col_data = q->db[1].d, q->d.scale_inv = q->db[2].d, q->d.col_scale_inv = q->db[3].d;
}

void gln_gop_qoperand_free(gln_context_t *cu, gln_gop_qoperand_t *q) {
    for (int k = 0; k < 4; k++) gln_twin_free(cu, &q->db[k]), free(q->hb[k]);
}

gln_gop_qoperand_t gln_gop_qtensor_new(gln_context_t *cpu, gln_context_t *cu, gln_rng_t *rng, gln_scaling_mode_t mode,
                                       int64_t rows, int64_t cols) {
    gln_quant_layout_t lay;
    CHECK_OK(gln_quant_layout(mode, GLN_DTYPE_FP8_E4M3, rows, cols, &lay));
    const size_t bytes[4] = {lay.data_bytes, lay.col_data_bytes, lay.scale_bytes, lay.col_scale_bytes};
    gln_gop_qoperand_t q = gln_gop_qoperand_new(mode, rows, cols, bytes);
    void *v = gln_gop_values_new(rng, rows, cols);
    const gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, rows, cols, v);
    const gln_quant_config_t cfg = gln_gop_quant_config(mode);
    CHECK_OK(gln_quantize(cpu, &cfg, &in, &q.h));
    free(v);
    gln_gop_qoperand_upload(cu, &q);
    return q;
}

gln_gop_qoperand_t gln_gop_qgrouped_new(gln_context_t *cpu, gln_context_t *cu, gln_rng_t *rng, gln_scaling_mode_t mode,
                                        int num, const int64_t *splits, int64_t rows, int64_t cols) {
    int64_t ro[GLN_GOP_MAXE + 1], co[GLN_GOP_MAXE + 1];
    CHECK_OK(gln_grouped_scale_offsets(mode, num, splits, cols, ro, co));
    const size_t es = mode == GLN_SCALING_MXFP8_1D ? 1 : 4, n = (size_t)rows * (size_t)cols;
    const size_t bytes[4] = {n, n, (size_t)ro[num] * es, (size_t)co[num] * es};
    gln_gop_qoperand_t q = gln_gop_qoperand_new(mode, rows, cols, bytes);
    void *v = gln_gop_values_new(rng, rows, cols);
    const gln_grouped_tensor_t in = {num, splits, 0, gln_tensor_make(GLN_DTYPE_BF16, rows, cols, v)};
    gln_grouped_tensor_t out = {num, splits, 0, q.h};
    const gln_quant_config_t cfg = gln_gop_quant_config(mode);
    CHECK_OK(gln_grouped_quantize(cpu, &cfg, &in, &out));
    free(v);
    gln_gop_qoperand_upload(cu, &q);
    return q;
}

/* Public quantization calls: validate every argument once, then dispatch to the backend. */
#include <stddef.h>
#include <string.h>

#include "backend/ops.h"
#include "common/error.h"
#include "numerics/numerics.h"
#include "quant/quant_check.h"
#include "tensor/tensor.h"

/* The one check of a quantization config (quant_check.h). */
gln_status_t gln_quant_config_read(const char *fn, const char *prefix, const gln_quant_config_t *cfg,
                                   gln_quant_config_t *c) {
    GLN_REQUIRE_NOT_NULL(fn, cfg);
    gln_quant_config_t def = GLN_QUANT_CONFIG_INIT;
    const size_t v1 = offsetof(gln_quant_config_t, amax_nan_propagate);
    GLN_REQUIRE_ARG(cfg->size == v1 || cfg->size == sizeof def,
                    "%s: %ssize %zu is not a known version (%zu or %zu; start from "
                    "GLN_QUANT_CONFIG_INIT)",
                    fn, prefix, cfg->size, v1, sizeof def);
    memcpy(&def, cfg, cfg->size);
    def.size = sizeof def;
    *c = def;
    GLN_REQUIRE_ARG(c->mode >= GLN_SCALING_TENSOR && c->mode <= GLN_SCALING_BLOCK_2D,
                    "%s: %smode %d must be TENSOR (1), MXFP8_1D (2), BLOCK_1D (3) or BLOCK_2D (4)", fn,
                    prefix, (int)c->mode);
    GLN_REQUIRE_ARG(gln_dtype_is_fp8(c->fp8_dtype),
                    "%s: %sfp8_dtype %d must be FP8_E4M3 (3) or FP8_E5M2 (4)", fn, prefix,
                    (int)c->fp8_dtype);
    GLN_REQUIRE_ARG(c->rowwise == 0 || c->rowwise == 1, "%s: %srowwise %d must be 0 or 1", fn, prefix,
                    c->rowwise);
    GLN_REQUIRE_ARG(c->columnwise == 0 || c->columnwise == 1, "%s: %scolumnwise %d must be 0 or 1", fn,
                    prefix, c->columnwise);
    GLN_REQUIRE_ARG(c->rowwise || c->columnwise,
                    "%s: %srowwise and %scolumnwise are both 0 (need >= 1)", fn, prefix, prefix);
    GLN_REQUIRE_ARG(c->delayed == 0 || c->delayed == 1, "%s: %sdelayed %d must be 0 or 1", fn, prefix,
                    c->delayed);
    GLN_REQUIRE_ARG(!c->delayed || c->mode == GLN_SCALING_TENSOR,
                    "%s: %sdelayed 1 needs %smode TENSOR (1), got %d", fn, prefix, prefix, (int)c->mode);
    GLN_REQUIRE_ARG(gln_f32_isfinite(c->amax_epsilon) && c->amax_epsilon >= 0.0f,
                    "%s: %samax_epsilon %g must be finite and >= 0", fn, prefix, (double)c->amax_epsilon);
    GLN_REQUIRE_ARG(c->power_2_scale == 0 || c->power_2_scale == 1,
                    "%s: %spower_2_scale %d must be 0 or 1", fn, prefix, c->power_2_scale);
    GLN_REQUIRE_ARG(c->e8m0_rounding == GLN_E8M0_ROUND_UP || c->e8m0_rounding == GLN_E8M0_ROUND_FLOOR,
                    "%s: %se8m0_rounding %d must be ROUND_UP (0) or ROUND_FLOOR (1)", fn, prefix,
                    (int)c->e8m0_rounding);
    GLN_REQUIRE_ARG(c->amax_nan_propagate == 0 || c->amax_nan_propagate == 1,
                    "%s: %samax_nan_propagate %d must be 0 (ignore NaN, TE's rule) or 1 (propagate)",
                    fn, prefix, c->amax_nan_propagate);
    return GLN_STATUS_SUCCESS;
}

static gln_status_t gln_check_high_precision(const char *fn, const char *name, const gln_tensor_t *t) {
    GLN_TRY(gln_tensor_validate(fn, name, t));
    GLN_REQUIRE_ARG(t->scaling == GLN_SCALING_NONE,
                    "%s: %s->scaling %d must be NONE (0): a high-precision tensor", fn, name,
                    (int)t->scaling);
    GLN_REQUIRE_ARG(gln_dtype_is_high_precision(t->dtype), "%s: %s->dtype %s must be fp32, bf16 or fp16", fn,
                    name, gln_dtype_name(t->dtype));
    return GLN_STATUS_SUCCESS;
}

/* The buffers of quantized `t` that quantizing with `c` writes; `nonempty` = it has elements. */
static gln_status_t gln_check_quant_out(const char *fn, const char *name, const gln_quant_config_t *c,
                                        const gln_tensor_t *t, int nonempty) {
    GLN_TRY(gln_tensor_validate(fn, name, t));
    GLN_REQUIRE_ARG(t->dtype == c->fp8_dtype, "%s: %s->dtype %s must equal cfg->fp8_dtype %s", fn, name,
                    gln_dtype_name(t->dtype), gln_dtype_name(c->fp8_dtype));
    GLN_REQUIRE_ARG(t->scaling == c->mode, "%s: %s->scaling %s must equal cfg->mode %s", fn, name,
                    gln_scaling_name(t->scaling), gln_scaling_name(c->mode));
    const int per_tensor = c->mode == GLN_SCALING_TENSOR; /* a scale even when empty */
    if (c->rowwise) {
        GLN_REQUIRE_ARG(t->data || !nonempty, "%s: %s->data must not be NULL (cfg->rowwise = 1)", fn, name);
        GLN_REQUIRE_ARG(t->scale_inv || !(nonempty || per_tensor),
                        "%s: %s->scale_inv must not be NULL (cfg->rowwise = 1)", fn, name);
    }
    if (c->columnwise) {
        GLN_REQUIRE_ARG(t->col_data || !nonempty, "%s: %s->col_data must not be NULL (cfg->columnwise = 1)",
                        fn, name);
        GLN_REQUIRE_ARG(t->col_scale_inv || !(nonempty || per_tensor),
                        "%s: %s->col_scale_inv must not be NULL (cfg->columnwise = 1)", fn, name);
    }
    if (c->delayed) {
        GLN_REQUIRE_ARG(t->scale != NULL, "%s: %s->scale must not be NULL (delayed scaling reads it)", fn,
                        name);
        GLN_REQUIRE_ARG(t->amax != NULL,
                        "%s: %s->amax must not be NULL (delayed scaling accumulates into it)", fn, name);
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                          gln_tensor_t *out) {
    static const char *fn = "gln_quantize";
    gln_quant_config_t c;
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    GLN_TRY(gln_quant_config_read(fn, "cfg->", cfg, &c));
    GLN_TRY(gln_check_high_precision(fn, "in", in));
    GLN_TRY(gln_check_quant_out(fn, "out", &c, out, in->rows * in->cols > 0));
    GLN_REQUIRE_ARG(out->rows == in->rows && out->cols == in->cols,
                    "%s: out is %lld x %lld, must match in (%lld x %lld)", fn, (long long)out->rows,
                    (long long)out->cols, (long long)in->rows, (long long)in->cols);
    return gln_op_quantize(ctx, &c, in, out);
}

gln_status_t gln_dequantize(gln_context_t *ctx, const gln_tensor_t *in, int columnwise, gln_tensor_t *out) {
    static const char *fn = "gln_dequantize";
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    GLN_TRY(gln_tensor_validate(fn, "in", in));
    GLN_REQUIRE_ARG(in->scaling != GLN_SCALING_NONE, "%s: in->scaling is NONE (0): nothing to dequantize",
                    fn);
    GLN_REQUIRE_ARG(columnwise == 0 || columnwise == 1, "%s: columnwise %d must be 0 or 1", fn, columnwise);
    const int nonempty = in->rows * in->cols > 0;
    const char *copy = columnwise ? "columnwise" : "rowwise";
    GLN_REQUIRE_ARG((columnwise ? in->col_data : in->data) || !nonempty,
                    "%s: in->%s must not be NULL (the %s copy)", fn, columnwise ? "col_data" : "data", copy);
    GLN_REQUIRE_ARG((columnwise ? in->col_scale_inv : in->scale_inv) || !nonempty,
                    "%s: in->%s must not be NULL (the %s copy)", fn,
                    columnwise ? "col_scale_inv" : "scale_inv", copy);
    GLN_TRY(gln_check_high_precision(fn, "out", out));
    GLN_REQUIRE_ARG(out->rows == in->rows && out->cols == in->cols,
                    "%s: out is %lld x %lld, must match in (%lld x %lld)", fn, (long long)out->rows,
                    (long long)out->cols, (long long)in->rows, (long long)in->cols);
    return gln_op_dequantize(ctx, in, columnwise, out);
}

gln_status_t gln_grouped_quantize_check(const char *fn, const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                        const gln_grouped_tensor_t *out, gln_quant_config_t *c) {
    GLN_TRY(gln_quant_config_read(fn, "cfg->", cfg, c));
    GLN_TRY(gln_grouped_validate(fn, "in", in));
    GLN_TRY(gln_grouped_validate(fn, "out", out));
    GLN_TRY(gln_check_high_precision(fn, "in->packed", &in->packed));
    GLN_TRY(gln_check_quant_out(fn, "out->packed", c, &out->packed, in->packed.rows * in->packed.cols > 0));
    GLN_REQUIRE_ARG(out->num == in->num, "%s: out->num %d must equal in->num %d", fn, (int)out->num,
                    (int)in->num);
    GLN_REQUIRE_ARG(out->packed.cols == in->packed.cols,
                    "%s: out->packed.cols %lld must equal in->packed.cols %lld", fn,
                    (long long)out->packed.cols, (long long)in->packed.cols);
    GLN_REQUIRE_ARG(out->splits_on_backend == in->splits_on_backend,
                    "%s: out->splits_on_backend %d must equal in->splits_on_backend %d", fn,
                    out->splits_on_backend, in->splits_on_backend);
    if (!in->splits_on_backend)
        for (int32_t i = 0; i < in->num; i++)
            GLN_REQUIRE_ARG(out->splits[i] == in->splits[i],
                            "%s: out->splits[%d] %lld must equal in->splits[%d] %lld", fn, (int)i,
                            (long long)out->splits[i], (int)i, (long long)in->splits[i]);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_grouped_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                  const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out) {
    static const char *fn = "gln_grouped_quantize";
    gln_quant_config_t c;
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    GLN_TRY(gln_grouped_quantize_check(fn, cfg, in, out, &c));
    return gln_op_grouped_quantize(ctx, &c, in, out);
}

gln_status_t gln_mxfp8_swizzle_scales(gln_context_t *ctx, int64_t rows, int64_t cols, int columnwise,
                                      const uint8_t *compact, uint8_t *swizzled) {
    static const char *fn = "gln_mxfp8_swizzle_scales";
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    gln_quant_layout_t l;
    GLN_TRY(gln_layout_compute(fn, GLN_SCALING_MXFP8_1D, GLN_DTYPE_FP8_E4M3, rows, cols, &l));
    GLN_REQUIRE_ARG(columnwise == 0 || columnwise == 1, "%s: columnwise %d must be 0 or 1", fn, columnwise);
    const size_t bytes = columnwise ? l.col_scale_bytes : l.scale_bytes;
    GLN_REQUIRE_ARG(compact || bytes == 0, "%s: compact must not be NULL (%zu scale bytes)", fn, bytes);
    GLN_REQUIRE_ARG(swizzled || bytes == 0, "%s: swizzled must not be NULL (%zu scale bytes)", fn, bytes);
    GLN_REQUIRE_ARG(bytes == 0 || (const void *)compact != (const void *)swizzled,
                    "%s: swizzled must not alias compact (no in-place swizzle)", fn);
    if (bytes == 0) return GLN_STATUS_SUCCESS;
    return gln_op_mxfp8_swizzle(ctx, rows, cols, columnwise, compact, swizzled);
}

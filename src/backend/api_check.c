/* Argument checks shared by the public GEMM and reduction entry points (gemm_api.c,
 * reduce_api.c): dtype and layout names, operand shapes, backend residency. */
#include "backend/api_check.h"

#include <stdint.h>

#include "backend/backend.h"
#include "backend/context.h"
#include "common/checked.h"
#include "common/error.h"
#include "tensor/tensor.h"

const char *gln_arg_layout_name(gln_gemm_layout_t layout) {
    switch (layout) {
    case GLN_LAYOUT_TN: return "TN";
    case GLN_LAYOUT_NN: return "NN";
    case GLN_LAYOUT_NT: return "NT";
    }
    return "invalid";
}

static gln_status_t check_shape(const char *fn, const char *name, const gln_tensor_t *t) {
    return gln_check_shape(fn, name, t->rows, t->cols, NULL);
}

gln_status_t gln_arg_hp_tensor(const char *fn, const char *name, const gln_tensor_t *t) {
    GLN_REQUIRE_ARG(t != NULL, "%s: %s must not be NULL", fn, name);
    GLN_REQUIRE_ARG(gln_dtype_is_high_precision(t->dtype),
                    "%s: %s->dtype %s must be fp32, bf16 or fp16", fn, name, gln_dtype_name(t->dtype));
    GLN_REQUIRE_ARG(t->scaling == GLN_SCALING_NONE,
                    "%s: %s->scaling %d must be GLN_SCALING_NONE for a high-precision tensor", fn, name,
                    (int)t->scaling);
    GLN_TRY(check_shape(fn, name, t));
    GLN_REQUIRE_ARG(t->data != NULL || t->rows * t->cols == 0,
                    "%s: %s->data must not be NULL (the tensor has %lld elements)", fn, name,
                    (long long)(t->rows * t->cols));
    return GLN_STATUS_SUCCESS;
}

static int is_quant_mode(gln_scaling_mode_t s) {
    return s == GLN_SCALING_TENSOR || s == GLN_SCALING_MXFP8_1D || s == GLN_SCALING_BLOCK_1D ||
           s == GLN_SCALING_BLOCK_2D;
}

gln_status_t gln_arg_operand(const char *fn, const char *name, const gln_tensor_t *t, int columnwise,
                             gln_gemm_layout_t layout) {
    GLN_REQUIRE_ARG(t != NULL, "%s: %s must not be NULL", fn, name);
    if (!gln_dtype_is_fp8(t->dtype)) return gln_arg_hp_tensor(fn, name, t);
    GLN_REQUIRE_ARG(is_quant_mode(t->scaling),
                    "%s: %s->dtype is %s but %s->scaling %d is not a quantized mode (TENSOR, "
                    "MXFP8_1D, BLOCK_1D, BLOCK_2D)",
                    fn, name, gln_dtype_name(t->dtype), name, (int)t->scaling);
    GLN_TRY(check_shape(fn, name, t));
    if (t->rows * t->cols == 0) return GLN_STATUS_SUCCESS; /* nothing will be read */
    const char *copy = columnwise ? "columnwise" : "rowwise";
    const void *data = columnwise ? t->col_data : t->data;
    const void *scales = columnwise ? t->col_scale_inv : t->scale_inv;
    GLN_REQUIRE_ARG(data != NULL,
                    "%s: layout %s reads the %s copy of %s, but %s->%s is NULL (quantize it with "
                    "%s = 1)",
                    fn, gln_arg_layout_name(layout), copy, name, name, columnwise ? "col_data" : "data",
                    copy);
    GLN_REQUIRE_ARG(scales != NULL, "%s: layout %s reads the %s copy of %s, but %s->%s is NULL", fn,
                    gln_arg_layout_name(layout), copy, name, name,
                    columnwise ? "col_scale_inv" : "scale_inv");
    return GLN_STATUS_SUCCESS;
}

/* Quantized modes that can meet in one GEMM: per-tensor with per-tensor, MXFP8 with MXFP8,
 * 1-D / 2-D block scaling with each other (as cuBLAS allows). */
static int mode_family(gln_scaling_mode_t s) {
    return s == GLN_SCALING_BLOCK_2D ? GLN_SCALING_BLOCK_1D : (int)s;
}

static const char *mode_name(gln_scaling_mode_t s) {
    switch (s) {
    case GLN_SCALING_NONE: return "NONE";
    case GLN_SCALING_TENSOR: return "TENSOR";
    case GLN_SCALING_MXFP8_1D: return "MXFP8_1D";
    case GLN_SCALING_BLOCK_1D: return "BLOCK_1D";
    case GLN_SCALING_BLOCK_2D: return "BLOCK_2D";
    }
    return "invalid";
}

gln_status_t gln_arg_operand_pair(const char *fn, const char *an, const gln_tensor_t *A, const char *bn,
                                  const gln_tensor_t *B) {
    const int qa = gln_dtype_is_fp8(A->dtype), qb = gln_dtype_is_fp8(B->dtype);
    GLN_REQUIRE(qa == qb, GLN_STATUS_NOT_SUPPORTED,
                "%s: %s (%s) and %s (%s) must both be high precision or both quantized", fn, an,
                gln_dtype_name(A->dtype), bn, gln_dtype_name(B->dtype));
    GLN_REQUIRE(!qa || mode_family(A->scaling) == mode_family(B->scaling), GLN_STATUS_NOT_SUPPORTED,
                "%s: %s->scaling %s and %s->scaling %s cannot be combined in one GEMM (per-tensor "
                "pairs with per-tensor, MXFP8 with MXFP8, block with block)",
                fn, an, mode_name(A->scaling), bn, mode_name(B->scaling));
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_arg_output(const char *fn, const char *name, const gln_tensor_t *D, int64_t rows,
                            int64_t cols, const char *why) {
    GLN_TRY(gln_arg_hp_tensor(fn, name, D));
    GLN_REQUIRE_ARG(D->rows == rows, "%s: %s->rows %lld != %lld (%s)", fn, name, (long long)D->rows,
                    (long long)rows, why);
    GLN_REQUIRE_ARG(D->cols == cols, "%s: %s->cols %lld != %lld (%s)", fn, name, (long long)D->cols,
                    (long long)cols, why);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_arg_bias(const char *fn, const char *name, const gln_tensor_t *bias, int64_t n) {
    GLN_TRY(gln_arg_hp_tensor(fn, name, bias));
    GLN_REQUIRE_ARG((bias->rows == 1 && bias->cols == n) || (bias->cols == 1 && bias->rows == n),
                    "%s: %s is [%lld, %lld] but must hold the %lld output columns ([1, %lld])", fn,
                    name, (long long)bias->rows, (long long)bias->cols, (long long)n, (long long)n);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_arg_gemm_dim(const char *fn, const gln_context_t *ctx, const char *what, int64_t v) {
    const int64_t limit = ctx->ops->max_gemm_dim;
    GLN_REQUIRE(limit == 0 || v <= limit, GLN_STATUS_NOT_SUPPORTED,
                "%s: %s %lld exceeds the %s backend's GEMM dimension limit (%lld)", fn, what,
                (long long)v, ctx->ops->name, (long long)limit);
    return GLN_STATUS_SUCCESS;
}

int gln_arg_splits_readable(const gln_context_t *ctx, const gln_grouped_tensor_t *g) {
    return !g->splits_on_backend || ctx->kind == GLN_BACKEND_CPU;
}

gln_status_t gln_arg_grouped(const char *fn, const char *name, const gln_grouped_tensor_t *g,
                             int read_splits, int64_t *sum) {
    *sum = -1;
    GLN_REQUIRE_ARG(g != NULL, "%s: %s must not be NULL", fn, name);
    GLN_REQUIRE_ARG(g->num >= 1, "%s: %s->num %d must be >= 1", fn, name, (int)g->num);
    GLN_REQUIRE_ARG(g->splits != NULL, "%s: %s->splits must not be NULL", fn, name);
    if (!read_splits) return GLN_STATUS_SUCCESS;
    int64_t total = 0;
    for (int32_t i = 0; i < g->num; i++) {
        const int64_t s = g->splits[i];
        GLN_REQUIRE_ARG(s >= 0, "%s: %s->splits[%d] = %lld must be >= 0", fn, name, (int)i,
                        (long long)s);
        GLN_REQUIRE_ARG(s <= INT64_MAX - total, "%s: %s->splits overflow at [%d]", fn, name, (int)i);
        total += s;
    }
    GLN_REQUIRE_ARG(total <= g->packed.rows,
                    "%s: %s splits sum %lld > %s->packed.rows %lld", fn, name, (long long)total, name,
                    (long long)g->packed.rows);
    *sum = total;
    return GLN_STATUS_SUCCESS;
}

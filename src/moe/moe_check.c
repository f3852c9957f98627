/* Argument checks shared by the MoE ops (router, permutation, activations). */
#include "moe/moe_check.h"

#include "backend/context.h"
#include "common/checked.h"
#include "common/error.h"
#include "tensor/tensor.h"

gln_status_t gln_moe_check_ctx(const char *fn, const gln_context_t *ctx) {
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    return GLN_STATUS_SUCCESS;
}

int gln_moe_host_indices(const gln_context_t *ctx) { return ctx->kind == GLN_BACKEND_CPU; }

gln_status_t gln_moe_check_tensor(const char *fn, const char *name, const gln_tensor_t *t,
                                  int64_t rows, int64_t cols) {
    GLN_REQUIRE_ARG(t != NULL, "%s: %s must not be NULL", fn, name);
    GLN_REQUIRE_ARG(gln_dtype_is_high_precision(t->dtype), "%s: %s->dtype %s must be fp32, bf16 or fp16", fn,
                    name, gln_dtype_name(t->dtype));
    GLN_REQUIRE_ARG(t->scaling == GLN_SCALING_NONE,
                    "%s: %s->scaling %d must be GLN_SCALING_NONE (high precision)", fn, name,
                    (int)t->scaling);
    GLN_TRY(gln_check_shape(fn, name, t->rows, t->cols, NULL));
    GLN_REQUIRE_ARG(t->rows == rows && t->cols == cols,
                    "%s: %s is [%lld, %lld], expected [%lld, %lld]", fn, name, (long long)t->rows,
                    (long long)t->cols, (long long)rows, (long long)cols);
    GLN_REQUIRE_ARG(t->data != NULL || rows == 0 || cols == 0,
                    "%s: %s->data must not be NULL for a [%lld, %lld] tensor", fn, name,
                    (long long)rows, (long long)cols);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_moe_check_rows(const char *fn, const int64_t *row_of, int64_t count, int64_t rows) {
    for (int64_t i = 0; i < count; i++)
        GLN_REQUIRE_ARG(row_of[i] >= 0 && row_of[i] < rows,
                        "%s: row_of[%lld] = %lld must be in [0, %lld)", fn, (long long)i,
                        (long long)row_of[i], (long long)rows);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_moe_check_tokens_k(const char *fn, int64_t tokens, int32_t k) {
    GLN_TRY(gln_check_dim(fn, "tokens", tokens));
    GLN_REQUIRE_ARG(k >= 1, "%s: k %d must be >= 1", fn, (int)k);
    /* the T·k permuted rows are one dimension of xp / yp */
    GLN_REQUIRE_ARG(tokens <= GLN_MAX_DIM / k, "%s: tokens %lld times k %d exceeds GLN_MAX_DIM (2^56)",
                    fn, (long long)tokens, (int)k);
    return GLN_STATUS_SUCCESS;
}

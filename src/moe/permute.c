/* Token permutation for MoE: the plan (stable counting sort of (token, slot) pairs by expert),
 * permute / unpermute and their backwards.  Validate, then dispatch to the backend's slot (the
 * CPU reference is src/backend/cpu/cpu_moe.c; a backend without the slot reports
 * GLN_STATUS_NOT_SUPPORTED, for empty calls too).  The contents of `experts` and `row_of` are
 * checked after the slot on the host when the host reads the backend's memory (the CPU), else by
 * the device kernels (moe_check.h). */
#include "backend/context.h"
#include "backend/ops.h"
#include "common/error.h"
#include "moe/moe_check.h"

static gln_status_t permute_plan(const char *fn, gln_context_t *ctx, int64_t tokens, int32_t num_experts,
                                 int32_t k, int64_t align, const int32_t *experts, int64_t *m_splits,
                                 int64_t *row_of) {
    GLN_TRY(gln_moe_check_ctx(fn, ctx));
    GLN_REQUIRE_ARG(align >= 1 && align <= 1024, "%s: align %lld must be in [1, 1024]", fn, (long long)align);
    GLN_REQUIRE_ARG(num_experts >= 1, "%s: num_experts %d must be >= 1", fn, (int)num_experts);
    GLN_TRY(gln_moe_check_tokens_k(fn, tokens, k));
    GLN_REQUIRE_NOT_NULL(fn, m_splits);
    const int64_t pairs = tokens * k;
    if (pairs > 0) {
        GLN_REQUIRE_NOT_NULL(fn, experts);
        GLN_REQUIRE_NOT_NULL(fn, row_of);
    }
    GLN_TRY(gln_op_require(ctx, fn, GLN_SLOT_MOE_PERMUTE_PLAN));
    for (int64_t i = 0; gln_moe_host_indices(ctx) && i < pairs; i++)
        GLN_REQUIRE_ARG(experts[i] >= 0 && experts[i] < num_experts,
                        "%s: experts[%lld] = %d must be in [0, %d)", fn, (long long)i,
                        (int)experts[i], (int)num_experts);
    return gln_op_moe_permute_plan(ctx, fn, tokens, num_experts, k, align, experts, m_splits, row_of);
}

gln_status_t gln_moe_permute_plan(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                  const int32_t *experts, int64_t *m_splits, int64_t *row_of) {
    return permute_plan("gln_moe_permute_plan", ctx, tokens, num_experts, k, 1, experts, m_splits, row_of);
}

gln_status_t gln_moe_permute_plan_aligned(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                          int64_t align, const int32_t *experts, int64_t *m_splits,
                                          int64_t *row_of) {
    return permute_plan("gln_moe_permute_plan_aligned", ctx, tokens, num_experts, k, align, experts, m_splits,
                        row_of);
}

/* Checks common to the four data-moving ops: context, sizes, row_of present (its contents are
 * checked by rows_check, after the slot). */
static gln_status_t move_check(const char *fn, gln_context_t *ctx, int64_t tokens, int32_t k,
                               const int64_t *row_of) {
    GLN_TRY(gln_moe_check_ctx(fn, ctx));
    GLN_TRY(gln_moe_check_tokens_k(fn, tokens, k));
    if (tokens > 0) GLN_REQUIRE_NOT_NULL(fn, row_of);
    return GLN_STATUS_SUCCESS;
}

/* A permuted tensor: tokens·k rows, or more (the padding rows of an aligned plan), `cols` columns. */
static gln_status_t permuted_check(const char *fn, const char *name, const gln_tensor_t *t, int64_t tokens,
                                   int32_t k, int64_t cols) {
    GLN_REQUIRE_ARG(t != NULL, "%s: %s must not be NULL", fn, name);
    GLN_REQUIRE_ARG(t->rows >= tokens * k, "%s: %s has %lld rows, needs at least tokens * k = %lld", fn, name,
                    (long long)t->rows, (long long)(tokens * k));
    return gln_moe_check_tensor(fn, name, t, t->rows, cols);
}

/* The backend has the op (else NOT_SUPPORTED naming the call and the backend), and every
 * row_of entry is a row of the permuted tensor (prows rows). */
static gln_status_t rows_check(const char *fn, gln_context_t *ctx, gln_op_slot_t slot, int64_t tokens,
                               int32_t k, const int64_t *row_of, int64_t prows) {
    GLN_TRY(gln_op_require(ctx, fn, slot));
    if (!gln_moe_host_indices(ctx)) return GLN_STATUS_SUCCESS; /* checked by the kernels */
    return gln_moe_check_rows(fn, row_of, tokens * k, prows);
}

gln_status_t gln_moe_permute(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                             const gln_tensor_t *x, gln_tensor_t *xp) {
    static const char *fn = "gln_moe_permute";
    GLN_TRY(move_check(fn, ctx, tokens, k, row_of));
    GLN_REQUIRE_NOT_NULL(fn, x);
    GLN_TRY(gln_moe_check_tensor(fn, "x", x, tokens, x->cols));
    GLN_TRY(permuted_check(fn, "xp", xp, tokens, k, x->cols));
    GLN_TRY(rows_check(fn, ctx, GLN_SLOT_MOE_PERMUTE, tokens, k, row_of, xp->rows));
    if (tokens == 0 || x->cols == 0) return GLN_STATUS_SUCCESS;
    return gln_op_moe_permute(ctx, fn, tokens, k, row_of, x, xp);
}

gln_status_t gln_moe_permute_backward(gln_context_t *ctx, int64_t tokens, int32_t k,
                                      const int64_t *row_of, const gln_tensor_t *dxp, gln_tensor_t *dx) {
    static const char *fn = "gln_moe_permute_backward";
    GLN_TRY(move_check(fn, ctx, tokens, k, row_of));
    GLN_REQUIRE_NOT_NULL(fn, dxp);
    GLN_TRY(permuted_check(fn, "dxp", dxp, tokens, k, dxp->cols));
    GLN_TRY(gln_moe_check_tensor(fn, "dx", dx, tokens, dxp->cols));
    GLN_TRY(rows_check(fn, ctx, GLN_SLOT_MOE_PERMUTE_BACKWARD, tokens, k, row_of, dxp->rows));
    if (tokens == 0 || dxp->cols == 0) return GLN_STATUS_SUCCESS;
    return gln_op_moe_permute_backward(ctx, fn, tokens, k, row_of, dxp, dx);
}

gln_status_t gln_moe_unpermute(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                               const float *gates, const gln_tensor_t *yp, gln_tensor_t *y) {
    static const char *fn = "gln_moe_unpermute";
    GLN_TRY(move_check(fn, ctx, tokens, k, row_of));
    if (tokens > 0) GLN_REQUIRE_NOT_NULL(fn, gates);
    GLN_REQUIRE_NOT_NULL(fn, yp);
    GLN_TRY(permuted_check(fn, "yp", yp, tokens, k, yp->cols));
    GLN_TRY(gln_moe_check_tensor(fn, "y", y, tokens, yp->cols));
    GLN_TRY(rows_check(fn, ctx, GLN_SLOT_MOE_UNPERMUTE, tokens, k, row_of, yp->rows));
    if (tokens == 0 || yp->cols == 0) return GLN_STATUS_SUCCESS;
    return gln_op_moe_unpermute(ctx, fn, tokens, k, row_of, gates, yp, y);
}

gln_status_t gln_moe_unpermute_backward(gln_context_t *ctx, int64_t tokens, int32_t k,
                                        const int64_t *row_of, const float *gates,
                                        const gln_tensor_t *yp, const gln_tensor_t *dy,
                                        gln_tensor_t *dyp, float *dgates) {
    static const char *fn = "gln_moe_unpermute_backward";
    GLN_TRY(move_check(fn, ctx, tokens, k, row_of));
    GLN_REQUIRE_NOT_NULL(fn, yp);
    GLN_TRY(permuted_check(fn, "yp", yp, tokens, k, yp->cols));
    const int64_t h = yp->cols;
    GLN_TRY(gln_moe_check_tensor(fn, "dy", dy, tokens, h));
    GLN_TRY(gln_moe_check_tensor(fn, "dyp", dyp, yp->rows, h));
    if (tokens > 0) {
        GLN_REQUIRE_NOT_NULL(fn, gates);
        GLN_REQUIRE_NOT_NULL(fn, dgates);
    }
    GLN_TRY(rows_check(fn, ctx, GLN_SLOT_MOE_UNPERMUTE_BACKWARD, tokens, k, row_of, yp->rows));
    if (tokens == 0) return GLN_STATUS_SUCCESS;
    return gln_op_moe_unpermute_backward(ctx, fn, tokens, k, row_of, gates, yp, dy, dyp, dgates);
}

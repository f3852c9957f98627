/* Token permutation for MoE: the plan (stable counting sort of (token, slot) pairs by expert),
 * permute / unpermute and their backwards.  Host memory; sums in FP32 with one rounding to the
 * output dtype. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_convert.h"
#include "common/error.h"
#include "moe/moe_check.h"

gln_status_t gln_moe_permute_plan(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                  const int32_t *experts, int64_t *m_splits, int64_t *row_of) {
    static const char *fn = "gln_moe_permute_plan";
    GLN_TRY(gln_moe_check_ctx(fn, ctx));
    GLN_REQUIRE_ARG(num_experts >= 1, "%s: num_experts %d must be >= 1", fn, (int)num_experts);
    GLN_TRY(gln_moe_check_tokens_k(fn, tokens, k));
    GLN_REQUIRE_NOT_NULL(fn, m_splits);
    const int64_t pairs = tokens * k;
    if (pairs > 0) {
        GLN_REQUIRE_NOT_NULL(fn, experts);
        GLN_REQUIRE_NOT_NULL(fn, row_of);
    }
    for (int64_t i = 0; i < pairs; i++)
        GLN_REQUIRE_ARG(experts[i] >= 0 && experts[i] < num_experts,
                        "%s: experts[%lld] = %d must be in [0, %d)", fn, (long long)i,
                        (int)experts[i], (int)num_experts);

    int64_t *next = malloc((size_t)num_experts * sizeof *next);
    GLN_REQUIRE(next != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", fn);
    for (int32_t e = 0; e < num_experts; e++) m_splits[e] = 0;
    for (int64_t i = 0; i < pairs; i++) m_splits[experts[i]]++;
    /* Each expert's block starts after the blocks of lower experts; pairs are visited in
     * (token, slot) order, so the sort is stable. */
    int64_t start = 0;
    for (int32_t e = 0; e < num_experts; e++) {
        next[e] = start;
        start += m_splits[e];
    }
    for (int64_t i = 0; i < pairs; i++) row_of[i] = next[experts[i]]++;
    free(next);
    return GLN_STATUS_SUCCESS;
}

/* Checks common to the four data-moving ops: context, sizes, row_of. */
static gln_status_t move_check(const char *fn, gln_context_t *ctx, int64_t tokens, int32_t k,
                               const int64_t *row_of) {
    GLN_TRY(gln_moe_check_ctx(fn, ctx));
    GLN_TRY(gln_moe_check_tokens_k(fn, tokens, k));
    if (tokens > 0) GLN_REQUIRE_NOT_NULL(fn, row_of);
    return gln_moe_check_rows(fn, row_of, tokens * k, tokens * k);
}

/* dst row = src row (converted through FP32 when the dtypes differ; a copy when they agree). */
static void copy_row(const gln_tensor_t *src, int64_t sr, gln_tensor_t *dst, int64_t dr, float *tmp) {
    const int64_t h = src->cols;
    const size_t ss = gln_dtype_size(src->dtype), ds = gln_dtype_size(dst->dtype);
    const char *s = (const char *)src->data + (size_t)(sr * h) * ss;
    char *d = (char *)dst->data + (size_t)(dr * h) * ds;
    if (src->dtype == dst->dtype) {
        memcpy(d, s, (size_t)h * ss);
        return;
    }
    gln_cpu_widen(s, src->dtype, (size_t)h, tmp);
    gln_cpu_narrow(tmp, dst->dtype, (size_t)h, d);
}

/* acc[:] += w · row sr of t (FP32). */
static void axpy_row(float w, const gln_tensor_t *t, int64_t sr, float *acc) {
    const int64_t h = t->cols;
    const size_t base = (size_t)(sr * h);
    for (int64_t c = 0; c < h; c++) acc[c] += w * gln_cpu_load(t->data, t->dtype, base + (size_t)c);
}

static void store_row(const float *acc, gln_tensor_t *t, int64_t r) {
    const int64_t h = t->cols;
    gln_cpu_narrow(acc, t->dtype, (size_t)h,
                   (char *)t->data + (size_t)(r * h) * gln_dtype_size(t->dtype));
}

gln_status_t gln_moe_permute(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                             const gln_tensor_t *x, gln_tensor_t *xp) {
    static const char *fn = "gln_moe_permute";
    GLN_TRY(move_check(fn, ctx, tokens, k, row_of));
    GLN_REQUIRE_NOT_NULL(fn, x);
    GLN_TRY(gln_moe_check_tensor(fn, "x", x, tokens, x->cols));
    GLN_TRY(gln_moe_check_tensor(fn, "xp", xp, tokens * k, x->cols));
    if (tokens == 0 || x->cols == 0) return GLN_STATUS_SUCCESS;
    float *tmp;
    GLN_TRY(gln_moe_scratch(fn, x->cols, &tmp));
    for (int64_t i = 0; i < tokens * k; i++) copy_row(x, i / k, xp, row_of[i], tmp);
    free(tmp);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_moe_permute_backward(gln_context_t *ctx, int64_t tokens, int32_t k,
                                      const int64_t *row_of, const gln_tensor_t *dxp, gln_tensor_t *dx) {
    static const char *fn = "gln_moe_permute_backward";
    GLN_TRY(move_check(fn, ctx, tokens, k, row_of));
    GLN_REQUIRE_NOT_NULL(fn, dxp);
    GLN_TRY(gln_moe_check_tensor(fn, "dxp", dxp, tokens * k, dxp->cols));
    GLN_TRY(gln_moe_check_tensor(fn, "dx", dx, tokens, dxp->cols));
    if (tokens == 0 || dxp->cols == 0) return GLN_STATUS_SUCCESS;
    float *acc;
    GLN_TRY(gln_moe_scratch(fn, dxp->cols, &acc));
    for (int64_t t = 0; t < tokens; t++) {
        memset(acc, 0, (size_t)dxp->cols * sizeof *acc);
        for (int32_t j = 0; j < k; j++) axpy_row(1.0f, dxp, row_of[t * k + j], acc);
        store_row(acc, dx, t);
    }
    free(acc);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_moe_unpermute(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                               const float *gates, const gln_tensor_t *yp, gln_tensor_t *y) {
    static const char *fn = "gln_moe_unpermute";
    GLN_TRY(move_check(fn, ctx, tokens, k, row_of));
    if (tokens > 0) GLN_REQUIRE_NOT_NULL(fn, gates);
    GLN_REQUIRE_NOT_NULL(fn, yp);
    GLN_TRY(gln_moe_check_tensor(fn, "yp", yp, tokens * k, yp->cols));
    GLN_TRY(gln_moe_check_tensor(fn, "y", y, tokens, yp->cols));
    if (tokens == 0 || yp->cols == 0) return GLN_STATUS_SUCCESS;
    float *acc;
    GLN_TRY(gln_moe_scratch(fn, yp->cols, &acc));
    for (int64_t t = 0; t < tokens; t++) {
        memset(acc, 0, (size_t)yp->cols * sizeof *acc);
        for (int32_t j = 0; j < k; j++) axpy_row(gates[t * k + j], yp, row_of[t * k + j], acc);
        store_row(acc, y, t);
    }
    free(acc);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_moe_unpermute_backward(gln_context_t *ctx, int64_t tokens, int32_t k,
                                        const int64_t *row_of, const float *gates,
                                        const gln_tensor_t *yp, const gln_tensor_t *dy,
                                        gln_tensor_t *dyp, float *dgates) {
    static const char *fn = "gln_moe_unpermute_backward";
    GLN_TRY(move_check(fn, ctx, tokens, k, row_of));
    GLN_REQUIRE_NOT_NULL(fn, yp);
    GLN_TRY(gln_moe_check_tensor(fn, "yp", yp, tokens * k, yp->cols));
    const int64_t h = yp->cols;
    GLN_TRY(gln_moe_check_tensor(fn, "dy", dy, tokens, h));
    GLN_TRY(gln_moe_check_tensor(fn, "dyp", dyp, tokens * k, h));
    if (tokens == 0) return GLN_STATUS_SUCCESS;
    GLN_REQUIRE_NOT_NULL(fn, gates);
    GLN_REQUIRE_NOT_NULL(fn, dgates);

    float *buf;
    GLN_TRY(gln_moe_scratch(fn, 2 * h, &buf));
    float *dyt = buf, *row = buf + h;
    for (int64_t t = 0; t < tokens; t++) {
        if (h > 0) /* dy has no data to address without features */
            gln_cpu_widen((const char *)dy->data + (size_t)(t * h) * gln_dtype_size(dy->dtype),
                          dy->dtype, (size_t)h, dyt);
        for (int32_t j = 0; j < k; j++) {
            const int64_t r = row_of[t * k + j];
            const float g = gates[t * k + j];
            float dot = 0.0f;
            for (int64_t c = 0; c < h; c++) {
                dot += dyt[c] * gln_cpu_load(yp->data, yp->dtype, (size_t)(r * h + c));
                row[c] = g * dyt[c];
            }
            dgates[t * k + j] = dot;
            if (h > 0) store_row(row, dyp, r);
        }
    }
    free(buf);
    return GLN_STATUS_SUCCESS;
}

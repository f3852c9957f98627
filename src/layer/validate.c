/* Boundary checks of gln_grouped_linear_forward / backward: everything is validated before any
 * work starts, so a rejected call writes nothing.  Messages name the call, the argument and the
 * valid range. */
#include <stdio.h>

#include "backend/api_check.h"
#include "common/checked.h"
#include "layer/layer.h"

static const char *FWD = "gln_grouped_linear_forward";
static const char *BWD = "gln_grouped_linear_backward";

/* A high-precision activation-like tensor [rows, cols] of `dtype` (rows < 0: any row count). */
static gln_status_t check_act(const char *fn, const char *name, const gln_tensor_t *t,
                              gln_dtype_t dtype, int64_t rows, int64_t cols, int allow_null_data) {
    GLN_REQUIRE_ARG(t->scaling == GLN_SCALING_NONE,
                    "%s: %s must be a high-precision tensor (scaling %d given, expected 0 = none)",
                    fn, name, (int)t->scaling);
    GLN_REQUIRE_ARG(t->dtype == dtype, "%s: %s->dtype %s must be the activation dtype %s", fn, name,
                    gln_dtype_name(t->dtype), gln_dtype_name(dtype));
    GLN_TRY(gln_check_shape(fn, name, t->rows, t->cols, NULL));
    GLN_REQUIRE_ARG(rows < 0 ? t->rows >= 0 : t->rows == rows,
                    "%s: %s->rows %lld must be %s%lld", fn, name, (long long)t->rows,
                    rows < 0 ? ">= " : "", (long long)(rows < 0 ? 0 : rows));
    GLN_REQUIRE_ARG(t->cols == cols, "%s: %s->cols %lld must be %lld", fn, name, (long long)t->cols,
                    (long long)cols);
    GLN_REQUIRE_ARG(allow_null_data || t->data != NULL || t->rows * t->cols == 0,
                    "%s: %s->data must not be NULL", fn, name);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_validate_splits(const char *fn, const gln_context_t *ctx, const char *what, gln_path_t path,
                                 int32_t n, const int64_t *splits, int64_t rows) {
    /* rows <= GLN_MAX_DIM (checked with x) and the running sum never passes rows: no overflow */
    int64_t sum = 0;
    for (int32_t i = 0; i < n; i++) {
        GLN_REQUIRE_ARG(splits[i] >= 0, "%s: %s[%d] = %lld must be >= 0", fn, what, (int)i,
                        (long long)splits[i]);
        GLN_REQUIRE_ARG(splits[i] <= rows, "%s: %s[%d] = %lld exceeds the %lld rows of x", fn, what,
                        (int)i, (long long)splits[i], (long long)rows);
        GLN_REQUIRE_ARG(splits[i] <= rows - sum, "%s: %s sum %lld (through [%d]) exceeds x->rows %lld",
                        fn, what, (long long)(sum + splits[i]), (int)i, (long long)rows);
        sum += splits[i];
    }
    /* each expert's rows are a GEMM dimension (m of fprop / dgrad, k of wgrad) */
    char name[64];
    for (int32_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s[%d]", what, (int)i);
        GLN_TRY(gln_arg_gemm_dim(fn, ctx, name, splits[i]));
    }
    if (path == GLN_PATH_SPLIT)
        GLN_REQUIRE_ARG(sum == rows, "%s: %s sum %lld must equal x->rows %lld on the split path", fn,
                        what, (long long)sum, (long long)rows);
    else
        GLN_REQUIRE_ARG(sum <= rows, "%s: %s sum %lld must be <= x->rows %lld on the grouped path",
                        fn, what, (long long)sum, (long long)rows);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_validate_forward(const gln_grouped_linear_t *L,
                                  const gln_grouped_linear_forward_args_t *a, int need_wgrad) {
    gln_dtype_t act = L->cfg.activation_dtype;
    GLN_REQUIRE_NOT_NULL(FWD, a->m_splits);
    GLN_REQUIRE_NOT_NULL(FWD, a->y);
    int64_t rows;
    if (a->x_quantized) { /* args->x is ignored */
        GLN_TRY(gln_validate_x_quantized(L, a, need_wgrad));
        rows = a->x_quantized->packed.rows;
        /* an x given beside it is not read, but its rows are the call's rows (the splits count
         * them): one that disagrees is a caller's mix-up, not something to ignore */
        GLN_REQUIRE_ARG(!a->x || a->x->rows == rows,
                        "%s: args->x->rows %lld must equal args->x_quantized->packed.rows %lld (the "
                        "call's rows, that m_splits count), or pass x = NULL", FWD,
                        (long long)a->x->rows, (long long)rows);
    } else {
        GLN_REQUIRE_NOT_NULL(FWD, a->x);
        GLN_TRY(check_act(FWD, "args->x", a->x, act, -1, L->kin, 0));
        rows = a->x->rows;
    }
    GLN_TRY(check_act(FWD, "args->y", a->y, act, rows, L->kout, 1));
    GLN_REQUIRE_ARG(a->microbatch >= GLN_MICROBATCH_UNSET && a->microbatch <= GLN_MICROBATCH_NEXT,
                    "%s: args->microbatch %d must be 0 (unset), 1 (first) or 2 (next)", FWD,
                    (int)a->microbatch);
    GLN_REQUIRE_ARG(a->splits_on_backend == 0 || a->splits_on_backend == 1,
                    "%s: args->splits_on_backend %d must be 0 or 1", FWD, a->splits_on_backend);
    GLN_REQUIRE_ARG(!(a->splits_on_backend && L->cfg.path == GLN_PATH_SPLIT),
                    "%s: args->splits_on_backend must be 0 on the split path (the host reads the "
                    "splits); use GLN_PATH_GROUPED for backend-resident splits", FWD);
    /* Backend-resident splits are host-readable on the CPU backend only; on CUDA the grouped
     * kernels check them on the device. */
    if (!a->splits_on_backend || L->ctx->kind == GLN_BACKEND_CPU)
        GLN_TRY(gln_validate_splits(FWD, L->ctx, "args->m_splits", L->cfg.path, L->n, a->m_splits, rows));
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_validate_backward(const gln_grouped_linear_saved_t *s, const gln_tensor_t *dy,
                                   const gln_tensor_t *dx) {
    const gln_grouped_linear_t *L = s->layer;
    gln_dtype_t act = L->cfg.activation_dtype;
    GLN_REQUIRE(!s->done, GLN_STATUS_INVALID_STATE,
                "%s: backward already ran on this saved context (one backward per forward)", BWD);
    GLN_REQUIRE_NOT_NULL(BWD, dy);
    GLN_TRY(check_act(BWD, "dy", dy, act, s->rows, L->kout, 0));
    if (!dx) return GLN_STATUS_SUCCESS;
    GLN_REQUIRE_ARG(s->need_dgrad,
                    "%s: dx must be NULL: the forward was run with args->input_requires_grad = 0",
                    BWD);
    return check_act(BWD, "dx", dx, act, s->rows, L->kin, 1);
}

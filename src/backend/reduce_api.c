/* Public reduction entry points (dbias, amax, cast): validate, then dispatch through ctx->ops. */
#include <stdio.h>

#include "backend/api_check.h"
#include "backend/backend.h"
#include "backend/context.h"
#include "backend/ops.h"
#include "common/error.h"

gln_status_t gln_grouped_dbias(gln_context_t *ctx, const gln_grouped_tensor_t *dy, gln_tensor_t *dbias,
                               int accumulate) {
    static const char *fn = "gln_grouped_dbias";
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    GLN_REQUIRE_NOT_NULL(fn, dbias);
    int64_t sum;
    GLN_TRY(gln_arg_grouped(fn, "dy", dy, dy ? gln_arg_splits_readable(ctx, dy) : 0, &sum));
    GLN_TRY(gln_arg_hp_tensor(fn, "dy->packed", &dy->packed));
    for (int32_t i = 0; i < dy->num; i++) {
        char name[40];
        snprintf(name, sizeof name, "dbias[%d]", (int)i);
        GLN_TRY(gln_arg_bias(fn, name, &dbias[i], dy->packed.cols));
    }
    return gln_op_grouped_dbias(ctx, dy, dbias, accumulate);
}

static gln_status_t amax_call(const char *fn, gln_context_t *ctx, const gln_tensor_t *x, int nan_propagate,
                              float *amax) {
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    GLN_REQUIRE_NOT_NULL(fn, amax);
    GLN_TRY(gln_arg_hp_tensor(fn, "x", x));
    GLN_REQUIRE_ARG(nan_propagate == 0 || nan_propagate == 1,
                    "%s: nan_propagate %d must be 0 (ignore NaN, TE's rule) or 1 (propagate)", fn, nan_propagate);
    if (!ctx->ops->amax) return gln_backend_missing(ctx, fn, "amax");
    return ctx->ops->amax(ctx, x, nan_propagate, amax);
}

gln_status_t gln_amax(gln_context_t *ctx, const gln_tensor_t *x, float *amax) {
    return amax_call("gln_amax", ctx, x, 0, amax);
}

gln_status_t gln_amax_ex(gln_context_t *ctx, const gln_tensor_t *x, int nan_propagate, float *amax) {
    return amax_call("gln_amax_ex", ctx, x, nan_propagate, amax);
}

gln_status_t gln_cast(gln_context_t *ctx, const gln_tensor_t *in, gln_tensor_t *out) {
    static const char *fn = "gln_cast";
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    GLN_TRY(gln_arg_hp_tensor(fn, "in", in));
    GLN_TRY(gln_arg_hp_tensor(fn, "out", out));
    GLN_REQUIRE_ARG(out->rows == in->rows && out->cols == in->cols,
                    "%s: out is [%lld, %lld] but in is [%lld, %lld] (shapes must match)", fn,
                    (long long)out->rows, (long long)out->cols, (long long)in->rows,
                    (long long)in->cols);
    return gln_op_cast(ctx, in, out);
}

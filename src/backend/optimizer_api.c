/* The public optimizer step (grouplin.h, "Optimizer"): validate, then dispatch through ops.h. */
#include "backend/context.h"
#include "backend/ops.h"
#include "common/error.h"
#include "numerics/optimizer_rule.h"

gln_status_t gln_optimizer_step(gln_context_t *ctx, const gln_optimizer_config_t *cfg, int64_t step, float *master,
                                const float *grad, float *exp_avg, float *exp_avg_sq, int64_t n, void *working,
                                gln_dtype_t working_dtype) {
    static const char *fn = "gln_optimizer_step";
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    gln_optimizer_params_t p;
    GLN_TRY(gln_optimizer_resolve(fn, cfg, step, &p));
    GLN_REQUIRE_ARG(n >= 0 && n <= GLN_MAX_ELEMS, "%s: n %lld must be in [0, GLN_MAX_ELEMS = 2^56]", fn,
                    (long long)n);
    if (working)
        GLN_REQUIRE_ARG(working_dtype == GLN_DTYPE_FP32 || working_dtype == GLN_DTYPE_BF16 ||
                            working_dtype == GLN_DTYPE_FP16,
                        "%s: working_dtype %s must be fp32, bf16 or fp16", fn, gln_dtype_name(working_dtype));
    if (n == 0) return GLN_STATUS_SUCCESS;
    GLN_REQUIRE_NOT_NULL(fn, master);
    GLN_REQUIRE_NOT_NULL(fn, grad);
    GLN_TRY(gln_optimizer_check_moments(fn, &p, exp_avg, exp_avg_sq));
    GLN_REQUIRE_ARG(!working || working_dtype == GLN_DTYPE_FP32 || working != (void *)master,
                    "%s: working may be master only for an fp32 working_dtype", fn);
    return gln_op_optimizer_step(ctx, fn, &p, master, grad, exp_avg, exp_avg_sq, n, working, working_dtype, 0, NULL,
                                 0, NULL);
}

/* The optimizer's hyper-parameter checks and per-step constants (optimizer_rule.h). */
#include "numerics/optimizer_rule.h"

#include <math.h>

#include "common/error.h"

/* A finite x in [lo, hi) (hi_open) or [lo, hi]. */
static int in_range(float x, float lo, float hi, int hi_open) {
    if (!gln_f32_isfinite(x) || x < lo) return 0;
    return hi_open ? x < hi : x <= hi;
}

static gln_status_t check_config(const char *fn, const gln_optimizer_config_t *cfg) {
    GLN_REQUIRE_ARG(cfg->size == sizeof *cfg,
                    "%s: cfg->size %zu is not a known version (%zu; start from GLN_OPTIMIZER_CONFIG_INIT)", fn,
                    cfg->size, sizeof *cfg);
    GLN_REQUIRE_ARG(cfg->kind == GLN_OPTIMIZER_ADAM || cfg->kind == GLN_OPTIMIZER_SGD,
                    "%s: cfg->kind %d must be GLN_OPTIMIZER_ADAM (0) or GLN_OPTIMIZER_SGD (1)", fn, (int)cfg->kind);
    GLN_REQUIRE_ARG(in_range(cfg->lr, 0.0f, INFINITY, 1), "%s: cfg->lr %g must be finite and >= 0", fn,
                    (double)cfg->lr);
    GLN_REQUIRE_ARG(in_range(cfg->weight_decay, 0.0f, INFINITY, 1),
                    "%s: cfg->weight_decay %g must be finite and >= 0", fn, (double)cfg->weight_decay);
    if (cfg->kind == GLN_OPTIMIZER_SGD) {
        GLN_REQUIRE_ARG(in_range(cfg->momentum, 0.0f, 1.0f, 0), "%s: cfg->momentum %g must be in [0, 1]", fn,
                        (double)cfg->momentum);
        return GLN_STATUS_SUCCESS;
    }
    GLN_REQUIRE_ARG(in_range(cfg->beta1, 0.0f, 1.0f, 1), "%s: cfg->beta1 %g must be in [0, 1)", fn,
                    (double)cfg->beta1);
    GLN_REQUIRE_ARG(in_range(cfg->beta2, 0.0f, 1.0f, 1), "%s: cfg->beta2 %g must be in [0, 1)", fn,
                    (double)cfg->beta2);
    GLN_REQUIRE_ARG(in_range(cfg->eps, 0.0f, INFINITY, 1) && cfg->eps > 0.0f,
                    "%s: cfg->eps %g must be finite and > 0", fn, (double)cfg->eps);
    GLN_REQUIRE_ARG(cfg->adam_w_mode == 0 || cfg->adam_w_mode == 1,
                    "%s: cfg->adam_w_mode %d must be 0 (L2) or 1 (decoupled weight decay, AdamW)", fn,
                    cfg->adam_w_mode);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_optimizer_resolve(const char *fn, const gln_optimizer_config_t *cfg, int64_t step,
                                   gln_optimizer_params_t *out) {
    GLN_REQUIRE_NOT_NULL(fn, cfg);
    GLN_TRY(check_config(fn, cfg));
    GLN_REQUIRE_ARG(step >= 1, "%s: step %lld must be >= 1 (the 1-based count of steps, for the bias corrections)",
                    fn, (long long)step);
    gln_optimizer_params_t p = {0};
    p.kind = cfg->kind;
    p.adam_w_mode = cfg->adam_w_mode;
    p.first_step = step == 1;
    p.lr = cfg->lr;
    p.weight_decay = cfg->weight_decay;
    p.momentum = cfg->kind == GLN_OPTIMIZER_SGD ? cfg->momentum : 0.0f;
    if (cfg->kind == GLN_OPTIMIZER_ADAM) {
        p.beta1 = cfg->beta1;
        p.beta2 = cfg->beta2;
        p.eps = cfg->eps;
        p.one_minus_beta1 = 1.0f - cfg->beta1;
        p.one_minus_beta2 = 1.0f - cfg->beta2;
        /* TE's host code: 1 - std::pow(beta, step) in double, stored as float.  beta < 1 keeps
         * them > 0 for any step (beta^step underflows to 0: bc = 1). */
        p.bc1 = (float)(1.0 - pow((double)cfg->beta1, (double)step));
        p.bc2 = (float)(1.0 - pow((double)cfg->beta2, (double)step));
        p.bc_backend = cfg->bias_corrections;
    }
    *out = p;
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_optimizer_check_moments(const char *fn, const gln_optimizer_params_t *p, const float *exp_avg,
                                         const float *exp_avg_sq) {
    if (p->kind == GLN_OPTIMIZER_ADAM) {
        GLN_REQUIRE_ARG(exp_avg && exp_avg_sq, "%s: exp_avg and exp_avg_sq must not be NULL for Adam", fn);
    } else if (p->momentum != 0.0f) {
        GLN_REQUIRE_ARG(exp_avg != NULL, "%s: exp_avg (the momentum buffer) must not be NULL for SGD with momentum",
                        fn);
    }
    return GLN_STATUS_SUCCESS;
}

/* Finite-difference gradient check of the grouped linear layer.
 *
 * A tiny FP32 layer (recipe NONE, N = 3, 4 -> 3, splits {2, 0, 3}, bias) and the loss
 * L = Σ y·g for a fixed random g.  The backward's dx, dW, db (dy = g) are compared with central
 * differences (L(θ+ε) − L(θ−ε)) / 2ε taken in float64 over FP32 forwards.
 *
 * Why the tolerance can be tiny: x, W, b are multiples of 1/8 in [-2, 2], g multiples of 1/4,
 * ε = 2^-6.  Every product and sum in the forward then has fewer than 16 significant bits, so
 * the FP32 forward is exact, L is exact in float64, and because L is linear in each single
 * parameter the central difference equals the derivative exactly.  The analytic gradients
 * (FP32 GEMMs of the same short dyadic values) are exact as well.  GRAD_RTOL / GRAD_ATOL only
 * absorb a last-bit FP32 difference (2^-24 relative on values below 2^6); any real error —
 * a wrong expert, a transposed operand, a missing bias row — is off by O(1). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define N 3
#define KIN 4
#define KOUT 3
#define M 5
#define EPS 0.015625 /* 2^-6 */
#define GRAD_RTOL 1e-6
#define GRAD_ATOL 1e-6

static const int64_t SPLITS[N] = {2, 0, 3};

typedef struct gc {
    gln_context_t *ctx;
    gln_grouped_linear_t *layer;
    float x[M * KIN], g[M * KOUT], y[M * KOUT];
    float *w[N], *b[N];
} gc_t;

static float dyadic(gln_rng_t *r, int denom, int range) {
    return (float)gln_rng_int(r, -range * denom, range * denom) / (float)denom;
}

static double loss(gc_t *c) {
    gln_tensor_t xt = gln_tensor_make(GLN_DTYPE_FP32, M, KIN, c->x);
    gln_tensor_t yt = gln_tensor_make(GLN_DTYPE_FP32, M, KOUT, c->y);
    gln_grouped_linear_forward_args_t fa = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    fa.x = &xt;
    fa.m_splits = SPLITS;
    fa.y = &yt;
    gln_poison(c->y, GLN_DTYPE_FP32, M * KOUT);
    CHECK_OK(gln_grouped_linear_weights_updated(c->layer));
    CHECK_OK(gln_grouped_linear_forward(c->layer, &fa, NULL));
    double l = 0;
    for (int j = 0; j < M * KOUT; j++) l += (double)c->y[j] * (double)c->g[j];
    return l;
}

/* Central difference of the loss with respect to *p. */
static double central_diff(gc_t *c, float *p) {
    float saved = *p;
    *p = saved + (float)EPS;
    double lp = loss(c);
    *p = saved - (float)EPS;
    double lm = loss(c);
    *p = saved;
    return (lp - lm) / (2 * EPS);
}

static void check_one(const char *what, int i, double got, double fd) {
    double tol = GRAD_ATOL + GRAD_RTOL * fabs(fd);
    CHECK_MSG(fabs(got - fd) <= tol, "%s[%d]: analytic %.9g, central difference %.9g", what, i, got,
              fd);
}

static void run_gradcheck(gln_path_t path) {
    gc_t c;
    memset(&c, 0, sizeof c);
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    CHECK_OK(gln_context_create(&o, &c.ctx));
    if (!c.ctx) return;
    gln_rng_t r = gln_rng_seed(2024 + path);
    for (int j = 0; j < M * KIN; j++) c.x[j] = dyadic(&r, 8, 2);
    for (int j = 0; j < M * KOUT; j++) c.g[j] = dyadic(&r, 4, 2);
    for (int e = 0; e < N; e++) {
        c.w[e] = gln_test_alloc(KOUT * KIN * sizeof(float));
        c.b[e] = gln_test_alloc(KOUT * sizeof(float));
        for (int j = 0; j < KOUT * KIN; j++) c.w[e][j] = dyadic(&r, 8, 2);
        for (int j = 0; j < KOUT; j++) c.b[e][j] = dyadic(&r, 8, 2);
    }
    gln_grouped_linear_config_t cfg = GLN_GROUPED_LINEAR_CONFIG_INIT;
    cfg.num_experts = N;
    cfg.in_features = KIN;
    cfg.out_features = KOUT;
    cfg.bias = 1;
    cfg.param_dtype = GLN_DTYPE_FP32;
    cfg.activation_dtype = GLN_DTYPE_FP32;
    cfg.path = path;
    cfg.params.weights = (void *const *)c.w;
    cfg.params.biases = (void *const *)c.b;
    CHECK_OK(gln_grouped_linear_create(c.ctx, &cfg, &c.layer));
    if (!c.layer) goto out;

    /* Analytic gradients: dy = g. */
    float dx[M * KIN];
    gln_tensor_t xt = gln_tensor_make(GLN_DTYPE_FP32, M, KIN, c.x);
    gln_tensor_t yt = gln_tensor_make(GLN_DTYPE_FP32, M, KOUT, c.y);
    gln_tensor_t gt = gln_tensor_make(GLN_DTYPE_FP32, M, KOUT, c.g);
    gln_tensor_t dxt = gln_tensor_make(GLN_DTYPE_FP32, M, KIN, dx);
    gln_grouped_linear_forward_args_t fa = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    fa.x = &xt;
    fa.m_splits = SPLITS;
    fa.y = &yt;
    gln_grouped_linear_saved_t *s = NULL;
    gln_poison(dx, GLN_DTYPE_FP32, M * KIN);
    CHECK_OK(gln_grouped_linear_zero_grad(c.layer));
    CHECK_OK(gln_grouped_linear_forward(c.layer, &fa, &s));
    if (!s) goto out;
    CHECK_OK(gln_grouped_linear_backward(s, &gt, &dxt));
    CHECK_OK(gln_grouped_linear_saved_release(s));

    for (int j = 0; j < M * KIN; j++) check_one("dx", j, dx[j], central_diff(&c, &c.x[j]));
    for (int e = 0; e < N; e++) {
        void *wg = NULL, *bg = NULL;
        CHECK_OK(gln_grouped_linear_grads(c.layer, e, &wg, &bg));
        CHECK(wg != NULL && bg != NULL);
        if (!wg || !bg) continue;
        char what[32];
        snprintf(what, sizeof what, "dW[%d]", e);
        for (int j = 0; j < KOUT * KIN; j++)
            check_one(what, j, ((float *)wg)[j], central_diff(&c, &c.w[e][j]));
        snprintf(what, sizeof what, "db[%d]", e);
        for (int j = 0; j < KOUT; j++)
            check_one(what, j, ((float *)bg)[j], central_diff(&c, &c.b[e][j]));
    }
out:
    if (c.layer) CHECK_OK(gln_grouped_linear_destroy(c.layer));
    for (int e = 0; e < N; e++) {
        if (c.w[e]) CHECK(gln_guard_ok(c.w[e]) && gln_guard_ok(c.b[e]));
        gln_test_free(c.w[e]);
        gln_test_free(c.b[e]);
    }
    CHECK_OK(gln_context_destroy(c.ctx));
}

static void test_gradcheck_split(void) { run_gradcheck(GLN_PATH_SPLIT); }
static void test_gradcheck_grouped(void) { run_gradcheck(GLN_PATH_GROUPED); }

GLN_TEST_MAIN(GLN_CASE(test_gradcheck_split), GLN_CASE(test_gradcheck_grouped))

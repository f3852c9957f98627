/* The microbatch fixture (layer_fixture.h). */
#include "layer_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const int64_t gln_fix_splits[GLN_FIX_N] = {7, 0, 12};
gln_path_t gln_fix_path = GLN_PATH_SPLIT;
void gln_fix_batch_make(gln_fix_batch_t *b, gln_dtype_t dt, double xs, double dys, uint64_t seed) {
    size_t es = gln_dtype_size(dt);
    b->dt = dt;
    b->x = gln_test_alloc(GLN_FIX_M * GLN_FIX_KIN * es);
    b->dy = gln_test_alloc(GLN_FIX_M * GLN_FIX_KOUT * es);
    gln_layer_ref_fill_normal(b->x, dt, GLN_FIX_M * GLN_FIX_KIN, xs, seed);
    gln_layer_ref_fill_normal(b->dy, dt, GLN_FIX_M * GLN_FIX_KOUT, dys, seed + 7777);
}

void gln_fix_batch_free(gln_fix_batch_t *b) {
    gln_test_free(b->x);
    gln_test_free(b->dy);
}

void gln_fix_fill_weights(gln_fix_t *f, double stddev, uint64_t seed) {
    for (int e = 0; e < GLN_FIX_N; e++)
        gln_layer_ref_fill_normal(f->w[e], f->dt, GLN_FIX_WS, stddev * (1 + e), seed + e);
}

/* Caller parameters and the config of a layer: N=3, splits {7, 0, 12}, 40 -> 24 (no layer yet). */
void gln_fix_setup(gln_fix_t *f, gln_recipe_t recipe, gln_dtype_t dt, int fuse, int delay, int bias) {
    gln_grouped_linear_config_t init = GLN_GROUPED_LINEAR_CONFIG_INIT;
    memset(f, 0, sizeof *f);
    f->cfg = init;
    f->dt = dt;
    size_t es = gln_dtype_size(dt);
    for (int e = 0; e < GLN_FIX_N; e++) {
        f->w[e] = gln_test_alloc(GLN_FIX_WS * es);
        f->b[e] = gln_test_alloc(GLN_FIX_KOUT * es);
        f->mg[e] = gln_test_alloc(GLN_FIX_WS * sizeof(float));
        gln_rng_t r = gln_rng_seed(50 + e);
        for (int j = 0; j < GLN_FIX_KOUT; j++)
            gln_store(f->b[e], dt, j, gln_round_to(0.1 * gln_rng_normal(&r), GLN_DTYPE_BF16));
    }
    gln_fix_fill_weights(f, 0.05, 10);
    f->cfg.num_experts = GLN_FIX_N;
    f->cfg.in_features = GLN_FIX_KIN;
    f->cfg.out_features = GLN_FIX_KOUT;
    f->cfg.bias = bias;
    f->cfg.param_dtype = dt;
    f->cfg.activation_dtype = dt;
    f->cfg.recipe = recipe;
    f->cfg.path = gln_fix_path;
    f->cfg.fuse_wgrad_accumulation = fuse;
    f->cfg.delay_wgrad_compute = delay;
    f->cfg.params.weights = f->w;
    if (bias) f->cfg.params.biases = f->b;
    if (fuse) f->cfg.params.main_grads = f->mg;
}

/* The layer of f->cfg (after fix_setup and any changes to the config). */
int gln_fix_create(gln_fix_t *f) {
    gln_status_t st = gln_grouped_linear_create(gln_test_cpu_context(), &f->cfg, &f->layer);
    CHECK_OK(st);
    return st == GLN_STATUS_SUCCESS;
}

int gln_fix_init(gln_fix_t *f, gln_recipe_t recipe, gln_dtype_t dt, int fuse, int delay, int bias) {
    gln_fix_setup(f, recipe, dt, fuse, delay, bias);
    return gln_fix_create(f);
}

/* An FP8_DELAYED bf16 layer with the given delayed-scaling settings. */
int gln_fix_init_delayed(gln_fix_t *f, int bias, int history_len, int margin, int always_roll, int nan_propagate) {
    gln_fix_setup(f, GLN_RECIPE_FP8_DELAYED, GLN_DTYPE_BF16, 0, 0, bias);
    f->cfg.amax_history_len = history_len;
    f->cfg.margin = margin;
    f->cfg.amax_algo = GLN_AMAX_ALGO_MAX;
    f->cfg.always_roll = always_roll;
    f->cfg.amax_nan_propagate = nan_propagate;
    return gln_fix_create(f);
}

void gln_fix_free(gln_fix_t *f) {
    if (f->layer) CHECK_OK(gln_grouped_linear_destroy(f->layer));
    for (int e = 0; e < GLN_FIX_N; e++) {
        CHECK_MSG(gln_guard_ok(f->w[e]) && gln_guard_ok(f->b[e]) && gln_guard_ok(f->mg[e]),
                  "guard after expert %d parameters overwritten", e);
        gln_test_free(f->w[e]);
        gln_test_free(f->b[e]);
        gln_test_free(f->mg[e]);
    }
}

void gln_fix_mg_fill(gln_fix_t *f, double value_or_nan, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    for (int e = 0; e < GLN_FIX_N; e++)
        for (int j = 0; j < GLN_FIX_WS; j++)
            f->mg[e][j] = isnan(value_or_nan) ? NAN
                          : value_or_nan != 0 ? (float)(value_or_nan * gln_rng_normal(&r))
                                              : 0.0f;
}

gln_status_t gln_fix_fwd(gln_fix_t *f, const gln_fix_batch_t *b, gln_microbatch_t mb, void *y,
                        gln_grouped_linear_saved_t **saved) {
    gln_tensor_t xt = gln_tensor_make(f->dt, GLN_FIX_M, GLN_FIX_KIN, b->x);
    gln_tensor_t yt = gln_tensor_make(f->dt, GLN_FIX_M, GLN_FIX_KOUT, y);
    gln_poison(y, f->dt, GLN_FIX_M * GLN_FIX_KOUT);
    gln_grouped_linear_forward_args_t fa = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    fa.x = &xt;
    fa.m_splits = gln_fix_splits;
    fa.y = &yt;
    fa.microbatch = mb;
    return gln_grouped_linear_forward(f->layer, &fa, saved);
}

gln_status_t gln_fix_bwd(gln_fix_t *f, gln_grouped_linear_saved_t *s, const gln_fix_batch_t *b, void *dx) {
    gln_tensor_t dyt = gln_tensor_make(f->dt, GLN_FIX_M, GLN_FIX_KOUT, b->dy);
    gln_tensor_t dxt = gln_tensor_make(f->dt, GLN_FIX_M, GLN_FIX_KIN, dx);
    gln_poison(dx, f->dt, GLN_FIX_M * GLN_FIX_KIN);
    return gln_grouped_linear_backward(s, &dyt, &dxt);
}

/* Forward + backward + release of one microbatch. */
int gln_fix_step(gln_fix_t *f, const gln_fix_batch_t *b, gln_microbatch_t mb, void *y, void *dx) {
    gln_grouped_linear_saved_t *s = NULL;
    gln_status_t st = gln_fix_fwd(f, b, mb, y, &s);
    CHECK_OK(st);
    if (st != GLN_STATUS_SUCCESS) return 0;
    st = gln_fix_bwd(f, s, b, dx);
    CHECK_OK(st);
    CHECK_OK(gln_grouped_linear_saved_release(s));
    return st == GLN_STATUS_SUCCESS;
}

/* Reference for the fixture's current weights (spec: NULL = from the config, scales 1). */
int gln_fix_ref(gln_fix_t *f, const gln_fix_batch_t *b, const gln_layer_ref_spec_t *spec,
                   gln_layer_ref_out_t *o) {
    gln_layer_ref_spec_t local;
    if (!spec) {
        gln_layer_ref_spec_init(&local, &f->cfg);
        spec = &local;
    }
    const void *wl[GLN_FIX_N], *bl[GLN_FIX_N];
    for (int e = 0; e < GLN_FIX_N; e++) {
        wl[e] = f->w[e];
        bl[e] = f->b[e];
    }
    gln_layer_ref_inputs_t in = {GLN_FIX_N, GLN_FIX_KIN, GLN_FIX_KOUT, gln_fix_splits, f->dt, b->x, b->dy, f->dt, wl,
                                 NULL, f->dt, f->cfg.bias ? bl : NULL};
    gln_status_t st = gln_layer_ref_run(gln_test_cpu_context(), spec, &in, o);
    CHECK_OK(st);
    return st == GLN_STATUS_SUCCESS;
}

/* dst += src with the accumulation of the bounds: e = e1 + e2 + (M + 3)·2^-24·(|v1| + |v2|)
 * (the FP32 add of the second microbatch into the first, conservatively). */
void gln_fix_acc_into(double *dv, double *de, const double *sv, const double *se, size_t n) {
    for (size_t j = 0; j < n; j++) {
        de[j] += se[j] + (GLN_FIX_M + GLN_REF_EXTRA_OPS) * GLN_REF_U_FP32 * (fabs(dv[j]) + fabs(sv[j]));
        dv[j] += sv[j];
    }
}

void gln_fix_check_mg(gln_fix_t *f, const double *v, const double *err, const char *tag) {
    char what[160];
    for (int e = 0; e < GLN_FIX_N; e++) {
        snprintf(what, sizeof what, "%s main_grad[%d]", tag, e);
        gln_layer_ref_check(what, f->mg[e], GLN_DTYPE_FP32, v + e * GLN_FIX_WS, err + e * GLN_FIX_WS, GLN_FIX_WS);
    }
}

void gln_fix_check_grads(gln_fix_t *f, const double *dw, const double *dwe, const double *db,
                        const double *dbe, const char *tag) {
    char what[160];
    for (int e = 0; e < GLN_FIX_N; e++) {
        void *wg = NULL, *bg = NULL;
        CHECK_OK(gln_grouped_linear_grads(f->layer, e, &wg, &bg));
        snprintf(what, sizeof what, "%s dW[%d]", tag, e);
        CHECK_MSG(wg != NULL, "%s is NULL", what);
        if (wg) gln_layer_ref_check(what, wg, f->dt, dw + e * GLN_FIX_WS, dwe + e * GLN_FIX_WS, GLN_FIX_WS);
        if (!f->cfg.bias) continue;
        snprintf(what, sizeof what, "%s db[%d]", tag, e);
        CHECK_MSG(bg != NULL, "%s is NULL", what);
        if (bg) gln_layer_ref_check(what, bg, f->dt, db + e * GLN_FIX_KOUT, dbe + e * GLN_FIX_KOUT, GLN_FIX_KOUT);
    }
}

void gln_fix_fwd_infer(gln_fix_t *f, const gln_fix_batch_t *b, gln_microbatch_t mb, void *y) {
    CHECK_OK(gln_fix_fwd(f, b, mb, y, NULL));
}

void gln_fix_check_y_ref(gln_fix_t *f, const gln_fix_batch_t *b, const void *y, const char *tag) {
    gln_layer_ref_out_t r;
    if (!gln_fix_ref(f, b, NULL, &r)) return;
    gln_layer_ref_check(tag, y, f->dt, r.y, r.y_err, GLN_FIX_M * GLN_FIX_KOUT);
    gln_layer_ref_out_free(&r);
}
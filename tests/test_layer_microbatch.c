/* Microbatch semantics of the grouped linear layer (te-grouped-linear.md §6–§8, DESIGN §6):
 * main_grad overwrite / accumulate, gradient accumulation and zero_grad, the delayed-wgrad
 * FIFO, the quantized-weight cache keyed by microbatch flag and weight version, the evolution
 * of the delayed-scaling state, and two forwards in flight with backwards in reverse order.
 *
 * Values are checked against the float64 reference of tests/harness/layer_ref.c with its
 * FP32-accumulation bound (see layer_ref.h); state and cache checks are bitwise. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layer_ref.h"

#define N 3
#define KIN 40
#define KOUT 24
#define M 19
#define WS (KOUT * KIN)
static const int64_t SPLITS[N] = {7, 0, 12};

/* Every case runs on both paths (the fixture reads this). */
static gln_path_t g_path = GLN_PATH_SPLIT;


/* ---------------------------------------------------------------- fixture */

typedef struct fix {
    gln_grouped_linear_config_t cfg;
    gln_dtype_t dt;
    void *w[N], *b[N];
    float *mg[N];
    gln_grouped_linear_t *layer;
} fix_t;

typedef struct batch {
    gln_dtype_t dt;
    void *x, *dy;
} batch_t;

static void batch_make(batch_t *b, gln_dtype_t dt, double xs, double dys, uint64_t seed) {
    size_t es = gln_dtype_size(dt);
    b->dt = dt;
    b->x = gln_test_alloc(M * KIN * es);
    b->dy = gln_test_alloc(M * KOUT * es);
    gln_layer_ref_fill_normal(b->x, dt, M * KIN, xs, seed);
    gln_layer_ref_fill_normal(b->dy, dt, M * KOUT, dys, seed + 7777);
}

static void batch_free(batch_t *b) {
    gln_test_free(b->x);
    gln_test_free(b->dy);
}

static void fill_weights(fix_t *f, double stddev, uint64_t seed) {
    for (int e = 0; e < N; e++) gln_layer_ref_fill_normal(f->w[e], f->dt, WS, stddev * (1 + e), seed + e);
}

/* Caller parameters and the config of a layer: N=3, splits {7, 0, 12}, 40 -> 24 (no layer yet). */
static void fix_setup(fix_t *f, gln_recipe_t recipe, gln_dtype_t dt, int fuse, int delay, int bias) {
    gln_grouped_linear_config_t init = GLN_GROUPED_LINEAR_CONFIG_INIT;
    memset(f, 0, sizeof *f);
    f->cfg = init;
    f->dt = dt;
    size_t es = gln_dtype_size(dt);
    for (int e = 0; e < N; e++) {
        f->w[e] = gln_test_alloc(WS * es);
        f->b[e] = gln_test_alloc(KOUT * es);
        f->mg[e] = gln_test_alloc(WS * sizeof(float));
        gln_rng_t r = gln_rng_seed(50 + e);
        for (int j = 0; j < KOUT; j++)
            gln_store(f->b[e], dt, j, gln_round_to(0.1 * gln_rng_normal(&r), GLN_DTYPE_BF16));
    }
    fill_weights(f, 0.05, 10);
    f->cfg.num_experts = N;
    f->cfg.in_features = KIN;
    f->cfg.out_features = KOUT;
    f->cfg.bias = bias;
    f->cfg.param_dtype = dt;
    f->cfg.activation_dtype = dt;
    f->cfg.recipe = recipe;
    f->cfg.path = g_path;
    f->cfg.fuse_wgrad_accumulation = fuse;
    f->cfg.delay_wgrad_compute = delay;
    f->cfg.params.weights = f->w;
    if (bias) f->cfg.params.biases = f->b;
    if (fuse) f->cfg.params.main_grads = f->mg;
}

/* The layer of f->cfg (after fix_setup and any changes to the config). */
static int fix_create(fix_t *f) {
    gln_status_t st = gln_grouped_linear_create(gln_test_cpu_context(), &f->cfg, &f->layer);
    CHECK_OK(st);
    return st == GLN_STATUS_SUCCESS;
}

static int fix_init(fix_t *f, gln_recipe_t recipe, gln_dtype_t dt, int fuse, int delay, int bias) {
    fix_setup(f, recipe, dt, fuse, delay, bias);
    return fix_create(f);
}

/* An FP8_DELAYED bf16 layer with the given delayed-scaling settings. */
static int fix_init_delayed(fix_t *f, int bias, int history_len, int margin, int always_roll, int nan_propagate) {
    fix_setup(f, GLN_RECIPE_FP8_DELAYED, GLN_DTYPE_BF16, 0, 0, bias);
    f->cfg.amax_history_len = history_len;
    f->cfg.margin = margin;
    f->cfg.amax_algo = GLN_AMAX_ALGO_MAX;
    f->cfg.always_roll = always_roll;
    f->cfg.amax_nan_propagate = nan_propagate;
    return fix_create(f);
}

static void fix_free(fix_t *f) {
    if (f->layer) CHECK_OK(gln_grouped_linear_destroy(f->layer));
    for (int e = 0; e < N; e++) {
        CHECK_MSG(gln_guard_ok(f->w[e]) && gln_guard_ok(f->b[e]) && gln_guard_ok(f->mg[e]),
                  "guard after expert %d parameters overwritten", e);
        gln_test_free(f->w[e]);
        gln_test_free(f->b[e]);
        gln_test_free(f->mg[e]);
    }
}

static void mg_fill(fix_t *f, double value_or_nan, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    for (int e = 0; e < N; e++)
        for (int j = 0; j < WS; j++)
            f->mg[e][j] = isnan(value_or_nan) ? NAN
                          : value_or_nan != 0 ? (float)(value_or_nan * gln_rng_normal(&r))
                                              : 0.0f;
}

static gln_status_t fwd(fix_t *f, const batch_t *b, gln_microbatch_t mb, void *y,
                        gln_grouped_linear_saved_t **saved) {
    gln_tensor_t xt = gln_tensor_make(f->dt, M, KIN, b->x);
    gln_tensor_t yt = gln_tensor_make(f->dt, M, KOUT, y);
    gln_poison(y, f->dt, M * KOUT);
    gln_grouped_linear_forward_args_t fa = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    fa.x = &xt;
    fa.m_splits = SPLITS;
    fa.y = &yt;
    fa.microbatch = mb;
    return gln_grouped_linear_forward(f->layer, &fa, saved);
}

static gln_status_t bwd(fix_t *f, gln_grouped_linear_saved_t *s, const batch_t *b, void *dx) {
    gln_tensor_t dyt = gln_tensor_make(f->dt, M, KOUT, b->dy);
    gln_tensor_t dxt = gln_tensor_make(f->dt, M, KIN, dx);
    gln_poison(dx, f->dt, M * KIN);
    return gln_grouped_linear_backward(s, &dyt, &dxt);
}

/* Forward + backward + release of one microbatch. */
static int step(fix_t *f, const batch_t *b, gln_microbatch_t mb, void *y, void *dx) {
    gln_grouped_linear_saved_t *s = NULL;
    gln_status_t st = fwd(f, b, mb, y, &s);
    CHECK_OK(st);
    if (st != GLN_STATUS_SUCCESS) return 0;
    st = bwd(f, s, b, dx);
    CHECK_OK(st);
    CHECK_OK(gln_grouped_linear_saved_release(s));
    return st == GLN_STATUS_SUCCESS;
}

/* Reference for the fixture's current weights (spec: NULL = from the config, scales 1). */
static int fix_ref(fix_t *f, const batch_t *b, const gln_layer_ref_spec_t *spec,
                   gln_layer_ref_out_t *o) {
    gln_layer_ref_spec_t local;
    if (!spec) {
        gln_layer_ref_spec_init(&local, &f->cfg);
        spec = &local;
    }
    const void *wl[N], *bl[N];
    for (int e = 0; e < N; e++) {
        wl[e] = f->w[e];
        bl[e] = f->b[e];
    }
    gln_layer_ref_inputs_t in = {N, KIN, KOUT, SPLITS, f->dt, b->x, b->dy, f->dt, wl, NULL,
                                 f->dt, f->cfg.bias ? bl : NULL};
    gln_status_t st = gln_layer_ref_run(gln_test_cpu_context(), spec, &in, o);
    CHECK_OK(st);
    return st == GLN_STATUS_SUCCESS;
}

/* dst += src with the accumulation of the bounds: e = e1 + e2 + (M + 3)·2^-24·(|v1| + |v2|)
 * (the FP32 add of the second microbatch into the first, conservatively). */
static void acc_into(double *dv, double *de, const double *sv, const double *se, size_t n) {
    for (size_t j = 0; j < n; j++) {
        de[j] += se[j] + (M + GLN_REF_EXTRA_OPS) * GLN_REF_U_FP32 * (fabs(dv[j]) + fabs(sv[j]));
        dv[j] += sv[j];
    }
}

static void check_mg(fix_t *f, const double *v, const double *err, const char *tag) {
    char what[160];
    for (int e = 0; e < N; e++) {
        snprintf(what, sizeof what, "%s main_grad[%d]", tag, e);
        gln_layer_ref_check(what, f->mg[e], GLN_DTYPE_FP32, v + e * WS, err + e * WS, WS);
    }
}

static void check_grads(fix_t *f, const double *dw, const double *dwe, const double *db,
                        const double *dbe, const char *tag) {
    char what[160];
    for (int e = 0; e < N; e++) {
        void *wg = NULL, *bg = NULL;
        CHECK_OK(gln_grouped_linear_grads(f->layer, e, &wg, &bg));
        snprintf(what, sizeof what, "%s dW[%d]", tag, e);
        CHECK_MSG(wg != NULL, "%s is NULL", what);
        if (wg) gln_layer_ref_check(what, wg, f->dt, dw + e * WS, dwe + e * WS, WS);
        if (!f->cfg.bias) continue;
        snprintf(what, sizeof what, "%s db[%d]", tag, e);
        CHECK_MSG(bg != NULL, "%s is NULL", what);
        if (bg) gln_layer_ref_check(what, bg, f->dt, db + e * KOUT, dbe + e * KOUT, KOUT);
    }
}

/* ---------------------------------------------------------------- main_grad */

/* FIRST overwrites main_grad (pre-filled with NaN: not even read), NEXT accumulates. */
static void test_fused_first_then_next(void) {
    fix_t f;
    if (!fix_init(&f, GLN_RECIPE_NONE, GLN_DTYPE_FP32, 1, 0, 1)) goto out;
    batch_t b1, b2;
    batch_make(&b1, f.dt, 1.0, 0.1, 1);
    batch_make(&b2, f.dt, 2.0, 0.3, 2);
    void *y = gln_test_alloc(M * KOUT * 4), *dx = gln_test_alloc(M * KIN * 4);
    gln_layer_ref_out_t r1, r2;
    mg_fill(&f, NAN, 0);
    if (step(&f, &b1, GLN_MICROBATCH_FIRST, y, dx) && fix_ref(&f, &b1, NULL, &r1)) {
        check_mg(&f, r1.dw, r1.dw_err, "FIRST");
        gln_layer_ref_check("FIRST y", y, f.dt, r1.y, r1.y_err, M * KOUT);
        gln_layer_ref_check("FIRST dx", dx, f.dt, r1.dx, r1.dx_err, M * KIN);
        if (step(&f, &b2, GLN_MICROBATCH_NEXT, y, dx) && fix_ref(&f, &b2, NULL, &r2)) {
            acc_into(r1.dw, r1.dw_err, r2.dw, r2.dw_err, N * WS);
            check_mg(&f, r1.dw, r1.dw_err, "FIRST+NEXT");
            gln_layer_ref_check("NEXT y", y, f.dt, r2.y, r2.y_err, M * KOUT);
            gln_layer_ref_out_free(&r2);
        }
        gln_layer_ref_out_free(&r1);
    }
    gln_test_free(y);
    gln_test_free(dx);
    batch_free(&b1);
    batch_free(&b2);
out:
    fix_free(&f);
}

/* UNSET with fusion accumulates into whatever main_grad holds. */
static void test_fused_unset_accumulates(void) {
    fix_t f;
    if (!fix_init(&f, GLN_RECIPE_NONE, GLN_DTYPE_FP32, 1, 0, 0)) goto out;
    batch_t b;
    batch_make(&b, f.dt, 1.0, 0.1, 3);
    void *y = gln_test_alloc(M * KOUT * 4), *dx = gln_test_alloc(M * KIN * 4);
    mg_fill(&f, 0.5, 9);
    double *p = malloc(N * WS * sizeof(double)), *pe = calloc(N * WS, sizeof(double));
    for (int e = 0; e < N; e++)
        for (int j = 0; j < WS; j++) p[e * WS + j] = f.mg[e][j];
    gln_layer_ref_out_t r;
    if (step(&f, &b, GLN_MICROBATCH_UNSET, y, dx) && fix_ref(&f, &b, NULL, &r)) {
        acc_into(p, pe, r.dw, r.dw_err, N * WS);
        check_mg(&f, p, pe, "UNSET");
        gln_layer_ref_out_free(&r);
    }
    free(p);
    free(pe);
    gln_test_free(y);
    gln_test_free(dx);
    batch_free(&b);
out:
    fix_free(&f);
}

/* Without fusion the layer's gradient buffers accumulate over backwards; zero_grad resets. */
static void test_nonfused_accumulate_zero_grad(void) {
    fix_t f;
    if (!fix_init(&f, GLN_RECIPE_NONE, GLN_DTYPE_FP32, 0, 0, 1)) goto out;
    batch_t b1, b2, b3;
    batch_make(&b1, f.dt, 1.0, 0.1, 4);
    batch_make(&b2, f.dt, 0.5, 0.2, 5);
    batch_make(&b3, f.dt, 1.5, 0.05, 6);
    void *y = gln_test_alloc(M * KOUT * 4), *dx = gln_test_alloc(M * KIN * 4);
    gln_layer_ref_out_t r1, r2, r3;
    CHECK_OK(gln_grouped_linear_zero_grad(f.layer));
    if (!fix_ref(&f, &b1, NULL, &r1)) goto free_batches;
    if (!fix_ref(&f, &b2, NULL, &r2)) goto free_r1;
    if (!fix_ref(&f, &b3, NULL, &r3)) goto free_r2;
    if (step(&f, &b1, GLN_MICROBATCH_UNSET, y, dx) && step(&f, &b2, GLN_MICROBATCH_UNSET, y, dx)) {
        acc_into(r1.dw, r1.dw_err, r2.dw, r2.dw_err, N * WS);
        acc_into(r1.db, r1.db_err, r2.db, r2.db_err, N * KOUT);
        check_grads(&f, r1.dw, r1.dw_err, r1.db, r1.db_err, "two backwards");
    }
    CHECK_OK(gln_grouped_linear_zero_grad(f.layer));
    for (int e = 0; e < N; e++) {
        void *wg = NULL, *bg = NULL;
        CHECK_OK(gln_grouped_linear_grads(f.layer, e, &wg, &bg));
        int bad = 0;
        for (int j = 0; wg && j < WS; j++) bad += ((float *)wg)[j] != 0.0f;
        for (int j = 0; bg && j < KOUT; j++) bad += ((float *)bg)[j] != 0.0f;
        CHECK_MSG(wg && bg && !bad, "zero_grad: expert %d has %d nonzero gradient elements", e, bad);
    }
    if (step(&f, &b3, GLN_MICROBATCH_UNSET, y, dx))
        check_grads(&f, r3.dw, r3.dw_err, r3.db, r3.db_err, "after zero_grad");
    gln_layer_ref_out_free(&r3);
free_r2:
    gln_layer_ref_out_free(&r2);
free_r1:
    gln_layer_ref_out_free(&r1);
free_batches:
    gln_test_free(y);
    gln_test_free(dx);
    batch_free(&b1);
    batch_free(&b2);
    batch_free(&b3);
out:
    fix_free(&f);
}

/* The layer's bias gradients against the reference db (fused layers: only db is checked). */
static void check_db(fix_t *f, const double *db, const double *dbe, const char *tag) {
    char what[160];
    for (int e = 0; e < N; e++) {
        void *bg = NULL;
        CHECK_OK(gln_grouped_linear_grads(f->layer, e, NULL, &bg));
        snprintf(what, sizeof what, "%s db[%d]", tag, e);
        CHECK_MSG(bg != NULL, "%s is NULL", what);
        if (bg) gln_layer_ref_check(what, bg, f->dt, db + e * KOUT, dbe + e * KOUT, KOUT);
    }
}

/* docs/design.md §5: FIRST overwrites a fused main_grad but not the bias gradients, which add
 * up over every backward until zero_grad (which zeroes them and leaves the caller's main_grad
 * alone); with delay_wgrad_compute dbias is already there after backward (before backward_dw),
 * while main_grad is not touched until backward_dw. */
static void test_dbias_accumulation_rules(void) {
    for (int delay = 0; delay < 2; delay++) {
        fix_t f;
        if (!fix_init(&f, GLN_RECIPE_NONE, GLN_DTYPE_FP32, 1, delay, 1)) {
            fix_free(&f);
            continue;
        }
        batch_t b1, b2;
        batch_make(&b1, f.dt, 1.0, 0.1, 101);
        batch_make(&b2, f.dt, 2.0, 0.3, 102);
        void *y = gln_test_alloc(M * KOUT * 4), *dx = gln_test_alloc(M * KIN * 4);
        gln_layer_ref_out_t r1, r2;
        mg_fill(&f, NAN, 0);
        if (fix_ref(&f, &b1, NULL, &r1)) {
            if (fix_ref(&f, &b2, NULL, &r2)) {
                step(&f, &b1, GLN_MICROBATCH_FIRST, y, dx);
                check_db(&f, r1.db, r1.db_err, delay ? "delayed, after backward 1 (before backward_dw)" : "after backward 1");
                if (delay) {
                    CHECK_MSG(isnan(f.mg[0][0]), "delayed: main_grad written before backward_dw");
                    CHECK_OK(gln_grouped_linear_backward_dw(f.layer));
                }
                step(&f, &b2, GLN_MICROBATCH_FIRST, y, dx);
                if (delay) CHECK_OK(gln_grouped_linear_backward_dw(f.layer));
                check_mg(&f, r2.dw, r2.dw_err, "FIRST twice: main_grad = the second microbatch's wgrad");
                acc_into(r1.db, r1.db_err, r2.db, r2.db_err, N * KOUT);
                check_db(&f, r1.db, r1.db_err, "FIRST twice: db = the sum of both microbatches");
                CHECK_OK(gln_grouped_linear_zero_grad(f.layer));
                memset(r1.db, 0, N * KOUT * sizeof(double));
                memset(r1.db_err, 0, N * KOUT * sizeof(double));
                check_db(&f, r1.db, r1.db_err, "after zero_grad");
                check_mg(&f, r2.dw, r2.dw_err, "zero_grad leaves the caller's main_grad alone");
                gln_layer_ref_out_free(&r2);
            }
            gln_layer_ref_out_free(&r1);
        }
        gln_test_free(y);
        gln_test_free(dx);
        batch_free(&b1);
        batch_free(&b2);
        fix_free(&f);
    }
}

/* ---------------------------------------------------------------- delayed wgrad */

static int mg_equal(fix_t *f, float *const *snap) {
    for (int e = 0; e < N; e++)
        if (memcmp(f->mg[e], snap[e], WS * sizeof(float)) != 0) return 0;
    return 1;
}

/* backward leaves main_grad alone; backward_dw runs the queued wgrads oldest first. */
static void test_delayed_wgrad_fifo(void) {
    fix_t f;
    if (!fix_init(&f, GLN_RECIPE_NONE, GLN_DTYPE_FP32, 1, 1, 1)) goto out;
    batch_t b1, b2;
    batch_make(&b1, f.dt, 1.0, 0.1, 11);
    batch_make(&b2, f.dt, 3.0, 0.7, 12);
    void *y = gln_test_alloc(M * KOUT * 4), *dx = gln_test_alloc(M * KIN * 4);
    float *snap[N];
    mg_fill(&f, 0.25, 77);
    for (int e = 0; e < N; e++) {
        snap[e] = malloc(WS * sizeof(float));
        memcpy(snap[e], f.mg[e], WS * sizeof(float));
    }
    gln_layer_ref_out_t r1, r2;
    if (!fix_ref(&f, &b1, NULL, &r1)) goto free_all;
    if (!fix_ref(&f, &b2, NULL, &r2)) goto free_r1;
    CHECK_STATUS(gln_grouped_linear_backward_dw(f.layer), GLN_STATUS_INVALID_STATE, NULL);
    if (!step(&f, &b1, GLN_MICROBATCH_FIRST, y, dx)) goto free_r2;
    CHECK_MSG(mg_equal(&f, snap), "main_grad changed by backward with delay_wgrad_compute");
    gln_layer_ref_check("delayed: dx 1", dx, f.dt, r1.dx, r1.dx_err, M * KIN);
    if (!step(&f, &b2, GLN_MICROBATCH_NEXT, y, dx)) goto free_r2;
    CHECK_MSG(mg_equal(&f, snap), "main_grad changed by the second backward (delayed)");
    gln_layer_ref_check("delayed: dx 2", dx, f.dt, r2.dx, r2.dx_err, M * KIN);
    CHECK_OK(gln_grouped_linear_backward_dw(f.layer));
    CHECK_MSG(!mg_equal(&f, snap), "main_grad unchanged after backward_dw");
    /* The oldest item (FIRST: overwrite) must run first: main_grad = dW1, not prefill + dW2. */
    check_mg(&f, r1.dw, r1.dw_err, "backward_dw #1 (FIFO: microbatch 1)");
    CHECK_OK(gln_grouped_linear_backward_dw(f.layer));
    acc_into(r1.dw, r1.dw_err, r2.dw, r2.dw_err, N * WS);
    check_mg(&f, r1.dw, r1.dw_err, "backward_dw #2");
    CHECK_STATUS(gln_grouped_linear_backward_dw(f.layer), GLN_STATUS_INVALID_STATE, NULL);
    /* Bias gradients: both microbatches, whichever of backward / backward_dw produced them. */
    acc_into(r1.db, r1.db_err, r2.db, r2.db_err, N * KOUT);
    for (int e = 0; e < N; e++) {
        void *wg = NULL, *bg = NULL;
        CHECK_OK(gln_grouped_linear_grads(f.layer, e, &wg, &bg));
        CHECK(bg != NULL);
        if (bg) gln_layer_ref_check("delayed: db", bg, f.dt, r1.db + e * KOUT, r1.db_err + e * KOUT, KOUT);
    }
free_r2:
    gln_layer_ref_out_free(&r2);
free_r1:
    gln_layer_ref_out_free(&r1);
free_all:
    for (int e = 0; e < N; e++) free(snap[e]);
    gln_test_free(y);
    gln_test_free(dx);
    batch_free(&b1);
    batch_free(&b2);
out:
    fix_free(&f);
}

/* A layer without delay_wgrad_compute has an empty queue. */
static void test_backward_dw_empty_queue(void) {
    fix_t f;
    if (fix_init(&f, GLN_RECIPE_NONE, GLN_DTYPE_BF16, 0, 0, 0))
        CHECK_STATUS(gln_grouped_linear_backward_dw(f.layer), GLN_STATUS_INVALID_STATE, NULL);
    fix_free(&f);
}

/* ---------------------------------------------------------------- weight cache */

static void fwd_infer(fix_t *f, const batch_t *b, gln_microbatch_t mb, void *y) {
    CHECK_OK(fwd(f, b, mb, y, NULL));
}

static void check_y_ref(fix_t *f, const batch_t *b, const void *y, const char *tag) {
    gln_layer_ref_out_t r;
    if (!fix_ref(f, b, NULL, &r)) return;
    gln_layer_ref_check(tag, y, f->dt, r.y, r.y_err, M * KOUT);
    gln_layer_ref_out_free(&r);
}

/* FP8 weight caching (TE's is_first_microbatch): UNSET never caches (a weight changed without
 * gln_grouped_linear_weights_updated is seen at once); FIRST re-quantizes into the cache; NEXT
 * reuses it (even when the caller changed the weights without telling the layer) and UNSET does
 * not disturb it; after weights_updated NEXT re-quantizes. */
static void test_weight_cache(void) {
    fix_t f;
    if (!fix_init(&f, GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_BF16, 0, 0, 1)) {
        fix_free(&f);
        return;
    }
    batch_t b;
    batch_make(&b, f.dt, 1.0, 0.1, 21);
    size_t yb = M * KOUT * 2;
    void *y1 = gln_test_alloc(yb), *y2 = gln_test_alloc(yb), *y3 = gln_test_alloc(yb);
    /* A fresh layer with NEXT has nothing cached: it must quantize. */
    fwd_infer(&f, &b, GLN_MICROBATCH_NEXT, y1);
    check_y_ref(&f, &b, y1, "NEXT on a fresh layer");
    fwd_infer(&f, &b, GLN_MICROBATCH_FIRST, y1);
    check_y_ref(&f, &b, y1, "FIRST");
    fill_weights(&f, 0.08, 300); /* the caller changes W without telling the layer */
    fwd_infer(&f, &b, GLN_MICROBATCH_NEXT, y2);
    gln_check_bitwise("NEXT after a weight change reuses the cache: y", y1, y2, yb);
    fwd_infer(&f, &b, GLN_MICROBATCH_UNSET, y2);
    check_y_ref(&f, &b, y2, "UNSET after a weight change without weights_updated sees the new W");
    CHECK_MSG(memcmp(y1, y2, yb) != 0, "UNSET after a weight change gave the old y");
    fwd_infer(&f, &b, GLN_MICROBATCH_NEXT, y3);
    gln_check_bitwise("UNSET leaves the cache alone: NEXT still reuses it: y", y1, y3, yb);
    CHECK_OK(gln_grouped_linear_weights_updated(f.layer));
    fwd_infer(&f, &b, GLN_MICROBATCH_NEXT, y3);
    check_y_ref(&f, &b, y3, "NEXT after weights_updated re-quantizes");
    gln_check_bitwise("NEXT after weights_updated equals UNSET: y", y2, y3, yb);
    fill_weights(&f, 0.03, 400);
    fwd_infer(&f, &b, GLN_MICROBATCH_FIRST, y3);
    check_y_ref(&f, &b, y3, "FIRST after a weight change refreshes");
    CHECK_MSG(memcmp(y2, y3, yb) != 0, "FIRST after a weight change gave the old y");
    fill_weights(&f, 0.06, 500);
    fwd_infer(&f, &b, GLN_MICROBATCH_UNSET, y1);
    check_y_ref(&f, &b, y1, "UNSET right after another change");
    fwd_infer(&f, &b, GLN_MICROBATCH_UNSET, y2);
    gln_check_bitwise("UNSET twice without a change: y", y1, y2, yb);
    CHECK_MSG(gln_guard_ok(y1) && gln_guard_ok(y2) && gln_guard_ok(y3), "guard after y overwritten");
    gln_test_free(y1);
    gln_test_free(y2);
    gln_test_free(y3);
    batch_free(&b);
    fix_free(&f);
}

/* ---------------------------------------------------------------- delayed scaling */

static float block_amax(const void *buf, gln_dtype_t dt, int64_t r0, int64_t rows, int64_t cols) {
    float a = 0.0f;
    for (int64_t j = r0 * cols; j < (r0 + rows) * cols; j++) {
        float v = fabsf((float)gln_load(buf, dt, (size_t)j));
        if (v > a) a = v;
    }
    return a;
}

typedef struct ds_state {
    int32_t slots, len;
    float *scale, *hist, *fp8_max;
} ds_state_t;

static int ds_snapshot(gln_grouped_linear_t *layer, int backward, ds_state_t *s) {
    float *scale = NULL, *hist = NULL;
    CHECK_OK(gln_grouped_linear_fp8_state(layer, backward, &scale, &hist, &s->slots, &s->len));
    if (!scale || !hist) return 0;
    s->scale = malloc(s->slots * sizeof(float));
    s->hist = malloc((size_t)s->slots * s->len * sizeof(float));
    s->fp8_max = malloc(s->slots * sizeof(float));
    memcpy(s->scale, scale, s->slots * sizeof(float));
    memcpy(s->hist, hist, (size_t)s->slots * s->len * sizeof(float));
    return 1;
}

static void ds_free(ds_state_t *s) {
    free(s->scale);
    free(s->hist);
    free(s->fp8_max);
}

static void ds_compare(gln_grouped_linear_t *layer, int backward, const ds_state_t *want,
                       const char *tag) {
    ds_state_t got;
    if (!ds_snapshot(layer, backward, &got)) {
        CHECK_MSG(0, "%s: no delayed-scaling state", tag);
        return;
    }
    for (int32_t k = 0; k < want->slots; k++)
        CHECK_MSG(got.scale[k] == want->scale[k], "%s: scale[%d] = %.9g, predicted %.9g", tag, k,
                  got.scale[k], want->scale[k]);
    for (int32_t j = 0; j < want->slots * want->len; j++)
        CHECK_MSG(got.hist[j] == want->hist[j], "%s: amax_history[%d][%d] = %.9g, predicted %.9g",
                  tag, j / want->slots, j % want->slots, got.hist[j], want->hist[j]);
    ds_free(&got);
}

/* The amaxes a forward records: input 3i = max|x_i|, weight 3i+1 = max|W_i|, output 3i+2
 * unused (-1). */
static void fwd_amaxes(const fix_t *f, const batch_t *b, float *af) {
    int64_t r0 = 0;
    for (int e = 0; e < N; e++) {
        af[3 * e] = block_amax(b->x, f->dt, r0, SPLITS[e], KIN);
        af[3 * e + 1] = block_amax(f->w[e], f->dt, 0, KOUT, KIN);
        af[3 * e + 2] = -1;
        r0 += SPLITS[e];
    }
}

/* The amaxes a backward records: grad_output 2i = max|dy_i|, grad_input 2i+1 unused (-1). */
static void bwd_amaxes(const fix_t *f, const batch_t *b, float *ab) {
    int64_t r0 = 0;
    for (int e = 0; e < N; e++) {
        ab[2 * e] = block_amax(b->dy, f->dt, r0, SPLITS[e], KOUT);
        ab[2 * e + 1] = -1;
        r0 += SPLITS[e];
    }
}

/* Predict one step of the state: record the amaxes into row 0, then one update (TE's bulk
 * rule, or every slot rolled with always_roll). */
static void ds_predict_ex(ds_state_t *s, const float *amax, int stride, int n, float fp8_max,
                          int margin, gln_amax_algo_t algo, int always_roll) {
    for (int e = 0; e < n; e++)
        for (int k = 0; k < stride; k++) {
            float a = amax[e * stride + k];
            if (a < 0) continue; /* unused slot */
            float *h = &s->hist[e * stride + k];
            if (a > *h) *h = a;
        }
    for (int32_t k = 0; k < s->slots; k++) s->fp8_max[k] = fp8_max;
    gln_delayed_update_options_t o = GLN_DELAYED_UPDATE_OPTIONS_INIT;
    o.always_roll = always_roll;
    CHECK_OK(gln_delayed_scaling_update_ex(s->slots, s->len, s->hist, s->scale, s->fp8_max, margin, algo, &o));
}

static void ds_predict(ds_state_t *s, const float *amax, int stride, int n, float fp8_max,
                       int margin, gln_amax_algo_t algo) {
    ds_predict_ex(s, amax, stride, n, fp8_max, margin, algo, 0);
}

/* Three steps of FP8_DELAYED: after each forward / backward the state equals the prediction
 * from the recorded amaxes (input 3i = max|x_i|, weight 3i+1 = max|W_i|, grad 2i = max|dy_i|),
 * and each step's outputs use the scales from before that step. */
static void test_delayed_scaling_three_steps(void) {
    fix_t f;
    if (!fix_init_delayed(&f, 0, 3, 1, 0, 0)) goto out;
    const double xs[3] = {1.0, 6.0, 0.25}, dys[3] = {0.01, 0.002, 0.05};
    void *y = gln_test_alloc(M * KOUT * 2), *dx = gln_test_alloc(M * KIN * 2);
    for (int s = 0; s < 3; s++) {
        char tag[96];
        batch_t b;
        batch_make(&b, f.dt, xs[s], dys[s], 31 + s);
        gln_layer_ref_spec_t spec;
        gln_layer_ref_spec_init(&spec, &f.cfg);
        CHECK_OK(gln_layer_ref_capture_scales(&spec, f.layer));
        ds_state_t pf, pb;
        int okf = ds_snapshot(f.layer, 0, &pf), okb = okf && ds_snapshot(f.layer, 1, &pb);
        if (!okb) {
            if (okf) ds_free(&pf);
            CHECK_MSG(0, "step %d: no delayed-scaling state", s);
            batch_free(&b);
            break;
        }
        float af[3 * N], ab[2 * N];
        fwd_amaxes(&f, &b, af);
        bwd_amaxes(&f, &b, ab);
        gln_grouped_linear_saved_t *sv = NULL;
        CHECK_OK(fwd(&f, &b, GLN_MICROBATCH_FIRST, y, &sv));
        ds_predict(&pf, af, 3, N, 448.0f, 1, GLN_AMAX_ALGO_MAX);
        snprintf(tag, sizeof tag, "step %d after forward: forward state", s);
        ds_compare(f.layer, 0, &pf, tag);
        if (sv) {
            CHECK_OK(bwd(&f, sv, &b, dx));
            CHECK_OK(gln_grouped_linear_saved_release(sv));
        }
        ds_predict(&pb, ab, 2, N, 57344.0f, 1, GLN_AMAX_ALGO_MAX);
        snprintf(tag, sizeof tag, "step %d after backward: backward state", s);
        ds_compare(f.layer, 1, &pb, tag);
        snprintf(tag, sizeof tag, "step %d after backward: forward state untouched", s);
        ds_compare(f.layer, 0, &pf, tag);
        gln_layer_ref_out_t r;
        if (fix_ref(&f, &b, &spec, &r)) {
            snprintf(tag, sizeof tag, "step %d y (scales before the step)", s);
            gln_layer_ref_check(tag, y, f.dt, r.y, r.y_err, M * KOUT);
            snprintf(tag, sizeof tag, "step %d dx (scales before the step)", s);
            gln_layer_ref_check(tag, dx, f.dt, r.dx, r.dx_err, M * KIN);
            gln_layer_ref_out_free(&r);
        }
        ds_free(&pf);
        ds_free(&pb);
        batch_free(&b);
    }
    gln_test_free(y);
    gln_test_free(dx);
out:
    fix_free(&f);
}

/* An inference forward (saved == NULL) under FP8_DELAYED does not move the scaling state: every
 * scale and history rows 1.. stay bit for bit, the window does not roll; its amaxes are only
 * max-recorded into row 0 (TE's casts do the same; TE skips the update without gradients), and
 * enter the next training forward's update. */
static void test_delayed_inference_keeps_state(void) {
    fix_t f;
    if (!fix_init_delayed(&f, 1, 3, 0, 0, 0)) goto out;
    batch_t b1, b2;
    batch_make(&b1, f.dt, 1.0, 0.1, 61);
    batch_make(&b2, f.dt, 5.0, 0.1, 62);
    void *y = gln_test_alloc(M * KOUT * 2), *dx = gln_test_alloc(M * KIN * 2);
    step(&f, &b1, GLN_MICROBATCH_UNSET, y, dx); /* a non-trivial state */
    ds_state_t before, bwd_before;
    if (ds_snapshot(f.layer, 0, &before)) {
        if (ds_snapshot(f.layer, 1, &bwd_before)) {
            float af[3 * N];
            fwd_amaxes(&f, &b2, af);
            CHECK_OK(fwd(&f, &b2, GLN_MICROBATCH_UNSET, y, NULL));
            ds_state_t want = before;
            want.hist = malloc((size_t)before.slots * before.len * sizeof(float));
            memcpy(want.hist, before.hist, (size_t)before.slots * before.len * sizeof(float));
            for (int k = 0; k < 3 * N; k++)
                if (af[k] >= 0 && af[k] > want.hist[k]) want.hist[k] = af[k];
            ds_compare(f.layer, 0, &want, "after an inference forward: forward state");
            ds_compare(f.layer, 1, &bwd_before, "after an inference forward: backward state");
            /* the next training forward's update includes the recorded inference amaxes */
            gln_grouped_linear_saved_t *sv = NULL;
            float a1[3 * N];
            fwd_amaxes(&f, &b1, a1);
            CHECK_OK(fwd(&f, &b1, GLN_MICROBATCH_UNSET, y, &sv));
            want.fp8_max = malloc(want.slots * sizeof(float));
            ds_predict(&want, a1, 3, N, 448.0f, 0, GLN_AMAX_ALGO_MAX);
            ds_compare(f.layer, 0, &want, "training forward after inference: forward state");
            if (sv) CHECK_OK(gln_grouped_linear_saved_release(sv));
            free(want.hist);
            free(want.fp8_max);
            ds_free(&bwd_before);
        }
        ds_free(&before);
    }
    gln_test_free(y);
    gln_test_free(dx);
    batch_free(&b1);
    batch_free(&b2);
out:
    fix_free(&f);
}

/* Two FP8_DELAYED layers with history 3 and margin 0: `opt` with the given always_roll /
 * amax_nan_propagate, `def` with the defaults (both fixtures must be freed). */
static int fix_pair_delayed(fix_t *opt, fix_t *def, int always_roll, int nan_propagate) {
    int ok = fix_init_delayed(opt, 0, 3, 0, always_roll, nan_propagate);
    return fix_init_delayed(def, 0, 3, 0, 0, 0) && ok;
}

/* Hist[row][slot] of a state snapshot. */
static float ds_hist(const ds_state_t *s, int row, int slot) { return s->hist[row * s->slots + slot]; }

/* cfg.always_roll: a step whose newest amax is 0 for expert 0 (all its x and dy rows zero)
 * rolls that slot's history under always_roll and leaves it alone under TE's bulk rule.  (A roll
 * moves row 0 to the last row, as TE's torch.roll(-1): after step 1 the history is [0, 0, a1];
 * step 2 gives [0, a1, 0] rolled, [0, 0, a1] untouched.)  The whole state equals the
 * prediction of each rule. */
static void test_delayed_always_roll(void) {
    fix_t fr, fd;
    if (!fix_pair_delayed(&fr, &fd, 1, 0)) goto out;
    batch_t b1, b2;
    batch_make(&b1, fr.dt, 1.0, 0.1, 81);
    batch_make(&b2, fr.dt, 2.0, 0.2, 82);
    memset(b2.x, 0, (size_t)SPLITS[0] * KIN * gln_dtype_size(fr.dt));  /* expert 0: x = 0 */
    memset(b2.dy, 0, (size_t)SPLITS[0] * KOUT * gln_dtype_size(fr.dt)); /* and dy = 0 */
    void *y = gln_test_alloc(M * KOUT * 2), *dx = gln_test_alloc(M * KIN * 2);
    const float a1 = block_amax(b1.x, fr.dt, 0, SPLITS[0], KIN);
    fix_t *fs[2] = {&fr, &fd};
    for (int k = 0; k < 2; k++) {
        fix_t *f = fs[k];
        const int roll = f->cfg.always_roll;
        ds_state_t pf, pb;
        step(f, &b1, GLN_MICROBATCH_UNSET, y, dx);
        if (!ds_snapshot(f->layer, 0, &pf)) continue;
        if (!ds_snapshot(f->layer, 1, &pb)) {
            ds_free(&pf);
            continue;
        }
        float af[3 * N], ab[2 * N];
        fwd_amaxes(f, &b2, af);
        bwd_amaxes(f, &b2, ab);
        CHECK(af[0] == 0.0f && ab[0] == 0.0f);
        step(f, &b2, GLN_MICROBATCH_UNSET, y, dx);
        ds_predict_ex(&pf, af, 3, N, 448.0f, 0, GLN_AMAX_ALGO_MAX, roll);
        ds_predict_ex(&pb, ab, 2, N, 57344.0f, 0, GLN_AMAX_ALGO_MAX, roll);
        ds_compare(f->layer, 0, &pf, roll ? "always_roll: forward state" : "bulk rule: forward state");
        ds_compare(f->layer, 1, &pb, roll ? "always_roll: backward state" : "bulk rule: backward state");
        ds_state_t got;
        if (ds_snapshot(f->layer, 0, &got)) {
            if (roll)
                CHECK_MSG(ds_hist(&got, 0, 0) == 0.0f && ds_hist(&got, 1, 0) == a1 && ds_hist(&got, 2, 0) == 0.0f,
                          "always_roll: input slot 0 history [%g, %g, %g], want [0, %g, 0]",
                          ds_hist(&got, 0, 0), ds_hist(&got, 1, 0), ds_hist(&got, 2, 0), a1);
            else
                CHECK_MSG(ds_hist(&got, 0, 0) == 0.0f && ds_hist(&got, 1, 0) == 0.0f && ds_hist(&got, 2, 0) == a1,
                          "bulk rule: input slot 0 history [%g, %g, %g], want [0, 0, %g]",
                          ds_hist(&got, 0, 0), ds_hist(&got, 1, 0), ds_hist(&got, 2, 0), a1);
            CHECK_MSG(got.scale[0] == 448.0f / a1, "input slot 0 scale %.9g, want 448 / %g", got.scale[0], a1);
            ds_free(&got);
        }
        ds_free(&pf);
        ds_free(&pb);
    }
    gln_test_free(y);
    gln_test_free(dx);
    batch_free(&b1);
    batch_free(&b2);
out:
    fix_free(&fr);
    fix_free(&fd);
}

/* cfg.amax_nan_propagate under FP8_DELAYED: a NaN in expert 0's x reaches the cast's amax, the
 * history (row 0, then rolled) and the window max, so expert 0's input scale stays 1 while the
 * NaN is in the window; by default the NaN is ignored everywhere and the scale follows the
 * finite amaxes (hand-derived: 448 / max of the two steps' finite amaxes). */
static void test_delayed_nan_propagate(void) {
    fix_t fp, fd;
    if (!fix_pair_delayed(&fp, &fd, 0, 1)) goto out;
    batch_t b1, b2;
    batch_make(&b1, fp.dt, 1.0, 0.1, 91);
    batch_make(&b2, fp.dt, 3.0, 0.1, 92);
    gln_store(b1.x, fp.dt, 2 * KIN + 5, NAN); /* expert 0, row 2 */
    const float a1 = block_amax(b1.x, fp.dt, 0, SPLITS[0], KIN); /* finite max (NaN compares false) */
    const float a2 = block_amax(b2.x, fp.dt, 0, SPLITS[0], KIN);
    void *y = gln_test_alloc(M * KOUT * 2);
    fix_t *fs[2] = {&fp, &fd};
    for (int k = 0; k < 2; k++) {
        fix_t *f = fs[k];
        const int prop = f->cfg.amax_nan_propagate;
        for (int s = 0; s < 2; s++) {
            gln_grouped_linear_saved_t *sv = NULL;
            CHECK_OK(fwd(f, s ? &b2 : &b1, GLN_MICROBATCH_UNSET, y, &sv));
            if (sv) CHECK_OK(gln_grouped_linear_saved_release(sv));
        }
        ds_state_t got;
        if (!ds_snapshot(f->layer, 0, &got)) continue;
        /* after two rolls: row 1 = step 1's amax, row 2 = step 2's */
        if (prop)
            CHECK_MSG(isnan(ds_hist(&got, 1, 0)) && ds_hist(&got, 2, 0) == a2 && got.scale[0] == 1.0f,
                      "nan_propagate: input slot 0 history rows 1, 2 = %g, %g (want NaN, %g), scale %.9g (want 1)",
                      ds_hist(&got, 1, 0), ds_hist(&got, 2, 0), a2, got.scale[0]);
        else
            CHECK_MSG(ds_hist(&got, 1, 0) == a1 && ds_hist(&got, 2, 0) == a2 &&
                          got.scale[0] == 448.0f / (a1 > a2 ? a1 : a2),
                      "default: input slot 0 history rows 1, 2 = %g, %g (want %g, %g), scale %.9g",
                      ds_hist(&got, 1, 0), ds_hist(&got, 2, 0), a1, a2, got.scale[0]);
        /* the other experts never saw a NaN */
        CHECK_MSG(got.scale[6] == 448.0f / fmaxf(block_amax(b1.x, fp.dt, 7, SPLITS[2], KIN),
                                                 block_amax(b2.x, fp.dt, 7, SPLITS[2], KIN)),
                  "nan_propagate %d: expert 2's input scale %.9g", prop, got.scale[6]);
        ds_free(&got);
    }
    gln_test_free(y);
    batch_free(&b1);
    batch_free(&b2);
out:
    fix_free(&fp);
    fix_free(&fd);
}

/* cfg.amax_nan_propagate reaches the casts of a non-delayed recipe: under FP8_CURRENT a NaN in
 * expert 0's x makes that member's scale 1, which is the scale an amax of exactly 448 gives.  So
 * every y row but the NaN one equals, bit for bit, the default layer's y for the same x with
 * the NaN replaced by 448; the default layer fed the NaN (ignored: scale 448 / finite amax)
 * gives different expert-0 rows. */
static void test_current_nan_propagate(void) {
    fix_t fp, fd;
    int ok = fix_init(&fd, GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_BF16, 0, 0, 0);
    fix_setup(&fp, GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_BF16, 0, 0, 0);
    fp.cfg.amax_nan_propagate = 1;
    ok = fix_create(&fp) && ok;
    if (!ok) goto out;
    batch_t bn, b448;
    batch_make(&bn, fp.dt, 1.0, 0.1, 93);
    batch_make(&b448, fp.dt, 1.0, 0.1, 93);
    const size_t nan_at = 2 * KIN + 5, yrow = KOUT * 2;
    gln_store(bn.x, fp.dt, nan_at, NAN);
    gln_store(b448.x, fp.dt, nan_at, 448.0);
    CHECK(block_amax(b448.x, fp.dt, 0, SPLITS[0], KIN) == 448.0f);
    void *yp = gln_test_alloc(M * yrow), *yd = gln_test_alloc(M * yrow), *yi = gln_test_alloc(M * yrow);
    fwd_infer(&fp, &bn, GLN_MICROBATCH_UNSET, yp);
    fwd_infer(&fd, &b448, GLN_MICROBATCH_UNSET, yd);
    fwd_infer(&fd, &bn, GLN_MICROBATCH_UNSET, yi);
    gln_check_bitwise("nan_propagate y rows 0-1 = y(NaN -> 448) rows 0-1", yp, yd, 2 * yrow);
    gln_check_bitwise("nan_propagate y rows 3.. = y(NaN -> 448) rows 3..", (char *)yp + 3 * yrow,
                      (char *)yd + 3 * yrow, (M - 3) * yrow);
    CHECK_MSG(memcmp(yp, yi, 2 * yrow) != 0, "the default layer (NaN ignored) gave the propagating layer's y");
    gln_test_free(yp);
    gln_test_free(yd);
    gln_test_free(yi);
    batch_free(&bn);
    batch_free(&b448);
out:
    fix_free(&fp);
    fix_free(&fd);
}

/* FP8 recipe with FP32 activations: the bias is added as bf16, as in TE (§2.3 step 4).  A bias
 * that is not bf16-representable gives y bit for bit equal to the same layer with the bias
 * rounded to bf16 beforehand, and matches the reference (which rounds it the same way); without
 * FP8 the FP32 bias is added as is. */
static void test_fp8_fp32_bias_is_bf16(void) {
    gln_recipe_t recipes[3] = {GLN_RECIPE_FP8_CURRENT, GLN_RECIPE_MXFP8, GLN_RECIPE_NONE};
    for (int r = 0; r < 3; r++) {
        fix_t fa, fb;
        int ok = fix_init(&fa, recipes[r], GLN_DTYPE_FP32, 0, 0, 1);
        ok = fix_init(&fb, recipes[r], GLN_DTYPE_FP32, 0, 0, 1) && ok;
        if (ok) {
            int exact = 1;
            for (int e = 0; e < N; e++)
                for (int j = 0; j < KOUT; j++) {
                    float v = 0.1f + 0.00123f * (float)(j + 7 * e); /* not bf16-representable */
                    ((float *)fa.b[e])[j] = v;
                    ((float *)fb.b[e])[j] = gln_bf16_to_fp32(gln_fp32_to_bf16(v));
                    if (gln_bf16_to_fp32(gln_fp32_to_bf16(v)) != v) exact = 0;
                }
            CHECK_MSG(!exact, "test bias values are all bf16-representable");
            batch_t b;
            batch_make(&b, GLN_DTYPE_FP32, 1.0, 0.1, 71);
            size_t yb = M * KOUT * 4;
            void *ya = gln_test_alloc(yb), *yr = gln_test_alloc(yb);
            fwd_infer(&fa, &b, GLN_MICROBATCH_UNSET, ya);
            fwd_infer(&fb, &b, GLN_MICROBATCH_UNSET, yr);
            if (recipes[r] != GLN_RECIPE_NONE) {
                gln_check_bitwise("FP8 + FP32 activations: y with bias b equals y with bf16(b)", ya, yr, yb);
                check_y_ref(&fa, &b, ya, "FP8 + FP32 activations: y with a bf16 bias");
            } else {
                CHECK_MSG(memcmp(ya, yr, yb) != 0, "recipe none: the FP32 bias must not be rounded");
                check_y_ref(&fa, &b, ya, "recipe none: y with the FP32 bias");
            }
            gln_test_free(ya);
            gln_test_free(yr);
            batch_free(&b);
        }
        fix_free(&fa);
        fix_free(&fb);
    }
}

/* ---------------------------------------------------------------- pipeline schedule */

/* f1 f2 b2 b1 (two forwards in flight) equals f1 b1 f2 b2: y and dx bit for bit; main_grad
 * and db of both schedules within the accumulation bound of the float64 sum of the two
 * microbatches (not bitwise: with per-tensor FP8 the wgrad GEMM folds alpha·Σ into main_grad
 * with one fused multiply-add, so fl(a + α·b) and fl(b + α·a) may differ in the last bit).
 * Also: a second backward on one saved context is INVALID_STATE. */
static void test_pipeline_reverse_backward(void) {
    fix_t fs, fp;
    int ok = fix_init(&fs, GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_FP32, 1, 0, 1);
    ok = fix_init(&fp, GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_FP32, 1, 0, 1) && ok;
    if (!ok) goto out;
    batch_t b1, b2;
    batch_make(&b1, GLN_DTYPE_FP32, 1.0, 0.1, 41);
    batch_make(&b2, GLN_DTYPE_FP32, 2.5, 0.02, 42);
    size_t yb = M * KOUT * 4, xb = M * KIN * 4;
    void *ys[2], *dxs[2], *yp[2], *dxp[2];
    for (int i = 0; i < 2; i++) {
        ys[i] = gln_test_alloc(yb);
        yp[i] = gln_test_alloc(yb);
        dxs[i] = gln_test_alloc(xb);
        dxp[i] = gln_test_alloc(xb);
    }
    mg_fill(&fs, 0, 0);
    mg_fill(&fp, 0, 0);
    step(&fs, &b1, GLN_MICROBATCH_UNSET, ys[0], dxs[0]);
    step(&fs, &b2, GLN_MICROBATCH_UNSET, ys[1], dxs[1]);
    gln_grouped_linear_saved_t *s1 = NULL, *s2 = NULL;
    CHECK_OK(fwd(&fp, &b1, GLN_MICROBATCH_UNSET, yp[0], &s1));
    CHECK_OK(fwd(&fp, &b2, GLN_MICROBATCH_UNSET, yp[1], &s2));
    if (s1 && s2) {
        CHECK_OK(bwd(&fp, s2, &b2, dxp[1]));
        CHECK_OK(bwd(&fp, s1, &b1, dxp[0]));
        void *scratch = gln_test_alloc(xb);
        CHECK_STATUS(bwd(&fp, s1, &b1, scratch), GLN_STATUS_INVALID_STATE, NULL);
        gln_test_free(scratch);
    }
    if (s1) CHECK_OK(gln_grouped_linear_saved_release(s1));
    if (s2) CHECK_OK(gln_grouped_linear_saved_release(s2));
    gln_check_bitwise("pipeline y1", ys[0], yp[0], yb);
    gln_check_bitwise("pipeline y2", ys[1], yp[1], yb);
    gln_check_bitwise("pipeline dx1", dxs[0], dxp[0], xb);
    gln_check_bitwise("pipeline dx2", dxs[1], dxp[1], xb);
    gln_layer_ref_out_t r1, r2;
    if (fix_ref(&fs, &b1, NULL, &r1)) {
        if (fix_ref(&fs, &b2, NULL, &r2)) {
            acc_into(r1.dw, r1.dw_err, r2.dw, r2.dw_err, N * WS);
            acc_into(r1.db, r1.db_err, r2.db, r2.db_err, N * KOUT);
            check_mg(&fs, r1.dw, r1.dw_err, "sequential");
            check_mg(&fp, r1.dw, r1.dw_err, "pipelined");
            for (int e = 0; e < N; e++) {
                void *w1, *b1g, *w2, *b2g;
                CHECK_OK(gln_grouped_linear_grads(fs.layer, e, &w1, &b1g));
                CHECK_OK(gln_grouped_linear_grads(fp.layer, e, &w2, &b2g));
                CHECK(b1g && b2g);
                if (b1g) gln_layer_ref_check("sequential db", b1g, fs.dt, r1.db + e * KOUT, r1.db_err + e * KOUT, KOUT);
                if (b2g) gln_layer_ref_check("pipelined db", b2g, fp.dt, r1.db + e * KOUT, r1.db_err + e * KOUT, KOUT);
            }
            gln_layer_ref_out_free(&r2);
        }
        gln_layer_ref_out_free(&r1);
    }
    for (int i = 0; i < 2; i++) {
        gln_test_free(ys[i]);
        gln_test_free(yp[i]);
        gln_test_free(dxs[i]);
        gln_test_free(dxp[i]);
    }
    batch_free(&b1);
    batch_free(&b2);
out:
    fix_free(&fs);
    fix_free(&fp);
}

#define BOTH_PATHS(fn)                                                                          \
    static void fn##_split(void) {                                                              \
        g_path = GLN_PATH_SPLIT;                                                                \
        fn();                                                                                   \
    }                                                                                           \
    static void fn##_grouped(void) {                                                            \
        g_path = GLN_PATH_GROUPED;                                                              \
        fn();                                                                                   \
    }
BOTH_PATHS(test_fused_first_then_next)
BOTH_PATHS(test_fused_unset_accumulates)
BOTH_PATHS(test_nonfused_accumulate_zero_grad)
BOTH_PATHS(test_delayed_wgrad_fifo)
BOTH_PATHS(test_backward_dw_empty_queue)
BOTH_PATHS(test_weight_cache)
BOTH_PATHS(test_delayed_scaling_three_steps)
BOTH_PATHS(test_pipeline_reverse_backward)
BOTH_PATHS(test_delayed_inference_keeps_state)
BOTH_PATHS(test_fp8_fp32_bias_is_bf16)
BOTH_PATHS(test_delayed_always_roll)
BOTH_PATHS(test_delayed_nan_propagate)
BOTH_PATHS(test_current_nan_propagate)
BOTH_PATHS(test_dbias_accumulation_rules)
#define BOTH(fn) GLN_CASE(fn##_split), GLN_CASE(fn##_grouped)

GLN_TEST_MAIN(BOTH(test_fused_first_then_next), BOTH(test_fused_unset_accumulates),
              BOTH(test_nonfused_accumulate_zero_grad), BOTH(test_delayed_wgrad_fifo),
              BOTH(test_backward_dw_empty_queue), BOTH(test_weight_cache),
              BOTH(test_delayed_scaling_three_steps), BOTH(test_pipeline_reverse_backward),
              BOTH(test_delayed_inference_keeps_state), BOTH(test_fp8_fp32_bias_is_bf16),
              BOTH(test_delayed_always_roll), BOTH(test_delayed_nan_propagate),
              BOTH(test_current_nan_propagate), BOTH(test_dbias_accumulation_rules))

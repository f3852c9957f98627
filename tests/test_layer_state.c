/* Layer state across calls: the delayed-wgrad FIFO, the quantized-weight cache, the recipe's
 * default FP8 format, owned parameters and inference, save_original_input, the delayed-scaling
 * schedule, frozen weights and zero_grad (one layer from tests/harness/layer_setup.h each). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layer_ref.h"
#include "layer_setup.h"

/* ---------------------------------------------------------------- microbatches */

typedef struct mb_layer {
    gln_grouped_linear_t *L;
    float *main_grad; /* [n, kout, kin] */
} mb_layer_t;

static void mb_create(gln_context_t *ctx, const gln_ls_setup_t *s, gln_ls_data_t *d, int delay, mb_layer_t *m) {
    gln_grouped_linear_config_t c = gln_ls_config(s, d);
    size_t cnt = (size_t)s->n * s->kout * s->kin;
    m->main_grad = gln_test_alloc(cnt * sizeof(float));
    for (size_t i = 0; i < cnt; i++) m->main_grad[i] = 0.25f;
    c.fuse_wgrad_accumulation = 1;
    c.delay_wgrad_compute = delay;
    c.params.main_grad_packed = m->main_grad;
    m->L = NULL;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &m->L));
}

static void mb_step(const gln_ls_setup_t *s, mb_layer_t *m, const void *x, const void *dy, gln_microbatch_t mb) {
    gln_tensor_t xt = gln_tensor_make(s->act, s->rows, s->kin, (void *)x);
    gln_tensor_t yt = gln_tensor_make(s->act, s->rows, s->kout, NULL);
    gln_tensor_t dyt = gln_tensor_make(s->act, s->rows, s->kout, (void *)dy);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &xt;
    a.m_splits = s->splits;
    a.y = &yt;
    a.microbatch = mb;
    a.input_requires_grad = 0;
    gln_grouped_linear_saved_t *sv = NULL;
    CHECK_OK(gln_grouped_linear_forward(m->L, &a, &sv));
    CHECK_OK(gln_grouped_linear_backward(sv, &dyt, NULL));
    CHECK_OK(gln_grouped_linear_saved_release(sv)); /* the queued wgrad must not depend on it */
}

/* delay_wgrad_compute: two microbatches queue two wgrads; main_grad is untouched until
 * backward_dw, the first pop overwrites (FIRST), the second accumulates (NEXT); dbias is
 * produced in the main backward; the result equals the non-delayed layer bitwise. */
static void test_delayed_wgrad_fifo(void) {
    gln_context_t *ctx = gln_ls_cpu_ctx();
    for (int p = 0; p < 2; p++) {
        gln_ls_setup_t s = gln_ls_base_setup(GLN_RECIPE_MXFP8, (gln_path_t)p);
        gln_ls_data_t d1, d2;
        gln_ls_data_make(&s, &d1, 11);
        gln_ls_data_make(&s, &d2, 12);
        mb_layer_t del, now;
        mb_create(ctx, &s, &d1, 1, &del);
        mb_create(ctx, &s, &d1, 0, &now);
        size_t cnt = (size_t)s.n * s.kout * s.kin;
        mb_step(&s, &del, d1.x, d1.dy, GLN_MICROBATCH_FIRST);
        mb_step(&s, &del, d2.x, d2.dy, GLN_MICROBATCH_NEXT);
        int untouched = 1;
        for (size_t i = 0; i < cnt; i++) untouched &= del.main_grad[i] == 0.25f;
        CHECK_MSG(untouched, "main_grad changed before backward_dw");
        void *bg_del = NULL, *bg_now = NULL;
        CHECK_OK(gln_grouped_linear_grads(del.L, 0, NULL, &bg_del));
        CHECK(bg_del && gln_load(bg_del, s.param, 0) != 0.0); /* dbias already there */

        mb_step(&s, &now, d1.x, d1.dy, GLN_MICROBATCH_FIRST);
        float *after_first = malloc(cnt * sizeof(float));
        memcpy(after_first, now.main_grad, cnt * sizeof(float));
        mb_step(&s, &now, d2.x, d2.dy, GLN_MICROBATCH_NEXT);

        CHECK_OK(gln_grouped_linear_backward_dw(del.L));
        CHECK(gln_check_bitwise("main_grad after first pop", del.main_grad, after_first, cnt * sizeof(float)));
        CHECK_OK(gln_grouped_linear_backward_dw(del.L));
        CHECK(gln_check_bitwise("main_grad after second pop", del.main_grad, now.main_grad, cnt * sizeof(float)));
        CHECK_STATUS(gln_grouped_linear_backward_dw(del.L), GLN_STATUS_INVALID_STATE, "empty");
        CHECK_OK(gln_grouped_linear_grads(now.L, 0, NULL, &bg_now));
        CHECK(gln_check_bitwise("dbias", bg_del, bg_now, (size_t)s.n * s.kout * gln_dtype_size(s.param)));
        /* the wgrad returned by grads() is the main_grad itself */
        void *wg = NULL;
        CHECK_OK(gln_grouped_linear_grads(del.L, 1, &wg, NULL));
        CHECK(wg == del.main_grad + (size_t)s.kout * s.kin);
        free(after_first);
        /* destroy with a queued item frees it */
        mb_step(&s, &del, d1.x, d1.dy, GLN_MICROBATCH_NEXT);
        CHECK_OK(gln_grouped_linear_destroy(del.L));
        CHECK_OK(gln_grouped_linear_destroy(now.L));
        gln_test_free(del.main_grad);
        gln_test_free(now.main_grad);
        gln_ls_data_free(&d1);
        gln_ls_data_free(&d2);
    }
    gln_context_destroy(ctx);
}

/* ---------------------------------------------------------------- weight cache */

static void fwd_only(gln_grouped_linear_t *L, const gln_ls_setup_t *s, const gln_ls_data_t *d, void *y,
                     gln_microbatch_t mb, gln_grouped_linear_saved_t **sv) {
    gln_tensor_t xt = gln_tensor_make(s->act, s->rows, s->kin, d->x);
    gln_tensor_t yt = gln_tensor_make(s->act, s->rows, s->kout, y);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &xt;
    a.m_splits = s->splits;
    a.y = &yt;
    a.microbatch = mb;
    gln_poison(y, s->act, (size_t)s->rows * s->kout);
    CHECK_OK(gln_grouped_linear_forward(L, &a, sv));
}


/* UNSET never caches (sees changed weights at once); FIRST fills the cache; NEXT reuses it
 * until weights_updated; an in-flight saved context keeps the weights its forward used. */
static void test_weight_cache_semantics(void) {
    gln_context_t *ctx = gln_ls_cpu_ctx();
    gln_ls_setup_t s = gln_ls_base_setup(GLN_RECIPE_FP8_CURRENT, GLN_PATH_SPLIT);
    s.bias = 0;
    gln_ls_data_t d;
    gln_ls_data_make(&s, &d, 21);
    gln_grouped_linear_config_t c = gln_ls_config(&s, &d);
    gln_grouped_linear_t *L = NULL, *fresh = NULL;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &L));
    size_t ybytes = (size_t)s.rows * s.kout * gln_dtype_size(s.act), wcnt = (size_t)s.n * s.kout * s.kin;
    void *y_old = gln_test_alloc(ybytes), *y_new = gln_test_alloc(ybytes), *y = gln_test_alloc(ybytes);
    fwd_only(L, &s, &d, y_old, GLN_MICROBATCH_FIRST, NULL);
    /* change the weights (×3, not a power of two, so quantized values differ) */
    for (size_t i = 0; i < wcnt; i++) gln_store(d.w, s.param, i, 3.0 * gln_load(d.w, s.param, i));
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &fresh));
    fwd_only(fresh, &s, &d, y_new, GLN_MICROBATCH_UNSET, NULL);
    CHECK(!gln_ls_same_y(&s, y_old, y_new));

    fwd_only(L, &s, &d, y, GLN_MICROBATCH_UNSET, NULL);
    CHECK_MSG(gln_ls_same_y(&s, y, y_new), "UNSET must quantize the current weights (no caching)");
    fwd_only(L, &s, &d, y, GLN_MICROBATCH_NEXT, NULL);
    CHECK_MSG(gln_ls_same_y(&s, y, y_old), "NEXT must reuse the cache filled by FIRST");
    CHECK_OK(gln_grouped_linear_weights_updated(L));
    fwd_only(L, &s, &d, y, GLN_MICROBATCH_NEXT, NULL);
    CHECK_MSG(gln_ls_same_y(&s, y, y_new), "NEXT after weights_updated must re-quantize");

    /* in-flight saved context: forward with the new weights, then change weights and re-quantize
     * (FIRST) before its backward; its dgrad must still use the weights of its forward */
    gln_grouped_linear_saved_t *sv = NULL, *sv_ref = NULL;
    fwd_only(L, &s, &d, y, GLN_MICROBATCH_FIRST, &sv);
    fwd_only(fresh, &s, &d, y, GLN_MICROBATCH_FIRST, &sv_ref);
    for (size_t i = 0; i < wcnt; i++) gln_store(d.w, s.param, i, -gln_load(d.w, s.param, i));
    fwd_only(L, &s, &d, y, GLN_MICROBATCH_FIRST, NULL);
    CHECK_MSG(!gln_ls_same_y(&s, y, y_new), "FIRST must re-quantize");
    size_t dxb = (size_t)s.rows * s.kin * gln_dtype_size(s.act);
    void *dx1 = gln_test_alloc(dxb), *dx2 = gln_test_alloc(dxb);
    gln_tensor_t dy = gln_tensor_make(s.act, s.rows, s.kout, d.dy);
    gln_tensor_t t1 = gln_tensor_make(s.act, s.rows, s.kin, dx1), t2 = gln_tensor_make(s.act, s.rows, s.kin, dx2);
    CHECK_OK(gln_grouped_linear_backward(sv, &dy, &t1));
    CHECK_OK(gln_grouped_linear_backward(sv_ref, &dy, &t2));
    CHECK_MSG(gln_check_bitwise("dx", dx1, dx2, dxb), "in-flight dgrad changed by a re-quantization");
    CHECK_STATUS(gln_grouped_linear_destroy(L), GLN_STATUS_INVALID_STATE, "saved");
    CHECK_OK(gln_grouped_linear_saved_release(sv));
    CHECK_OK(gln_grouped_linear_saved_release(sv_ref));
    CHECK_OK(gln_grouped_linear_destroy(L));
    CHECK_OK(gln_grouped_linear_destroy(fresh));
    gln_test_free(dx1), gln_test_free(dx2);
    gln_test_free(y_old), gln_test_free(y_new), gln_test_free(y);
    gln_ls_data_free(&d);
    gln_context_destroy(ctx);
}

/* fp8_format RECIPE_DEFAULT (the config default) is TE's default per recipe: MXFP8 and FP8 block
 * scaling quantize dy as E4M3, delayed / current scaling use HYBRID (dy E5M2).  Checked through
 * dx (the dgrad reads the quantized dy): bitwise equal to the explicit format, different from
 * the other one. */
static gln_status_t dx_with_format(gln_context_t *ctx, const gln_ls_setup_t *s, gln_ls_data_t *d, gln_fp8_format_t fmt,
                                   void *dx) {
    gln_grouped_linear_config_t c = gln_ls_config(s, d);
    c.fp8_format = fmt;
    gln_grouped_linear_t *L = NULL;
    gln_status_t st = gln_grouped_linear_create(ctx, &c, &L);
    if (st != GLN_STATUS_SUCCESS) return st;
    void *y = gln_test_alloc((size_t)s->rows * s->kout * gln_dtype_size(s->act));
    gln_grouped_linear_saved_t *sv = NULL;
    fwd_only(L, s, d, y, GLN_MICROBATCH_UNSET, &sv);
    gln_tensor_t dyt = gln_tensor_make(s->act, s->rows, s->kout, d->dy);
    gln_tensor_t dxt = gln_tensor_make(s->act, s->rows, s->kin, dx);
    st = sv ? gln_grouped_linear_backward(sv, &dyt, &dxt) : GLN_STATUS_INTERNAL_ERROR;
    CHECK_OK(gln_grouped_linear_saved_release(sv));
    CHECK_OK(gln_grouped_linear_destroy(L));
    gln_test_free(y);
    return st;
}

static void test_recipe_default_fp8_format(void) {
    gln_context_t *ctx = gln_ls_cpu_ctx();
    gln_grouped_linear_config_t init = GLN_GROUPED_LINEAR_CONFIG_INIT;
    CHECK(init.fp8_format == GLN_FP8_FORMAT_RECIPE_DEFAULT);
    gln_recipe_t recipes[4] = {GLN_RECIPE_MXFP8, GLN_RECIPE_FP8_BLOCK, GLN_RECIPE_FP8_CURRENT,
                               GLN_RECIPE_FP8_DELAYED};
    for (int r = 0; r < 4; r++) {
        gln_ls_setup_t s = gln_ls_base_setup(recipes[r], GLN_PATH_SPLIT);
        gln_ls_data_t d;
        gln_ls_data_make(&s, &d, 23);
        size_t xb = (size_t)s.rows * s.kin * gln_dtype_size(s.act);
        void *dx_def = gln_test_alloc(xb), *dx_e4m3 = gln_test_alloc(xb), *dx_hyb = gln_test_alloc(xb);
        CHECK_OK(dx_with_format(ctx, &s, &d, GLN_FP8_FORMAT_RECIPE_DEFAULT, dx_def));
        CHECK_OK(dx_with_format(ctx, &s, &d, GLN_FP8_FORMAT_E4M3, dx_e4m3));
        CHECK_OK(dx_with_format(ctx, &s, &d, GLN_FP8_FORMAT_HYBRID, dx_hyb));
        int hybrid = r >= 2;
        CHECK_MSG(memcmp(dx_def, hybrid ? dx_hyb : dx_e4m3, xb) == 0,
                  "%s: the default format must be %s", gln_recipe_name(recipes[r]),
                  hybrid ? "HYBRID" : "E4M3");
        CHECK_MSG(memcmp(dx_def, hybrid ? dx_e4m3 : dx_hyb, xb) != 0,
                  "%s: E4M3 and HYBRID gave the same dx (test does not discriminate)",
                  gln_recipe_name(recipes[r]));
        gln_test_free(dx_def), gln_test_free(dx_e4m3), gln_test_free(dx_hyb);
        gln_ls_data_free(&d);
    }
    gln_context_destroy(ctx);
}

/* Owned parameters: N(0, init_std²) per expert, biases zero, distinct experts, inference
 * forward with a library-allocated y owned by the layer. */
static void test_owned_params_and_inference(void) {
    gln_context_t *ctx = gln_ls_cpu_ctx();
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = 3;
    c.in_features = 64;
    c.out_features = 64;
    c.init_std = 0.5f;
    gln_grouped_linear_t *L = NULL;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &L));
    if (!L) return;
    void *w0 = NULL, *w1 = NULL, *b0 = NULL;
    CHECK_OK(gln_grouped_linear_weight(L, 0, &w0, &b0));
    CHECK_OK(gln_grouped_linear_weight(L, 1, &w1, NULL));
    double sum = 0, sq = 0;
    size_t cnt = 64 * 64;
    for (size_t i = 0; i < cnt; i++) {
        double v = gln_load(w0, GLN_DTYPE_BF16, i);
        sum += v, sq += v * v;
    }
    /* mean within 5 standard errors (0.5/64 each), std within 10% */
    CHECK(fabs(sum / cnt) < 5 * 0.5 / 64);
    CHECK(fabs(sqrt(sq / cnt) - 0.5) < 0.05);
    CHECK(memcmp(w0, w1, cnt * 2) != 0);
    for (int i = 0; i < 64; i++) CHECK(gln_load(b0, GLN_DTYPE_BF16, (size_t)i) == 0.0);
    int64_t splits[3] = {2, 3, 0};
    uint16_t *x = gln_test_alloc(5 * 64 * 2);
    gln_tensor_t xt = gln_tensor_make(GLN_DTYPE_BF16, 5, 64, x), yt = gln_tensor_make(GLN_DTYPE_BF16, 5, 64, NULL);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &xt, a.m_splits = splits, a.y = &yt;
    CHECK_OK(gln_grouped_linear_forward(L, &a, NULL));
    CHECK(yt.data != NULL);
    CHECK_OK(gln_grouped_linear_destroy(L));
    gln_test_free(x);
    gln_context_destroy(ctx);
}


/* save_original_input re-quantizes x in backward: bitwise equal to saving the quantized copy. */
static void test_save_original_input_bitwise(void) {
    gln_context_t *ctx = gln_ls_cpu_ctx();
    for (int rc = GLN_RECIPE_FP8_CURRENT; rc <= GLN_RECIPE_FP8_BLOCK; rc++) {
        for (int p = 0; p < 2; p++) {
            gln_ls_setup_t s = gln_ls_base_setup((gln_recipe_t)rc, (gln_path_t)p);
            gln_ls_data_t d;
            gln_ls_result_t a, b;
            gln_ls_data_make(&s, &d, 31);
            gln_ls_result_alloc(&s, &a);
            gln_ls_result_alloc(&s, &b);
            gln_ls_run(ctx, &s, &d, &a, 0);
            s.save_original_input = 1;
            gln_ls_run(ctx, &s, &d, &b, 0);
            CHECK_MSG(gln_check_bitwise("wgrad", a.wg, b.wg, (size_t)s.n * s.kout * s.kin * gln_dtype_size(s.param)),
                      "%s path %d", gln_recipe_name((gln_recipe_t)rc), p);
            CHECK(gln_check_bitwise("y", a.y, b.y, (size_t)s.rows * s.kout * gln_dtype_size(s.act)));
            CHECK(gln_check_bitwise("dx", a.dx, b.dx, (size_t)s.rows * s.kin * gln_dtype_size(s.act)));
            gln_ls_result_free(&a);
            gln_ls_result_free(&b);
            gln_ls_data_free(&d);
        }
    }
    gln_context_destroy(ctx);
}

/* Delayed scaling: quantization records per-expert amax in history row 0; the forward slots are
 * updated at the end of each forward, the backward slots at the end of each backward:
 * scale = fp8_max / amax (margin 0), kept at 1 for empty experts and the unused slots. */
static void test_delayed_scaling_schedule(void) {
    gln_context_t *ctx = gln_ls_cpu_ctx();
    for (int p = 0; p < 2; p++) {
        gln_ls_setup_t s = gln_ls_base_setup(GLN_RECIPE_FP8_DELAYED, (gln_path_t)p);
        gln_ls_data_t d;
        gln_ls_data_make(&s, &d, 41);
        gln_grouped_linear_config_t c = gln_ls_config(&s, &d);
        c.amax_history_len = 4;
        gln_grouped_linear_t *L = NULL;
        CHECK_OK(gln_grouped_linear_create(ctx, &c, &L));
        if (!L) continue;
        float *fs = NULL, *fh = NULL, *bs = NULL, *bh = NULL;
        int32_t fslots = 0, bslots = 0, len = 0;
        CHECK_OK(gln_grouped_linear_fp8_state(L, 0, &fs, &fh, &fslots, &len));
        CHECK_OK(gln_grouped_linear_fp8_state(L, 1, &bs, &bh, &bslots, NULL));
        CHECK(fslots == 3 * s.n && bslots == 2 * s.n && len == 4);
        for (int i = 0; i < fslots; i++) CHECK(fs[i] == 1.0f);
        void *y = gln_test_alloc((size_t)s.rows * s.kout * 2);
        gln_tensor_t xt = gln_tensor_make(s.act, s.rows, s.kin, d.x), yt = gln_tensor_make(s.act, s.rows, s.kout, y);
        gln_tensor_t dyt = gln_tensor_make(s.act, s.rows, s.kout, d.dy);
        gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
        a.x = &xt, a.m_splits = s.splits, a.y = &yt, a.input_requires_grad = 0;
        gln_grouped_linear_saved_t *sv = NULL;
        CHECK_OK(gln_grouped_linear_forward(L, &a, &sv));
        int64_t r0 = 0;
        for (int32_t e = 0; e < s.n; e++) {
            double ax = 0, aw = 0;
            for (int64_t i = 0; i < s.splits[e] * s.kin; i++) ax = fmax(ax, fabs(gln_load(d.x, s.act, (size_t)(r0 * s.kin + i))));
            for (int64_t i = 0; i < s.kout * s.kin; i++) aw = fmax(aw, fabs(gln_load(d.w, s.param, (size_t)(e * s.kout * s.kin + i))));
            float want_x = ax > 0 ? 448.0f / (float)ax : 1.0f;
            CHECK_MSG(fs[3 * e] == want_x, "expert %d input scale %g, want %g", e, fs[3 * e], want_x);
            CHECK_MSG(fs[3 * e + 1] == 448.0f / (float)aw, "expert %d weight scale %g", e, fs[3 * e + 1]);
            CHECK(fs[3 * e + 2] == 1.0f);
            /* rolled: the recorded amax is now in the last row, row 0 is cleared */
            CHECK(fh[(len - 1) * fslots + 3 * e] == (float)ax && fh[3 * e] == 0.0f);
            CHECK(bs[2 * e] == 1.0f); /* backward not run yet */
            r0 += s.splits[e];
        }
        CHECK_OK(gln_grouped_linear_backward(sv, &dyt, NULL));
        r0 = 0;
        for (int32_t e = 0; e < s.n; e++) {
            double ad = 0;
            for (int64_t i = 0; i < s.splits[e] * s.kout; i++) ad = fmax(ad, fabs(gln_load(d.dy, s.act, (size_t)(r0 * s.kout + i))));
            float want = ad > 0 ? 57344.0f / (float)ad : 1.0f; /* dy is E5M2 under HYBRID */
            CHECK_MSG(bs[2 * e] == want, "expert %d grad scale %g, want %g", e, bs[2 * e], want);
            CHECK(bs[2 * e + 1] == 1.0f);
            r0 += s.splits[e];
        }
        CHECK_OK(gln_grouped_linear_saved_release(sv));
        CHECK_OK(gln_grouped_linear_destroy(L));
        gln_test_free(y);
        gln_ls_data_free(&d);
    }
    gln_context_destroy(ctx);
}

/* Frozen weights: no wgrad buffer, but dbias and dx still work; zero_grad clears bias grads. */
static void test_frozen_weights_and_zero_grad(void) {
    gln_context_t *ctx = gln_ls_cpu_ctx();
    gln_ls_setup_t s = gln_ls_base_setup(GLN_RECIPE_FP8_CURRENT, GLN_PATH_SPLIT);
    gln_ls_data_t d;
    gln_ls_data_make(&s, &d, 51);
    gln_grouped_linear_config_t c = gln_ls_config(&s, &d);
    c.weights_require_grad = 0;
    gln_grouped_linear_t *L = NULL;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &L));
    if (!L) return;
    gln_tensor_t xt = gln_tensor_make(s.act, s.rows, s.kin, d.x), yt = gln_tensor_make(s.act, s.rows, s.kout, NULL);
    gln_tensor_t dyt = gln_tensor_make(s.act, s.rows, s.kout, d.dy), dxt = gln_tensor_make(s.act, s.rows, s.kin, NULL);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &xt, a.m_splits = s.splits, a.y = &yt;
    gln_grouped_linear_saved_t *sv = NULL;
    CHECK_OK(gln_grouped_linear_forward(L, &a, &sv));
    CHECK_OK(gln_grouped_linear_backward(sv, &dyt, &dxt));
    CHECK(dxt.data != NULL);
    void *wg = (void *)1, *bg = NULL;
    CHECK_OK(gln_grouped_linear_grads(L, 0, &wg, &bg));
    CHECK(wg == NULL && bg != NULL);
    double db0 = 0;
    for (int64_t i = 0; i < s.splits[0]; i++) db0 += gln_load(d.dy, s.act, (size_t)(i * s.kout));
    CHECK(fabs(gln_load(bg, s.param, 0) - db0) <= GLN_REF_U_BF16 * fabs(db0) + 1e-6);
    CHECK_OK(gln_grouped_linear_zero_grad(L));
    for (int64_t i = 0; i < s.kout; i++) CHECK(gln_load(bg, s.param, (size_t)i) == 0.0);
    CHECK_OK(gln_grouped_linear_saved_release(sv));
    CHECK_OK(gln_grouped_linear_destroy(L));
    gln_ls_data_free(&d);
    gln_context_destroy(ctx);
}

GLN_TEST_MAIN(GLN_CASE(test_recipe_default_fp8_format), GLN_CASE(test_delayed_wgrad_fifo),
              GLN_CASE(test_weight_cache_semantics), GLN_CASE(test_owned_params_and_inference),
              GLN_CASE(test_save_original_input_bitwise), GLN_CASE(test_delayed_scaling_schedule),
              GLN_CASE(test_frozen_weights_and_zero_grad))

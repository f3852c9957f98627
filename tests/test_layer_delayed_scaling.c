/* The delayed-scaling state of the grouped linear layer across microbatches: three steps of its
 * amax history and scales, inference leaving it alone, always_roll, NaN propagation (delayed and
 * current scaling), and an FP32 bias under FP8 stored as bf16.  The layer is the microbatch
 * fixture of tests/harness/layer_fixture.h; values against the float64 reference of
 * tests/harness/layer_ref.c, state bitwise. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layer_fixture.h"
#include "layer_ref.h"

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
static void fwd_amaxes(const gln_fix_t *f, const gln_fix_batch_t *b, float *af) {
    int64_t r0 = 0;
    for (int e = 0; e < GLN_FIX_N; e++) {
        af[3 * e] = block_amax(b->x, f->dt, r0, gln_fix_splits[e], GLN_FIX_KIN);
        af[3 * e + 1] = block_amax(f->w[e], f->dt, 0, GLN_FIX_KOUT, GLN_FIX_KIN);
        af[3 * e + 2] = -1;
        r0 += gln_fix_splits[e];
    }
}

/* The amaxes a backward records: grad_output 2i = max|dy_i|, grad_input 2i+1 unused (-1). */
static void bwd_amaxes(const gln_fix_t *f, const gln_fix_batch_t *b, float *ab) {
    int64_t r0 = 0;
    for (int e = 0; e < GLN_FIX_N; e++) {
        ab[2 * e] = block_amax(b->dy, f->dt, r0, gln_fix_splits[e], GLN_FIX_KOUT);
        ab[2 * e + 1] = -1;
        r0 += gln_fix_splits[e];
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
    gln_fix_t f;
    if (!gln_fix_init_delayed(&f, 0, 3, 1, 0, 0)) goto out;
    const double xs[3] = {1.0, 6.0, 0.25}, dys[3] = {0.01, 0.002, 0.05};
    void *y = gln_test_alloc(GLN_FIX_M * GLN_FIX_KOUT * 2), *dx = gln_test_alloc(GLN_FIX_M * GLN_FIX_KIN * 2);
    for (int s = 0; s < 3; s++) {
        char tag[96];
        gln_fix_batch_t b;
        gln_fix_batch_make(&b, f.dt, xs[s], dys[s], 31 + s);
        gln_layer_ref_spec_t spec;
        gln_layer_ref_spec_init(&spec, &f.cfg);
        CHECK_OK(gln_layer_ref_capture_scales(&spec, f.layer));
        ds_state_t pf, pb;
        int okf = ds_snapshot(f.layer, 0, &pf), okb = okf && ds_snapshot(f.layer, 1, &pb);
        if (!okb) {
            if (okf) ds_free(&pf);
            CHECK_MSG(0, "step %d: no delayed-scaling state", s);
            gln_fix_batch_free(&b);
            break;
        }
        float af[3 * GLN_FIX_N], ab[2 * GLN_FIX_N];
        fwd_amaxes(&f, &b, af);
        bwd_amaxes(&f, &b, ab);
        gln_grouped_linear_saved_t *sv = NULL;
        CHECK_OK(gln_fix_fwd(&f, &b, GLN_MICROBATCH_FIRST, y, &sv));
        ds_predict(&pf, af, 3, GLN_FIX_N, 448.0f, 1, GLN_AMAX_ALGO_MAX);
        snprintf(tag, sizeof tag, "step %d after forward: forward state", s);
        ds_compare(f.layer, 0, &pf, tag);
        if (sv) {
            CHECK_OK(gln_fix_bwd(&f, sv, &b, dx));
            CHECK_OK(gln_grouped_linear_saved_release(sv));
        }
        ds_predict(&pb, ab, 2, GLN_FIX_N, 57344.0f, 1, GLN_AMAX_ALGO_MAX);
        snprintf(tag, sizeof tag, "step %d after backward: backward state", s);
        ds_compare(f.layer, 1, &pb, tag);
        snprintf(tag, sizeof tag, "step %d after backward: forward state untouched", s);
        ds_compare(f.layer, 0, &pf, tag);
        gln_layer_ref_out_t r;
        if (gln_fix_ref(&f, &b, &spec, &r)) {
            snprintf(tag, sizeof tag, "step %d y (scales before the step)", s);
            gln_layer_ref_check(tag, y, f.dt, r.y, r.y_err, GLN_FIX_M * GLN_FIX_KOUT);
            snprintf(tag, sizeof tag, "step %d dx (scales before the step)", s);
            gln_layer_ref_check(tag, dx, f.dt, r.dx, r.dx_err, GLN_FIX_M * GLN_FIX_KIN);
            gln_layer_ref_out_free(&r);
        }
        ds_free(&pf);
        ds_free(&pb);
        gln_fix_batch_free(&b);
    }
    gln_test_free(y);
    gln_test_free(dx);
out:
    gln_fix_free(&f);
}

/* An inference forward (saved == NULL) under FP8_DELAYED does not move the scaling state: every
 * scale and history rows 1.. stay bit for bit, the window does not roll; its amaxes are only
 * max-recorded into row 0 (TE's casts do the same; TE skips the update without gradients), and
 * enter the next training forward's update. */
static void test_delayed_inference_keeps_state(void) {
    gln_fix_t f;
    if (!gln_fix_init_delayed(&f, 1, 3, 0, 0, 0)) goto out;
    gln_fix_batch_t b1, b2;
    gln_fix_batch_make(&b1, f.dt, 1.0, 0.1, 61);
    gln_fix_batch_make(&b2, f.dt, 5.0, 0.1, 62);
    void *y = gln_test_alloc(GLN_FIX_M * GLN_FIX_KOUT * 2), *dx = gln_test_alloc(GLN_FIX_M * GLN_FIX_KIN * 2);
    gln_fix_step(&f, &b1, GLN_MICROBATCH_UNSET, y, dx); /* a non-trivial state */
    ds_state_t before, bwd_before;
    if (ds_snapshot(f.layer, 0, &before)) {
        if (ds_snapshot(f.layer, 1, &bwd_before)) {
            float af[3 * GLN_FIX_N];
            fwd_amaxes(&f, &b2, af);
            CHECK_OK(gln_fix_fwd(&f, &b2, GLN_MICROBATCH_UNSET, y, NULL));
            ds_state_t want = before;
            want.hist = malloc((size_t)before.slots * before.len * sizeof(float));
            memcpy(want.hist, before.hist, (size_t)before.slots * before.len * sizeof(float));
            for (int k = 0; k < 3 * GLN_FIX_N; k++)
                if (af[k] >= 0 && af[k] > want.hist[k]) want.hist[k] = af[k];
            ds_compare(f.layer, 0, &want, "after an inference forward: forward state");
            ds_compare(f.layer, 1, &bwd_before, "after an inference forward: backward state");
            /* the next training forward's update includes the recorded inference amaxes */
            gln_grouped_linear_saved_t *sv = NULL;
            float a1[3 * GLN_FIX_N];
            fwd_amaxes(&f, &b1, a1);
            CHECK_OK(gln_fix_fwd(&f, &b1, GLN_MICROBATCH_UNSET, y, &sv));
            want.fp8_max = malloc(want.slots * sizeof(float));
            ds_predict(&want, a1, 3, GLN_FIX_N, 448.0f, 0, GLN_AMAX_ALGO_MAX);
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
    gln_fix_batch_free(&b1);
    gln_fix_batch_free(&b2);
out:
    gln_fix_free(&f);
}

/* Two FP8_DELAYED layers with history 3 and margin 0: `opt` with the given always_roll /
 * amax_nan_propagate, `def` with the defaults (both fixtures must be freed). */
static int fix_pair_delayed(gln_fix_t *opt, gln_fix_t *def, int always_roll, int nan_propagate) {
    int ok = gln_fix_init_delayed(opt, 0, 3, 0, always_roll, nan_propagate);
    return gln_fix_init_delayed(def, 0, 3, 0, 0, 0) && ok;
}

/* Hist[row][slot] of a state snapshot. */
static float ds_hist(const ds_state_t *s, int row, int slot) { return s->hist[row * s->slots + slot]; }

/* cfg.always_roll: a step whose newest amax is 0 for expert 0 (all its x and dy rows zero)
 * rolls that slot's history under always_roll and leaves it alone under TE's bulk rule.  (A roll
 * moves row 0 to the last row, as TE's torch.roll(-1): after step 1 the history is [0, 0, a1];
 * step 2 gives [0, a1, 0] rolled, [0, 0, a1] untouched.)  The whole state equals the
 * prediction of each rule. */
static void test_delayed_always_roll(void) {
    gln_fix_t fr, fd;
    if (!fix_pair_delayed(&fr, &fd, 1, 0)) goto out;
    gln_fix_batch_t b1, b2;
    gln_fix_batch_make(&b1, fr.dt, 1.0, 0.1, 81);
    gln_fix_batch_make(&b2, fr.dt, 2.0, 0.2, 82);
    memset(b2.x, 0, (size_t)gln_fix_splits[0] * GLN_FIX_KIN * gln_dtype_size(fr.dt));  /* expert 0: x = 0 */
    memset(b2.dy, 0, (size_t)gln_fix_splits[0] * GLN_FIX_KOUT * gln_dtype_size(fr.dt)); /* and dy = 0 */
    void *y = gln_test_alloc(GLN_FIX_M * GLN_FIX_KOUT * 2), *dx = gln_test_alloc(GLN_FIX_M * GLN_FIX_KIN * 2);
    const float a1 = block_amax(b1.x, fr.dt, 0, gln_fix_splits[0], GLN_FIX_KIN);
    gln_fix_t *fs[2] = {&fr, &fd};
    for (int k = 0; k < 2; k++) {
        gln_fix_t *f = fs[k];
        const int roll = f->cfg.always_roll;
        ds_state_t pf, pb;
        gln_fix_step(f, &b1, GLN_MICROBATCH_UNSET, y, dx);
        if (!ds_snapshot(f->layer, 0, &pf)) continue;
        if (!ds_snapshot(f->layer, 1, &pb)) {
            ds_free(&pf);
            continue;
        }
        float af[3 * GLN_FIX_N], ab[2 * GLN_FIX_N];
        fwd_amaxes(f, &b2, af);
        bwd_amaxes(f, &b2, ab);
        CHECK(af[0] == 0.0f && ab[0] == 0.0f);
        gln_fix_step(f, &b2, GLN_MICROBATCH_UNSET, y, dx);
        ds_predict_ex(&pf, af, 3, GLN_FIX_N, 448.0f, 0, GLN_AMAX_ALGO_MAX, roll);
        ds_predict_ex(&pb, ab, 2, GLN_FIX_N, 57344.0f, 0, GLN_AMAX_ALGO_MAX, roll);
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
    gln_fix_batch_free(&b1);
    gln_fix_batch_free(&b2);
out:
    gln_fix_free(&fr);
    gln_fix_free(&fd);
}

/* cfg.amax_nan_propagate under FP8_DELAYED: a NaN in expert 0's x reaches the cast's amax, the
 * history (row 0, then rolled) and the window max, so expert 0's input scale stays 1 while the
 * NaN is in the window; by default the NaN is ignored everywhere and the scale follows the
 * finite amaxes (hand-derived: 448 / max of the two steps' finite amaxes). */
static void test_delayed_nan_propagate(void) {
    gln_fix_t fp, fd;
    if (!fix_pair_delayed(&fp, &fd, 0, 1)) goto out;
    gln_fix_batch_t b1, b2;
    gln_fix_batch_make(&b1, fp.dt, 1.0, 0.1, 91);
    gln_fix_batch_make(&b2, fp.dt, 3.0, 0.1, 92);
    gln_store(b1.x, fp.dt, 2 * GLN_FIX_KIN + 5, NAN); /* expert 0, row 2 */
    const float a1 = block_amax(b1.x, fp.dt, 0, gln_fix_splits[0], GLN_FIX_KIN); /* finite max (NaN compares false) */
    const float a2 = block_amax(b2.x, fp.dt, 0, gln_fix_splits[0], GLN_FIX_KIN);
    void *y = gln_test_alloc(GLN_FIX_M * GLN_FIX_KOUT * 2);
    gln_fix_t *fs[2] = {&fp, &fd};
    for (int k = 0; k < 2; k++) {
        gln_fix_t *f = fs[k];
        const int prop = f->cfg.amax_nan_propagate;
        for (int s = 0; s < 2; s++) {
            gln_grouped_linear_saved_t *sv = NULL;
            CHECK_OK(gln_fix_fwd(f, s ? &b2 : &b1, GLN_MICROBATCH_UNSET, y, &sv));
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
        CHECK_MSG(got.scale[6] == 448.0f / fmaxf(block_amax(b1.x, fp.dt, 7, gln_fix_splits[2], GLN_FIX_KIN),
                                                 block_amax(b2.x, fp.dt, 7, gln_fix_splits[2], GLN_FIX_KIN)),
                  "nan_propagate %d: expert 2's input scale %.9g", prop, got.scale[6]);
        ds_free(&got);
    }
    gln_test_free(y);
    gln_fix_batch_free(&b1);
    gln_fix_batch_free(&b2);
out:
    gln_fix_free(&fp);
    gln_fix_free(&fd);
}

/* cfg.amax_nan_propagate reaches the casts of a non-delayed recipe: under FP8_CURRENT a NaN in
 * expert 0's x makes that member's scale 1, which is the scale an amax of exactly 448 gives.  So
 * every y row but the NaN one equals, bit for bit, the default layer's y for the same x with
 * the NaN replaced by 448; the default layer fed the NaN (ignored: scale 448 / finite amax)
 * gives different expert-0 rows. */
static void test_current_nan_propagate(void) {
    gln_fix_t fp, fd;
    int ok = gln_fix_init(&fd, GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_BF16, 0, 0, 0);
    gln_fix_setup(&fp, GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_BF16, 0, 0, 0);
    fp.cfg.amax_nan_propagate = 1;
    ok = gln_fix_create(&fp) && ok;
    if (!ok) goto out;
    gln_fix_batch_t bn, b448;
    gln_fix_batch_make(&bn, fp.dt, 1.0, 0.1, 93);
    gln_fix_batch_make(&b448, fp.dt, 1.0, 0.1, 93);
    const size_t nan_at = 2 * GLN_FIX_KIN + 5, yrow = GLN_FIX_KOUT * 2;
    gln_store(bn.x, fp.dt, nan_at, NAN);
    gln_store(b448.x, fp.dt, nan_at, 448.0);
    CHECK(block_amax(b448.x, fp.dt, 0, gln_fix_splits[0], GLN_FIX_KIN) == 448.0f);
    void *yp = gln_test_alloc(GLN_FIX_M * yrow), *yd = gln_test_alloc(GLN_FIX_M * yrow), *yi = gln_test_alloc(GLN_FIX_M * yrow);
    gln_fix_fwd_infer(&fp, &bn, GLN_MICROBATCH_UNSET, yp);
    gln_fix_fwd_infer(&fd, &b448, GLN_MICROBATCH_UNSET, yd);
    gln_fix_fwd_infer(&fd, &bn, GLN_MICROBATCH_UNSET, yi);
    gln_check_bitwise("nan_propagate y rows 0-1 = y(NaN -> 448) rows 0-1", yp, yd, 2 * yrow);
    gln_check_bitwise("nan_propagate y rows 3.. = y(NaN -> 448) rows 3..", (char *)yp + 3 * yrow,
                      (char *)yd + 3 * yrow, (GLN_FIX_M - 3) * yrow);
    CHECK_MSG(memcmp(yp, yi, 2 * yrow) != 0, "the default layer (NaN ignored) gave the propagating layer's y");
    gln_test_free(yp);
    gln_test_free(yd);
    gln_test_free(yi);
    gln_fix_batch_free(&bn);
    gln_fix_batch_free(&b448);
out:
    gln_fix_free(&fp);
    gln_fix_free(&fd);
}

/* FP8 recipe with FP32 activations: the bias is added as bf16, as in TE (its FP8 GEMM takes a 16-bit bias).  A bias
 * that is not bf16-representable gives y bit for bit equal to the same layer with the bias
 * rounded to bf16 beforehand, and matches the reference (which rounds it the same way); without
 * FP8 the FP32 bias is added as is. */
static void test_fp8_fp32_bias_is_bf16(void) {
    gln_recipe_t recipes[3] = {GLN_RECIPE_FP8_CURRENT, GLN_RECIPE_MXFP8, GLN_RECIPE_NONE};
    for (int r = 0; r < 3; r++) {
        gln_fix_t fa, fb;
        int ok = gln_fix_init(&fa, recipes[r], GLN_DTYPE_FP32, 0, 0, 1);
        ok = gln_fix_init(&fb, recipes[r], GLN_DTYPE_FP32, 0, 0, 1) && ok;
        if (ok) {
            int exact = 1;
            for (int e = 0; e < GLN_FIX_N; e++)
                for (int j = 0; j < GLN_FIX_KOUT; j++) {
                    float v = 0.1f + 0.00123f * (float)(j + 7 * e); /* not bf16-representable */
                    ((float *)fa.b[e])[j] = v;
                    ((float *)fb.b[e])[j] = gln_bf16_to_fp32(gln_fp32_to_bf16(v));
                    if (gln_bf16_to_fp32(gln_fp32_to_bf16(v)) != v) exact = 0;
                }
            CHECK_MSG(!exact, "test bias values are all bf16-representable");
            gln_fix_batch_t b;
            gln_fix_batch_make(&b, GLN_DTYPE_FP32, 1.0, 0.1, 71);
            size_t yb = GLN_FIX_M * GLN_FIX_KOUT * 4;
            void *ya = gln_test_alloc(yb), *yr = gln_test_alloc(yb);
            gln_fix_fwd_infer(&fa, &b, GLN_MICROBATCH_UNSET, ya);
            gln_fix_fwd_infer(&fb, &b, GLN_MICROBATCH_UNSET, yr);
            if (recipes[r] != GLN_RECIPE_NONE) {
                gln_check_bitwise("FP8 + FP32 activations: y with bias b equals y with bf16(b)", ya, yr, yb);
                gln_fix_check_y_ref(&fa, &b, ya, "FP8 + FP32 activations: y with a bf16 bias");
            } else {
                CHECK_MSG(memcmp(ya, yr, yb) != 0, "recipe none: the FP32 bias must not be rounded");
                gln_fix_check_y_ref(&fa, &b, ya, "recipe none: y with the FP32 bias");
            }
            gln_test_free(ya);
            gln_test_free(yr);
            gln_fix_batch_free(&b);
        }
        gln_fix_free(&fa);
        gln_fix_free(&fb);
    }
}

GLN_FIX_BOTH_PATHS(test_delayed_scaling_three_steps)
GLN_FIX_BOTH_PATHS(test_delayed_inference_keeps_state)
GLN_FIX_BOTH_PATHS(test_fp8_fp32_bias_is_bf16)
GLN_FIX_BOTH_PATHS(test_delayed_always_roll)
GLN_FIX_BOTH_PATHS(test_delayed_nan_propagate)
GLN_FIX_BOTH_PATHS(test_current_nan_propagate)

GLN_TEST_MAIN(GLN_FIX_BOTH(test_delayed_scaling_three_steps),
              GLN_FIX_BOTH(test_delayed_inference_keeps_state), GLN_FIX_BOTH(test_fp8_fp32_bias_is_bf16),
              GLN_FIX_BOTH(test_delayed_always_roll), GLN_FIX_BOTH(test_delayed_nan_propagate),
              GLN_FIX_BOTH(test_current_nan_propagate))

/* Microbatch semantics of the grouped linear layer (docs/design.md): main_grad overwrite /
 * accumulate, gradient accumulation and zero_grad, the delayed-wgrad FIFO, the quantized-weight
 * cache keyed by microbatch flag and weight version, and two forwards in flight with backwards in
 * reverse order (the delayed-scaling state across microbatches: test_layer_delayed_scaling.c).
 *
 * The layer is the microbatch fixture of tests/harness/layer_fixture.h.  Values are checked
 * against the float64 reference of tests/harness/layer_ref.c with its FP32-accumulation bound
 * (see layer_ref.h); cache checks are bitwise. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layer_fixture.h"
#include "layer_ref.h"

/* ---------------------------------------------------------------- main_grad */

/* FIRST overwrites main_grad (pre-filled with NaN: not even read), NEXT accumulates. */
static void test_fused_first_then_next(void) {
    gln_fix_t f;
    if (!gln_fix_init(&f, GLN_RECIPE_NONE, GLN_DTYPE_FP32, 1, 0, 1)) goto out;
    gln_fix_batch_t b1, b2;
    gln_fix_batch_make(&b1, f.dt, 1.0, 0.1, 1);
    gln_fix_batch_make(&b2, f.dt, 2.0, 0.3, 2);
    void *y = gln_test_alloc(GLN_FIX_M * GLN_FIX_KOUT * 4), *dx = gln_test_alloc(GLN_FIX_M * GLN_FIX_KIN * 4);
    gln_layer_ref_out_t r1, r2;
    gln_fix_mg_fill(&f, NAN, 0);
    if (gln_fix_step(&f, &b1, GLN_MICROBATCH_FIRST, y, dx) && gln_fix_ref(&f, &b1, NULL, &r1)) {
        gln_fix_check_mg(&f, r1.dw, r1.dw_err, "FIRST");
        gln_layer_ref_check("FIRST y", y, f.dt, r1.y, r1.y_err, GLN_FIX_M * GLN_FIX_KOUT);
        gln_layer_ref_check("FIRST dx", dx, f.dt, r1.dx, r1.dx_err, GLN_FIX_M * GLN_FIX_KIN);
        if (gln_fix_step(&f, &b2, GLN_MICROBATCH_NEXT, y, dx) && gln_fix_ref(&f, &b2, NULL, &r2)) {
            gln_fix_acc_into(r1.dw, r1.dw_err, r2.dw, r2.dw_err, GLN_FIX_N * GLN_FIX_WS);
            gln_fix_check_mg(&f, r1.dw, r1.dw_err, "FIRST+NEXT");
            gln_layer_ref_check("NEXT y", y, f.dt, r2.y, r2.y_err, GLN_FIX_M * GLN_FIX_KOUT);
            gln_layer_ref_out_free(&r2);
        }
        gln_layer_ref_out_free(&r1);
    }
    gln_test_free(y);
    gln_test_free(dx);
    gln_fix_batch_free(&b1);
    gln_fix_batch_free(&b2);
out:
    gln_fix_free(&f);
}

/* UNSET with fusion accumulates into whatever main_grad holds. */
static void test_fused_unset_accumulates(void) {
    gln_fix_t f;
    if (!gln_fix_init(&f, GLN_RECIPE_NONE, GLN_DTYPE_FP32, 1, 0, 0)) goto out;
    gln_fix_batch_t b;
    gln_fix_batch_make(&b, f.dt, 1.0, 0.1, 3);
    void *y = gln_test_alloc(GLN_FIX_M * GLN_FIX_KOUT * 4), *dx = gln_test_alloc(GLN_FIX_M * GLN_FIX_KIN * 4);
    gln_fix_mg_fill(&f, 0.5, 9);
    double *p = malloc(GLN_FIX_N * GLN_FIX_WS * sizeof(double)), *pe = calloc(GLN_FIX_N * GLN_FIX_WS, sizeof(double));
    for (int e = 0; e < GLN_FIX_N; e++)
        for (int j = 0; j < GLN_FIX_WS; j++) p[e * GLN_FIX_WS + j] = f.mg[e][j];
    gln_layer_ref_out_t r;
    if (gln_fix_step(&f, &b, GLN_MICROBATCH_UNSET, y, dx) && gln_fix_ref(&f, &b, NULL, &r)) {
        gln_fix_acc_into(p, pe, r.dw, r.dw_err, GLN_FIX_N * GLN_FIX_WS);
        gln_fix_check_mg(&f, p, pe, "UNSET");
        gln_layer_ref_out_free(&r);
    }
    free(p);
    free(pe);
    gln_test_free(y);
    gln_test_free(dx);
    gln_fix_batch_free(&b);
out:
    gln_fix_free(&f);
}

/* Without fusion the layer's gradient buffers accumulate over backwards; zero_grad resets. */
static void test_nonfused_accumulate_zero_grad(void) {
    gln_fix_t f;
    if (!gln_fix_init(&f, GLN_RECIPE_NONE, GLN_DTYPE_FP32, 0, 0, 1)) goto out;
    gln_fix_batch_t b1, b2, b3;
    gln_fix_batch_make(&b1, f.dt, 1.0, 0.1, 4);
    gln_fix_batch_make(&b2, f.dt, 0.5, 0.2, 5);
    gln_fix_batch_make(&b3, f.dt, 1.5, 0.05, 6);
    void *y = gln_test_alloc(GLN_FIX_M * GLN_FIX_KOUT * 4), *dx = gln_test_alloc(GLN_FIX_M * GLN_FIX_KIN * 4);
    gln_layer_ref_out_t r1, r2, r3;
    CHECK_OK(gln_grouped_linear_zero_grad(f.layer));
    if (!gln_fix_ref(&f, &b1, NULL, &r1)) goto free_batches;
    if (!gln_fix_ref(&f, &b2, NULL, &r2)) goto free_r1;
    if (!gln_fix_ref(&f, &b3, NULL, &r3)) goto free_r2;
    if (gln_fix_step(&f, &b1, GLN_MICROBATCH_UNSET, y, dx) && gln_fix_step(&f, &b2, GLN_MICROBATCH_UNSET, y, dx)) {
        gln_fix_acc_into(r1.dw, r1.dw_err, r2.dw, r2.dw_err, GLN_FIX_N * GLN_FIX_WS);
        gln_fix_acc_into(r1.db, r1.db_err, r2.db, r2.db_err, GLN_FIX_N * GLN_FIX_KOUT);
        gln_fix_check_grads(&f, r1.dw, r1.dw_err, r1.db, r1.db_err, "two backwards");
    }
    CHECK_OK(gln_grouped_linear_zero_grad(f.layer));
    for (int e = 0; e < GLN_FIX_N; e++) {
        void *wg = NULL, *bg = NULL;
        CHECK_OK(gln_grouped_linear_grads(f.layer, e, &wg, &bg));
        int bad = 0;
        for (int j = 0; wg && j < GLN_FIX_WS; j++) bad += ((float *)wg)[j] != 0.0f;
        for (int j = 0; bg && j < GLN_FIX_KOUT; j++) bad += ((float *)bg)[j] != 0.0f;
        CHECK_MSG(wg && bg && !bad, "zero_grad: expert %d has %d nonzero gradient elements", e, bad);
    }
    if (gln_fix_step(&f, &b3, GLN_MICROBATCH_UNSET, y, dx))
        gln_fix_check_grads(&f, r3.dw, r3.dw_err, r3.db, r3.db_err, "after zero_grad");
    gln_layer_ref_out_free(&r3);
free_r2:
    gln_layer_ref_out_free(&r2);
free_r1:
    gln_layer_ref_out_free(&r1);
free_batches:
    gln_test_free(y);
    gln_test_free(dx);
    gln_fix_batch_free(&b1);
    gln_fix_batch_free(&b2);
    gln_fix_batch_free(&b3);
out:
    gln_fix_free(&f);
}

/* The layer's bias gradients against the reference db (fused layers: only db is checked). */
static void check_db(gln_fix_t *f, const double *db, const double *dbe, const char *tag) {
    char what[160];
    for (int e = 0; e < GLN_FIX_N; e++) {
        void *bg = NULL;
        CHECK_OK(gln_grouped_linear_grads(f->layer, e, NULL, &bg));
        snprintf(what, sizeof what, "%s db[%d]", tag, e);
        CHECK_MSG(bg != NULL, "%s is NULL", what);
        if (bg) gln_layer_ref_check(what, bg, f->dt, db + e * GLN_FIX_KOUT, dbe + e * GLN_FIX_KOUT, GLN_FIX_KOUT);
    }
}

/* docs/design.md, "Gradients": FIRST overwrites a fused main_grad but not the bias gradients,
 * which add up over every backward until zero_grad (which zeroes them and leaves the caller's main_grad
 * alone); with delay_wgrad_compute dbias is already there after backward (before backward_dw),
 * while main_grad is not touched until backward_dw. */
static void test_dbias_accumulation_rules(void) {
    for (int delay = 0; delay < 2; delay++) {
        gln_fix_t f;
        if (!gln_fix_init(&f, GLN_RECIPE_NONE, GLN_DTYPE_FP32, 1, delay, 1)) {
            gln_fix_free(&f);
            continue;
        }
        gln_fix_batch_t b1, b2;
        gln_fix_batch_make(&b1, f.dt, 1.0, 0.1, 101);
        gln_fix_batch_make(&b2, f.dt, 2.0, 0.3, 102);
        void *y = gln_test_alloc(GLN_FIX_M * GLN_FIX_KOUT * 4), *dx = gln_test_alloc(GLN_FIX_M * GLN_FIX_KIN * 4);
        gln_layer_ref_out_t r1, r2;
        gln_fix_mg_fill(&f, NAN, 0);
        if (gln_fix_ref(&f, &b1, NULL, &r1)) {
            if (gln_fix_ref(&f, &b2, NULL, &r2)) {
                gln_fix_step(&f, &b1, GLN_MICROBATCH_FIRST, y, dx);
                check_db(&f, r1.db, r1.db_err, delay ? "delayed, after backward 1 (before backward_dw)" : "after backward 1");
                if (delay) {
                    CHECK_MSG(isnan(f.mg[0][0]), "delayed: main_grad written before backward_dw");
                    CHECK_OK(gln_grouped_linear_backward_dw(f.layer));
                }
                gln_fix_step(&f, &b2, GLN_MICROBATCH_FIRST, y, dx);
                if (delay) CHECK_OK(gln_grouped_linear_backward_dw(f.layer));
                gln_fix_check_mg(&f, r2.dw, r2.dw_err, "FIRST twice: main_grad = the second microbatch's wgrad");
                gln_fix_acc_into(r1.db, r1.db_err, r2.db, r2.db_err, GLN_FIX_N * GLN_FIX_KOUT);
                check_db(&f, r1.db, r1.db_err, "FIRST twice: db = the sum of both microbatches");
                CHECK_OK(gln_grouped_linear_zero_grad(f.layer));
                memset(r1.db, 0, GLN_FIX_N * GLN_FIX_KOUT * sizeof(double));
                memset(r1.db_err, 0, GLN_FIX_N * GLN_FIX_KOUT * sizeof(double));
                check_db(&f, r1.db, r1.db_err, "after zero_grad");
                gln_fix_check_mg(&f, r2.dw, r2.dw_err, "zero_grad leaves the caller's main_grad alone");
                gln_layer_ref_out_free(&r2);
            }
            gln_layer_ref_out_free(&r1);
        }
        gln_test_free(y);
        gln_test_free(dx);
        gln_fix_batch_free(&b1);
        gln_fix_batch_free(&b2);
        gln_fix_free(&f);
    }
}

/* ---------------------------------------------------------------- delayed wgrad */

static int mg_equal(gln_fix_t *f, float *const *snap) {
    for (int e = 0; e < GLN_FIX_N; e++)
        if (memcmp(f->mg[e], snap[e], GLN_FIX_WS * sizeof(float)) != 0) return 0;
    return 1;
}

/* backward leaves main_grad alone; backward_dw runs the queued wgrads oldest first. */
static void test_delayed_wgrad_fifo(void) {
    gln_fix_t f;
    if (!gln_fix_init(&f, GLN_RECIPE_NONE, GLN_DTYPE_FP32, 1, 1, 1)) goto out;
    gln_fix_batch_t b1, b2;
    gln_fix_batch_make(&b1, f.dt, 1.0, 0.1, 11);
    gln_fix_batch_make(&b2, f.dt, 3.0, 0.7, 12);
    void *y = gln_test_alloc(GLN_FIX_M * GLN_FIX_KOUT * 4), *dx = gln_test_alloc(GLN_FIX_M * GLN_FIX_KIN * 4);
    float *snap[GLN_FIX_N];
    gln_fix_mg_fill(&f, 0.25, 77);
    for (int e = 0; e < GLN_FIX_N; e++) {
        snap[e] = malloc(GLN_FIX_WS * sizeof(float));
        memcpy(snap[e], f.mg[e], GLN_FIX_WS * sizeof(float));
    }
    gln_layer_ref_out_t r1, r2;
    if (!gln_fix_ref(&f, &b1, NULL, &r1)) goto free_all;
    if (!gln_fix_ref(&f, &b2, NULL, &r2)) goto free_r1;
    CHECK_STATUS(gln_grouped_linear_backward_dw(f.layer), GLN_STATUS_INVALID_STATE, NULL);
    if (!gln_fix_step(&f, &b1, GLN_MICROBATCH_FIRST, y, dx)) goto free_r2;
    CHECK_MSG(mg_equal(&f, snap), "main_grad changed by backward with delay_wgrad_compute");
    gln_layer_ref_check("delayed: dx 1", dx, f.dt, r1.dx, r1.dx_err, GLN_FIX_M * GLN_FIX_KIN);
    if (!gln_fix_step(&f, &b2, GLN_MICROBATCH_NEXT, y, dx)) goto free_r2;
    CHECK_MSG(mg_equal(&f, snap), "main_grad changed by the second backward (delayed)");
    gln_layer_ref_check("delayed: dx 2", dx, f.dt, r2.dx, r2.dx_err, GLN_FIX_M * GLN_FIX_KIN);
    CHECK_OK(gln_grouped_linear_backward_dw(f.layer));
    CHECK_MSG(!mg_equal(&f, snap), "main_grad unchanged after backward_dw");
    /* The oldest item (FIRST: overwrite) must run first: main_grad = dW1, not prefill + dW2. */
    gln_fix_check_mg(&f, r1.dw, r1.dw_err, "backward_dw #1 (FIFO: microbatch 1)");
    CHECK_OK(gln_grouped_linear_backward_dw(f.layer));
    gln_fix_acc_into(r1.dw, r1.dw_err, r2.dw, r2.dw_err, GLN_FIX_N * GLN_FIX_WS);
    gln_fix_check_mg(&f, r1.dw, r1.dw_err, "backward_dw #2");
    CHECK_STATUS(gln_grouped_linear_backward_dw(f.layer), GLN_STATUS_INVALID_STATE, NULL);
    /* Bias gradients: both microbatches, whichever of backward / backward_dw produced them. */
    gln_fix_acc_into(r1.db, r1.db_err, r2.db, r2.db_err, GLN_FIX_N * GLN_FIX_KOUT);
    for (int e = 0; e < GLN_FIX_N; e++) {
        void *wg = NULL, *bg = NULL;
        CHECK_OK(gln_grouped_linear_grads(f.layer, e, &wg, &bg));
        CHECK(bg != NULL);
        if (bg) gln_layer_ref_check("delayed: db", bg, f.dt, r1.db + e * GLN_FIX_KOUT, r1.db_err + e * GLN_FIX_KOUT, GLN_FIX_KOUT);
    }
free_r2:
    gln_layer_ref_out_free(&r2);
free_r1:
    gln_layer_ref_out_free(&r1);
free_all:
    for (int e = 0; e < GLN_FIX_N; e++) free(snap[e]);
    gln_test_free(y);
    gln_test_free(dx);
    gln_fix_batch_free(&b1);
    gln_fix_batch_free(&b2);
out:
    gln_fix_free(&f);
}

/* A layer without delay_wgrad_compute has an empty queue. */
static void test_backward_dw_empty_queue(void) {
    gln_fix_t f;
    if (gln_fix_init(&f, GLN_RECIPE_NONE, GLN_DTYPE_BF16, 0, 0, 0))
        CHECK_STATUS(gln_grouped_linear_backward_dw(f.layer), GLN_STATUS_INVALID_STATE, NULL);
    gln_fix_free(&f);
}

/* ---------------------------------------------------------------- weight cache */

/* FP8 weight caching (TE's is_first_microbatch): UNSET never caches (a weight changed without
 * gln_grouped_linear_weights_updated is seen at once); FIRST re-quantizes into the cache; NEXT
 * reuses it (even when the caller changed the weights without telling the layer) and UNSET does
 * not disturb it; after weights_updated NEXT re-quantizes. */
static void test_weight_cache(void) {
    gln_fix_t f;
    if (!gln_fix_init(&f, GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_BF16, 0, 0, 1)) {
        gln_fix_free(&f);
        return;
    }
    gln_fix_batch_t b;
    gln_fix_batch_make(&b, f.dt, 1.0, 0.1, 21);
    size_t yb = GLN_FIX_M * GLN_FIX_KOUT * 2;
    void *y1 = gln_test_alloc(yb), *y2 = gln_test_alloc(yb), *y3 = gln_test_alloc(yb);
    /* A fresh layer with NEXT has nothing cached: it must quantize. */
    gln_fix_fwd_infer(&f, &b, GLN_MICROBATCH_NEXT, y1);
    gln_fix_check_y_ref(&f, &b, y1, "NEXT on a fresh layer");
    gln_fix_fwd_infer(&f, &b, GLN_MICROBATCH_FIRST, y1);
    gln_fix_check_y_ref(&f, &b, y1, "FIRST");
    gln_fix_fill_weights(&f, 0.08, 300); /* the caller changes W without telling the layer */
    gln_fix_fwd_infer(&f, &b, GLN_MICROBATCH_NEXT, y2);
    gln_check_bitwise("NEXT after a weight change reuses the cache: y", y1, y2, yb);
    gln_fix_fwd_infer(&f, &b, GLN_MICROBATCH_UNSET, y2);
    gln_fix_check_y_ref(&f, &b, y2, "UNSET after a weight change without weights_updated sees the new W");
    CHECK_MSG(memcmp(y1, y2, yb) != 0, "UNSET after a weight change gave the old y");
    gln_fix_fwd_infer(&f, &b, GLN_MICROBATCH_NEXT, y3);
    gln_check_bitwise("UNSET leaves the cache alone: NEXT still reuses it: y", y1, y3, yb);
    CHECK_OK(gln_grouped_linear_weights_updated(f.layer));
    gln_fix_fwd_infer(&f, &b, GLN_MICROBATCH_NEXT, y3);
    gln_fix_check_y_ref(&f, &b, y3, "NEXT after weights_updated re-quantizes");
    gln_check_bitwise("NEXT after weights_updated equals UNSET: y", y2, y3, yb);
    gln_fix_fill_weights(&f, 0.03, 400);
    gln_fix_fwd_infer(&f, &b, GLN_MICROBATCH_FIRST, y3);
    gln_fix_check_y_ref(&f, &b, y3, "FIRST after a weight change refreshes");
    CHECK_MSG(memcmp(y2, y3, yb) != 0, "FIRST after a weight change gave the old y");
    gln_fix_fill_weights(&f, 0.06, 500);
    gln_fix_fwd_infer(&f, &b, GLN_MICROBATCH_UNSET, y1);
    gln_fix_check_y_ref(&f, &b, y1, "UNSET right after another change");
    gln_fix_fwd_infer(&f, &b, GLN_MICROBATCH_UNSET, y2);
    gln_check_bitwise("UNSET twice without a change: y", y1, y2, yb);
    CHECK_MSG(gln_guard_ok(y1) && gln_guard_ok(y2) && gln_guard_ok(y3), "guard after y overwritten");
    gln_test_free(y1);
    gln_test_free(y2);
    gln_test_free(y3);
    gln_fix_batch_free(&b);
    gln_fix_free(&f);
}

/* ---------------------------------------------------------------- pipeline schedule */

/* f1 f2 b2 b1 (two forwards in flight) equals f1 b1 f2 b2: y and dx bit for bit; main_grad
 * and db of both schedules within the accumulation bound of the float64 sum of the two
 * microbatches (not bitwise: with per-tensor FP8 the wgrad GEMM folds alpha·Σ into main_grad
 * with one fused multiply-add, so fl(a + α·b) and fl(b + α·a) may differ in the last bit).
 * Also: a second backward on one saved context is INVALID_STATE. */
static void test_pipeline_reverse_backward(void) {
    gln_fix_t fs, fp;
    int ok = gln_fix_init(&fs, GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_FP32, 1, 0, 1);
    ok = gln_fix_init(&fp, GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_FP32, 1, 0, 1) && ok;
    if (!ok) goto out;
    gln_fix_batch_t b1, b2;
    gln_fix_batch_make(&b1, GLN_DTYPE_FP32, 1.0, 0.1, 41);
    gln_fix_batch_make(&b2, GLN_DTYPE_FP32, 2.5, 0.02, 42);
    size_t yb = GLN_FIX_M * GLN_FIX_KOUT * 4, xb = GLN_FIX_M * GLN_FIX_KIN * 4;
    void *ys[2], *dxs[2], *yp[2], *dxp[2];
    for (int i = 0; i < 2; i++) {
        ys[i] = gln_test_alloc(yb);
        yp[i] = gln_test_alloc(yb);
        dxs[i] = gln_test_alloc(xb);
        dxp[i] = gln_test_alloc(xb);
    }
    gln_fix_mg_fill(&fs, 0, 0);
    gln_fix_mg_fill(&fp, 0, 0);
    gln_fix_step(&fs, &b1, GLN_MICROBATCH_UNSET, ys[0], dxs[0]);
    gln_fix_step(&fs, &b2, GLN_MICROBATCH_UNSET, ys[1], dxs[1]);
    gln_grouped_linear_saved_t *s1 = NULL, *s2 = NULL;
    CHECK_OK(gln_fix_fwd(&fp, &b1, GLN_MICROBATCH_UNSET, yp[0], &s1));
    CHECK_OK(gln_fix_fwd(&fp, &b2, GLN_MICROBATCH_UNSET, yp[1], &s2));
    if (s1 && s2) {
        CHECK_OK(gln_fix_bwd(&fp, s2, &b2, dxp[1]));
        CHECK_OK(gln_fix_bwd(&fp, s1, &b1, dxp[0]));
        void *scratch = gln_test_alloc(xb);
        CHECK_STATUS(gln_fix_bwd(&fp, s1, &b1, scratch), GLN_STATUS_INVALID_STATE, NULL);
        gln_test_free(scratch);
    }
    if (s1) CHECK_OK(gln_grouped_linear_saved_release(s1));
    if (s2) CHECK_OK(gln_grouped_linear_saved_release(s2));
    gln_check_bitwise("pipeline y1", ys[0], yp[0], yb);
    gln_check_bitwise("pipeline y2", ys[1], yp[1], yb);
    gln_check_bitwise("pipeline dx1", dxs[0], dxp[0], xb);
    gln_check_bitwise("pipeline dx2", dxs[1], dxp[1], xb);
    gln_layer_ref_out_t r1, r2;
    if (gln_fix_ref(&fs, &b1, NULL, &r1)) {
        if (gln_fix_ref(&fs, &b2, NULL, &r2)) {
            gln_fix_acc_into(r1.dw, r1.dw_err, r2.dw, r2.dw_err, GLN_FIX_N * GLN_FIX_WS);
            gln_fix_acc_into(r1.db, r1.db_err, r2.db, r2.db_err, GLN_FIX_N * GLN_FIX_KOUT);
            gln_fix_check_mg(&fs, r1.dw, r1.dw_err, "sequential");
            gln_fix_check_mg(&fp, r1.dw, r1.dw_err, "pipelined");
            for (int e = 0; e < GLN_FIX_N; e++) {
                void *w1, *b1g, *w2, *b2g;
                CHECK_OK(gln_grouped_linear_grads(fs.layer, e, &w1, &b1g));
                CHECK_OK(gln_grouped_linear_grads(fp.layer, e, &w2, &b2g));
                CHECK(b1g && b2g);
                if (b1g) gln_layer_ref_check("sequential db", b1g, fs.dt, r1.db + e * GLN_FIX_KOUT, r1.db_err + e * GLN_FIX_KOUT, GLN_FIX_KOUT);
                if (b2g) gln_layer_ref_check("pipelined db", b2g, fp.dt, r1.db + e * GLN_FIX_KOUT, r1.db_err + e * GLN_FIX_KOUT, GLN_FIX_KOUT);
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
    gln_fix_batch_free(&b1);
    gln_fix_batch_free(&b2);
out:
    gln_fix_free(&fs);
    gln_fix_free(&fp);
}

GLN_FIX_BOTH_PATHS(test_fused_first_then_next)
GLN_FIX_BOTH_PATHS(test_fused_unset_accumulates)
GLN_FIX_BOTH_PATHS(test_nonfused_accumulate_zero_grad)
GLN_FIX_BOTH_PATHS(test_delayed_wgrad_fifo)
GLN_FIX_BOTH_PATHS(test_backward_dw_empty_queue)
GLN_FIX_BOTH_PATHS(test_weight_cache)
GLN_FIX_BOTH_PATHS(test_pipeline_reverse_backward)
GLN_FIX_BOTH_PATHS(test_dbias_accumulation_rules)

GLN_TEST_MAIN(GLN_FIX_BOTH(test_fused_first_then_next), GLN_FIX_BOTH(test_fused_unset_accumulates),
              GLN_FIX_BOTH(test_nonfused_accumulate_zero_grad), GLN_FIX_BOTH(test_delayed_wgrad_fifo),
              GLN_FIX_BOTH(test_backward_dw_empty_queue), GLN_FIX_BOTH(test_weight_cache),
              GLN_FIX_BOTH(test_pipeline_reverse_backward), GLN_FIX_BOTH(test_dbias_accumulation_rules))

/* The microbatch fixture of the layer tests (test_layer_microbatch.c, test_layer_delayed_scaling.c):
 * a CPU layer of GLN_FIX_N = 3 experts, 40 -> 24 features, splits {7, 0, 12} over 19 rows, with
 * caller-owned weights, biases and main_grads in guarded buffers, its batches, one step, and its
 * float64 reference (layer_ref.h).  Every case runs on both paths: GLN_FIX_BOTH_PATHS(fn) makes
 * fn_split and fn_grouped, which set gln_fix_path (read by gln_fix_setup) and run fn. */
#ifndef GLN_TEST_LAYER_FIXTURE_H
#define GLN_TEST_LAYER_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "grouplin.h"
#include "harness.h"
#include "layer_ref.h"

#define GLN_FIX_N 3
#define GLN_FIX_KIN 40
#define GLN_FIX_KOUT 24
#define GLN_FIX_M 19
#define GLN_FIX_WS (GLN_FIX_KOUT * GLN_FIX_KIN)
extern const int64_t gln_fix_splits[GLN_FIX_N];

/* The path of the layers gln_fix_setup configures. */
extern gln_path_t gln_fix_path;

#define GLN_FIX_BOTH_PATHS(fn)                                                                  \
    static void fn##_split(void) {                                                              \
        gln_fix_path = GLN_PATH_SPLIT;                                                          \
        fn();                                                                                   \
    }                                                                                           \
    static void fn##_grouped(void) {                                                            \
        gln_fix_path = GLN_PATH_GROUPED;                                                        \
        fn();                                                                                   \
    }
#define GLN_FIX_BOTH(fn) GLN_CASE(fn##_split), GLN_CASE(fn##_grouped)

typedef struct gln_fix {
    gln_grouped_linear_config_t cfg;
    gln_dtype_t dt;
    void *w[GLN_FIX_N], *b[GLN_FIX_N];
    float *mg[GLN_FIX_N];
    gln_grouped_linear_t *layer;
} gln_fix_t;

typedef struct gln_fix_batch {
    gln_dtype_t dt;
    void *x, *dy;
} gln_fix_batch_t;

/* A batch: x [M, KIN] and dy [M, KOUT] of dtype dt, normal with stddev xs / dys. */
void gln_fix_batch_make(gln_fix_batch_t *b, gln_dtype_t dt, double xs, double dys, uint64_t seed);
void gln_fix_batch_free(gln_fix_batch_t *b);
/* Expert e's weights normal with stddev stddev·(1 + e). */
void gln_fix_fill_weights(gln_fix_t *f, double stddev, uint64_t seed);

/* Caller parameters and the config of a layer on gln_fix_path (no layer yet). */
void gln_fix_setup(gln_fix_t *f, gln_recipe_t recipe, gln_dtype_t dt, int fuse, int delay, int bias);
/* The layer of f->cfg (after gln_fix_setup and any changes to the config); 0 on failure. */
int gln_fix_create(gln_fix_t *f);
/* gln_fix_setup then gln_fix_create. */
int gln_fix_init(gln_fix_t *f, gln_recipe_t recipe, gln_dtype_t dt, int fuse, int delay, int bias);
/* An FP8_DELAYED bf16 layer with the given delayed-scaling settings. */
int gln_fix_init_delayed(gln_fix_t *f, int bias, int history_len, int margin, int always_roll, int nan_propagate);
/* Destroy the layer and free the parameters, checking their guards. */
void gln_fix_free(gln_fix_t *f);
/* main_grads: NaN, zero, or value·N(0, 1) from `seed`. */
void gln_fix_mg_fill(gln_fix_t *f, double value_or_nan, uint64_t seed);

/* One forward (y poisoned first; saved NULL: inference) / one backward (dx poisoned first). */
gln_status_t gln_fix_fwd(gln_fix_t *f, const gln_fix_batch_t *b, gln_microbatch_t mb, void *y,
                         gln_grouped_linear_saved_t **saved);
gln_status_t gln_fix_bwd(gln_fix_t *f, gln_grouped_linear_saved_t *s, const gln_fix_batch_t *b, void *dx);
/* Forward + backward + release of one microbatch; 0 on failure. */
int gln_fix_step(gln_fix_t *f, const gln_fix_batch_t *b, gln_microbatch_t mb, void *y, void *dx);
/* An inference forward that must succeed. */
void gln_fix_fwd_infer(gln_fix_t *f, const gln_fix_batch_t *b, gln_microbatch_t mb, void *y);

/* Reference for the fixture's current weights (spec: NULL = from the config, scales 1). */
int gln_fix_ref(gln_fix_t *f, const gln_fix_batch_t *b, const gln_layer_ref_spec_t *spec, gln_layer_ref_out_t *o);
/* dst += src with the accumulation of the bounds: e = e1 + e2 + (M + 3)·2^-24·(|v1| + |v2|)
 * (the FP32 add of the second microbatch into the first, conservatively). */
void gln_fix_acc_into(double *dv, double *de, const double *sv, const double *se, size_t n);
/* The main_grads / the layer's dW (and db) against reference values and bounds. */
void gln_fix_check_mg(gln_fix_t *f, const double *v, const double *err, const char *tag);
void gln_fix_check_grads(gln_fix_t *f, const double *dw, const double *dwe, const double *db, const double *dbe,
                         const char *tag);
/* y against the reference of the fixture's current weights. */
void gln_fix_check_y_ref(gln_fix_t *f, const gln_fix_batch_t *b, const void *y, const char *tag);

#endif

/* The distributed-weight protocol (gln_dist_weights_t) driven by a FAKE implementer.
 *
 * The fake keeps plain weights as its "shards", materializes forward copies = plain × 2 and
 * backward copies = plain × 4 (so a result tells which copy was used), owns the grad buffers
 * and a main_grad into which finalize_grads reduces them, counts every hook, tracks how many
 * materialized sets are alive, and poisons (NaN) every copy handed back through release() while
 * keeping its memory until the end — a layer that reads a released copy gets NaN.
 *
 * Each test names the TransformerEngine bug it would catch (the rules of docs/design.md §7, each
 * one a bug TE's distributed-weight support shipped: a backward reading the gathered copy, a
 * re-gathered weight used unquantized, requires-grad read from the copy, a copy cached across
 * calls, delayed wgrad with a distributed weight) and runs on both paths (§7: every path goes
 * through the one materialization stage; TE's grouped path once had no distributed-weight logic
 * at all). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layer_ref.h"

#define NMAX 4
#define KIN 32
#define KOUT 64
#define WS (KOUT * KIN)


/* ---------------------------------------------------------------- the fake implementer */

typedef struct fake {
    int32_t n;
    gln_dtype_t dtype;          /* of the shards and of the materialized copies */
    void *plain[NMAX];          /* the "shards": full weights [KOUT, KIN] */
    float fwd_mult, bwd_mult;
    int requires_grad;
    float *grad_buf[NMAX];      /* FP32 [KOUT, KIN], handed out by grad_buffer() */
    float *main_grad[NMAX];     /* FP32, written only by finalize_grads() */
    /* counters */
    int n_requires_grad, n_mat_fwd, n_mat_bwd, n_release, n_grad_buffer, n_finalize, n_wait;
    int live, max_live, bad_release, finalize_saw_nan, last_accumulate;
    void *live_set[8];          /* data pointer of expert 0 of each live set */
    void **dead;                /* released copies, poisoned, freed at the end */
    int ndead, capdead;
} fake_t;

static int fake_requires_grad(void *impl) {
    fake_t *f = impl;
    f->n_requires_grad++;
    return f->requires_grad;
}

static gln_status_t fake_materialize(fake_t *f, gln_tensor_t *w, float mult) {
    size_t es = gln_dtype_size(f->dtype);
    for (int32_t e = 0; e < f->n; e++) {
        void *d = gln_test_alloc(WS * es);
        for (size_t j = 0; j < WS; j++)
            gln_store(d, f->dtype, j, mult * gln_load(f->plain[e], f->dtype, j));
        w[e] = gln_tensor_make(f->dtype, KOUT, KIN, d);
    }
    if (f->live < 8) f->live_set[f->live] = w[0].data;
    f->live++;
    if (f->live > f->max_live) f->max_live = f->live;
    return GLN_STATUS_SUCCESS;
}

static gln_status_t fake_mat_fwd(void *impl, gln_tensor_t *w) {
    fake_t *f = impl;
    f->n_mat_fwd++;
    return fake_materialize(f, w, f->fwd_mult);
}

static gln_status_t fake_mat_bwd(void *impl, gln_tensor_t *w) {
    fake_t *f = impl;
    f->n_mat_bwd++;
    return fake_materialize(f, w, f->bwd_mult);
}

static gln_status_t fake_release(void *impl, gln_tensor_t *w) {
    fake_t *f = impl;
    f->n_release++;
    int found = -1;
    for (int k = 0; k < f->live && k < 8; k++)
        if (f->live_set[k] == w[0].data) found = k;
    if (found < 0) {
        f->bad_release++;
        return GLN_STATUS_INVALID_ARGUMENT;
    }
    for (int k = found; k + 1 < f->live && k + 1 < 8; k++) f->live_set[k] = f->live_set[k + 1];
    f->live--;
    for (int32_t e = 0; e < f->n; e++) {
        gln_poison(w[e].data, f->dtype, WS);
        if (f->ndead == f->capdead) {
            f->capdead = f->capdead ? 2 * f->capdead : 64;
            f->dead = realloc(f->dead, (size_t)f->capdead * sizeof(void *));
        }
        f->dead[f->ndead++] = w[e].data;
    }
    return GLN_STATUS_SUCCESS;
}

static gln_status_t fake_grad_buffer(void *impl, int32_t expert, float **buffer) {
    fake_t *f = impl;
    f->n_grad_buffer++;
    if (expert < 0 || expert >= f->n) return GLN_STATUS_INVALID_ARGUMENT;
    *buffer = f->grad_buf[expert];
    return GLN_STATUS_SUCCESS;
}

static gln_status_t fake_finalize(void *impl, int accumulate, int *pending) {
    fake_t *f = impl;
    f->n_finalize++;
    f->last_accumulate = accumulate;
    for (int32_t e = 0; e < f->n; e++)
        for (size_t j = 0; j < WS; j++) {
            float g = f->grad_buf[e][j];
            if (isnan(g)) f->finalize_saw_nan = 1;
            f->main_grad[e][j] = accumulate ? f->main_grad[e][j] + g : g;
        }
    if (pending) *pending = 0;
    return GLN_STATUS_SUCCESS;
}

static gln_status_t fake_wait(void *impl) {
    ((fake_t *)impl)->n_wait++;
    return GLN_STATUS_SUCCESS;
}

static void fake_init(fake_t *f, int32_t n, gln_dtype_t dtype, float fwd_mult, float bwd_mult,
                      uint64_t seed) {
    memset(f, 0, sizeof *f);
    f->n = n;
    f->dtype = dtype;
    f->fwd_mult = fwd_mult;
    f->bwd_mult = bwd_mult;
    f->requires_grad = 1;
    gln_rng_t r = gln_rng_seed(seed);
    for (int32_t e = 0; e < n; e++) {
        f->plain[e] = gln_test_alloc(WS * gln_dtype_size(dtype));
        /* Multiples of 1/16 in [-1, 1]: exact in bf16, and scaling by 2 or 4 stays exact. */
        for (size_t j = 0; j < WS; j++)
            gln_store(f->plain[e], dtype, j, (double)gln_rng_int(&r, -16, 16) / 16.0);
        f->grad_buf[e] = gln_test_alloc(WS * sizeof(float));
        f->main_grad[e] = gln_test_alloc(WS * sizeof(float));
    }
}

/* New step: counters to zero, grad buffers poisoned (the layer must overwrite them). */
static void fake_reset_counts(fake_t *f) {
    f->n_requires_grad = f->n_mat_fwd = f->n_mat_bwd = f->n_release = 0;
    f->n_grad_buffer = f->n_finalize = f->n_wait = 0;
    f->max_live = f->live;
    f->finalize_saw_nan = 0;
    f->last_accumulate = -1;
    for (int32_t e = 0; e < f->n; e++) gln_poison(f->grad_buf[e], GLN_DTYPE_FP32, WS);
}

static void fake_free(fake_t *f) {
    CHECK_MSG(f->live == 0, "fake: %d materialized sets never released", f->live);
    CHECK_MSG(f->bad_release == 0, "fake: %d releases of sets it never materialized", f->bad_release);
    for (int32_t e = 0; e < f->n; e++) {
        CHECK_MSG(gln_guard_ok(f->grad_buf[e]), "guard after grad buffer %d overwritten", e);
        gln_test_free(f->plain[e]);
        gln_test_free(f->grad_buf[e]);
        gln_test_free(f->main_grad[e]);
    }
    for (int k = 0; k < f->ndead; k++) {
        CHECK_MSG(gln_guard_ok(f->dead[k]), "guard after a materialized copy overwritten");
        gln_test_free(f->dead[k]);
    }
    free(f->dead);
}

static gln_dist_weights_t fake_protocol(fake_t *f) {
    gln_dist_weights_t d;
    memset(&d, 0, sizeof d);
    d.size = sizeof d;
    d.impl = f;
    d.num_experts = f->n;
    d.out_features = KOUT;
    d.in_features = KIN;
    d.requires_grad = fake_requires_grad;
    d.materialize_forward = fake_mat_fwd;
    d.materialize_backward = fake_mat_bwd;
    d.release = fake_release;
    d.grad_buffer = fake_grad_buffer;
    d.finalize_grads = fake_finalize;
    d.wait = fake_wait;
    return d;
}

/* ---------------------------------------------------------------- layers and data */

typedef struct io {
    int32_t n;
    const int64_t *splits;
    int64_t m;
    gln_dtype_t dt;
    void *x, *dy, *y, *dx;
} io_t;

static void io_make(io_t *io, int32_t n, const int64_t *splits, gln_dtype_t dt, uint64_t seed) {
    size_t es = gln_dtype_size(dt);
    io->n = n;
    io->splits = splits;
    io->m = gln_layer_ref_total_rows(n, splits);
    io->dt = dt;
    io->x = gln_test_alloc((size_t)io->m * KIN * es + 1);
    io->dy = gln_test_alloc((size_t)io->m * KOUT * es + 1);
    io->y = gln_test_alloc((size_t)io->m * KOUT * es + 1);
    io->dx = gln_test_alloc((size_t)io->m * KIN * es + 1);
    gln_rng_t r = gln_rng_seed(seed);
    for (size_t j = 0; j < (size_t)io->m * KIN; j++)
        gln_store(io->x, dt, j, (double)gln_rng_int(&r, -16, 16) / 8.0);
    for (size_t j = 0; j < (size_t)io->m * KOUT; j++)
        gln_store(io->dy, dt, j, (double)gln_rng_int(&r, -16, 16) / 64.0);
}

static void io_free(io_t *io) {
    void *p[] = {io->x, io->dy, io->y, io->dx};
    for (int k = 0; k < 4; k++) {
        CHECK_MSG(gln_guard_ok(p[k]), "guard after an activation buffer overwritten");
        gln_test_free(p[k]);
    }
}

static gln_grouped_linear_config_t layer_cfg(int32_t n, gln_dtype_t dt, gln_recipe_t recipe,
                                             gln_path_t path) {
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = n;
    c.in_features = KIN;
    c.out_features = KOUT;
    c.bias = 0;
    c.param_dtype = dt;
    c.activation_dtype = dt;
    c.recipe = recipe;
    c.path = path;
    return c;
}

static gln_status_t do_forward(gln_grouped_linear_t *L, io_t *io, gln_microbatch_t mb,
                               gln_grouped_linear_saved_t **saved) {
    gln_tensor_t xt = gln_tensor_make(io->dt, io->m, KIN, io->x);
    gln_tensor_t yt = gln_tensor_make(io->dt, io->m, KOUT, io->y);
    gln_poison(io->y, io->dt, (size_t)io->m * KOUT);
    gln_grouped_linear_forward_args_t fa = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    fa.x = &xt;
    fa.m_splits = io->splits;
    fa.y = &yt;
    fa.microbatch = mb;
    return gln_grouped_linear_forward(L, &fa, saved);
}

static gln_status_t do_backward(gln_grouped_linear_saved_t *s, io_t *io) {
    gln_tensor_t dyt = gln_tensor_make(io->dt, io->m, KOUT, io->dy);
    gln_tensor_t dxt = gln_tensor_make(io->dt, io->m, KIN, io->dx);
    gln_poison(io->dx, io->dt, (size_t)io->m * KIN);
    return gln_grouped_linear_backward(s, &dyt, &dxt);
}

/* A distributed layer over the fake (NULL on failure, reported). */
static gln_grouped_linear_t *dist_layer(gln_grouped_linear_config_t cfg,
                                        const gln_dist_weights_t *d) {
    gln_grouped_linear_t *L = NULL;
    cfg.params.distributed = d;
    CHECK_OK(gln_grouped_linear_create(gln_test_cpu_context(), &cfg, &L));
    return L;
}

static const char *path_name(gln_path_t p) { return p == GLN_PATH_SPLIT ? "split" : "grouped"; }

/* ---------------------------------------------------------------- dispatch */

/* Plain-layer results for the fake's plain weights: y, dx (host copies) and dW. */
typedef struct plain_res {
    float *y, *dx, *dw;
} plain_res_t;

static int plain_run(const fake_t *f, gln_path_t path, io_t *io, plain_res_t *pr) {
    gln_grouped_linear_config_t cfg = layer_cfg(f->n, GLN_DTYPE_FP32, GLN_RECIPE_NONE, path);
    cfg.params.weights = (void *const *)f->plain;
    gln_grouped_linear_t *L = NULL;
    gln_grouped_linear_saved_t *s = NULL;
    memset(pr, 0, sizeof *pr);
    CHECK_OK(gln_grouped_linear_create(gln_test_cpu_context(), &cfg, &L));
    if (!L) return 0;
    CHECK_OK(gln_grouped_linear_zero_grad(L));
    int ok = do_forward(L, io, GLN_MICROBATCH_UNSET, &s) == GLN_STATUS_SUCCESS &&
             do_backward(s, io) == GLN_STATUS_SUCCESS;
    CHECK_MSG(ok, "plain %s layer: %s", path_name(path), gln_last_error());
    if (ok) {
        pr->y = malloc((size_t)io->m * KOUT * sizeof(float));
        pr->dx = malloc((size_t)io->m * KIN * sizeof(float));
        pr->dw = malloc((size_t)f->n * WS * sizeof(float));
        memcpy(pr->y, io->y, (size_t)io->m * KOUT * sizeof(float));
        memcpy(pr->dx, io->dx, (size_t)io->m * KIN * sizeof(float));
        for (int32_t e = 0; e < f->n; e++) {
            void *wg = NULL, *bg = NULL;
            CHECK_OK(gln_grouped_linear_grads(L, e, &wg, &bg));
            if (wg) memcpy(pr->dw + e * WS, wg, WS * sizeof(float));
            else ok = 0;
        }
    }
    if (s) CHECK_OK(gln_grouped_linear_saved_release(s));
    CHECK_OK(gln_grouped_linear_destroy(L));
    return ok;
}

static void plain_free(plain_res_t *pr) {
    free(pr->y);
    free(pr->dx);
    free(pr->dw);
}

/* Bitwise: got[j] == mult · want[j] (exact in FP32: scaling by a power of two). */
static void check_scaled(const char *what, const float *got, const float *want, size_t n,
                         float mult) {
    float *s = malloc(n * sizeof(float) + 1);
    for (size_t j = 0; j < n; j++) s[j] = mult * want[j];
    gln_check_bitwise(what, got, s, n * sizeof(float));
    free(s);
}

/* Bugs 1 (§9.4 items 4–5: main_grad read from the gathered copy, no re-gather, no finalize on
 * the grouped path) and invariant 1 (backward re-materializes; wgrad lands in grad_buffer()).
 * fp32, in 32, out 64, tokens 8N, N in {2, 4}: forward copies = W×2 → y == 2·y_plain; backward
 * copies = W×4 → dx == 4·dx_plain; main_grad == plain wgrad; every hook exactly once per step
 * (grad_buffer once per expert, release once per materialization).  The fake poisons its
 * forward copies on release, so a backward that used them produces NaN. */
static void dispatch_case(int32_t n, const int64_t *splits, gln_path_t path) {
    char tag[64];
    snprintf(tag, sizeof tag, "dispatch N=%d %s", n, path_name(path));
    fake_t f;
    fake_init(&f, n, GLN_DTYPE_FP32, 2.0f, 4.0f, 900 + n);
    io_t io;
    io_make(&io, n, splits, GLN_DTYPE_FP32, 70 + n);
    plain_res_t pr;
    gln_dist_weights_t d = fake_protocol(&f);
    gln_grouped_linear_t *L = NULL;
    if (!plain_run(&f, path, &io, &pr)) goto out;
    L = dist_layer(layer_cfg(n, GLN_DTYPE_FP32, GLN_RECIPE_NONE, path), &d);
    if (!L) goto out;
    for (int step = 0; step < 2; step++) {
        fake_reset_counts(&f);
        for (int32_t e = 0; e < n; e++) memset(f.main_grad[e], 0, WS * sizeof(float));
        gln_grouped_linear_saved_t *s = NULL;
        CHECK_OK(do_forward(L, &io, step ? GLN_MICROBATCH_NEXT : GLN_MICROBATCH_FIRST, &s));
        if (!s) break;
        CHECK_MSG(f.live == 0, "%s: %d materialized sets alive after forward", tag, f.live);
        CHECK_MSG(f.n_mat_fwd == 1 && f.n_release == 1 && f.n_mat_bwd == 0,
                  "%s: forward hooks fwd=%d bwd=%d release=%d (want 1, 0, 1)", tag, f.n_mat_fwd,
                  f.n_mat_bwd, f.n_release);
        CHECK_OK(do_backward(s, &io));
        CHECK_OK(gln_grouped_linear_saved_release(s));
        CHECK_MSG(f.n_mat_fwd == 1 && f.n_mat_bwd == 1 && f.n_release == 2,
                  "%s step %d: materialize fwd=%d bwd=%d release=%d (want 1, 1, 2)", tag, step,
                  f.n_mat_fwd, f.n_mat_bwd, f.n_release);
        CHECK_MSG(f.n_finalize == 1, "%s step %d: finalize_grads called %d times", tag, step,
                  f.n_finalize);
        CHECK_MSG(f.n_grad_buffer == n, "%s step %d: grad_buffer called %d times for %d experts",
                  tag, step, f.n_grad_buffer, n);
        CHECK_MSG(!f.finalize_saw_nan, "%s step %d: finalize saw unwritten grad buffers", tag, step);
        CHECK_MSG(f.live == 0 && f.max_live <= 1, "%s step %d: live %d, peak %d sets", tag, step,
                  f.live, f.max_live);
        char what[160];
        snprintf(what, sizeof what, "%s step %d: y == 2 y_plain", tag, step);
        check_scaled(what, io.y, pr.y, (size_t)io.m * KOUT, 2.0f);
        snprintf(what, sizeof what, "%s step %d: dx == 4 dx_plain", tag, step);
        check_scaled(what, io.dx, pr.dx, (size_t)io.m * KIN, 4.0f);
        for (int32_t e = 0; e < n; e++) {
            snprintf(what, sizeof what, "%s step %d: grad_buffer[%d] == plain wgrad", tag, step, e);
            gln_check_bitwise(what, f.grad_buf[e], pr.dw + e * WS, WS * sizeof(float));
            /* main_grad was zeroed before the step: overwrite or accumulate, it is dW. */
            snprintf(what, sizeof what, "%s step %d: main_grad[%d]", tag, step, e);
            gln_check_bitwise(what, f.main_grad[e], pr.dw + e * WS, WS * sizeof(float));
        }
    }
out:
    if (L) CHECK_OK(gln_grouped_linear_destroy(L));
    plain_free(&pr);
    io_free(&io);
    fake_free(&f);
}

static void test_dispatch_bug1_invariant1(void) {
    static const int64_t s2[2] = {5, 11}, s4[4] = {8, 0, 13, 11};
    for (int p = 0; p < 2; p++) {
        dispatch_case(2, s2, (gln_path_t)p);
        dispatch_case(4, s4, (gln_path_t)p);
    }
}

/* ---------------------------------------------------------------- invariant 2 */

/* Bug 2 (§9.3: a re-gathered BF16 weight went unquantized into the FP8 dgrad GEMM).  BF16
 * shards under every FP8 recipe, both paths: forward and backward succeed, y matches the
 * reference from the re-quantized forward copies, dx from the re-quantized backward copies
 * (quantized by the layer's weight quantizer), main_grad the reference wgrad. */
static void test_bf16_shards_fp8_bug2(void) {
    static const int64_t splits[4] = {8, 0, 13, 11};
    static const gln_recipe_t recipes[4] = {GLN_RECIPE_FP8_CURRENT, GLN_RECIPE_FP8_DELAYED,
                                            GLN_RECIPE_MXFP8, GLN_RECIPE_FP8_BLOCK};
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 4; k++) {
            char tag[96];
            snprintf(tag, sizeof tag, "bf16 shards %s %s", gln_recipe_name(recipes[k]),
                     path_name((gln_path_t)p));
            fake_t f;
            fake_init(&f, 4, GLN_DTYPE_BF16, 2.0f, 4.0f, 1000 + k);
            io_t io;
            io_make(&io, 4, splits, GLN_DTYPE_BF16, 80 + k);
            gln_dist_weights_t d = fake_protocol(&f);
            gln_grouped_linear_config_t cfg = layer_cfg(4, GLN_DTYPE_BF16, recipes[k], (gln_path_t)p);
            gln_grouped_linear_t *L = dist_layer(cfg, &d);
            gln_layer_ref_spec_t spec;
            gln_layer_ref_spec_init(&spec, &cfg);
            gln_grouped_linear_saved_t *s = NULL;
            fake_reset_counts(&f);
            if (L && recipes[k] == GLN_RECIPE_FP8_DELAYED)
                CHECK_OK(gln_layer_ref_capture_scales(&spec, L));
            if (L) CHECK_OK(do_forward(L, &io, GLN_MICROBATCH_UNSET, &s));
            if (s) {
                /* Delayed scaling: the forward slots were updated at the end of the forward,
                 * but the backward copy is quantized with the weight scales the forward used
                 * (the layer replays them, as a plain weight's dgrad copy is made in forward):
                 * spec.w_bwd_scale keeps the values captured before the forward. */
                CHECK_OK(do_backward(s, &io));
                CHECK_OK(gln_grouped_linear_saved_release(s));
                /* The reference copies: plain × 2 for fprop, plain × 4 for dgrad. */
                void *wf[4], *wb[4];
                for (int e = 0; e < 4; e++) {
                    wf[e] = malloc(WS * 2);
                    wb[e] = malloc(WS * 2);
                    for (size_t j = 0; j < WS; j++) {
                        gln_store(wf[e], GLN_DTYPE_BF16, j, 2 * gln_load(f.plain[e], GLN_DTYPE_BF16, j));
                        gln_store(wb[e], GLN_DTYPE_BF16, j, 4 * gln_load(f.plain[e], GLN_DTYPE_BF16, j));
                    }
                }
                gln_layer_ref_inputs_t in = {4, KIN, KOUT, splits, GLN_DTYPE_BF16, io.x, io.dy,
                                             GLN_DTYPE_BF16, (const void *const *)wf,
                                             (const void *const *)wb, GLN_DTYPE_BF16, NULL};
                gln_layer_ref_out_t r;
                if (gln_layer_ref_run(gln_test_cpu_context(), &spec, &in, &r) == GLN_STATUS_SUCCESS) {
                    char what[160];
                    snprintf(what, sizeof what, "%s y", tag);
                    gln_layer_ref_check(what, io.y, io.dt, r.y, r.y_err, (size_t)io.m * KOUT);
                    snprintf(what, sizeof what, "%s dx", tag);
                    gln_layer_ref_check(what, io.dx, io.dt, r.dx, r.dx_err, (size_t)io.m * KIN);
                    for (int e = 0; e < 4; e++) {
                        snprintf(what, sizeof what, "%s main_grad[%d]", tag, e);
                        gln_layer_ref_check(what, f.main_grad[e], GLN_DTYPE_FP32, r.dw + e * WS,
                                            r.dw_err + e * WS, WS);
                    }
                    gln_layer_ref_out_free(&r);
                } else {
                    CHECK_MSG(0, "%s: reference failed: %s", tag, gln_last_error());
                }
                CHECK_MSG(f.n_finalize == 1 && f.n_mat_bwd == 1, "%s: finalize %d, re-gathers %d",
                          tag, f.n_finalize, f.n_mat_bwd);
                for (int e = 0; e < 4; e++) {
                    free(wf[e]);
                    free(wb[e]);
                }
            }
            if (L) CHECK_OK(gln_grouped_linear_destroy(L));
            io_free(&io);
            fake_free(&f);
        }
}

/* ---------------------------------------------------------------- invariant 3 */

/* Bug 3 (§9.3/§9.4: weight_requires_grad read from the gathered copy, which never requires
 * grad, so wgrad and finalize were silently skipped).  The group says 1 while the layer config
 * says 0 (nothing else asks for weight gradients): gradients must flow.  The group says 0: no
 * finalize, no grad_buffer, dx still right. */
static void test_requires_grad_from_group_bug3(void) {
    static const int64_t splits[2] = {5, 11};
    for (int p = 0; p < 2; p++)
        for (int rg = 0; rg < 2; rg++) {
            char tag[80];
            snprintf(tag, sizeof tag, "requires_grad()=%d %s", rg, path_name((gln_path_t)p));
            fake_t f;
            fake_init(&f, 2, GLN_DTYPE_FP32, 1.0f, 1.0f, 1100 + rg);
            f.requires_grad = rg;
            io_t io;
            io_make(&io, 2, splits, GLN_DTYPE_FP32, 90 + rg);
            plain_res_t pr;
            gln_dist_weights_t d = fake_protocol(&f);
            gln_grouped_linear_t *L = NULL;
            if (!plain_run(&f, (gln_path_t)p, &io, &pr)) goto next;
            gln_grouped_linear_config_t cfg = layer_cfg(2, GLN_DTYPE_FP32, GLN_RECIPE_NONE, (gln_path_t)p);
            cfg.weights_require_grad = !rg;
            L = dist_layer(cfg, &d);
            gln_grouped_linear_saved_t *s = NULL;
            fake_reset_counts(&f);
            if (L) CHECK_OK(do_forward(L, &io, GLN_MICROBATCH_UNSET, &s));
            if (!s) goto next;
            CHECK_OK(do_backward(s, &io));
            CHECK_OK(gln_grouped_linear_saved_release(s));
            CHECK_MSG(f.n_requires_grad > 0, "%s: the group's requires_grad() never asked", tag);
            char what[160];
            snprintf(what, sizeof what, "%s dx", tag);
            gln_check_bitwise(what, io.dx, pr.dx, (size_t)io.m * KIN * sizeof(float));
            if (rg) {
                CHECK_MSG(f.n_finalize == 1 && f.n_grad_buffer == 2,
                          "%s: finalize %d, grad_buffer %d (want 1, 2)", tag, f.n_finalize,
                          f.n_grad_buffer);
                for (int e = 0; e < 2; e++) {
                    snprintf(what, sizeof what, "%s main_grad[%d]", tag, e);
                    gln_check_bitwise(what, f.main_grad[e], pr.dw + e * WS, WS * sizeof(float));
                }
            } else {
                CHECK_MSG(f.n_finalize == 0 && f.n_grad_buffer == 0,
                          "%s: finalize %d, grad_buffer %d (want 0, 0)", tag, f.n_finalize,
                          f.n_grad_buffer);
            }
        next:
            if (L) CHECK_OK(gln_grouped_linear_destroy(L));
            plain_free(&pr);
            io_free(&io);
            fake_free(&f);
        }
}

/* ---------------------------------------------------------------- invariant 4 */

/* y of the current forward against the reference from the fake's current copies. */
static void check_y_current(const fake_t *f, const gln_layer_ref_spec_t *spec, io_t *io,
                            const char *tag) {
    void *wf[NMAX];
    for (int e = 0; e < f->n; e++) {
        wf[e] = malloc(WS * gln_dtype_size(f->dtype));
        for (size_t j = 0; j < WS; j++)
            gln_store(wf[e], f->dtype, j, f->fwd_mult * gln_load(f->plain[e], f->dtype, j));
    }
    gln_layer_ref_inputs_t in = {f->n, KIN, KOUT, io->splits, io->dt, io->x, NULL, f->dtype,
                                 (const void *const *)wf, NULL, f->dtype, NULL};
    gln_layer_ref_out_t r;
    if (gln_layer_ref_run(gln_test_cpu_context(), spec, &in, &r) == GLN_STATUS_SUCCESS) {
        gln_layer_ref_check(tag, io->y, io->dt, r.y, r.y_err, (size_t)io->m * KOUT);
        gln_layer_ref_out_free(&r);
    }
    for (int e = 0; e < f->n; e++) free(wf[e]);
}

/* Bug 4 (§9.3/§9.4: the gathered, quantized copy was cached across microbatches, pinning the
 * full weight).  FP8 current scaling with microbatches FIRST, NEXT, UNSET: every forward
 * materializes (and uses the copy it just got — the fake's weights change between steps), no
 * set is alive after a forward, at most one during backward; FIRST overwrites main_grad
 * (finalize accumulate = 0), NEXT / UNSET accumulate.  Then two forwards in flight and two
 * backwards in reverse order: still never more than one set alive. */
static void test_never_cached_bug4(void) {
    static const int64_t splits[4] = {8, 0, 13, 11};
    static const gln_microbatch_t mbs[3] = {GLN_MICROBATCH_FIRST, GLN_MICROBATCH_NEXT,
                                            GLN_MICROBATCH_UNSET};
    for (int p = 0; p < 2; p++) {
        char tag[96];
        fake_t f;
        fake_init(&f, 4, GLN_DTYPE_BF16, 2.0f, 4.0f, 1200 + p);
        io_t io, io2;
        io_make(&io, 4, splits, GLN_DTYPE_BF16, 100 + p);
        io_make(&io2, 4, splits, GLN_DTYPE_BF16, 110 + p);
        gln_dist_weights_t d = fake_protocol(&f);
        gln_grouped_linear_config_t cfg = layer_cfg(4, GLN_DTYPE_BF16, GLN_RECIPE_FP8_CURRENT, (gln_path_t)p);
        cfg.fuse_wgrad_accumulation = 1;
        gln_grouped_linear_t *L = dist_layer(cfg, &d);
        gln_layer_ref_spec_t spec;
        gln_layer_ref_spec_init(&spec, &cfg);
        for (int k = 0; L && k < 3; k++) {
            snprintf(tag, sizeof tag, "never cached %s microbatch %d", path_name((gln_path_t)p), mbs[k]);
            fake_reset_counts(&f);
            /* The shards change between microbatches (as after an optimizer step). */
            gln_rng_t r = gln_rng_seed(5000 + k);
            for (int e = 0; e < 4; e++)
                for (size_t j = 0; j < WS; j++)
                    gln_store(f.plain[e], f.dtype, j, (double)gln_rng_int(&r, -16, 16) / 16.0);
            gln_grouped_linear_saved_t *s = NULL;
            CHECK_OK(do_forward(L, &io, mbs[k], &s));
            CHECK_MSG(f.n_mat_fwd == 1, "%s: materialize_forward called %d times", tag, f.n_mat_fwd);
            CHECK_MSG(f.live == 0, "%s: %d sets alive after forward", tag, f.live);
            check_y_current(&f, &spec, &io, tag);
            if (!s) continue;
            f.max_live = 0;
            CHECK_OK(do_backward(s, &io));
            CHECK_OK(gln_grouped_linear_saved_release(s));
            CHECK_MSG(f.max_live <= 1 && f.live == 0, "%s: backward peak %d sets, %d left alive",
                      tag, f.max_live, f.live);
            CHECK_MSG(f.n_finalize == 1, "%s: finalize called %d times", tag, f.n_finalize);
            int want_acc = mbs[k] != GLN_MICROBATCH_FIRST;
            CHECK_MSG(f.last_accumulate == want_acc, "%s: finalize accumulate=%d, want %d", tag,
                      f.last_accumulate, want_acc);
        }
        if (L) {
            snprintf(tag, sizeof tag, "never cached %s, two in flight", path_name((gln_path_t)p));
            fake_reset_counts(&f);
            gln_grouped_linear_saved_t *s1 = NULL, *s2 = NULL;
            CHECK_OK(do_forward(L, &io, GLN_MICROBATCH_UNSET, &s1));
            CHECK_OK(do_forward(L, &io2, GLN_MICROBATCH_UNSET, &s2));
            CHECK_MSG(f.live == 0 && f.max_live <= 1 && f.n_mat_fwd == 2,
                      "%s: after two forwards live %d peak %d materializations %d", tag, f.live,
                      f.max_live, f.n_mat_fwd);
            if (s2) CHECK_OK(do_backward(s2, &io2));
            if (s1) CHECK_OK(do_backward(s1, &io));
            if (s1) CHECK_OK(gln_grouped_linear_saved_release(s1));
            if (s2) CHECK_OK(gln_grouped_linear_saved_release(s2));
            CHECK_MSG(f.live == 0 && f.max_live <= 1 && f.n_mat_bwd == 2 && f.n_finalize == 2,
                      "%s: live %d peak %d re-gathers %d finalizes %d", tag, f.live, f.max_live,
                      f.n_mat_bwd, f.n_finalize);
            CHECK_OK(gln_grouped_linear_destroy(L));
        }
        io_free(&io);
        io_free(&io2);
        fake_free(&f);
    }
}

/* ---------------------------------------------------------------- invariant 5 */

/* Bug 5 (§9.3/§9.4: with delay_wgrad_compute the wgrad was only queued while finalize ran at
 * once on unwritten buffers).  The combination is rejected at create, naming the option, before
 * any hook runs. */
static void test_delay_rejected_bug5(void) {
    for (int p = 0; p < 2; p++) {
        fake_t f;
        fake_init(&f, 2, GLN_DTYPE_FP32, 1.0f, 1.0f, 1300);
        gln_dist_weights_t d = fake_protocol(&f);
        gln_grouped_linear_config_t cfg = layer_cfg(2, GLN_DTYPE_FP32, GLN_RECIPE_NONE, (gln_path_t)p);
        cfg.delay_wgrad_compute = 1;
        cfg.params.distributed = &d;
        gln_grouped_linear_t *L = NULL;
        CHECK_STATUS(gln_grouped_linear_create(gln_test_cpu_context(), &cfg, &L), GLN_STATUS_NOT_SUPPORTED,
                     "delay_wgrad_compute");
        CHECK(L == NULL);
        if (L) CHECK_OK(gln_grouped_linear_destroy(L));
        CHECK_MSG(f.n_mat_fwd + f.n_mat_bwd + f.n_finalize + f.n_grad_buffer == 0,
                  "hooks ran for a rejected layer");
        fake_free(&f);
    }
}

/* Version 1 tables (ending at wait, no prefetch) stay valid: the layer accepts their size and
 * never reads past it; any other size is refused. */
static void test_version1_table(void) {
    fake_t f;
    fake_init(&f, 2, GLN_DTYPE_FP32, 1.0f, 1.0f, 1400);
    gln_dist_weights_t d = fake_protocol(&f);
    d.size = GLN_DIST_WEIGHTS_V1_SIZE;
    d.prefetch = NULL;
    gln_grouped_linear_config_t cfg = layer_cfg(2, GLN_DTYPE_FP32, GLN_RECIPE_NONE, GLN_PATH_GROUPED);
    cfg.params.distributed = &d;
    gln_grouped_linear_t *L = NULL;
    CHECK_OK(gln_grouped_linear_create(gln_test_cpu_context(), &cfg, &L));
    CHECK_OK(gln_grouped_linear_destroy(L));
    L = NULL;
    d.size = GLN_DIST_WEIGHTS_V1_SIZE + 1;
    CHECK_STATUS(gln_grouped_linear_create(gln_test_cpu_context(), &cfg, &L), GLN_STATUS_INVALID_ARGUMENT,
                 "version");
    CHECK(L == NULL);
    fake_free(&f);
}

GLN_TEST_MAIN(GLN_CASE(test_version1_table), GLN_CASE(test_dispatch_bug1_invariant1), GLN_CASE(test_bf16_shards_fp8_bug2),
              GLN_CASE(test_requires_grad_from_group_bug3), GLN_CASE(test_never_cached_bug4),
              GLN_CASE(test_delay_rejected_bug5))

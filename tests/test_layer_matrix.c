/* The grouped linear layer over its whole option matrix, against a float64 reference.
 *
 * Every recipe (NONE, FP8_DELAYED, FP8_CURRENT, MXFP8, FP8_BLOCK) × path (SPLIT, GROUPED) ×
 * bias × fuse_wgrad_accumulation × single grouped parameters × delay_wgrad_compute, on awkward
 * shapes (zero-token experts, 1/5/17/129 rows, one expert with every token, feature sizes that
 * are and are not multiples of 32 / 128), bf16 mainly plus fp32 and fp16 cases.
 *
 * The reference (tests/harness/layer_ref.c) quantizes the operands with the public quantizer
 * exactly as the layer documents, dequantizes them exactly and multiplies in float64, so the
 * only differences allowed are FP32 accumulation and the rounding of the output:
 *   tolerance = u_out·(|ref| + e) + e + tiny,  e = (k + 3)·2^-24·Σ|a·b|
 * (u_out = 2^-8 for bf16, 2^-11 fp16, 2^-24 fp32: one round-to-nearest of the FP32 result;
 *  k = reduction length; 3 extra FP32 operations: bias / main_grad add, scale product, alpha).
 * The worst error as a fraction of its tolerance is tabulated per recipe; every one must be
 * <= 1.  The split and grouped paths must agree bit for bit (DESIGN §4: same kernels on the CPU);
 * half of the grouped runs take their m_splits from backend memory.
 *
 * Run with OPENBLAS_NUM_THREADS=1; about 700 layer runs, a few seconds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layer_ref.h"

#define NMAX 4
#define NUM_RECIPES 5


typedef struct mx_shape {
    const char *name;
    int32_t n;
    int64_t splits[NMAX];
    int64_t k_in, k_out;
} mx_shape_t;

static const mx_shape_t SHAPES[] = {
    {"splits 0/5/17/129, 48x80", 4, {0, 5, 17, 129}, 48, 80},
    {"splits 0/5/17/129, 128x256", 4, {0, 5, 17, 129}, 128, 256},
    {"splits 0/0/151/0, 80x48", 4, {0, 0, 151, 0}, 80, 48},
    {"splits 1/0/0/0, 128x256", 4, {1, 0, 0, 0}, 128, 256},
};

/* Inputs of one shape in one activation dtype (params share the dtype). */
typedef struct mx_data {
    const mx_shape_t *s;
    gln_dtype_t dt;
    int64_t M;
    void *x, *dy;       /* [M, K_in], [M, K_out] */
    void *w;            /* packed [N, K_out, K_in] */
    void *b;            /* packed [N, K_out], bf16-representable values */
    float *p;           /* main_grad prefill [N, K_out, K_in] */
} mx_data_t;

typedef struct mx_opts {
    gln_recipe_t recipe;
    gln_path_t path;
    int bias, fuse, single, delay;
    gln_fp8_format_t fmt;
    int power_2_scales;
    int backend_splits; /* grouped path: m_splits in backend memory (gln_malloc) */
} mx_opts_t;

/* What one run produced (copies). */
typedef struct mx_result {
    int ok;
    void *y, *dx, *dw, *db;
    size_t y_bytes, dx_bytes, dw_bytes, db_bytes;
    gln_dtype_t dw_dtype;
} mx_result_t;

static void result_free(mx_result_t *r) {
    free(r->y);
    free(r->dx);
    free(r->dw);
    free(r->db);
    memset(r, 0, sizeof *r);
}

static size_t wsize(const mx_data_t *d) { return (size_t)(d->s->k_out * d->s->k_in); }

/* A wide dynamic range: every 5th row and every 7th column shrunk by 2^-16 (x, W) or 2^-32
 * (dy, since E5M2 has twice E4M3's exponent range).  With power-of-two block scales the FP8
 * rounding is scale invariant for normal values, so only such tiny rows / columns — which fall
 * into the FP8 subnormal range when their block also holds large values — reveal which block
 * structure (1x32 / 32x1, 1x128 / 128x1 / 128x128, per tensor) each GEMM operand used. */
static double shrink(int64_t r, int64_t c, double factor) {
    return (r % 5 == 3 ? factor : 1.0) * (c % 7 == 2 ? factor : 1.0);
}

static void data_make(mx_data_t *d, const mx_shape_t *s, gln_dtype_t dt, uint64_t seed) {
    size_t es = gln_dtype_size(dt);
    d->s = s;
    d->dt = dt;
    d->M = gln_layer_ref_total_rows(s->n, s->splits);
    d->x = gln_test_alloc((size_t)(d->M * s->k_in) * es + 1);
    d->dy = gln_test_alloc((size_t)(d->M * s->k_out) * es + 1);
    d->w = gln_test_alloc((size_t)s->n * wsize(d) * es);
    d->b = gln_test_alloc((size_t)(s->n * s->k_out) * es);
    d->p = gln_test_alloc((size_t)s->n * wsize(d) * sizeof(float));
    gln_rng_t rng = gln_rng_seed(seed);
    /* Per-expert magnitudes differ so that per-expert scales matter. */
    int64_t r0 = 0;
    for (int32_t e = 0; e < s->n; e++) {
        for (int64_t j = r0 * s->k_in; j < (r0 + s->splits[e]) * s->k_in; j++)
            gln_store(d->x, dt, (size_t)j,
                      0.75 * (1 + e) * shrink(j / s->k_in, j % s->k_in, 0x1p-16) * gln_rng_normal(&rng));
        for (int64_t j = r0 * s->k_out; j < (r0 + s->splits[e]) * s->k_out; j++)
            gln_store(d->dy, dt, (size_t)j,
                      0.01 * (1 + e) * shrink(j / s->k_out, j % s->k_out, 0x1p-32) * gln_rng_normal(&rng));
        for (size_t j = 0; j < wsize(d); j++)
            gln_store(d->w, dt, e * wsize(d) + j,
                      0.05 * (1 + e) * shrink((int64_t)j / s->k_in, (int64_t)j % s->k_in, 0x1p-16) *
                          gln_rng_normal(&rng));
        /* Biases exactly representable in bf16 (FP8 GEMMs may take a bf16 bias). */
        for (int64_t j = 0; j < s->k_out; j++)
            gln_store(d->b, dt, (size_t)(e * s->k_out + j),
                      gln_round_to(0.1 * gln_rng_normal(&rng), GLN_DTYPE_BF16));
        r0 += s->splits[e];
    }
    for (size_t j = 0; j < (size_t)s->n * wsize(d); j++) d->p[j] = (float)(0.01 * gln_rng_normal(&rng));
}

static void data_free(mx_data_t *d) {
    gln_test_free(d->x);
    gln_test_free(d->dy);
    gln_test_free(d->w);
    gln_test_free(d->b);
    gln_test_free(d->p);
}

/* Fixed non-power-of-two delayed-scaling encode scales (the upstream test uses scales in [1,2)
 * too): the per-tensor path must then multiply raw FP8 values by a real scale_inv product. */
static float delayed_scale(int backward, int32_t slot) {
    float frac = 1.0f + 0.1171875f * (float)(slot % 7) + 0.0078125f * (float)slot;
    if (backward) return 4096.0f * frac; /* dy ~ 0.01..0.16 into E5M2 / E4M3 */
    return (slot % 3 == 1 ? 256.0f : 16.0f) * frac; /* W ~ 0.05..0.8, x ~ 0.75..12 */
}

static void config_make(gln_grouped_linear_config_t *c, const mx_data_t *d, const mx_opts_t *o) {
    gln_grouped_linear_config_t init = GLN_GROUPED_LINEAR_CONFIG_INIT;
    *c = init;
    c->num_experts = d->s->n;
    c->in_features = d->s->k_in;
    c->out_features = d->s->k_out;
    c->bias = o->bias;
    c->param_dtype = d->dt;
    c->activation_dtype = d->dt;
    c->recipe = o->recipe;
    c->fp8_format = o->fmt;
    c->path = o->path;
    c->fuse_wgrad_accumulation = o->fuse;
    c->delay_wgrad_compute = o->delay;
    c->single_grouped_weight = o->single;
    c->single_grouped_bias = o->single && o->bias;
    c->power_2_scales = o->power_2_scales;
}

/* Caller-owned parameter buffers of one run. */
typedef struct mx_params {
    void *wp, *bp;                 /* packed (single) */
    void *wl[NMAX], *bl[NMAX];     /* discrete */
    float *mgp, *mgl[NMAX];
} mx_params_t;

static void params_make(mx_params_t *p, const mx_data_t *d, const mx_opts_t *o,
                        gln_grouped_linear_config_t *c) {
    size_t es = gln_dtype_size(d->dt), ws = wsize(d), n = (size_t)d->s->n, ko = (size_t)d->s->k_out;
    memset(p, 0, sizeof *p);
    if (o->single) {
        p->wp = gln_test_alloc(n * ws * es);
        memcpy(p->wp, d->w, n * ws * es);
        c->params.weight_packed = p->wp;
        if (o->bias) {
            p->bp = gln_test_alloc(n * ko * es);
            memcpy(p->bp, d->b, n * ko * es);
            c->params.bias_packed = p->bp;
        }
        if (o->fuse) {
            p->mgp = gln_test_alloc(n * ws * sizeof(float));
            memcpy(p->mgp, d->p, n * ws * sizeof(float));
            c->params.main_grad_packed = p->mgp;
        }
        return;
    }
    for (size_t e = 0; e < n; e++) {
        p->wl[e] = gln_test_alloc(ws * es);
        memcpy(p->wl[e], (char *)d->w + e * ws * es, ws * es);
        if (o->bias) {
            p->bl[e] = gln_test_alloc(ko * es);
            memcpy(p->bl[e], (char *)d->b + e * ko * es, ko * es);
        }
        if (o->fuse) {
            p->mgl[e] = gln_test_alloc(ws * sizeof(float));
            memcpy(p->mgl[e], d->p + e * ws, ws * sizeof(float));
        }
    }
    c->params.weights = p->wl;
    if (o->bias) c->params.biases = p->bl;
    if (o->fuse) c->params.main_grads = p->mgl;
}

static float *params_main_grad(const mx_params_t *p, const mx_data_t *d, int32_t e) {
    return p->mgp ? p->mgp + (size_t)e * wsize(d) : p->mgl[e];
}

static void params_check_free(mx_params_t *p) {
    void *all[] = {p->wp, p->bp, p->mgp};
    for (size_t i = 0; i < 3; i++)
        if (all[i]) {
            CHECK_MSG(gln_guard_ok(all[i]), "guard after a packed parameter buffer overwritten");
            gln_test_free(all[i]);
        }
    for (int e = 0; e < NMAX; e++) {
        void *l[] = {p->wl[e], p->bl[e], p->mgl[e]};
        for (size_t i = 0; i < 3; i++)
            if (l[i]) {
                CHECK_MSG(gln_guard_ok(l[i]), "guard after expert %d parameter buffer overwritten", e);
                gln_test_free(l[i]);
            }
    }
}

static void *dup(const void *src, size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (bytes) memcpy(p, src, bytes);
    return p;
}

static void write_delayed_scales(gln_grouped_linear_t *layer) {
    for (int bwd = 0; bwd < 2; bwd++) {
        float *scale = NULL, *hist = NULL;
        int32_t slots = 0, len = 0;
        CHECK_OK(gln_grouped_linear_fp8_state(layer, bwd, &scale, &hist, &slots, &len));
        if (!scale) return;
        for (int32_t k = 0; k < slots; k++) scale[k] = delayed_scale(bwd, k);
    }
}

/* Collect dW (main_grad when fused, else the layer's gradients) and db into r. */
static void collect_grads(gln_grouped_linear_t *layer, const mx_data_t *d, const mx_opts_t *o,
                          const mx_params_t *p, mx_result_t *r) {
    size_t es = gln_dtype_size(d->dt), ws = wsize(d), n = (size_t)d->s->n, ko = (size_t)d->s->k_out;
    r->dw_dtype = o->fuse ? GLN_DTYPE_FP32 : d->dt;
    r->dw_bytes = n * ws * gln_dtype_size(r->dw_dtype);
    r->dw = calloc(1, r->dw_bytes);
    r->db_bytes = o->bias ? n * ko * es : 0;
    r->db = calloc(1, r->db_bytes + 1);
    for (int32_t e = 0; e < d->s->n; e++) {
        void *wg = NULL, *bg = NULL;
        CHECK_OK(gln_grouped_linear_grads(layer, e, &wg, &bg));
        size_t wb = ws * gln_dtype_size(r->dw_dtype);
        if (o->fuse)
            memcpy((char *)r->dw + e * wb, params_main_grad(p, d, e), wb);
        else if (wg)
            memcpy((char *)r->dw + e * wb, wg, wb);
        else {
            CHECK_MSG(0, "expert %d: no weight gradient buffer without fusion", e);
            r->ok = 0;
        }
        if (o->bias) {
            if (bg)
                memcpy((char *)r->db + e * ko * es, bg, ko * es);
            else {
                CHECK_MSG(0, "expert %d: no bias gradient buffer", e);
                r->ok = 0;
            }
        }
    }
}

/* One forward + backward (+ backward_dw) of a fresh layer. */
static void run_layer(const mx_data_t *d, const mx_opts_t *o, mx_result_t *r) {
    gln_context_t *ctx = gln_test_cpu_context();
    size_t es = gln_dtype_size(d->dt);
    gln_grouped_linear_config_t cfg;
    mx_params_t p;
    memset(r, 0, sizeof *r);
    config_make(&cfg, d, o);
    params_make(&p, d, o, &cfg);
    r->y_bytes = (size_t)(d->M * d->s->k_out) * es;
    r->dx_bytes = (size_t)(d->M * d->s->k_in) * es;
    void *y = gln_test_alloc(r->y_bytes + 1), *dx = gln_test_alloc(r->dx_bytes + 1);
    gln_poison(y, d->dt, (size_t)(d->M * d->s->k_out));
    gln_poison(dx, d->dt, (size_t)(d->M * d->s->k_in));
    gln_grouped_linear_t *layer = NULL;
    gln_grouped_linear_saved_t *saved = NULL;
    void *dev_splits = NULL;
    gln_status_t st = gln_grouped_linear_create(ctx, &cfg, &layer);
    CHECK_OK(st);
    if (st != GLN_STATUS_SUCCESS) goto out;
    if (o->recipe == GLN_RECIPE_FP8_DELAYED) write_delayed_scales(layer);
    CHECK_OK(gln_grouped_linear_zero_grad(layer));
    gln_tensor_t xt = gln_tensor_make(d->dt, d->M, d->s->k_in, d->x);
    gln_tensor_t yt = gln_tensor_make(d->dt, d->M, d->s->k_out, y);
    gln_tensor_t dyt = gln_tensor_make(d->dt, d->M, d->s->k_out, d->dy);
    gln_tensor_t dxt = gln_tensor_make(d->dt, d->M, d->s->k_in, dx);
    gln_grouped_linear_forward_args_t fa = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    fa.x = &xt;
    fa.m_splits = d->s->splits;
    fa.y = &yt;
    if (o->backend_splits) {
        size_t sb = (size_t)d->s->n * sizeof(int64_t);
        CHECK_OK(gln_malloc(ctx, sb, &dev_splits));
        if (dev_splits) CHECK_OK(gln_memcpy(ctx, dev_splits, d->s->splits, sb, GLN_COPY_HOST_TO_BACKEND));
        fa.m_splits = dev_splits;
        fa.splits_on_backend = 1;
    }
    st = gln_grouped_linear_forward(layer, &fa, &saved);
    CHECK_OK(st);
    if (st != GLN_STATUS_SUCCESS) goto out;
    st = gln_grouped_linear_backward(saved, &dyt, &dxt);
    CHECK_OK(st);
    if (st != GLN_STATUS_SUCCESS) goto out;
    if (o->delay) {
        st = gln_grouped_linear_backward_dw(layer);
        CHECK_OK(st);
        if (st != GLN_STATUS_SUCCESS) goto out;
    }
    r->ok = 1;
    r->y = dup(y, r->y_bytes);
    r->dx = dup(dx, r->dx_bytes);
    collect_grads(layer, d, o, &p, r);
out:
    if (saved) CHECK_OK(gln_grouped_linear_saved_release(saved));
    if (layer) CHECK_OK(gln_grouped_linear_destroy(layer));
    if (dev_splits) CHECK_OK(gln_free(ctx, dev_splits));
    CHECK_MSG(gln_guard_ok(y) && gln_guard_ok(dx), "guard after y / dx overwritten");
    gln_test_free(y);
    gln_test_free(dx);
    params_check_free(&p);
}

/* ---------------------------------------------------------------- reference + summary */

typedef struct mx_ref {
    gln_layer_ref_out_t o;
    double *mg, *mg_err; /* main_grad = prefill + dW */
} mx_ref_t;

static int ref_make(const mx_data_t *d, const mx_opts_t *o, mx_ref_t *ref) {
    gln_grouped_linear_config_t cfg;
    config_make(&cfg, d, o);
    gln_layer_ref_spec_t spec;
    gln_layer_ref_spec_init(&spec, &cfg);
    for (int32_t k = 0; k < 3 * d->s->n; k++) spec.fwd_scale[k] = delayed_scale(0, k);
    for (int32_t k = 0; k < 2 * d->s->n; k++) spec.bwd_scale[k] = delayed_scale(1, k);
    size_t es = gln_dtype_size(d->dt), ws = wsize(d), ko = (size_t)d->s->k_out;
    const void *wl[NMAX], *bl[NMAX];
    for (int32_t e = 0; e < d->s->n; e++) {
        wl[e] = (const char *)d->w + e * ws * es;
        bl[e] = (const char *)d->b + e * ko * es;
    }
    gln_layer_ref_inputs_t in = {d->s->n, d->s->k_in, d->s->k_out, d->s->splits, d->dt, d->x,
                                 d->dy, d->dt, wl, NULL, d->dt, o->bias ? bl : NULL};
    gln_status_t st = gln_layer_ref_run(gln_test_cpu_context(), &spec, &in, &ref->o);
    CHECK_OK(st);
    if (st != GLN_STATUS_SUCCESS) return 0;
    size_t n = (size_t)d->s->n * ws;
    ref->mg = malloc(n * sizeof(double));
    ref->mg_err = malloc(n * sizeof(double));
    for (size_t j = 0; j < n; j++) {
        ref->mg[j] = (double)d->p[j] + ref->o.dw[j];
        /* The accumulating GEMM may fold the prefill into its sum: (k + 3)·2^-24·|P| more. */
        ref->mg_err[j] = ref->o.dw_err[j] + (double)(d->M + GLN_REF_EXTRA_OPS) * GLN_REF_U_FP32 *
                                                fabs((double)d->p[j]);
    }
    return 1;
}

static void ref_free(mx_ref_t *ref) {
    gln_layer_ref_out_free(&ref->o);
    free(ref->mg);
    free(ref->mg_err);
}

typedef struct mx_summary {
    int configs;
    double worst[4]; /* y, dx, dW / main_grad, db */
} mx_summary_t;

static mx_summary_t summary[NUM_RECIPES];

static void worst_update(double *w, double v) {
    if (!(v <= *w)) *w = v; /* NaN sticks */
}

/* Zero-token experts: dW exactly 0 (or main_grad exactly its prefill) and db exactly 0. */
static void check_empty_experts(const mx_data_t *d, const mx_opts_t *o, const mx_result_t *r,
                                const char *tag) {
    size_t ws = wsize(d), ko = (size_t)d->s->k_out;
    for (int32_t e = 0; e < d->s->n; e++) {
        if (d->s->splits[e] != 0) continue;
        int bad = 0;
        for (size_t j = 0; j < ws; j++) {
            double g = gln_load(r->dw, r->dw_dtype, e * ws + j);
            double want = o->fuse ? (double)d->p[e * ws + j] : 0.0;
            if (!(g == want)) bad++;
        }
        CHECK_MSG(!bad, "%s: empty expert %d: %d dW elements not %s", tag, e, bad,
                  o->fuse ? "the untouched main_grad" : "zero");
        if (!o->bias) continue;
        bad = 0;
        for (size_t j = 0; j < ko; j++)
            if (!(gln_load(r->db, d->dt, e * ko + j) == 0.0)) bad++;
        CHECK_MSG(!bad, "%s: empty expert %d: %d db elements not zero", tag, e, bad);
    }
}

static void compare_to_ref(const mx_data_t *d, const mx_opts_t *o, const mx_ref_t *ref,
                           const mx_result_t *r, const char *tag) {
    mx_summary_t *s = &summary[o->recipe];
    char what[256];
    size_t nw = (size_t)d->s->n * wsize(d);
    snprintf(what, sizeof what, "%s y", tag);
    worst_update(&s->worst[0], gln_layer_ref_check(what, r->y, d->dt, ref->o.y, ref->o.y_err,
                                                   (size_t)(d->M * d->s->k_out)));
    snprintf(what, sizeof what, "%s dx", tag);
    worst_update(&s->worst[1], gln_layer_ref_check(what, r->dx, d->dt, ref->o.dx, ref->o.dx_err,
                                                   (size_t)(d->M * d->s->k_in)));
    snprintf(what, sizeof what, "%s %s", tag, o->fuse ? "main_grad" : "dW");
    worst_update(&s->worst[2],
                 o->fuse ? gln_layer_ref_check(what, r->dw, GLN_DTYPE_FP32, ref->mg, ref->mg_err, nw)
                         : gln_layer_ref_check(what, r->dw, d->dt, ref->o.dw, ref->o.dw_err, nw));
    if (o->bias) {
        snprintf(what, sizeof what, "%s db", tag);
        worst_update(&s->worst[3], gln_layer_ref_check(what, r->db, d->dt, ref->o.db, ref->o.db_err,
                                                       (size_t)(d->s->n * d->s->k_out)));
    }
    check_empty_experts(d, o, r, tag);
}

static void compare_paths(const mx_result_t *a, const mx_result_t *b, const char *tag) {
    char what[256];
    snprintf(what, sizeof what, "%s split vs grouped y", tag);
    gln_check_bitwise(what, a->y, b->y, a->y_bytes);
    snprintf(what, sizeof what, "%s split vs grouped dx", tag);
    gln_check_bitwise(what, a->dx, b->dx, a->dx_bytes);
    snprintf(what, sizeof what, "%s split vs grouped dW", tag);
    gln_check_bitwise(what, a->dw, b->dw, a->dw_bytes);
    snprintf(what, sizeof what, "%s split vs grouped db", tag);
    gln_check_bitwise(what, a->db, b->db, a->db_bytes);
}

static void opts_tag(char *buf, size_t n, const mx_data_t *d, const mx_opts_t *o) {
    snprintf(buf, n, "[%s %s %s bias=%d fuse=%d single=%d delay=%d%s]", d->s->name,
             gln_dtype_name(d->dt), gln_recipe_name(o->recipe), o->bias, o->fuse, o->single,
             o->delay, o->fmt == GLN_FP8_FORMAT_E4M3 ? " E4M3" : "");
}

/* Both paths of one configuration: reference check of the split run, bitwise grouped = split. */
static void run_config(const mx_data_t *d, mx_opts_t o, const mx_ref_t *ref) {
    char tag[200];
    opts_tag(tag, sizeof tag, d, &o);
    mx_result_t rs, rg;
    o.path = GLN_PATH_SPLIT;
    run_layer(d, &o, &rs);
    o.path = GLN_PATH_GROUPED;
    o.backend_splits = o.fuse ^ o.delay; /* half the grouped runs read splits from the backend */
    run_layer(d, &o, &rg);
    summary[o.recipe].configs++;
    CHECK_MSG(rs.ok && rg.ok, "%s: split ok=%d grouped ok=%d", tag, rs.ok, rg.ok);
    if (rs.ok) compare_to_ref(d, &o, ref, &rs, tag);
    if (rg.ok && !rs.ok) compare_to_ref(d, &o, ref, &rg, tag);
    if (rs.ok && rg.ok) compare_paths(&rs, &rg, tag);
    result_free(&rs);
    result_free(&rg);
}

/* ---------------------------------------------------------------- cases */

static void test_matrix_bf16(void) {
    for (size_t si = 0; si < sizeof SHAPES / sizeof SHAPES[0]; si++) {
        mx_data_t d;
        data_make(&d, &SHAPES[si], GLN_DTYPE_BF16, 100 + si);
        for (int rc = 0; rc < NUM_RECIPES; rc++)
            for (int bias = 0; bias < 2; bias++) {
                mx_opts_t o = {(gln_recipe_t)rc, GLN_PATH_SPLIT, bias, 0, 0, 0,
                               GLN_FP8_FORMAT_HYBRID, 0, 0};
                mx_ref_t ref;
                if (!ref_make(&d, &o, &ref)) continue;
                for (int opt = 0; opt < 8; opt++) {
                    o.fuse = opt & 1;
                    o.single = (opt >> 1) & 1;
                    o.delay = (opt >> 2) & 1;
                    run_config(&d, o, &ref);
                }
                ref_free(&ref);
            }
        data_free(&d);
    }
}

/* fp32 (with power-of-two current scales) and fp16 (E4M3 everywhere) activations. */
static void test_matrix_fp32_fp16(void) {
    const gln_dtype_t dts[2] = {GLN_DTYPE_FP32, GLN_DTYPE_FP16};
    for (int t = 0; t < 2; t++) {
        mx_data_t d;
        data_make(&d, &SHAPES[0], dts[t], 200 + t);
        for (int rc = 0; rc < NUM_RECIPES; rc++) {
            mx_opts_t o = {(gln_recipe_t)rc, GLN_PATH_SPLIT, 1, 0, 0, 0,
                           t ? GLN_FP8_FORMAT_E4M3 : GLN_FP8_FORMAT_HYBRID, t == 0, 0};
            mx_ref_t ref;
            if (!ref_make(&d, &o, &ref)) continue;
            for (int fuse = 0; fuse < 2; fuse++) {
                o.fuse = fuse;
                run_config(&d, o, &ref);
            }
            ref_free(&ref);
        }
        data_free(&d);
    }
}

static void test_matrix_summary(void) {
    static const char *outs[4] = {"y", "dx", "dW/main_grad", "db"};
    int total = 0;
    printf("\n%-14s %8s", "recipe", "configs");
    for (int k = 0; k < 4; k++) printf(" %13s", outs[k]);
    printf("   (worst |err| / tolerance; each config runs both paths)\n");
    for (int rc = 0; rc < NUM_RECIPES; rc++) {
        const mx_summary_t *s = &summary[rc];
        total += s->configs;
        printf("%-14s %8d", gln_recipe_name((gln_recipe_t)rc), s->configs);
        for (int k = 0; k < 4; k++) printf(" %13.4f", s->worst[k]);
        printf("\n");
        for (int k = 0; k < 4; k++)
            CHECK_MSG(s->worst[k] <= 1.0, "%s: worst %s error %.3f x tolerance",
                      gln_recipe_name((gln_recipe_t)rc), outs[k], s->worst[k]);
        CHECK_MSG(s->configs > 0, "%s: no configuration ran", gln_recipe_name((gln_recipe_t)rc));
    }
    printf("total configurations: %d (%d layer runs)\n\n", total, 2 * total);
}

GLN_TEST_MAIN(GLN_CASE(test_matrix_bf16), GLN_CASE(test_matrix_fp32_fp16),
              GLN_CASE(test_matrix_summary))

/* End-to-end plumbing tests of the grouped linear layer (the big matrix lives in
 * test_layer_matrix.c): forward + backward against a float64 reference, split vs grouped path
 * bitwise, library-allocated outputs, the delayed-wgrad FIFO, the quantized-weight cache.
 *
 * The reference quantizes each operand per expert with the public gln_quantize in the form the
 * GEMM uses (x, W rowwise for fprop; dy rowwise, W columnwise for dgrad; x, dy columnwise for
 * wgrad; E4M3 forward, E5M2 dy under HYBRID), dequantizes it with gln_dequantize and multiplies
 * in float64.  So it checks the layer's plumbing (roles, directions, per-expert statistics,
 * bias, accumulation), not the quantizers themselves (those have their own oracle tests). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define NMAX 6

/* Tolerances.  Outputs are rounded once from an FP32 accumulation:
 *   U_*      one rounding to the output dtype, relative (half an ulp: 2^-8 bf16, 2^-24 fp32);
 *   ACC_ULPS FP32 accumulation error per element ≈ (k + 4)·2^-24·Σ|a·b|, plus the dequantized
 *            operands of per-tensor FP8 being one FP32 rounding away from exact (2 more units). */
#define U_BF16 (1.0 / 256.0)
#define U_FP32 (1.0 / 16777216.0)
#define ACC_EXTRA 6.0

typedef struct setup {
    gln_recipe_t recipe;
    gln_path_t path;
    gln_dtype_t act, param;
    int bias;
    int32_t n;
    int64_t kin, kout, rows;
    int64_t splits[NMAX];
    int splits_on_backend; /* grouped path: splits in backend memory (host memory on the CPU) */
    int save_original_input;
    const gln_dist_weights_t *dist;
} setup_t;

typedef struct data {
    void *x, *dy, *w, *b; /* x [rows,kin] act, dy [rows,kout] act, w [n,kout,kin] param, b [n,kout] param */
} data_t;

typedef struct result {
    void *y, *dx, *wg, *bg; /* host copies */
} result_t;

static gln_context_t *cpu_ctx(void) {
    gln_context_t *ctx = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    return ctx;
}

static size_t es(gln_dtype_t d) { return gln_dtype_size(d); }

static void fill_uniform(void *buf, gln_dtype_t dtype, size_t count, double scale, gln_rng_t *r) {
    for (size_t i = 0; i < count; i++) gln_store(buf, dtype, i, scale * gln_rng_uniform(r, -1.0, 1.0));
}

static void data_make(const setup_t *s, data_t *d, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    d->x = gln_test_alloc((size_t)s->rows * s->kin * es(s->act));
    d->dy = gln_test_alloc((size_t)s->rows * s->kout * es(s->act));
    d->w = gln_test_alloc((size_t)s->n * s->kout * s->kin * es(s->param));
    d->b = gln_test_alloc((size_t)s->n * s->kout * es(s->param));
    fill_uniform(d->x, s->act, (size_t)s->rows * s->kin, 1.0, &r);
    fill_uniform(d->dy, s->act, (size_t)s->rows * s->kout, 1.0, &r);
    fill_uniform(d->w, s->param, (size_t)s->n * s->kout * s->kin, 0.2, &r);
    fill_uniform(d->b, s->param, (size_t)s->n * s->kout, 0.5, &r);
}

static void data_free(data_t *d) {
    gln_test_free(d->x);
    gln_test_free(d->dy);
    gln_test_free(d->w);
    gln_test_free(d->b);
}

static void result_alloc(const setup_t *s, result_t *o) {
    o->y = gln_test_alloc((size_t)s->rows * s->kout * es(s->act));
    o->dx = gln_test_alloc((size_t)s->rows * s->kin * es(s->act));
    o->wg = gln_test_alloc((size_t)s->n * s->kout * s->kin * es(s->param));
    o->bg = gln_test_alloc((size_t)s->n * s->kout * es(s->param));
    gln_poison(o->y, s->act, (size_t)s->rows * s->kout);
    gln_poison(o->dx, s->act, (size_t)s->rows * s->kin);
}

static void result_free(result_t *o) {
    CHECK(gln_guard_ok(o->y) && gln_guard_ok(o->dx) && gln_guard_ok(o->wg) && gln_guard_ok(o->bg));
    gln_test_free(o->y);
    gln_test_free(o->dx);
    gln_test_free(o->wg);
    gln_test_free(o->bg);
}

static gln_grouped_linear_config_t config_of(const setup_t *s, data_t *d) {
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = s->n;
    c.in_features = s->kin;
    c.out_features = s->kout;
    c.bias = s->bias;
    c.param_dtype = s->param;
    c.activation_dtype = s->act;
    c.recipe = s->recipe;
    c.path = s->path;
    c.save_original_input = s->save_original_input;
    if (s->dist) {
        c.params.distributed = s->dist;
        c.weights_require_grad = 0; /* must be ignored: the group decides */
    } else {
        c.params.weight_packed = d->w;
        c.single_grouped_weight = 1;
    }
    if (s->bias) c.params.bias_packed = d->b, c.single_grouped_bias = 1;
    return c;
}

static void copy_grads(gln_grouped_linear_t *L, const setup_t *s, result_t *o) {
    size_t wb = (size_t)s->kout * s->kin * es(s->param), bb = (size_t)s->kout * es(s->param);
    for (int32_t i = 0; i < s->n; i++) {
        void *wg = NULL, *bg = NULL;
        CHECK_OK(gln_grouped_linear_grads(L, i, &wg, &bg));
        if (wg) memcpy((char *)o->wg + wb * i, wg, wb);
        if (bg) memcpy((char *)o->bg + bb * i, bg, bb);
    }
}

/* One forward + backward; lib_alloc: let the library allocate y and dx. */
static void run_layer(gln_context_t *ctx, const setup_t *s, data_t *d, result_t *o, int lib_alloc) {
    gln_grouped_linear_config_t c = config_of(s, d);
    gln_grouped_linear_t *L = NULL;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &L));
    if (!L) return;
    gln_tensor_t x = gln_tensor_make(s->act, s->rows, s->kin, d->x);
    gln_tensor_t y = gln_tensor_make(s->act, s->rows, s->kout, lib_alloc ? NULL : o->y);
    gln_tensor_t dy = gln_tensor_make(s->act, s->rows, s->kout, d->dy);
    gln_tensor_t dx = gln_tensor_make(s->act, s->rows, s->kin, lib_alloc ? NULL : o->dx);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &x;
    a.m_splits = s->splits;
    a.splits_on_backend = s->splits_on_backend;
    a.y = &y;
    gln_grouped_linear_saved_t *sv = NULL;
    CHECK_OK(gln_grouped_linear_forward(L, &a, &sv));
    CHECK(sv != NULL && y.data != NULL);
    CHECK_OK(gln_grouped_linear_backward(sv, &dy, &dx));
    CHECK(dx.data != NULL);
    if (lib_alloc && y.data && dx.data) {
        /* rows past Σ splits (grouped path) are zero in a library-allocated buffer */
        memcpy(o->y, y.data, (size_t)s->rows * s->kout * es(s->act));
        memcpy(o->dx, dx.data, (size_t)s->rows * s->kin * es(s->act));
    }
    copy_grads(L, s, o);
    CHECK_OK(gln_grouped_linear_saved_release(sv));
    CHECK_OK(gln_grouped_linear_destroy(L));
}

/* ---------------------------------------------------------------- float64 reference */

static gln_quant_config_t role_config(gln_recipe_t recipe, int role /*0 x,1 w,2 dy*/) {
    gln_quant_config_t q = GLN_QUANT_CONFIG_INIT;
    q.mode = recipe == GLN_RECIPE_MXFP8 ? GLN_SCALING_MXFP8_1D
             : recipe == GLN_RECIPE_FP8_BLOCK ? (role == 1 ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D)
                                              : GLN_SCALING_TENSOR;
    /* default RECIPE_DEFAULT: HYBRID (dy E5M2) for per-tensor recipes, E4M3 for block recipes */
    int hybrid = recipe == GLN_RECIPE_FP8_DELAYED || recipe == GLN_RECIPE_FP8_CURRENT;
    q.fp8_dtype = role == 2 && hybrid ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
    q.power_2_scale = recipe == GLN_RECIPE_FP8_BLOCK;
    return q;
}

/* The operand [r, c] as the GEMM sees it, as float64 (see the file comment). */
static void operand(gln_context_t *ctx, const setup_t *s, int role, const void *src, gln_dtype_t dt,
                    int64_t r, int64_t c, int colwise, double *out) {
    size_t cnt = (size_t)r * c;
    if (s->recipe == GLN_RECIPE_NONE) {
        for (size_t i = 0; i < cnt; i++) out[i] = gln_round_to(gln_load(src, dt, i), s->act);
        return;
    }
    if (cnt == 0) return;
    gln_quant_config_t q = role_config(s->recipe, role);
    q.rowwise = !colwise;
    q.columnwise = colwise;
    gln_quant_layout_t lay;
    CHECK_OK(gln_quant_layout(q.mode, q.fp8_dtype, r, c, &lay));
    float sc = 1.0f, am = 0.0f;
    gln_tensor_t in = gln_tensor_make(dt, r, c, (void *)src);
    gln_tensor_t qt = gln_tensor_make(q.fp8_dtype, r, c, NULL);
    qt.scaling = q.mode;
    void *b1 = calloc(1, lay.data_bytes + 1), *b2 = calloc(1, lay.scale_bytes + 1);
    void *b3 = calloc(1, lay.col_data_bytes + 1), *b4 = calloc(1, lay.col_scale_bytes + 1);
    if (colwise) {
        qt.col_data = b3;
        qt.col_scale_inv = b4;
    } else {
        qt.data = b1;
        qt.scale_inv = b2;
    }
    qt.scale = &sc;
    qt.amax = &am;
    float *f = malloc(cnt * sizeof(float));
    gln_tensor_t ft = gln_tensor_make(GLN_DTYPE_FP32, r, c, f);
    CHECK_OK(gln_quantize(ctx, &q, &in, &qt));
    CHECK_OK(gln_dequantize(ctx, &qt, colwise, &ft));
    for (size_t i = 0; i < cnt; i++) out[i] = f[i];
    free(f);
    free(b1);
    free(b2);
    free(b3);
    free(b4);
}

typedef struct ref {
    double *y, *ya, *dx, *dxa, *dw, *dwa, *db; /* values and Σ|a·b| per element */
} ref_t;

static void ref_free(ref_t *r) {
    free(r->y), free(r->ya), free(r->dx), free(r->dxa), free(r->dw), free(r->dwa), free(r->db);
}

static void ref_compute(gln_context_t *ctx, const setup_t *s, const data_t *d, ref_t *R) {
    int64_t n = s->n, ki = s->kin, ko = s->kout, M = s->rows;
    R->y = calloc((size_t)M * ko, 8), R->ya = calloc((size_t)M * ko, 8);
    R->dx = calloc((size_t)M * ki, 8), R->dxa = calloc((size_t)M * ki, 8);
    R->dw = calloc((size_t)n * ko * ki, 8), R->dwa = calloc((size_t)n * ko * ki, 8);
    R->db = calloc((size_t)n * ko, 8);
    size_t big = (size_t)(M + 1) * (ki > ko ? ki : ko) + (size_t)ko * ki;
    double *xr = malloc(big * 8), *xc = malloc(big * 8), *dr = malloc(big * 8), *dc = malloc(big * 8);
    double *wr = malloc(big * 8), *wc = malloc(big * 8);
    int64_t r0 = 0;
    for (int64_t e = 0; e < n; e++) {
        int64_t m = s->splits[e];
        const char *xs = (const char *)d->x + (size_t)r0 * ki * es(s->act);
        const char *ds = (const char *)d->dy + (size_t)r0 * ko * es(s->act);
        const char *ws = (const char *)d->w + (size_t)e * ko * ki * es(s->param);
        operand(ctx, s, 0, xs, s->act, m, ki, 0, xr);
        operand(ctx, s, 0, xs, s->act, m, ki, 1, xc);
        operand(ctx, s, 2, ds, s->act, m, ko, 0, dr);
        operand(ctx, s, 2, ds, s->act, m, ko, 1, dc);
        operand(ctx, s, 1, ws, s->param, ko, ki, 0, wr);
        operand(ctx, s, 1, ws, s->param, ko, ki, 1, wc);
        for (int64_t i = 0; i < m; i++) {
            for (int64_t o = 0; o < ko; o++) {
                double acc = 0, ab = 0;
                for (int64_t k = 0; k < ki; k++) {
                    acc += xr[i * ki + k] * wr[o * ki + k];
                    ab += fabs(xr[i * ki + k] * wr[o * ki + k]);
                }
                if (s->bias) {
                    double b = gln_round_to(gln_load(d->b, s->param, (size_t)e * ko + o), s->act);
                    acc += b;
                    ab += fabs(b);
                }
                R->y[(r0 + i) * ko + o] = acc;
                R->ya[(r0 + i) * ko + o] = ab;
            }
            for (int64_t k = 0; k < ki; k++) {
                double acc = 0, ab = 0;
                for (int64_t o = 0; o < ko; o++) {
                    acc += dr[i * ko + o] * wc[o * ki + k];
                    ab += fabs(dr[i * ko + o] * wc[o * ki + k]);
                }
                R->dx[(r0 + i) * ki + k] = acc;
                R->dxa[(r0 + i) * ki + k] = ab;
            }
        }
        for (int64_t o = 0; o < ko; o++) {
            for (int64_t k = 0; k < ki; k++) {
                double acc = 0, ab = 0;
                for (int64_t i = 0; i < m; i++) {
                    acc += dc[i * ko + o] * xc[i * ki + k];
                    ab += fabs(dc[i * ko + o] * xc[i * ki + k]);
                }
                R->dw[(e * ko + o) * ki + k] = acc;
                R->dwa[(e * ko + o) * ki + k] = ab;
            }
            double db = 0;
            for (int64_t i = 0; i < m; i++) db += gln_load(d->dy, s->act, (size_t)(r0 + i) * ko + o);
            R->db[e * ko + o] = db;
        }
        r0 += m;
    }
    free(xr), free(xc), free(dr), free(dc), free(wr), free(wc);
}

/* |got - ref| <= u·|ref| + (k + ACC_EXTRA)·2^-24·Σ|a·b| (+ the output's rounding of that). */
static void check_ref(const char *what, const void *got, gln_dtype_t dt, const double *ref,
                      const double *abssum, size_t count, int64_t k) {
    double u = dt == GLN_DTYPE_BF16 ? U_BF16 : dt == GLN_DTYPE_FP16 ? 1.0 / 2048.0 : U_FP32;
    int bad = 0;
    for (size_t i = 0; i < count; i++) {
        double g = gln_load(got, dt, i);
        double acc = abssum ? ((double)k + ACC_EXTRA) * U_FP32 * abssum[i] : 0.0;
        double tol = u * (fabs(ref[i]) + acc) + acc + 1e-30;
        if (!(fabs(g - ref[i]) <= tol)) {
            if (bad++ < 5)
                CHECK_MSG(0, "%s[%zu]: got %.9g want %.9g (tol %.3g)", what, i, g, ref[i], tol);
        }
    }
    CHECK_MSG(bad == 0, "%s: %d of %zu elements out of tolerance", what, bad, count);
}

static void check_against_reference(gln_context_t *ctx, const setup_t *s) {
    data_t d;
    result_t o;
    ref_t R;
    data_make(s, &d, 1000 + s->recipe);
    result_alloc(s, &o);
    run_layer(ctx, s, &d, &o, 0);
    ref_compute(ctx, s, &d, &R);
    int64_t maxm = 0;
    for (int32_t i = 0; i < s->n; i++) maxm = s->splits[i] > maxm ? s->splits[i] : maxm;
    check_ref("y", o.y, s->act, R.y, R.ya, (size_t)s->rows * s->kout, s->kin + 1);
    check_ref("dx", o.dx, s->act, R.dx, R.dxa, (size_t)s->rows * s->kin, s->kout);
    check_ref("wgrad", o.wg, s->param, R.dw, R.dwa, (size_t)s->n * s->kout * s->kin, maxm);
    if (s->bias) {
        /* dbias: Σ of ≤ maxm high-precision values in FP32, one rounding to the param dtype */
        double *abs_db = calloc((size_t)s->n * s->kout, 8);
        int64_t r0 = 0;
        for (int32_t e = 0; e < s->n; e++) {
            for (int64_t i = 0; i < s->splits[e]; i++)
                for (int64_t c = 0; c < s->kout; c++)
                    abs_db[e * s->kout + c] += fabs(gln_load(d.dy, s->act, (size_t)(r0 + i) * s->kout + c));
            r0 += s->splits[e];
        }
        check_ref("dbias", o.bg, s->param, R.db, abs_db, (size_t)s->n * s->kout, maxm);
        free(abs_db);
    }
    ref_free(&R);
    result_free(&o);
    data_free(&d);
}

static setup_t base_setup(gln_recipe_t recipe, gln_path_t path) {
    setup_t s = {recipe, path, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 1, 4, 48, 40, 60, {17, 0, 38, 5}, 0, 0, NULL};
    return s;
}

static void test_bf16_none_matches_reference(void) {
    gln_context_t *ctx = cpu_ctx();
    setup_t s = base_setup(GLN_RECIPE_NONE, GLN_PATH_SPLIT);
    check_against_reference(ctx, &s);
    /* FP32 parameters cast to bf16 activations (weights and bias rounded once) */
    s.param = GLN_DTYPE_FP32;
    check_against_reference(ctx, &s);
    gln_context_destroy(ctx);
}

static void test_fp8_current_matches_reference(void) {
    gln_context_t *ctx = cpu_ctx();
    setup_t s = base_setup(GLN_RECIPE_FP8_CURRENT, GLN_PATH_SPLIT);
    check_against_reference(ctx, &s);
    s.path = GLN_PATH_GROUPED;
    check_against_reference(ctx, &s);
    gln_context_destroy(ctx);
}

static void test_mxfp8_matches_reference(void) {
    gln_context_t *ctx = cpu_ctx();
    setup_t s = base_setup(GLN_RECIPE_MXFP8, GLN_PATH_SPLIT);
    check_against_reference(ctx, &s);
    s.path = GLN_PATH_GROUPED;
    check_against_reference(ctx, &s);
    gln_context_destroy(ctx);
}

static void test_fp8_block_matches_reference(void) {
    gln_context_t *ctx = cpu_ctx();
    setup_t s = base_setup(GLN_RECIPE_FP8_BLOCK, GLN_PATH_SPLIT);
    s.kin = 200; /* two 128-blocks along K_in, a partial one */
    check_against_reference(ctx, &s);
    gln_context_destroy(ctx);
}

/* Split and grouped paths give the same bytes for every recipe (CPU). */
static void test_paths_bitwise_equal(void) {
    gln_context_t *ctx = cpu_ctx();
    for (int rc = GLN_RECIPE_NONE; rc <= GLN_RECIPE_FP8_BLOCK; rc++) {
        setup_t s = base_setup((gln_recipe_t)rc, GLN_PATH_SPLIT);
        data_t d;
        result_t a, b;
        data_make(&s, &d, 77);
        result_alloc(&s, &a);
        result_alloc(&s, &b);
        run_layer(ctx, &s, &d, &a, 0);
        s.path = GLN_PATH_GROUPED;
        s.splits_on_backend = rc % 2; /* both kinds of splits on the grouped path */
        run_layer(ctx, &s, &d, &b, 0);
        const char *nm = gln_recipe_name((gln_recipe_t)rc);
        CHECK_MSG(gln_check_bitwise("y", a.y, b.y, (size_t)s.rows * s.kout * es(s.act)), "%s y", nm);
        CHECK_MSG(gln_check_bitwise("dx", a.dx, b.dx, (size_t)s.rows * s.kin * es(s.act)), "%s dx", nm);
        CHECK_MSG(gln_check_bitwise("wgrad", a.wg, b.wg, (size_t)s.n * s.kout * s.kin * es(s.param)),
                  "%s wgrad", nm);
        CHECK_MSG(gln_check_bitwise("dbias", a.bg, b.bg, (size_t)s.n * s.kout * es(s.param)), "%s dbias", nm);
        result_free(&a);
        result_free(&b);
        data_free(&d);
    }
    gln_context_destroy(ctx);
}

/* Library-allocated y / dx equal caller buffers bitwise; on the grouped path with Σ splits <
 * rows the caller's padding rows stay untouched. */
static void test_library_allocated_outputs_and_padding(void) {
    gln_context_t *ctx = cpu_ctx();
    for (int p = 0; p < 2; p++) {
        setup_t s = base_setup(GLN_RECIPE_FP8_CURRENT, (gln_path_t)p);
        if (p == 1) s.rows += 7; /* 7 padding rows on the grouped path */
        data_t d;
        result_t a, b;
        data_make(&s, &d, 5);
        result_alloc(&s, &a);
        result_alloc(&s, &b);
        run_layer(ctx, &s, &d, &a, 0);
        run_layer(ctx, &s, &d, &b, 1);
        int64_t used = s.rows - (p == 1 ? 7 : 0);
        CHECK(gln_check_bitwise("y", a.y, b.y, (size_t)used * s.kout * es(s.act)));
        CHECK(gln_check_bitwise("dx", a.dx, b.dx, (size_t)used * s.kin * es(s.act)));
        for (int64_t i = used * s.kout; i < s.rows * s.kout; i++) {
            CHECK(isnan(gln_load(a.y, s.act, (size_t)i)));   /* caller padding untouched */
            CHECK(gln_load(b.y, s.act, (size_t)i) == 0.0);   /* library buffer zeroed */
        }
        for (int64_t i = used * s.kin; i < s.rows * s.kin; i++) CHECK(isnan(gln_load(a.dx, s.act, (size_t)i)));
        result_free(&a);
        result_free(&b);
        data_free(&d);
    }
    gln_context_destroy(ctx);
}

/* ---------------------------------------------------------------- microbatches */

typedef struct mb_layer {
    gln_grouped_linear_t *L;
    float *main_grad; /* [n, kout, kin] */
} mb_layer_t;

static void mb_create(gln_context_t *ctx, const setup_t *s, data_t *d, int delay, mb_layer_t *m) {
    gln_grouped_linear_config_t c = config_of(s, d);
    size_t cnt = (size_t)s->n * s->kout * s->kin;
    m->main_grad = gln_test_alloc(cnt * sizeof(float));
    for (size_t i = 0; i < cnt; i++) m->main_grad[i] = 0.25f;
    c.fuse_wgrad_accumulation = 1;
    c.delay_wgrad_compute = delay;
    c.params.main_grad_packed = m->main_grad;
    m->L = NULL;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &m->L));
}

static void mb_step(const setup_t *s, mb_layer_t *m, const void *x, const void *dy, gln_microbatch_t mb) {
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
    gln_context_t *ctx = cpu_ctx();
    for (int p = 0; p < 2; p++) {
        setup_t s = base_setup(GLN_RECIPE_MXFP8, (gln_path_t)p);
        data_t d1, d2;
        data_make(&s, &d1, 11);
        data_make(&s, &d2, 12);
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
        CHECK(gln_check_bitwise("dbias", bg_del, bg_now, (size_t)s.n * s.kout * es(s.param)));
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
        data_free(&d1);
        data_free(&d2);
    }
    gln_context_destroy(ctx);
}

/* ---------------------------------------------------------------- weight cache */

static void fwd_only(gln_grouped_linear_t *L, const setup_t *s, const data_t *d, void *y,
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

static int same(const setup_t *s, const void *a, const void *b) {
    return memcmp(a, b, (size_t)s->rows * s->kout * es(s->act)) == 0;
}

/* UNSET never caches (sees changed weights at once); FIRST fills the cache; NEXT reuses it
 * until weights_updated; an in-flight saved context keeps the weights its forward used. */
static void test_weight_cache_semantics(void) {
    gln_context_t *ctx = cpu_ctx();
    setup_t s = base_setup(GLN_RECIPE_FP8_CURRENT, GLN_PATH_SPLIT);
    s.bias = 0;
    data_t d;
    data_make(&s, &d, 21);
    gln_grouped_linear_config_t c = config_of(&s, &d);
    gln_grouped_linear_t *L = NULL, *fresh = NULL;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &L));
    size_t ybytes = (size_t)s.rows * s.kout * es(s.act), wcnt = (size_t)s.n * s.kout * s.kin;
    void *y_old = gln_test_alloc(ybytes), *y_new = gln_test_alloc(ybytes), *y = gln_test_alloc(ybytes);
    fwd_only(L, &s, &d, y_old, GLN_MICROBATCH_FIRST, NULL);
    /* change the weights (×3, not a power of two, so quantized values differ) */
    for (size_t i = 0; i < wcnt; i++) gln_store(d.w, s.param, i, 3.0 * gln_load(d.w, s.param, i));
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &fresh));
    fwd_only(fresh, &s, &d, y_new, GLN_MICROBATCH_UNSET, NULL);
    CHECK(!same(&s, y_old, y_new));

    fwd_only(L, &s, &d, y, GLN_MICROBATCH_UNSET, NULL);
    CHECK_MSG(same(&s, y, y_new), "UNSET must quantize the current weights (no caching)");
    fwd_only(L, &s, &d, y, GLN_MICROBATCH_NEXT, NULL);
    CHECK_MSG(same(&s, y, y_old), "NEXT must reuse the cache filled by FIRST");
    CHECK_OK(gln_grouped_linear_weights_updated(L));
    fwd_only(L, &s, &d, y, GLN_MICROBATCH_NEXT, NULL);
    CHECK_MSG(same(&s, y, y_new), "NEXT after weights_updated must re-quantize");

    /* in-flight saved context: forward with the new weights, then change weights and re-quantize
     * (FIRST) before its backward; its dgrad must still use the weights of its forward */
    gln_grouped_linear_saved_t *sv = NULL, *sv_ref = NULL;
    fwd_only(L, &s, &d, y, GLN_MICROBATCH_FIRST, &sv);
    fwd_only(fresh, &s, &d, y, GLN_MICROBATCH_FIRST, &sv_ref);
    for (size_t i = 0; i < wcnt; i++) gln_store(d.w, s.param, i, -gln_load(d.w, s.param, i));
    fwd_only(L, &s, &d, y, GLN_MICROBATCH_FIRST, NULL);
    CHECK_MSG(!same(&s, y, y_new), "FIRST must re-quantize");
    size_t dxb = (size_t)s.rows * s.kin * es(s.act);
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
    data_free(&d);
    gln_context_destroy(ctx);
}

/* fp8_format RECIPE_DEFAULT (the config default) is TE's default per recipe: MXFP8 and FP8 block
 * scaling quantize dy as E4M3, delayed / current scaling use HYBRID (dy E5M2).  Checked through
 * dx (the dgrad reads the quantized dy): bitwise equal to the explicit format, different from
 * the other one. */
static gln_status_t dx_with_format(gln_context_t *ctx, const setup_t *s, data_t *d, gln_fp8_format_t fmt,
                                   void *dx) {
    gln_grouped_linear_config_t c = config_of(s, d);
    c.fp8_format = fmt;
    gln_grouped_linear_t *L = NULL;
    gln_status_t st = gln_grouped_linear_create(ctx, &c, &L);
    if (st != GLN_STATUS_SUCCESS) return st;
    void *y = gln_test_alloc((size_t)s->rows * s->kout * es(s->act));
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
    gln_context_t *ctx = cpu_ctx();
    gln_grouped_linear_config_t init = GLN_GROUPED_LINEAR_CONFIG_INIT;
    CHECK(init.fp8_format == GLN_FP8_FORMAT_RECIPE_DEFAULT);
    gln_recipe_t recipes[4] = {GLN_RECIPE_MXFP8, GLN_RECIPE_FP8_BLOCK, GLN_RECIPE_FP8_CURRENT,
                               GLN_RECIPE_FP8_DELAYED};
    for (int r = 0; r < 4; r++) {
        setup_t s = base_setup(recipes[r], GLN_PATH_SPLIT);
        data_t d;
        data_make(&s, &d, 23);
        size_t xb = (size_t)s.rows * s.kin * es(s.act);
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
        data_free(&d);
    }
    gln_context_destroy(ctx);
}

/* Owned parameters: N(0, init_std²) per expert, biases zero, distinct experts, inference
 * forward with a library-allocated y owned by the layer. */
static void test_owned_params_and_inference(void) {
    gln_context_t *ctx = cpu_ctx();
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
    gln_context_t *ctx = cpu_ctx();
    for (int rc = GLN_RECIPE_FP8_CURRENT; rc <= GLN_RECIPE_FP8_BLOCK; rc++) {
        for (int p = 0; p < 2; p++) {
            setup_t s = base_setup((gln_recipe_t)rc, (gln_path_t)p);
            data_t d;
            result_t a, b;
            data_make(&s, &d, 31);
            result_alloc(&s, &a);
            result_alloc(&s, &b);
            run_layer(ctx, &s, &d, &a, 0);
            s.save_original_input = 1;
            run_layer(ctx, &s, &d, &b, 0);
            CHECK_MSG(gln_check_bitwise("wgrad", a.wg, b.wg, (size_t)s.n * s.kout * s.kin * es(s.param)),
                      "%s path %d", gln_recipe_name((gln_recipe_t)rc), p);
            CHECK(gln_check_bitwise("y", a.y, b.y, (size_t)s.rows * s.kout * es(s.act)));
            CHECK(gln_check_bitwise("dx", a.dx, b.dx, (size_t)s.rows * s.kin * es(s.act)));
            result_free(&a);
            result_free(&b);
            data_free(&d);
        }
    }
    gln_context_destroy(ctx);
}

/* Delayed scaling: quantization records per-expert amax in history row 0; the forward slots are
 * updated at the end of each forward, the backward slots at the end of each backward:
 * scale = fp8_max / amax (margin 0), kept at 1 for empty experts and the unused slots. */
static void test_delayed_scaling_schedule(void) {
    gln_context_t *ctx = cpu_ctx();
    for (int p = 0; p < 2; p++) {
        setup_t s = base_setup(GLN_RECIPE_FP8_DELAYED, (gln_path_t)p);
        data_t d;
        data_make(&s, &d, 41);
        gln_grouped_linear_config_t c = config_of(&s, &d);
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
        data_free(&d);
    }
    gln_context_destroy(ctx);
}

/* Frozen weights: no wgrad buffer, but dbias and dx still work; zero_grad clears bias grads. */
static void test_frozen_weights_and_zero_grad(void) {
    gln_context_t *ctx = cpu_ctx();
    setup_t s = base_setup(GLN_RECIPE_FP8_CURRENT, GLN_PATH_SPLIT);
    data_t d;
    data_make(&s, &d, 51);
    gln_grouped_linear_config_t c = config_of(&s, &d);
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
    CHECK(fabs(gln_load(bg, s.param, 0) - db0) <= U_BF16 * fabs(db0) + 1e-6);
    CHECK_OK(gln_grouped_linear_zero_grad(L));
    for (int64_t i = 0; i < s.kout; i++) CHECK(gln_load(bg, s.param, (size_t)i) == 0.0);
    CHECK_OK(gln_grouped_linear_saved_release(sv));
    CHECK_OK(gln_grouped_linear_destroy(L));
    data_free(&d);
    gln_context_destroy(ctx);
}

/* ---------------------------------------------------------------- distributed weights */

/* A fake group: full weights W (bf16) held on the host; materialize_forward hands out 2·W,
 * materialize_backward 4·W (so the test sees which copy each GEMM used), grad buffers FP32. */
typedef struct fake_group {
    const setup_t *s;
    const void *w;           /* [n, kout, kin] bf16 */
    uint16_t *gathered;      /* live copy or NULL */
    float *grad;             /* [n, kout, kin] */
    int fwd, bwd, released, finalized, last_accumulate, requires_grad;
} fake_group_t;

static gln_status_t fg_materialize(fake_group_t *g, double mult, gln_tensor_t *out) {
    size_t each = (size_t)g->s->kout * g->s->kin;
    CHECK(g->gathered == NULL); /* one materialized group at a time */
    g->gathered = malloc(each * g->s->n * 2);
    for (size_t i = 0; i < each * g->s->n; i++)
        gln_store(g->gathered, GLN_DTYPE_BF16, i, mult * gln_load(g->w, GLN_DTYPE_BF16, i));
    for (int32_t e = 0; e < g->s->n; e++)
        out[e] = gln_tensor_make(GLN_DTYPE_BF16, g->s->kout, g->s->kin, g->gathered + each * e);
    return GLN_STATUS_SUCCESS;
}
static int fg_requires_grad(void *impl) { return ((fake_group_t *)impl)->requires_grad; }
static gln_status_t fg_fwd(void *impl, gln_tensor_t *w) { ((fake_group_t *)impl)->fwd++; return fg_materialize(impl, 2.0, w); }
static gln_status_t fg_bwd(void *impl, gln_tensor_t *w) { ((fake_group_t *)impl)->bwd++; return fg_materialize(impl, 4.0, w); }
static gln_status_t fg_release(void *impl, gln_tensor_t *w) {
    fake_group_t *g = impl;
    CHECK(w[0].data == g->gathered);
    free(g->gathered);
    g->gathered = NULL;
    g->released++;
    return GLN_STATUS_SUCCESS;
}
static gln_status_t fg_buffer(void *impl, int32_t e, float **buf) {
    fake_group_t *g = impl;
    *buf = g->grad + (size_t)e * g->s->kout * g->s->kin;
    return GLN_STATUS_SUCCESS;
}
static gln_status_t fg_finalize(void *impl, int accumulate, int *pending) {
    fake_group_t *g = impl;
    g->finalized++;
    g->last_accumulate = accumulate;
    *pending = 0;
    return GLN_STATUS_SUCCESS;
}
static gln_status_t fg_wait(void *impl) { (void)impl; return GLN_STATUS_SUCCESS; }

static void scale_weights(const setup_t *s, const data_t *src, data_t *dst, double mult) {
    *dst = *src;
    size_t cnt = (size_t)s->n * s->kout * s->kin;
    dst->w = gln_test_alloc(cnt * 2);
    for (size_t i = 0; i < cnt; i++) gln_store(dst->w, GLN_DTYPE_BF16, i, mult * gln_load(src->w, GLN_DTYPE_BF16, i));
}

/* fprop uses the forward copy, dgrad the backward copy (re-quantized for FP8 recipes), the
 * wgrad lands in grad_buffer() (FP32, overwrite) and finalize runs once with accumulate =
 * !(microbatch == FIRST); requires_grad comes from the group; every copy is released. */
static void test_distributed_protocol(void) {
    gln_context_t *ctx = cpu_ctx();
    gln_recipe_t recipes[3] = {GLN_RECIPE_NONE, GLN_RECIPE_FP8_CURRENT, GLN_RECIPE_MXFP8};
    for (int r = 0; r < 3; r++) {
        for (int p = 0; p < 2; p++) {
            setup_t s = base_setup(recipes[r], (gln_path_t)p);
            data_t d, d2, d4;
            data_make(&s, &d, 61);
            fake_group_t g = {&s, d.w, NULL, NULL, 0, 0, 0, 0, -1, 1};
            g.grad = gln_test_alloc((size_t)s.n * s.kout * s.kin * sizeof(float));
            gln_poison(g.grad, GLN_DTYPE_FP32, (size_t)s.n * s.kout * s.kin);
            gln_dist_weights_t proto = {sizeof proto, &g, s.n, s.kout, s.kin, fg_requires_grad, fg_fwd,
                                        fg_bwd, fg_release, fg_buffer, fg_finalize, fg_wait, NULL};
            s.dist = &proto;
            result_t o;
            result_alloc(&s, &o);
            run_layer(ctx, &s, &d, &o, 0);
            CHECK(g.fwd == 1 && g.bwd == 1 && g.released == 2 && g.gathered == NULL);
            CHECK(g.finalized == 1 && g.last_accumulate == 1); /* microbatch UNSET accumulates */
            ref_t R2, R4;
            scale_weights(&s, &d, &d2, 2.0);
            scale_weights(&s, &d, &d4, 4.0);
            ref_compute(ctx, &s, &d2, &R2);
            ref_compute(ctx, &s, &d4, &R4);
            int64_t maxm = 38;
            check_ref("dist y", o.y, s.act, R2.y, R2.ya, (size_t)s.rows * s.kout, s.kin + 1);
            check_ref("dist dx", o.dx, s.act, R4.dx, R4.dxa, (size_t)s.rows * s.kin, s.kout);
            check_ref("dist wgrad", g.grad, GLN_DTYPE_FP32, R2.dw, R2.dwa, (size_t)s.n * s.kout * s.kin, maxm);
            ref_free(&R2);
            ref_free(&R4);
            gln_test_free(d2.w);
            gln_test_free(d4.w);
            if (r == 1) {
                /* microbatch FIRST, no dgrad: finalize overwrites, nothing is re-materialized;
                 * a group without gradients gets no wgrad and no finalize */
                gln_grouped_linear_config_t c = config_of(&s, &d);
                gln_grouped_linear_t *L = NULL;
                CHECK_OK(gln_grouped_linear_create(ctx, &c, &L));
                gln_tensor_t xt = gln_tensor_make(s.act, s.rows, s.kin, d.x), yt = gln_tensor_make(s.act, s.rows, s.kout, o.y);
                gln_tensor_t dyt = gln_tensor_make(s.act, s.rows, s.kout, d.dy);
                gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
                a.x = &xt, a.m_splits = s.splits, a.y = &yt, a.microbatch = GLN_MICROBATCH_FIRST;
                a.input_requires_grad = 0;
                for (int rg = 1; rg >= 0; rg--) {
                    gln_grouped_linear_saved_t *sv = NULL;
                    g.requires_grad = rg;
                    int fin = g.finalized;
                    CHECK_OK(gln_grouped_linear_forward(L, &a, &sv));
                    CHECK_OK(gln_grouped_linear_backward(sv, &dyt, NULL));
                    CHECK(g.bwd == 1 && g.gathered == NULL);
                    CHECK(g.finalized == fin + rg);
                    if (rg) CHECK(g.last_accumulate == 0);
                    CHECK_OK(gln_grouped_linear_saved_release(sv));
                }
                CHECK_OK(gln_grouped_linear_destroy(L));
            }
            result_free(&o);
            gln_test_free(g.grad);
            data_free(&d);
        }
    }
    gln_context_destroy(ctx);
}

/* ---------------------------------------------------------------- async finalize, late failures */

#define AF_N 2
#define AF_KIN 16
#define AF_KOUT 8
#define AF_ROWS 12
static const int64_t AF_SPLITS[AF_N] = {5, 7};

/* A protocol table wrapping a sharded group whose grad_buffer can be made to fail. */
static gln_dist_weights_t af_proto;
static const gln_dist_weights_t *af_inner;
static int af_fail_grad_buffer;
static gln_status_t af_grad_buffer(void *impl, int32_t e, float **buf) {
    if (af_fail_grad_buffer) return GLN_STATUS_COMM_ERROR;
    return af_inner->grad_buffer(impl, e, buf);
}

typedef struct af_layer {
    gln_sharded_weights_t *sw;
    gln_grouped_linear_t *L;
} af_layer_t;

static int af_make(gln_context_t *ctx, gln_comm_t *comm, int async, int wrap, const float *w,
                   af_layer_t *a) {
    memset(a, 0, sizeof *a);
    gln_sharded_weights_config_t sc = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    sc.num_experts = AF_N, sc.out_features = AF_KOUT, sc.in_features = AF_KIN;
    sc.async_finalize = async;
    CHECK_OK(gln_sharded_weights_create(ctx, comm, &sc, &a->sw));
    if (!a->sw) return 0;
    CHECK_OK(gln_sharded_weights_load_full(a->sw, w));
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = AF_N, c.in_features = AF_KIN, c.out_features = AF_KOUT;
    c.params.distributed = gln_sharded_weights_protocol(a->sw);
    if (wrap) {
        af_inner = c.params.distributed;
        af_proto = *af_inner;
        af_proto.grad_buffer = af_grad_buffer;
        c.params.distributed = &af_proto;
    }
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &a->L));
    return a->L != NULL;
}

static void af_free(af_layer_t *a) {
    if (a->L) CHECK_OK(gln_grouped_linear_destroy(a->L));
    if (a->sw) CHECK_OK(gln_sharded_weights_destroy(a->sw));
}

static gln_grouped_linear_saved_t *af_fwd(af_layer_t *a, void *x, void *y) {
    gln_tensor_t xt = gln_tensor_make(GLN_DTYPE_BF16, AF_ROWS, AF_KIN, x);
    gln_tensor_t yt = gln_tensor_make(GLN_DTYPE_BF16, AF_ROWS, AF_KOUT, y);
    gln_grouped_linear_forward_args_t fa = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    fa.x = &xt, fa.m_splits = AF_SPLITS, fa.y = &yt;
    gln_grouped_linear_saved_t *sv = NULL;
    CHECK_OK(gln_grouped_linear_forward(a->L, &fa, &sv));
    return sv;
}

static gln_status_t af_bwd(gln_grouped_linear_saved_t *sv, void *dy, void *dx) {
    gln_tensor_t dyt = gln_tensor_make(GLN_DTYPE_BF16, AF_ROWS, AF_KOUT, dy);
    gln_tensor_t dxt = gln_tensor_make(GLN_DTYPE_BF16, AF_ROWS, AF_KIN, dx);
    return gln_grouped_linear_backward(sv, &dyt, &dxt);
}

/* With async_finalize, two backwards in a row (no wait by the caller in between) both succeed:
 * the layer completes its pending finalize itself before the second backward uses the group;
 * dx, dbias and main_grad equal a synchronous group's bit for bit.  A backward that fails on a
 * late check (grad_buffer) writes neither dx nor dbias nor main_grad and keeps its saved context:
 * the retry succeeds and gives the same results. */
static void test_async_finalize_and_late_failure(void) {
    gln_context_t *ctx = cpu_ctx();
    gln_comm_t *comm = NULL;
    CHECK_OK(gln_comm_create_self(NULL, &comm));
    float w[AF_N * AF_KOUT * AF_KIN];
    gln_rng_t r = gln_rng_seed(77);
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) w[i] = (float)(0.1 * gln_rng_normal(&r));
    size_t xb = AF_ROWS * AF_KIN * 2, yb = AF_ROWS * AF_KOUT * 2;
    void *x[2], *dy[2], *y = gln_test_alloc(yb), *dx[3][2];
    for (int i = 0; i < 2; i++) {
        x[i] = gln_test_alloc(xb), dy[i] = gln_test_alloc(yb);
        for (int64_t j = 0; j < AF_ROWS * AF_KIN; j++) gln_store(x[i], GLN_DTYPE_BF16, (size_t)j, gln_rng_normal(&r));
        for (int64_t j = 0; j < AF_ROWS * AF_KOUT; j++)
            gln_store(dy[i], GLN_DTYPE_BF16, (size_t)j, 0.1 * gln_rng_normal(&r));
        for (int k = 0; k < 3; k++) dx[k][i] = gln_test_alloc(xb);
    }
    float mg[3][AF_N * AF_KOUT * AF_KIN];
    uint16_t db[3][AF_N * AF_KOUT];
    for (int k = 0; k < 3; k++) { /* 0: sync, 1: async, 2: async with a failing first attempt */
        af_layer_t a;
        af_fail_grad_buffer = 0;
        if (!af_make(ctx, comm, k > 0, k == 2, w, &a)) {
            af_free(&a);
            continue;
        }
        gln_grouped_linear_saved_t *s1 = af_fwd(&a, x[0], y), *s2 = af_fwd(&a, x[1], y);
        if (s1 && s2) {
            CHECK_OK(af_bwd(s1, dy[0], dx[k][0]));
            if (k == 2) {
                void *bg = NULL;
                CHECK_OK(gln_grouped_linear_grads(a.L, 1, NULL, &bg));
                uint16_t db_before[AF_KOUT];
                if (bg) memcpy(db_before, bg, sizeof db_before);
                float mg_before[AF_N * AF_KOUT * AF_KIN];
                CHECK_OK(gln_sharded_weights_wait(a.sw));
                CHECK_OK(gln_sharded_weights_gather_main_grad(a.sw, mg_before));
                gln_poison(dx[k][1], GLN_DTYPE_BF16, AF_ROWS * AF_KIN);
                af_fail_grad_buffer = 1;
                CHECK_STATUS(af_bwd(s2, dy[1], dx[k][1]), GLN_STATUS_COMM_ERROR, NULL);
                af_fail_grad_buffer = 0;
                int written = 0;
                for (int64_t i = 0; i < AF_ROWS * AF_KIN; i++)
                    written += !isnan(gln_load(dx[k][1], GLN_DTYPE_BF16, (size_t)i));
                CHECK_MSG(written == 0, "a failed backward wrote %d dx elements", written);
                CHECK_MSG(bg && memcmp(bg, db_before, sizeof db_before) == 0,
                          "a failed backward accumulated dbias");
                CHECK_OK(gln_sharded_weights_gather_main_grad(a.sw, mg[k]));
                CHECK_MSG(memcmp(mg[k], mg_before, sizeof mg_before) == 0,
                          "a failed backward changed main_grad");
            }
            /* no wait by the caller: the layer completes the pending finalize itself */
            CHECK_OK(af_bwd(s2, dy[1], dx[k][1]));
            CHECK_STATUS(af_bwd(s2, dy[1], dx[k][1]), GLN_STATUS_INVALID_STATE, "already");
        }
        if (s1) CHECK_OK(gln_grouped_linear_saved_release(s1));
        if (s2) CHECK_OK(gln_grouped_linear_saved_release(s2));
        CHECK_OK(gln_sharded_weights_wait(a.sw));
        CHECK_OK(gln_sharded_weights_gather_main_grad(a.sw, mg[k]));
        for (int e = 0; e < AF_N; e++) {
            void *bg = NULL;
            CHECK_OK(gln_grouped_linear_grads(a.L, e, NULL, &bg));
            if (bg) memcpy(db[k] + e * AF_KOUT, bg, AF_KOUT * 2);
        }
        af_free(&a);
    }
    for (int k = 1; k < 3; k++) {
        char what[64];
        snprintf(what, sizeof what, "variant %d main_grad vs sync", k);
        gln_check_bitwise(what, mg[k], mg[0], sizeof mg[0]);
        snprintf(what, sizeof what, "variant %d dbias vs sync", k);
        gln_check_bitwise(what, db[k], db[0], sizeof db[0]);
        for (int i = 0; i < 2; i++) {
            snprintf(what, sizeof what, "variant %d dx%d vs sync", k, i);
            gln_check_bitwise(what, dx[k][i], dx[0][i], xb);
        }
    }
    for (int i = 0; i < 2; i++) {
        gln_test_free(x[i]), gln_test_free(dy[i]);
        for (int k = 0; k < 3; k++) gln_test_free(dx[k][i]);
    }
    gln_test_free(y);
    CHECK_OK(gln_comm_destroy(comm));
    gln_context_destroy(ctx);
}

/* Every expert empty: zero rows on the split path, only padding rows on the grouped path; all
 * recipes run, wgrad / dbias stay zero, nothing is written to y / dx. */
static void test_all_experts_empty(void) {
    gln_context_t *ctx = cpu_ctx();
    for (int rc = GLN_RECIPE_NONE; rc <= GLN_RECIPE_FP8_BLOCK; rc++) {
        for (int p = 0; p < 2; p++) {
            setup_t s = base_setup((gln_recipe_t)rc, (gln_path_t)p);
            memset(s.splits, 0, sizeof s.splits);
            s.rows = p == 0 ? 0 : 5;
            data_t d;
            result_t o;
            data_make(&s, &d, 91);
            result_alloc(&s, &o);
            run_layer(ctx, &s, &d, &o, 0);
            for (int64_t i = 0; i < s.rows * s.kout; i++) CHECK(isnan(gln_load(o.y, s.act, (size_t)i)));
            for (int64_t i = 0; i < s.rows * s.kin; i++) CHECK(isnan(gln_load(o.dx, s.act, (size_t)i)));
            for (int64_t i = 0; i < s.n * s.kout * s.kin; i++) CHECK(gln_load(o.wg, s.param, (size_t)i) == 0.0);
            for (int64_t i = 0; i < s.n * s.kout; i++) CHECK(gln_load(o.bg, s.param, (size_t)i) == 0.0);
            result_free(&o);
            data_free(&d);
        }
    }
    gln_context_destroy(ctx);
}

GLN_TEST_MAIN(GLN_CASE(test_recipe_default_fp8_format), GLN_CASE(test_async_finalize_and_late_failure), GLN_CASE(test_bf16_none_matches_reference), GLN_CASE(test_fp8_current_matches_reference),
              GLN_CASE(test_mxfp8_matches_reference), GLN_CASE(test_fp8_block_matches_reference),
              GLN_CASE(test_paths_bitwise_equal), GLN_CASE(test_library_allocated_outputs_and_padding),
              GLN_CASE(test_delayed_wgrad_fifo), GLN_CASE(test_weight_cache_semantics),
              GLN_CASE(test_owned_params_and_inference), GLN_CASE(test_save_original_input_bitwise),
              GLN_CASE(test_delayed_scaling_schedule), GLN_CASE(test_frozen_weights_and_zero_grad),
              GLN_CASE(test_distributed_protocol), GLN_CASE(test_all_experts_empty))

/* End-to-end plumbing tests of the grouped linear layer (the big matrix lives in
 * test_layer_matrix.c, the state kept across calls in test_layer_state.c): forward + backward
 * against a float64 reference, split vs grouped path bitwise, library-allocated outputs, the
 * distributed-weight protocol, an asynchronous finalize and late failures, all experts empty.
 *
 * The reference quantizes each operand per expert with the public gln_quantize in the form the
 * GEMM uses (x, W rowwise for fprop; dy rowwise, W columnwise for dgrad; x, dy columnwise for
 * wgrad; E4M3 forward, E5M2 dy under HYBRID), dequantizes it with gln_dequantize and multiplies
 * in float64.  So it checks the layer's plumbing (roles, directions, per-expert statistics,
 * bias, accumulation), not the quantizers themselves (those have their own oracle tests). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layer_setup.h"

/* Tolerances.  Outputs are rounded once from an FP32 accumulation:
 *   U_*      one rounding to the output dtype, relative (half an ulp: 2^-8 bf16, 2^-24 fp32);
 *   ACC_ULPS FP32 accumulation error per element ≈ (k + 4)·2^-24·Σ|a·b|, plus the dequantized
 *            operands of per-tensor FP8 being one FP32 rounding away from exact (2 more units). */
#define U_BF16 (1.0 / 256.0)
#define U_FP32 (1.0 / 16777216.0)
#define ACC_EXTRA 6.0

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
static void operand(gln_context_t *ctx, const gln_ls_setup_t *s, int role, const void *src, gln_dtype_t dt,
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

static void ref_compute(gln_context_t *ctx, const gln_ls_setup_t *s, const gln_ls_data_t *d, ref_t *R) {
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
        const char *xs = (const char *)d->x + (size_t)r0 * ki * gln_dtype_size(s->act);
        const char *ds = (const char *)d->dy + (size_t)r0 * ko * gln_dtype_size(s->act);
        const char *ws = (const char *)d->w + (size_t)e * ko * ki * gln_dtype_size(s->param);
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

static void check_against_reference(gln_context_t *ctx, const gln_ls_setup_t *s) {
    gln_ls_data_t d;
    gln_ls_result_t o;
    ref_t R;
    gln_ls_data_make(s, &d, 1000 + s->recipe);
    gln_ls_result_alloc(s, &o);
    gln_ls_run(ctx, s, &d, &o, 0);
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
    gln_ls_result_free(&o);
    gln_ls_data_free(&d);
}


static void test_bf16_none_matches_reference(void) {
    gln_context_t *ctx = gln_ls_cpu_ctx();
    gln_ls_setup_t s = gln_ls_base_setup(GLN_RECIPE_NONE, GLN_PATH_SPLIT);
    check_against_reference(ctx, &s);
    /* FP32 parameters cast to bf16 activations (weights and bias rounded once) */
    s.param = GLN_DTYPE_FP32;
    check_against_reference(ctx, &s);
    gln_context_destroy(ctx);
}

static void test_fp8_current_matches_reference(void) {
    gln_context_t *ctx = gln_ls_cpu_ctx();
    gln_ls_setup_t s = gln_ls_base_setup(GLN_RECIPE_FP8_CURRENT, GLN_PATH_SPLIT);
    check_against_reference(ctx, &s);
    s.path = GLN_PATH_GROUPED;
    check_against_reference(ctx, &s);
    gln_context_destroy(ctx);
}

static void test_mxfp8_matches_reference(void) {
    gln_context_t *ctx = gln_ls_cpu_ctx();
    gln_ls_setup_t s = gln_ls_base_setup(GLN_RECIPE_MXFP8, GLN_PATH_SPLIT);
    check_against_reference(ctx, &s);
    s.path = GLN_PATH_GROUPED;
    check_against_reference(ctx, &s);
    gln_context_destroy(ctx);
}

static void test_fp8_block_matches_reference(void) {
    gln_context_t *ctx = gln_ls_cpu_ctx();
    gln_ls_setup_t s = gln_ls_base_setup(GLN_RECIPE_FP8_BLOCK, GLN_PATH_SPLIT);
    s.kin = 200; /* two 128-blocks along K_in, a partial one */
    check_against_reference(ctx, &s);
    gln_context_destroy(ctx);
}

/* Split and grouped paths give the same bytes for every recipe (CPU). */
static void test_paths_bitwise_equal(void) {
    gln_context_t *ctx = gln_ls_cpu_ctx();
    for (int rc = GLN_RECIPE_NONE; rc <= GLN_RECIPE_FP8_BLOCK; rc++) {
        gln_ls_setup_t s = gln_ls_base_setup((gln_recipe_t)rc, GLN_PATH_SPLIT);
        gln_ls_data_t d;
        gln_ls_result_t a, b;
        gln_ls_data_make(&s, &d, 77);
        gln_ls_result_alloc(&s, &a);
        gln_ls_result_alloc(&s, &b);
        gln_ls_run(ctx, &s, &d, &a, 0);
        s.path = GLN_PATH_GROUPED;
        s.splits_on_backend = rc % 2; /* both kinds of splits on the grouped path */
        gln_ls_run(ctx, &s, &d, &b, 0);
        const char *nm = gln_recipe_name((gln_recipe_t)rc);
        CHECK_MSG(gln_check_bitwise("y", a.y, b.y, (size_t)s.rows * s.kout * gln_dtype_size(s.act)), "%s y", nm);
        CHECK_MSG(gln_check_bitwise("dx", a.dx, b.dx, (size_t)s.rows * s.kin * gln_dtype_size(s.act)), "%s dx", nm);
        CHECK_MSG(gln_check_bitwise("wgrad", a.wg, b.wg, (size_t)s.n * s.kout * s.kin * gln_dtype_size(s.param)),
                  "%s wgrad", nm);
        CHECK_MSG(gln_check_bitwise("dbias", a.bg, b.bg, (size_t)s.n * s.kout * gln_dtype_size(s.param)), "%s dbias", nm);
        gln_ls_result_free(&a);
        gln_ls_result_free(&b);
        gln_ls_data_free(&d);
    }
    gln_context_destroy(ctx);
}

/* Library-allocated y / dx equal caller buffers bitwise; on the grouped path with Σ splits <
 * rows the caller's padding rows stay untouched. */
static void test_library_allocated_outputs_and_padding(void) {
    gln_context_t *ctx = gln_ls_cpu_ctx();
    for (int p = 0; p < 2; p++) {
        gln_ls_setup_t s = gln_ls_base_setup(GLN_RECIPE_FP8_CURRENT, (gln_path_t)p);
        if (p == 1) s.rows += 7; /* 7 padding rows on the grouped path */
        gln_ls_data_t d;
        gln_ls_result_t a, b;
        gln_ls_data_make(&s, &d, 5);
        gln_ls_result_alloc(&s, &a);
        gln_ls_result_alloc(&s, &b);
        gln_ls_run(ctx, &s, &d, &a, 0);
        gln_ls_run(ctx, &s, &d, &b, 1);
        int64_t used = s.rows - (p == 1 ? 7 : 0);
        CHECK(gln_check_bitwise("y", a.y, b.y, (size_t)used * s.kout * gln_dtype_size(s.act)));
        CHECK(gln_check_bitwise("dx", a.dx, b.dx, (size_t)used * s.kin * gln_dtype_size(s.act)));
        for (int64_t i = used * s.kout; i < s.rows * s.kout; i++) {
            CHECK(isnan(gln_load(a.y, s.act, (size_t)i)));   /* caller padding untouched */
            CHECK(gln_load(b.y, s.act, (size_t)i) == 0.0);   /* library buffer zeroed */
        }
        for (int64_t i = used * s.kin; i < s.rows * s.kin; i++) CHECK(isnan(gln_load(a.dx, s.act, (size_t)i)));
        gln_ls_result_free(&a);
        gln_ls_result_free(&b);
        gln_ls_data_free(&d);
    }
    gln_context_destroy(ctx);
}

/* ---------------------------------------------------------------- distributed weights */

/* A fake group: full weights W (bf16) held on the host; materialize_forward hands out 2·W,
 * materialize_backward 4·W (so the test sees which copy each GEMM used), grad buffers FP32. */
typedef struct fake_group {
    const gln_ls_setup_t *s;
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

static void scale_weights(const gln_ls_setup_t *s, const gln_ls_data_t *src, gln_ls_data_t *dst, double mult) {
    *dst = *src;
    size_t cnt = (size_t)s->n * s->kout * s->kin;
    dst->w = gln_test_alloc(cnt * 2);
    for (size_t i = 0; i < cnt; i++) gln_store(dst->w, GLN_DTYPE_BF16, i, mult * gln_load(src->w, GLN_DTYPE_BF16, i));
}

/* fprop uses the forward copy, dgrad the backward copy (re-quantized for FP8 recipes), the
 * wgrad lands in grad_buffer() (FP32, overwrite) and finalize runs once with accumulate =
 * !(microbatch == FIRST); requires_grad comes from the group; every copy is released. */
static void test_distributed_protocol(void) {
    gln_context_t *ctx = gln_ls_cpu_ctx();
    gln_recipe_t recipes[3] = {GLN_RECIPE_NONE, GLN_RECIPE_FP8_CURRENT, GLN_RECIPE_MXFP8};
    for (int r = 0; r < 3; r++) {
        for (int p = 0; p < 2; p++) {
            gln_ls_setup_t s = gln_ls_base_setup(recipes[r], (gln_path_t)p);
            gln_ls_data_t d, d2, d4;
            gln_ls_data_make(&s, &d, 61);
            fake_group_t g = {&s, d.w, NULL, NULL, 0, 0, 0, 0, -1, 1};
            g.grad = gln_test_alloc((size_t)s.n * s.kout * s.kin * sizeof(float));
            gln_poison(g.grad, GLN_DTYPE_FP32, (size_t)s.n * s.kout * s.kin);
            gln_dist_weights_t proto = {sizeof proto, &g, s.n, s.kout, s.kin, fg_requires_grad, fg_fwd,
                                        fg_bwd, fg_release, fg_buffer, fg_finalize, fg_wait, NULL};
            s.dist = &proto;
            gln_ls_result_t o;
            gln_ls_result_alloc(&s, &o);
            gln_ls_run(ctx, &s, &d, &o, 0);
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
                gln_grouped_linear_config_t c = gln_ls_config(&s, &d);
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
            gln_ls_result_free(&o);
            gln_test_free(g.grad);
            gln_ls_data_free(&d);
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
    gln_context_t *ctx = gln_ls_cpu_ctx();
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
    gln_context_t *ctx = gln_ls_cpu_ctx();
    for (int rc = GLN_RECIPE_NONE; rc <= GLN_RECIPE_FP8_BLOCK; rc++) {
        for (int p = 0; p < 2; p++) {
            gln_ls_setup_t s = gln_ls_base_setup((gln_recipe_t)rc, (gln_path_t)p);
            memset(s.splits, 0, sizeof s.splits);
            s.rows = p == 0 ? 0 : 5;
            gln_ls_data_t d;
            gln_ls_result_t o;
            gln_ls_data_make(&s, &d, 91);
            gln_ls_result_alloc(&s, &o);
            gln_ls_run(ctx, &s, &d, &o, 0);
            for (int64_t i = 0; i < s.rows * s.kout; i++) CHECK(isnan(gln_load(o.y, s.act, (size_t)i)));
            for (int64_t i = 0; i < s.rows * s.kin; i++) CHECK(isnan(gln_load(o.dx, s.act, (size_t)i)));
            for (int64_t i = 0; i < s.n * s.kout * s.kin; i++) CHECK(gln_load(o.wg, s.param, (size_t)i) == 0.0);
            for (int64_t i = 0; i < s.n * s.kout; i++) CHECK(gln_load(o.bg, s.param, (size_t)i) == 0.0);
            gln_ls_result_free(&o);
            gln_ls_data_free(&d);
        }
    }
    gln_context_destroy(ctx);
}

GLN_TEST_MAIN(GLN_CASE(test_async_finalize_and_late_failure), GLN_CASE(test_bf16_none_matches_reference),
              GLN_CASE(test_fp8_current_matches_reference), GLN_CASE(test_mxfp8_matches_reference),
              GLN_CASE(test_fp8_block_matches_reference), GLN_CASE(test_paths_bitwise_equal),
              GLN_CASE(test_library_allocated_outputs_and_padding), GLN_CASE(test_distributed_protocol),
              GLN_CASE(test_all_experts_empty))

/* The CUDA MoE kernels (src/backend/cuda/cuda_moe.cu) against the CPU reference
 * (src/backend/cpu/cpu_moe.c): every op runs on both backends from the same inputs, outputs
 * poisoned alike and followed by guard bytes on the device.
 *
 *   bitwise    permutation plan (m_splits, row_of), permute, permute backward, unpermute, the dyp
 *              rows of unpermute backward, the router's selected experts (logits on a 1/16 grid:
 *              distinct logits give probabilities a factor e^(1/16) apart, far beyond the few-ulp
 *              difference of the device expf, while equal logits tie exactly and the lower index
 *              must win on both)
 *   tolerance  gates, dlogits, activations (the device expf / tanhf are within a few ulp of the
 *              host's), dgates (a tree-order dot product) -- the TOL_* constants below
 *   device     out-of-range experts / row_of entries are reported by gln_context_async_error
 *   repeat     the device results are bitwise equal run to run
 *   shapes     H not a multiple of 8 (the scalar kernels) and a multiple of 8 (the 8-element
 *              vector kernels), row counts that fill no vector grid evenly
 *
 * Skips (exit 77) without a CUDA device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device_twin.h"
#include "harness.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
/* FP32 results of a few transcendental calls and roundings: expf / tanhf differ by <= 2 ulp
 * between the device and glibc, each op chains a handful of them. */
#define TOL_F32_REL 2e-5
#define TOL_F32_ABS 1e-6
/* one rounding to bf16 / fp16 of FP32 values that differ slightly may land one ulp apart */
#define TOL_BF16_REL 0.0078125
#define TOL_FP16_REL 0.0009765625
/* dgates: H-term dot products of O(1) values in a different order: |error| <= H·ulp·Σ|terms| */
#define TOL_DOT_REL 1e-5

static gln_context_t *g_cu, *g_cpu;

static double rel_tol(gln_dtype_t dt) {
    return dt == GLN_DTYPE_BF16 ? TOL_BF16_REL : dt == GLN_DTYPE_FP16 ? TOL_FP16_REL : TOL_F32_REL;
}

/* The device copy of t (count elements of dt) within atol + rtol·|cpu| of the host copy;
 * NaN must match NaN. */
static void check_close(const char *what, const gln_twin_t *t, gln_dtype_t dt, size_t count, double rtol,
                        double atol) {
    if (!t->d) return;
    void *got = malloc(t->bytes ? t->bytes : 1);
    CHECK_OK(gln_memcpy(g_cu, got, t->d, t->bytes, GLN_COPY_BACKEND_TO_HOST));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < count; i++) {
        const double a = gln_load(got, dt, i), b = gln_load(t->h, dt, i);
        const int ok = (isnan(a) && isnan(b)) || fabs(a - b) <= atol + rtol * fabs(b);
        if (!ok && bad++ == 0) first = i;
    }
    CHECK_MSG(bad == 0, "%s: %zu of %zu outside tolerance; first [%zu]: cuda %.9g cpu %.9g", what, bad, count,
              first, gln_load(got, dt, first), gln_load(t->h, dt, first));
    free(got);
}

static gln_twin_t twin_hp(gln_dtype_t dt, size_t n, gln_rng_t *r, double scale) {
    void *h = malloc(n * gln_dtype_size(dt) + 1);
    for (size_t i = 0; i < n; i++) gln_store(h, dt, i, scale * gln_rng_normal(r));
    gln_twin_t t = gln_twin_input(g_cu, h, n * gln_dtype_size(dt), 4);
    free(h);
    return t;
}

static gln_tensor_t hview(const gln_twin_t *t, gln_dtype_t dt, int64_t rows, int64_t cols) {
    return gln_tensor_make(dt, rows, cols, t->h);
}
static gln_tensor_t dview(const gln_twin_t *t, gln_dtype_t dt, int64_t rows, int64_t cols) {
    return gln_tensor_make(dt, rows, cols, t->d);
}

/* ---- router ---------------------------------------------------------------------------------- */

static void router_case(int64_t T, int32_t E, int32_t k, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    float *lg = malloc((size_t)(T * E) * sizeof *lg + 4);
    for (int64_t i = 0; i < T * E; i++) lg[i] = (float)gln_rng_int(&r, -48, 48) / 16.0f;
    float *dg = malloc((size_t)(T * k) * sizeof *dg + 4);
    for (int64_t i = 0; i < T * k; i++) dg[i] = (float)gln_rng_normal(&r);
    gln_twin_t logits = gln_twin_input(g_cu, lg, (size_t)(T * E) * 4, 0);
    gln_twin_t dgates = gln_twin_input(g_cu, dg, (size_t)(T * k) * 4, 0);
    gln_twin_t ex = gln_twin_new(g_cu, (size_t)(T * k) * 4, 0xA5u, 0);
    gln_twin_t gates = gln_twin_new(g_cu, (size_t)(T * k) * 4, 0xFFu, 0);
    gln_twin_t dl = gln_twin_new(g_cu, (size_t)(T * E) * 4, 0xFFu, 4);
    CHECK_OK(gln_moe_router_forward(g_cpu, T, E, k, logits.h, ex.h, gates.h));
    CHECK_OK(gln_moe_router_forward(g_cu, T, E, k, logits.d, ex.d, gates.d));
    gln_twin_check(g_cu, &ex, 4, "router", "experts", NULL, NULL);
    check_close("router gates", &gates, GLN_DTYPE_FP32, (size_t)(T * k), TOL_F32_REL, TOL_F32_ABS);
    CHECK_OK(gln_moe_router_backward(g_cpu, T, E, k, logits.h, ex.h, dgates.h, dl.h));
    CHECK_OK(gln_moe_router_backward(g_cu, T, E, k, logits.d, ex.d, dgates.d, dl.d));
    /* dz = p·(dp − Σ p·dp): cancellation near zero, so an absolute floor scaled by |dg| ~ 1 */
    check_close("router dlogits", &dl, GLN_DTYPE_FP32, (size_t)(T * E), 1e-4, 1e-6);
    CHECK_OK(gln_context_async_error(g_cu));
    gln_twin_t *all[] = {&logits, &dgates, &ex, &gates, &dl};
    for (size_t i = 0; i < COUNT(all); i++) gln_twin_free(g_cu, all[i]);
    free(lg);
    free(dg);
}

static void test_router(void) {
    router_case(300, 8, 2, 1);
    router_case(257, 64, 6, 2);
    router_case(33, 1, 1, 3);
    router_case(40, 16, 16, 4);
    router_case(1, 128, 8, 5);
}

/* Every logit equal: the selection is 0..k-1 on both, gates 1/k. */
static void test_router_ties(void) {
    const int64_t T = 5;
    const int32_t E = 12, k = 4;
    float lg[5 * 12];
    for (int i = 0; i < 60; i++) lg[i] = i % 12 == 7 ? 0.5f : 0.25f; /* expert 7 first, then 0, 1, 2 */
    gln_twin_t logits = gln_twin_input(g_cu, lg, sizeof lg, 0);
    gln_twin_t ex = gln_twin_new(g_cu, (size_t)(T * k) * 4, 0xA5u, 0);
    gln_twin_t gates = gln_twin_new(g_cu, (size_t)(T * k) * 4, 0xFFu, 0);
    CHECK_OK(gln_moe_router_forward(g_cpu, T, E, k, logits.h, ex.h, gates.h));
    CHECK_OK(gln_moe_router_forward(g_cu, T, E, k, logits.d, ex.d, gates.d));
    gln_twin_check(g_cu, &ex, 4, "router ties", "experts", NULL, NULL);
    const int32_t *e = ex.h;
    CHECK(e[0] == 7 && e[1] == 0 && e[2] == 1 && e[3] == 2);
    gln_twin_free(g_cu, &logits);
    gln_twin_free(g_cu, &ex);
    gln_twin_free(g_cu, &gates);
}

/* ---- permutation plan -------------------------------------------------------------------------- */

/* skew: 0 uniform experts, 1 most pairs on expert 0, 2 every pair on the last expert */
static void plan_case(int64_t T, int32_t E, int32_t k, int skew, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    const int64_t P = T * k;
    int32_t *e = malloc((size_t)P * 4 + 4);
    for (int64_t i = 0; i < P; i++)
        e[i] = skew == 2 ? E - 1 : skew == 1 && gln_rng_int(&r, 0, 3) ? 0 : (int32_t)gln_rng_int(&r, 0, E - 1);
    gln_twin_t ex = gln_twin_input(g_cu, e, (size_t)P * 4, 0);
    gln_twin_t splits = gln_twin_new(g_cu, (size_t)E * 8, 0xA5u, 8);
    gln_twin_t row_of = gln_twin_new(g_cu, (size_t)P * 8, 0xA5u, 0);
    CHECK_OK(gln_moe_permute_plan(g_cpu, T, E, k, ex.h, splits.h, row_of.h));
    CHECK_OK(gln_moe_permute_plan(g_cu, T, E, k, ex.d, splits.d, row_of.d));
    gln_twin_check(g_cu, &splits, 4, "plan", "m_splits", NULL, NULL);
    gln_twin_check(g_cu, &row_of, 4, "plan", "row_of", NULL, NULL);
    CHECK_OK(gln_context_async_error(g_cu));
    /* the FP8 padding of the plan (16 rows; MXFP8's 32) */
    for (int64_t align = 16; align <= 32; align *= 2) {
        CHECK_OK(gln_moe_permute_plan_aligned(g_cpu, T, E, k, align, ex.h, splits.h, row_of.h));
        CHECK_OK(gln_moe_permute_plan_aligned(g_cu, T, E, k, align, ex.d, splits.d, row_of.d));
        gln_twin_check(g_cu, &splits, 4, "aligned plan", "m_splits", NULL, NULL);
        gln_twin_check(g_cu, &row_of, 4, "aligned plan", "row_of", NULL, NULL);
        CHECK_OK(gln_context_async_error(g_cu));
    }
    gln_twin_free(g_cu, &ex);
    gln_twin_free(g_cu, &splits);
    gln_twin_free(g_cu, &row_of);
    free(e);
}

static void test_plan(void) {
    plan_case(0, 4, 2, 0, 1);
    plan_case(1, 1, 1, 0, 2);
    plan_case(7, 3, 2, 0, 3);
    plan_case(1000, 8, 2, 0, 4);
    plan_case(4099, 64, 2, 1, 5);
    plan_case(333, 1500, 3, 0, 6); /* more experts than threads */
    plan_case(2048, 64, 8, 2, 7);
}

/* ---- permute / unpermute ----------------------------------------------------------------------- */

static void move_case(int64_t T, int32_t E, int32_t k, int64_t H, gln_dtype_t xdt, gln_dtype_t pdt, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    const int64_t P = T * k;
    /* a valid plan from random distinct experts per token, made on the CPU */
    int32_t *e = malloc((size_t)P * 4 + 4);
    int64_t *splits = malloc((size_t)E * 8), *rows = malloc((size_t)P * 8 + 8);
    for (int64_t t = 0; t < T; t++)
        for (int32_t j = 0; j < k; j++) e[t * k + j] = (int32_t)((t * 7 + j * 3 + gln_rng_int(&r, 0, 1)) % E);
    CHECK_OK(gln_moe_permute_plan(g_cpu, T, E, k, e, splits, rows));
    float *g = malloc((size_t)P * 4 + 4);
    for (int64_t i = 0; i < P; i++) g[i] = (float)gln_rng_uniform(&r, 0.0, 1.0);
    gln_twin_t row_of = gln_twin_input(g_cu, rows, (size_t)P * 8, 0);
    gln_twin_t gates = gln_twin_input(g_cu, g, (size_t)P * 4, 0);
    gln_twin_t x = twin_hp(xdt, (size_t)(T * H), &r, 1.0);
    gln_twin_t yp = twin_hp(pdt, (size_t)(P * H), &r, 1.0);
    gln_twin_t dy = twin_hp(xdt, (size_t)(T * H), &r, 1.0);
    gln_twin_t xp = gln_twin_new(g_cu, (size_t)(P * H) * gln_dtype_size(pdt), 0xFFu, gln_dtype_size(pdt));
    gln_twin_t dx = gln_twin_new(g_cu, (size_t)(T * H) * gln_dtype_size(xdt), 0xFFu, gln_dtype_size(xdt));
    gln_twin_t y = gln_twin_new(g_cu, (size_t)(T * H) * gln_dtype_size(xdt), 0xFFu, gln_dtype_size(xdt));
    gln_twin_t dyp = gln_twin_new(g_cu, (size_t)(P * H) * gln_dtype_size(pdt), 0xFFu, gln_dtype_size(pdt));
    gln_twin_t dgates = gln_twin_new(g_cu, (size_t)P * 4, 0xFFu, 0);
    /* gln_twin_check compares 1- or 4-byte elements: 2-byte dtypes bytewise (still every bit) */
    const size_t pes = gln_dtype_size(pdt) == 4 ? 4 : 1, xes = gln_dtype_size(xdt) == 4 ? 4 : 1;

    gln_tensor_t hx = hview(&x, xdt, T, H), dxv = dview(&x, xdt, T, H);
    gln_tensor_t hxp = hview(&xp, pdt, P, H), dxpv = dview(&xp, pdt, P, H);
    CHECK_OK(gln_moe_permute(g_cpu, T, k, row_of.h, &hx, &hxp));
    CHECK_OK(gln_moe_permute(g_cu, T, k, row_of.d, &dxv, &dxpv));
    gln_twin_check(g_cu, &xp, pes, "permute", "xp", NULL, NULL);

    /* permute backward of yp (as dxp) into dx */
    gln_tensor_t hyp = hview(&yp, pdt, P, H), dypv = dview(&yp, pdt, P, H);
    gln_tensor_t hdx = hview(&dx, xdt, T, H), ddx = dview(&dx, xdt, T, H);
    CHECK_OK(gln_moe_permute_backward(g_cpu, T, k, row_of.h, &hyp, &hdx));
    CHECK_OK(gln_moe_permute_backward(g_cu, T, k, row_of.d, &dypv, &ddx));
    gln_twin_check(g_cu, &dx, xes, "permute backward", "dx", NULL, NULL);

    gln_tensor_t hy = hview(&y, xdt, T, H), dyv = dview(&y, xdt, T, H);
    CHECK_OK(gln_moe_unpermute(g_cpu, T, k, row_of.h, gates.h, &hyp, &hy));
    CHECK_OK(gln_moe_unpermute(g_cu, T, k, row_of.d, gates.d, &dypv, &dyv));
    gln_twin_check(g_cu, &y, xes, "unpermute", "y", NULL, NULL);

    gln_tensor_t hdy = hview(&dy, xdt, T, H), ddy = dview(&dy, xdt, T, H);
    gln_tensor_t hdyp = hview(&dyp, pdt, P, H), ddyp = dview(&dyp, pdt, P, H);
    CHECK_OK(gln_moe_unpermute_backward(g_cpu, T, k, row_of.h, gates.h, &hyp, &hdy, &hdyp, dgates.h));
    CHECK_OK(gln_moe_unpermute_backward(g_cu, T, k, row_of.d, gates.d, &dypv, &ddy, &ddyp, dgates.d));
    gln_twin_check(g_cu, &dyp, pes, "unpermute backward", "dyp", NULL, NULL);
    check_close("unpermute backward dgates", &dgates, GLN_DTYPE_FP32, (size_t)P, TOL_DOT_REL,
                TOL_DOT_REL * (double)H);

    /* run to run: the device dgates again, bitwise */
    float *first = malloc((size_t)P * 4 + 4), *again = malloc((size_t)P * 4 + 4);
    CHECK_OK(gln_memcpy(g_cu, first, dgates.d, (size_t)P * 4, GLN_COPY_BACKEND_TO_HOST));
    CHECK_OK(gln_moe_unpermute_backward(g_cu, T, k, row_of.d, gates.d, &dypv, &ddy, &ddyp, dgates.d));
    CHECK_OK(gln_memcpy(g_cu, again, dgates.d, (size_t)P * 4, GLN_COPY_BACKEND_TO_HOST));
    CHECK(gln_check_bitwise("dgates run to run", first, again, (size_t)P * 4));
    CHECK_OK(gln_context_async_error(g_cu));

    gln_twin_t *all[] = {&row_of, &gates, &x, &yp, &dy, &xp, &dx, &y, &dyp, &dgates};
    for (size_t i = 0; i < COUNT(all); i++) gln_twin_free(g_cu, all[i]);
    free(e), free(splits), free(rows), free(g), free(first), free(again);
}

static void test_permute(void) {
    move_case(1, 1, 1, 1, GLN_DTYPE_FP32, GLN_DTYPE_FP32, 1);
    move_case(100, 8, 2, 33, GLN_DTYPE_FP32, GLN_DTYPE_BF16, 2);
    move_case(64, 16, 4, 1024, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 3);
    move_case(37, 5, 3, 300, GLN_DTYPE_FP16, GLN_DTYPE_FP32, 4);
    move_case(513, 64, 2, 64, GLN_DTYPE_FP32, GLN_DTYPE_FP16, 5);
    /* the 8-element vector kernels (H a multiple of 8): converting, and 16-bit raw copies */
    move_case(301, 64, 2, 2048, GLN_DTYPE_FP32, GLN_DTYPE_BF16, 6);
    move_case(129, 8, 3, 8, GLN_DTYPE_FP16, GLN_DTYPE_FP16, 7);
    move_case(77, 4, 2, 136, GLN_DTYPE_FP32, GLN_DTYPE_FP32, 8);
}

/* ---- activations ------------------------------------------------------------------------------- */

static void act_case(gln_activation_t act, int64_t R, int64_t H, gln_dtype_t idt, gln_dtype_t odt, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    const int64_t W = act == GLN_ACT_SWIGLU ? 2 * H : H;
    gln_twin_t in = twin_hp(idt, (size_t)(R * W), &r, 2.0);
    gln_twin_t dout = twin_hp(odt, (size_t)(R * H), &r, 1.0);
    gln_twin_t out = gln_twin_new(g_cu, (size_t)(R * H) * gln_dtype_size(odt), 0xFFu, gln_dtype_size(odt));
    gln_twin_t din = gln_twin_new(g_cu, (size_t)(R * W) * gln_dtype_size(odt), 0xFFu, gln_dtype_size(odt));
    gln_tensor_t hin = hview(&in, idt, R, W), din_v = dview(&in, idt, R, W);
    gln_tensor_t hout = hview(&out, odt, R, H), dout_v = dview(&out, odt, R, H);
    CHECK_OK(gln_activation_forward(g_cpu, act, &hin, &hout));
    CHECK_OK(gln_activation_forward(g_cu, act, &din_v, &dout_v));
    check_close(act == GLN_ACT_SWIGLU ? "swiglu forward" : "gelu forward", &out, odt, (size_t)(R * H),
                rel_tol(odt), TOL_F32_ABS);
    gln_tensor_t hd = hview(&dout, odt, R, H), dd = dview(&dout, odt, R, H);
    gln_tensor_t hg = hview(&din, odt, R, W), dg = dview(&din, odt, R, W);
    CHECK_OK(gln_activation_backward(g_cpu, act, &hin, &hd, &hg));
    CHECK_OK(gln_activation_backward(g_cu, act, &din_v, &dd, &dg));
    /* s + a·s·(1 − s) cancels for a near −1.28: an absolute floor of a few FP32 ulps of O(1) */
    check_close(act == GLN_ACT_SWIGLU ? "swiglu backward" : "gelu backward", &din, odt, (size_t)(R * W),
                rel_tol(odt), 1e-5);
    gln_twin_t *all[] = {&in, &dout, &out, &din};
    for (size_t i = 0; i < COUNT(all); i++) gln_twin_free(g_cu, all[i]);
}

static void test_activation(void) {
    const gln_dtype_t dts[] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};
    for (int a = 0; a < 2; a++)
        for (size_t i = 0; i < COUNT(dts); i++) {
            act_case((gln_activation_t)a, 77, 130, dts[i], dts[i], 10 + i);
            act_case((gln_activation_t)a, 3, 1, GLN_DTYPE_FP32, dts[i], 20 + i);
            /* the vector kernels: H a multiple of 8, 17 vectors per row, any row count */
            act_case((gln_activation_t)a, 37, 136, dts[i], dts[i], 30 + i);
            act_case((gln_activation_t)a, 5, 8, GLN_DTYPE_FP32, dts[i], 40 + i);
        }
    /* more vectors than threads in the grid: the grid-stride walk wraps rows mid-stride */
    act_case(GLN_ACT_SWIGLU, 4101, 2056, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 50);
}

/* ---- indices checked on the device ----------------------------------------------------------- */

static void test_bad_indices(void) {
    int32_t e[6] = {0, 1, 9, 2, 1, 0}; /* 9 >= E = 4 */
    int32_t *de = NULL;
    int64_t *ds = NULL, *dr = NULL;
    CHECK_OK(gln_malloc(g_cu, sizeof e, (void **)&de));
    CHECK_OK(gln_malloc(g_cu, 4 * 8, (void **)&ds));
    CHECK_OK(gln_malloc(g_cu, 6 * 8, (void **)&dr));
    CHECK_OK(gln_memcpy(g_cu, de, e, sizeof e, GLN_COPY_HOST_TO_BACKEND));
    CHECK_OK(gln_moe_permute_plan(g_cu, 3, 4, 2, de, ds, dr));
    CHECK_STATUS(gln_context_async_error(g_cu), GLN_STATUS_INVALID_ARGUMENT, "MoE index");
    CHECK_OK(gln_context_async_error(g_cu)); /* cleared */
    int64_t rows[6] = {0, 1, 2, 3, 4, 99};
    CHECK_OK(gln_memcpy(g_cu, dr, rows, sizeof rows, GLN_COPY_HOST_TO_BACKEND));
    float *x = NULL, *xp = NULL;
    CHECK_OK(gln_malloc(g_cu, 3 * 4 * 4, (void **)&x));
    CHECK_OK(gln_malloc(g_cu, 6 * 4 * 4, (void **)&xp));
    gln_tensor_t tx = gln_tensor_make(GLN_DTYPE_FP32, 3, 4, x), txp = gln_tensor_make(GLN_DTYPE_FP32, 6, 4, xp);
    CHECK_OK(gln_moe_permute(g_cu, 3, 2, dr, &tx, &txp));
    CHECK_STATUS(gln_context_async_error(g_cu), GLN_STATUS_INVALID_ARGUMENT, "row_of");
    void *bufs[] = {de, ds, dr, x, xp};
    for (size_t i = 0; i < COUNT(bufs); i++) CHECK_OK(gln_free(g_cu, bufs[i]));
}

GLN_TEST_CUDA_MAIN(g_cpu, g_cu,
    GLN_CASE(test_router), GLN_CASE(test_router_ties), GLN_CASE(test_plan), GLN_CASE(test_permute),
    GLN_CASE(test_activation), GLN_CASE(test_bad_indices))

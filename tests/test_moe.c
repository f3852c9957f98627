/* MoE building blocks: router, permutation plan, permute / unpermute and activations.
 *
 * Forward ops are compared to float64 references; backward ops to float64 analytic references
 * where cheap and always to central finite differences of the FP32 forward op (the scalar loss
 * L = Σ w·out is accumulated in float64, so only the outputs that depend on the perturbed input
 * carry FP32 rounding noise). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* FP32 math against float64: expf / tanhf are accurate to ~2 ulp and each op does a handful of
 * roundings, so 1e-5 relative (~80 ulp) leaves room; the absolute floor covers cancellation in
 * outputs near zero (1 + tanh for very negative x; inputs are O(1)). */
#define TOL_FP32_REL 1e-5
#define TOL_FP32_ABS 1e-6
/* One rounding of an FP32 value (itself within TOL_FP32 of the reference) to bf16 / fp16: the
 * FP32 error may push the value across a rounding boundary, so allow one full ulp of the
 * format, i.e. 2^-7 (bf16, 8 significant bits) and 2^-10 (fp16, 11 bits) relative. */
#define TOL_BF16_REL 0.0078125
#define TOL_FP16_REL 0.0009765625
#define TOL_LOWP_ABS 1e-6
/* Central differences with step 2^-8 (exact in FP32 for the O(1) inputs used): truncation error
 * h²/6·|f'''| ≈ 3e-6 for these smooth O(1) functions; rounding noise ≈ (a few FP32 ulps of the
 * affected outputs)/h ≈ 4·6e-8/4e-3 ≈ 6e-5.  So 5e-4 absolute + 1e-3 relative is ~10x margin. */
#define FD_STEP 0.00390625
#define FD_ABS 5e-4
#define FD_REL 1e-3

static gln_context_t *ctx_cpu(void) {
    gln_context_t *ctx = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    return ctx;
}

static double tol_rel(gln_dtype_t dt) {
    return dt == GLN_DTYPE_BF16 ? TOL_BF16_REL : dt == GLN_DTYPE_FP16 ? TOL_FP16_REL : TOL_FP32_REL;
}
static double tol_abs(gln_dtype_t dt) { return dt == GLN_DTYPE_FP32 ? TOL_FP32_ABS : TOL_LOWP_ABS; }

static void fill_random(void *buf, gln_dtype_t dt, size_t n, gln_rng_t *rng, double lo, double hi) {
    for (size_t i = 0; i < n; i++) gln_store(buf, dt, i, gln_rng_uniform(rng, lo, hi));
}

static void check_fd(const char *what, double fd, double analytic) {
    CHECK_MSG(fabs(fd - analytic) <= FD_ABS + FD_REL * fabs(fd),
              "%s: finite difference %.8g vs backward %.8g", what, fd, analytic);
}

/* ----------------------------------------------------------------------------------------- */
/* Router                                                                                     */

/* float64 reference: softmax, top-k (ties → lower index), renormalized gates. */
static void router_ref(int64_t T, int E, int k, const float *logits, int32_t *ex, double *gates) {
    double p[64];
    for (int64_t t = 0; t < T; t++) {
        const float *z = logits + t * E;
        double mx = z[0], s = 0;
        for (int e = 1; e < E; e++) mx = z[e] > mx ? z[e] : mx;
        for (int e = 0; e < E; e++) s += (p[e] = exp((double)z[e] - mx));
        for (int e = 0; e < E; e++) p[e] /= s;
        int taken[64] = {0};
        double sel = 0;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++)
                if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;
            taken[best] = 1;
            ex[t * k + j] = best;
            sel += p[best];
        }
        for (int j = 0; j < k; j++) gates[t * k + j] = p[ex[t * k + j]] / sel;
    }
}

/* Logits whose probabilities are well separated (distinct multiples of 0.3 plus small noise),
 * so an FD step of 2^-8 never changes the selection. */
static void separated_logits(float *z, int64_t T, int E, gln_rng_t *rng) {
    for (int64_t t = 0; t < T; t++) {
        for (int e = 0; e < E; e++) z[t * E + e] = 0.3f * (float)e;
        for (int e = E - 1; e > 0; e--) { /* shuffle */
            int o = (int)gln_rng_int(rng, 0, e);
            float tmp = z[t * E + e];
            z[t * E + e] = z[t * E + o];
            z[t * E + o] = tmp;
        }
        for (int e = 0; e < E; e++) z[t * E + e] += (float)gln_rng_uniform(rng, -0.05, 0.05);
    }
}

static void router_forward_case(int k) {
    gln_context_t *ctx = ctx_cpu();
    gln_rng_t rng = gln_rng_seed(11 + k);
    const int64_t T = 37;
    const int E = 8;
    float *z = gln_test_alloc(sizeof(float) * T * E);
    int32_t *ex = gln_test_alloc(sizeof(int32_t) * T * k), ex_ref[37 * 2];
    float *g = gln_test_alloc(sizeof(float) * T * k);
    double g_ref[37 * 2];
    fill_random(z, GLN_DTYPE_FP32, (size_t)(T * E), &rng, -3, 3);
    gln_poison(g, GLN_DTYPE_FP32, (size_t)(T * k));
    gln_poison(ex, GLN_DTYPE_INT32, (size_t)(T * k));
    CHECK_OK(gln_moe_router_forward(ctx, T, E, k, z, ex, g));
    router_ref(T, E, k, z, ex_ref, g_ref);
    CHECK(memcmp(ex, ex_ref, sizeof(int32_t) * T * k) == 0);
    CHECK(gln_check_close("gates", g, GLN_DTYPE_FP32, g_ref, (size_t)(T * k), TOL_FP32_REL,
                          TOL_FP32_ABS) <= 1.0);
    for (int64_t t = 0; t < T; t++) { /* gates of a token sum to 1 (within FP32 rounding) */
        double s = 0;
        for (int j = 0; j < k; j++) s += g[t * k + j];
        CHECK(fabs(s - 1.0) <= 4e-7);
    }
    CHECK(gln_guard_ok(z) && gln_guard_ok(ex) && gln_guard_ok(g));
    gln_test_free(z);
    gln_test_free(ex);
    gln_test_free(g);
    gln_context_destroy(ctx);
}
static void test_router_forward_k1(void) { router_forward_case(1); }
static void test_router_forward_k2(void) { router_forward_case(2); }

static void test_router_ties(void) {
    gln_context_t *ctx = ctx_cpu();
    /* token 0: all equal → experts 0, 1, gates 1/2 each (exact);
     * token 1: tie for the top between experts 1 and 3 → 1 then 3;
     * token 2: expert 2 on top, then a tie between experts 0 and 3 → 0. */
    const float z[3 * 4] = {0.5f, 0.5f, 0.5f, 0.5f, 1, 3, 0, 3, 1, -2, 4, 1};
    int32_t ex[6];
    float g[6];
    CHECK_OK(gln_moe_router_forward(ctx, 3, 4, 2, z, ex, g));
    CHECK(ex[0] == 0 && ex[1] == 1 && g[0] == 0.5f && g[1] == 0.5f);
    CHECK(ex[2] == 1 && ex[3] == 3 && g[2] == 0.5f && g[3] == 0.5f);
    CHECK(ex[4] == 2 && ex[5] == 0);
    int32_t ex1[3];
    float g1[3];
    CHECK_OK(gln_moe_router_forward(ctx, 3, 4, 1, z, ex1, g1));
    CHECK(ex1[0] == 0 && ex1[1] == 1 && ex1[2] == 2);
    CHECK(g1[0] == 1.0f && g1[1] == 1.0f && g1[2] == 1.0f); /* k = 1: p/p */
    gln_context_destroy(ctx);
}

/* dlogits of L = Σ w·gates: float64 analytic formula and central differences. */
static void router_backward_case(int k) {
    gln_context_t *ctx = ctx_cpu();
    gln_rng_t rng = gln_rng_seed(23 + k);
    enum { T = 6, E = 5 };
    float z[T * E], w[T * 2], g[T * 2], gp[T * 2], gm[T * 2];
    int32_t ex[T * 2], ex2[T * 2];
    float *dz = gln_test_alloc(sizeof(float) * T * E);
    separated_logits(z, T, E, &rng);
    fill_random(w, GLN_DTYPE_FP32, T * k, &rng, -1, 1);
    CHECK_OK(gln_moe_router_forward(ctx, T, E, k, z, ex, g));
    gln_poison(dz, GLN_DTYPE_FP32, T * E);
    CHECK_OK(gln_moe_router_backward(ctx, T, E, k, z, ex, w, dz));
    CHECK(gln_guard_ok(dz));
    for (int t = 0; t < T; t++) {
        double row_sum = 0;
        for (int e = 0; e < E; e++) row_sum += dz[t * E + e];
        CHECK_MSG(fabs(row_sum) <= 1e-5, "softmax gradient rows sum to 0, got %g", row_sum);
    }
    for (int i = 0; i < T * E; i++) {
        const float z0 = z[i];
        z[i] = z0 + (float)FD_STEP;
        CHECK_OK(gln_moe_router_forward(ctx, T, E, k, z, ex2, gp));
        CHECK(memcmp(ex, ex2, sizeof(int32_t) * T * k) == 0);
        z[i] = z0 - (float)FD_STEP;
        CHECK_OK(gln_moe_router_forward(ctx, T, E, k, z, ex2, gm));
        CHECK(memcmp(ex, ex2, sizeof(int32_t) * T * k) == 0);
        z[i] = z0;
        double lp = 0, lm = 0;
        for (int j = 0; j < T * k; j++) {
            lp += (double)w[j] * gp[j];
            lm += (double)w[j] * gm[j];
        }
        check_fd("router dlogits", (lp - lm) / (2 * FD_STEP), dz[i]);
    }
    gln_test_free(dz);
    gln_context_destroy(ctx);
}
static void test_router_backward_k1(void) { router_backward_case(1); }
static void test_router_backward_k2(void) { router_backward_case(2); }

/* ----------------------------------------------------------------------------------------- */
/* Permutation                                                                                */

static void test_permute_plan_stable_with_empty_experts(void) {
    gln_context_t *ctx = ctx_cpu();
    gln_rng_t rng = gln_rng_seed(5);
    enum { T = 29, K = 2, E = 7 };
    const int32_t used[3] = {0, 2, 5}; /* experts 1, 3, 4, 6 stay empty */
    int32_t ex[T * K];
    for (int i = 0; i < T * K; i++) ex[i] = used[gln_rng_int(&rng, 0, 2)];
    int64_t *splits = gln_test_alloc(sizeof(int64_t) * E), *row_of = gln_test_alloc(sizeof(int64_t) * T * K);
    gln_poison(splits, GLN_DTYPE_INT64, E);
    gln_poison(row_of, GLN_DTYPE_INT64, T * K);
    CHECK_OK(gln_moe_permute_plan(ctx, T, E, K, ex, splits, row_of));
    /* Reference: rows are handed out expert by expert, pairs in index order within each. */
    int64_t next = 0;
    for (int e = 0; e < E; e++) {
        int64_t count = 0;
        for (int i = 0; i < T * K; i++)
            if (ex[i] == e) {
                CHECK_MSG(row_of[i] == next, "pair %d: row %lld, expected %lld", i,
                          (long long)row_of[i], (long long)next);
                next++;
                count++;
            }
        CHECK_MSG(splits[e] == count, "m_splits[%d] = %lld, expected %lld", e, (long long)splits[e],
                  (long long)count);
    }
    CHECK(splits[1] == 0 && splits[3] == 0 && splits[4] == 0 && splits[6] == 0);
    CHECK(gln_guard_ok(splits) && gln_guard_ok(row_of));
    /* k = 1, one expert takes every token: the identity permutation. */
    CHECK_OK(gln_moe_permute_plan(ctx, T, E, 1, (int32_t[T]){0}, splits, row_of));
    CHECK(splits[0] == T);
    for (int t = 0; t < T; t++) CHECK(row_of[t] == t);
    gln_test_free(splits);
    gln_test_free(row_of);
    gln_context_destroy(ctx);
}

/* The aligned plan: every block a multiple of align rows, the pairs of each expert at the start of
 * its block in index order, its padding rows unused; align 1 equals the plain plan. */
static void test_permute_plan_aligned(void) {
    gln_context_t *ctx = ctx_cpu();
    gln_rng_t rng = gln_rng_seed(17);
    enum { T = 53, K = 2, E = 6 };
    int32_t ex[T * K];
    for (int i = 0; i < T * K; i++) ex[i] = (int32_t)gln_rng_int(&rng, 0, 3); /* experts 4, 5 empty */
    int64_t splits[E], row_of[T * K], plain_splits[E], plain_rows[T * K];
    CHECK_OK(gln_moe_permute_plan(ctx, T, E, K, ex, plain_splits, plain_rows));
    CHECK_OK(gln_moe_permute_plan_aligned(ctx, T, E, K, 1, ex, splits, row_of));
    CHECK(!memcmp(splits, plain_splits, sizeof splits) && !memcmp(row_of, plain_rows, sizeof row_of));
    const int64_t aligns[] = {16, 32, 7};
    for (int a = 0; a < 3; a++) {
        const int64_t align = aligns[a];
        CHECK_OK(gln_moe_permute_plan_aligned(ctx, T, E, K, align, ex, splits, row_of));
        int64_t start = 0;
        for (int e = 0; e < E; e++) {
            int64_t count = 0;
            for (int i = 0; i < T * K; i++)
                if (ex[i] == e) {
                    CHECK_MSG(row_of[i] == start + count, "align %lld pair %d: row %lld, expected %lld",
                              (long long)align, i, (long long)row_of[i], (long long)(start + count));
                    count++;
                }
            const int64_t want = (count + align - 1) / align * align;
            CHECK_MSG(splits[e] == want, "align %lld m_splits[%d] = %lld, expected %lld", (long long)align, e,
                      (long long)splits[e], (long long)want);
            start += want;
        }
        CHECK(start <= T * K + E * (align - 1));
        /* permute into the padded rows: every pair's row holds its token, the padding rows stay
         * untouched (the caller's zeros) */
        enum { H = 3 };
        const int64_t R = T * K + E * (align - 1);
        float x[T * H], *xp = malloc((size_t)(R * H) * sizeof(float));
        for (int i = 0; i < T * H; i++) x[i] = (float)(i + 1);
        for (int64_t i = 0; i < R * H; i++) xp[i] = -1.0f;
        gln_tensor_t tx = gln_tensor_make(GLN_DTYPE_FP32, T, H, x), txp = gln_tensor_make(GLN_DTYPE_FP32, R, H, xp);
        CHECK_OK(gln_moe_permute(ctx, T, K, row_of, &tx, &txp));
        int64_t mapped = 0;
        for (int i = 0; i < T * K; i++)
            for (int c = 0; c < H; c++) CHECK(xp[row_of[i] * H + c] == x[(i / K) * H + c]);
        for (int64_t r = 0; r < R; r++) mapped += xp[r * H] != -1.0f;
        CHECK_MSG(mapped == T * K, "align %lld: %lld rows written, expected %d", (long long)align,
                  (long long)mapped, T * K);
        free(xp);
    }
    CHECK_STATUS(gln_moe_permute_plan_aligned(ctx, T, E, K, 0, ex, splits, row_of), GLN_STATUS_INVALID_ARGUMENT,
                 "gln_moe_permute_plan_aligned: align 0 must be in [1, 1024]");
    CHECK_STATUS(gln_moe_permute_plan_aligned(ctx, T, E, K, 2048, ex, splits, row_of), GLN_STATUS_INVALID_ARGUMENT,
                 "align 2048");
    gln_context_destroy(ctx);
}

/* A random plan for T tokens, k slots over E experts (distinct experts per token). */
static void random_plan(gln_context_t *ctx, gln_rng_t *rng, int64_t T, int E, int k, int64_t *splits,
                        int64_t *row_of) {
    int32_t ex[64 * 2];
    for (int64_t t = 0; t < T; t++) {
        ex[t * k] = (int32_t)gln_rng_int(rng, 0, E - 1);
        if (k == 2) ex[t * k + 1] = (ex[t * k] + (int32_t)gln_rng_int(rng, 1, E - 1)) % E;
    }
    CHECK_OK(gln_moe_permute_plan(ctx, T, E, k, ex, splits, row_of));
}

/* permute, permute_backward, unpermute and unpermute_backward against float64 references, for
 * one dtype of every tensor. */
static void permute_dtype_case(gln_dtype_t dt, int k) {
    gln_context_t *ctx = ctx_cpu();
    gln_rng_t rng = gln_rng_seed(100 + 10 * dt + k);
    enum { T = 19, E = 5, H = 13 };
    const int64_t P = T * k;
    const size_t es = gln_dtype_size(dt);
    int64_t splits[E], row_of[T * 2];
    random_plan(ctx, &rng, T, E, k, splits, row_of);
    void *x = gln_test_alloc(es * T * H), *xp = gln_test_alloc(es * P * H), *dx = gln_test_alloc(es * T * H);
    void *y = gln_test_alloc(es * T * H), *dyp = gln_test_alloc(es * P * H);
    float gates[T * 2], *dg = gln_test_alloc(sizeof(float) * P);
    double ref[T * 2 * H], gref[T * 2];
    fill_random(x, dt, T * H, &rng, -2, 2);
    fill_random(gates, GLN_DTYPE_FP32, (size_t)P, &rng, 0, 1);
    gln_tensor_t tx = gln_tensor_make(dt, T, H, x), txp = gln_tensor_make(dt, P, H, xp);
    gln_tensor_t tdx = gln_tensor_make(dt, T, H, dx), ty = gln_tensor_make(dt, T, H, y);
    gln_tensor_t tdyp = gln_tensor_make(dt, P, H, dyp);

    /* permute: an exact copy */
    gln_poison(xp, dt, (size_t)(P * H));
    CHECK_OK(gln_moe_permute(ctx, T, k, row_of, &tx, &txp));
    for (int64_t i = 0; i < P; i++)
        for (int c = 0; c < H; c++) ref[row_of[i] * H + c] = gln_load(x, dt, (size_t)((i / k) * H + c));
    CHECK(gln_check_close("permute", xp, dt, ref, (size_t)(P * H), 0, 0) <= 1.0);

    /* permute_backward of xp (used as dxp): dx[t] = Σ_j xp[row_of[t,j]] = k·x[t] */
    gln_poison(dx, dt, T * H);
    CHECK_OK(gln_moe_permute_backward(ctx, T, k, row_of, &txp, &tdx));
    for (int t = 0; t < T; t++)
        for (int c = 0; c < H; c++) ref[t * H + c] = k * gln_load(x, dt, (size_t)(t * H + c));
    CHECK(gln_check_close("permute_backward", dx, dt, ref, T * H, tol_rel(dt), tol_abs(dt)) <= 1.0);

    /* unpermute with yp = xp: y[t] = Σ_j g[t,j] · x[t] */
    gln_poison(y, dt, T * H);
    CHECK_OK(gln_moe_unpermute(ctx, T, k, row_of, gates, &txp, &ty));
    for (int t = 0; t < T; t++)
        for (int c = 0; c < H; c++) {
            double s = 0;
            for (int j = 0; j < k; j++) s += (double)gates[t * k + j] * gln_load(x, dt, (size_t)(t * H + c));
            ref[t * H + c] = s;
        }
    CHECK(gln_check_close("unpermute", y, dt, ref, T * H, tol_rel(dt), tol_abs(dt)) <= 1.0);

    /* unpermute_backward with dy = x, yp = xp */
    gln_poison(dyp, dt, (size_t)(P * H));
    gln_poison(dg, GLN_DTYPE_FP32, (size_t)P);
    CHECK_OK(gln_moe_unpermute_backward(ctx, T, k, row_of, gates, &txp, &tx, &tdyp, dg));
    for (int64_t i = 0; i < P; i++) {
        double dot = 0;
        for (int c = 0; c < H; c++) {
            double d = gln_load(x, dt, (size_t)((i / k) * H + c));
            ref[row_of[i] * H + c] = gates[i] * d;
            dot += d * gln_load(xp, dt, (size_t)(row_of[i] * H + c));
        }
        gref[i] = dot;
    }
    CHECK(gln_check_close("unpermute_backward dyp", dyp, dt, ref, (size_t)(P * H), tol_rel(dt),
                          tol_abs(dt)) <= 1.0);
    /* dgates stay FP32: a dot product of H terms each |term| <= 4, summed left to right; each of
     * the H additions errs by at most 2^-24 of a partial sum <= 4H. */
    CHECK(gln_check_close("unpermute_backward dgates", dg, GLN_DTYPE_FP32, gref, (size_t)P, TOL_FP32_REL,
                          H * (4.0 * H) * 5.9604644775390625e-08) <= 1.0);
    void *bufs[] = {x, xp, dx, y, dyp, dg};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        CHECK(gln_guard_ok(bufs[i]));
        gln_test_free(bufs[i]);
    }
    gln_context_destroy(ctx);
}
static void test_permute_fp32_k1(void) { permute_dtype_case(GLN_DTYPE_FP32, 1); }
static void test_permute_fp32_k2(void) { permute_dtype_case(GLN_DTYPE_FP32, 2); }
static void test_permute_bf16_k2(void) { permute_dtype_case(GLN_DTYPE_BF16, 2); }
static void test_permute_fp16_k2(void) { permute_dtype_case(GLN_DTYPE_FP16, 2); }

/* Finite differences through unpermute(permute(x)) with respect to x, gates: checks
 * permute_backward, unpermute_backward (dyp and dgates) on FP32 tensors. */
static void permute_fd_case(int k) {
    gln_context_t *ctx = ctx_cpu();
    gln_rng_t rng = gln_rng_seed(300 + k);
    enum { T = 7, E = 4, H = 3 };
    const int64_t P = T * k;
    int64_t splits[E], row_of[T * 2];
    random_plan(ctx, &rng, T, E, k, splits, row_of);
    float x[T * H], w[T * H], xp[T * 2 * H], y[T * H], gates[T * 2];
    float dyp[T * 2 * H], dx[T * H], dg[T * 2];
    fill_random(x, GLN_DTYPE_FP32, T * H, &rng, -1, 1);
    fill_random(w, GLN_DTYPE_FP32, T * H, &rng, -1, 1);
    fill_random(gates, GLN_DTYPE_FP32, (size_t)P, &rng, 0.1, 1);
    gln_tensor_t tx = gln_tensor_make(GLN_DTYPE_FP32, T, H, x), txp = gln_tensor_make(GLN_DTYPE_FP32, P, H, xp);
    gln_tensor_t ty = gln_tensor_make(GLN_DTYPE_FP32, T, H, y), tw = gln_tensor_make(GLN_DTYPE_FP32, T, H, w);
    gln_tensor_t tdyp = gln_tensor_make(GLN_DTYPE_FP32, P, H, dyp), tdx = gln_tensor_make(GLN_DTYPE_FP32, T, H, dx);
    /* analytic: L = Σ w·unpermute(permute(x), gates) */
    CHECK_OK(gln_moe_permute(ctx, T, k, row_of, &tx, &txp));
    CHECK_OK(gln_moe_unpermute_backward(ctx, T, k, row_of, gates, &txp, &tw, &tdyp, dg));
    CHECK_OK(gln_moe_permute_backward(ctx, T, k, row_of, &tdyp, &tdx));
#define LOSS(out)                                                                               \
    do {                                                                                        \
        CHECK_OK(gln_moe_permute(ctx, T, k, row_of, &tx, &txp));                                \
        CHECK_OK(gln_moe_unpermute(ctx, T, k, row_of, gates, &txp, &ty));                       \
        out = 0;                                                                                \
        for (int q = 0; q < T * H; q++) out += (double)w[q] * y[q];                             \
    } while (0)
    for (int i = 0; i < T * H; i++) {
        double lp, lm;
        const float x0 = x[i];
        x[i] = x0 + (float)FD_STEP;
        LOSS(lp);
        x[i] = x0 - (float)FD_STEP;
        LOSS(lm);
        x[i] = x0;
        check_fd("permute/unpermute dx", (lp - lm) / (2 * FD_STEP), dx[i]);
    }
    for (int i = 0; i < P; i++) {
        double lp, lm;
        const float g0 = gates[i];
        gates[i] = g0 + (float)FD_STEP;
        LOSS(lp);
        gates[i] = g0 - (float)FD_STEP;
        LOSS(lm);
        gates[i] = g0;
        check_fd("unpermute dgates", (lp - lm) / (2 * FD_STEP), dg[i]);
    }
#undef LOSS
    gln_context_destroy(ctx);
}
static void test_permute_fd_k1(void) { permute_fd_case(1); }
static void test_permute_fd_k2(void) { permute_fd_case(2); }

/* ----------------------------------------------------------------------------------------- */
/* Activations                                                                                */

static double silu_ref(double a) { return a / (1 + exp(-a)); }
static double gelu_ref(double x) {
    return 0.5 * x * (1 + tanh(sqrt(2 / 3.141592653589793) * (x + 0.044715 * x * x * x)));
}

static void activation_forward_case(gln_activation_t act, gln_dtype_t dt) {
    gln_context_t *ctx = ctx_cpu();
    gln_rng_t rng = gln_rng_seed(400 + 7 * act + dt);
    enum { R = 17, H = 9 };
    const int64_t in_cols = act == GLN_ACT_SWIGLU ? 2 * H : H;
    const size_t es = gln_dtype_size(dt);
    void *in = gln_test_alloc(es * R * in_cols), *out = gln_test_alloc(es * R * H);
    double ref[R * H];
    fill_random(in, dt, (size_t)(R * in_cols), &rng, -6, 6);
    gln_poison(out, dt, R * H);
    gln_tensor_t ti = gln_tensor_make(dt, R, in_cols, in), to = gln_tensor_make(dt, R, H, out);
    CHECK_OK(gln_activation_forward(ctx, act, &ti, &to));
    for (int r = 0; r < R; r++)
        for (int c = 0; c < H; c++) {
            double a = gln_load(in, dt, (size_t)(r * in_cols + c));
            ref[r * H + c] = act == GLN_ACT_GELU ? gelu_ref(a)
                                                 : silu_ref(a) * gln_load(in, dt, (size_t)(r * in_cols + H + c));
        }
    CHECK(gln_check_close(act == GLN_ACT_GELU ? "gelu" : "swiglu", out, dt, ref, R * H, tol_rel(dt),
                          tol_abs(dt)) <= 1.0);
    CHECK(gln_guard_ok(out));
    gln_test_free(in);
    gln_test_free(out);
    gln_context_destroy(ctx);
}
static void test_swiglu_forward(void) {
    activation_forward_case(GLN_ACT_SWIGLU, GLN_DTYPE_FP32);
    activation_forward_case(GLN_ACT_SWIGLU, GLN_DTYPE_BF16);
    activation_forward_case(GLN_ACT_SWIGLU, GLN_DTYPE_FP16);
}
static void test_gelu_forward(void) {
    activation_forward_case(GLN_ACT_GELU, GLN_DTYPE_FP32);
    activation_forward_case(GLN_ACT_GELU, GLN_DTYPE_BF16);
    activation_forward_case(GLN_ACT_GELU, GLN_DTYPE_FP16);
}

static void activation_backward_case(gln_activation_t act) {
    gln_context_t *ctx = ctx_cpu();
    gln_rng_t rng = gln_rng_seed(500 + act);
    enum { R = 5, H = 6 };
    const int64_t in_cols = act == GLN_ACT_SWIGLU ? 2 * H : H;
    float in[R * 2 * H], w[R * H], out[R * H];
    float *din = gln_test_alloc(sizeof(float) * R * in_cols);
    fill_random(in, GLN_DTYPE_FP32, (size_t)(R * in_cols), &rng, -4, 4);
    fill_random(w, GLN_DTYPE_FP32, R * H, &rng, -1, 1);
    gln_tensor_t ti = gln_tensor_make(GLN_DTYPE_FP32, R, in_cols, in);
    gln_tensor_t to = gln_tensor_make(GLN_DTYPE_FP32, R, H, out), tw = gln_tensor_make(GLN_DTYPE_FP32, R, H, w);
    gln_tensor_t td = gln_tensor_make(GLN_DTYPE_FP32, R, in_cols, din);
    gln_poison(din, GLN_DTYPE_FP32, (size_t)(R * in_cols));
    CHECK_OK(gln_activation_backward(ctx, act, &ti, &tw, &td));
    CHECK(gln_guard_ok(din));
    for (int i = 0; i < R * in_cols; i++) {
        double l[2];
        const float v0 = in[i];
        for (int s = 0; s < 2; s++) {
            in[i] = v0 + (s ? -1.0f : 1.0f) * (float)FD_STEP;
            CHECK_OK(gln_activation_forward(ctx, act, &ti, &to));
            l[s] = 0;
            for (int q = 0; q < R * H; q++) l[s] += (double)w[q] * out[q];
        }
        in[i] = v0;
        check_fd(act == GLN_ACT_GELU ? "gelu backward" : "swiglu backward", (l[0] - l[1]) / (2 * FD_STEP),
                 din[i]);
    }
    /* bf16 gradients: the same FP32 values rounded once. */
    uint16_t in16[R * 2 * H], w16[R * H], d16[R * 2 * H];
    double ref[R * 2 * H];
    for (int i = 0; i < R * in_cols; i++) in16[i] = gln_fp32_to_bf16(in[i]);
    for (int i = 0; i < R * H; i++) w16[i] = gln_fp32_to_bf16(w[i]);
    gln_tensor_t ti16 = gln_tensor_make(GLN_DTYPE_BF16, R, in_cols, in16);
    gln_tensor_t tw16 = gln_tensor_make(GLN_DTYPE_BF16, R, H, w16), td16 = gln_tensor_make(GLN_DTYPE_BF16, R, in_cols, d16);
    for (int i = 0; i < R * in_cols; i++) in[i] = gln_bf16_to_fp32(in16[i]);
    for (int i = 0; i < R * H; i++) w[i] = gln_bf16_to_fp32(w16[i]);
    CHECK_OK(gln_activation_backward(ctx, act, &ti, &tw, &td));
    for (int i = 0; i < R * in_cols; i++) ref[i] = din[i];
    CHECK_OK(gln_activation_backward(ctx, act, &ti16, &tw16, &td16));
    CHECK(gln_check_close("bf16 activation backward", d16, GLN_DTYPE_BF16, ref, (size_t)(R * in_cols),
                          TOL_BF16_REL, TOL_LOWP_ABS) <= 1.0);
    gln_test_free(din);
    gln_context_destroy(ctx);
}
static void test_swiglu_backward(void) { activation_backward_case(GLN_ACT_SWIGLU); }
static void test_gelu_backward(void) { activation_backward_case(GLN_ACT_GELU); }

/* ----------------------------------------------------------------------------------------- */
/* Invalid input and empty cases                                                             */

static void test_invalid_arguments(void) {
    gln_context_t *ctx = ctx_cpu();
    float z[8] = {0}, g[4], buf[64];
    int32_t ex[4] = {0, 1, 2, 9};
    int64_t splits[4], row_of[4] = {0, 1, 2, 7};
    CHECK_STATUS(gln_moe_router_forward(NULL, 1, 4, 1, z, ex, g), GLN_STATUS_INVALID_ARGUMENT, "ctx");
    CHECK_STATUS(gln_moe_router_forward(ctx, 1, 4, 0, z, ex, g), GLN_STATUS_INVALID_ARGUMENT,
                 "gln_moe_router_forward: k 0 must be in [1, num_experts = 4]");
    CHECK_STATUS(gln_moe_router_forward(ctx, 1, 4, 5, z, ex, g), GLN_STATUS_INVALID_ARGUMENT, "k 5");
    CHECK_STATUS(gln_moe_router_forward(ctx, -1, 4, 1, z, ex, g), GLN_STATUS_INVALID_ARGUMENT,
                 "tokens -1 must be >= 0");
    CHECK_STATUS(gln_moe_router_forward(ctx, 1, 0, 1, z, ex, g), GLN_STATUS_INVALID_ARGUMENT,
                 "num_experts 0");
    CHECK_STATUS(gln_moe_router_forward(ctx, 1, 4, 1, NULL, ex, g), GLN_STATUS_INVALID_ARGUMENT, "logits");
    CHECK_STATUS(gln_moe_router_backward(ctx, 1, 4, 4, z, ex, g, buf), GLN_STATUS_INVALID_ARGUMENT,
                 "experts[3] = 9 must be in [0, 4)");
    CHECK_STATUS(gln_moe_permute_plan(ctx, 2, 4, 2, ex, splits, row_of), GLN_STATUS_INVALID_ARGUMENT,
                 "gln_moe_permute_plan: experts[3] = 9");
    CHECK_STATUS(gln_moe_permute_plan(ctx, 2, 4, 2, ex, NULL, row_of), GLN_STATUS_INVALID_ARGUMENT,
                 "m_splits");

    gln_tensor_t x = gln_tensor_make(GLN_DTYPE_FP32, 2, 4, buf), xp = gln_tensor_make(GLN_DTYPE_FP32, 4, 4, buf + 8);
    CHECK_STATUS(gln_moe_permute(ctx, 2, 2, row_of, &x, &xp), GLN_STATUS_INVALID_ARGUMENT,
                 "gln_moe_permute: row_of[3] = 7 must be in [0, 4)");
    row_of[3] = 3;
    gln_tensor_t bad = gln_tensor_make(GLN_DTYPE_FP32, 3, 4, buf + 8);
    CHECK_STATUS(gln_moe_permute(ctx, 2, 2, row_of, &x, &bad), GLN_STATUS_INVALID_ARGUMENT,
                 "gln_moe_permute: xp has 3 rows, needs at least tokens * k = 4");
    gln_tensor_t fp8 = gln_tensor_make(GLN_DTYPE_FP8_E4M3, 2, 4, buf);
    CHECK_STATUS(gln_moe_permute(ctx, 2, 2, row_of, &fp8, &xp), GLN_STATUS_INVALID_ARGUMENT,
                 "x->dtype");
    CHECK_STATUS(gln_moe_unpermute(ctx, 2, 2, row_of, NULL, &xp, &x), GLN_STATUS_INVALID_ARGUMENT, "gates");
    CHECK_STATUS(gln_moe_unpermute_backward(ctx, 2, 2, row_of, g, &xp, &x, &xp, NULL),
                 GLN_STATUS_INVALID_ARGUMENT, "dgates");
    CHECK_STATUS(gln_moe_permute_backward(ctx, 2, 0, row_of, &xp, &x), GLN_STATUS_INVALID_ARGUMENT,
                 "k 0 must be >= 1");

    gln_tensor_t odd = gln_tensor_make(GLN_DTYPE_FP32, 2, 3, buf), half = gln_tensor_make(GLN_DTYPE_FP32, 2, 1, buf + 8);
    CHECK_STATUS(gln_activation_forward(ctx, GLN_ACT_SWIGLU, &odd, &half), GLN_STATUS_INVALID_ARGUMENT,
                 "in->cols 3 must be even");
    CHECK_STATUS(gln_activation_forward(ctx, (gln_activation_t)7, &x, &x), GLN_STATUS_INVALID_ARGUMENT,
                 "act 7");
    CHECK_STATUS(gln_activation_forward(ctx, GLN_ACT_GELU, &x, &xp), GLN_STATUS_INVALID_ARGUMENT,
                 "gln_activation_forward: out is [4, 4], expected [2, 4]");
    CHECK_STATUS(gln_activation_backward(ctx, GLN_ACT_SWIGLU, &x, &x, &x), GLN_STATUS_INVALID_ARGUMENT,
                 "dout is [2, 4], expected [2, 2]");
    gln_tensor_t nodata = gln_tensor_make(GLN_DTYPE_FP32, 2, 4, NULL);
    CHECK_STATUS(gln_activation_forward(ctx, GLN_ACT_GELU, &x, &nodata), GLN_STATUS_INVALID_ARGUMENT,
                 "out->data must not be NULL");
    gln_context_destroy(ctx);
}

static void test_zero_tokens(void) {
    gln_context_t *ctx = ctx_cpu();
    int64_t splits[3] = {9, 9, 9};
    gln_tensor_t e0 = gln_tensor_make(GLN_DTYPE_BF16, 0, 8, NULL);
    CHECK_OK(gln_moe_router_forward(ctx, 0, 3, 2, NULL, NULL, NULL));
    CHECK_OK(gln_moe_permute_plan(ctx, 0, 3, 2, NULL, splits, NULL));
    CHECK(splits[0] == 0 && splits[1] == 0 && splits[2] == 0);
    CHECK_OK(gln_moe_permute(ctx, 0, 2, NULL, &e0, &e0));
    CHECK_OK(gln_moe_unpermute(ctx, 0, 2, NULL, NULL, &e0, &e0));
    CHECK_OK(gln_activation_forward(ctx, GLN_ACT_GELU, &e0, &e0));
    gln_context_destroy(ctx);
}

GLN_TEST_MAIN(GLN_CASE(test_router_forward_k1), GLN_CASE(test_router_forward_k2),
              GLN_CASE(test_router_ties), GLN_CASE(test_router_backward_k1),
              GLN_CASE(test_router_backward_k2), GLN_CASE(test_permute_plan_stable_with_empty_experts), GLN_CASE(test_permute_plan_aligned),
              GLN_CASE(test_permute_fp32_k1), GLN_CASE(test_permute_fp32_k2),
              GLN_CASE(test_permute_bf16_k2), GLN_CASE(test_permute_fp16_k2),
              GLN_CASE(test_permute_fd_k1), GLN_CASE(test_permute_fd_k2), GLN_CASE(test_swiglu_forward),
              GLN_CASE(test_gelu_forward), GLN_CASE(test_swiglu_backward), GLN_CASE(test_gelu_backward),
              GLN_CASE(test_invalid_arguments), GLN_CASE(test_zero_tokens))

/* The optimizer step (gln_optimizer_step and the backend op with per-segment amax) on the CPU:
 * the update against a straight transcription of the documented formula, the working copy
 * against the library's own rounding of the new master, the per-segment amax against a plain
 * loop over the working copy (empty segments, segments crossing the threads' ranges, NaN),
 * independence from the thread count, and every argument check.  (The formula against an
 * independent numpy model: tests/oracle/test_optimizer_oracle.py; the CUDA kernel against this
 * backend: tests/test_cuda_optimizer.c.) */
#include <math.h>
#include <string.h>

#include "backend/ops.h"
#include "harness.h"
#include "numerics/numerics.h"

/* The formula of grouplin.h in plain C operators (finite inputs: no NaN rule needed). */
static void formula(const gln_optimizer_config_t *c, int64_t step, float *w, float g, float *m, float *v) {
    if (c->kind == GLN_OPTIMIZER_ADAM) {
        const float bc1 = (float)(1.0 - pow((double)c->beta1, (double)step));
        const float bc2 = (float)(1.0 - pow((double)c->beta2, (double)step));
        if (!c->adam_w_mode) g = g + c->weight_decay * *w;
        *m = c->beta1 * *m + (1.0f - c->beta1) * g;
        *v = c->beta2 * *v + ((1.0f - c->beta2) * g) * g;
        const float denom = sqrtf(*v / bc2) + c->eps;
        float update = (*m / bc1) / denom;
        if (c->adam_w_mode) update = update + c->weight_decay * *w;
        *w = *w - c->lr * update;
        return;
    }
    if (c->weight_decay != 0.0f) g = g + c->weight_decay * *w;
    if (c->momentum != 0.0f) {
        *m = step == 1 ? g : c->momentum * *m + g;
        g = *m;
    }
    *w = *w - c->lr * g;
}

typedef struct state {
    int64_t n;
    float *w, *g, *m, *v;
} state_t;

static state_t state_new(int64_t n, uint64_t seed) {
    state_t s = {n, gln_test_alloc((size_t)n * 4), gln_test_alloc((size_t)n * 4), gln_test_alloc((size_t)n * 4),
                 gln_test_alloc((size_t)n * 4)};
    gln_rng_t r = gln_rng_seed(seed);
    for (int64_t i = 0; i < n; i++) {
        s.w[i] = (float)gln_rng_normal(&r);
        s.g[i] = (float)(gln_rng_normal(&r) * 1e-2);
        s.m[i] = (float)(gln_rng_normal(&r) * 1e-3);
        s.v[i] = (float)gln_rng_uniform(&r, 0.0, 1e-5);
    }
    return s;
}

static state_t state_copy(const state_t *a) {
    state_t s = {a->n, gln_test_alloc((size_t)a->n * 4), gln_test_alloc((size_t)a->n * 4),
                 gln_test_alloc((size_t)a->n * 4), gln_test_alloc((size_t)a->n * 4)};
    memcpy(s.w, a->w, (size_t)a->n * 4);
    memcpy(s.g, a->g, (size_t)a->n * 4);
    memcpy(s.m, a->m, (size_t)a->n * 4);
    memcpy(s.v, a->v, (size_t)a->n * 4);
    return s;
}

static void state_free(state_t *s) {
    CHECK(gln_guard_ok(s->w) && gln_guard_ok(s->g) && gln_guard_ok(s->m) && gln_guard_ok(s->v));
    gln_test_free(s->w);
    gln_test_free(s->g);
    gln_test_free(s->m);
    gln_test_free(s->v);
}

static void check_state(const state_t *got, const state_t *want, const char *what) {
    CHECK(gln_check_optimizer_state(what, got->w, got->m, got->v, want->w, want->m, want->v, got->n));
}

static gln_optimizer_config_t adam(float wd, int w_mode) {
    gln_optimizer_config_t c = GLN_OPTIMIZER_CONFIG_INIT;
    c.lr = 3e-3f;
    c.weight_decay = wd;
    c.adam_w_mode = w_mode;
    return c;
}

static gln_optimizer_config_t sgd(float wd, float momentum) {
    gln_optimizer_config_t c = GLN_OPTIMIZER_CONFIG_INIT;
    c.kind = GLN_OPTIMIZER_SGD;
    c.lr = 0.05f;
    c.weight_decay = wd;
    c.momentum = momentum;
    return c;
}

static void test_defaults(void) {
    gln_optimizer_config_t c = GLN_OPTIMIZER_CONFIG_INIT;
    CHECK(c.size == sizeof c && c.kind == GLN_OPTIMIZER_ADAM && c.lr == 1e-3f && c.beta1 == 0.9f &&
          c.beta2 == 0.999f && c.eps == 1e-8f && c.weight_decay == 0.0f && c.adam_w_mode == 1);
}

/* Every kind and mode, steps 1, 2 and 1000, against the formula; three consecutive steps. */
static void test_formula(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    const gln_optimizer_config_t cfgs[] = {adam(0.0f, 1), adam(0.1f, 1), adam(0.1f, 0), adam(0.0f, 0),
                                           sgd(0.0f, 0.0f), sgd(0.01f, 0.0f), sgd(0.0f, 0.9f), sgd(0.01f, 0.9f)};
    const int64_t starts[] = {1, 1000};
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
        for (size_t si = 0; si < 2; si++) {
            state_t got = state_new(1001, 10 + k), want = state_copy(&got);
            for (int64_t step = starts[si]; step < starts[si] + 3; step++) {
                for (int64_t i = 0; i < want.n; i++) formula(&cfgs[k], step, &want.w[i], want.g[i], &want.m[i], &want.v[i]);
                CHECK_OK(gln_optimizer_step(ctx, &cfgs[k], step, got.w, got.g, got.m, got.v, got.n, NULL,
                                            GLN_DTYPE_BF16));
                char what[64];
                snprintf(what, sizeof what, "config %zu step %lld", k, (long long)step);
                check_state(&got, &want, what);
            }
            state_free(&got);
            state_free(&want);
        }
    }
}

/* cfg->bias_corrections: the step reads {bc1, bc2} from memory when it runs — step 7's values
 * there give step 7's result whatever `step` says, and a change of the values between two calls
 * with the same cfg (a replayed capture) is seen. */
static void test_bias_corrections_in_memory(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    const gln_optimizer_config_t host = adam(0.1f, 1);
    gln_optimizer_config_t dev = host;
    float *bc = gln_test_alloc(2 * sizeof(float));
    dev.bias_corrections = bc;
    state_t got = state_new(777, 5), want = state_copy(&got);
    for (int64_t step = 7; step <= 9; step++) {
        bc[0] = (float)(1.0 - pow((double)0.9f, (double)step));
        bc[1] = (float)(1.0 - pow((double)0.999f, (double)step));
        CHECK_OK(gln_optimizer_step(ctx, &host, step, want.w, want.g, want.m, want.v, want.n, NULL, GLN_DTYPE_BF16));
        CHECK_OK(gln_optimizer_step(ctx, &dev, 1, got.w, got.g, got.m, got.v, got.n, NULL, GLN_DTYPE_BF16));
        check_state(&got, &want, "bias corrections from memory");
    }
    CHECK(gln_guard_ok(bc));
    gln_test_free(bc);
    state_free(&got);
    state_free(&want);
}

/* SGD without momentum reads and writes no moment (NULL allowed). */
static void test_sgd_without_moments(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    gln_optimizer_config_t c = sgd(0.01f, 0.0f);
    state_t s = state_new(100, 3), want = state_copy(&s);
    for (int64_t i = 0; i < s.n; i++) formula(&c, 1, &want.w[i], want.g[i], &want.m[i], &want.v[i]);
    CHECK_OK(gln_optimizer_step(ctx, &c, 1, s.w, s.g, NULL, NULL, s.n, NULL, GLN_DTYPE_BF16));
    CHECK(gln_check_bitwise("sgd master", s.w, want.w, (size_t)s.n * 4));
    state_free(&s);
    state_free(&want);
}

/* The working copy is the library's RNE rounding of the new master: bf16, fp16, fp32 (a copy,
 * also aliasing the master). */
static void test_working_copy(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    gln_optimizer_config_t c = adam(0.1f, 1);
    c.lr = 0.5f; /* large steps: many values land near bf16 halfway points */
    const gln_dtype_t dts[] = {GLN_DTYPE_BF16, GLN_DTYPE_FP16, GLN_DTYPE_FP32};
    for (int d = 0; d < 3; d++) {
        state_t s = state_new(777, 20 + d);
        void *wk = gln_test_alloc(777 * 4);
        gln_poison(wk, dts[d], 777);
        CHECK_OK(gln_optimizer_step(ctx, &c, 7, s.w, s.g, s.m, s.v, s.n, wk, dts[d]));
        for (int64_t i = 0; i < s.n; i++) {
            int ok = dts[d] == GLN_DTYPE_BF16   ? ((uint16_t *)wk)[i] == gln_fp32_to_bf16(s.w[i])
                     : dts[d] == GLN_DTYPE_FP16 ? ((uint16_t *)wk)[i] == gln_fp32_to_fp16(s.w[i])
                                                : gln_f32_bits(((float *)wk)[i]) == gln_f32_bits(s.w[i]);
            CHECK_MSG(ok, "%s working[%lld] is not the rounded master", gln_dtype_name(dts[d]), (long long)i);
            if (!ok) break;
        }
        CHECK(gln_guard_ok(wk));
        gln_test_free(wk);
        state_free(&s);
    }
    /* fp32 working == master: the same result as no working copy */
    state_t a = state_new(300, 5), b = state_copy(&a);
    CHECK_OK(gln_optimizer_step(ctx, &c, 2, a.w, a.g, a.m, a.v, a.n, a.w, GLN_DTYPE_FP32));
    CHECK_OK(gln_optimizer_step(ctx, &c, 2, b.w, b.g, b.m, b.v, b.n, NULL, GLN_DTYPE_FP32));
    check_state(&a, &b, "fp32 aliasing");
    state_free(&a);
    state_free(&b);
}

/* NaN and Inf in the inputs: NaN propagates with its sign (quieted), no element is skipped. */
static void test_nan_inf(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    gln_optimizer_config_t c = adam(0.0f, 1);
    float w[4] = {1.0f, 2.0f, 3.0f, 4.0f}, g[4] = {0.0f, 0.0f, INFINITY, 1.0f}, m[4] = {0}, v[4] = {0};
    g[0] = gln_f32_from_bits(0xFF800001u); /* a negative signalling NaN */
    g[1] = gln_f32_from_bits(0x7FC01234u);
    CHECK_OK(gln_optimizer_step(ctx, &c, 1, w, g, m, v, 4, NULL, GLN_DTYPE_BF16));
    CHECK(gln_f32_bits(w[0]) == 0xFFC00001u && gln_f32_bits(m[0]) == 0xFFC00001u);
    CHECK(gln_f32_bits(w[1]) == 0x7FC01234u && gln_f32_bits(v[1]) == 0x7FC01234u);
    /* Inf gradient: m = Inf, v = Inf, update = Inf / Inf: a NaN made from non-NaN operands */
    CHECK(gln_f32_bits(w[2]) == 0x7FFFFFFFu && isinf(m[2]) && isinf(v[2]));
    CHECK(isfinite(w[3]) && w[3] != 4.0f);
}

/* ---- the op with per-segment amax ---------------------------------------------------------- */

/* The expected amax of [lo, hi) of a bf16 working copy: max |x|, NaN ignored, 0 when empty. */
static float amax_of(const uint16_t *wk, int64_t lo, int64_t hi) {
    float best = 0.0f;
    for (int64_t i = lo; i < hi; i++) {
        const float a = fabsf(gln_bf16_to_fp32(wk[i]));
        if (!isnan(a) && a > best) best = a;
    }
    return best;
}

static void run_segments(gln_context_t *ctx, int64_t n, const int64_t *bounds, int32_t nseg, int nan_at,
                         const char *what) {
    gln_optimizer_config_t c = adam(0.01f, 1);
    gln_optimizer_params_t p;
    CHECK_OK(gln_optimizer_resolve("test", &c, 3, &p));
    state_t s = state_new(n, 77), ref = state_copy(&s);
    if (nan_at >= 0) s.g[nan_at] = ref.g[nan_at] = NAN;
    uint16_t *wk = gln_test_alloc((size_t)n * 2), *wref = gln_test_alloc((size_t)n * 2);
    float *amax = gln_test_alloc((size_t)(nseg + 1) * 4);
    gln_poison(amax, GLN_DTYPE_FP32, (size_t)nseg);
    CHECK_OK(gln_op_optimizer_step(ctx, "test", &p, s.w, s.g, s.m, s.v, n, wk, GLN_DTYPE_BF16, nseg, bounds, 0, amax));
    CHECK_OK(gln_optimizer_step(ctx, &c, 3, ref.w, ref.g, ref.m, ref.v, n, wref, GLN_DTYPE_BF16));
    check_state(&s, &ref, what);
    CHECK(gln_check_bitwise(what, wk, wref, (size_t)n * 2));
    for (int32_t k = 0; k < nseg; k++) {
        const float want = amax_of(wk, bounds[k], bounds[k + 1]);
        CHECK_MSG(gln_f32_bits(amax[k]) == gln_f32_bits(want), "%s: amax[%d] of [%lld, %lld) = %g, want %g", what,
                  (int)k, (long long)bounds[k], (long long)bounds[k + 1], (double)amax[k], (double)want);
    }
    CHECK(gln_f32_bits(amax[nseg]) == 0u); /* untouched past nseg (the test buffer is zeroed) */
    CHECK(gln_guard_ok(amax) && gln_guard_ok(wk));
    gln_test_free(amax);
    gln_test_free(wk);
    gln_test_free(wref);
    state_free(&s);
    state_free(&ref);
}

static void test_segment_amax(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    /* gaps before and after, empty segments (first, middle, last), one-element segments */
    const int64_t b1[] = {0, 0, 5, 6, 6, 6, 40, 999, 1000, 1000};
    run_segments(ctx, 1000, b1, 9, -1, "small segments");
    const int64_t b2[] = {17, 100, 100, 500};
    run_segments(ctx, 1000, b2, 3, 50, "gaps, NaN in the gradient");
    const int64_t b3[] = {3, 3};
    run_segments(ctx, 10, b3, 1, -1, "one empty segment");
    const int64_t b4[] = {0, 12};
    run_segments(ctx, 12, b4, 1, 11, "NaN last");
}

/* Segments crossing the ranges of 4 threads, and the same results as with 1 thread. */
static void test_threads(void) {
    gln_context_options_t o1 = GLN_CONTEXT_OPTIONS_INIT, o4 = GLN_CONTEXT_OPTIONS_INIT;
    o1.num_threads = 1;
    o4.num_threads = 4;
    gln_context_t *c1 = NULL, *c4 = NULL;
    CHECK_OK(gln_context_create(&o1, &c1));
    CHECK_OK(gln_context_create(&o4, &c4));
    if (!c1 || !c4) return;
    const int64_t n = 600000; /* 4 threads of >= 65536 elements per piece */
    const int64_t bounds[] = {1, 300001, 300001, 599999};
    run_segments(c4, n, bounds, 3, 123457, "4 threads");
    gln_optimizer_config_t c = adam(0.01f, 0);
    state_t a = state_new(n, 9), b = state_copy(&a);
    CHECK_OK(gln_optimizer_step(c1, &c, 5, a.w, a.g, a.m, a.v, n, NULL, GLN_DTYPE_BF16));
    CHECK_OK(gln_optimizer_step(c4, &c, 5, b.w, b.g, b.m, b.v, n, NULL, GLN_DTYPE_BF16));
    check_state(&a, &b, "1 vs 4 threads");
    state_free(&a);
    state_free(&b);
    CHECK_OK(gln_context_destroy(c1));
    CHECK_OK(gln_context_destroy(c4));
}

/* ---- argument checks ------------------------------------------------------------------------- */

static void test_arguments(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    float w[4] = {1, 2, 3, 4}, g[4] = {1, 1, 1, 1}, m[4] = {0}, v[4] = {0};
    uint16_t wk[4];
    const gln_optimizer_config_t ok = GLN_OPTIMIZER_CONFIG_INIT;
    gln_optimizer_config_t c = ok;
#define BAD(field, value, needle)                                                                    \
    do {                                                                                             \
        c = ok;                                                                                      \
        c.field = value;                                                                             \
        CHECK_STATUS(gln_optimizer_step(ctx, &c, 1, w, g, m, v, 4, wk, GLN_DTYPE_BF16),              \
                     GLN_STATUS_INVALID_ARGUMENT, needle);                                           \
    } while (0)
    BAD(size, 8, "cfg->size 8 is not a known version");
    BAD(kind, (gln_optimizer_kind_t)2, "cfg->kind 2 must be");
    BAD(lr, -1.0f, "cfg->lr -1 must be finite and >= 0");
    BAD(lr, INFINITY, "cfg->lr inf must be finite");
    BAD(lr, NAN, "cfg->lr");
    BAD(beta1, 1.0f, "cfg->beta1 1 must be in [0, 1)");
    BAD(beta1, -0.5f, "cfg->beta1");
    BAD(beta2, 1.5f, "cfg->beta2 1.5 must be in [0, 1)");
    BAD(eps, 0.0f, "cfg->eps 0 must be finite and > 0");
    BAD(eps, NAN, "cfg->eps");
    BAD(weight_decay, -0.1f, "cfg->weight_decay");
    BAD(adam_w_mode, 2, "cfg->adam_w_mode 2 must be 0");
#undef BAD
    c = ok;
    c.kind = GLN_OPTIMIZER_SGD;
    c.momentum = 1.5f;
    CHECK_STATUS(gln_optimizer_step(ctx, &c, 1, w, g, m, v, 4, NULL, GLN_DTYPE_BF16), GLN_STATUS_INVALID_ARGUMENT,
                 "cfg->momentum 1.5 must be in [0, 1]");
    c.momentum = 0.9f;
    CHECK_STATUS(gln_optimizer_step(ctx, &c, 1, w, g, NULL, NULL, 4, NULL, GLN_DTYPE_BF16),
                 GLN_STATUS_INVALID_ARGUMENT, "exp_avg (the momentum buffer) must not be NULL");
    c = ok;
    CHECK_STATUS(gln_optimizer_step(NULL, &c, 1, w, g, m, v, 4, NULL, GLN_DTYPE_BF16), GLN_STATUS_INVALID_ARGUMENT,
                 "gln_optimizer_step: ctx must not be NULL");
    CHECK_STATUS(gln_optimizer_step(ctx, NULL, 1, w, g, m, v, 4, NULL, GLN_DTYPE_BF16), GLN_STATUS_INVALID_ARGUMENT,
                 "cfg must not be NULL");
    CHECK_STATUS(gln_optimizer_step(ctx, &c, 0, w, g, m, v, 4, NULL, GLN_DTYPE_BF16), GLN_STATUS_INVALID_ARGUMENT,
                 "step 0 must be >= 1");
    CHECK_STATUS(gln_optimizer_step(ctx, &c, 1, w, g, m, v, -1, NULL, GLN_DTYPE_BF16), GLN_STATUS_INVALID_ARGUMENT,
                 "n -1 must be in [0, GLN_MAX_ELEMS");
    CHECK_STATUS(gln_optimizer_step(ctx, &c, 1, w, g, m, v, GLN_MAX_ELEMS + 1, NULL, GLN_DTYPE_BF16),
                 GLN_STATUS_INVALID_ARGUMENT, "GLN_MAX_ELEMS");
    CHECK_STATUS(gln_optimizer_step(ctx, &c, 1, NULL, g, m, v, 4, NULL, GLN_DTYPE_BF16), GLN_STATUS_INVALID_ARGUMENT,
                 "master must not be NULL");
    CHECK_STATUS(gln_optimizer_step(ctx, &c, 1, w, NULL, m, v, 4, NULL, GLN_DTYPE_BF16), GLN_STATUS_INVALID_ARGUMENT,
                 "grad must not be NULL");
    CHECK_STATUS(gln_optimizer_step(ctx, &c, 1, w, g, m, NULL, 4, NULL, GLN_DTYPE_BF16), GLN_STATUS_INVALID_ARGUMENT,
                 "exp_avg and exp_avg_sq must not be NULL for Adam");
    CHECK_STATUS(gln_optimizer_step(ctx, &c, 1, w, g, m, v, 4, wk, GLN_DTYPE_FP8_E4M3), GLN_STATUS_INVALID_ARGUMENT,
                 "working_dtype fp8_e4m3 must be fp32, bf16 or fp16");
    CHECK_STATUS(gln_optimizer_step(ctx, &c, 1, w, g, m, v, 4, w, GLN_DTYPE_BF16), GLN_STATUS_INVALID_ARGUMENT,
                 "working may be master only for an fp32 working_dtype");
    /* nothing was written by a refused call */
    CHECK(w[0] == 1.0f && m[0] == 0.0f && v[0] == 0.0f);
    /* n = 0: nothing to do, NULL buffers fine */
    CHECK_OK(gln_optimizer_step(ctx, &c, 1, NULL, NULL, NULL, NULL, 0, NULL, GLN_DTYPE_BF16));
    /* the largest step: beta^step underflows, the corrections are 1 */
    CHECK_OK(gln_optimizer_step(ctx, &c, INT64_MAX, w, g, m, v, 4, NULL, GLN_DTYPE_BF16));
    CHECK(isfinite(w[0]));
}

GLN_TEST_MAIN(GLN_CASE(test_defaults), GLN_CASE(test_formula), GLN_CASE(test_bias_corrections_in_memory), GLN_CASE(test_sgd_without_moments),
              GLN_CASE(test_working_copy), GLN_CASE(test_nan_inf), GLN_CASE(test_segment_amax),
              GLN_CASE(test_threads), GLN_CASE(test_arguments))

/* The delayed-scaling state slots of the backend table (fp8_state_gather / record / update,
 * src/backend/backend.h) on the CPU backend — the reference the CUDA kernels are compared to —
 * against plain-C references written here from the rule (TE's delayed scaling)
 * and against the public gln_delayed_scaling_update_ex, bit for bit: random histories with 0,
 * NaN, Inf, subnormal and huge amaxes, both algorithms, margins 0..126, always_roll and
 * nan_propagate, slot counts 1..129, several steps in a row.  Outputs are poisoned and guarded.
 * Also: a layer whose backend lacks one of the slots reports NOT_SUPPORTED naming it (backend.h's
 * NULL-slot convention). */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/context.h"
#include "harness.h"

/* ---- references ------------------------------------------------------------------------------ */

/* The amax max: NaN ignored (TE's fmaxf) unless nan_propagate, where a NaN operand wins. */
static float ref_max(float a, float b, int nan_propagate) {
    if (isnan(a)) return nan_propagate ? a : b;
    if (isnan(b)) return nan_propagate ? b : a;
    return a > b ? a : b;
}

typedef struct upd_case {
    int32_t slots, len;
    int margin;
    gln_amax_algo_t algo;
    int always_roll, nan_propagate;
} upd_case_t;

/* One update step: per slot (skipped when its newest amax is 0, unless always_roll), the
 * window's amax, the roll (row 0 moves to the last row, then is zeroed), and the scale
 * fp8_max · 2^-margin / amax unless that amax is 0, NaN or Inf (FLT_MAX on overflow). */
static void ref_update(const upd_case_t *c, float *h, float *scale, const float *fp8_max) {
    const int32_t S = c->slots;
    for (int32_t k = 0; k < S; k++) {
        if (!c->always_roll && h[k] == 0.0f) continue;
        float amax = h[k];
        if (c->algo == GLN_AMAX_ALGO_MAX)
            for (int32_t i = 1; i < c->len; i++) amax = ref_max(amax, h[i * S + k], c->nan_propagate);
        float first = h[k];
        for (int32_t i = 0; i + 1 < c->len; i++) h[i * S + k] = h[(i + 1) * S + k];
        h[(c->len - 1) * S + k] = first;
        h[k] = 0.0f;
        if (!isfinite(amax) || !(amax > 0.0f)) continue;
        float s = fp8_max[k] * ldexpf(1.0f, -c->margin) / amax;
        scale[k] = isinf(s) ? FLT_MAX : s;
    }
}

/* ---- awkward values ---------------------------------------------------------------------------- */

/* An amax as quantizations record it: often 0 (an expert without tokens), sometimes NaN, Inf,
 * subnormal or near FLT_MAX, otherwise a positive value over a wide exponent range. */
static float awkward_amax(gln_rng_t *r) {
    switch (gln_rng_int(r, 0, 15)) {
    case 0: case 1: case 2: case 3: return 0.0f;
    case 4: return NAN;
    case 5: return INFINITY;
    case 6: return 1e-40f;        /* subnormal: 448 / amax overflows to Inf -> FLT_MAX */
    case 7: return 3.0e38f;
    default: return ldexpf((float)gln_rng_uniform(r, 1.0, 2.0), (int)gln_rng_int(r, -60, 60));
    }
}

typedef struct state {
    float *hist, *scale, *fp8_max;
} state_t;

static void state_random(const upd_case_t *c, gln_rng_t *r, state_t *s) {
    size_t n = (size_t)c->slots, h = n * (size_t)c->len;
    s->hist = gln_test_alloc(h * 4);
    s->scale = gln_test_alloc(n * 4);
    s->fp8_max = gln_test_alloc(n * 4);
    for (size_t i = 0; i < h; i++) s->hist[i] = awkward_amax(r);
    for (size_t k = 0; k < n; k++) {
        s->scale[k] = ldexpf((float)gln_rng_uniform(r, 1.0, 2.0), (int)gln_rng_int(r, -20, 20));
        s->fp8_max[k] = gln_rng_int(r, 0, 1) ? 448.0f : 57344.0f;
    }
}

static void state_copy(const upd_case_t *c, const state_t *src, state_t *dst) {
    size_t n = (size_t)c->slots, h = n * (size_t)c->len;
    dst->hist = gln_test_alloc(h * 4);
    dst->scale = gln_test_alloc(n * 4);
    dst->fp8_max = gln_test_alloc(n * 4);
    memcpy(dst->hist, src->hist, h * 4);
    memcpy(dst->scale, src->scale, n * 4);
    memcpy(dst->fp8_max, src->fp8_max, n * 4);
}

static void state_free(state_t *s) {
    CHECK(gln_guard_ok(s->hist) && gln_guard_ok(s->scale) && gln_guard_ok(s->fp8_max));
    gln_test_free(s->hist), gln_test_free(s->scale), gln_test_free(s->fp8_max);
}

static void state_compare(const char *what, const upd_case_t *c, const state_t *a, const state_t *b) {
    char label[200];
    snprintf(label, sizeof label, "%s (slots %d, len %d, margin %d, algo %d, always_roll %d, nan_propagate %d) scale",
             what, c->slots, c->len, c->margin, (int)c->algo, c->always_roll, c->nan_propagate);
    gln_check_bitwise(label, a->scale, b->scale, (size_t)c->slots * 4);
    snprintf(label, sizeof label, "%s (slots %d, len %d, margin %d, algo %d, always_roll %d, nan_propagate %d) history",
             what, c->slots, c->len, c->margin, (int)c->algo, c->always_roll, c->nan_propagate);
    gln_check_bitwise(label, a->hist, b->hist, (size_t)c->slots * (size_t)c->len * 4);
}

/* ---- update ------------------------------------------------------------------------------------ */

/* Three steps of one case, with fresh amaxes in row 0 between them: the slot, the public
 * function and the reference stay bitwise equal. */
static void update_case(gln_context_t *ctx, const upd_case_t *c, gln_rng_t *r) {
    gln_delayed_update_options_t o = GLN_DELAYED_UPDATE_OPTIONS_INIT;
    o.always_roll = c->always_roll;
    o.amax_nan_propagate = c->nan_propagate;
    state_t slot, pub, ref;
    state_random(c, r, &slot);
    state_copy(c, &slot, &pub);
    state_copy(c, &slot, &ref);
    for (int step = 0; step < 3; step++) {
        CHECK_OK(ctx->ops->fp8_state_update(ctx, c->slots, c->len, slot.hist, slot.scale, slot.fp8_max, c->margin,
                                            c->algo, &o));
        CHECK_OK(gln_delayed_scaling_update_ex(c->slots, c->len, pub.hist, pub.scale, pub.fp8_max, c->margin,
                                               c->algo, &o));
        ref_update(c, ref.hist, ref.scale, ref.fp8_max);
        state_compare("fp8_state_update vs reference", c, &slot, &ref);
        state_compare("gln_delayed_scaling_update_ex vs reference", c, &pub, &ref);
        for (int32_t k = 0; k < c->slots; k++) {
            float a = awkward_amax(r);
            slot.hist[k] = pub.hist[k] = ref.hist[k] = a;
        }
    }
    state_free(&slot), state_free(&pub), state_free(&ref);
}

static void test_update_matches_reference(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    static const int32_t slots[] = {1, 2, 5, 17, 129}, lens[] = {1, 2, 3, 16};
    static const int margins[] = {0, 1, 7, 126};
    gln_rng_t r = gln_rng_seed(81);
    for (size_t si = 0; si < 5; si++)
        for (size_t li = 0; li < 4; li++)
            for (size_t mi = 0; mi < 4; mi++)
                for (int flags = 0; flags < 8; flags++) {
                    upd_case_t c = {slots[si], lens[li], margins[mi],
                                    (flags & 1) ? GLN_AMAX_ALGO_MOST_RECENT : GLN_AMAX_ALGO_MAX, (flags >> 1) & 1,
                                    (flags >> 2) & 1};
                    update_case(ctx, &c, &r);
                }
}

/* Hand-picked slots: the rules the random cases could miss by chance. */
static void test_update_edge_slots(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    gln_delayed_update_options_t o = GLN_DELAYED_UPDATE_OPTIONS_INIT;
    /* history [2][6]: row 0 = newest */
    float h[12] = {0.0f, 2.0f, NAN, 1e-40f, 4.0f, INFINITY, /* row 1 */ 8.0f, 1.0f, 3.0f, 0.0f, NAN, 1.0f};
    float scale[6] = {5, 5, 5, 5, 5, 5}, fmax[6] = {448, 448, 448, 448, 448, 448};
    CHECK_OK(ctx->ops->fp8_state_update(ctx, 6, 2, h, scale, fmax, 0, GLN_AMAX_ALGO_MAX, &o));
    CHECK(scale[0] == 5.0f && h[0] == 0.0f && h[6] == 8.0f); /* newest 0: skipped, not rolled */
    CHECK(scale[1] == 224.0f && h[1] == 0.0f && h[7] == 2.0f); /* max(2, 1), rolled */
    CHECK(scale[2] == 448.0f / 3.0f);                          /* NaN ignored: max = 3 */
    CHECK(scale[3] == FLT_MAX);                                /* 448 / 1e-40 overflows */
    CHECK(scale[4] == 112.0f);                                 /* NaN in the window ignored */
    CHECK(scale[5] == 5.0f && isinf(h[11]));                   /* Inf amax: scale kept, rolled */
}

/* ---- gather and record ------------------------------------------------------------------------- */

typedef struct sel {
    int32_t first, stride, n;
} sel_t;
static const sel_t SELECTIONS[] = {{0, 1, 1}, {0, 1, 40}, {0, 3, 13}, {1, 3, 13}, {2, 3, 13}, {0, 2, 20}, {1, 2, 20}};
#define STATE_SLOTS 40
static const float ZERO = 0.0f;

static void test_gather(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    gln_rng_t r = gln_rng_seed(82);
    float state[STATE_SLOTS];
    for (int k = 0; k < STATE_SLOTS; k++) state[k] = k == 7 ? NAN : awkward_amax(&r) + (float)k;
    for (size_t s = 0; s < sizeof SELECTIONS / sizeof SELECTIONS[0]; s++) {
        const sel_t *q = &SELECTIONS[s];
        float *scale = gln_test_alloc((size_t)q->n * 4), *amax = gln_test_alloc((size_t)q->n * 4);
        gln_poison(scale, GLN_DTYPE_FP32, (size_t)q->n);
        gln_poison(amax, GLN_DTYPE_FP32, (size_t)q->n);
        CHECK_OK(ctx->ops->fp8_state_gather(ctx, state, q->first, q->stride, q->n, scale, amax));
        for (int32_t i = 0; i < q->n; i++) {
            CHECK_MSG(memcmp(&scale[i], &state[q->first + i * q->stride], 4) == 0, "gather %zu: scale[%d]", s, i);
            CHECK_MSG(memcmp(&amax[i], &ZERO, 4) == 0, "gather %zu: amax[%d] not +0", s, i);
        }
        gln_poison(scale, GLN_DTYPE_FP32, (size_t)q->n);
        CHECK_OK(ctx->ops->fp8_state_gather(ctx, state, q->first, q->stride, q->n, scale, NULL));
        for (int32_t i = 0; i < q->n; i++)
            CHECK_MSG(memcmp(&scale[i], &state[q->first + i * q->stride], 4) == 0, "gather %zu (no amax): scale[%d]",
                      s, i);
        CHECK(gln_guard_ok(scale) && gln_guard_ok(amax));
        gln_test_free(scale), gln_test_free(amax);
    }
}

static void test_record(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    gln_rng_t r = gln_rng_seed(83);
    for (int nanp = 0; nanp < 2; nanp++)
        for (size_t s = 0; s < sizeof SELECTIONS / sizeof SELECTIONS[0]; s++) {
            const sel_t *q = &SELECTIONS[s];
            float *row0 = gln_test_alloc(STATE_SLOTS * 4), want[STATE_SLOTS], amax[STATE_SLOTS];
            for (int k = 0; k < STATE_SLOTS; k++) want[k] = row0[k] = awkward_amax(&r);
            for (int32_t i = 0; i < q->n; i++) amax[i] = awkward_amax(&r);
            for (int32_t i = 0; i < q->n; i++) {
                float *w = &want[q->first + i * q->stride];
                *w = ref_max(*w, amax[i], nanp);
            }
            CHECK_OK(ctx->ops->fp8_state_record(ctx, row0, q->first, q->stride, q->n, amax, nanp));
            char what[80];
            snprintf(what, sizeof what, "record selection %zu, nan_propagate %d", s, nanp);
            gln_check_bitwise(what, row0, want, STATE_SLOTS * 4);
            CHECK(gln_guard_ok(row0));
            gln_test_free(row0);
        }
}

/* ---- a backend without the slots --------------------------------------------------------------- */

enum { LN = 2, LK = 32, LROWS = 8 };

/* One training forward (+ backward) of a small FP8_DELAYED layer on ctx; the first failing
 * status. */
static gln_status_t delayed_step(gln_context_t *ctx) {
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = LN;
    c.in_features = c.out_features = LK;
    c.bias = 0;
    c.recipe = GLN_RECIPE_FP8_DELAYED;
    c.amax_history_len = 4;
    gln_grouped_linear_t *L = NULL;
    gln_status_t st = gln_grouped_linear_create(ctx, &c, &L);
    if (st != GLN_STATUS_SUCCESS) return st;
    uint16_t *x = calloc(LROWS * LK, 2), *dy = calloc(LROWS * LK, 2);
    for (int i = 0; i < LROWS * LK; i++) x[i] = dy[i] = gln_fp32_to_bf16((float)(i % 7) - 3.0f);
    int64_t splits[LN] = {LROWS - 3, 3};
    gln_tensor_t xt = gln_tensor_make(GLN_DTYPE_BF16, LROWS, LK, x), yt = gln_tensor_make(GLN_DTYPE_BF16, LROWS, LK, NULL);
    gln_tensor_t dyt = gln_tensor_make(GLN_DTYPE_BF16, LROWS, LK, dy);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &xt, a.m_splits = splits, a.y = &yt, a.input_requires_grad = 0;
    gln_grouped_linear_saved_t *sv = NULL;
    st = gln_grouped_linear_forward(L, &a, &sv);
    if (st == GLN_STATUS_SUCCESS) st = gln_grouped_linear_backward(sv, &dyt, NULL);
    if (sv) gln_grouped_linear_saved_release(sv);
    gln_grouped_linear_destroy(L);
    free(x), free(dy);
    return st;
}

static void test_missing_slot_not_supported(void) {
    static const char *names[] = {"fp8_state_gather", "fp8_state_record", "fp8_state_update"};
    for (int which = 0; which < 3; which++) {
        gln_context_t *ctx = NULL;
        CHECK_OK(gln_context_create(NULL, &ctx));
        if (!ctx) return;
        const gln_backend_ops_t *orig = ctx->ops;
        CHECK_OK(delayed_step(ctx)); /* the full table works */
        gln_backend_ops_t ops = *orig;
        if (which == 0) ops.fp8_state_gather = NULL;
        if (which == 1) ops.fp8_state_record = NULL;
        if (which == 2) ops.fp8_state_update = NULL;
        ctx->ops = &ops;
        CHECK_STATUS(delayed_step(ctx), GLN_STATUS_NOT_SUPPORTED, names[which]);
        ctx->ops = orig;
        gln_context_destroy(ctx);
    }
}

GLN_TEST_MAIN(GLN_CASE(test_update_matches_reference), GLN_CASE(test_update_edge_slots), GLN_CASE(test_gather),
              GLN_CASE(test_record), GLN_CASE(test_missing_slot_not_supported))

/* Top-k softmax router: forward (softmax, selection, renormalization) and its backward with the
 * selection held fixed.  Host memory, FP32 math, one token row at a time. */
#include <math.h>
#include <stdlib.h>

#include "common/checked.h"
#include "common/error.h"
#include "moe/moe_check.h"

static gln_status_t router_check(const char *fn, gln_context_t *ctx, int64_t tokens,
                                 int32_t num_experts, int32_t k) {
    GLN_TRY(gln_moe_check_ctx(fn, ctx));
    GLN_REQUIRE_ARG(num_experts >= 1, "%s: num_experts %d must be >= 1", fn, (int)num_experts);
    GLN_REQUIRE_ARG(k >= 1 && k <= num_experts, "%s: k %d must be in [1, num_experts = %d]", fn,
                    (int)k, (int)num_experts);
    GLN_TRY(gln_check_dim(fn, "tokens", tokens));
    return gln_check_elems(fn, "logits [tokens, num_experts]", tokens, num_experts, NULL);
}

/* probs[e] = softmax(logits)[e] (max subtracted first so exp never overflows). */
static void softmax_row(const float *logits, int32_t n, float *probs) {
    float mx = logits[0];
    for (int32_t e = 1; e < n; e++)
        if (logits[e] > mx) mx = logits[e];
    float sum = 0.0f;
    for (int32_t e = 0; e < n; e++) {
        probs[e] = expf(logits[e] - mx);
        sum += probs[e];
    }
    for (int32_t e = 0; e < n; e++) probs[e] /= sum;
}

/* The k largest probabilities; a strict '>' keeps the lower index on ties.  `taken` marks the
 * experts already chosen (k passes over E: E is small for a router). */
static void select_top_k(const float *probs, int32_t n, int32_t k, unsigned char *taken,
                         int32_t *experts) {
    for (int32_t e = 0; e < n; e++) taken[e] = 0;
    for (int32_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (int32_t e = 0; e < n; e++) {
            if (taken[e]) continue;
            /* NaN never wins a comparison: it is chosen only when nothing else is left. */
            if (best < 0 || probs[e] > probs[best] || (isnan(probs[best]) && !isnan(probs[e])))
                best = e;
        }
        taken[best] = 1;
        experts[j] = best;
    }
}

gln_status_t gln_moe_router_forward(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                    const float *logits, int32_t *experts, float *gates) {
    static const char *fn = "gln_moe_router_forward";
    GLN_TRY(router_check(fn, ctx, tokens, num_experts, k));
    if (tokens == 0) return GLN_STATUS_SUCCESS;
    GLN_REQUIRE_NOT_NULL(fn, logits);
    GLN_REQUIRE_NOT_NULL(fn, experts);
    GLN_REQUIRE_NOT_NULL(fn, gates);

    gln_status_t st = GLN_STATUS_SUCCESS;
    float *probs = malloc((size_t)num_experts * sizeof *probs);
    unsigned char *taken = malloc((size_t)num_experts);
    GLN_CHECK_COND(probs && taken, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", fn);
    for (int64_t t = 0; t < tokens; t++) {
        int32_t *ex = experts + t * k;
        float *g = gates + t * k;
        softmax_row(logits + t * num_experts, num_experts, probs);
        select_top_k(probs, num_experts, k, taken, ex);
        float sum = 0.0f;
        for (int32_t j = 0; j < k; j++) sum += probs[ex[j]];
        for (int32_t j = 0; j < k; j++) g[j] = probs[ex[j]] / sum;
    }
fail:
    free(probs);
    free(taken);
    return st;
}

/* One token: dgates → dprobs (through g_j = p_j / S) → dlogits (through the softmax).
 *   dp_{e_j} = (dg_j - Σ_i dg_i·g_i) / S,   dp_e = 0 for unselected e
 *   dz_e     = p_e · (dp_e - Σ_e' p_e'·dp_e') */
static void router_backward_row(const float *logits, int32_t n, int32_t k, const int32_t *ex,
                                const float *dg, float *probs, float *dp, float *dz) {
    softmax_row(logits, n, probs);
    float sum = 0.0f;
    for (int32_t j = 0; j < k; j++) sum += probs[ex[j]];
    float dot = 0.0f;
    for (int32_t j = 0; j < k; j++) dot += dg[j] * (probs[ex[j]] / sum);
    for (int32_t e = 0; e < n; e++) dp[e] = 0.0f;
    for (int32_t j = 0; j < k; j++) dp[ex[j]] += (dg[j] - dot) / sum;
    float pdp = 0.0f;
    for (int32_t e = 0; e < n; e++) pdp += probs[e] * dp[e];
    for (int32_t e = 0; e < n; e++) dz[e] = probs[e] * (dp[e] - pdp);
}

gln_status_t gln_moe_router_backward(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                     const float *logits, const int32_t *experts,
                                     const float *dgates, float *dlogits) {
    static const char *fn = "gln_moe_router_backward";
    GLN_TRY(router_check(fn, ctx, tokens, num_experts, k));
    if (tokens == 0) return GLN_STATUS_SUCCESS;
    GLN_REQUIRE_NOT_NULL(fn, logits);
    GLN_REQUIRE_NOT_NULL(fn, experts);
    GLN_REQUIRE_NOT_NULL(fn, dgates);
    GLN_REQUIRE_NOT_NULL(fn, dlogits);
    for (int64_t i = 0; i < tokens * k; i++)
        GLN_REQUIRE_ARG(experts[i] >= 0 && experts[i] < num_experts,
                        "%s: experts[%lld] = %d must be in [0, %d)", fn, (long long)i,
                        (int)experts[i], (int)num_experts);

    gln_status_t st = GLN_STATUS_SUCCESS;
    float *probs = malloc(2 * (size_t)num_experts * sizeof *probs);
    GLN_CHECK_COND(probs, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", fn);
    for (int64_t t = 0; t < tokens; t++)
        router_backward_row(logits + t * num_experts, num_experts, k, experts + t * k,
                            dgates + t * k, probs, probs + num_experts,
                            dlogits + t * num_experts);
fail:
    free(probs);
    return st;
}

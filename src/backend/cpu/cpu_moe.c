/* The MoE building blocks on the CPU, the reference implementation of their backend slots: the
 * top-k softmax router (forward, and backward with the selection held fixed), the permutation
 * plan (a stable counting sort of (token, slot) pairs by expert), permute / unpermute and their
 * backwards, and the SwiGLU / GELU activations.  Host memory, FP32 math, one token row at a
 * time, one rounding to each output dtype.
 *
 * The dispatchers in src/moe validate every argument (shapes, dtypes, pointers, the contents of
 * experts and row_of) and return empty calls before these run, so the loops trust their input.
 * Failures here are host-memory exhaustion only, reported under the public call's name. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_convert.h"
#include "common/checked.h"
#include "common/error.h"

/* Host scratch of `floats` FP32 values (at least one byte is allocated); free() it. */
static gln_status_t moe_scratch(const char *fn, int64_t floats, float **buf) {
    size_t bytes;
    *buf = NULL;
    GLN_TRY(gln_bytes(fn, "FP32 row scratch", floats, sizeof(float), &bytes));
    *buf = malloc(bytes ? bytes : 1);
    GLN_REQUIRE(*buf != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory (%zu bytes)", fn, bytes);
    return GLN_STATUS_SUCCESS;
}

/* ---- router ------------------------------------------------------------------------------ */

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

gln_status_t gln_cpu_moe_router_forward(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                        const float *logits, int32_t *experts, float *gates) {
    static const char *fn = "gln_moe_router_forward";
    (void)ctx;
    gln_status_t st = GLN_STATUS_SUCCESS;
    float *probs = malloc((size_t)num_experts * sizeof *probs);
    unsigned char *taken = malloc((size_t)num_experts);
    GLN_CHECK_COND(st, fail, probs && taken, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", fn);
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

gln_status_t gln_cpu_moe_router_backward(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                         const float *logits, const int32_t *experts, const float *dgates,
                                         float *dlogits) {
    static const char *fn = "gln_moe_router_backward";
    (void)ctx;
    gln_status_t st = GLN_STATUS_SUCCESS;
    float *probs = malloc(2 * (size_t)num_experts * sizeof *probs);
    GLN_CHECK_COND(st, fail, probs, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", fn);
    for (int64_t t = 0; t < tokens; t++)
        router_backward_row(logits + t * num_experts, num_experts, k, experts + t * k,
                            dgates + t * k, probs, probs + num_experts,
                            dlogits + t * num_experts);
fail:
    free(probs);
    return st;
}

/* ---- permutation ------------------------------------------------------------------------- */

gln_status_t gln_cpu_moe_permute_plan(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                      int64_t align, const int32_t *experts, int64_t *m_splits,
                                      int64_t *row_of) {
    static const char *fn = "gln_moe_permute_plan";
    (void)ctx;
    const int64_t pairs = tokens * k;
    int64_t *next = malloc((size_t)num_experts * sizeof *next);
    GLN_REQUIRE(next != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", fn);
    for (int32_t e = 0; e < num_experts; e++) m_splits[e] = 0;
    for (int64_t i = 0; i < pairs; i++) m_splits[experts[i]]++;
    /* Each expert's block starts after the (padded) blocks of lower experts; pairs are visited
     * in (token, slot) order, so the sort is stable.  Padding rows end each block. */
    int64_t start = 0;
    for (int32_t e = 0; e < num_experts; e++) {
        m_splits[e] = (m_splits[e] + align - 1) / align * align;
        next[e] = start;
        start += m_splits[e];
    }
    for (int64_t i = 0; i < pairs; i++) row_of[i] = next[experts[i]]++;
    free(next);
    return GLN_STATUS_SUCCESS;
}

/* dst row = src row (converted through FP32 when the dtypes differ; a copy when they agree). */
static void copy_row(const gln_tensor_t *src, int64_t sr, gln_tensor_t *dst, int64_t dr, float *tmp) {
    const int64_t h = src->cols;
    const size_t ss = gln_dtype_size(src->dtype), ds = gln_dtype_size(dst->dtype);
    const char *s = (const char *)src->data + (size_t)(sr * h) * ss;
    char *d = (char *)dst->data + (size_t)(dr * h) * ds;
    if (src->dtype == dst->dtype) {
        memcpy(d, s, (size_t)h * ss);
        return;
    }
    gln_cpu_widen(s, src->dtype, (size_t)h, tmp);
    gln_cpu_narrow(tmp, dst->dtype, (size_t)h, d);
}

/* acc[:] += w · row sr of t (FP32). */
static void axpy_row(float w, const gln_tensor_t *t, int64_t sr, float *acc) {
    const int64_t h = t->cols;
    const size_t base = (size_t)(sr * h);
    for (int64_t c = 0; c < h; c++) acc[c] += w * gln_cpu_load(t->data, t->dtype, base + (size_t)c);
}

static void store_row(const float *acc, gln_tensor_t *t, int64_t r) {
    const int64_t h = t->cols;
    gln_cpu_narrow(acc, t->dtype, (size_t)h,
                   (char *)t->data + (size_t)(r * h) * gln_dtype_size(t->dtype));
}

gln_status_t gln_cpu_moe_permute(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                 const gln_tensor_t *x, gln_tensor_t *xp) {
    (void)ctx;
    float *tmp;
    GLN_TRY(moe_scratch("gln_moe_permute", x->cols, &tmp));
    for (int64_t i = 0; i < tokens * k; i++) copy_row(x, i / k, xp, row_of[i], tmp);
    free(tmp);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_cpu_moe_permute_backward(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                          const gln_tensor_t *dxp, gln_tensor_t *dx) {
    (void)ctx;
    float *acc;
    GLN_TRY(moe_scratch("gln_moe_permute_backward", dxp->cols, &acc));
    for (int64_t t = 0; t < tokens; t++) {
        memset(acc, 0, (size_t)dxp->cols * sizeof *acc);
        for (int32_t j = 0; j < k; j++) axpy_row(1.0f, dxp, row_of[t * k + j], acc);
        store_row(acc, dx, t);
    }
    free(acc);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_cpu_moe_unpermute(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                   const float *gates, const gln_tensor_t *yp, gln_tensor_t *y) {
    (void)ctx;
    float *acc;
    GLN_TRY(moe_scratch("gln_moe_unpermute", yp->cols, &acc));
    for (int64_t t = 0; t < tokens; t++) {
        memset(acc, 0, (size_t)yp->cols * sizeof *acc);
        for (int32_t j = 0; j < k; j++) axpy_row(gates[t * k + j], yp, row_of[t * k + j], acc);
        store_row(acc, y, t);
    }
    free(acc);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_cpu_moe_unpermute_backward(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                                            const float *gates, const gln_tensor_t *yp, const gln_tensor_t *dy,
                                            gln_tensor_t *dyp, float *dgates) {
    (void)ctx;
    const int64_t h = yp->cols;
    float *buf;
    GLN_TRY(moe_scratch("gln_moe_unpermute_backward", 2 * h, &buf));
    float *dyt = buf, *row = buf + h;
    for (int64_t t = 0; t < tokens; t++) {
        if (h > 0) /* dy has no data to address without features */
            gln_cpu_widen((const char *)dy->data + (size_t)(t * h) * gln_dtype_size(dy->dtype),
                          dy->dtype, (size_t)h, dyt);
        for (int32_t j = 0; j < k; j++) {
            const int64_t r = row_of[t * k + j];
            const float g = gates[t * k + j];
            float dot = 0.0f;
            for (int64_t c = 0; c < h; c++) {
                dot += dyt[c] * gln_cpu_load(yp->data, yp->dtype, (size_t)(r * h + c));
                row[c] = g * dyt[c];
            }
            dgates[t * k + j] = dot;
            if (h > 0) store_row(row, dyp, r);
        }
    }
    free(buf);
    return GLN_STATUS_SUCCESS;
}

/* ---- activations ------------------------------------------------------------------------- */

#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

static float sigmoidf(float a) { return 1.0f / (1.0f + expf(-a)); }

static float gelu_f(float x) {
    return 0.5f * x * (1.0f + tanhf(GELU_C * (x + GELU_A * x * x * x)));
}

static float gelu_grad(float x) {
    float t = tanhf(GELU_C * (x + GELU_A * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * GELU_A * x * x);
}

gln_status_t gln_cpu_activation_forward(gln_context_t *ctx, gln_activation_t act, const gln_tensor_t *in,
                                        gln_tensor_t *out) {
    (void)ctx;
    const int64_t h = act == GLN_ACT_SWIGLU ? in->cols / 2 : in->cols;
    float *row;
    GLN_TRY(moe_scratch("gln_activation_forward", h, &row));
    const size_t out_es = gln_dtype_size(out->dtype);
    for (int64_t r = 0; r < in->rows; r++) {
        const size_t base = (size_t)(r * in->cols);
        for (int64_t c = 0; c < h; c++) {
            float a = gln_cpu_load(in->data, in->dtype, base + (size_t)c);
            if (act == GLN_ACT_GELU) {
                row[c] = gelu_f(a);
            } else {
                float b = gln_cpu_load(in->data, in->dtype, base + (size_t)(h + c));
                row[c] = a * sigmoidf(a) * b;
            }
        }
        gln_cpu_narrow(row, out->dtype, (size_t)h, (char *)out->data + (size_t)(r * h) * out_es);
    }
    free(row);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_cpu_activation_backward(gln_context_t *ctx, gln_activation_t act, const gln_tensor_t *in,
                                         const gln_tensor_t *dout, gln_tensor_t *din) {
    (void)ctx;
    const int64_t h = act == GLN_ACT_SWIGLU ? in->cols / 2 : in->cols;
    float *row;
    GLN_TRY(moe_scratch("gln_activation_backward", in->cols, &row));
    const size_t din_es = gln_dtype_size(din->dtype);
    for (int64_t r = 0; r < in->rows; r++) {
        const size_t base = (size_t)(r * in->cols);
        for (int64_t c = 0; c < h; c++) {
            float a = gln_cpu_load(in->data, in->dtype, base + (size_t)c);
            float d = gln_cpu_load(dout->data, dout->dtype, (size_t)(r * h + c));
            if (act == GLN_ACT_GELU) {
                row[c] = d * gelu_grad(a);
            } else {
                /* d silu(a)/da = s + a·s·(1 - s) */
                float b = gln_cpu_load(in->data, in->dtype, base + (size_t)(h + c));
                float s = sigmoidf(a);
                row[c] = d * b * (s + a * s * (1.0f - s));
                row[h + c] = d * a * s;
            }
        }
        gln_cpu_narrow(row, din->dtype, (size_t)in->cols, (char *)din->data + base * din_es);
    }
    free(row);
    return GLN_STATUS_SUCCESS;
}

/* Fuzz harness 3: the MoE building blocks — router forward / backward, permutation plan,
 * permute / unpermute and their backwards, SwiGLU / GELU forward and backward.
 *
 * Promises checked beyond "no memory error, no UB, no leak" (tame data: values k/16 in
 * [-8, 8), so the sums below are exact in FP32):
 *   router   k distinct experts in range per token, the k largest logits (ties: lower index),
 *            gates >= 0 summing to 1
 *   plan     m_splits counts each expert; row_of is a permutation of [0, T·k), grouped by
 *            expert in expert order, token order within an expert
 *   permute  xp[row_of[p]] == x[p / k] bit for bit; its backward and unpermute (with gates
 *            k/16) and unpermute's backward equal their exact sums rounded once
 *   activations  close to a float64 reference (one rounding of an FP32 computation)
 *   wild sizes (negative, overflowing products) are refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

enum { MAX_T = 24, MAX_E = 8, MAX_H = 40 };

static int64_t hidden(fz_t *f, int *wild) {
    int64_t h = fz_size(f, MAX_H, wild);
    if (h >= 0 && h <= MAX_H && fz_u8(f) >= 0xf0) h += 100;
    return h;
}

static int too_big(int64_t r, int64_t c) {
    int64_t p;
    /* grouplin.h: each dimension in [0, GLN_MAX_DIM], at most GLN_MAX_ELEMS elements */
    return r < 0 || c < 0 || r > GLN_MAX_DIM || c > GLN_MAX_DIM ||
           __builtin_mul_overflow(r, c, &p) || p > GLN_MAX_ELEMS;
}

static float round_to(gln_dtype_t dt, double v) {
    uint32_t w = 0;
    fz_store(&w, dt, 0, (float)v);
    return fz_load(&w, dt, 0);
}

typedef struct moe_case {
    int64_t T;
    int32_t E, k;
    float *logits;
    int32_t *experts;
    float *gates;
    int64_t *splits, *row_of;
} moe_case_t;

static void check_router(const moe_case_t *m) {
    for (int64_t t = 0; t < m->T; t++) {
        const float *l = m->logits + t * m->E;
        double sum = 0.0;
        for (int j = 0; j < m->k; j++) {
            int32_t e = m->experts[t * m->k + j];
            FZ_ASSERT(e >= 0 && e < m->E, "router: expert %d out of range", (int)e);
            for (int i = 0; i < j; i++)
                FZ_ASSERT(m->experts[t * m->k + i] != e, "router: expert %d chosen twice", (int)e);
            float g = m->gates[t * m->k + j];
            FZ_ASSERT(g >= 0.0f && g <= 1.0f, "router: gate %g", (double)g);
            sum += g;
            /* Every unchosen expert ranks below every chosen one. */
            for (int32_t u = 0; u < m->E; u++) {
                int chosen = 0;
                for (int i = 0; i < m->k; i++) chosen |= m->experts[t * m->k + i] == u;
                if (!chosen)
                    FZ_ASSERT(
                        l[u] < l[e] || (l[u] == l[e] && u > e),
                        "router token %lld: expert %d (logit %g) unchosen, %d (logit %g) chosen",
                        (long long)t, (int)u, (double)l[u], (int)e, (double)l[e]);
            }
        }
        FZ_ASSERT(fabs(sum - 1.0) < 1e-5, "router token %lld: gates sum to %.9g", (long long)t,
                  sum);
    }
}

static void check_plan(const moe_case_t *m) {
    int64_t n = m->T * m->k, start[MAX_E + 1];
    start[0] = 0;
    for (int e = 0; e < m->E; e++) {
        int64_t c = 0;
        for (int64_t p = 0; p < n; p++) c += m->experts[p] == e;
        FZ_ASSERT(m->splits[e] == c, "plan: m_splits[%d] = %lld, counted %lld", e,
                  (long long)m->splits[e], (long long)c);
        start[e + 1] = start[e] + c;
    }
    /* Expert e's pairs, in index order, take rows start[e], start[e] + 1, ... */
    int64_t next[MAX_E];
    memcpy(next, start, sizeof next);
    for (int64_t p = 0; p < n; p++) {
        int32_t e = m->experts[p];
        FZ_ASSERT(m->row_of[p] == next[e], "plan: row_of[%lld] = %lld, expected %lld", (long long)p,
                  (long long)m->row_of[p], (long long)next[e]);
        next[e]++;
    }
}

/* Router + plan; fills m (tame sizes) or checks refusal (wild). Returns 1 when usable. */
static int route(fz_t *f, gln_context_t *ctx, moe_case_t *m) {
    int wild = 0;
    m->T = fz_size(f, MAX_T, &wild);
    m->E = (int32_t)fz_int(f, 0, MAX_E);
    m->k = (int32_t)fz_int(f, 0, 4);
    if (wild) { /* only values that must be refused: negative, or T·E past int64 */
        int64_t p;
        if (m->T >= 0 && m->E >= 1 && !__builtin_mul_overflow(m->T, (int64_t)m->E, &p)) return 0;
        float l[4];
        int32_t e[4];
        float g[4];
        fz_refused(gln_moe_router_forward(ctx, m->T, m->E, m->k, l, e, g), "gln_moe_router_forward",
                   "wild tokens");
        return 0;
    }
    int64_t TE = m->T * (m->E > 0 ? m->E : 1), Tk = m->T * (m->k > 0 ? m->k : 1);
    m->logits = fz_alloc(f, (size_t)TE * sizeof(float));
    for (int64_t i = 0; i < TE; i++) m->logits[i] = fz_value(f);
    m->experts = fz_alloc(f, (size_t)Tk * sizeof(int32_t));
    m->gates = fz_alloc(f, (size_t)Tk * sizeof(float));
    m->splits = fz_alloc(f, (size_t)(m->E > 0 ? m->E : 1) * sizeof(int64_t));
    m->row_of = fz_alloc(f, (size_t)Tk * sizeof(int64_t));
    gln_status_t st =
        fz_status(gln_moe_router_forward(ctx, m->T, m->E, m->k, m->logits, m->experts, m->gates),
                  "gln_moe_router_forward");
    int valid = m->E >= 1 && m->k >= 1 && m->k <= m->E &&
                (m->T == 0 || (m->logits && m->experts && m->gates));
    if (!valid) {
        fz_refused(st, "gln_moe_router_forward", "invalid E / k / buffers");
        return 0;
    }
    FZ_ASSERT(st == GLN_STATUS_SUCCESS, "router refused a valid call: %s", gln_last_error());
    if (!f->specials) check_router(m);
    if (fz_u8(f) == 0xff && m->T > 0) m->experts[0] = m->E; /* out of range: plan refuses */
    if (fz_u8(f) == 0xfe && m->T > 0) m->experts[0] = -1;
    st = fz_status(gln_moe_permute_plan(ctx, m->T, m->E, m->k, m->experts, m->splits, m->row_of),
                   "gln_moe_permute_plan");
    if (m->T > 0 && (m->experts[0] < 0 || m->experts[0] >= m->E)) {
        fz_refused(st, "gln_moe_permute_plan", "an expert index out of range");
        return 0;
    }
    FZ_ASSERT(st == GLN_STATUS_SUCCESS, "plan refused a valid call: %s", gln_last_error());
    check_plan(m);
    /* Router backward: shape only (dlogits finite from tame dgates). */
    float *dg = fz_alloc(f, (size_t)Tk * sizeof(float)),
          *dl = fz_alloc(f, (size_t)TE * sizeof(float));
    for (int64_t i = 0; i < Tk; i++) dg[i] = fz_value(f);
    if (fz_status(gln_moe_router_backward(ctx, m->T, m->E, m->k, m->logits, m->experts, dg, dl),
                  "gln_moe_router_backward") == GLN_STATUS_SUCCESS &&
        !f->specials)
        for (int64_t i = 0; i < TE; i++)
            FZ_ASSERT(isfinite(dl[i]), "router backward: dlogits not finite");
    return 1;
}

static void permutation(fz_t *f, gln_context_t *ctx, const moe_case_t *m) {
    int wild = 0;
    int64_t H = hidden(f, &wild), T = m->T, n = T * m->k;
    gln_dtype_t dt = (gln_dtype_t)fz_pick(f, 3);
    if (wild) {
        gln_tensor_t x = gln_tensor_make(dt, T, H, fz_alloc(f, 16)),
                     xp = gln_tensor_make(dt, n, H, fz_alloc(f, 16));
        if (too_big(T, H) || too_big(n, H))
            fz_refused(gln_moe_permute(ctx, T, m->k, m->row_of, &x, &xp), "gln_moe_permute",
                       "a wild width");
        return;
    }
    size_t es = gln_dtype_size(dt);
    gln_tensor_t x = fz_tensor(f, dt, T, H), xp = fz_tensor_poisoned(f, dt, n, H);
    if (fz_status(gln_moe_permute(ctx, T, m->k, m->row_of, &x, &xp), "gln_moe_permute") ==
        GLN_STATUS_SUCCESS)
        for (int64_t p = 0; p < n && H; p++)
            FZ_ASSERT(memcmp((char *)xp.data + (size_t)(m->row_of[p] * H) * es,
                             (char *)x.data + (size_t)((p / m->k) * H) * es, (size_t)H * es) == 0,
                      "permute: row %lld is not x[%lld]", (long long)m->row_of[p],
                      (long long)(p / m->k));
    /* Backward: dx[t] = Σ_j dxp[row_of[t·k+j]]. */
    gln_tensor_t dxp = fz_tensor(f, dt, n, H), dx = fz_tensor_poisoned(f, dt, T, H);
    if (fz_status(gln_moe_permute_backward(ctx, T, m->k, m->row_of, &dxp, &dx),
                  "gln_moe_permute_backward") == GLN_STATUS_SUCCESS &&
        !f->specials)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                double s = 0.0;
                for (int j = 0; j < m->k; j++)
                    s += fz_load(dxp.data, dt, (size_t)(m->row_of[t * m->k + j] * H + h));
                FZ_ASSERT(fz_load(dx.data, dt, (size_t)(t * H + h)) == round_to(dt, s),
                          "permute backward dx[%lld,%lld]", (long long)t, (long long)h);
            }
    /* Unpermute with gates k/16: y[t] = Σ_j g[t,j]·yp[row_of[t·k+j]]. */
    float *g = fz_alloc(f, (size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) g[i] = fz_value(f);
    gln_tensor_t yp = fz_tensor(f, dt, n, H), y = fz_tensor_poisoned(f, dt, T, H);
    if (fz_status(gln_moe_unpermute(ctx, T, m->k, m->row_of, g, &yp, &y), "gln_moe_unpermute") ==
            GLN_STATUS_SUCCESS &&
        !f->specials)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                double s = 0.0;
                for (int j = 0; j < m->k; j++)
                    s += (double)g[t * m->k + j] *
                         fz_load(yp.data, dt, (size_t)(m->row_of[t * m->k + j] * H + h));
                FZ_ASSERT(fz_load(y.data, dt, (size_t)(t * H + h)) == round_to(dt, s),
                          "unpermute y[%lld,%lld]", (long long)t, (long long)h);
            }
    /* Unpermute backward: dyp[row] = g·dy[t]; dgates[t,j] = <dy[t], yp[row]>. */
    gln_tensor_t dy = fz_tensor(f, dt, T, H), dyp = fz_tensor_poisoned(f, dt, n, H);
    float *dg = fz_alloc(f, (size_t)n * sizeof(float));
    if (fz_status(gln_moe_unpermute_backward(ctx, T, m->k, m->row_of, g, &yp, &dy, &dyp, dg),
                  "gln_moe_unpermute_backward") != GLN_STATUS_SUCCESS ||
        f->specials)
        return;
    for (int64_t p = 0; p < n; p++) {
        int64_t t = p / m->k, r = m->row_of[p];
        double dot = 0.0;
        for (int64_t h = 0; h < H; h++) {
            double d = fz_load(dy.data, dt, (size_t)(t * H + h));
            dot += d * fz_load(yp.data, dt, (size_t)(r * H + h));
            FZ_ASSERT(fz_load(dyp.data, dt, (size_t)(r * H + h)) == round_to(dt, g[p] * d),
                      "unpermute backward dyp[%lld,%lld]", (long long)r, (long long)h);
        }
        FZ_ASSERT(dg[p] == (float)dot, "unpermute backward dgates[%lld] = %g, exact %g",
                  (long long)p, (double)dg[p], dot);
    }
}

static double ref_act(gln_activation_t act, double a, double b) {
    if (act == GLN_ACT_SWIGLU) return a / (1.0 + exp(-a)) * b;
    return 0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));
}

static void activations(fz_t *f, gln_context_t *ctx) {
    int wild = 0;
    gln_activation_t act = (gln_activation_t)fz_int(f, 0, 2);
    int64_t R = fz_size(f, MAX_T, &wild), H = hidden(f, &wild);
    int64_t in_cols = H;
    if (act == GLN_ACT_SWIGLU && __builtin_mul_overflow(H, 2, &in_cols)) in_cols = H; /* wild */
    if (fz_u8(f) == 0xff && in_cols < INT64_MAX)
        in_cols += 1; /* odd SwiGLU width / wrong GELU width: refused */
    gln_dtype_t dt = (gln_dtype_t)fz_pick(f, 3), odt = (gln_dtype_t)fz_pick(f, 3);
    if (wild) {
        gln_tensor_t in = gln_tensor_make(dt, R, in_cols, fz_alloc(f, 16)),
                     out = gln_tensor_make(odt, R, H, fz_alloc(f, 16));
        if (too_big(R, in_cols) || too_big(R, H))
            fz_refused(gln_activation_forward(ctx, act, &in, &out), "gln_activation_forward",
                       "a wild shape");
        return;
    }
    gln_tensor_t in = fz_tensor(f, dt, R, in_cols), out = fz_tensor_poisoned(f, odt, R, H);
    gln_status_t st =
        fz_status(gln_activation_forward(ctx, act, &in, &out), "gln_activation_forward");
    int valid = act <= GLN_ACT_GELU && in_cols == (act == GLN_ACT_SWIGLU ? 2 * H : H);
    if (!valid) {
        fz_refused(st, "gln_activation_forward", "an invalid activation or width");
        return;
    }
    FZ_ASSERT(st == GLN_STATUS_SUCCESS, "activation forward refused a valid call: %s",
              gln_last_error());
    double u = odt == GLN_DTYPE_FP32 ? 0x1p-22 : odt == GLN_DTYPE_BF16 ? 0x1p-7 : 0x1p-10;
    for (int64_t r = 0; r < R && !f->specials; r++)
        for (int64_t h = 0; h < H; h++) {
            double a = fz_load(in.data, dt, (size_t)(r * in_cols + h));
            double b =
                act == GLN_ACT_SWIGLU ? fz_load(in.data, dt, (size_t)(r * in_cols + H + h)) : 1.0;
            double want = ref_act(act, a, b), got = fz_load(out.data, odt, (size_t)(r * H + h));
            FZ_ASSERT(fabs(got - want) <= u * fabs(want) + 1e-6,
                      "activation %d out[%lld,%lld] = %.9g, reference %.9g", (int)act, (long long)r,
                      (long long)h, got, want);
        }
    gln_tensor_t dout = fz_tensor(f, odt, R, H), din = fz_tensor_poisoned(f, dt, R, in_cols);
    if (fz_status(gln_activation_backward(ctx, act, &in, &dout, &din), "gln_activation_backward") ==
            GLN_STATUS_SUCCESS &&
        !f->specials)
        FZ_ASSERT(fz_all_finite(din.data, dt, (size_t)(R * in_cols)),
                  "activation backward: din not finite");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_t f = fz_begin(data, size);
    gln_context_t *ctx = fz_context();
    moe_case_t m;
    memset(&m, 0, sizeof m);
    if (fz_bool(&f)) {
        activations(&f, ctx);
    } else if (route(&f, ctx, &m)) {
        permutation(&f, ctx, &m);
        if (fz_bool(&f)) activations(&f, ctx);
    }
    fz_free_all();
    return 0;
}

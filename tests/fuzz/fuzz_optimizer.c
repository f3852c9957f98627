/* Fuzz harness 7: the optimizer step, gln_optimizer_step and gln_sharded_weights_optimizer_step
 * (over the self communicator, optionally with a quantized shard).
 *
 * Promises checked beyond "no memory error, no UB, no leak":
 *   - gln_optimizer_step is refused (INVALID_ARGUMENT) exactly when an argument is out of the
 *     header's ranges: ctx or cfg NULL, cfg->size not sizeof, kind not ADAM / SGD, lr or
 *     weight_decay not finite >= 0, SGD: momentum not in [0, 1]; Adam: beta1 or beta2 not in
 *     [0, 1), eps not finite > 0, adam_w_mode not 0 / 1; step < 1, n outside [0, GLN_MAX_ELEMS],
 *     working given with a dtype not fp32 / bf16 / fp16; and when n > 0: master or grad NULL, a
 *     moment the kind reads NULL (Adam both, SGD with momentum exp_avg), working == master for a
 *     working dtype other than fp32 — and then no byte of any buffer changed;
 *   - accepted, master / exp_avg / exp_avg_sq / working equal this harness's own model of the
 *     header's rule bit for bit (the operation order, one FP32 rounding per operation, the NaN
 *     rule: a NaN operand comes back quieted with its sign and payload, the first operand's when
 *     both are NaN, a NaN made from non-NaN operands is 0x7FFFFFFF; bias corrections
 *     (float)(1 - pow(beta, step)) in double, or the caller's two floats; the working copy the
 *     updated master rounded to nearest even), and no guard byte around a buffer changed;
 *   - gln_sharded_weights_optimizer_step is refused exactly when the public step would be
 *     (INVALID_ARGUMENT), else INVALID_STATE for a group without requires_grad or with a
 *     prefetched gather outstanding, and then the master, main_grad, working shard and moments
 *     are unchanged; accepted, the master shard and the moments equal the model applied to the
 *     shard (padding included, which stays zero), the working shard is the rounded master, and
 *     with fp8_gather the next forward materialization's bytes and scales equal gln_quantize
 *     (rowwise) of each expert's working weight. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "fuzz.h"

enum { MAX_N = 12, GUARD = 16 };
static const uint8_t GUARD_BYTE = 0xCB;

/* ---- guarded buffers: GUARD bytes of GUARD_BYTE before and after each ----------------------- */

typedef struct {
    uint8_t *base;
    size_t bytes;
} guarded_t;

static void *guarded(fz_t *f, guarded_t *g, size_t bytes) {
    g->bytes = bytes;
    g->base = fz_alloc(f, bytes + 2 * GUARD);
    memset(g->base, GUARD_BYTE, bytes + 2 * GUARD);
    return g->base + GUARD;
}

static void check_guards(const guarded_t *g, const char *what) {
    if (!g->base) return;
    for (size_t i = 0; i < GUARD; i++)
        FZ_ASSERT(g->base[i] == GUARD_BYTE && g->base[GUARD + g->bytes + i] == GUARD_BYTE,
                  "a guard byte around %s changed", what);
}

/* ---- the model: the header's rule, one FP32 operation at a time ----------------------------- */

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* A NaN operand: the first NaN of (a, b), quieted, sign and payload kept. */
static float nan_operand(float a, float b) { return from_bits(bits(isnan(a) ? a : b) | 0x00400000u); }
/* A NaN made from non-NaN operands. */
static float made(float r) { return isnan(r) ? from_bits(0x7FFFFFFFu) : r; }

/* Each operation in its own function: one IEEE operation, never contracted with another. */
static float add(float a, float b) { return isnan(a) || isnan(b) ? nan_operand(a, b) : made(a + b); }
static float sub(float a, float b) { return isnan(a) || isnan(b) ? nan_operand(a, b) : made(a - b); }
static float mul(float a, float b) { return isnan(a) || isnan(b) ? nan_operand(a, b) : made(a * b); }
static float dvd(float a, float b) { return isnan(a) || isnan(b) ? nan_operand(a, b) : made(a / b); }
static float root(float a) { return isnan(a) ? nan_operand(a, a) : made(sqrtf(a)); }

typedef struct {
    gln_optimizer_config_t c;
    int64_t step;
    float bc1, bc2;
} rule_t;

static rule_t rule_of(const gln_optimizer_config_t *c, int64_t step) {
    rule_t r = {*c, step, 0.0f, 0.0f};
    if (c->bias_corrections) {
        r.bc1 = c->bias_corrections[0];
        r.bc2 = c->bias_corrections[1];
    } else {
        r.bc1 = (float)(1.0 - pow((double)c->beta1, (double)step));
        r.bc2 = (float)(1.0 - pow((double)c->beta2, (double)step));
    }
    return r;
}

static void model_element(const rule_t *r, float *w, float g, float *m, float *v) {
    const gln_optimizer_config_t *c = &r->c;
    const float wi = *w, wd = c->weight_decay;
    if (c->kind == GLN_OPTIMIZER_ADAM) {
        if (c->adam_w_mode == 0) g = add(g, mul(wd, wi));
        *m = add(mul(c->beta1, *m), mul(1.0f - c->beta1, g));
        *v = add(mul(c->beta2, *v), mul(mul(1.0f - c->beta2, g), g));
        const float denom = add(root(dvd(*v, r->bc2)), c->eps);
        float update = dvd(dvd(*m, r->bc1), denom);
        if (c->adam_w_mode == 1) update = add(update, mul(wd, wi));
        *w = sub(wi, mul(c->lr, update));
        return;
    }
    if (wd != 0.0f) g = add(g, mul(wd, wi));
    if (c->momentum != 0.0f) {
        *m = r->step == 1 ? g : add(mul(c->momentum, *m), g);
        g = *m;
    }
    *w = sub(wi, mul(c->lr, g));
}

static void model(const rule_t *r, float *w, const float *g, float *m, float *v, int64_t n) {
    float m0 = 0.0f, v0 = 0.0f;
    for (int64_t i = 0; i < n; i++)
        model_element(r, &w[i], g[i], m ? &m[i] : &m0, v ? &v[i] : &v0);
}

/* ---- drawing ---------------------------------------------------------------------------------- */

/* An element: fz_value's grid, or with specials NaNs with payloads and signs, signalling NaNs,
 * infinities, subnormals, extremes. */
static float draw_elem(fz_t *f) {
    if (f->specials && fz_pick(f, 8) == 0) {
        static const uint32_t S[] = {0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0xFFA00005u, 0x7F800000u,
                                     0xFF800000u, 0x00000001u, 0x80000010u, 0x007FFFFFu, 0x00000000u,
                                     0x80000000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x00800000u, 0x7FFFFFFFu,
                                     0x3F800000u};
        return from_bits(S[fz_pick(f, 16)]);
    }
    return fz_value(f);
}

/* One of a table: mostly its first `tame` entries (in range), sometimes any. */
static float draw_from(fz_t *f, const float *t, int count, int tame) {
    return t[fz_pick(f, 4) ? fz_pick(f, tame) : fz_pick(f, count)];
}

static int64_t draw_step(fz_t *f) {
    static const int64_t S[] = {1, 2, 3, 10, 1000, (int64_t)1 << 40, INT64_MAX, 0, -1, INT64_MIN};
    return fz_pick(f, 4) ? fz_int(f, 1, 20) : S[fz_pick(f, 10)];
}

static void draw_config(fz_t *f, gln_optimizer_config_t *c, float *bc) {
    static const float LR[] = {1e-3f, 0.5f, 0.0f, 1.0f, -0.0f, 1e30f, -1e-3f, NAN, INFINITY, -INFINITY};
    static const float BETA[] = {0.9f, 0.999f, 0.0f, 0.5f, 0.99999994f, -0.0f, 1.0f, -0.1f, 1.5f, NAN, INFINITY};
    static const float EPS[] = {1e-8f, 1e-3f, 1e-40f, 1.0f, 0.0f, -0.0f, -1e-8f, NAN, INFINITY};
    static const float WD[] = {0.0f, 0.01f, 0.5f, -0.0f, -0.01f, NAN, INFINITY};
    static const float MOM[] = {0.0f, 0.9f, 1.0f, 0.5f, -0.0f, -0.1f, 1.1f, NAN, INFINITY};
    static const float BC[] = {1.0f, 0.1f, 0.5f, 1e-3f, 0.999f, 1e-30f, 3e38f};
    c->kind = (gln_optimizer_kind_t)(fz_pick(f, 8) ? fz_bool(f) : fz_int(f, -1, 3));
    c->lr = draw_from(f, LR, 10, 6);
    c->beta1 = draw_from(f, BETA, 11, 6);
    c->beta2 = draw_from(f, BETA, 11, 6);
    c->eps = draw_from(f, EPS, 9, 4);
    c->weight_decay = draw_from(f, WD, 7, 4);
    c->adam_w_mode = fz_pick(f, 8) ? fz_bool(f) : (int)(int8_t)fz_u8(f);
    c->momentum = draw_from(f, MOM, 9, 5);
    if (fz_pick(f, 16) == 0) c->size = fz_bool(f) ? sizeof *c - sizeof(void *) : sizeof *c + 8;
    if (fz_pick(f, 4) == 0) {
        bc[0] = BC[fz_pick(f, 7)];
        bc[1] = BC[fz_pick(f, 7)];
        c->bias_corrections = bc;
    }
}

static int finite_in(float x, float lo, float hi, int hi_open) {
    return isfinite(x) && x >= lo && (hi_open ? x < hi : x <= hi);
}

/* The header's checks of cfg and step (the part both calls share). */
static int config_bad(const gln_optimizer_config_t *c, int64_t step) {
    if (c->size != sizeof *c) return 1;
    if (c->kind != GLN_OPTIMIZER_ADAM && c->kind != GLN_OPTIMIZER_SGD) return 1;
    if (!finite_in(c->lr, 0.0f, INFINITY, 1) || !finite_in(c->weight_decay, 0.0f, INFINITY, 1)) return 1;
    if (c->kind == GLN_OPTIMIZER_SGD && !finite_in(c->momentum, 0.0f, 1.0f, 0)) return 1;
    if (c->kind == GLN_OPTIMIZER_ADAM &&
        (!finite_in(c->beta1, 0.0f, 1.0f, 1) || !finite_in(c->beta2, 0.0f, 1.0f, 1) || !(isfinite(c->eps) && c->eps > 0.0f) ||
         (unsigned)c->adam_w_mode > 1))
        return 1;
    return step < 1;
}

/* The moments the kind reads are missing. */
static int moments_bad(const gln_optimizer_config_t *c, const float *m, const float *v) {
    if (c->kind == GLN_OPTIMIZER_ADAM) return !m || !v;
    return c->momentum != 0.0f && !m;
}

static size_t dtype_bytes(gln_dtype_t dt) { return dt == GLN_DTYPE_FP32 ? 4 : 2; }

static void round_into(void *out, gln_dtype_t dt, const float *w, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (dt == GLN_DTYPE_FP32) memcpy((uint8_t *)out + 4 * i, &w[i], 4);
        else ((uint16_t *)out)[i] = dt == GLN_DTYPE_BF16 ? gln_fp32_to_bf16(w[i]) : gln_fp32_to_fp16(w[i]);
    }
}

/* ---- gln_optimizer_step ----------------------------------------------------------------------- */

static void direct(fz_t *f, gln_context_t *ctx) {
    gln_optimizer_config_t c = GLN_OPTIMIZER_CONFIG_INIT;
    float *bc = fz_alloc(f, 2 * sizeof(float));
    draw_config(f, &c, bc);
    const int64_t step = draw_step(f);
    int64_t n = fz_int(f, 0, MAX_N), n_arg = n;
    if (f->wild && fz_pick(f, 16) == 0) {
        static const int64_t W[] = {-1, INT64_MIN, GLN_MAX_ELEMS + 1, INT64_MAX};
        n_arg = W[fz_pick(f, 4)];
        n = 4;
    }
    static const gln_dtype_t DT[] = {GLN_DTYPE_BF16, GLN_DTYPE_FP32, GLN_DTYPE_FP16, GLN_DTYPE_FP8_E4M3,
                                     (gln_dtype_t)-1, (gln_dtype_t)99};
    const gln_dtype_t wdt = DT[fz_pick(f, 4) ? fz_pick(f, 3) : fz_pick(f, 6)];
    const int wkind = fz_pick(f, 4); /* 0: no working, 1: master itself, else its own buffer */
    const int nulls = fz_pick(f, 24); /* 1..6: one argument NULL */
    const int valid_dt = wdt == GLN_DTYPE_FP32 || wdt == GLN_DTYPE_BF16 || wdt == GLN_DTYPE_FP16;

    enum { B_W, B_G, B_M, B_V, B_WORK, NB };
    guarded_t g[NB];
    memset(g, 0, sizeof g);
    const size_t fb = (size_t)n * sizeof(float), wb = (size_t)n * (valid_dt ? dtype_bytes(wdt) : 2);
    float *w = guarded(f, &g[B_W], fb), *gr = guarded(f, &g[B_G], fb);
    float *m = guarded(f, &g[B_M], fb), *v = guarded(f, &g[B_V], fb);
    void *work = wkind >= 2 ? guarded(f, &g[B_WORK], wb) : wkind == 1 ? (void *)w : NULL;
    for (int64_t i = 0; i < n; i++) {
        w[i] = draw_elem(f);
        gr[i] = draw_elem(f);
        m[i] = draw_elem(f);
        v[i] = fz_pick(f, 4) ? fabsf(draw_elem(f)) : draw_elem(f); /* a negative one sometimes */
    }
    if (wkind >= 2) memset(work, 0xA5, wb);

    float *pw = nulls == 1 ? NULL : w, *pm = nulls == 3 ? NULL : m, *pv = nulls == 4 ? NULL : v;
    const float *pg = nulls == 2 ? NULL : gr;
    if (wkind == 1 && nulls == 1) work = NULL; /* "master itself" is then no working copy */
    int bad = nulls == 5 || nulls == 6 || config_bad(&c, step) || n_arg < 0 || n_arg > GLN_MAX_ELEMS ||
              (work && !valid_dt);
    if (!bad && n_arg > 0)
        bad = !pw || !pg || moments_bad(&c, pm, pv) || (work == (void *)w && wdt != GLN_DTYPE_FP32);

    /* the wanted state: the inputs (refused) or the model's (accepted) */
    uint8_t *want[NB];
    for (int b = 0; b < NB; b++) {
        want[b] = g[b].base ? fz_alloc(f, g[b].bytes + 2 * GUARD) : NULL;
        if (want[b]) memcpy(want[b], g[b].base, g[b].bytes + 2 * GUARD);
    }
    if (!bad) {
        rule_t r = rule_of(&c, step);
        float *mw = (float *)(want[B_W] + GUARD);
        float *mm = c.kind == GLN_OPTIMIZER_ADAM || c.momentum != 0.0f ? (float *)(want[B_M] + GUARD) : NULL;
        float *mv = c.kind == GLN_OPTIMIZER_ADAM ? (float *)(want[B_V] + GUARD) : NULL;
        model(&r, mw, gr, mm, mv, n_arg);
        if (wkind >= 2) round_into(want[B_WORK] + GUARD, wdt, mw, n_arg);
    }

    gln_status_t st = gln_optimizer_step(nulls == 5 ? NULL : ctx, nulls == 6 ? NULL : &c, step, pw, pg, pm, pv, n_arg,
                                         work, wdt);
    fz_status(st, "gln_optimizer_step");
    FZ_ASSERT(bad ? st == GLN_STATUS_INVALID_ARGUMENT : st == GLN_STATUS_SUCCESS,
              "gln_optimizer_step returned %s, expected %s (kind %d size %zu lr %g b1 %g b2 %g eps %g wd %g "
              "awm %d mom %g step %lld n %lld working %d dtype %d nulls %d): %s",
              gln_status_string(st), bad ? "INVALID_ARGUMENT" : "SUCCESS", (int)c.kind, c.size, (double)c.lr,
              (double)c.beta1, (double)c.beta2, (double)c.eps, (double)c.weight_decay, c.adam_w_mode,
              (double)c.momentum, (long long)step, (long long)n_arg, wkind, (int)wdt, nulls, gln_last_error());
    static const char *NAME[NB] = {"master", "grad", "exp_avg", "exp_avg_sq", "working"};
    for (int b = 0; b < NB; b++) {
        check_guards(&g[b], NAME[b]);
        if (!want[b]) continue;
        for (size_t i = 0; i < g[b].bytes; i++)
            FZ_ASSERT(g[b].base[GUARD + i] == want[b][GUARD + i], "%s byte %zu is %02x, %s %02x", NAME[b], i,
                      g[b].base[GUARD + i], bad ? "written by a refused call, was" : "the model's",
                      want[b][GUARD + i]);
    }
}

/* ---- gln_sharded_weights_optimizer_step ------------------------------------------------------- */

typedef struct {
    gln_sharded_weights_config_t c;
    gln_sharded_weights_t *sw;
    float *master, *grad;
    void *working;
    int64_t len, stride, rows;
} group_t;

/* A tiny group: plain, fp8_gather per-tensor, or a quantized shard per-tensor / 128x128 / MXFP8. */
static int make_group(fz_t *f, gln_context_t *ctx, gln_comm_t *comm, group_t *g) {
    gln_sharded_weights_config_t *c = &g->c;
    *c = (gln_sharded_weights_config_t)GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    const int form = fz_pick(f, 5);
    c->num_experts = (int32_t)fz_int(f, 1, 2);
    c->out_features = fz_int(f, 1, 5);
    c->in_features = form == 4 ? 128 : fz_int(f, 1, 6);
    c->working_dtype = fz_bool(f) ? GLN_DTYPE_FP32 : GLN_DTYPE_BF16;
    c->requires_grad = fz_pick(f, 8) ? 1 : 0;
    c->fp8_gather = form >= 1;
    c->quantized_shard = form >= 2;
    c->fp8_quant.mode = form == 3 ? GLN_SCALING_BLOCK_2D : form == 4 ? GLN_SCALING_MXFP8_1D : GLN_SCALING_TENSOR;
    c->fp8_quant.fp8_dtype = fz_bool(f) ? GLN_DTYPE_FP8_E4M3 : GLN_DTYPE_FP8_E5M2;
    c->fp8_quant.power_2_scale = fz_bool(f);
    c->fp8_quant.amax_nan_propagate = fz_bool(f);
    g->sw = NULL;
    if (fz_status(gln_sharded_weights_create(ctx, comm, c, &g->sw), "gln_sharded_weights_create") != GLN_STATUS_SUCCESS)
        fz_fail("create refused a valid group: %s", gln_last_error());
    g->rows = form == 3 ? (c->out_features + 127) / 128 * 128 : form == 4 ? (c->out_features + 31) / 32 * 32
                                                                           : c->out_features;
    g->stride = g->rows * c->in_features;
    const int64_t n = c->num_experts * c->out_features * c->in_features;
    float *full = fz_alloc(f, (size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) full[i] = draw_elem(f);
    FZ_ASSERT(gln_sharded_weights_load_full(g->sw, full) == GLN_STATUS_SUCCESS, "load_full: %s", gln_last_error());
    int64_t off = -1;
    FZ_ASSERT(gln_sharded_weights_shard(g->sw, &g->master, &g->grad, &g->len, &off) == GLN_STATUS_SUCCESS && off == 0,
              "shard: %s", gln_last_error());
    int64_t wlen = -1;
    FZ_ASSERT(gln_sharded_weights_working_shard(g->sw, &g->working, NULL, &wlen) == GLN_STATUS_SUCCESS && wlen == g->len,
              "working_shard: %s", gln_last_error());
    return 1;
}

/* Element i of the shard is a real weight (not padding). */
static int real(const group_t *g, int64_t i) {
    return i < g->c.num_experts * g->stride && i % g->stride < g->c.out_features * g->c.in_features;
}

/* The next forward materialization: each expert's bytes and scales are gln_quantize's of its
 * working weight (fp8_gather), or the working weight itself. */
static void check_forward(fz_t *f, gln_context_t *ctx, const group_t *g) {
    const gln_sharded_weights_config_t *c = &g->c;
    const gln_dist_weights_t *p = gln_sharded_weights_protocol(g->sw);
    gln_tensor_t w[2];
    memset(w, 0, sizeof w);
    FZ_ASSERT(fz_status(p->materialize_forward(p->impl, w), "materialize_forward") == GLN_STATUS_SUCCESS,
              "materialize_forward refused: %s", gln_last_error());
    const size_t eb = dtype_bytes(c->working_dtype);
    for (int e = 0; e < c->num_experts; e++) {
        const uint8_t *src = (const uint8_t *)g->working + (size_t)(e * g->stride) * eb;
        if (!c->fp8_gather) {
            FZ_ASSERT(memcmp(w[e].data, src, (size_t)(c->out_features * c->in_features) * eb) == 0,
                      "expert %d's gathered working weight differs from the working shard", e);
            continue;
        }
        gln_quant_config_t q = c->fp8_quant;
        q.rowwise = 1;
        q.columnwise = 0;
        gln_quant_layout_t lay;
        FZ_ASSERT(gln_quant_layout(q.mode, q.fp8_dtype, c->out_features, c->in_features, &lay) == GLN_STATUS_SUCCESS,
                  "gln_quant_layout: %s", gln_last_error());
        gln_tensor_t in = gln_tensor_make(c->working_dtype, c->out_features, c->in_features, (void *)src);
        gln_tensor_t out = gln_tensor_make(q.fp8_dtype, c->out_features, c->in_features, fz_alloc(f, lay.data_bytes));
        out.scaling = q.mode;
        out.scale_inv = fz_alloc(f, lay.scale_bytes);
        memset(out.scale_inv, 0, lay.scale_bytes);
        out.amax = fz_alloc(f, sizeof(float));
        out.scale = fz_alloc(f, sizeof(float));
        FZ_ASSERT(gln_quantize(ctx, &q, &in, &out) == GLN_STATUS_SUCCESS, "gln_quantize: %s", gln_last_error());
        FZ_ASSERT(memcmp(w[e].data, out.data, lay.data_bytes) == 0,
                  "expert %d's forward FP8 bytes differ from gln_quantize of its working weight (mode %d)", e,
                  (int)q.mode);
        FZ_ASSERT(memcmp(w[e].scale_inv, out.scale_inv, lay.scale_bytes) == 0,
                  "expert %d's forward scales differ from gln_quantize of its working weight (mode %d)", e,
                  (int)q.mode);
    }
    FZ_ASSERT(p->release(p->impl, w) == GLN_STATUS_SUCCESS, "release: %s", gln_last_error());
}

static void sharded(fz_t *f, gln_context_t *ctx, gln_comm_t *comm) {
    group_t g;
    make_group(f, ctx, comm, &g);
    const int64_t len = g.len;
    if (g.grad)
        for (int64_t i = 0; i < len; i++) g.grad[i] = real(&g, i) ? draw_elem(f) : 0.0f;
    gln_optimizer_config_t c = GLN_OPTIMIZER_CONFIG_INIT;
    float *bc = fz_alloc(f, 2 * sizeof(float));
    draw_config(f, &c, bc);
    const int64_t step = draw_step(f);
    guarded_t gm, gv;
    float *m = guarded(f, &gm, (size_t)len * sizeof(float)), *v = guarded(f, &gv, (size_t)len * sizeof(float));
    for (int64_t i = 0; i < len; i++) {
        m[i] = real(&g, i) ? draw_elem(f) : 0.0f;
        v[i] = real(&g, i) ? fabsf(draw_elem(f)) : 0.0f;
    }
    const int nulls = fz_pick(f, 16); /* 1: exp_avg, 2: exp_avg_sq, 3: sw NULL */
    const int prefetch = fz_pick(f, 8) == 0;
    if (prefetch)
        FZ_ASSERT(gln_sharded_weights_prefetch(g.sw, 0) == GLN_STATUS_SUCCESS, "prefetch: %s", gln_last_error());
    float *pm = nulls == 1 ? NULL : m, *pv = nulls == 2 ? NULL : v;

    gln_status_t want = GLN_STATUS_SUCCESS;
    if (nulls == 3 || config_bad(&c, step) || moments_bad(&c, pm, pv)) want = GLN_STATUS_INVALID_ARGUMENT;
    else if (!g.c.requires_grad || prefetch) want = GLN_STATUS_INVALID_STATE;

    const size_t fb = (size_t)len * sizeof(float), wb = (size_t)len * dtype_bytes(g.c.working_dtype);
    float *w_want = fz_alloc(f, fb), *m_want = fz_alloc(f, fb), *v_want = fz_alloc(f, fb);
    float *grad_was = g.grad ? fz_alloc(f, fb) : NULL;
    void *work_want = fz_alloc(f, wb);
    memcpy(w_want, g.master, fb);
    memcpy(m_want, m, fb);
    memcpy(v_want, v, fb);
    if (grad_was) memcpy(grad_was, g.grad, fb);
    memcpy(work_want, g.working, wb);
    if (want == GLN_STATUS_SUCCESS) {
        rule_t r = rule_of(&c, step);
        model(&r, w_want, g.grad, c.kind == GLN_OPTIMIZER_ADAM || c.momentum != 0.0f ? m_want : NULL,
              c.kind == GLN_OPTIMIZER_ADAM ? v_want : NULL, len);
        round_into(work_want, g.c.working_dtype, w_want, len);
    }

    gln_status_t st = gln_sharded_weights_optimizer_step(nulls == 3 ? NULL : g.sw, &c, step, pm, pv);
    fz_status(st, "gln_sharded_weights_optimizer_step");
    FZ_ASSERT(st == want, "gln_sharded_weights_optimizer_step returned %s, expected %s (kind %d step %lld "
              "requires_grad %d prefetch %d nulls %d): %s", gln_status_string(st), gln_status_string(want),
              (int)c.kind, (long long)step, g.c.requires_grad, prefetch, nulls, gln_last_error());
    const char *why = want == GLN_STATUS_SUCCESS ? "from the model" : "written by a refused call";
    FZ_ASSERT(memcmp(g.master, w_want, fb) == 0, "master shard differs (%s)", why);
    FZ_ASSERT(memcmp(m, m_want, fb) == 0, "exp_avg differs (%s)", why);
    FZ_ASSERT(memcmp(v, v_want, fb) == 0, "exp_avg_sq differs (%s)", why);
    FZ_ASSERT(!grad_was || memcmp(g.grad, grad_was, fb) == 0, "main_grad changed");
    FZ_ASSERT(memcmp(g.working, work_want, wb) == 0, "working shard differs (%s)", why);
    check_guards(&gm, "exp_avg");
    check_guards(&gv, "exp_avg_sq");
    check_forward(f, ctx, &g); /* consumes the prefetch too */
    FZ_ASSERT(gln_sharded_weights_destroy(g.sw) == GLN_STATUS_SUCCESS, "destroy: %s", gln_last_error());
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_t f = fz_begin(data, size);
    gln_context_t *ctx = fz_context();
    if (fz_pick(&f, 4) != 3) {
        direct(&f, ctx);
    } else {
        gln_comm_t *comm = NULL;
        FZ_ASSERT(gln_comm_create_self(NULL, &comm) == GLN_STATUS_SUCCESS, "comm_create_self: %s", gln_last_error());
        sharded(&f, ctx, comm);
        FZ_ASSERT(gln_comm_destroy(comm) == GLN_STATUS_SUCCESS, "comm_destroy");
    }
    fz_free_all();
    return 0;
}

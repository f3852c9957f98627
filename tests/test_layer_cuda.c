/* The grouped linear layer on the CUDA backend against the same layer on the CPU backend.
 *
 * Skips (exit 77) unless gln_backend_available(GLN_BACKEND_CUDA).  For every recipe (NONE bf16,
 * FP8_DELAYED, FP8_CURRENT, MXFP8, FP8_BLOCK with power-of-two and with FP32 block scales) and both
 * paths (split with host splits; grouped with the splits in backend memory), one layer of 4
 * experts [K_out 256, K_in 128] with bias and fused FP32 main_grad is built on a CPU context and
 * on a CUDA context from the same caller-supplied parameters (copied into device memory with
 * gln_memcpy), and two training steps run on both: step 0 with microbatch FIRST (main_grad
 * overwritten), then weights_updated and step 1 with microbatch UNSET (weights re-quantized,
 * main_grad accumulated).  Three split sets (k_split_sets): {0, 5, 17, 129}, {1, 1000, 0, 3} and
 * one expert with every row, {0, 0, 1155, 0} — empty experts and counts that are not multiples
 * of 16, whose FP8 wgrads read zero-padded copies on the tensor cores.
 *
 * Checks per step:
 *   - quantization, bit for bit: the layer's quantized x, W and dy cannot be observed directly,
 *     so (a) the delayed-scaling state (scales and amax history, forward and backward) of the
 *     two layers must be bitwise equal, and the recorded amaxes must equal those of our own
 *     quantization; (b) we quantize x, dy (gln_grouped_quantize) and W (gln_quantize) ourselves
 *     with the recipe's configuration on both backends and compare every byte;
 *   - y, dx, main_grad: CUDA vs CPU within the GEMM tolerances of cuda_compare.h (below),
 *     and the CPU result vs a float64 reference computed from our own dequantized operands;
 *   - bias gradients: bit for bit (both backends sum dy in FP32 in row order, one rounding);
 *   - outputs are poisoned (NaN) before each run, so unwritten elements fail. */
#include <stdlib.h>
#include <string.h>

#include "cuda_compare.h" /* the GEMM tolerances */
#include "harness.h"
#include "tensor/tensor.h"

/* ---- tolerances (tests/harness/cuda_compare.h's GLN_CMP_GEMM_*, for each GEMM kind) ----------
 * Both backends multiply the same exactly-represented operand values with FP32 accumulation in a
 * different order: |cuda - cpu| <= GEMM_OUT_ULPS ulps of the output dtype (a rounding boundary
 * straddled, plus one of margin) + 2·(k + 2)·u·S, S = Σ|a·b| (+ |bias| + |old D|), u = 2^-24.
 * Per-tensor FP8 GEMMs on Hopper accumulate in the tensor cores with ~14-bit precision between
 * FP32 promotions: add GEMM_FP8_ACC_REL·S (2^-10; differences seen reach 2^-14.7·S); so do the
 * FP8 block-scaled GEMMs (CUTLASS promotes once per 128-wide K block).  MXFP8 GEMMs run as bf16
 * GEMMs on exactly dequantized operands: no extra term.
 * The CPU result against the float64 reference of the same dequantized operands: the same bound
 * without the FP8 term. */

#define NE 4
#define KIN 128
#define KOUT 256
#define STEPS 2
#define HIST 4
/* The split sets every recipe and path runs on: an empty expert and unaligned counts; 1 and 1000
 * rows; one expert with every row (1155, not a multiple of 16).  The current one is k_splits. */
static const int64_t k_split_sets[][NE] = {{0, 5, 17, 129}, {1, 1000, 0, 3}, {0, 0, 1155, 0}};
#define NSETS (sizeof k_split_sets / sizeof k_split_sets[0])
static const int64_t *k_splits = k_split_sets[0];
static int64_t g_rows = 151; /* Σ k_splits */
#define ROWS g_rows

static gln_context_t *g_cpu, *g_cu;

/* ---- small helpers ------------------------------------------------------------------------- */

static void *host_rand(gln_rng_t *rng, gln_dtype_t dt, size_t n, double sigma) {
    void *h = calloc(n ? n : 1, gln_dtype_size(dt));
    for (size_t i = 0; i < n; i++) gln_store(h, dt, i, sigma * gln_rng_normal(rng));
    return h;
}

static void *poisoned(gln_dtype_t dt, size_t n) {
    void *h = malloc((n ? n : 1) * gln_dtype_size(dt));
    gln_poison(h, dt, n);
    return h;
}

/* A backend buffer holding a copy of host bytes. */
static void *upload(gln_context_t *ctx, const void *h, size_t bytes) {
    void *d = NULL;
    CHECK_OK(gln_malloc(ctx, bytes ? bytes : 1, &d));
    if (bytes) CHECK_OK(gln_memcpy(ctx, d, h, bytes, GLN_COPY_HOST_TO_BACKEND));
    return d;
}

static void *download(gln_context_t *ctx, const void *d, size_t bytes) {
    void *h = calloc(bytes ? bytes : 1, 1);
    if (bytes) CHECK_OK(gln_memcpy(ctx, h, d, bytes, GLN_COPY_BACKEND_TO_HOST));
    return h;
}

static void check_same(gln_context_t *ctx, const char *what, const void *dev, const void *host, size_t bytes) {
    void *h = download(ctx, dev, bytes);
    gln_check_bitwise(what, h, host, bytes);
    free(h);
}

static int64_t row_start(int32_t i) {
    int64_t r = 0;
    for (int32_t j = 0; j < i; j++) r += k_splits[j];
    return r;
}

/* ---- the recipe's quantizer configurations (TransformerEngine's recipes, docs/numerics.md; written here independently of src/layer) */

typedef struct variant {
    const char *name;
    gln_recipe_t recipe;
    int block_fp32;
} variant_t;

static gln_quant_config_t role_cfg(const variant_t *v, int role /* 0 x, 1 W, 2 dy */) {
    gln_quant_config_t c = GLN_QUANT_CONFIG_INIT;
    c.mode = v->recipe == GLN_RECIPE_MXFP8       ? GLN_SCALING_MXFP8_1D
             : v->recipe == GLN_RECIPE_FP8_BLOCK ? (role == 1 ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D)
                                                  : GLN_SCALING_TENSOR;
    /* the config default (RECIPE_DEFAULT): HYBRID for per-tensor recipes, E4M3 for block ones */
    int hybrid = v->recipe == GLN_RECIPE_FP8_DELAYED || v->recipe == GLN_RECIPE_FP8_CURRENT;
    c.fp8_dtype = role == 2 && hybrid ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
    c.rowwise = c.columnwise = 1;
    c.delayed = v->recipe == GLN_RECIPE_FP8_DELAYED;
    c.power_2_scale = v->recipe == GLN_RECIPE_FP8_BLOCK && !v->block_fp32;
    return c;
}

static double acc_rel_of(const variant_t *v) {
    /* FP8 block scaling runs on the FP8 tensor cores too (CUTLASS's block-scaled kernels) */
    return v->recipe == GLN_RECIPE_FP8_DELAYED || v->recipe == GLN_RECIPE_FP8_CURRENT ||
                   v->recipe == GLN_RECIPE_FP8_BLOCK
               ? GLN_CMP_GEMM_FP8_ACC_REL
               : 0.0;
}

/* ---- quantizing ourselves on both backends ------------------------------------------------- */

/* Host buffers of a quantized grouped tensor [rows, cols] with host splits. */
typedef struct hgroup {
    gln_grouped_tensor_t g;
    size_t nd, sb, csb;
} hgroup_t;

static void hgroup_free(hgroup_t *h) {
    gln_tensor_t *p = &h->g.packed;
    free(p->data), free(p->col_data), free(p->scale_inv), free(p->col_scale_inv), free(p->scale), free(p->amax);
}

/* Allocate a quantized grouped tensor in `ctx` (poisoned), scales[N] preset for delayed. */
static hgroup_t qgroup_alloc(gln_context_t *ctx, const gln_quant_config_t *cfg, int64_t cols, const float *scales) {
    hgroup_t h;
    int64_t ro[NE + 1], co[NE + 1];
    CHECK_OK(gln_grouped_scale_offsets(cfg->mode, NE, k_splits, cols, ro, co));
    const size_t es = gln_scale_elem_size(cfg->mode);
    h.nd = (size_t)ROWS * (size_t)cols, h.sb = (size_t)ro[NE] * es, h.csb = (size_t)co[NE] * es;
    gln_tensor_t p = {cfg->fp8_dtype, ROWS, cols, NULL, cfg->mode, NULL, NULL, NULL, NULL, NULL};
    void *pd = poisoned(GLN_DTYPE_INT32, h.nd + h.sb + h.csb + 64);
    p.data = upload(ctx, pd, h.nd), p.col_data = upload(ctx, pd, h.nd);
    p.scale_inv = upload(ctx, pd, h.sb), p.col_scale_inv = upload(ctx, pd, h.csb);
    if (cfg->mode == GLN_SCALING_TENSOR) {
        float init[NE];
        for (int i = 0; i < NE; i++) init[i] = scales ? scales[i] : 1.0f;
        p.scale = upload(ctx, init, sizeof init);
        memset(init, 0, sizeof init);
        p.amax = upload(ctx, init, sizeof init);
    }
    free(pd);
    gln_grouped_tensor_t g = {NE, k_splits, 0, p};
    h.g = g;
    return h;
}

static void qgroup_free_dev(gln_context_t *ctx, hgroup_t *h) {
    gln_tensor_t *p = &h->g.packed;
    void *bufs[] = {p->data, p->col_data, p->scale_inv, p->col_scale_inv, p->scale, p->amax};
    for (size_t i = 0; i < 6; i++)
        if (bufs[i]) CHECK_OK(gln_free(ctx, bufs[i]));
}

/* gln_grouped_quantize of host x [ROWS, cols] on both backends; every byte compared; returns the
 * CPU result (host memory). */
static hgroup_t quantize_both_grouped(const gln_quant_config_t *cfg, const void *x, int64_t cols,
                                      const float *scales, const char *what) {
    hgroup_t h = qgroup_alloc(g_cpu, cfg, cols, scales), d = qgroup_alloc(g_cu, cfg, cols, scales);
    const size_t xb = (size_t)ROWS * (size_t)cols * 2;
    gln_grouped_tensor_t hin = {NE, k_splits, 0, gln_tensor_make(GLN_DTYPE_BF16, ROWS, cols, (void *)x)};
    void *xd = upload(g_cu, x, xb);
    gln_grouped_tensor_t din = {NE, k_splits, 0, gln_tensor_make(GLN_DTYPE_BF16, ROWS, cols, xd)};
    CHECK_OK(gln_grouped_quantize(g_cpu, cfg, &hin, &h.g));
    CHECK_OK(gln_grouped_quantize(g_cu, cfg, &din, &d.g));
    char name[260];
    const gln_tensor_t *hp = &h.g.packed, *dp = &d.g.packed;
    snprintf(name, sizeof name, "%s data", what);
    check_same(g_cu, name, dp->data, hp->data, h.nd);
    snprintf(name, sizeof name, "%s col_data", what);
    check_same(g_cu, name, dp->col_data, hp->col_data, h.nd);
    snprintf(name, sizeof name, "%s scale_inv", what);
    check_same(g_cu, name, dp->scale_inv, hp->scale_inv, h.sb);
    snprintf(name, sizeof name, "%s col_scale_inv", what);
    check_same(g_cu, name, dp->col_scale_inv, hp->col_scale_inv, h.csb);
    if (hp->amax) {
        snprintf(name, sizeof name, "%s amax[N]", what);
        check_same(g_cu, name, dp->amax, hp->amax, NE * sizeof(float));
        snprintf(name, sizeof name, "%s scale[N]", what);
        check_same(g_cu, name, dp->scale, hp->scale, NE * sizeof(float));
    }
    CHECK_OK(gln_free(g_cu, xd));
    qgroup_free_dev(g_cu, &d);
    return h;
}

/* One weight [KOUT, KIN] quantized on both backends (both copies), compared; returns the CPU's. */
static gln_tensor_t quantize_both_weight(const gln_quant_config_t *cfg, const void *w, float scale, const char *what) {
    gln_quant_layout_t l;
    CHECK_OK(gln_quant_layout(cfg->mode, cfg->fp8_dtype, KOUT, KIN, &l));
    gln_tensor_t h = {cfg->fp8_dtype, KOUT, KIN, malloc(l.data_bytes), cfg->mode, malloc(l.scale_bytes),
                      malloc(l.col_data_bytes), malloc(l.col_scale_bytes), NULL, NULL};
    float amax0 = 0.0f;
    gln_tensor_t d = h;
    d.data = upload(g_cu, h.data, l.data_bytes), d.scale_inv = upload(g_cu, h.scale_inv, l.scale_bytes);
    d.col_data = upload(g_cu, h.col_data, l.col_data_bytes);
    d.col_scale_inv = upload(g_cu, h.col_scale_inv, l.col_scale_bytes);
    if (cfg->mode == GLN_SCALING_TENSOR) {
        h.scale = malloc(4), h.amax = malloc(4);
        *h.scale = scale, *h.amax = amax0;
        d.scale = upload(g_cu, &scale, 4), d.amax = upload(g_cu, &amax0, 4);
    }
    gln_tensor_t wh = gln_tensor_make(GLN_DTYPE_BF16, KOUT, KIN, (void *)w);
    void *wd = upload(g_cu, w, (size_t)KOUT * KIN * 2);
    gln_tensor_t wt = gln_tensor_make(GLN_DTYPE_BF16, KOUT, KIN, wd);
    CHECK_OK(gln_quantize(g_cpu, cfg, &wh, &h));
    CHECK_OK(gln_quantize(g_cu, cfg, &wt, &d));
    char name[260];
    snprintf(name, sizeof name, "%s data", what);
    check_same(g_cu, name, d.data, h.data, l.data_bytes);
    snprintf(name, sizeof name, "%s col_data", what);
    check_same(g_cu, name, d.col_data, h.col_data, l.col_data_bytes);
    snprintf(name, sizeof name, "%s scale_inv", what);
    check_same(g_cu, name, d.scale_inv, h.scale_inv, l.scale_bytes);
    snprintf(name, sizeof name, "%s col_scale_inv", what);
    check_same(g_cu, name, d.col_scale_inv, h.col_scale_inv, l.col_scale_bytes);
    if (h.amax) {
        snprintf(name, sizeof name, "%s amax", what);
        check_same(g_cu, name, d.amax, h.amax, 4);
    }
    void *bufs[] = {wd, d.data, d.scale_inv, d.col_data, d.col_scale_inv, d.scale, d.amax};
    for (size_t i = 0; i < 7; i++)
        if (bufs[i]) CHECK_OK(gln_free(g_cu, bufs[i]));
    return h;
}

/* Logical FP32 values [rows, cols] of one copy of a quantized host tensor (CPU dequantize). */
static double *deq(const gln_tensor_t *q, int columnwise) {
    const size_t n = (size_t)q->rows * (size_t)q->cols;
    float *f = calloc(n ? n : 1, sizeof(float));
    gln_tensor_t o = gln_tensor_make(GLN_DTYPE_FP32, q->rows, q->cols, f);
    CHECK_OK(gln_dequantize(g_cpu, q, columnwise, &o));
    double *v = calloc(n ? n : 1, sizeof(double));
    for (size_t i = 0; i < n; i++) v[i] = f[i];
    free(f);
    return v;
}

static double *bf16_values(const void *h, size_t n) {
    double *v = calloc(n ? n : 1, sizeof(double));
    for (size_t i = 0; i < n; i++) v[i] = gln_load(h, GLN_DTYPE_BF16, i);
    return v;
}

/* ---- operand values of one step (what the GEMMs multiply) ---------------------------------- */

typedef struct operands {
    double *xr[NE], *xc[NE];    /* x_i rowwise (fprop) / columnwise (wgrad) [m_i, KIN] */
    double *wr[NE], *wc[NE];    /* W_i rowwise (fprop) / columnwise (dgrad) [KOUT, KIN] */
    double *dyr[NE], *dyc[NE];  /* dy_i rowwise (dgrad) / columnwise (wgrad) [m_i, KOUT] */
} operands_t;

static void operands_free(operands_t *o) {
    for (int i = 0; i < NE; i++) {
        free(o->xr[i]), free(o->wr[i]), free(o->dyr[i]);
        if (o->xc[i] != o->xr[i]) free(o->xc[i]);
        if (o->wc[i] != o->wr[i]) free(o->wc[i]);
        if (o->dyc[i] != o->dyr[i]) free(o->dyc[i]);
    }
}

/* Values of a grouped quantized tensor's members, both copies. */
static void group_values(const hgroup_t *h, double **row, double **col) {
    for (int32_t i = 0; i < NE; i++) {
        gln_tensor_t m;
        CHECK_OK(gln_grouped_member(&h->g, i, &m));
        row[i] = deq(&m, 0);
        col[i] = deq(&m, 1);
    }
}

/* Delayed-scaling state of a layer (host pointers into the layer). */
typedef struct dstate {
    float *scale, *hist;
    int32_t slots, len;
} dstate_t;

static dstate_t state_of(gln_grouped_linear_t *L, int backward) {
    dstate_t s;
    CHECK_OK(gln_grouped_linear_fp8_state(L, backward, &s.scale, &s.hist, &s.slots, &s.len));
    return s;
}

/* Quantize x, dy and W ourselves on both backends with the scales the layer will use, compare
 * them, and collect the values the GEMMs multiply.  amax_x / amax_w / amax_dy: per-expert
 * amaxes of our quantization (delayed scaling). */
static void step_operands(const variant_t *v, gln_grouped_linear_t *Lcpu, const void *x, const void *dy,
                          void *const *w, operands_t *o, float *amax_x, float *amax_w, float *amax_dy,
                          const char *label) {
    memset(o, 0, sizeof *o);
    if (v->recipe == GLN_RECIPE_NONE) {
        for (int i = 0; i < NE; i++) {
            const size_t r0 = (size_t)row_start(i), mi = (size_t)k_splits[i];
            o->xr[i] = o->xc[i] = bf16_values((const uint16_t *)x + r0 * KIN, mi * KIN);
            o->dyr[i] = o->dyc[i] = bf16_values((const uint16_t *)dy + r0 * KOUT, mi * KOUT);
            o->wr[i] = o->wc[i] = bf16_values(w[i], (size_t)KOUT * KIN);
        }
        return;
    }
    float sx[NE], sw[NE], sdy[NE];
    for (int i = 0; i < NE; i++) sx[i] = sw[i] = sdy[i] = 1.0f;
    if (v->recipe == GLN_RECIPE_FP8_DELAYED) {
        dstate_t f = state_of(Lcpu, 0), b = state_of(Lcpu, 1);
        for (int i = 0; i < NE; i++) sx[i] = f.scale[3 * i], sw[i] = f.scale[3 * i + 1], sdy[i] = b.scale[2 * i];
    }
    char what[200];
    const gln_quant_config_t cx = role_cfg(v, 0), cw = role_cfg(v, 1), cg = role_cfg(v, 2);
    snprintf(what, sizeof what, "%s: own quantization of x", label);
    hgroup_t qx = quantize_both_grouped(&cx, x, KIN, sx, what);
    snprintf(what, sizeof what, "%s: own quantization of dy", label);
    hgroup_t qdy = quantize_both_grouped(&cg, dy, KOUT, sdy, what);
    group_values(&qx, o->xr, o->xc);
    group_values(&qdy, o->dyr, o->dyc);
    for (int i = 0; i < NE; i++) {
        if (qx.g.packed.amax) amax_x[i] = qx.g.packed.amax[i], amax_dy[i] = qdy.g.packed.amax[i];
        snprintf(what, sizeof what, "%s: own quantization of W[%d]", label, i);
        gln_tensor_t qw = quantize_both_weight(&cw, w[i], sw[i], what);
        o->wr[i] = deq(&qw, 0);
        o->wc[i] = deq(&qw, 1);
        if (qw.amax) amax_w[i] = *qw.amax;
        free(qw.data), free(qw.col_data), free(qw.scale_inv), free(qw.col_scale_inv), free(qw.scale), free(qw.amax);
    }
    hgroup_free(&qx);
    hgroup_free(&qdy);
}

/* ---- comparison of one output element ------------------------------------------------------ */

typedef struct cmp {
    const char *what;
    int bad;
} cmp_t;

/* cuda vs cpu within tol_pair, cpu vs the float64 reference within tol_ref. */
static void cmp_elem(cmp_t *c, size_t idx, double cuda, double cpu, double ref, double tol_pair, double tol_ref) {
    const int ok_pair = fabs(cuda - cpu) <= tol_pair || (isnan(cuda) && isnan(cpu));
    const int ok_ref = fabs(cpu - ref) <= tol_ref;
    if (ok_pair && ok_ref) return;
    if (c->bad++ < 5)
        CHECK_MSG(0, "%s[%zu]: cuda %.9g cpu %.9g ref %.9g (tol cuda-cpu %.3g, cpu-ref %.3g)", c->what, idx, cuda, cpu,
                  ref, tol_pair, tol_ref);
}

static void cmp_done(cmp_t *c) {
    if (c->bad > 5) CHECK_MSG(0, "%s: %d elements out of tolerance", c->what, c->bad);
}

/* ---- the two sides ------------------------------------------------------------------------- */

typedef struct side {
    gln_context_t *ctx;
    gln_grouped_linear_t *L;
    void *w[NE], *b[NE];
    float *mg[NE];
    int64_t *splits; /* backend copy (grouped path) */
} side_t;

static void side_create(side_t *s, gln_context_t *ctx, const variant_t *v, gln_path_t path, void *const *wh,
                        void *const *bh) {
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    float *mg0 = poisoned(GLN_DTYPE_FP32, (size_t)KOUT * KIN); /* FIRST must overwrite it */
    for (int i = 0; i < NE; i++) {
        s->w[i] = upload(ctx, wh[i], (size_t)KOUT * KIN * 2);
        s->b[i] = upload(ctx, bh[i], (size_t)KOUT * 2);
        s->mg[i] = upload(ctx, mg0, (size_t)KOUT * KIN * 4);
    }
    free(mg0);
    s->splits = upload(ctx, k_splits, NE * sizeof *k_splits);
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = NE;
    c.in_features = KIN;
    c.out_features = KOUT;
    c.bias = 1;
    c.recipe = v->recipe;
    c.block_fp32_scales = v->block_fp32;
    c.path = path;
    c.fuse_wgrad_accumulation = 1;
    c.amax_history_len = HIST;
    c.params.weights = s->w;
    c.params.biases = s->b;
    c.params.main_grads = s->mg;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &s->L));
}

static void side_destroy(side_t *s) {
    if (s->L) CHECK_OK(gln_grouped_linear_destroy(s->L));
    for (int i = 0; i < NE; i++) {
        CHECK_OK(gln_free(s->ctx, s->w[i]));
        CHECK_OK(gln_free(s->ctx, s->b[i]));
        CHECK_OK(gln_free(s->ctx, s->mg[i]));
    }
    CHECK_OK(gln_free(s->ctx, s->splits));
}

/* Forward + backward of one step on one side; y, dx, main_grad and db downloaded to host. */
typedef struct results {
    void *y, *dx, *db[NE];
    float *mg[NE];
} results_t;

static void side_step(side_t *s, gln_path_t path, gln_microbatch_t mb, const void *x, const void *dy,
                      results_t *r) {
    const size_t xb = (size_t)ROWS * KIN * 2, yb = (size_t)ROWS * KOUT * 2;
    void *poison_y = poisoned(GLN_DTYPE_BF16, (size_t)ROWS * KOUT), *poison_x = poisoned(GLN_DTYPE_BF16, (size_t)ROWS * KIN);
    void *xd = upload(s->ctx, x, xb), *dyd = upload(s->ctx, dy, yb);
    void *yd = upload(s->ctx, poison_y, yb), *dxd = upload(s->ctx, poison_x, xb);
    gln_tensor_t xt = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KIN, xd), yt = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KOUT, yd);
    gln_tensor_t dyt = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KOUT, dyd), dxt = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KIN, dxd);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &xt;
    a.y = &yt;
    a.microbatch = mb;
    a.input_requires_grad = 1;
    a.splits_on_backend = path == GLN_PATH_GROUPED;
    a.m_splits = a.splits_on_backend ? s->splits : k_splits;
    gln_grouped_linear_saved_t *saved = NULL;
    CHECK_OK(gln_grouped_linear_forward(s->L, &a, &saved));
    if (saved) {
        CHECK_OK(gln_grouped_linear_backward(saved, &dyt, &dxt));
        CHECK_OK(gln_grouped_linear_saved_release(saved));
    }
    CHECK_OK(gln_synchronize(s->ctx));
    r->y = download(s->ctx, yd, yb);
    r->dx = download(s->ctx, dxd, xb);
    for (int i = 0; i < NE; i++) {
        void *wg = NULL, *bg = NULL;
        CHECK_OK(gln_grouped_linear_grads(s->L, i, &wg, &bg));
        r->mg[i] = download(s->ctx, wg, (size_t)KOUT * KIN * 4);
        r->db[i] = download(s->ctx, bg, (size_t)KOUT * 2);
    }
    void *bufs[] = {xd, dyd, yd, dxd};
    for (int i = 0; i < 4; i++) CHECK_OK(gln_free(s->ctx, bufs[i]));
    free(poison_y), free(poison_x);
}

static void results_free(results_t *r) {
    free(r->y), free(r->dx);
    for (int i = 0; i < NE; i++) free(r->db[i]), free(r->mg[i]);
}

/* ---- per-output checks --------------------------------------------------------------------- */

static void check_y(const char *label, const operands_t *o, void *const *bh, const results_t *cu, const results_t *cpu,
                    double acc_rel) {
    char what[200];
    snprintf(what, sizeof what, "%s: y", label);
    cmp_t c = {what, 0};
    for (int i = 0; i < NE; i++) {
        const int64_t r0 = row_start(i);
        for (int64_t r = 0; r < k_splits[i]; r++)
            for (int64_t j = 0; j < KOUT; j++) {
                double ref = 0.0, s = 0.0;
                for (int64_t t = 0; t < KIN; t++) {
                    const double p = o->xr[i][r * KIN + t] * o->wr[i][j * KIN + t];
                    ref += p, s += fabs(p);
                }
                const double b = gln_load(bh[i], GLN_DTYPE_BF16, (size_t)j);
                ref += b, s += fabs(b);
                const size_t idx = (size_t)((r0 + r) * KOUT + j);
                const double g = gln_load(cu->y, GLN_DTYPE_BF16, idx), h = gln_load(cpu->y, GLN_DTYPE_BF16, idx);
                const double base = 2.0 * ((double)KIN + GLN_CMP_GEMM_SUM_TERMS_EXTRA) * GLN_CMP_U32 * s;
                cmp_elem(&c, idx, g, h, ref,
                         GLN_CMP_GEMM_OUT_ULPS * gln_cmp_ulp(h, GLN_DTYPE_BF16) + base + acc_rel * s,
                         GLN_CMP_GEMM_OUT_ULPS * gln_cmp_ulp(ref, GLN_DTYPE_BF16) + base);
            }
    }
    cmp_done(&c);
}

static void check_dx(const char *label, const operands_t *o, const results_t *cu, const results_t *cpu, double acc_rel) {
    char what[200];
    snprintf(what, sizeof what, "%s: dx", label);
    cmp_t c = {what, 0};
    for (int i = 0; i < NE; i++) {
        const int64_t r0 = row_start(i);
        for (int64_t r = 0; r < k_splits[i]; r++)
            for (int64_t j = 0; j < KIN; j++) {
                double ref = 0.0, s = 0.0;
                for (int64_t t = 0; t < KOUT; t++) {
                    const double p = o->dyr[i][r * KOUT + t] * o->wc[i][t * KIN + j];
                    ref += p, s += fabs(p);
                }
                const size_t idx = (size_t)((r0 + r) * KIN + j);
                const double g = gln_load(cu->dx, GLN_DTYPE_BF16, idx), h = gln_load(cpu->dx, GLN_DTYPE_BF16, idx);
                const double base = 2.0 * ((double)KOUT + GLN_CMP_GEMM_SUM_TERMS_EXTRA) * GLN_CMP_U32 * s;
                cmp_elem(&c, idx, g, h, ref,
                         GLN_CMP_GEMM_OUT_ULPS * gln_cmp_ulp(h, GLN_DTYPE_BF16) + base + acc_rel * s,
                         GLN_CMP_GEMM_OUT_ULPS * gln_cmp_ulp(ref, GLN_DTYPE_BF16) + base);
            }
    }
    cmp_done(&c);
}

/* main_grad accumulates over the steps: the float64 reference and both tolerances too. */
static void check_main_grad(const char *label, const operands_t *o, double **mg_ref, double **tol_pair, double **tol_ref,
                            const results_t *cu, const results_t *cpu, double acc_rel) {
    char what[200];
    for (int i = 0; i < NE; i++) {
        snprintf(what, sizeof what, "%s: main_grad[%d]", label, i);
        cmp_t c = {what, 0};
        const int64_t m = k_splits[i];
        for (int64_t a = 0; a < KOUT; a++)
            for (int64_t b = 0; b < KIN; b++) {
                const size_t idx = (size_t)(a * KIN + b);
                double ref = 0.0, s = fabs(mg_ref[i][idx]); /* the old value is a summand too */
                for (int64_t t = 0; t < m; t++) {
                    const double p = o->dyc[i][t * KOUT + a] * o->xc[i][t * KIN + b];
                    ref += p, s += fabs(p);
                }
                mg_ref[i][idx] += ref;
                const double base = 2.0 * ((double)m + GLN_CMP_GEMM_SUM_TERMS_EXTRA) * GLN_CMP_U32 * s;
                const double g = cu->mg[i][idx], h = cpu->mg[i][idx];
                tol_pair[i][idx] += GLN_CMP_GEMM_OUT_ULPS * gln_cmp_ulp(h, GLN_DTYPE_FP32) + base + acc_rel * s;
                tol_ref[i][idx] += GLN_CMP_GEMM_OUT_ULPS * gln_cmp_ulp(mg_ref[i][idx], GLN_DTYPE_FP32) + base;
                cmp_elem(&c, idx, g, h, mg_ref[i][idx], tol_pair[i][idx], tol_ref[i][idx]);
            }
        cmp_done(&c);
    }
}

/* Bias gradients: bit for bit, and against the float64 column sums of dy accumulated over the
 * steps: each step rounds the FP32 sum (old + Σ dy) once to bf16, an error of at most half a bf16
 * ulp (2^-9 relative) of a value bounded by the running Σ|dy| (db_abs); DB_ROUND_REL = 2^-8
 * per step leaves a factor 2 for the FP32 summation.  (Relative to Σ|dy|, not to |db|: sums
 * that cancel are legitimately off by much more than 2^-8·|db|.) */
#define DB_ROUND_REL (1.0 / 256.0)
static void check_db(const char *label, int steps_done, const void *dy, double **db_ref, double **db_abs,
                     const results_t *cu, const results_t *cpu) {
    char what[200];
    for (int i = 0; i < NE; i++) {
        snprintf(what, sizeof what, "%s: db[%d] cuda vs cpu", label, i);
        gln_check_bitwise(what, cu->db[i], cpu->db[i], (size_t)KOUT * 2);
        const int64_t r0 = row_start(i);
        int bad = 0;
        for (int64_t j = 0; j < KOUT; j++) {
            for (int64_t r = 0; r < k_splits[i]; r++) {
                const double v = gln_load(dy, GLN_DTYPE_BF16, (size_t)((r0 + r) * KOUT + j));
                db_ref[i][j] += v, db_abs[i][j] += fabs(v);
            }
            const double got = gln_load(cpu->db[i], GLN_DTYPE_BF16, (size_t)j);
            const double tol = steps_done * DB_ROUND_REL * db_abs[i][j];
            if (!(fabs(got - db_ref[i][j]) <= tol) && bad++ < 5)
                CHECK_MSG(0, "%s: db[%d][%lld] %.9g, float64 %.9g (tol %.3g)", label, i, (long long)j, got,
                          db_ref[i][j], tol);
        }
    }
}

/* Delayed scaling: both layers' states bitwise equal; the amaxes recorded this step (the last
 * history row once the end-of-pass update has rolled the window: row 0 moves there) equal our
 * own quantization's. */
static void check_state(const char *label, gln_grouped_linear_t *Lcu, gln_grouped_linear_t *Lcpu, const float *ax,
                        const float *aw, const float *ady) {
    char what[200];
    for (int bwd = 0; bwd < 2; bwd++) {
        dstate_t a = state_of(Lcu, bwd), b = state_of(Lcpu, bwd);
        CHECK(a.slots == b.slots && a.len == b.len);
        snprintf(what, sizeof what, "%s: %s scales cuda vs cpu", label, bwd ? "backward" : "forward");
        gln_check_bitwise(what, a.scale, b.scale, (size_t)a.slots * 4);
        snprintf(what, sizeof what, "%s: %s amax history cuda vs cpu", label, bwd ? "backward" : "forward");
        gln_check_bitwise(what, a.hist, b.hist, (size_t)a.slots * (size_t)a.len * 4);
        for (int i = 0; i < NE; i++) {
            const float *row1 = a.hist + (size_t)(a.len - 1) * (size_t)a.slots;
            if (bwd) {
                CHECK_MSG(row1[2 * i] == ady[i], "%s: recorded dy amax[%d] %g, own quantization %g", label, i,
                          (double)row1[2 * i], (double)ady[i]);
            } else {
                CHECK_MSG(row1[3 * i] == ax[i], "%s: recorded x amax[%d] %g, own quantization %g", label, i,
                          (double)row1[3 * i], (double)ax[i]);
                CHECK_MSG(row1[3 * i + 1] == aw[i], "%s: recorded W amax[%d] %g, own quantization %g", label, i,
                          (double)row1[3 * i + 1], (double)aw[i]);
            }
        }
    }
}

/* ---- one recipe x path --------------------------------------------------------------------- */

static double **dmat(size_t n) {
    double **m = calloc(NE, sizeof *m);
    for (int i = 0; i < NE; i++) m[i] = calloc(n, sizeof(double));
    return m;
}

static void dmat_free(double **m) {
    for (int i = 0; i < NE; i++) free(m[i]);
    free(m);
}

static void run_case(const variant_t *v, gln_path_t path) {
    gln_rng_t rng = gln_rng_seed(1000u + (uint64_t)v->recipe * 10u + (uint64_t)v->block_fp32 * 5u + (uint64_t)path);
    void *wh[NE], *bh[NE];
    for (int i = 0; i < NE; i++) {
        wh[i] = host_rand(&rng, GLN_DTYPE_BF16, (size_t)KOUT * KIN, 0.1);
        bh[i] = host_rand(&rng, GLN_DTYPE_BF16, KOUT, 0.5);
    }
    /* a few weight rows 40x larger: block scales differ between blocks */
    for (int64_t e = 0; e < 3 * KIN; e++) gln_store(wh[1], GLN_DTYPE_BF16, (size_t)e, 40.0 * gln_load(wh[1], GLN_DTYPE_BF16, (size_t)e));
    side_t cu, cpu;
    side_create(&cpu, g_cpu, v, path, wh, bh);
    side_create(&cu, g_cu, v, path, wh, bh);
    double **mg_ref = dmat((size_t)KOUT * KIN), **tol_pair = dmat((size_t)KOUT * KIN), **tol_ref = dmat((size_t)KOUT * KIN);
    double **db_ref = dmat(KOUT), **db_abs = dmat(KOUT);
    const double acc_rel = acc_rel_of(v);
    for (int step = 0; step < STEPS && cu.L && cpu.L; step++) {
        char label[160];
        snprintf(label, sizeof label, "%s %s splits {%lld, %lld, %lld, %lld} step %d", v->name,
                 path == GLN_PATH_SPLIT ? "split" : "grouped", (long long)k_splits[0], (long long)k_splits[1],
                 (long long)k_splits[2], (long long)k_splits[3], step);
        void *x = host_rand(&rng, GLN_DTYPE_BF16, (size_t)ROWS * KIN, 1.0);
        void *dy = host_rand(&rng, GLN_DTYPE_BF16, (size_t)ROWS * KOUT, 0.5);
        if (step == 1) {
            CHECK_OK(gln_grouped_linear_weights_updated(cu.L));
            CHECK_OK(gln_grouped_linear_weights_updated(cpu.L));
        }
        operands_t o;
        float ax[NE] = {0}, aw[NE] = {0}, ady[NE] = {0};
        step_operands(v, cpu.L, x, dy, wh, &o, ax, aw, ady, label); /* with the scales before this step */
        const gln_microbatch_t mb = step == 0 ? GLN_MICROBATCH_FIRST : GLN_MICROBATCH_UNSET;
        results_t rc, rh;
        side_step(&cpu, path, mb, x, dy, &rh);
        side_step(&cu, path, mb, x, dy, &rc);
        check_y(label, &o, bh, &rc, &rh, acc_rel);
        check_dx(label, &o, &rc, &rh, acc_rel);
        check_main_grad(label, &o, mg_ref, tol_pair, tol_ref, &rc, &rh, acc_rel);
        check_db(label, step + 1, dy, db_ref, db_abs, &rc, &rh);
        if (v->recipe == GLN_RECIPE_FP8_DELAYED) check_state(label, cu.L, cpu.L, ax, aw, ady);
        results_free(&rc), results_free(&rh);
        operands_free(&o);
        free(x), free(dy);
    }
    dmat_free(mg_ref), dmat_free(tol_pair), dmat_free(tol_ref), dmat_free(db_ref), dmat_free(db_abs);
    side_destroy(&cu);
    side_destroy(&cpu);
    for (int i = 0; i < NE; i++) free(wh[i]), free(bh[i]);
}

static const variant_t k_variants[] = {
    {"none(bf16)", GLN_RECIPE_NONE, 0},   {"fp8_delayed", GLN_RECIPE_FP8_DELAYED, 0},
    {"fp8_current", GLN_RECIPE_FP8_CURRENT, 0}, {"mxfp8", GLN_RECIPE_MXFP8, 0},
    {"fp8_block", GLN_RECIPE_FP8_BLOCK, 0}, {"fp8_block(fp32 scales)", GLN_RECIPE_FP8_BLOCK, 1},
};

static void run_variant(int idx) {
    for (size_t set = 0; set < NSETS; set++) {
        k_splits = k_split_sets[set];
        g_rows = 0;
        for (int i = 0; i < NE; i++) g_rows += k_splits[i];
        run_case(&k_variants[idx], GLN_PATH_SPLIT);
        run_case(&k_variants[idx], GLN_PATH_GROUPED);
    }
}

static void test_none(void) { run_variant(0); }
static void test_fp8_delayed(void) { run_variant(1); }
static void test_fp8_current(void) { run_variant(2); }
static void test_mxfp8(void) { run_variant(3); }
static void test_fp8_block(void) { run_variant(4); }
static void test_fp8_block_fp32_scales(void) { run_variant(5); }

GLN_TEST_CUDA_MAIN(g_cpu, g_cu,
    GLN_CASE(test_none), GLN_CASE(test_fp8_delayed), GLN_CASE(test_fp8_current), GLN_CASE(test_mxfp8),
    GLN_CASE(test_fp8_block), GLN_CASE(test_fp8_block_fp32_scales))

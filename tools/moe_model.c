/* The MoE MLP of `grouplin train` (see moe_model.h for the wiring). */
#include "moe_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "exact.h"
#include "task.h"
#include "train_ops.h"

#define TRY(expr)                                                                               \
    do {                                                                                        \
        gln_status_t try_st_ = (expr);                                                          \
        if (try_st_ != GLN_STATUS_SUCCESS) return try_st_;                                      \
    } while (0)

struct moe_model {
    gln_context_t *ctx;
    gln_comm_t *comm;
    moe_model_config_t cfg;
    int64_t T, P, H, F, F1; /* tokens, pairs (T·k), hidden, ffn, FC1 outputs */
    /* Rows of the permuted buffers: P, or on the GPU P + E·(align - 1) with every expert's block
     * padded to the recipe's alignment (gln_moe_permute_plan_aligned), so that the FP8 wgrads
     * get 16-row multiples; the padding rows of xp and dyp are kept zero. */
    int64_t R, align;
    int32_t E, k;
    gln_dtype_t adt;
    int64_t step;
    int first;                      /* the last forward ran microbatch 0 of an optimizer step */

    float *wr, *wr_grad;            /* router [E, H] */
    adam_state_t wr_adam;
    gln_sharded_weights_t *sw[2];   /* FC1, FC2 */
    gln_grouped_linear_t *fc[2];
    adam_state_t adam[2];           /* per shard */
    gln_grouped_linear_saved_t *saved[2];

    /* forward activations (kept for backward) */
    const float *x;
    float *logits, *gates;
    int32_t *experts;
    int64_t *splits, *row_of;
    void *xp, *h1, *a, *yp;         /* activation dtype; `a` NULL under fuse_act */
    /* FC2's input quantized by the activation itself (gln_activation_forward_quantize) under the
     * recipes whose layer takes a pre-quantized input (fp8-current, mxfp8, fp8-block; not under
     * --exact-data, whose activation is rounded onto a grid first): then `a` is not allocated
     * (nothing reads it: the backward recomputes the activation's gradient from h1, and FC2's
     * wgrad reads its saved quantized input), and aq holds FC2's x, rowwise and (training)
     * columnwise, the latter referenced by FC2's saved context until its backward. */
    int fuse_act;
    gln_quant_config_t aq_cfg;
    void *aq[4];                    /* data, col_data, scale_inv, col_scale_inv */
    float *aq_aux;                  /* per-tensor modes: amax [E], scale [E] */
    /* backward */
    float *tmp32;                   /* FP32 staging [P, max(F1, H)] for --exact-data's grids */
    float *dgates, *dlogits, *dx;
    void *dyp, *da, *dh1, *dxp;
};

static gln_tensor_t act_tensor(const moe_model_t *m, int64_t rows, int64_t cols, void *data) {
    return gln_tensor_make(m->adt, rows, cols, data);
}

/* FP32 staging → an operand in the activation dtype; under --exact-data rounded onto `frac`. */
static gln_status_t to_operand(moe_model_t *m, float *src, int64_t rows, int64_t cols, int frac,
                               void *dst) {
    if (m->cfg.exact) TRY(top_exact_round(m->ctx, src, rows * cols, frac));
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, rows, cols, src);
    gln_tensor_t out = act_tensor(m, rows, cols, dst);
    return gln_cast(m->ctx, &in, &out);
}

/* Zeroed backend memory (host on the CPU, device on CUDA). */
static gln_status_t alloc_zero(moe_model_t *m, size_t bytes, void **p) {
    TRY(gln_malloc(m->ctx, bytes ? bytes : 1, p));
    return top_zero(m->ctx, *p, bytes ? bytes : 1);
}

/* Backend memory holding the host array src (n floats). */
static gln_status_t alloc_upload(moe_model_t *m, const float *src, size_t n, float **p) {
    TRY(gln_malloc(m->ctx, n ? n * sizeof(float) : 1, (void **)p));
    return n ? gln_memcpy(m->ctx, *p, src, n * sizeof(float), GLN_COPY_HOST_TO_BACKEND) : GLN_STATUS_SUCCESS;
}

/* This rank's FP32 master and main_grad shard of layer idx. */
static gln_status_t layer_shard(moe_model_t *m, int idx, float **master, float **grad, int64_t *len) {
    int64_t off;
    return gln_sharded_weights_shard(m->sw[idx], master, grad, len, &off);
}

/* One expert layer [in → out]: its sharded weight group (loaded from seeded FP32 weights), the
 * grouped linear layer on top of it, and its Adam moments. */
static gln_status_t create_layer(moe_model_t *m, int idx, int64_t in, int64_t out) {
    const int32_t E = m->E;
    gln_grouped_linear_config_t lc = GLN_GROUPED_LINEAR_CONFIG_INIT;
    lc.num_experts = E;
    lc.in_features = in;
    lc.out_features = out;
    lc.bias = 0;
    lc.param_dtype = m->adt;
    lc.activation_dtype = m->adt;
    lc.recipe = m->cfg.recipe->recipe;
    lc.path = m->cfg.path;
    lc.fuse_wgrad_accumulation = 1;
    lc.weights_require_grad = m->cfg.trainable;

    gln_sharded_weights_config_t sc = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    sc.num_experts = E;
    sc.out_features = out;
    sc.in_features = in;
    sc.working_dtype = m->adt;
    sc.requires_grad = m->cfg.trainable;
    /* The shards stored quantized with the layer's own weight rule (refreshed once per optimizer
     * step): FP8 current scaling, 128x128 blocks and MXFP8, the modes the group keeps quantized
     * (MXFP8 where the layer's in_features is a multiple of 128, what the group needs for it;
     * else that layer gathers the working dtype, as with --quantized-weights off). */
    const int qw_recipe = lc.recipe == GLN_RECIPE_FP8_CURRENT || lc.recipe == GLN_RECIPE_FP8_BLOCK ||
                          (lc.recipe == GLN_RECIPE_MXFP8 && in % 128 == 0);
    if (m->cfg.quantized_weights && qw_recipe) {
        TRY(gln_grouped_linear_weight_quant_config(&lc, &sc.fp8_quant));
        sc.fp8_gather = 1;
        sc.quantized_shard = 1;
    }
    TRY(gln_sharded_weights_create(m->ctx, m->comm, &sc, &m->sw[idx]));

    const int64_t n = E * out * in;
    float *full = tool_alloc((size_t)n, sizeof *full, "the initial expert weights");
    if (!full) return GLN_STATUS_OUT_OF_MEMORY;
    task_weights(m->cfg.seed, 10 + (uint64_t)idx, E, out, in, 1.0 / sqrt((double)in), m->cfg.exact, full);
    gln_status_t st = gln_sharded_weights_load_full(m->sw[idx], full);
    free(full);
    TRY(st);

    lc.params.distributed = gln_sharded_weights_protocol(m->sw[idx]);
    TRY(gln_grouped_linear_create(m->ctx, &lc, &m->fc[idx]));

    if (m->cfg.trainable) {
        float *master, *grad;
        int64_t len;
        TRY(layer_shard(m, idx, &master, &grad, &len));
        const size_t bytes = ((size_t)len + 1) * sizeof(float);
        TRY(alloc_zero(m, bytes, (void **)&m->adam[idx].m));
        TRY(alloc_zero(m, bytes, (void **)&m->adam[idx].v));
    }
    return GLN_STATUS_SUCCESS;
}

static gln_status_t create_buffers(moe_model_t *m) {
    const size_t es = gln_dtype_size(m->adt), T = (size_t)m->T, P = (size_t)m->P, R = (size_t)m->R;
    const size_t H = (size_t)m->H, F = (size_t)m->F, F1 = (size_t)m->F1, E = (size_t)m->E;
    const size_t wide = F1 > H ? F1 : H;
    struct {
        void **p;
        size_t bytes;
    } bufs[] = {
        {(void **)&m->logits, T * E * 4}, {(void **)&m->gates, P * 4},   {(void **)&m->experts, P * 4},
        {(void **)&m->splits, E * 8},     {(void **)&m->row_of, P * 8},  {&m->xp, R * H * es},
        {&m->h1, R * F1 * es},            {&m->yp, R * H * es},
        {(void **)&m->tmp32, m->cfg.exact ? R * wide * 4 : 4}, {(void **)&m->dgates, P * 4}, {(void **)&m->dlogits, T * E * 4},
        {(void **)&m->dx, T * H * 4},     {&m->dyp, R * H * es},         {&m->da, R * F * es},
        {&m->dh1, R * F1 * es},           {&m->dxp, R * H * es},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) TRY(alloc_zero(m, bufs[i].bytes, bufs[i].p));
    /* the activation's output [R, F] only where it is written: not under fuse_act */
    if (!m->fuse_act) TRY(alloc_zero(m, R * F * es, &m->a));
    return GLN_STATUS_SUCCESS;
}

/* The fused activation's quantized output (fuse_act): FC2's input config and buffers for any
 * splits of the permuted rows (the scale bound: the splits may live on the device). */
static gln_status_t create_act_quant(moe_model_t *m) {
    const gln_recipe_t r = m->cfg.recipe->recipe;
    m->fuse_act = !m->cfg.exact && (r == GLN_RECIPE_FP8_CURRENT || r == GLN_RECIPE_MXFP8 || r == GLN_RECIPE_FP8_BLOCK);
    if (!m->fuse_act) return GLN_STATUS_SUCCESS;
    gln_quant_config_t c = GLN_QUANT_CONFIG_INIT;
    TRY(gln_grouped_linear_input_quant_config(m->fc[1], m->cfg.trainable, &c));
    m->aq_cfg = c;
    int64_t re = m->E, ce = m->E;
    if (c.mode != GLN_SCALING_TENSOR) TRY(gln_grouped_scale_bound(c.mode, m->E, m->R, m->F, &re, &ce));
    const size_t n = (size_t)(m->R * m->F), es = c.mode == GLN_SCALING_MXFP8_1D ? 1 : sizeof(float);
    const size_t bytes[4] = {n, c.columnwise ? n : 0, (size_t)re * es, c.columnwise ? (size_t)ce * es : 0};
    for (int i = 0; i < 4; i++)
        if (bytes[i]) TRY(alloc_zero(m, bytes[i], &m->aq[i]));
    if (c.mode == GLN_SCALING_TENSOR) TRY(alloc_zero(m, 2 * (size_t)m->E * sizeof(float), (void **)&m->aq_aux));
    return GLN_STATUS_SUCCESS;
}

/* The grouped view of aq for this step's splits. */
static gln_grouped_tensor_t act_quant_view(const moe_model_t *m) {
    gln_grouped_tensor_t g;
    memset(&g, 0, sizeof g);
    g.num = m->E;
    g.splits = m->splits;
    g.splits_on_backend = top_on_device(m->ctx);
    g.packed = gln_tensor_make(m->aq_cfg.fp8_dtype, m->R, m->F, m->aq[0]);
    g.packed.scaling = m->aq_cfg.mode;
    g.packed.col_data = m->aq[1];
    g.packed.scale_inv = m->aq[2];
    g.packed.col_scale_inv = m->aq[3];
    if (m->aq_aux) g.packed.amax = m->aq_aux, g.packed.scale = m->aq_aux + m->E;
    return g;
}

gln_status_t moe_model_create(gln_context_t *ctx, gln_comm_t *comm, const moe_model_config_t *cfg,
                              moe_model_t **model) {
    *model = NULL;
    moe_model_t *m = tool_alloc(1, sizeof *m, "the model");
    if (!m) return GLN_STATUS_OUT_OF_MEMORY;
    m->ctx = ctx;
    m->comm = comm;
    m->cfg = *cfg;
    m->T = cfg->tokens;
    m->k = cfg->shape.topk;
    m->E = cfg->shape.experts;
    m->P = m->T * m->k;
    m->align = top_on_device(ctx) ? gln_recipe_alignment(cfg->recipe->recipe) : 1;
    m->R = m->P + (int64_t)m->E * (m->align - 1);
    m->H = cfg->shape.hidden;
    m->F = cfg->shape.ffn;
    m->F1 = cfg->shape.act == GLN_ACT_SWIGLU ? 2 * m->F : m->F;
    m->adt = cfg->recipe->act_dtype;

    gln_status_t st = GLN_STATUS_OUT_OF_MEMORY;
    const size_t rw = (size_t)(m->E * m->H);
    float *wr = tool_alloc(rw, sizeof(float), "the router weights");
    if (!wr) goto fail;
    task_weights(cfg->seed, 1, 1, m->E, m->H, 1.0 / sqrt((double)m->H), cfg->exact, wr);
    st = alloc_upload(m, wr, rw, &m->wr);
    free(wr);
    if (st == GLN_STATUS_SUCCESS) st = alloc_zero(m, rw * sizeof(float), (void **)&m->wr_grad);
    if (st == GLN_STATUS_SUCCESS) st = alloc_zero(m, rw * sizeof(float), (void **)&m->wr_adam.m);
    if (st == GLN_STATUS_SUCCESS) st = alloc_zero(m, rw * sizeof(float), (void **)&m->wr_adam.v);
    if (st != GLN_STATUS_SUCCESS) goto fail;
    if ((st = create_layer(m, 0, m->H, m->F1)) != GLN_STATUS_SUCCESS) goto fail;
    if ((st = create_layer(m, 1, m->F, m->H)) != GLN_STATUS_SUCCESS) goto fail;
    /* create_act_quant decides fuse_act, which create_buffers needs */
    if ((st = create_act_quant(m)) != GLN_STATUS_SUCCESS) goto fail;
    if ((st = create_buffers(m)) != GLN_STATUS_SUCCESS) goto fail;
    *model = m;
    return GLN_STATUS_SUCCESS;
fail:
    moe_model_destroy(m);
    return st;
}

void moe_model_destroy(moe_model_t *m) {
    if (!m) return;
    for (int i = 0; i < 2; i++) {
        if (m->saved[i]) gln_grouped_linear_saved_release(m->saved[i]);
        gln_grouped_linear_destroy(m->fc[i]);
        gln_sharded_weights_destroy(m->sw[i]);
        if (m->adam[i].m) gln_free(m->ctx, m->adam[i].m);
        if (m->adam[i].v) gln_free(m->ctx, m->adam[i].v);
    }
    void *dev[] = {m->logits, m->gates, m->experts, m->splits, m->row_of, m->xp,      m->h1,
                   m->a,      m->yp,    m->tmp32,   m->dgates, m->dlogits, m->dx,     m->dyp,
                   m->da,     m->dh1,   m->dxp,     m->wr,     m->wr_grad, m->wr_adam.m, m->wr_adam.v,
                   m->aq[0],  m->aq[1], m->aq[2],   m->aq[3],  m->aq_aux};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i]) gln_free(m->ctx, dev[i]);
    free(m);
}

/* Run one expert layer forward over the permuted rows: input `in`, or (in NULL) the quantized
 * input xq. */
static gln_status_t layer_forward(moe_model_t *m, int idx, void *in, const gln_grouped_tensor_t *xq,
                                  int64_t in_cols, void *out, int64_t out_cols, int input_grad) {
    gln_tensor_t x = act_tensor(m, m->R, in_cols, in), y = act_tensor(m, m->R, out_cols, out);
    gln_grouped_linear_forward_args_t fa = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    fa.x = in ? &x : NULL;
    fa.x_quantized = xq;
    fa.m_splits = m->splits;
    fa.splits_on_backend = top_on_device(m->ctx); /* the device plan's splits, never read by the host */
    fa.y = &y;
    fa.microbatch = m->first ? GLN_MICROBATCH_FIRST : GLN_MICROBATCH_NEXT;
    fa.input_requires_grad = input_grad;
    return gln_grouped_linear_forward(m->fc[idx], &fa, m->cfg.trainable ? &m->saved[idx] : NULL);
}

gln_status_t moe_model_forward(moe_model_t *m, const float *x, float *y, int64_t microbatch) {
    const int64_t T = m->T, P = m->R, H = m->H, F = m->F, F1 = m->F1; /* P: permuted rows */
    for (int i = 0; i < 2; i++)
        if (m->saved[i]) { /* a forward without backward: drop the stale context */
            gln_grouped_linear_saved_release(m->saved[i]);
            m->saved[i] = NULL;
        }
    m->x = x;
    m->first = microbatch == 0;
    gln_tensor_t tx = gln_tensor_make(GLN_DTYPE_FP32, T, H, (void *)x);
    gln_tensor_t twr = gln_tensor_make(GLN_DTYPE_FP32, m->E, H, m->wr);
    gln_tensor_t tlog = gln_tensor_make(GLN_DTYPE_FP32, T, m->E, m->logits);
    TRY(gln_gemm(m->ctx, GLN_LAYOUT_TN, &twr, &tx, &tlog, NULL, 0));
    TRY(gln_moe_router_forward(m->ctx, T, m->E, m->k, m->logits, m->experts, m->gates));
    TRY(gln_moe_permute_plan_aligned(m->ctx, T, m->E, m->k, m->align, m->experts, m->splits, m->row_of));
    gln_tensor_t txp = act_tensor(m, P, H, m->xp);
    /* the padding rows move with the routing: zero them all, then permute fills the rest */
    if (m->align > 1) TRY(top_zero(m->ctx, m->xp, (size_t)(P * H) * gln_dtype_size(m->adt)));
    TRY(gln_moe_permute(m->ctx, T, m->k, m->row_of, &tx, &txp));

    TRY(layer_forward(m, 0, m->xp, NULL, H, m->h1, F1, 1));
    gln_tensor_t th1 = act_tensor(m, P, F1, m->h1);
    if (m->fuse_act) { /* FC2's input quantized by the activation: no `a` */
        gln_grouped_tensor_t gh1 = act_quant_view(m), xq = act_quant_view(m);
        gh1.packed = th1;
        TRY(gln_activation_forward_quantize(m->ctx, m->cfg.shape.act, m->adt, &m->aq_cfg, &gh1, &xq));
        TRY(layer_forward(m, 1, NULL, &xq, F, m->yp, H, 1));
    } else if (m->cfg.exact) {
        gln_tensor_t t32 = gln_tensor_make(GLN_DTYPE_FP32, P, F, m->tmp32);
        TRY(gln_activation_forward(m->ctx, m->cfg.shape.act, &th1, &t32));
        TRY(to_operand(m, m->tmp32, P, F, EXACT_ACT_FRAC, m->a));
    } else {
        gln_tensor_t ta = act_tensor(m, P, F, m->a);
        TRY(gln_activation_forward(m->ctx, m->cfg.shape.act, &th1, &ta));
    }
    if (!m->fuse_act) TRY(layer_forward(m, 1, m->a, NULL, F, m->yp, H, 1));

    gln_tensor_t typ = act_tensor(m, P, H, m->yp), ty = gln_tensor_make(GLN_DTYPE_FP32, T, H, y);
    return gln_moe_unpermute(m->ctx, T, m->k, m->row_of, m->gates, &typ, &ty);
}

static gln_status_t layer_backward(moe_model_t *m, int idx, void *dy, int64_t dy_cols, void *dx,
                                   int64_t dx_cols) {
    float *master, *grad;
    int64_t len;
    TRY(layer_shard(m, idx, &master, &grad, &len));
    /* the step's gradient starts from zero at its first microbatch (FIRST also overwrites it);
     * the later ones add to it */
    if (m->first) TRY(top_zero(m->ctx, grad, (size_t)len * sizeof *grad));
    gln_tensor_t tdy = act_tensor(m, m->R, dy_cols, dy), tdx = act_tensor(m, m->R, dx_cols, dx);
    gln_status_t st = gln_grouped_linear_backward(m->saved[idx], &tdy, &tdx);
    gln_status_t rel = gln_grouped_linear_saved_release(m->saved[idx]);
    m->saved[idx] = NULL;
    TRY(st);
    return rel;
}

gln_status_t moe_model_backward(moe_model_t *m, const float *dy) {
    const int64_t T = m->T, P = m->R, H = m->H, F = m->F, F1 = m->F1; /* P: permuted rows */
    /* unpermute: dyp = gates·dy rows, dgates = <dy, yp> */
    gln_tensor_t tdy = gln_tensor_make(GLN_DTYPE_FP32, T, H, (void *)dy);
    /* Without --exact-data the ops round straight into the operand dtype: one rounding of the same
     * FP32 value either way, so the FP32 staging (which the exact grids need) changes no bit. */
    gln_tensor_t typ = act_tensor(m, P, H, m->yp), t32 = gln_tensor_make(GLN_DTYPE_FP32, P, H, m->tmp32);
    gln_tensor_t tdyp = act_tensor(m, P, H, m->dyp);
    if (m->align > 1) TRY(top_zero(m->ctx, m->dyp, (size_t)(P * H) * gln_dtype_size(m->adt)));
    /* --exact-data stages through tmp32, whose padding rows in this [P, H] view still hold the
     * forward's activation: zero them, or they would reach dyp's padding rows and the wgrads */
    if (m->align > 1 && m->cfg.exact) TRY(top_zero(m->ctx, m->tmp32, (size_t)(P * H) * sizeof(float)));
    TRY(gln_moe_unpermute_backward(m->ctx, T, m->k, m->row_of, m->gates, &typ, &tdy, m->cfg.exact ? &t32 : &tdyp,
                                   m->dgates));
    if (m->cfg.exact) TRY(to_operand(m, m->tmp32, P, H, EXACT_GRAD_FRAC, m->dyp));

    TRY(layer_backward(m, 1, m->dyp, H, m->da, F));
    gln_tensor_t th1 = act_tensor(m, P, F1, m->h1), tda = act_tensor(m, P, F, m->da);
    gln_tensor_t tdh = gln_tensor_make(GLN_DTYPE_FP32, P, F1, m->tmp32), tdh1 = act_tensor(m, P, F1, m->dh1);
    TRY(gln_activation_backward(m->ctx, m->cfg.shape.act, &th1, &tda, m->cfg.exact ? &tdh : &tdh1));
    if (m->cfg.exact) TRY(to_operand(m, m->tmp32, P, F1, EXACT_GRAD_FRAC, m->dh1));
    /* FC1's dgrad and the permutation's backward give the experts' share of dL/dx. */
    TRY(layer_backward(m, 0, m->dh1, F1, m->dxp, H));
    gln_tensor_t tdxp = act_tensor(m, P, H, m->dxp), tdx = gln_tensor_make(GLN_DTYPE_FP32, T, H, m->dx);
    TRY(gln_moe_permute_backward(m->ctx, T, m->k, m->row_of, &tdxp, &tdx));

    /* router: dlogits, then dWr = dlogitsᵀ · x summed over every rank's tokens */
    TRY(gln_moe_router_backward(m->ctx, T, m->E, m->k, m->logits, m->experts, m->dgates, m->dlogits));
    if (m->cfg.exact) TRY(top_exact_round(m->ctx, m->dlogits, T * m->E, EXACT_GRAD_FRAC));
    gln_tensor_t tx = gln_tensor_make(GLN_DTYPE_FP32, T, H, (void *)m->x);
    gln_tensor_t tdl = gln_tensor_make(GLN_DTYPE_FP32, T, m->E, m->dlogits);
    gln_tensor_t tg = gln_tensor_make(GLN_DTYPE_FP32, m->E, H, m->wr_grad);
    TRY(gln_gemm(m->ctx, GLN_LAYOUT_NT, &tx, &tdl, &tg, NULL, !m->first)); /* summed over microbatches */
    /* dx += dlogits · Wr: the router's share of dL/dx (the language model's embeddings use it) */
    gln_tensor_t twr = gln_tensor_make(GLN_DTYPE_FP32, m->E, H, m->wr);
    gln_tensor_t tdx2 = gln_tensor_make(GLN_DTYPE_FP32, T, H, m->dx);
    return gln_gemm(m->ctx, GLN_LAYOUT_NN, &twr, &tdl, &tdx2, NULL, 1);
}

gln_status_t moe_model_step(moe_model_t *m) {
    /* the router gradient, summed over this rank's microbatches, over every rank's tokens: one
     * all-reduce per optimizer step */
    if (gln_comm_size(m->comm) > 1)
        TRY(gln_comm_allreduce(m->comm, m->wr_grad, m->wr_grad, (size_t)(m->E * m->H), GLN_DTYPE_FP32,
                               GLN_REDUCE_SUM));
    /* m->step counts from 1, so that under a clock (ticked at the start of the step: clock->step =
     * m->step - 1) both give the same bias corrections; a captured step reads the clock's */
    m->step++;
    const gln_optimizer_config_t oc = top_optimizer_config(m->cfg.lr, m->cfg.clock);
    const int64_t rn = (int64_t)m->E * m->H;
    TRY(gln_optimizer_step(m->ctx, &oc, m->step, m->wr, m->wr_grad, m->wr_adam.m, m->wr_adam.v, rn, NULL,
                           GLN_DTYPE_FP32));
    if (m->cfg.exact) TRY(top_exact_round(m->ctx, m->wr, rn, EXACT_WEIGHT_FRAC));
    for (int i = 0; i < 2; i++) {
        if (m->cfg.exact) {
            /* --exact-data rounds the master onto its grid after Adam, so the working copy (and a
             * quantized shard) is refreshed from the rounded master afterwards */
            float *master, *grad;
            int64_t len;
            TRY(layer_shard(m, i, &master, &grad, &len));
            TRY(gln_optimizer_step(m->ctx, &oc, m->step, master, grad, m->adam[i].m, m->adam[i].v, len, NULL,
                                   GLN_DTYPE_FP32));
            TRY(top_exact_round(m->ctx, master, len, EXACT_WEIGHT_FRAC));
            TRY(gln_sharded_weights_sync_working(m->sw[i]));
        } else {
            /* The library's fused step: one pass over the FP32 master shard writes the working
             * shard and each expert's amax, from which a quantized shard is refreshed. */
            TRY(gln_sharded_weights_optimizer_step(m->sw[i], &oc, m->step, m->adam[i].m, m->adam[i].v));
        }
        TRY(gln_grouped_linear_weights_updated(m->fc[i]));
    }
    return GLN_STATUS_SUCCESS;
}

const float *moe_model_input_grad(const moe_model_t *m) { return m->dx; }

double moe_expert_flops(const moe_shape_t *s, int64_t pairs) {
    const double f1 = s->act == GLN_ACT_SWIGLU ? 2.0 * (double)s->ffn : (double)s->ffn;
    return 6.0 * (double)pairs * (double)s->hidden * (f1 + (double)s->ffn);
}

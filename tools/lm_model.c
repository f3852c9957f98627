/* The byte-level language model (see lm_model.h for the wiring). */
#include "lm_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "task.h"
#include "train_ops.h"

#define TRY(expr)                                                                               \
    do {                                                                                        \
        gln_status_t try_st_ = (expr);                                                          \
        if (try_st_ != GLN_STATUS_SUCCESS) return try_st_;                                      \
    } while (0)

struct lm_model {
    gln_context_t *ctx;
    gln_comm_t *comm;
    moe_model_t *moe;
    int64_t T, H, C;
    float lr;
    int64_t step;
    int first;                     /* the last forward ran microbatch 0 of an optimizer step */
    const top_clock_t *clock;
    /* parameters and gradients, one block each: [emb C·256·H | wout 256·H | bout 256] */
    float *param, *grad;
    int64_t nparam;
    adam_state_t adam;
    float *emb, *wout, *bout, *gemb, *gwout, *gbout; /* views into param / grad */
    /* activations (backend memory) */
    const uint8_t *ctx_bytes, *next;
    float *x, *y, *probs, *dy;     /* [T, H], [T, H], [T, 256], [T, H] */
};

static void set_views(lm_model_t *m) {
    const int64_t ne = m->C * LM_VOCAB * m->H, nw = LM_VOCAB * m->H;
    m->emb = m->param;
    m->wout = m->param + ne;
    m->bout = m->param + ne + nw;
    m->gemb = m->grad;
    m->gwout = m->grad + ne;
    m->gbout = m->grad + ne + nw;
}

/* Seeded initial weights (into the host array p laid out as param): each embedding N(0, 1/C)
 * so x ~ N(0, 1) as the teacher task's inputs; the head N(0, 1/H); bias 0. */
static void init_params(const lm_model_t *m, uint64_t seed, float *p) {
    task_weights(seed, 20, m->C, LM_VOCAB, m->H, 1.0 / sqrt((double)m->C), 0, p);
    task_weights(seed, 21, 1, LM_VOCAB, m->H, 1.0 / sqrt((double)m->H), 0, p + m->C * LM_VOCAB * m->H);
}

/* Every buffer in backend memory: the parameters uploaded from their seeded host copy, the rest
 * zeroed. */
static gln_status_t alloc_all(lm_model_t *m, uint64_t seed) {
    const size_t np = (size_t)m->nparam, th = (size_t)(m->T * m->H);
    struct {
        void **p;
        size_t bytes;
    } bufs[] = {
        {(void **)&m->param, np * 4}, {(void **)&m->grad, np * 4},   {(void **)&m->adam.m, np * 4},
        {(void **)&m->adam.v, np * 4}, {(void **)&m->x, th * 4},     {(void **)&m->y, th * 4},
        {(void **)&m->dy, th * 4},     {(void **)&m->probs, (size_t)(m->T * LM_VOCAB) * 4},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        TRY(gln_malloc(m->ctx, bufs[i].bytes, bufs[i].p));
        TRY(top_zero(m->ctx, *bufs[i].p, bufs[i].bytes));
    }
    float *host = tool_alloc(np, sizeof(float), "the language model's initial weights");
    if (!host) return GLN_STATUS_OUT_OF_MEMORY;
    init_params(m, seed, host);
    gln_status_t st = gln_memcpy(m->ctx, m->param, host, np * sizeof(float), GLN_COPY_HOST_TO_BACKEND);
    free(host);
    return st;
}

gln_status_t lm_model_create(gln_context_t *ctx, gln_comm_t *comm, const moe_model_config_t *cfg,
                             int64_t context, lm_model_t **model) {
    *model = NULL;
    lm_model_t *m = tool_alloc(1, sizeof *m, "the language model");
    if (!m) return GLN_STATUS_OUT_OF_MEMORY;
    m->ctx = ctx;
    m->comm = comm;
    m->T = cfg->tokens;
    m->H = cfg->shape.hidden;
    m->C = context;
    m->lr = cfg->lr;
    m->nparam = (context + 1) * LM_VOCAB * m->H + LM_VOCAB;
    m->clock = cfg->clock;
    gln_status_t st = alloc_all(m, cfg->seed);
    if (st == GLN_STATUS_SUCCESS) {
        set_views(m);
        st = moe_model_create(ctx, comm, cfg, &m->moe);
    }
    if (st != GLN_STATUS_SUCCESS) {
        lm_model_destroy(m);
        return st;
    }
    *model = m;
    return GLN_STATUS_SUCCESS;
}

void lm_model_destroy(lm_model_t *m) {
    if (!m) return;
    moe_model_destroy(m->moe);
    void *bufs[] = {m->param, m->grad, m->adam.m, m->adam.v, m->x, m->y, m->dy, m->probs};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) gln_free(m->ctx, bufs[i]);
    free(m);
}

gln_status_t lm_model_forward(lm_model_t *m, const uint8_t *ctx, const uint8_t *next, double *tok_loss,
                              int64_t microbatch) {
    m->ctx_bytes = ctx;
    m->next = next;
    m->first = microbatch == 0;
    TRY(top_embed(m->ctx, m->emb, ctx, m->T, m->C, m->H, m->x)); /* x[t] = Σ_c emb[c][ctx[t, c]] */
    TRY(moe_model_forward(m->moe, m->x, m->y, microbatch));
    gln_tensor_t tw = gln_tensor_make(GLN_DTYPE_FP32, LM_VOCAB, m->H, m->wout);
    gln_tensor_t ty = gln_tensor_make(GLN_DTYPE_FP32, m->T, m->H, m->y);
    gln_tensor_t tl = gln_tensor_make(GLN_DTYPE_FP32, m->T, LM_VOCAB, m->probs);
    TRY(gln_gemm(m->ctx, GLN_LAYOUT_TN, &tw, &ty, &tl, NULL, 0));
    return top_softmax_ce(m->ctx, m->probs, m->bout, next, m->T, tok_loss);
}

gln_status_t lm_model_backward(lm_model_t *m, float scale) {
    const int acc = !m->first; /* a later microbatch adds to the step's gradients */
    /* dlogits = scale · (probs − onehot(next)) in place; the bias gradient is its column sum */
    TRY(top_dlogits(m->ctx, m->probs, m->next, m->T, scale, acc, m->gbout));
    gln_tensor_t tdl = gln_tensor_make(GLN_DTYPE_FP32, m->T, LM_VOCAB, m->probs);
    gln_tensor_t ty = gln_tensor_make(GLN_DTYPE_FP32, m->T, m->H, m->y);
    gln_tensor_t tw = gln_tensor_make(GLN_DTYPE_FP32, LM_VOCAB, m->H, m->wout);
    gln_tensor_t tgw = gln_tensor_make(GLN_DTYPE_FP32, LM_VOCAB, m->H, m->gwout);
    gln_tensor_t tdy = gln_tensor_make(GLN_DTYPE_FP32, m->T, m->H, m->dy);
    TRY(gln_gemm(m->ctx, GLN_LAYOUT_NT, &ty, &tdl, &tgw, NULL, acc)); /* dWout = dlogitsᵀ · y */
    TRY(gln_gemm(m->ctx, GLN_LAYOUT_NN, &tw, &tdl, &tdy, NULL, 0)); /* dy = dlogits · Wout */
    TRY(moe_model_backward(m->moe, m->dy));
    /* dEmb[c][ctx[t, c]] += dx[t] */
    return top_embed_backward(m->ctx, moe_model_input_grad(m->moe), m->ctx_bytes, m->T, m->C, m->H, acc, m->gemb);
}

gln_status_t lm_model_step(lm_model_t *m) {
    TRY(moe_model_step(m->moe));
    /* this rank's gradients, summed over the step's microbatches, over every rank: one all-reduce */
    if (gln_comm_size(m->comm) > 1)
        TRY(gln_comm_allreduce(m->comm, m->grad, m->grad, (size_t)m->nparam, GLN_DTYPE_FP32, GLN_REDUCE_SUM));
    /* the same Adam as the MoE's parameters, the same 1-based step (or the clock's corrections) */
    const gln_optimizer_config_t oc = top_optimizer_config(m->lr, m->clock);
    return gln_optimizer_step(m->ctx, &oc, ++m->step, m->param, m->grad, m->adam.m, m->adam.v, m->nparam, NULL,
                              GLN_DTYPE_FP32);
}

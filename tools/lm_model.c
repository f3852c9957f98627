/* The byte-level language model (see lm_model.h for the wiring). */
#include "lm_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "task.h"

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
    /* parameters and gradients, one block each: [emb C·256·H | wout 256·H | bout 256] */
    float *param, *grad;
    int64_t nparam;
    adam_state_t adam;
    float *emb, *wout, *bout, *gemb, *gwout, *gbout; /* views into param / grad */
    /* activations */
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

/* Seeded initial weights: each embedding N(0, 1/C) so x ~ N(0, 1) as the teacher task's inputs;
 * the head N(0, 1/H); bias 0. */
static void init_params(lm_model_t *m, uint64_t seed) {
    task_weights(seed, 20, m->C, LM_VOCAB, m->H, 1.0 / sqrt((double)m->C), 0, m->emb);
    task_weights(seed, 21, 1, LM_VOCAB, m->H, 1.0 / sqrt((double)m->H), 0, m->wout);
}

static gln_status_t alloc_all(lm_model_t *m) {
    const size_t np = (size_t)m->nparam, th = (size_t)(m->T * m->H);
    if (!(m->param = tool_alloc(np, sizeof(float), "the language model's weights")) ||
        !(m->grad = tool_alloc(np, sizeof(float), "the language model's gradients")) ||
        !(m->adam.m = tool_alloc(np, sizeof(float), "the language model's Adam moments")) ||
        !(m->adam.v = tool_alloc(np, sizeof(float), "the language model's Adam moments")) ||
        !(m->x = tool_alloc(th, sizeof(float), "the embeddings x [tokens, hidden]")) ||
        !(m->y = tool_alloc(th, sizeof(float), "the MoE outputs y [tokens, hidden]")) ||
        !(m->dy = tool_alloc(th, sizeof(float), "the gradients dy [tokens, hidden]")) ||
        !(m->probs = tool_alloc((size_t)(m->T * LM_VOCAB), sizeof(float), "the logits [tokens, 256]")))
        return GLN_STATUS_OUT_OF_MEMORY;
    return GLN_STATUS_SUCCESS;
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
    gln_status_t st = alloc_all(m);
    if (st == GLN_STATUS_SUCCESS) {
        set_views(m);
        init_params(m, cfg->seed);
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
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(m);
}

/* x[t] = Σ_c emb[c][ctx[t, c]] */
static void embed(lm_model_t *m) {
    const int64_t H = m->H, C = m->C;
    for (int64_t t = 0; t < m->T; t++) {
        float *x = m->x + t * H;
        memset(x, 0, (size_t)H * sizeof *x);
        for (int64_t c = 0; c < C; c++) {
            const float *e = m->emb + (c * LM_VOCAB + m->ctx_bytes[t * C + c]) * H;
            for (int64_t h = 0; h < H; h++) x[h] += e[h];
        }
    }
}

/* probs[t] = softmax(logits[t]) in place; returns −log probs[t][next] (computed in double). */
static double softmax_ce(float *row, int next) {
    float mx = row[0];
    for (int v = 1; v < LM_VOCAB; v++) mx = row[v] > mx ? row[v] : mx;
    const double shifted = (double)row[next] - mx;
    double sum = 0;
    for (int v = 0; v < LM_VOCAB; v++) {
        row[v] = expf(row[v] - mx);
        sum += row[v];
    }
    const float inv = (float)(1.0 / sum);
    for (int v = 0; v < LM_VOCAB; v++) row[v] *= inv;
    return log(sum) - shifted;
}

gln_status_t lm_model_forward(lm_model_t *m, const uint8_t *ctx, const uint8_t *next, double *tok_loss) {
    m->ctx_bytes = ctx;
    m->next = next;
    embed(m);
    TRY(moe_model_forward(m->moe, m->x, m->y));
    gln_tensor_t tw = gln_tensor_make(GLN_DTYPE_FP32, LM_VOCAB, m->H, m->wout);
    gln_tensor_t ty = gln_tensor_make(GLN_DTYPE_FP32, m->T, m->H, m->y);
    gln_tensor_t tl = gln_tensor_make(GLN_DTYPE_FP32, m->T, LM_VOCAB, m->probs);
    TRY(gln_gemm(m->ctx, GLN_LAYOUT_TN, &tw, &ty, &tl, NULL, 0));
    for (int64_t t = 0; t < m->T; t++) {
        float *row = m->probs + t * LM_VOCAB;
        for (int v = 0; v < LM_VOCAB; v++) row[v] += m->bout[v];
        tok_loss[t] = softmax_ce(row, next[t]);
    }
    return GLN_STATUS_SUCCESS;
}

/* dlogits = scale · (probs − onehot(next)) in place; the bias gradient is its column sum. */
static void dlogits(lm_model_t *m, float scale) {
    memset(m->gbout, 0, LM_VOCAB * sizeof *m->gbout);
    for (int64_t t = 0; t < m->T; t++) {
        float *row = m->probs + t * LM_VOCAB;
        row[m->next[t]] -= 1.0f;
        for (int v = 0; v < LM_VOCAB; v++) {
            row[v] *= scale;
            m->gbout[v] += row[v];
        }
    }
}

/* dEmb[c][ctx[t, c]] += dx[t] */
static void embed_backward(lm_model_t *m, const float *dx) {
    const int64_t H = m->H, C = m->C;
    memset(m->gemb, 0, (size_t)(C * LM_VOCAB * H) * sizeof *m->gemb);
    for (int64_t t = 0; t < m->T; t++)
        for (int64_t c = 0; c < C; c++) {
            float *g = m->gemb + (c * LM_VOCAB + m->ctx_bytes[t * C + c]) * H;
            for (int64_t h = 0; h < H; h++) g[h] += dx[t * H + h];
        }
}

gln_status_t lm_model_backward(lm_model_t *m, float scale) {
    dlogits(m, scale);
    gln_tensor_t tdl = gln_tensor_make(GLN_DTYPE_FP32, m->T, LM_VOCAB, m->probs);
    gln_tensor_t ty = gln_tensor_make(GLN_DTYPE_FP32, m->T, m->H, m->y);
    gln_tensor_t tw = gln_tensor_make(GLN_DTYPE_FP32, LM_VOCAB, m->H, m->wout);
    gln_tensor_t tgw = gln_tensor_make(GLN_DTYPE_FP32, LM_VOCAB, m->H, m->gwout);
    gln_tensor_t tdy = gln_tensor_make(GLN_DTYPE_FP32, m->T, m->H, m->dy);
    TRY(gln_gemm(m->ctx, GLN_LAYOUT_NT, &ty, &tdl, &tgw, NULL, 0)); /* dWout = dlogitsᵀ · y */
    TRY(gln_gemm(m->ctx, GLN_LAYOUT_NN, &tw, &tdl, &tdy, NULL, 0)); /* dy = dlogits · Wout */
    TRY(moe_model_backward(m->moe, m->dy));
    embed_backward(m, moe_model_input_grad(m->moe));
    return gln_comm_allreduce(m->comm, m->grad, m->grad, (size_t)m->nparam, GLN_DTYPE_FP32,
                              GLN_REDUCE_SUM);
}

gln_status_t lm_model_step(lm_model_t *m) {
    TRY(moe_model_step(m->moe));
    float bc1, bc2;
    adam_bias_corrections(++m->step, &bc1, &bc2);
    adam_update(m->param, m->grad, &m->adam, m->nparam, m->lr, bc1, bc2);
    return GLN_STATUS_SUCCESS;
}

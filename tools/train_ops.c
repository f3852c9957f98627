/* The training tool's own element-wise ops (train_ops.h): the CPU loops, which are the
 * reference, and the dispatch to the CUDA kernels of train_ops_cuda.cu. */
#include "train_ops.h"

#include <math.h>
#include <string.h>

#include "cli.h"
#include "exact.h"
#include "task.h"

#ifdef GLN_TOOL_CUDA
#include "train_ops_cuda.h"
#define ON_DEVICE(ctx, call) \
    if (top_on_device(ctx)) return (call)
#else
/* no CUDA in this build: a CUDA context cannot exist, but say so rather than touch its memory */
#define ON_DEVICE(ctx, call) \
    if (top_on_device(ctx)) return GLN_STATUS_NOT_SUPPORTED
#endif

int top_on_device(const gln_context_t *ctx) { return gln_context_backend(ctx) == GLN_BACKEND_CUDA; }

gln_status_t top_zero(gln_context_t *ctx, void *p, size_t bytes) {
    ON_DEVICE(ctx, topc_zero(ctx, p, bytes));
    if (bytes) memset(p, 0, bytes);
    return GLN_STATUS_SUCCESS;
}

/* gln_optimizer_step's host computation for its 1-based step = step + 1 (double, rounded once) */
static void clock_bc(int64_t step, float *bc1, float *bc2) {
    *bc1 = (float)(1.0 - pow(TOP_ADAM_BETA1, (double)(step + 1)));
    *bc2 = (float)(1.0 - pow(TOP_ADAM_BETA2, (double)(step + 1)));
}

gln_status_t top_clock_reset(gln_context_t *ctx, top_clock_t *clock) {
    ON_DEVICE(ctx, topc_clock(ctx, clock, 1));
    clock->step = -1;
    clock->bc1 = clock->bc2 = 0.0f;
    return GLN_STATUS_SUCCESS;
}

gln_status_t top_clock_tick(gln_context_t *ctx, top_clock_t *clock) {
    ON_DEVICE(ctx, topc_clock(ctx, clock, 0));
    clock->step++;
    clock_bc(clock->step, &clock->bc1, &clock->bc2);
    return GLN_STATUS_SUCCESS;
}

gln_optimizer_config_t top_optimizer_config(float lr, const top_clock_t *clock) {
    gln_optimizer_config_t c = GLN_OPTIMIZER_CONFIG_INIT;
    c.kind = GLN_OPTIMIZER_ADAM;
    c.lr = lr;
    c.beta1 = TOP_ADAM_BETA1;
    c.beta2 = TOP_ADAM_BETA2;
    c.eps = TOP_ADAM_EPS;
    c.weight_decay = 0.0f;
    /* {bc1, bc2} adjacent in the clock (top_clock_t) */
    c.bias_corrections = clock ? &clock->bc1 : NULL;
    return c;
}

gln_status_t top_embed(gln_context_t *ctx, const float *emb, const uint8_t *bytes, int64_t T, int64_t C,
                       int64_t H, float *x) {
    ON_DEVICE(ctx, topc_embed(ctx, emb, bytes, T, C, H, x));
    for (int64_t t = 0; t < T; t++) {
        float *xt = x + t * H;
        memset(xt, 0, (size_t)H * sizeof *xt);
        for (int64_t c = 0; c < C; c++) {
            const float *e = emb + (c * 256 + bytes[t * C + c]) * H;
            for (int64_t h = 0; h < H; h++) xt[h] += e[h];
        }
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t top_embed_backward(gln_context_t *ctx, const float *dx, const uint8_t *bytes, int64_t T, int64_t C,
                                 int64_t H, int accumulate, float *gemb) {
    ON_DEVICE(ctx, topc_embed_backward(ctx, dx, bytes, T, C, H, accumulate, gemb));
    if (!accumulate) memset(gemb, 0, (size_t)(C * 256 * H) * sizeof *gemb);
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < C; c++) {
            float *g = gemb + (c * 256 + bytes[t * C + c]) * H;
            for (int64_t h = 0; h < H; h++) g[h] += dx[t * H + h];
        }
    return GLN_STATUS_SUCCESS;
}

/* probs = softmax(row) in place; returns −log probs[next] (computed in double). */
static double softmax_ce_row(float *row, int next) {
    float mx = row[0];
    for (int v = 1; v < 256; v++) mx = row[v] > mx ? row[v] : mx;
    const double shifted = (double)row[next] - mx;
    double sum = 0;
    for (int v = 0; v < 256; v++) {
        row[v] = expf(row[v] - mx);
        sum += row[v];
    }
    const float inv = (float)(1.0 / sum);
    for (int v = 0; v < 256; v++) row[v] *= inv;
    return log(sum) - shifted;
}

gln_status_t top_softmax_ce(gln_context_t *ctx, float *rows, const float *bias, const uint8_t *next, int64_t T,
                            double *loss) {
    ON_DEVICE(ctx, topc_softmax_ce(ctx, rows, bias, next, T, loss));
    for (int64_t t = 0; t < T; t++) {
        float *row = rows + t * 256;
        for (int v = 0; v < 256; v++) row[v] += bias[v];
        loss[t] = softmax_ce_row(row, next[t]);
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t top_dlogits(gln_context_t *ctx, float *rows, const uint8_t *next, int64_t T, float scale,
                         int accumulate, float *gbias) {
    ON_DEVICE(ctx, topc_dlogits(ctx, rows, next, T, scale, accumulate, gbias));
    if (!accumulate) memset(gbias, 0, 256 * sizeof *gbias);
    for (int64_t t = 0; t < T; t++) {
        float *row = rows + t * 256;
        row[next[t]] -= 1.0f;
        for (int v = 0; v < 256; v++) {
            row[v] *= scale;
            gbias[v] += row[v];
        }
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t top_exact_round(gln_context_t *ctx, float *v, int64_t n, int frac) {
    ON_DEVICE(ctx, topc_exact_round(ctx, v, n, frac));
    exact_round_array(v, (size_t)n, frac);
    return GLN_STATUS_SUCCESS;
}

gln_status_t top_loss_sum(gln_context_t *ctx, const double *loss, int64_t count, const top_clock_t *clock,
                          int accumulate, double *out) {
    ON_DEVICE(ctx, topc_loss_sum(ctx, loss, count, clock, accumulate, out));
    double s = 0;
    for (int64_t t = 0; t < count; t++) s += loss[t];
    double *o = out + (clock ? clock->step : 0);
    *o = accumulate ? *o + s : s;
    return GLN_STATUS_SUCCESS;
}

/* The window whose target is byte i. */
static void window(const uint8_t *text, int64_t C, int64_t i, uint8_t *bytes, uint8_t *next) {
    memcpy(bytes, text + i - C, (size_t)C);
    *next = text[i];
}

gln_status_t top_train_windows(gln_context_t *ctx, const uint8_t *text, int64_t train, int64_t C, uint64_t seed,
                               const top_clock_t *clock, int64_t first, int64_t count, uint8_t *bytes,
                               uint8_t *next) {
    ON_DEVICE(ctx, topc_train_windows(ctx, text, train, C, seed, clock, first, count, bytes, next));
    /* lm_data.c's lm_train_windows: one splitmix stream per (step, window) */
    const uint64_t targets = (uint64_t)(train - C);
    for (int64_t w = 0; w < count; w++) {
        tool_rng_t r = tool_rng_seed(seed ^ 0x7E47ull, (uint64_t)clock->step * 0x100000001ull + (uint64_t)(first + w));
        const int64_t i = C + (int64_t)(tool_rng_u64(&r) % targets);
        window(text, C, i, bytes + w * C, next + w);
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t top_val_windows(gln_context_t *ctx, const uint8_t *text, int64_t size, int64_t train, int64_t C,
                             int64_t first, int64_t count, uint8_t *bytes, uint8_t *next) {
    ON_DEVICE(ctx, topc_val_windows(ctx, text, size, train, C, first, count, bytes, next));
    const int64_t last = size - train - C - 1;
    for (int64_t w = 0; w < count; w++) {
        const int64_t j = first + w < last ? first + w : last;
        window(text, C, train + C + j, bytes + w * C, next + w);
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t top_graph_begin(gln_context_t *ctx) {
    ON_DEVICE(ctx, topc_graph_begin(ctx));
    return GLN_STATUS_NOT_SUPPORTED;
}

gln_status_t top_graph_end(gln_context_t *ctx, top_graph_t **graph) {
    *graph = NULL;
    ON_DEVICE(ctx, topc_graph_end(ctx, graph));
    return GLN_STATUS_NOT_SUPPORTED;
}

gln_status_t top_graph_launch(gln_context_t *ctx, top_graph_t *graph) {
    ON_DEVICE(ctx, topc_graph_launch(ctx, graph));
    return GLN_STATUS_NOT_SUPPORTED;
}

void top_graph_destroy(top_graph_t *graph) {
#ifdef GLN_TOOL_CUDA
    topc_graph_destroy(graph);
#else
    (void)graph;
#endif
}

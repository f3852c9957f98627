/* The CUDA kernels of train_ops.h (train_ops_cuda.cu), one launcher per op, each on the
 * context's stream (gln_context_stream) with no host wait.  Called by train_ops.c only. */
#ifndef GLN_TOOLS_TRAIN_OPS_CUDA_H
#define GLN_TOOLS_TRAIN_OPS_CUDA_H

#include "train_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

gln_status_t topc_zero(gln_context_t *ctx, void *p, size_t bytes);
/* reset = 1: step = -1; else the tick */
gln_status_t topc_clock(gln_context_t *ctx, top_clock_t *clock, int reset);
gln_status_t topc_embed(gln_context_t *ctx, const float *emb, const uint8_t *bytes, int64_t T, int64_t C,
                        int64_t H, float *x);
gln_status_t topc_embed_backward(gln_context_t *ctx, const float *dx, const uint8_t *bytes, int64_t T,
                                 int64_t C, int64_t H, int accumulate, float *gemb);
gln_status_t topc_softmax_ce(gln_context_t *ctx, float *rows, const float *bias, const uint8_t *next, int64_t T,
                             double *loss);
gln_status_t topc_dlogits(gln_context_t *ctx, float *rows, const uint8_t *next, int64_t T, float scale,
                          int accumulate, float *gbias);
gln_status_t topc_exact_round(gln_context_t *ctx, float *v, int64_t n, int frac);
gln_status_t topc_loss_sum(gln_context_t *ctx, const double *loss, int64_t count, const top_clock_t *clock,
                           int accumulate, double *out);
gln_status_t topc_train_windows(gln_context_t *ctx, const uint8_t *text, int64_t train, int64_t C,
                                uint64_t seed, const top_clock_t *clock, int64_t first, int64_t count,
                                uint8_t *bytes, uint8_t *next);
gln_status_t topc_val_windows(gln_context_t *ctx, const uint8_t *text, int64_t size, int64_t train, int64_t C,
                              int64_t first, int64_t count, uint8_t *bytes, uint8_t *next);

gln_status_t topc_graph_begin(gln_context_t *ctx);
gln_status_t topc_graph_end(gln_context_t *ctx, top_graph_t **graph);
gln_status_t topc_graph_launch(gln_context_t *ctx, top_graph_t *graph);
void topc_graph_destroy(top_graph_t *graph);

#ifdef __cplusplus
}
#endif
#endif

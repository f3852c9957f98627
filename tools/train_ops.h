/* The few element-wise pieces of `grouplin train` that the library does not provide -- the step
 * clock, the language model's embedding and its softmax cross-entropy head, the training windows
 * -- on buffers in the memory of the context's backend: a host loop on the CPU, a small kernel on
 * the context's stream on CUDA (train_ops_cuda.cu), so a whole training step stays on the GPU.
 * The optimizer is not one of them: every parameter steps with the library's
 * gln_optimizer_step (or its sharded form), configured by top_optimizer_config.
 *
 * Each CPU loop is the reference its kernel is tested against (tests/cli/train_ops_test.c):
 *   bitwise    zero fill, the --exact-data grid rounding, embedding forward and
 *              backward (FP32 sums in token order), dlogits and the bias gradient, the loss sum
 *              (double, token order), the training / validation windows;
 *   tolerance  softmax cross-entropy and the probabilities (device expf / log), the bias
 *              corrections of the device clock (device pow).
 * Nothing here waits for the device.  Without the CUDA backend the CUDA branch reports
 * GLN_STATUS_NOT_SUPPORTED. */
#ifndef GLN_TOOLS_TRAIN_OPS_H
#define GLN_TOOLS_TRAIN_OPS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "grouplin.h"

/* Adam (beta1 0.9, beta2 0.999, eps 1e-8, no weight decay), the optimizer of every parameter of
 * `grouplin train`. */
#define TOP_ADAM_BETA1 0.9f
#define TOP_ADAM_BETA2 0.999f
#define TOP_ADAM_EPS 1e-8f

/* The step clock in backend memory, advanced on the device so that a captured step replays
 * correctly: step = index of the step running now (0-based), bc = Adam's bias corrections
 * 1 - beta^(step + 1) computed in double and rounded to float once -- on the CPU exactly what
 * gln_optimizer_step computes for its 1-based step = clock step + 1. */
typedef struct top_clock {
    int64_t step;
    float bc1, bc2; /* adjacent: gln_optimizer_config_t.bias_corrections reads them as {bc1, bc2} */
} top_clock_t;

/* 1 when ctx runs on the CUDA backend (buffers in device memory). */
int top_on_device(const gln_context_t *ctx);

/* p[0, bytes) = 0. */
gln_status_t top_zero(gln_context_t *ctx, void *p, size_t bytes);
/* clock->step = -1 (before the first tick). */
gln_status_t top_clock_reset(gln_context_t *ctx, top_clock_t *clock);
/* ++clock->step and its bias corrections (bc = (float)(1 - pow(beta, step + 1))). */
gln_status_t top_clock_tick(gln_context_t *ctx, top_clock_t *clock);

/* gln_optimizer_step's configuration for every parameter of the tool: Adam with the TOP_ADAM_*
 * constants, learning rate lr, no weight decay.  Its bias corrections come from *clock (backend
 * memory: a step captured in a CUDA graph replays with the clock's values) when clock is not
 * NULL, else from the step's 1-based `step` argument; the clock ticked for the step running now
 * holds those of step = clock->step + 1 (bitwise on the CPU; on CUDA up to the device pow). */
gln_optimizer_config_t top_optimizer_config(float lr, const top_clock_t *clock);

/* x[t] = Σ_c emb[c·256 + bytes[t·C + c]] (rows of H FP32), summed from 0 in c order. */
gln_status_t top_embed(gln_context_t *ctx, const float *emb, const uint8_t *bytes, int64_t T, int64_t C,
                       int64_t H, float *x);
/* gemb = 0 (unless accumulate: gradient accumulation continues the sums already there), then
 * gemb[c·256 + bytes[t·C + c]] += dx[t] for t in order (per row: a sum in token order).  On CUDA T·C is at most TOP_EMBED_BWD_MAX_PAIRS (the kernel's int32 token indices and
 * list positions) and C at most 65535, else GLN_STATUS_NOT_SUPPORTED. */
#define TOP_EMBED_BWD_MAX_PAIRS ((int64_t)INT32_MAX / 2)
gln_status_t top_embed_backward(gln_context_t *ctx, const float *dx, const uint8_t *bytes, int64_t T, int64_t C,
                                 int64_t H, int accumulate, float *gemb);
/* rows [T, 256]: row += bias, row = softmax(row) in place, loss[t] = −log softmax[next[t]]
 * (nats, double). */
gln_status_t top_softmax_ce(gln_context_t *ctx, float *rows, const float *bias, const uint8_t *next, int64_t T,
                            double *loss);
/* rows = scale·(probs − onehot(next)) in place; gbias[v] = Σ_t rows[t][v] (token order; with
 * accumulate, added to gbias[v]: on the CPU the sum continues from it). */
gln_status_t top_dlogits(gln_context_t *ctx, float *rows, const uint8_t *next, int64_t T, float scale,
                         int accumulate, float *gbias);
/* --exact-data (exact.h): v[i] = exact_round(v[i], frac), bitwise the host function's result. */
gln_status_t top_exact_round(gln_context_t *ctx, float *v, int64_t n, int frac);
/* *out = Σ_{t < count} loss[t] in token order (double); out in backend memory; with clock,
 * written to out[clock->step] instead; with accumulate, the sum is added to what is there (the
 * step's earlier microbatches). */
gln_status_t top_loss_sum(gln_context_t *ctx, const double *loss, int64_t count, const top_clock_t *clock,
                          int accumulate, double *out);

/* The text's bytes [size] in backend memory, and the windows of lm_data.h read from them:
 * training windows of step clock->step (ctx [count, C], next [count]), or validation windows
 * [first, first + count). */
gln_status_t top_train_windows(gln_context_t *ctx, const uint8_t *text, int64_t train, int64_t C, uint64_t seed,
                               const top_clock_t *clock, int64_t first, int64_t count, uint8_t *bytes,
                               uint8_t *next);
gln_status_t top_val_windows(gln_context_t *ctx, const uint8_t *text, int64_t size, int64_t train, int64_t C,
                             int64_t first, int64_t count, uint8_t *bytes, uint8_t *next);

/* A captured step (CUDA graphs; NOT_SUPPORTED on the CPU): begin capturing the context's stream,
 * end the capture into *graph (an instantiated graph), replay it, release it. */
typedef struct top_graph top_graph_t;
gln_status_t top_graph_begin(gln_context_t *ctx);
gln_status_t top_graph_end(gln_context_t *ctx, top_graph_t **graph);
gln_status_t top_graph_launch(gln_context_t *ctx, top_graph_t *graph);
void top_graph_destroy(top_graph_t *graph);

#endif

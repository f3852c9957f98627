/* The MoE MLP that `grouplin train` trains, wired from the public API:
 *
 *   logits = x · Wrᵀ                 FP32 router [E, H] (gln_gemm), replicated on every rank
 *   experts, gates = top-k softmax    gln_moe_router_forward
 *   xp = permute(x)                   tokens grouped by expert (m_splits, row_of)
 *   h  = FC1(xp)                      gln_grouped_linear [H → 2F] (SwiGLU) or [H → F] (GELU)
 *   a  = act(h)                       gln_activation_forward
 *   yp = FC2(a)                       gln_grouped_linear [F → H]
 *   y  = Σ_j gates · yp               gln_moe_unpermute (FP32 output)
 *
 * Expert weights live in one gln_sharded_weights group per layer (working dtype = the recipe's
 * activation dtype), on a self communicator for one process or over MPI.  The optimizer is Adam
 * on FP32 masters, the library's (gln_optimizer_step, top_optimizer_config's hyper-parameters):
 * each rank updates its own shard from its main_grad shard (Adam moments sharded alike) and
 * refreshes the working copy in the same pass (gln_sharded_weights_optimizer_step; under
 * --exact-data the step, the grid rounding, then gln_sharded_weights_sync_working); the router
 * gradient is all-reduced and every rank updates its full copy.
 *
 * Every buffer is in the memory of the context's backend, so on CUDA the whole step runs on the
 * device: the MoE ops' kernels, the grouped path with the device-computed splits
 * (splits_on_backend), the optimizer step; the sharded group's communicator is then bound to the
 * device context (a self communicator for one GPU). */
#ifndef GLN_TOOLS_MOE_MODEL_H
#define GLN_TOOLS_MOE_MODEL_H

#include <stdint.h>

#include "grouplin.h"
#include "options.h"
#include "train_ops.h"

typedef struct moe_shape {
    int64_t hidden, ffn;
    int32_t experts, topk;
    gln_activation_t act;
} moe_shape_t;

typedef struct moe_model_config {
    moe_shape_t shape;
    const tool_recipe_t *recipe;
    gln_path_t path;
    uint64_t seed;      /* weight initialisation */
    int64_t tokens;     /* tokens per step on this rank */
    int exact;          /* --exact-data grids (exact.h) */
    int trainable;      /* 0: forward only (the teacher) */
    float lr;           /* Adam */
    int quantized_weights; /* FP8 current / block, MXFP8 where in_features % 128 == 0: the expert shards stored quantized (quantized_shard) */
    /* Adam's bias corrections from this clock (backend memory, advanced on the device: a captured
     * step replays right) instead of the model's own step count; NULL: the model's count.  The
     * clock is ticked once per optimizer step before moe_model_step, so that clock->step + 1 is
     * the model's 1-based count and both give the same corrections. */
    const top_clock_t *clock;
} moe_model_config_t;

typedef struct moe_model moe_model_t;

gln_status_t moe_model_create(gln_context_t *ctx, gln_comm_t *comm, const moe_model_config_t *cfg,
                              moe_model_t **model);
void moe_model_destroy(moe_model_t *m);
/* y [tokens, H] (FP32) from x [tokens, H] (FP32; kept by reference until backward); both in
 * backend memory.  microbatch: its index within the optimizer step (gradient accumulation, as
 * Megatron runs TE's is_first_microbatch): 0 runs the expert layers with GLN_MICROBATCH_FIRST and
 * its backward overwrites the gradients, a later one runs them with GLN_MICROBATCH_NEXT and its
 * backward adds to them.  The expert weights are a distributed group, whose gathered copies the
 * layer never caches (docs/design.md, distributed weights): every microbatch gathers them again
 * — FP8 bytes when the shards are stored quantized (cfg.quantized_weights under FP8 current /
 * block scaling and MXFP8: quantized once per optimizer step, in moe_model_step), else the working dtype,
 * which the layer quantizes. */
gln_status_t moe_model_forward(moe_model_t *m, const float *x, float *y, int64_t microbatch);
/* Gradients of the loss for dy [tokens, H] of the last forward: expert grads into the shards'
 * main_grad, the router grad into this rank's own sum (overwritten by microbatch 0, added to by
 * the later ones), and dL/dx (experts and router) for a preceding layer. */
gln_status_t moe_model_backward(moe_model_t *m, const float *dy);
/* dL/dx [tokens, H] (FP32) of the last backward; owned by the model. */
const float *moe_model_input_grad(const moe_model_t *m);
/* One Adam step on every parameter, from the gradients summed over the step's microbatches (the
 * router's all-reduced over the ranks first). */
gln_status_t moe_model_step(moe_model_t *m);

/* Adam's moments (backend memory, zeroed at creation), the exp_avg and exp_avg_sq of
 * gln_optimizer_step, whose configuration (top_optimizer_config) lm_model.c shares. */
typedef struct adam_state {
    float *m, *v;
} adam_state_t;

/* FLOPs of the expert GEMMs (fprop + dgrad + wgrad) for `pairs` (token, expert) rows. */
double moe_expert_flops(const moe_shape_t *s, int64_t pairs);

#endif

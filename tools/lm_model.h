/* The byte-level language model of `grouplin train --task lm`: the MoE MLP of moe_model.c
 * between an embedding of the previous `context` bytes and a projection to 256 logits.
 *
 *   x      = Σ_c Emb_c[byte_c]        one FP32 table [256, H] per context position c: summing
 *                                      them is a linear layer over the concatenated one-hot
 *                                      bytes, the simplest mixing that still knows positions
 *   y      = moe(x)                    moe_model.c, unchanged (its expert weights stay sharded)
 *   logits = y · Woutᵀ + b             FP32 [256, H] and [256] (gln_gemm)
 *   loss   = −log softmax(logits)[next byte]   in nats, per token
 *
 * The embeddings and the head are replicated on every rank: their gradients are all-reduced
 * (one buffer) and every rank takes the same Adam step, as the router's (the library's
 * gln_optimizer_step, configured as the whole tool's by top_optimizer_config).  Every buffer, the
 * byte arguments and the losses included, is in the memory of the context's backend (the
 * embedding and the loss are train_ops.h kernels on CUDA). */
#ifndef GLN_TOOLS_LM_MODEL_H
#define GLN_TOOLS_LM_MODEL_H

#include <stdint.h>

#include "moe_model.h"

enum { LM_VOCAB = 256 };

typedef struct lm_model lm_model_t;

/* cfg: the MoE MLP (cfg->tokens per rank per step; exact must be 0); context: bytes seen. */
gln_status_t lm_model_create(gln_context_t *ctx, gln_comm_t *comm, const moe_model_config_t *cfg,
                             int64_t context, lm_model_t **model);
void lm_model_destroy(lm_model_t *m);
/* ctx [tokens, context] bytes, next [tokens]: tok_loss[t] = cross-entropy of token t (nats,
 * double); all three in backend memory, kept by reference until backward.  microbatch: its index
 * within the optimizer step (moe_model_forward): 0 overwrites the gradients, later ones add. */
gln_status_t lm_model_forward(lm_model_t *m, const uint8_t *ctx, const uint8_t *next, double *tok_loss,
                              int64_t microbatch);
/* Gradients of scale · Σ_t tok_loss[t] for the last forward, into this rank's sums over the
 * step's microbatches. */
gln_status_t lm_model_backward(lm_model_t *m, float scale);
/* One Adam step on every parameter, the gradients all-reduced over the ranks first. */
gln_status_t lm_model_step(lm_model_t *m);

#endif

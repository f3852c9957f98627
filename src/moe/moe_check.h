/* Argument checks shared by the MoE building blocks (router, permutation, activations).
 *
 * src/moe validates every argument once, at the public boundary, and dispatches to the
 * backend's slots (backend.h; the CPU reference is src/backend/cpu/cpu_moe.c).  These helpers
 * validate a context and the high-precision tensor descriptors, recording messages that name
 * the call and the argument.  The checks of index contents (experts, row_of) read them on the
 * host, after the slot check, and only where the host reads the backend's memory (the CPU); the
 * CUDA kernels check their indices on the device instead (clamp, and record the first bad one
 * for gln_context_async_error, as the grouped path does with device splits). */
#ifndef GLN_MOE_CHECK_H
#define GLN_MOE_CHECK_H

#include "grouplin.h"

/* ctx must be non-NULL (whether its backend has the op is the dispatcher's slot check). */
gln_status_t gln_moe_check_ctx(const char *fn, const gln_context_t *ctx);
/* t must be a plain high-precision tensor (fp32 / bf16 / fp16, no scaling) within the size
 * limits and of exactly [rows, cols], with data present when it has elements.  `name` is the
 * argument's name. */
gln_status_t gln_moe_check_tensor(const char *fn, const char *name, const gln_tensor_t *t,
                                  int64_t rows, int64_t cols);
/* 1 when the host reads ctx's backend memory, so index contents are checked here. */
int gln_moe_host_indices(const gln_context_t *ctx);
/* Every row_of[i] for i < count lies in [0, rows). */
gln_status_t gln_moe_check_rows(const char *fn, const int64_t *row_of, int64_t count, int64_t rows);
/* tokens in [0, GLN_MAX_DIM], k >= 1, and the tokens·k permuted rows <= GLN_MAX_DIM. */
gln_status_t gln_moe_check_tokens_k(const char *fn, int64_t tokens, int32_t k);

#endif

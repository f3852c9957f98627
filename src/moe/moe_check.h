/* Argument checks shared by the MoE building blocks (router, permutation, activations).
 *
 * src/moe validates every argument once, at the public boundary, and dispatches to the
 * backend's slots (backend.h; the CPU reference is src/backend/cpu/cpu_moe.c).  These helpers
 * validate a context and the high-precision tensor descriptors, recording messages that name
 * the call and the argument.  The checks of index contents (experts, row_of) read them on the
 * host: they run after the slot check, so today only the CPU backend reaches them; a device
 * backend that gets these slots must check its indices on the device (as the grouped path
 * does with device splits). */
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
/* Every row_of[i] for i < count lies in [0, rows). */
gln_status_t gln_moe_check_rows(const char *fn, const int64_t *row_of, int64_t count, int64_t rows);
/* tokens in [0, GLN_MAX_DIM], k >= 1, and the tokens·k permuted rows <= GLN_MAX_DIM. */
gln_status_t gln_moe_check_tokens_k(const char *fn, int64_t tokens, int32_t k);

#endif

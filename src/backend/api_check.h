/* Argument checks for the public GEMM and reduction entry points (gemm_api.c, reduce_api.c).
 * Each records a message naming the call and the argument and returns
 * GLN_STATUS_INVALID_ARGUMENT (or GLN_STATUS_NOT_SUPPORTED for valid but unsupported input). */
#ifndef GLN_BACKEND_API_CHECK_H
#define GLN_BACKEND_API_CHECK_H

#include "grouplin.h"

/* Letters of a layout ("TN", "NN", "NT"; "invalid"). */
const char *gln_arg_layout_name(gln_gemm_layout_t layout);

/* t: non-NULL, a plain high-precision tensor (no scaling), rows, cols >= 0, data present when
 * it has elements. */
gln_status_t gln_arg_hp_tensor(const char *fn, const char *name, const gln_tensor_t *t);
/* A GEMM operand (high precision, or quantized with the copy `columnwise` present). */
gln_status_t gln_arg_operand(const char *fn, const char *name, const gln_tensor_t *t, int columnwise,
                             gln_gemm_layout_t layout);
/* A and B both high precision or both quantized in compatible modes. */
gln_status_t gln_arg_operand_pair(const char *fn, const char *an, const gln_tensor_t *A, const char *bn,
                                  const gln_tensor_t *B);
/* A GEMM output: non-NULL, fp32 / bf16 / fp16 of exactly [rows, cols]. */
gln_status_t gln_arg_output(const char *fn, const char *name, const gln_tensor_t *D, int64_t rows,
                            int64_t cols, const char *why);
/* A bias of n elements ([1, n] or [n, 1]), any high-precision dtype. */
gln_status_t gln_arg_bias(const char *fn, const char *name, const gln_tensor_t *bias, int64_t n);
/* A grouped tensor's header: num >= 1, splits present; when `read_splits`, every split >= 0
 * and their sum <= packed.rows (the sum is returned in *sum, else *sum = -1). */
gln_status_t gln_arg_grouped(const char *fn, const char *name, const gln_grouped_tensor_t *g,
                             int read_splits, int64_t *sum);
/* One GEMM dimension `what` (m, n or k, named after the argument it comes from) within the
 * context's backend limit (ops->max_gemm_dim; NOT_SUPPORTED past it). */
gln_status_t gln_arg_gemm_dim(const char *fn, const gln_context_t *ctx, const char *what, int64_t v);
/* Whether splits of g can be read on the host for this context (host splits, or CPU backend). */
int gln_arg_splits_readable(const gln_context_t *ctx, const gln_grouped_tensor_t *g);

#endif

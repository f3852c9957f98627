/* What the CUDA backend's dispatch accepts, as its `supports` slot (gln_backend_supports).
 *
 * Only combinations that the dispatcher has already found valid, on an op whose slot is set
 * (the MXFP8 swizzle has none: answered 0 before this is asked; the MoE ops run every valid
 * high-precision dtype, cuda_moe.cu) and with
 * operands that may meet on any backend, reach this.  What is left are the refusals inside the
 * backend, each mirrored from the code that returns GLN_STATUS_NOT_SUPPORTED:
 *   GEMM, GROUPED_GEMM (cuda_gemm.c gemm_plan; the grouped GEMM runs the same per-expert code
 *   wherever no CUTLASS kernel fits):
 *     - high-precision A and B of different dtypes (one cuBLASLt input type for both);
 *     - per-tensor FP8 E5M2 x E5M2 (cuBLASLt has no such kernel on sm_90).
 *   MXFP8 pairs are dequantized to bf16 and block-scaled pairs widened per 128-wide K block, for
 *   any FP8 dtypes; every quantization mode, dequantization, dbias, amax and cast of valid
 *   dtypes runs.
 * Plain C without CUDA headers: compiled into every build, so its answers are tested on machines
 * without CUDA too (tests/test_supports.c). */
#include "backend/backend.h"

static int gemm_supported(const gln_op_query_t *q) {
    if (!gln_dtype_is_fp8(q->a_dtype)) return q->a_dtype == q->b_dtype;
    if (q->a_scaling == GLN_SCALING_TENSOR)
        return !(q->a_dtype == GLN_DTYPE_FP8_E5M2 && q->b_dtype == GLN_DTYPE_FP8_E5M2);
    return 1;
}

int gln_cuda_supports(const gln_op_query_t *query) {
    switch (query->op) {
    case GLN_OP_GEMM:
    case GLN_OP_GROUPED_GEMM: return gemm_supported(query);
    default: return 1;
    }
}

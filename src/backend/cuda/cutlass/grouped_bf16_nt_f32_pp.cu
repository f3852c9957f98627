/* Grouped wgrad into the FP32 main_grad, bf16, medium regime: the pingpong kernel of
 * grouped_bf16_nt_f32_pp.cuh (why it, and the lab's numbers, are there). */
#include "backend/cuda/cutlass/grouped_bf16_nt_f32_pp.cuh"

extern "C" gln_status_t gln_cutlass_run_bf16_nt_f32_pp(gln_context_t *ctx, const gln_cutlass_grouped_t *g,
                                                       const char *call) {
    return gln_cutlass::run<GlnWgradBf16Pingpong>(ctx, g, call);
}

/* The FP8 wgrad into FP32 below the large regime, E4M3 gradient (grouped_fp8_wgrad_pp.cuh). */
#include "backend/cuda/cutlass/grouped_fp8_wgrad_pp.cuh"

extern "C" gln_status_t gln_cutlass_run_e4m3_wgrad_pp(gln_context_t *ctx, const gln_cutlass_grouped_t *g,
                                                      const char *call) {
    return gln_cutlass::run<GlnFp8WgradPingpong<cutlass::float_e4m3_t>>(ctx, g, call);
}

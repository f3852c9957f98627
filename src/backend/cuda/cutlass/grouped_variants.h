/* More instantiations of cutlass/grouped_sm90.cuh, same contract as the entry points declared in
 * cuda_backend.h; cuda_grouped_gemm.c picks them:
 *   the small-expert regime (grouped_*_small.cu): many experts of at most a few hundred rows,
 *   pingpong schedule (the bf16 wgrad: cooperative 128×256), no cluster (see the tile-regime
 *   heuristic there; the FP8 wgrads into FP32 use the medium regime's pingpong 64×128 kernels);
 *   other output dtypes (g->d_dtype): fp16 / fp32 from E4M3 × E4M3 TN / NN, bf16 wgrads. */
#ifndef GLN_BACKEND_CUDA_CUTLASS_GROUPED_VARIANTS_H
#define GLN_BACKEND_CUDA_CUTLASS_GROUPED_VARIANTS_H

#include "backend/cuda/cuda_backend.h"

gln_status_t gln_cutlass_run_bf16_tn_small(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
gln_status_t gln_cutlass_run_bf16_nn_small(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
/* the medium regime's bf16 wgrad into FP32: pingpong 128×128, 64×64 epilogue subtiles */
gln_status_t gln_cutlass_run_bf16_nt_f32_pp(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
gln_status_t gln_cutlass_run_e4m3_tn_fast_small(gln_context_t *ctx, const gln_cutlass_grouped_t *g,
                                                const char *call);
gln_status_t gln_cutlass_run_e4m3_tn_small(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
/* promoted FP8 (the dgrads) of large experts: cooperative 128×192 */
gln_status_t gln_cutlass_run_e4m3_tn_large(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
gln_status_t gln_cutlass_run_e5m2_e4m3_tn_large(gln_context_t *ctx, const gln_cutlass_grouped_t *g,
                                                const char *call);

gln_status_t gln_cutlass_run_e4m3_tn_fast_f16(gln_context_t *ctx, const gln_cutlass_grouped_t *g,
                                              const char *call);
gln_status_t gln_cutlass_run_e4m3_tn_f16(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
gln_status_t gln_cutlass_run_e4m3_tn_fast_f32(gln_context_t *ctx, const gln_cutlass_grouped_t *g,
                                              const char *call);
gln_status_t gln_cutlass_run_e4m3_tn_f32(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
gln_status_t gln_cutlass_run_bf16_nt_bf16(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
/* the FP8 wgrads into FP32 below the large regime: pingpong 64×128, 64×64 epilogue subtiles */
gln_status_t gln_cutlass_run_e4m3_wgrad_pp(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
gln_status_t gln_cutlass_run_e5m2_e4m3_wgrad_pp(gln_context_t *ctx, const gln_cutlass_grouped_t *g,
                                                const char *call);
gln_status_t gln_cutlass_run_e4m3_wgrad_bf16(gln_context_t *ctx, const gln_cutlass_grouped_t *g,
                                             const char *call);
gln_status_t gln_cutlass_run_e5m2_e4m3_wgrad_bf16(gln_context_t *ctx, const gln_cutlass_grouped_t *g,
                                                  const char *call);

/* cuda_grouped_gemm.c: the kernel lab's hook (see there); NULL outside the lab. */
extern gln_status_t (*gln_cutlass_lab_kernel)(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
/* cuda_grouped_gemm.c: the kernel lab's promotion interval for every planned call (see there). */
extern int32_t gln_cutlass_lab_promotion_k;

#endif

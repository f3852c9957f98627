/* CUDA slots of the distributed-weights group (backend.h: add_f32, scales_from_amax, grouped_amax,
 * transpose_batched); their CPU twins are src/backend/cpu/cpu_dist.c (tests/test_nccl_layer.c,
 * tests/test_cuda_grouped_amax.c and tests/test_cuda_transpose.c compare them). */
#ifndef GLN_BACKEND_CUDA_DIST_H
#define GLN_BACKEND_CUDA_DIST_H

#include "backend/transpose.h"
#include "grouplin.h"

#ifdef __cplusplus
extern "C" {
#endif
gln_status_t gln_cuda_add_f32(gln_context_t *ctx, float *y, const float *x, int64_t n);
gln_status_t gln_cuda_scales_from_amax(gln_context_t *ctx, const float *amax, int32_t n,
                                       float fp8_max, int power_2_scale, float epsilon,
                                       float *scale, float *scale_inv);
/* cuda_transpose.cu */
gln_status_t gln_cuda_transpose_batched(gln_context_t *ctx, const gln_transpose_t *t);
/* cuda_grouped_amax.cu */
gln_status_t gln_cuda_grouped_amax(gln_context_t *ctx, const gln_grouped_tensor_t *x, int nan_propagate,
                                   float *amax);
#ifdef __cplusplus
}
#endif

#endif

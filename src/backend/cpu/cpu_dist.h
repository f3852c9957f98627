/* CPU slots of the distributed-weights group (backend.h: add_f32, scales_from_amax, grouped_amax,
 * transpose_batched).  They are
 * also the *_ref twins of the CUDA kernels in cuda_dist.cu. */
#ifndef GLN_BACKEND_CPU_DIST_H
#define GLN_BACKEND_CPU_DIST_H

#include "backend/transpose.h"
#include "grouplin.h"

gln_status_t gln_cpu_add_f32(gln_context_t *ctx, float *y, const float *x, int64_t n);
gln_status_t gln_cpu_scales_from_amax(gln_context_t *ctx, const float *amax, int32_t n,
                                      float fp8_max, int power_2_scale, float epsilon,
                                      float *scale, float *scale_inv);
gln_status_t gln_cpu_grouped_amax(gln_context_t *ctx, const gln_grouped_tensor_t *x, int nan_propagate,
                                  float *amax);
gln_status_t gln_cpu_transpose_batched(gln_context_t *ctx, const gln_transpose_t *t);

#endif

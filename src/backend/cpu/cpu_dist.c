/* CPU slots of the distributed-weights group: FP32 accumulation into main_grad and the
 * current-scaling scale of a global amax (numerics.h's one definition of the rule). */
#include "backend/cpu/cpu_dist.h"

#include "numerics/numerics.h"

gln_status_t gln_cpu_add_f32(gln_context_t *ctx, float *y, const float *x, int64_t n) {
    (void)ctx;
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_cpu_scales_from_amax(gln_context_t *ctx, const float *amax, int32_t n,
                                      float fp8_max, int power_2_scale, float epsilon,
                                      float *scale, float *scale_inv) {
    (void)ctx;
    for (int32_t i = 0; i < n; i++) {
        scale[i] = gln_scale_from_amax_impl(amax[i], fp8_max, power_2_scale, epsilon, GLN_FP32_MAX);
        scale_inv[i] = 1.0f / scale[i];
    }
    return GLN_STATUS_SUCCESS;
}

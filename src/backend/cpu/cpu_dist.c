/* CPU slots of the distributed-weights group: FP32 accumulation into main_grad and the
 * current-scaling scale of a global amax (numerics.h's one definition of the rule). */
#include "backend/cpu/cpu_dist.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/transpose.h"
#include "common/error.h"
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

/* One amax per member, each exactly the amax slot's (the same element order and NaN rule). */
gln_status_t gln_cpu_grouped_amax(gln_context_t *ctx, const gln_grouped_tensor_t *x, int nan_propagate,
                                  float *amax) {
    const size_t row_bytes = (size_t)x->packed.cols * gln_dtype_size(x->packed.dtype);
    int64_t row = 0;
    for (int32_t i = 0; i < x->num; i++) {
        gln_tensor_t m = gln_tensor_make(x->packed.dtype, x->splits[i], x->packed.cols,
                                         (char *)x->packed.data + (size_t)row * row_bytes);
        GLN_TRY(gln_cpu_amax(ctx, &m, nan_propagate, &amax[i]));
        row += x->splits[i];
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_cpu_transpose_batched(gln_context_t *ctx, const gln_transpose_t *t) {
    (void)ctx;
    gln_transpose_batched_ref(t);
    return GLN_STATUS_SUCCESS;
}

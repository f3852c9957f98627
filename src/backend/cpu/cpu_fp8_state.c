/* The CPU backend's delayed-scaling state slots: the reference the CUDA kernels
 * (src/backend/cuda/cuda_fp8_state.cu) are tested against.  Plain loops over host arrays; the
 * update runs the shared per-slot rule of quant/delayed_rule.h, so it is
 * gln_delayed_scaling_update_ex bit for bit. */
#include "backend/cpu/cpu_backend.h"
#include "numerics/numerics.h"
#include "quant/delayed_rule.h"

gln_status_t gln_cpu_fp8_state_gather(gln_context_t *ctx, const float *state_scale, int32_t first,
                                      int32_t stride, int32_t n, float *scale, float *amax) {
    (void)ctx;
    for (int32_t i = 0; i < n; i++) {
        scale[i] = state_scale[first + (int64_t)i * stride];
        if (amax) amax[i] = 0.0f;
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_cpu_fp8_state_record(gln_context_t *ctx, float *history_row0, int32_t first,
                                      int32_t stride, int32_t n, const float *amax, int nan_propagate) {
    (void)ctx;
    for (int32_t i = 0; i < n; i++) {
        float *h = &history_row0[first + (int64_t)i * stride];
        *h = gln_f32_max_amax(*h, amax[i], nan_propagate);
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_cpu_fp8_state_update(gln_context_t *ctx, int32_t num_slots, int32_t history_len,
                                      float *amax_history, float *scale, const float *fp8_max, int margin,
                                      gln_amax_algo_t algo, const gln_delayed_update_options_t *opts) {
    (void)ctx;
    const float pow2_neg_margin = gln_delayed_pow2_neg_margin(margin);
    for (int32_t k = 0; k < num_slots; k++)
        gln_delayed_update_slot(num_slots, history_len, amax_history, scale, fp8_max, k, pow2_neg_margin, algo,
                                opts->always_roll, opts->amax_nan_propagate);
    return GLN_STATUS_SUCCESS;
}

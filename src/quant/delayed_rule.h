/* The delayed-scaling update rule of one slot: the one definition that the host function
 * gln_delayed_scaling_update_ex (src/quant/delayed.c), the CPU backend's fp8_state_update slot
 * (src/backend/cpu/cpu_fp8_state.c) and the CUDA kernel (src/backend/cuda/cuda_fp8_state.cu)
 * share, so every backend computes the same scales and amax histories bit for bit.
 *
 * The history is [history_len][num_slots], row 0 the newest entry (the one quantizations
 * max-accumulate into).  Every function is `GLN_HD static inline` (host and device). */
#ifndef GLN_QUANT_DELAYED_RULE_H
#define GLN_QUANT_DELAYED_RULE_H

#include <stdint.h>

#include "common/host_device.h"
#include "grouplin.h"
#include "numerics/numerics.h"

/* 2^-margin, exact for margin in [-126, 126] (a normal FP32 power of two). */
GLN_HD static inline float gln_delayed_pow2_neg_margin(int margin) {
    return gln_f32_from_bits((uint32_t)(127 - margin) << 23);
}

/* Amax of slot k's window; "max" ignores NaN entries unless nan_propagate (TE's fmaxf). */
GLN_HD static inline float gln_delayed_window_amax(int32_t num_slots, int32_t history_len, const float *h,
                                                   int32_t k, gln_amax_algo_t algo, int nan_propagate) {
    if (algo == GLN_AMAX_ALGO_MOST_RECENT) return h[k];
    float amax = h[k];
    for (int32_t i = 1; i < history_len; i++)
        amax = gln_f32_max_amax(amax, h[(int64_t)i * num_slots + k], nan_propagate);
    return amax;
}

/* Roll slot k's column left by one (row i takes row i+1, the last row takes row 0), then zero
 * row 0: the next step accumulates into a fresh entry. */
GLN_HD static inline void gln_delayed_window_roll(int32_t num_slots, int32_t history_len, float *h, int32_t k) {
    float first = h[k];
    for (int32_t i = 0; i + 1 < history_len; i++)
        h[(int64_t)i * num_slots + k] = h[(int64_t)(i + 1) * num_slots + k];
    h[(int64_t)(history_len - 1) * num_slots + k] = first;
    h[k] = 0.0f;
}

/* scale[k] from the window's amax: fp8_max[k] · 2^-margin / amax (FLT_MAX when that overflows); a
 * 0, NaN or Inf amax keeps the old scale. */
GLN_HD static inline void gln_delayed_set_scale(float *scale, const float *fp8_max, int32_t k, float amax,
                                                float pow2_neg_margin) {
    if (!gln_f32_isfinite(amax) || !(amax > 0.0f)) return; /* keep the old scale */
    float s = fp8_max[k] * pow2_neg_margin / amax;
    scale[k] = gln_f32_isinf(s) ? GLN_FP32_MAX : s;
}

/* One update step of slot k: the window's amax, the roll, and scale[k] = fp8_max[k] · 2^-margin
 * / amax (FLT_MAX when that overflows).  A 0, NaN or Inf amax keeps the old scale.
 * pow2_neg_margin = gln_delayed_pow2_neg_margin(margin). */
GLN_HD static inline void gln_delayed_update_slot(int32_t num_slots, int32_t history_len, float *h, float *scale,
                                                  const float *fp8_max, int32_t k, float pow2_neg_margin,
                                                  gln_amax_algo_t algo, int always_roll, int nan_propagate) {
    /* TE's bulk update skips a slot that saw nothing this step (e.g. an expert without tokens):
     * rolling would push its history out for no new information. */
    if (!always_roll && h[k] == 0.0f) return;
    float amax = gln_delayed_window_amax(num_slots, history_len, h, k, algo, nan_propagate);
    gln_delayed_window_roll(num_slots, history_len, h, k);
    gln_delayed_set_scale(scale, fp8_max, k, amax, pow2_neg_margin);
}

#endif

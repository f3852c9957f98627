/* Host-side scale rules: the current / block scale from an amax, and one step of the delayed
 * scaling state machine (amax history window + scales, caller-owned; the per-slot rule is
 * quant/delayed_rule.h, shared with the backends' fp8_state_update slots). */
#include <string.h>

#include "common/error.h"
#include "numerics/numerics.h"
#include "quant/delayed_rule.h"

float gln_scale_from_amax(float amax, float fp8_max, int power_2_scale, float epsilon, float value_for_inf) {
    return gln_scale_from_amax_impl(amax, fp8_max, power_2_scale, epsilon, value_for_inf);
}

static gln_status_t gln_delayed_check(int32_t num_slots, int32_t history_len, const float *amax_history,
                                      const float *scale, const float *fp8_max, int margin,
                                      gln_amax_algo_t algo) {
    static const char *fn = "gln_delayed_scaling_update";
    GLN_REQUIRE_ARG(num_slots >= 1, "%s: num_slots %d must be >= 1", fn, (int)num_slots);
    GLN_REQUIRE_ARG(history_len >= 1, "%s: history_len %d must be >= 1", fn, (int)history_len);
    /* the history is one buffer: held to the element limit of every buffer (no int32 product
     * wraps, and no state larger than memory is walked) */
    GLN_REQUIRE_ARG((int64_t)num_slots * history_len <= GLN_MAX_ELEMS,
                    "%s: the amax history [history_len %d][num_slots %d] holds %lld elements, more "
                    "than GLN_MAX_ELEMS = 2^56", fn, (int)history_len, (int)num_slots,
                    (long long)((int64_t)num_slots * history_len));
    GLN_REQUIRE_NOT_NULL(fn, amax_history);
    GLN_REQUIRE_NOT_NULL(fn, scale);
    GLN_REQUIRE_NOT_NULL(fn, fp8_max);
    GLN_REQUIRE_ARG(margin >= -126 && margin <= 126, "%s: margin %d must be in [-126, 126]", fn, margin);
    GLN_REQUIRE_ARG(algo == GLN_AMAX_ALGO_MAX || algo == GLN_AMAX_ALGO_MOST_RECENT,
                    "%s: algo %d must be MAX (0) or MOST_RECENT (1)", fn, (int)algo);
    for (int32_t k = 0; k < num_slots; k++)
        GLN_REQUIRE_ARG(gln_f32_isfinite(fp8_max[k]) && fp8_max[k] > 0.0f,
                        "%s: fp8_max[%d] %g must be finite and > 0", fn, (int)k, (double)fp8_max[k]);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_delayed_scaling_update_ex(int32_t num_slots, int32_t history_len, float *amax_history,
                                           float *scale, const float *fp8_max, int margin,
                                           gln_amax_algo_t algo,
                                           const gln_delayed_update_options_t *opts) {
    GLN_TRY(gln_delayed_check(num_slots, history_len, amax_history, scale, fp8_max, margin, algo));
    gln_delayed_update_options_t o = GLN_DELAYED_UPDATE_OPTIONS_INIT;
    if (opts) {
        /* Exactly the sizes of known versions (today one). */
        GLN_REQUIRE_ARG(opts->size == sizeof o,
                        "gln_delayed_scaling_update_ex: opts->size %zu is not a known version "
                        "(expected %zu; start from GLN_DELAYED_UPDATE_OPTIONS_INIT)",
                        opts->size, sizeof o);
        memcpy(&o, opts, sizeof o);
        GLN_REQUIRE_ARG(o.always_roll == 0 || o.always_roll == 1,
                        "gln_delayed_scaling_update_ex: opts->always_roll %d must be 0 or 1",
                        o.always_roll);
        GLN_REQUIRE_ARG(o.amax_nan_propagate == 0 || o.amax_nan_propagate == 1,
                        "gln_delayed_scaling_update_ex: opts->amax_nan_propagate %d must be 0 or 1",
                        o.amax_nan_propagate);
    }
    const float pow2_neg_margin = gln_delayed_pow2_neg_margin(margin);
    for (int32_t k = 0; k < num_slots; k++)
        gln_delayed_update_slot(num_slots, history_len, amax_history, scale, fp8_max, k, pow2_neg_margin, algo,
                                o.always_roll, o.amax_nan_propagate);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_delayed_scaling_update(int32_t num_slots, int32_t history_len, float *amax_history,
                                        float *scale, const float *fp8_max, int margin,
                                        gln_amax_algo_t algo) {
    return gln_delayed_scaling_update_ex(num_slots, history_len, amax_history, scale, fp8_max, margin,
                                         algo, NULL);
}

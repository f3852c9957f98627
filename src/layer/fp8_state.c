/* Delayed-scaling state of the layer (FP8_DELAYED only), kept in HOST memory on every backend
 * because gln_delayed_scaling_update is a host function and the caller reads it through
 * gln_grouped_linear_fp8_state.
 *
 * Slots: forward 3N (input 3i, weight 3i+1, output 3i+2 unused), backward 2N (grad_output 2i,
 * grad_input 2i+1 unused).  scale starts at 1, the history at 0.  A quantization stages the
 * current scales into a backend array, quantizes with them, and max-accumulates the amaxes it
 * saw into history row 0 (NaN ignored unless cfg->amax_nan_propagate).  The update follows TE's
 * bulk rule unless cfg->always_roll (gln_delayed_update_options_t).  Schedule: the forward slots
 * are updated (one gln_delayed_scaling_update_ex step) at the end of every training forward,
 * the backward slots at the end of every backward — so each step's data uses the scales
 * derived from the previous steps. */
#include <math.h>
#include <stdlib.h>

#include "layer/layer.h"
#include "numerics/numerics.h"

gln_status_t gln_fp8_state_init(gln_fp8_state_t *st, int32_t slots, int32_t history_len,
                                float fp8_max, const gln_grouped_linear_config_t *cfg) {
    gln_delayed_update_options_t opts = GLN_DELAYED_UPDATE_OPTIONS_INIT;
    opts.always_roll = cfg->always_roll;
    opts.amax_nan_propagate = cfg->amax_nan_propagate;
    st->opts = opts;
    st->slots = slots;
    st->history_len = history_len;
    st->scale = malloc((size_t)slots * sizeof(float));
    st->fp8_max = malloc((size_t)slots * sizeof(float));
    st->amax_history = calloc((size_t)slots * (size_t)history_len, sizeof(float));
    if (!st->scale || !st->fp8_max || !st->amax_history) {
        gln_fp8_state_free(st);
        return gln_fail(GLN_STATUS_OUT_OF_MEMORY,
                        "gln_grouped_linear_create: out of host memory for the delayed-scaling state");
    }
    for (int32_t i = 0; i < slots; i++) {
        st->scale[i] = 1.0f;
        st->fp8_max[i] = fp8_max;
    }
    return GLN_STATUS_SUCCESS;
}

void gln_fp8_state_free(gln_fp8_state_t *st) {
    free(st->scale);
    free(st->fp8_max);
    free(st->amax_history);
    st->scale = st->fp8_max = st->amax_history = NULL;
}

gln_status_t gln_fp8_state_stage(gln_context_t *ctx, const gln_fp8_state_t *st, int32_t first,
                                 int32_t stride, int32_t n, float *scale, float *amax) {
    if (n == 0) return GLN_STATUS_SUCCESS;
    float *tmp = malloc((size_t)n * sizeof(float));
    if (!tmp) return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "delayed scaling: out of host memory");
    for (int32_t i = 0; i < n; i++) tmp[i] = st->scale[first + i * stride];
    gln_status_t s = ctx->ops->memcpy(ctx, scale, tmp, (size_t)n * sizeof(float),
                                      GLN_COPY_HOST_TO_BACKEND);
    free(tmp);
    if (s != GLN_STATUS_SUCCESS) return s;
    return gln_ctx_zero(ctx, amax, (size_t)n * sizeof(float));
}

gln_status_t gln_fp8_state_record(gln_context_t *ctx, gln_fp8_state_t *st, int32_t first,
                                  int32_t stride, int32_t n, const float *amax) {
    if (n == 0) return GLN_STATUS_SUCCESS;
    float *tmp = malloc((size_t)n * sizeof(float));
    if (!tmp) return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "delayed scaling: out of host memory");
    gln_status_t s = ctx->ops->memcpy(ctx, tmp, amax, (size_t)n * sizeof(float),
                                      GLN_COPY_BACKEND_TO_HOST);
    if (s == GLN_STATUS_SUCCESS) {
        for (int32_t i = 0; i < n; i++) {
            float *h = &st->amax_history[first + i * stride]; /* row 0 */
            /* NaN is ignored, as in every amax (TE's fmaxf rule), unless the layer propagates it. */
            *h = gln_f32_max_amax(*h, tmp[i], st->opts.amax_nan_propagate);
        }
    }
    free(tmp);
    return s;
}

gln_status_t gln_fp8_state_update(gln_fp8_state_t *st, int margin, gln_amax_algo_t algo) {
    return gln_delayed_scaling_update_ex(st->slots, st->history_len, st->amax_history, st->scale,
                                         st->fp8_max, margin, algo, &st->opts);
}

gln_status_t gln_fp8_stage_values(gln_context_t *ctx, const float *scales, int32_t n, float *scale,
                                  float *amax) {
    if (n == 0) return GLN_STATUS_SUCCESS;
    GLN_TRY(ctx->ops->memcpy(ctx, scale, scales, (size_t)n * sizeof(float), GLN_COPY_HOST_TO_BACKEND));
    return gln_ctx_zero(ctx, amax, (size_t)n * sizeof(float));
}

/* Delayed-scaling state of the layer (FP8_DELAYED only), kept in BACKEND memory: on CUDA it
 * never leaves the device during a step — scales are gathered into a quantization's scale array,
 * its amaxes recorded into history row 0 and the update run by the backend's fp8_state_* slots,
 * all in stream order with no host wait, so a step can be captured in a graph.
 * The host sees the state only through gln_grouped_linear_fp8_state (gln_fp8_state_host).
 *
 * Slots: forward 3N (input 3i, weight 3i+1, output 3i+2 unused), backward 2N (grad_output 2i,
 * grad_input 2i+1 unused).  scale starts at 1, the history at 0.  A quantization stages the
 * current scales into a backend array, quantizes with them, and max-accumulates the amaxes it
 * saw into history row 0 (NaN ignored unless cfg->amax_nan_propagate).  The update follows TE's
 * bulk rule unless cfg->always_roll (gln_delayed_update_options_t), bit for bit
 * gln_delayed_scaling_update_ex.  Schedule: the forward slots are updated at the end of every
 * training forward, the backward slots at the end of every backward — so each step's data uses
 * the scales derived from the previous steps. */
#include <stdlib.h>

#include "layer/layer.h"

static const char *STATE_CALL = "delayed scaling";

/* Fill the backend array dst[n] with `value` through a host staging copy (create only). */
static gln_status_t fill_backend(gln_context_t *ctx, float *dst, int32_t n, float value) {
    float *tmp = malloc((size_t)n * sizeof(float));
    GLN_REQUIRE(tmp != NULL, GLN_STATUS_OUT_OF_MEMORY,
                "gln_grouped_linear_create: out of host memory for the delayed-scaling state");
    for (int32_t i = 0; i < n; i++) tmp[i] = value;
    gln_status_t st = gln_op_memcpy(ctx, dst, tmp, (size_t)n * sizeof(float), GLN_COPY_HOST_TO_BACKEND);
    free(tmp);
    return st;
}

static gln_status_t state_alloc(gln_context_t *ctx, gln_fp8_state_t *st, float fp8_max) {
    size_t n = (size_t)st->slots, hist = n * (size_t)st->history_len;
    GLN_TRY(gln_ctx_alloc(ctx, n * sizeof(float), (void **)&st->scale));
    GLN_TRY(gln_ctx_alloc(ctx, n * sizeof(float), (void **)&st->fp8_max));
    GLN_TRY(gln_ctx_alloc(ctx, hist * sizeof(float), (void **)&st->amax_history));
    GLN_TRY(fill_backend(ctx, st->scale, st->slots, 1.0f));
    GLN_TRY(fill_backend(ctx, st->fp8_max, st->slots, fp8_max));
    return gln_ctx_zero(ctx, st->amax_history, hist * sizeof(float));
}

gln_status_t gln_fp8_state_init(gln_context_t *ctx, gln_fp8_state_t *st, int32_t slots, int32_t history_len,
                                float fp8_max, const gln_grouped_linear_config_t *cfg) {
    gln_delayed_update_options_t opts = GLN_DELAYED_UPDATE_OPTIONS_INIT;
    opts.always_roll = cfg->always_roll;
    opts.amax_nan_propagate = cfg->amax_nan_propagate;
    st->opts = opts;
    st->slots = slots;
    st->history_len = history_len;
    gln_status_t s = state_alloc(ctx, st, fp8_max);
    if (s != GLN_STATUS_SUCCESS) gln_fp8_state_free(ctx, st);
    return s;
}

void gln_fp8_state_free(gln_context_t *ctx, gln_fp8_state_t *st) {
    gln_ctx_free(ctx, st->scale);
    gln_ctx_free(ctx, st->fp8_max);
    gln_ctx_free(ctx, st->amax_history);
    free(st->host_scale);
    free(st->host_history);
    st->scale = st->fp8_max = st->amax_history = st->host_scale = st->host_history = NULL;
}

gln_status_t gln_fp8_state_stage(gln_context_t *ctx, const gln_fp8_state_t *st, int32_t first,
                                 int32_t stride, int32_t n, float *scale, float *amax) {
    if (n == 0) return GLN_STATUS_SUCCESS;
    return gln_op_fp8_state_gather(ctx, STATE_CALL, st->scale, first, stride, n, scale, amax);
}

gln_status_t gln_fp8_state_record(gln_context_t *ctx, gln_fp8_state_t *st, int32_t first,
                                  int32_t stride, int32_t n, const float *amax) {
    if (n == 0) return GLN_STATUS_SUCCESS;
    /* NaN is ignored, as in every amax (TE's fmaxf rule), unless the layer propagates it. */
    return gln_op_fp8_state_record(ctx, STATE_CALL, st->amax_history, first, stride, n, amax,
                                   st->opts.amax_nan_propagate);
}

gln_status_t gln_fp8_state_update(gln_context_t *ctx, gln_fp8_state_t *st, int margin, gln_amax_algo_t algo) {
    return gln_op_fp8_state_update(ctx, STATE_CALL, st->slots, st->history_len, st->amax_history, st->scale,
                                   st->fp8_max, margin, algo, &st->opts);
}

gln_status_t gln_fp8_stage_values(gln_context_t *ctx, const float *scales, int32_t n, float *scale,
                                  float *amax) {
    if (n == 0) return GLN_STATUS_SUCCESS;
    return gln_op_fp8_state_gather(ctx, STATE_CALL, scales, 0, 1, n, scale, amax);
}

/* Host copies into the mirrors, allocated on first use (then reused until the layer dies). */
static gln_status_t copy_to_mirrors(const char *fn, gln_context_t *ctx, gln_fp8_state_t *st) {
    size_t n = (size_t)st->slots, hist = n * (size_t)st->history_len;
    if (!st->host_scale) st->host_scale = malloc(n * sizeof(float));
    if (!st->host_history) st->host_history = malloc(hist * sizeof(float));
    GLN_REQUIRE(st->host_scale && st->host_history, GLN_STATUS_OUT_OF_MEMORY,
                "%s: out of host memory for the copy of the delayed-scaling state", fn);
    GLN_TRY(gln_op_memcpy(ctx, st->host_scale, st->scale, n * sizeof(float), GLN_COPY_BACKEND_TO_HOST));
    return gln_op_memcpy(ctx, st->host_history, st->amax_history, hist * sizeof(float), GLN_COPY_BACKEND_TO_HOST);
}

gln_status_t gln_fp8_state_host(const char *fn, gln_context_t *ctx, gln_fp8_state_t *st, float **scale,
                                float **amax_history) {
    if (ctx->kind == GLN_BACKEND_CPU) {
        /* backend memory is host memory: the state itself (live, as before it moved) */
        *scale = st->scale;
        *amax_history = st->amax_history;
        return GLN_STATUS_SUCCESS;
    }
    GLN_TRY(copy_to_mirrors(fn, ctx, st));
    *scale = st->host_scale;
    *amax_history = st->host_history;
    return GLN_STATUS_SUCCESS;
}

/* Lifecycle of the grouped linear layer: create, destroy, weights_updated, fp8_state. */
#include <stdlib.h>

#include "layer/layer.h"

static const char *FN = "gln_grouped_linear_create";

static gln_status_t layer_setup(gln_grouped_linear_t *L) {
    GLN_TRY(gln_layer_params_init(L));
    if (!L->recipe.delayed) return GLN_STATUS_SUCCESS;
    int32_t len = L->cfg.amax_history_len;
    GLN_TRY(gln_fp8_state_init(L->ctx, &L->fp8_fwd, 3 * L->n, len, gln_fp8_max(L->recipe.input.fp8_dtype),
                               &L->cfg));
    return gln_fp8_state_init(L->ctx, &L->fp8_bwd, 2 * L->n, len, gln_fp8_max(L->recipe.grad.fp8_dtype), &L->cfg);
}

static void layer_free(gln_grouped_linear_t *L) {
    gln_wgrad_queue_clear(L);
    gln_weight_cache_unref(L->ctx, L->cache);
    gln_ctx_free(L->ctx, L->owned_y);
    gln_fp8_state_free(L->ctx, &L->fp8_fwd);
    gln_fp8_state_free(L->ctx, &L->fp8_bwd);
    gln_layer_params_free(L);
    free(L);
}

gln_status_t gln_grouped_linear_create(gln_context_t *ctx, const gln_grouped_linear_config_t *cfg,
                                       gln_grouped_linear_t **layer) {
    GLN_REQUIRE_NOT_NULL(FN, layer);
    *layer = NULL;
    GLN_REQUIRE_NOT_NULL(FN, ctx);
    GLN_REQUIRE_NOT_NULL(FN, cfg);
    gln_grouped_linear_config_t c;
    GLN_TRY(gln_layer_config_load(FN, cfg, &c));
    GLN_TRY(gln_layer_config_validate(ctx, &c));
    c.fp8_format = gln_layer_fp8_format_resolve(c.recipe, c.fp8_format);
    gln_grouped_linear_t *L = calloc(1, sizeof *L);
    GLN_REQUIRE(L != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", FN);
    L->ctx = ctx;
    L->cfg = c;
    L->n = c.num_experts;
    L->kin = c.in_features;
    L->kout = c.out_features;
    L->dist = c.params.distributed;
    gln_layer_recipe_init(&c, &L->recipe);
    gln_status_t st = layer_setup(L);
    if (st != GLN_STATUS_SUCCESS) {
        layer_free(L);
        return st;
    }
    *layer = L;
    return GLN_STATUS_SUCCESS;
}

/* Saved contexts point at their layer, so they must be released first: destroying a layer
 * with live saved contexts is refused (GLN_STATUS_INVALID_STATE) and changes nothing. */
gln_status_t gln_grouped_linear_destroy(gln_grouped_linear_t *layer) {
    if (!layer) return GLN_STATUS_SUCCESS;
    GLN_REQUIRE(layer->live_saved == 0, GLN_STATUS_INVALID_STATE,
                "gln_grouped_linear_destroy: %d saved context(s) are still alive; release them "
                "with gln_grouped_linear_saved_release first",
                layer->live_saved);
    /* A finalize this layer left pending is completed, never dropped (main_grad is final). */
    gln_status_t st = GLN_STATUS_SUCCESS;
    if (layer->dist && layer->dist_pending) {
        layer->dist_pending = 0;
        GLN_DIST_HOOK(st, "wait", -1, layer->dist->wait(layer->dist->impl));
    }
    layer_free(layer);
    return st;
}

gln_status_t gln_grouped_linear_weights_updated(gln_grouped_linear_t *layer) {
    GLN_REQUIRE_NOT_NULL("gln_grouped_linear_weights_updated", layer);
    layer->weight_version++;
    return GLN_STATUS_SUCCESS;
}

/* Host pointers to the layer's delayed-scaling state (FP8_DELAYED only): the state itself on the
 * CPU backend, the layer's host copies, refreshed now, on the others (gln_fp8_state_host). */
gln_status_t gln_grouped_linear_fp8_state(gln_grouped_linear_t *layer, int backward, float **scale,
                                          float **amax_history, int32_t *num_slots,
                                          int32_t *history_len) {
    static const char *fn = "gln_grouped_linear_fp8_state";
    GLN_REQUIRE_NOT_NULL(fn, layer);
    GLN_REQUIRE(layer->recipe.delayed, GLN_STATUS_NOT_SUPPORTED,
                "%s: recipe %s has no delayed-scaling state (only fp8_delayed)", fn,
                gln_recipe_name(layer->cfg.recipe));
    gln_fp8_state_t *st = backward ? &layer->fp8_bwd : &layer->fp8_fwd;
    float *host_scale = NULL, *host_history = NULL;
    if (scale || amax_history) GLN_TRY(gln_fp8_state_host(fn, layer->ctx, st, &host_scale, &host_history));
    if (scale) *scale = host_scale;
    if (amax_history) *amax_history = host_history;
    if (num_slots) *num_slots = st->slots;
    if (history_len) *history_len = st->history_len;
    return GLN_STATUS_SUCCESS;
}

/* The quantized-weight cache for plain weights under an FP8 recipe (TE's is_first_microbatch
 * caching).  One entry: the N quantized weights, the weight version they were made from and
 * the copies (rowwise / columnwise) they hold.
 *
 *   microbatch UNSET : never comes here — no caching, the weights are quantized on every call
 *                      (materialize.c), so a changed weight is never used stale;
 *   microbatch FIRST : re-quantize into the cache (in place when nobody else holds the entry,
 *                      so the buffers keep their addresses);
 *   microbatch NEXT  : reuse the entry when it has the needed copies and was made from the
 *                      current weight version; after gln_grouped_linear_weights_updated (a
 *                      safety check, not the only thing keeping results fresh) or without the
 *                      needed copies, re-quantize.
 * Entries are reference counted: the layer holds one reference, every saved context whose dgrad
 * uses the entry holds another.  When a re-quantization is due while a saved context still
 * holds the entry, a fresh entry replaces it, so an in-flight backward keeps exactly the weights
 * its forward used.  Distributed weights never come here. */
#include <stdlib.h>

#include "layer/layer.h"

void gln_weight_cache_unref(gln_context_t *ctx, gln_weight_cache_entry_t *e) {
    if (!e || --e->refs > 0) return;
    gln_weight_set_free(ctx, &e->w);
    free(e);
}

static gln_status_t cache_entry_fill(gln_grouped_linear_t *L, gln_weight_cache_entry_t *e) {
    gln_weight_set_t src;
    gln_quant_config_t cfg = L->recipe.weight;
    cfg.rowwise = e->rowwise;
    cfg.columnwise = e->columnwise;
    GLN_TRY(gln_weight_set_wrap(L->n, L->cfg.param_dtype, L->kout, L->kin, L->weights, &src));
    gln_status_t st = gln_weights_quantize(L, src.t, &cfg, NULL, &e->w);
    gln_weight_set_free(L->ctx, &src);
    if (st == GLN_STATUS_SUCCESS) e->version = L->weight_version;
    return st;
}

static gln_status_t cache_entry_new(gln_grouped_linear_t *L, int rowwise, int columnwise,
                                    gln_weight_cache_entry_t **out) {
    gln_status_t st;
    gln_weight_cache_entry_t *e = calloc(1, sizeof *e);
    if (!e) return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "grouped linear: out of host memory");
    e->refs = 1;
    e->rowwise = rowwise;
    e->columnwise = columnwise;
    gln_quant_config_t cfg = L->recipe.weight;
    cfg.rowwise = rowwise;
    cfg.columnwise = columnwise;
    GLN_CHECK(st, fail, gln_weight_set_alloc_quantized(L->ctx, &cfg, L->n, L->kout, L->kin, &e->w));
    GLN_CHECK(st, fail, cache_entry_fill(L, e));
    *out = e;
    return GLN_STATUS_SUCCESS;
fail:
    gln_weight_cache_unref(L->ctx, e);
    return st;
}

gln_status_t gln_weight_cache_get(gln_grouped_linear_t *L, gln_microbatch_t mb, int need_row, int need_col,
                                  gln_weight_cache_entry_t **out) {
    gln_weight_cache_entry_t *e = L->cache;
    int has = e && (!need_row || e->rowwise) && (!need_col || e->columnwise);
    int reuse = 0, in_place = 0;
    if (mb == GLN_MICROBATCH_NEXT) reuse = has && e->version == L->weight_version;
    in_place = !reuse && has && e->refs == 1;
    if (reuse) {
        e->refs++;
        *out = e;
        return GLN_STATUS_SUCCESS;
    }
    if (in_place) {
        GLN_TRY(cache_entry_fill(L, e));
        e->refs++;
        *out = e;
        return GLN_STATUS_SUCCESS;
    }
    gln_weight_cache_entry_t *fresh = NULL;
    GLN_TRY(cache_entry_new(L, need_row || (e && e->rowwise), need_col || (e && e->columnwise), &fresh));
    gln_weight_cache_unref(L->ctx, L->cache);
    L->cache = fresh;
    fresh->refs++;
    *out = fresh;
    return GLN_STATUS_SUCCESS;
}

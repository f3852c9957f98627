/* THE weight materialization stage: every GEMM stage of every path gets its weights here and
 * hands them back through gln_materialize_release right after its GEMM (docs/design.md,
 * "Lifetimes").
 *
 *   plain weights, FP8 recipe : microbatch FIRST / NEXT: the quantized-weight cache (cache.c);
 *                               UNSET: quantized into a temporary on every call (no caching)
 *   plain weights, NONE       : the parameters themselves, or a cast to the activation dtype
 *   distributed weights       : materialize_forward / materialize_backward, then quantize (or
 *                               cast) when the copies are high precision, in the form the stage
 *                               needs (rowwise for fprop, columnwise for dgrad); never cached;
 *                               release() + free of the temporary right after the GEMM. */
#include <stdlib.h>
#include <string.h>

#include "layer/layer.h"
#include "tensor/tensor.h"
#include "weights/sharded.h"

/* 1 when the N high-precision weights lie back to back in one buffer (layer-owned parameters,
 * single_grouped_weight, or caller pointers that happen to): then they are one grouped tensor. */
static int weights_contiguous(const gln_tensor_t *src, int32_t n) {
    const size_t bytes = (size_t)src[0].rows * (size_t)src[0].cols * gln_dtype_size(src[0].dtype);
    for (int32_t i = 0; i < n; i++)
        if (src[i].scaling != GLN_SCALING_NONE || src[i].dtype != src[0].dtype ||
            (const char *)src[i].data != (const char *)src[0].data + bytes * (size_t)i)
            return 0;
    return 1;
}

/* All N weights in one grouped quantization (a fixed number of launches on the GPU, not N
 * calls of several each; the same bytes per member as gln_quantize of each weight). */
static gln_status_t quantize_grouped(gln_context_t *ctx, const gln_tensor_t *src, const gln_quant_config_t *cfg,
                                     gln_weight_set_t *dst) {
    const int32_t n = dst->num;
    int64_t *splits = malloc((size_t)n * sizeof *splits);
    if (!splits) return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "grouped linear: out of host memory");
    for (int32_t i = 0; i < n; i++) splits[i] = src[0].rows;
    gln_grouped_tensor_t in = {n, splits, 0, gln_tensor_make(src[0].dtype, dst->packed.rows, src[0].cols,
                                                              src[0].data)};
    gln_grouped_tensor_t out = {n, splits, 0, dst->packed};
    gln_status_t st = gln_op_grouped_quantize(ctx, cfg, &in, &out);
    free(splits);
    return st;
}

gln_status_t gln_weights_quantize(gln_grouped_linear_t *L, const gln_tensor_t *src,
                                  const gln_quant_config_t *cfg, const float *replay_scales,
                                  gln_weight_set_t *dst) {
    gln_context_t *ctx = L->ctx;
    int32_t n = dst->num;
    int record = L->recipe.delayed && !replay_scales;
    if (record) GLN_TRY(gln_fp8_state_stage(ctx, &L->fp8_fwd, 1, 3, n, dst->aux, dst->aux + n));
    if (L->recipe.delayed && replay_scales)
        GLN_TRY(gln_fp8_stage_values(ctx, replay_scales, n, dst->aux, dst->aux + n));
    if ((dst->packed.data || dst->packed.col_data) && weights_contiguous(src, n))
        GLN_TRY(quantize_grouped(ctx, src, cfg, dst));
    else
        for (int32_t i = 0; i < n; i++) GLN_TRY(gln_op_quantize(ctx, cfg, &src[i], &dst->t[i]));
    if (record) GLN_TRY(gln_fp8_state_record(ctx, &L->fp8_fwd, 1, 3, n, dst->aux + n));
    return GLN_STATUS_SUCCESS;
}

/* Cast N weights to `dtype` into a new set. */
static gln_status_t weights_cast(gln_grouped_linear_t *L, const gln_tensor_t *src, gln_dtype_t dtype,
                                 gln_weight_set_t *dst) {
    GLN_TRY(gln_weight_set_alloc_high_precision(L->ctx, dtype, L->n, L->kout, L->kin, dst));
    for (int32_t i = 0; i < L->n; i++) {
        gln_status_t st = gln_op_cast(L->ctx, &src[i], &dst->t[i]);
        if (st != GLN_STATUS_SUCCESS) {
            gln_weight_set_free(L->ctx, dst);
            return st;
        }
    }
    return GLN_STATUS_SUCCESS;
}

static gln_status_t materialize_plain(gln_grouped_linear_t *L, gln_microbatch_t mb, int need_row,
                                      int need_col, gln_materialized_weights_t *mw) {
    if (L->recipe.quantized && mb == GLN_MICROBATCH_UNSET) {
        gln_weight_set_t src;
        gln_quant_config_t cfg = L->recipe.weight;
        cfg.rowwise = need_row;
        cfg.columnwise = need_col;
        GLN_TRY(gln_weight_set_alloc_quantized(L->ctx, &cfg, L->n, L->kout, L->kin, &mw->temp));
        GLN_TRY(gln_weight_set_wrap(L->n, L->cfg.param_dtype, L->kout, L->kin, L->weights, &src));
        gln_status_t st = gln_weights_quantize(L, src.t, &cfg, NULL, &mw->temp);
        gln_weight_set_free(L->ctx, &src);
        GLN_TRY(st);
        mw->w = mw->temp.t;
        return GLN_STATUS_SUCCESS;
    }
    if (L->recipe.quantized) {
        GLN_TRY(gln_weight_cache_get(L, mb, need_row, need_col, &mw->entry));
        mw->w = mw->entry->w.t;
        return GLN_STATUS_SUCCESS;
    }
    gln_dtype_t act = L->cfg.activation_dtype;
    GLN_TRY(gln_weight_set_wrap(L->n, L->cfg.param_dtype, L->kout, L->kin, L->weights, &mw->temp));
    if (L->cfg.param_dtype != act) {
        gln_weight_set_t params = mw->temp;
        memset(&mw->temp, 0, sizeof mw->temp);
        gln_status_t st = weights_cast(L, params.t, act, &mw->temp);
        gln_weight_set_free(L->ctx, &params);
        GLN_TRY(st);
    }
    mw->w = mw->temp.t;
    return GLN_STATUS_SUCCESS;
}

/* The materialized copies must be N full [K_out, K_in] weights in a form this recipe can use. */
static gln_status_t dist_validate(gln_grouped_linear_t *L, const char *hook, const gln_tensor_t *g,
                                  int need_row, int need_col) {
    const gln_layer_recipe_t *r = &L->recipe;
    for (int32_t i = 0; i < L->n; i++) {
        const gln_tensor_t *t = &g[i];
        GLN_REQUIRE(t->rows == L->kout && t->cols == L->kin, GLN_STATUS_INVALID_ARGUMENT,
                    "cfg->params.distributed->%s returned weight %d of shape [%lld, %lld], "
                    "expected [%lld, %lld]",
                    hook, (int)i, (long long)t->rows, (long long)t->cols, (long long)L->kout,
                    (long long)L->kin);
        if (t->scaling == GLN_SCALING_NONE) {
            GLN_REQUIRE(gln_dtype_is_high_precision(t->dtype), GLN_STATUS_INVALID_ARGUMENT,
                        "cfg->params.distributed->%s returned weight %d of dtype %s with scaling "
                        "none, expected fp32, bf16 or fp16", hook, (int)i, gln_dtype_name(t->dtype));
            GLN_REQUIRE(t->data != NULL, GLN_STATUS_INVALID_ARGUMENT,
                        "cfg->params.distributed->%s returned weight %d without data", hook, (int)i);
            continue;
        }
        GLN_REQUIRE(r->quantized && t->scaling == r->weight.mode && gln_dtype_is_fp8(t->dtype),
                    GLN_STATUS_NOT_SUPPORTED,
                    "cfg->params.distributed->%s returned weight %d quantized as %s with scaling mode "
                    "%d, which recipe %s cannot use (expected high precision%s)",
                    hook, (int)i, gln_dtype_name(t->dtype), (int)t->scaling, gln_recipe_name(L->cfg.recipe),
                    r->quantized ? " or FP8 in the recipe's weight scaling mode" : "");
        GLN_REQUIRE((!need_row || (t->data && t->scale_inv)) && (!need_col || (t->col_data && t->col_scale_inv)),
                    GLN_STATUS_NOT_SUPPORTED,
                    "cfg->params.distributed->%s returned quantized weight %d without the %s "
                    "copy (data and scales) this GEMM stage needs",
                    hook, (int)i, need_row ? "rowwise" : "columnwise");
    }
    return GLN_STATUS_SUCCESS;
}

static gln_status_t materialize_dist(gln_grouped_linear_t *L, gln_materialize_stage_t stage, int need_row,
                                     int need_col, const float *replay_scales,
                                     gln_materialized_weights_t *mw) {
    gln_status_t st;
    const gln_dist_weights_t *d = L->dist;
    const char *hook =
        stage == GLN_MATERIALIZE_STAGE_FORWARD ? "materialize_forward" : "materialize_backward";
    gln_tensor_t *g = calloc((size_t)L->n, sizeof *g);
    if (!g) return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "out of host memory");
    GLN_DIST_HOOK(st, hook, -1,
                  stage == GLN_MATERIALIZE_STAGE_FORWARD ? d->materialize_forward(d->impl, g)
                                                         : d->materialize_backward(d->impl, g));
    if (st != GLN_STATUS_SUCCESS) {
        free(g);
        return st;
    }
    mw->gathered = g; /* from here on, release() hands them back */
    GLN_CHECK(st, fail, dist_validate(L, hook, g, need_row, need_col));
    if (L->recipe.quantized && g[0].scaling == GLN_SCALING_NONE) {
        gln_quant_config_t cfg = L->recipe.weight;
        cfg.rowwise = need_row;
        cfg.columnwise = need_col;
        GLN_CHECK(st, fail, gln_weight_set_alloc_quantized(L->ctx, &cfg, L->n, L->kout, L->kin, &mw->temp));
        GLN_CHECK(st, fail, gln_weights_quantize(L, g, &cfg, replay_scales, &mw->temp));
        mw->w = mw->temp.t;
    } else if (!L->recipe.quantized && g[0].dtype != L->cfg.activation_dtype) {
        GLN_CHECK(st, fail, weights_cast(L, g, L->cfg.activation_dtype, &mw->temp));
        mw->w = mw->temp.t;
    } else {
        mw->w = g;
    }
    return GLN_STATUS_SUCCESS;
fail:
    gln_materialize_release(L, mw);
    return st;
}

gln_status_t gln_materialize(gln_grouped_linear_t *L, gln_materialize_stage_t stage, gln_microbatch_t mb,
                             int need_row, int need_col, const float *replay_scales,
                             gln_materialized_weights_t *mw) {
    memset(mw, 0, sizeof *mw);
    if (L->dist) return materialize_dist(L, stage, need_row, need_col, replay_scales, mw);
    return materialize_plain(L, mb, need_row, need_col, mw);
}

gln_status_t gln_materialize_release(gln_grouped_linear_t *L, gln_materialized_weights_t *mw) {
    gln_status_t st = GLN_STATUS_SUCCESS;
    if (mw->gathered) {
        GLN_DIST_HOOK(st, "release", -1, L->dist->release(L->dist->impl, mw->gathered));
        free(mw->gathered);
    }
    gln_weight_set_free(L->ctx, &mw->temp);
    gln_weight_cache_unref(L->ctx, mw->entry);
    memset(mw, 0, sizeof *mw);
    return st;
}

gln_status_t gln_dist_agree_call(gln_grouped_linear_t *L, const char *fn, int call, int dgrad,
                                 int wgrad, int hooks) {
    gln_sharded_weights_t *sw = gln_sharded_of(L->dist);
    if (!sw) return GLN_STATUS_SUCCESS;
    gln_agree_t shape = {{call, L->cfg.recipe, L->cfg.fp8_format, dgrad, wgrad, 0},
                         {"call", "recipe", "fp8_format", "dgrad (dx != NULL)",
                          "wgrad (weights need gradients)", ""}};
    GLN_TRY(gln_sharded_agree(sw, fn, GLN_STATUS_SUCCESS, &shape));
    gln_sharded_call_plan(sw, hooks);
    return GLN_STATUS_SUCCESS;
}

/* Validation of gln_grouped_linear_config_t at create (TE's constraints and ours): one
 * routine rejects every invalid value and every unsupported combination, naming the reason, so
 * nothing fails later deep inside a forward or backward. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "backend/api_check.h"
#include "common/checked.h"
#include "layer/layer.h"
#include "tensor/tensor.h"
#include "weights/sharded.h"

static const char *FN = "gln_grouped_linear_create";

/* Known versions: the first (up to params) and the current one (always_roll and
 * amax_nan_propagate added).  Only the bytes of the caller's version are read. */
gln_status_t gln_layer_config_load(const char *fn, const gln_grouped_linear_config_t *in,
                                   gln_grouped_linear_config_t *out) {
    gln_grouped_linear_config_t def = GLN_GROUPED_LINEAR_CONFIG_INIT;
    const size_t v1 = offsetof(gln_grouped_linear_config_t, always_roll);
    GLN_REQUIRE_ARG(in->size == v1 || in->size == sizeof def,
                    "%s: cfg->size %zu is not a known version (%zu or %zu; start from "
                    "GLN_GROUPED_LINEAR_CONFIG_INIT)",
                    fn, in->size, v1, sizeof def);
    *out = def;
    memcpy(out, in, in->size);
    out->size = sizeof def;
    return GLN_STATUS_SUCCESS;
}

static gln_status_t check_shapes_and_types(const gln_grouped_linear_config_t *c) {
    GLN_REQUIRE_ARG(c->num_experts >= 1, "%s: cfg->num_experts %d must be >= 1", FN, (int)c->num_experts);
    GLN_REQUIRE_ARG(c->in_features >= 1, "%s: cfg->in_features %lld must be >= 1", FN,
                    (long long)c->in_features);
    GLN_REQUIRE_ARG(c->out_features >= 1, "%s: cfg->out_features %lld must be >= 1", FN,
                    (long long)c->out_features);
    GLN_TRY(gln_check_dim(FN, "cfg->in_features", c->in_features));
    GLN_TRY(gln_check_dim(FN, "cfg->out_features", c->out_features));
    /* the layer's packed [N, K_out, K_in] buffers (owned weights, main_grad, quantized copies) */
    int64_t per_expert;
    GLN_TRY(gln_check_elems(FN, "cfg->out_features x cfg->in_features", c->out_features,
                            c->in_features, &per_expert));
    GLN_TRY(gln_check_elems(FN, "cfg->num_experts x out_features x in_features", c->num_experts,
                            per_expert, NULL));
    GLN_REQUIRE_ARG(gln_dtype_is_high_precision(c->param_dtype),
                    "%s: cfg->param_dtype %s must be fp32, bf16 or fp16", FN, gln_dtype_name(c->param_dtype));
    GLN_REQUIRE_ARG(gln_dtype_is_high_precision(c->activation_dtype),
                    "%s: cfg->activation_dtype %s must be fp32, bf16 or fp16", FN,
                    gln_dtype_name(c->activation_dtype));
    GLN_REQUIRE_ARG(c->recipe >= GLN_RECIPE_NONE && c->recipe <= GLN_RECIPE_FP8_BLOCK,
                    "%s: cfg->recipe %d must be 0..4 (none, fp8_delayed, fp8_current, mxfp8, fp8_block)",
                    FN, (int)c->recipe);
    GLN_REQUIRE_ARG(c->fp8_format >= GLN_FP8_FORMAT_E4M3 &&
                        c->fp8_format <= GLN_FP8_FORMAT_RECIPE_DEFAULT,
                    "%s: cfg->fp8_format %d must be 0 (E4M3), 1 (HYBRID) or 2 (RECIPE_DEFAULT); "
                    "pure E5M2 is not a format",
                    FN, (int)c->fp8_format);
    GLN_REQUIRE_ARG(c->path == GLN_PATH_SPLIT || c->path == GLN_PATH_GROUPED,
                    "%s: cfg->path %d must be 0 (split) or 1 (grouped)", FN, (int)c->path);
    return GLN_STATUS_SUCCESS;
}

static gln_status_t check_scaling_options(const gln_grouped_linear_config_t *c) {
    if (c->recipe == GLN_RECIPE_FP8_DELAYED) {
        GLN_REQUIRE_ARG(c->amax_history_len >= 1, "%s: cfg->amax_history_len %d must be >= 1", FN,
                        c->amax_history_len);
        GLN_REQUIRE_ARG(c->amax_algo == GLN_AMAX_ALGO_MAX || c->amax_algo == GLN_AMAX_ALGO_MOST_RECENT,
                        "%s: cfg->amax_algo %d must be 0 (max) or 1 (most recent)", FN,
                        (int)c->amax_algo);
        GLN_REQUIRE_ARG(c->margin >= 0 && c->margin <= 126, "%s: cfg->margin %d must be in 0..126",
                        FN, c->margin);
        /* 3 forward slots per expert (int32 slot indices) and an [L, slots] amax history */
        GLN_REQUIRE_ARG(c->num_experts <= INT32_MAX / 3,
                        "%s: cfg->num_experts %d exceeds %d for recipe fp8_delayed (3 scaling "
                        "slots per expert)", FN, (int)c->num_experts, (int)(INT32_MAX / 3));
        GLN_TRY(gln_check_elems(FN, "cfg->amax_history_len x 3 num_experts", c->amax_history_len,
                                3 * (int64_t)c->num_experts, NULL));
    }
    GLN_REQUIRE_ARG(c->always_roll == 0 || c->always_roll == 1,
                    "%s: cfg->always_roll %d must be 0 (TE's bulk update) or 1 (roll every slot)", FN,
                    c->always_roll);
    GLN_REQUIRE_ARG(c->amax_nan_propagate == 0 || c->amax_nan_propagate == 1,
                    "%s: cfg->amax_nan_propagate %d must be 0 (ignore NaN, TE's rule) or 1 (propagate)",
                    FN, c->amax_nan_propagate);
    GLN_REQUIRE_ARG(isfinite(c->amax_epsilon) && c->amax_epsilon >= 0.0f,
                    "%s: cfg->amax_epsilon %g must be finite and >= 0", FN, (double)c->amax_epsilon);
    GLN_REQUIRE_ARG(c->e8m0_rounding == GLN_E8M0_ROUND_UP || c->e8m0_rounding == GLN_E8M0_ROUND_FLOOR,
                    "%s: cfg->e8m0_rounding %d must be 0 (up) or 1 (floor)", FN, (int)c->e8m0_rounding);
    GLN_REQUIRE_ARG(!(c->save_original_input && c->recipe == GLN_RECIPE_FP8_DELAYED),
                    "%s: cfg->save_original_input cannot be combined with recipe fp8_delayed (a "
                    "re-quantization in backward would not replay the forward's delayed scales)",
                    FN);
    return GLN_STATUS_SUCCESS;
}

static gln_status_t check_dist(const gln_grouped_linear_config_t *c) {
    const gln_grouped_linear_params_t *p = &c->params;
    const gln_dist_weights_t *d = p->distributed;
    if (!d) return GLN_STATUS_SUCCESS;
    GLN_REQUIRE(!c->delay_wgrad_compute, GLN_STATUS_NOT_SUPPORTED,
                "%s: cfg->delay_wgrad_compute cannot be combined with distributed weights "
                "(finalize would reduce gradients that are not computed yet)", FN);
    GLN_REQUIRE_ARG(!p->weights && !p->weight_packed,
                    "%s: cfg->params.distributed replaces plain weights; params.weights and "
                    "params.weight_packed must be NULL", FN);
    GLN_REQUIRE_ARG(!p->main_grads && !p->main_grad_packed,
                    "%s: cfg->params.main_grads / main_grad_packed must be NULL with distributed "
                    "weights (the distributed group owns main_grad)", FN);
    /* Version 1 tables (no prefetch) stay valid: the layer never reads past wait. */
    GLN_REQUIRE_ARG(d->size == sizeof *d || d->size == GLN_DIST_WEIGHTS_V1_SIZE,
                    "%s: cfg->params.distributed->size %zu is not a known version (expected %zu, "
                    "sizeof(gln_dist_weights_t), or %zu for version 1)", FN, d->size, sizeof *d,
                    (size_t)GLN_DIST_WEIGHTS_V1_SIZE);
    GLN_REQUIRE_ARG(d->num_experts == c->num_experts && d->out_features == c->out_features &&
                        d->in_features == c->in_features,
                    "%s: cfg->params.distributed describes %d experts of [%lld, %lld], the layer "
                    "has %d of [%lld, %lld]",
                    FN, (int)d->num_experts, (long long)d->out_features, (long long)d->in_features,
                    (int)c->num_experts, (long long)c->out_features, (long long)c->in_features);
    GLN_REQUIRE_ARG(d->requires_grad && d->materialize_forward && d->materialize_backward &&
                        d->release && d->grad_buffer && d->finalize_grads && d->wait,
                    "%s: cfg->params.distributed must provide requires_grad, materialize_forward, "
                    "materialize_backward, release, grad_buffer, finalize_grads and wait (the "
                    "layer completes a pending finalize with it before its next backward)", FN);
    /* The built-in group's FP8 all-gather hands over weights the layer uses as they are: they
     * must be what this recipe's weight quantizer makes, or results would silently differ. */
    const gln_sharded_weights_t *sw = gln_sharded_of(d);
    if (sw && sw->cfg.fp8_gather) {
        gln_layer_recipe_t r;
        gln_layer_recipe_init(c, &r);
        const gln_quant_config_t *q = &sw->cfg.fp8_quant, *w = &r.weight;
        GLN_REQUIRE_ARG(r.quantized && q->mode == w->mode && q->fp8_dtype == w->fp8_dtype &&
                            q->delayed == w->delayed && q->power_2_scale == w->power_2_scale &&
                            q->amax_epsilon == w->amax_epsilon &&
                            q->amax_nan_propagate == w->amax_nan_propagate &&
                            (q->mode != GLN_SCALING_MXFP8_1D || q->e8m0_rounding == w->e8m0_rounding),
                        "%s: cfg->params.distributed gathers FP8 weights (fp8_gather, mode %d, %s, "
                        "delayed %d, power_2_scale %d, amax_epsilon %g, amax_nan_propagate %d, "
                        "e8m0_rounding %d) that recipe %s does not make (its weights: mode %d, %s, "
                        "delayed %d, power_2_scale %d, amax_epsilon %g, amax_nan_propagate %d, "
                        "e8m0_rounding %d); create the group with the recipe's weight quantization",
                        FN, (int)q->mode, gln_dtype_name(q->fp8_dtype), q->delayed, q->power_2_scale,
                        (double)q->amax_epsilon, q->amax_nan_propagate, (int)q->e8m0_rounding,
                        gln_recipe_name(c->recipe), (int)w->mode, gln_dtype_name(w->fp8_dtype),
                        w->delayed, w->power_2_scale, (double)w->amax_epsilon, w->amax_nan_propagate,
                        (int)w->e8m0_rounding);
    }
    return GLN_STATUS_SUCCESS;
}

static gln_status_t check_pointer_list(const char *name, void *const *list, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        GLN_REQUIRE_ARG(list[i] != NULL, "%s: cfg->params.%s[%d] must not be NULL", FN, name, (int)i);
    return GLN_STATUS_SUCCESS;
}

/* One single_grouped_<name> flag (TE's one packed parameter instead of N): set, the packed
 * pointer is the only accepted form; unset, the packed pointer is refused.  `list` is the name
 * of the per-expert list (weights / biases), `shape` the packed buffer's shape. */
static gln_status_t check_packing_flag(const char *name, const char *list, const char *shape, int flag,
                                       const void *packed, const void *per_expert) {
    if (flag)
        GLN_REQUIRE_ARG(packed && !per_expert,
                        "%s: cfg->single_grouped_%s = 1 requires cfg->params.%s_packed (one %s buffer) "
                        "and cfg->params.%s = NULL; for per-expert or layer-owned %s set "
                        "single_grouped_%s = 0",
                        FN, name, name, shape, list, list, name);
    else
        GLN_REQUIRE_ARG(!packed,
                        "%s: cfg->params.%s_packed requires cfg->single_grouped_%s = 1 (0 given); with "
                        "single_grouped_%s = 0 pass per-expert cfg->params.%s or no %s (layer-owned)",
                        FN, name, name, name, list, list);
    return GLN_STATUS_SUCCESS;
}

static gln_status_t check_single_grouped(const gln_grouped_linear_config_t *c) {
    const gln_grouped_linear_params_t *p = &c->params;
    GLN_REQUIRE_ARG(!(c->single_grouped_weight && p->distributed),
                    "%s: cfg->single_grouped_weight = 1 cannot be combined with "
                    "cfg->params.distributed (a distributed group materializes per-expert "
                    "weights); set single_grouped_weight = 0", FN);
    GLN_TRY(check_packing_flag("weight", "weights", "[N, K_out, K_in]", c->single_grouped_weight,
                               p->weight_packed, p->weights));
    return check_packing_flag("bias", "biases", "[N, K_out]", c->single_grouped_bias, p->bias_packed,
                              p->biases);
}

static gln_status_t check_params(const gln_grouped_linear_config_t *c) {
    const gln_grouped_linear_params_t *p = &c->params;
    int caller_w = p->weights || p->weight_packed;
    int caller_b = p->biases || p->bias_packed;
    int caller_mg = p->main_grads || p->main_grad_packed;
    GLN_REQUIRE_ARG(!(p->weights && p->weight_packed),
                    "%s: set only one of cfg->params.weights and cfg->params.weight_packed", FN);
    GLN_REQUIRE_ARG(!(p->biases && p->bias_packed),
                    "%s: set only one of cfg->params.biases and cfg->params.bias_packed", FN);
    GLN_REQUIRE_ARG(!(p->main_grads && p->main_grad_packed),
                    "%s: set only one of cfg->params.main_grads and cfg->params.main_grad_packed", FN);
    GLN_REQUIRE_ARG(!(c->single_grouped_bias && !c->bias),
                    "%s: cfg->single_grouped_bias requires cfg->bias = 1", FN);
    GLN_REQUIRE_ARG(!(caller_b && !c->bias),
                    "%s: cfg->params.biases / bias_packed given but cfg->bias = 0", FN);
    GLN_REQUIRE_ARG(!(caller_w && c->bias && !caller_b),
                    "%s: caller-supplied weights with cfg->bias = 1 need cfg->params.biases or "
                    "cfg->params.bias_packed", FN);
    GLN_REQUIRE_ARG(!(caller_b && !caller_w && !p->distributed),
                    "%s: caller-supplied biases need caller-supplied weights (leave every pointer "
                    "NULL for layer-owned parameters)", FN);
    GLN_REQUIRE_ARG(!(caller_mg && !c->fuse_wgrad_accumulation),
                    "%s: cfg->params.main_grads given but cfg->fuse_wgrad_accumulation = 0", FN);
    GLN_REQUIRE_ARG(!(c->fuse_wgrad_accumulation && caller_w && !caller_mg),
                    "%s: cfg->fuse_wgrad_accumulation with caller-supplied weights needs "
                    "cfg->params.main_grads or cfg->params.main_grad_packed (FP32)", FN);
    GLN_TRY(check_single_grouped(c));
    if (p->weights) GLN_TRY(check_pointer_list("weights", p->weights, c->num_experts));
    if (p->biases) GLN_TRY(check_pointer_list("biases", p->biases, c->num_experts));
    if (p->main_grads)
        GLN_TRY(check_pointer_list("main_grads", (void *const *)p->main_grads, c->num_experts));
    if (!caller_w && !p->distributed)
        GLN_REQUIRE_ARG(isfinite(c->init_std) && c->init_std >= 0.0f,
                        "%s: cfg->init_std %g must be finite and >= 0", FN, (double)c->init_std);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_layer_config_validate(const gln_context_t *ctx, const gln_grouped_linear_config_t *c) {
    GLN_TRY(check_shapes_and_types(c));
    /* K_in and K_out are GEMM dimensions of every stage */
    GLN_TRY(gln_arg_gemm_dim(FN, ctx, "cfg->in_features", c->in_features));
    GLN_TRY(gln_arg_gemm_dim(FN, ctx, "cfg->out_features", c->out_features));
    GLN_TRY(check_scaling_options(c));
    GLN_TRY(check_dist(c));
    GLN_TRY(check_params(c));
    return GLN_STATUS_SUCCESS;
}

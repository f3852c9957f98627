/* Quantizer configuration per tensor role for each recipe, as TransformerEngine's recipes set it:
 *   x, W : E4M3 ("forward" tensors);  dy : E5M2 under HYBRID, E4M3 under E4M3
 *   fp8_format RECIPE_DEFAULT is TE's default: HYBRID for delayed / current scaling (the
 *   DelayedScaling / Float8CurrentScaling recipes default to Format.HYBRID), E4M3 for MXFP8 and
 *   FP8 block scaling (MXFP8BlockScaling / Float8BlockScaling default to Format.E4M3)
 *   FP8_DELAYED / FP8_CURRENT : per-tensor scaling (delayed = 1 for delayed)
 *   MXFP8 : 1x32 blocks, E8M0 scales (rounding from the config)
 *   FP8_BLOCK : 1x128 for x and dy, 128x128 for W; power-of-two scales unless block_fp32_scales
 * The rowwise / columnwise fields are set by each caller for the copies it needs. */
#include "layer/layer.h"

static void recipe_role(const gln_grouped_linear_config_t *cfg, gln_scaling_mode_t mode,
                        gln_dtype_t dtype, gln_quant_config_t *q) {
    gln_quant_config_t init = GLN_QUANT_CONFIG_INIT;
    *q = init;
    q->mode = mode;
    q->fp8_dtype = dtype;
    q->rowwise = 1;
    q->columnwise = 0;
    q->delayed = cfg->recipe == GLN_RECIPE_FP8_DELAYED;
    q->amax_epsilon = cfg->amax_epsilon;
    q->e8m0_rounding = cfg->e8m0_rounding;
    q->amax_nan_propagate = cfg->amax_nan_propagate;
    if (cfg->recipe == GLN_RECIPE_FP8_CURRENT) q->power_2_scale = cfg->power_2_scales != 0;
    if (cfg->recipe == GLN_RECIPE_FP8_BLOCK) q->power_2_scale = !cfg->block_fp32_scales;
    if (cfg->recipe == GLN_RECIPE_FP8_DELAYED) q->amax_epsilon = 0.0f; /* unused by delayed */
}

gln_fp8_format_t gln_layer_fp8_format_resolve(gln_recipe_t recipe, gln_fp8_format_t format) {
    if (format != GLN_FP8_FORMAT_RECIPE_DEFAULT) return format;
    return recipe == GLN_RECIPE_FP8_DELAYED || recipe == GLN_RECIPE_FP8_CURRENT ? GLN_FP8_FORMAT_HYBRID
                                                                                : GLN_FP8_FORMAT_E4M3;
}

void gln_layer_recipe_init(const gln_grouped_linear_config_t *cfg, gln_layer_recipe_t *r) {
    gln_dtype_t fwd = GLN_DTYPE_FP8_E4M3;
    gln_dtype_t bwd = cfg->fp8_format == GLN_FP8_FORMAT_HYBRID ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
    gln_scaling_mode_t act = GLN_SCALING_TENSOR, wgt = GLN_SCALING_TENSOR;
    switch (cfg->recipe) {
    case GLN_RECIPE_MXFP8: act = wgt = GLN_SCALING_MXFP8_1D; break;
    case GLN_RECIPE_FP8_BLOCK:
        act = GLN_SCALING_BLOCK_1D;
        wgt = GLN_SCALING_BLOCK_2D;
        break;
    default: break;
    }
    r->quantized = cfg->recipe != GLN_RECIPE_NONE;
    r->delayed = cfg->recipe == GLN_RECIPE_FP8_DELAYED;
    recipe_role(cfg, act, fwd, &r->input);
    recipe_role(cfg, wgt, fwd, &r->weight);
    recipe_role(cfg, act, bwd, &r->grad);
}

const char *gln_recipe_name(gln_recipe_t recipe) {
    switch (recipe) {
    case GLN_RECIPE_NONE: return "none";
    case GLN_RECIPE_FP8_DELAYED: return "fp8_delayed";
    case GLN_RECIPE_FP8_CURRENT: return "fp8_current";
    case GLN_RECIPE_MXFP8: return "mxfp8";
    case GLN_RECIPE_FP8_BLOCK: return "fp8_block";
    }
    return "invalid";
}

/* TE's padding helper values (the alignment its m_splits padding uses): 32 for MXFP8 (column
 * blocks of 32 rows), 16 for the per-tensor and block recipes (FP8 leading dimensions), 1
 * without quantization.  0 for an invalid recipe. */
int64_t gln_recipe_alignment(gln_recipe_t recipe) {
    switch (recipe) {
    case GLN_RECIPE_NONE: return 1;
    case GLN_RECIPE_MXFP8: return 32;
    case GLN_RECIPE_FP8_DELAYED:
    case GLN_RECIPE_FP8_CURRENT:
    case GLN_RECIPE_FP8_BLOCK: return 16;
    }
    return 0;
}

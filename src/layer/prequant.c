/* An input the caller quantized already (args->x_quantized): the layer's input quantization
 * config for producing it, and the boundary checks that it is what that config produces.
 *
 * Why: the MoE activation before FC2 can write its output quantized in the same pass (one
 * read of the activation instead of two).  The layer then skips its own quantization of x:
 * fprop reads the caller's rowwise copy and the saved context references the caller's
 * columnwise copy for the wgrad (nothing is copied).  Delayed scaling is refused: the input
 * slots of the layer's amax history would never see this input, so the scales the layer hands
 * out would stop following it. */
#include <string.h>

#include "common/checked.h"
#include "layer/layer.h"
#include "tensor/tensor.h"

static const char *FWD = "gln_grouped_linear_forward";

/* The recipes that can take a pre-quantized input (fn names the call refusing). */
static gln_status_t recipe_takes_prequant(const char *fn, const char *what, const gln_grouped_linear_t *L) {
    GLN_REQUIRE(L->cfg.recipe != GLN_RECIPE_NONE, GLN_STATUS_NOT_SUPPORTED,
                "%s: %s needs a quantized recipe; the layer's recipe is none (it does not quantize x)", fn,
                what);
    GLN_REQUIRE(L->cfg.recipe != GLN_RECIPE_FP8_DELAYED, GLN_STATUS_NOT_SUPPORTED,
                "%s: %s is not supported under fp8_delayed: the layer's input amax history would not "
                "see this input, so its delayed scales could not follow it (quantize args->x in the "
                "layer, or use fp8_current / mxfp8 / fp8_block)",
                fn, what);
    return GLN_STATUS_SUCCESS;
}

/* out->size: a known version of gln_quant_config_t (the first, or the current one). */
static gln_status_t check_out_version(const char *fn, const gln_quant_config_t *out) {
    const size_t v1 = offsetof(gln_quant_config_t, amax_nan_propagate);
    GLN_REQUIRE_ARG(out->size == v1 || out->size == sizeof *out,
                    "%s: out->size %zu is not a known version of gln_quant_config_t (%zu or %zu; start "
                    "from GLN_QUANT_CONFIG_INIT)",
                    fn, out->size, v1, sizeof *out);
    return GLN_STATUS_SUCCESS;
}

/* q with the copies asked for into *out, in out's version (checked), whose size it keeps. */
static gln_status_t write_out(const char *fn, gln_quant_config_t q, int columnwise, gln_quant_config_t *out) {
    GLN_REQUIRE_ARG(out->size == sizeof q || !q.amax_nan_propagate,
                    "%s: the layer's cfg->amax_nan_propagate = 1 (NaN propagates into amaxes) cannot "
                    "be expressed in a version-1 out (size %zu); pass out->size = %zu",
                    fn, out->size, sizeof q);
    q.rowwise = 1;
    q.columnwise = columnwise;
    q.size = out->size;
    memcpy(out, &q, out->size);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_grouped_linear_input_quant_config(const gln_grouped_linear_t *layer, int columnwise,
                                                   gln_quant_config_t *out) {
    static const char *fn = "gln_grouped_linear_input_quant_config";
    GLN_REQUIRE_NOT_NULL(fn, layer);
    GLN_REQUIRE_NOT_NULL(fn, out);
    GLN_REQUIRE_ARG(columnwise == 0 || columnwise == 1, "%s: columnwise %d must be 0 or 1", fn, columnwise);
    GLN_TRY(check_out_version(fn, out));
    GLN_TRY(recipe_takes_prequant(fn, "a pre-quantized input", layer));
    return write_out(fn, layer->recipe.input, columnwise, out);
}

/* The weights' quantization from a layer configuration, before any layer exists: a sharded
 * group with fp8_gather / quantized_shard is created first and must quantize exactly as the
 * layer would (the layer checks it at create). */
gln_status_t gln_grouped_linear_weight_quant_config(const gln_grouped_linear_config_t *cfg, gln_quant_config_t *out) {
    static const char *fn = "gln_grouped_linear_weight_quant_config";
    GLN_REQUIRE_NOT_NULL(fn, cfg);
    GLN_REQUIRE_NOT_NULL(fn, out);
    GLN_TRY(check_out_version(fn, out));
    gln_grouped_linear_config_t c;
    GLN_TRY(gln_layer_config_load(fn, cfg, &c));
    GLN_REQUIRE_ARG(c.recipe >= GLN_RECIPE_NONE && c.recipe <= GLN_RECIPE_FP8_BLOCK,
                    "%s: cfg->recipe %d must be 0..4 (none, fp8_delayed, fp8_current, mxfp8, fp8_block)", fn,
                    (int)c.recipe);
    GLN_REQUIRE(c.recipe != GLN_RECIPE_NONE, GLN_STATUS_NOT_SUPPORTED,
                "%s: recipe none does not quantize weights", fn);
    gln_layer_recipe_t r;
    gln_layer_recipe_init(&c, &r);
    return write_out(fn, r.weight, 0, out);
}

gln_status_t gln_validate_x_quantized(const gln_grouped_linear_t *L, const gln_grouped_linear_forward_args_t *a,
                                      int need_col) {
    static const char *name = "args->x_quantized";
    const gln_grouped_tensor_t *q = a->x_quantized;
    const gln_quant_config_t *c = &L->recipe.input;
    GLN_TRY(recipe_takes_prequant(FWD, name, L));
    GLN_TRY(gln_grouped_validate(FWD, name, q));
    const gln_tensor_t *p = &q->packed;
    GLN_REQUIRE_ARG(q->num == L->n, "%s: %s->num %d must equal the layer's %d experts", FWD, name, (int)q->num,
                    (int)L->n);
    GLN_REQUIRE_ARG(p->scaling == c->mode,
                    "%s: %s->packed.scaling %s must be the layer's input scaling mode %s (recipe %s; see "
                    "gln_grouped_linear_input_quant_config)",
                    FWD, name, gln_scaling_name(p->scaling), gln_scaling_name(c->mode),
                    gln_recipe_name(L->cfg.recipe));
    GLN_REQUIRE_ARG(p->dtype == c->fp8_dtype,
                    "%s: %s->packed.dtype %s must be the layer's input FP8 format %s (recipe %s)", FWD, name,
                    gln_dtype_name(p->dtype), gln_dtype_name(c->fp8_dtype), gln_recipe_name(L->cfg.recipe));
    GLN_REQUIRE_ARG(p->rows == a->y->rows, "%s: %s->packed.rows %lld must equal args->y->rows %lld", FWD, name,
                    (long long)p->rows, (long long)a->y->rows);
    GLN_REQUIRE_ARG(p->cols == L->kin, "%s: %s->packed.cols %lld must be in_features %lld", FWD, name,
                    (long long)p->cols, (long long)L->kin);
    const int nonempty = !gln_tensor_is_empty(p), per_tensor = c->mode == GLN_SCALING_TENSOR;
    GLN_REQUIRE_ARG(p->data || !nonempty, "%s: %s->packed.data (the rowwise copy fprop reads) must not be NULL",
                    FWD, name);
    GLN_REQUIRE_ARG(p->scale_inv || !(nonempty || per_tensor),
                    "%s: %s->packed.scale_inv (the rowwise scales fprop reads) must not be NULL", FWD, name);
    if (need_col) {
        GLN_REQUIRE_ARG(p->col_data || !nonempty,
                        "%s: %s->packed.col_data must not be NULL: the wgrad of this training forward needs "
                        "the columnwise copy (quantize with columnwise = 1)",
                        FWD, name);
        GLN_REQUIRE_ARG(p->col_scale_inv || !(nonempty || per_tensor),
                        "%s: %s->packed.col_scale_inv must not be NULL: the wgrad of this training forward "
                        "needs the columnwise copy (quantize with columnwise = 1)",
                        FWD, name);
    }
    GLN_REQUIRE_ARG(q->splits_on_backend == a->splits_on_backend,
                    "%s: %s->splits_on_backend %d must equal args->splits_on_backend %d", FWD, name,
                    q->splits_on_backend, a->splits_on_backend);
    if (q->splits == a->m_splits) return GLN_STATUS_SUCCESS;
    /* Backend-resident splits are host-readable on the CPU backend only. */
    GLN_REQUIRE_ARG(!a->splits_on_backend || L->ctx->kind == GLN_BACKEND_CPU,
                    "%s: %s->splits must be the args->m_splits pointer when the splits are in device "
                    "memory (their values cannot be compared without a synchronization)",
                    FWD, name);
    for (int32_t i = 0; i < L->n; i++)
        GLN_REQUIRE_ARG(q->splits[i] == a->m_splits[i], "%s: %s->splits[%d] %lld must equal args->m_splits[%d] %lld",
                        FWD, name, (int)i, (long long)q->splits[i], (int)i, (long long)a->m_splits[i]);
    return GLN_STATUS_SUCCESS;
}

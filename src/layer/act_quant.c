/* Quantization of grouped activations (x) and output gradients (dy): one grouped quantize on both
 * paths (host splits on the split path, device splits on the grouped one), per-member statistics,
 * so the two paths give the same bytes.  Under delayed scaling the role's
 * slots (input 3i of the forward state, grad_output 2i of the backward state) are staged into
 * the buffer's per-member scale array before and their amaxes recorded by the quantize itself
 * (gln_op_grouped_quantize_record, which a backend may fuse into its amax finalize launch).
 *
 * With dbias (dy of a layer with bias): the bias gradients come from the same read of dy
 * (gln_op_grouped_quantize_dbias), summed in the one tiled order of quant/dbias_tiled.h. */
#include "layer/layer.h"

static gln_status_t act_quantize(gln_grouped_linear_t *L, gln_role_t role, const gln_group_buffer_t *src,
                                 int rowwise, int columnwise, gln_group_buffer_t *out, gln_tensor_t *dbias,
                                 int accumulate) {
    gln_status_t st;
    gln_context_t *ctx = L->ctx;
    const gln_grouped_tensor_t *g = &src->g;
    gln_quant_config_t cfg = role == GLN_ROLE_INPUT ? L->recipe.input : L->recipe.grad;
    gln_fp8_state_t *fs = role == GLN_ROLE_INPUT ? &L->fp8_fwd : &L->fp8_bwd;
    int32_t stride = role == GLN_ROLE_INPUT ? 3 : 2, n = g->num;
    cfg.rowwise = rowwise;
    cfg.columnwise = columnwise;
    GLN_TRY(gln_group_buffer_alloc_quantized(ctx, &cfg, g->packed.rows, g->packed.cols, n, g->splits,
                                             g->splits_on_backend, out));
    float *scale = out->g.packed.scale, *amax = out->g.packed.amax;
    if (L->recipe.delayed) { /* the history record in the quantize's own amax finalize */
        GLN_CHECK(st, fail, gln_fp8_state_stage(ctx, fs, 0, stride, n, scale, amax));
        GLN_CHECK(st, fail, gln_op_grouped_quantize_record(ctx, &cfg, g, &out->g, dbias, accumulate, fs->amax_history,
                                                           0, stride, fs->opts.amax_nan_propagate));
    } else if (dbias) {
        GLN_CHECK(st, fail, gln_op_grouped_quantize_dbias(ctx, &cfg, g, &out->g, dbias, accumulate));
    } else {
        GLN_CHECK(st, fail, gln_op_grouped_quantize(ctx, &cfg, g, &out->g));
    }
    return GLN_STATUS_SUCCESS;
fail:
    gln_group_buffer_free(ctx, out);
    return st;
}

gln_status_t gln_act_quantize(gln_grouped_linear_t *L, gln_role_t role, const gln_group_buffer_t *src,
                              int rowwise, int columnwise, gln_group_buffer_t *out) {
    return act_quantize(L, role, src, rowwise, columnwise, out, NULL, 0);
}

gln_status_t gln_act_quantize_dbias(gln_grouped_linear_t *L, const gln_group_buffer_t *dy, int rowwise,
                                    int columnwise, gln_group_buffer_t *out, gln_tensor_t *dbias, int accumulate) {
    return act_quantize(L, GLN_ROLE_GRAD, dy, rowwise, columnwise, out, dbias, accumulate);
}

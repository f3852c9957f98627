/* The three GEMM stages on both paths.
 *
 * Split path: one gln_gemm per expert on member views (experts without rows are skipped; their
 * wgrad is zeroed, or left as is when accumulating).  Grouped path: one gln_grouped_gemm per
 * stage, which follows the same rules per member.  The bias is passed to the GEMM on both paths
 * (added in FP32 before the single rounding), so the paths agree bit for bit on the CPU. */
#include "common/checked.h"
#include "layer/layer.h"

/* FP8 block scaling: the layer's quantizers make power-of-two scales unless block_fp32_scales,
 * which lets the CUDA grouped GEMM dequantize first (exact) and run on the device. */
static int block_scales_pow2(const gln_grouped_linear_t *L) {
    return L->cfg.recipe == GLN_RECIPE_FP8_BLOCK && !L->cfg.block_fp32_scales;
}

gln_status_t gln_stage_fprop(gln_grouped_linear_t *L, const gln_tensor_t *w, const gln_group_buffer_t *x,
                             const gln_tensor_t *bias, gln_group_buffer_t *y) {
    gln_context_t *ctx = L->ctx;
    if (L->cfg.path == GLN_PATH_GROUPED) {
        gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
        a.layout = GLN_LAYOUT_TN;
        a.block_scales_pow2 = block_scales_pow2(L);
        a.a_list = w;
        a.b = &x->g;
        a.d_grouped = &y->g;
        a.bias_list = bias;
        return gln_op_grouped_gemm(ctx, &a);
    }
    for (int32_t i = 0; i < L->n; i++) {
        if (x->g.splits[i] == 0) continue;
        gln_tensor_t xi = gln_group_buffer_member(x, i), yi = gln_group_buffer_member(y, i);
        GLN_TRY(gln_op_gemm(ctx, GLN_LAYOUT_TN, &w[i], &xi, &yi, bias ? &bias[i] : NULL, 0));
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_stage_dgrad(gln_grouped_linear_t *L, const gln_tensor_t *w, const gln_group_buffer_t *dy,
                             gln_group_buffer_t *dx) {
    gln_context_t *ctx = L->ctx;
    if (L->cfg.path == GLN_PATH_GROUPED) {
        gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
        a.layout = GLN_LAYOUT_NN;
        a.block_scales_pow2 = block_scales_pow2(L);
        a.a_list = w;
        a.b = &dy->g;
        a.d_grouped = &dx->g;
        return gln_op_grouped_gemm(ctx, &a);
    }
    for (int32_t i = 0; i < L->n; i++) {
        if (dy->g.splits[i] == 0) continue;
        gln_tensor_t dyi = gln_group_buffer_member(dy, i), dxi = gln_group_buffer_member(dx, i);
        GLN_TRY(gln_op_gemm(ctx, GLN_LAYOUT_NN, &w[i], &dyi, &dxi, NULL, 0));
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_stage_wgrad(const gln_grouped_linear_t *L, const gln_group_buffer_t *x, const gln_group_buffer_t *dy,
                             gln_tensor_t *d, int accumulate) {
    gln_context_t *ctx = L->ctx;
    if (L->cfg.path == GLN_PATH_GROUPED) {
        gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
        a.layout = GLN_LAYOUT_NT;
        a.a_grouped = &x->g;
        a.b = &dy->g;
        a.d_list = d;
        a.accumulate = accumulate;
        a.block_scales_pow2 = block_scales_pow2(L);
        return gln_op_grouped_gemm(ctx, &a);
    }
    for (int32_t i = 0; i < L->n; i++) {
        if (x->g.splits[i] == 0) {
            size_t bytes;
            GLN_TRY(gln_shape_bytes("grouped linear wgrad", "d", d[i].rows, d[i].cols,
                                    gln_dtype_size(d[i].dtype), &bytes));
            if (!accumulate) GLN_TRY(gln_ctx_zero(ctx, d[i].data, bytes));
            continue;
        }
        gln_tensor_t xi = gln_group_buffer_member(x, i), dyi = gln_group_buffer_member(dy, i);
        GLN_TRY(gln_op_gemm(ctx, GLN_LAYOUT_NT, &xi, &dyi, &d[i], NULL, accumulate));
    }
    return GLN_STATUS_SUCCESS;
}

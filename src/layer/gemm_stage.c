/* The three GEMM stages, one grouped GEMM each on both paths: the split path hands the backend
 * its host splits, the grouped path device splits.  A backend that knows the splits on the host
 * may still run experts one by one where that is faster (the CUDA backend's cuBLASLt loop for
 * few large experts), but a split path never pays a launch per expert where one grouped kernel
 * does (a host loop of per-expert GEMMs was 4.5× the grouped path on 128 small experts, and took
 * FP8 block scaling off its block-scaled kernels).  Experts without rows: no rows written, their
 * wgrad zeroed (left as is when accumulating).  The bias is added in FP32 before the single
 * rounding, so the paths agree bit for bit on the CPU. */
#include "layer/layer.h"

/* FP8 block scaling: the layer's quantizers make power-of-two scales unless block_fp32_scales,
 * which lets the CUDA grouped GEMM dequantize first (exact) and run on the device. */
static int block_scales_pow2(const gln_grouped_linear_t *L) {
    return L->cfg.recipe == GLN_RECIPE_FP8_BLOCK && !L->cfg.block_fp32_scales;
}

gln_status_t gln_stage_fprop(gln_grouped_linear_t *L, const gln_tensor_t *w, const gln_group_buffer_t *x,
                             const gln_tensor_t *bias, gln_group_buffer_t *y) {
    gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
    a.layout = GLN_LAYOUT_TN;
    a.block_scales_pow2 = block_scales_pow2(L);
    a.a_list = w;
    a.b = &x->g;
    a.d_grouped = &y->g;
    a.bias_list = bias;
    return gln_op_grouped_gemm(L->ctx, &a);
}

gln_status_t gln_stage_dgrad(gln_grouped_linear_t *L, const gln_tensor_t *w, const gln_group_buffer_t *dy,
                             gln_group_buffer_t *dx) {
    gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
    a.layout = GLN_LAYOUT_NN;
    a.block_scales_pow2 = block_scales_pow2(L);
    a.a_list = w;
    a.b = &dy->g;
    a.d_grouped = &dx->g;
    return gln_op_grouped_gemm(L->ctx, &a);
}

gln_status_t gln_stage_wgrad(const gln_grouped_linear_t *L, const gln_group_buffer_t *x, const gln_group_buffer_t *dy,
                             gln_tensor_t *d, int accumulate) {
    gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
    a.layout = GLN_LAYOUT_NT;
    a.a_grouped = &x->g;
    a.b = &dy->g;
    a.d_list = d;
    a.accumulate = accumulate;
    a.block_scales_pow2 = block_scales_pow2(L);
    return gln_op_grouped_gemm(L->ctx, &a);
}

/* CUDA grouped quantization: the dispatcher.  One group plan per call (member rows and scale
 * offsets on the device, from host or device splits), then one grouped implementation per mode,
 * each a fixed number of launches whatever the member count:
 *   TENSOR, MXFP8_1D    gln_cuda_quantize_members (cuda_quant_group.cu)
 *   BLOCK_1D, BLOCK_2D  gln_cuda_grouped_quantize_block (cuda_block.cu)
 * Nothing reads device data on the host, so a call with device splits captures in a CUDA graph.
 * Bad device splits are clamped by the plan and reported through gln_context_async_error.
 *
 * out->splits: the public boundary compares host splits; device-resident ones are compared on the
 * device (gln_cuda_check_out_splits) when out has its own array, and the kernels follow in's
 * splits, as the CPU backend's per-member loop does. */
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "tensor/tensor.h"

gln_status_t gln_cuda_grouped_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                       const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out) {
    static const char *fn = "gln_grouped_quantize (cuda)";
    if (in->splits_on_backend && out->splits != in->splits)
        GLN_TRY(gln_cuda_check_out_splits(ctx, in->num, in->splits, out->splits, fn));
    /* The plan clamps device splits to the rows of both packed tensors, so that neither is
     * overrun when out was given fewer rows than in. */
    gln_grouped_tensor_t g = *in;
    if (out->packed.rows < g.packed.rows) g.packed.rows = out->packed.rows;
    gln_cuda_plan_t plan;
    GLN_TRY(gln_cuda_plan_make(ctx, &g, cfg->mode, &plan, fn));
    gln_status_t st;
    if (cfg->mode == GLN_SCALING_TENSOR || cfg->mode == GLN_SCALING_MXFP8_1D)
        st = gln_cuda_quantize_members(ctx, cfg, &in->packed, &out->packed, in->num, &plan, fn);
    else
        st = gln_cuda_grouped_quantize_block(ctx, cfg, in, out, &plan, fn);
    gln_cuda_plan_free(ctx, &plan);
    return st;
}

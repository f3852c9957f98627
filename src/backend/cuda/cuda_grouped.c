/* CUDA grouped quantization: the dispatcher.  One group plan per call (member rows and scale
 * offsets on the device, from host or device splits; for TENSOR and MXFP8_1D with device splits a
 * deferred plan, computed by the quantizer's own setup kernel), then one grouped implementation
 * per mode, each a fixed number of launches whatever the member count:
 *   TENSOR, MXFP8_1D    gln_cuda_quantize_members (cuda_quant_members.cu)
 *   BLOCK_1D, BLOCK_2D  gln_cuda_grouped_quantize_block (cuda_block.cu)
 * Nothing reads device data on the host, so a call with device splits captures in a CUDA graph.
 * Bad device splits are clamped by the plan and reported through gln_context_async_error.
 *
 * out->splits: the public boundary compares host splits; device-resident ones are compared on the
 * device (gln_cuda_check_out_splits) when out has its own array, and the kernels follow in's
 * splits, as the CPU backend's per-member loop does. */
#include <stdlib.h>

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
    const int members = cfg->mode == GLN_SCALING_TENSOR || cfg->mode == GLN_SCALING_MXFP8_1D;
    gln_cuda_plan_t plan; /* gln_cuda_quantize_members computes a deferred plan in its setup kernel */
    GLN_TRY(members ? gln_cuda_plan_defer(ctx, &g, cfg->mode, &plan, fn)
                    : gln_cuda_plan_make(ctx, &g, cfg->mode, &plan, fn));
    gln_status_t st;
    if (members)
        st = gln_cuda_quantize_members(ctx, cfg, &in->packed, &out->packed, in->num, &plan, fn);
    else
        st = gln_cuda_grouped_quantize_block(ctx, cfg, in, out, &plan, fn);
    gln_cuda_plan_free(ctx, &plan);
    return st;
}

/* Grouped quantize of dy with its bias gradients (backend slot grouped_quantize_dbias): the sums
 * in the tiled order of quant/dbias_tiled.h, from the quantize kernel's own read of dy for TENSOR
 * (current scaling: the amax pass; delayed: the cast pass) and MXFP8; block modes quantize, then
 * read dy once more for the sums.  cfg NULL: the sums alone (in the same order). */
gln_status_t gln_cuda_grouped_quantize_dbias(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                             const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                             gln_tensor_t *dbias, int accumulate) {
    static const char *fn = "grouped quantize + dbias (cuda)";
    if (cfg && in->splits_on_backend && out->splits != in->splits)
        GLN_TRY(gln_cuda_check_out_splits(ctx, in->num, in->splits, out->splits, fn));
    gln_grouped_tensor_t g = *in;
    if (cfg && out->packed.rows < g.packed.rows) g.packed.rows = out->packed.rows;
    const gln_scaling_mode_t mode = cfg ? cfg->mode : GLN_SCALING_NONE;
    const int members = !cfg || mode == GLN_SCALING_TENSOR || mode == GLN_SCALING_MXFP8_1D;
    gln_cuda_plan_t plan; /* deferred where gln_cuda_quantize_members_dbias alone reads it */
    GLN_TRY(members ? gln_cuda_plan_defer(ctx, &g, mode, &plan, fn) : gln_cuda_plan_make(ctx, &g, mode, &plan, fn));
    gln_status_t st;
    if (members) {
        st = gln_cuda_quantize_members_dbias(ctx, cfg, &g.packed, cfg ? &out->packed : NULL, in->num, &plan, dbias,
                                             accumulate, fn);
    } else {
        st = gln_cuda_grouped_quantize_block(ctx, cfg, in, out, &plan, fn);
        if (st == GLN_STATUS_SUCCESS)
            st = gln_cuda_quantize_members_dbias(ctx, NULL, &g.packed, NULL, in->num, &plan, dbias, accumulate, fn);
    }
    gln_cuda_plan_free(ctx, &plan);
    return st;
}

/* Grouped quantize (+ dbias) under delayed scaling with the amax history record fused into the
 * finalize kernel that max-accumulates the members' amaxes (backend slot grouped_quantize_record):
 * one launch fewer than quantize + fp8_state_record, the same bytes.  Configs without a per-tensor
 * delayed amax (or without an output) quantize, then record. */
gln_status_t gln_cuda_grouped_quantize_record(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                              const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                              gln_tensor_t *dbias, int accumulate, float *history_row0,
                                              int32_t first, int32_t stride, int nan_propagate) {
    static const char *fn = "grouped quantize + amax record (cuda)";
    if (cfg->mode != GLN_SCALING_TENSOR || !cfg->delayed || !(cfg->rowwise || cfg->columnwise)) {
        GLN_TRY(dbias ? gln_cuda_grouped_quantize_dbias(ctx, cfg, in, out, dbias, accumulate)
                      : gln_cuda_grouped_quantize(ctx, cfg, in, out));
        return gln_cuda_fp8_state_record(ctx, history_row0, first, stride, in->num, out->packed.amax,
                                         nan_propagate);
    }
    if (in->splits_on_backend && out->splits != in->splits)
        GLN_TRY(gln_cuda_check_out_splits(ctx, in->num, in->splits, out->splits, fn));
    gln_grouped_tensor_t g = *in;
    if (out->packed.rows < g.packed.rows) g.packed.rows = out->packed.rows;
    gln_cuda_plan_t plan;
    GLN_TRY(gln_cuda_plan_defer(ctx, &g, cfg->mode, &plan, fn));
    const gln_cuda_amax_record_t rec = {history_row0, first, stride, nan_propagate};
    /* the packed input as each unfused call passes it (dbias: rows clamped like the plan) */
    const gln_status_t st = gln_cuda_quantize_members_record(ctx, cfg, dbias ? &g.packed : &in->packed, &out->packed,
                                                             in->num, &plan, dbias, accumulate, &rec, fn);
    gln_cuda_plan_free(ctx, &plan);
    return st;
}

gln_status_t gln_cuda_grouped_quantize_mxfp8_swizzled(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                      const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out) {
    static const char *fn = "grouped MXFP8 quantize, swizzled scales (cuda)";
    if (cfg->mode != GLN_SCALING_MXFP8_1D)
        return gln_fail(GLN_STATUS_INVALID_ARGUMENT, "%s: cfg->mode %s must be MXFP8_1D", fn,
                        gln_scaling_name(cfg->mode));
    if (in->splits_on_backend && out->splits != in->splits)
        GLN_TRY(gln_cuda_check_out_splits(ctx, in->num, in->splits, out->splits, fn));
    gln_grouped_tensor_t g = *in;
    if (out->packed.rows < g.packed.rows) g.packed.rows = out->packed.rows;
    gln_cuda_plan_t plan;
    GLN_TRY(gln_cuda_plan_defer(ctx, &g, cfg->mode, &plan, fn));
    gln_status_t st = gln_cuda_quantize_members_swizzled(ctx, cfg, &in->packed, &out->packed, in->num, &plan, fn);
    gln_cuda_plan_free(ctx, &plan);
    return st;
}

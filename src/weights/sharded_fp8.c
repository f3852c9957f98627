/* Sharded weight group: the FP8 shard — quantizing the working shard for the FP8 all-gather
 * (fp8_gather: at every forward materialization; quantized_shard: only when the working shard is
 * refreshed, the stored shard then serving every materialization; MXFP8 then also stores the
 * columnwise copy) and the columnwise copies a backward materialization of a per-tensor or
 * 128x128 quantized shard makes by transposing. */
#include <stdlib.h>
#include <string.h>

#include "backend/context.h"
#include "backend/ops.h"
#include "comm/comm.h"
#include "common/error.h"
#include "weights/sharded.h"

/* The shard as a grouped tensor of its experts' segments (member e = expert e's part, empty for
 * the experts outside the shard; they tile the shard from its start, in order, as per-tensor
 * experts lie back to back): rows of `cols` elements, cols the largest power of two <= 1024
 * that divides every segment boundary, so that every member is whole rows and the grouped
 * kernels get wide rows (16-byte chunks) whenever the sizes allow.  The element-wise encode does
 * not see the shape, so the bytes are those of quantizing each segment as a vector. */
static int64_t shard_members(const gln_sharded_weights_t *sw, int64_t *splits) {
    int64_t cols = 1024;
    for (int32_t e = 0; e < sw->cfg.num_experts; e++) {
        int64_t lo, hi;
        gln_sharded_expert_segment(sw, e, &lo, &hi);
        if (lo >= hi) continue;
        while ((lo - sw->shard_offset) % cols || (hi - sw->shard_offset) % cols) cols /= 2;
    }
    for (int32_t e = 0; e < sw->cfg.num_experts; e++) {
        int64_t lo, hi;
        gln_sharded_expert_segment(sw, e, &lo, &hi);
        splits[e] = lo < hi ? (hi - lo) / cols : 0;
    }
    return cols;
}

/* Quantize the working shard into sw->fp8_shard with expert e's scale computed from the MAX over
 * ranks of their amaxes of expert e, and write the N decode scales to `scale_inv` (inside the
 * gather buffer, or the stored scales of the quantized shard).  The bytes equal gln_quantize of
 * the full working weight: the amax of a tensor is the max of its parts' amaxes, and the
 * quantization is element-wise given the scale.  A fixed number of launches whatever N: one
 * grouped amax (none when the caller hands this rank's amaxes in local_amax), the all-reduce, the
 * scales, one grouped quantize.  Every rank runs the amax all-reduce (the caller agreed on the
 * call already). */
gln_status_t gln_sharded_quantize_tensor(gln_sharded_weights_t *sw, float *scale_inv, const float *local_amax) {
    gln_context_t *ctx = sw->ctx;
    const gln_quant_config_t *q = &sw->cfg.fp8_quant;
    const int32_t n = sw->cfg.num_experts;
    float *amax = sw->fp8_work, *scale = amax + n, *sink_amax = scale + n, *sink_sinv = sink_amax + n;
    const gln_dtype_t wd = sw->cfg.working_dtype;
    GLN_TRY(gln_op_require(ctx, "materialize (FP8 gather)", GLN_SLOT_GROUPED_AMAX));
    GLN_TRY(gln_op_require(ctx, "materialize (FP8 gather)", GLN_SLOT_SCALES_FROM_AMAX));
    /* segments lie back to back only without per-expert padding (the 128x128 layout's) */
    GLN_REQUIRE(sw->expert_stride == sw->expert_elems, GLN_STATUS_INTERNAL_ERROR,
                "materialize (FP8 gather): per-tensor experts must not be padded");
    int64_t *splits = malloc((size_t)n * sizeof *splits);
    GLN_REQUIRE(splits != NULL, GLN_STATUS_OUT_OF_MEMORY, "materialize (FP8 gather): out of host memory");
    const int64_t cols = shard_members(sw, splits);
    int64_t rows = 0;
    for (int32_t e = 0; e < n; e++) rows += splits[e];
    gln_grouped_tensor_t in = {n, splits, 0, gln_tensor_make(wd, rows, cols, sw->working)};
    gln_grouped_tensor_t out = {n, splits, 0, gln_tensor_make(q->fp8_dtype, rows, cols, sw->fp8_shard)};
    out.packed.scaling = GLN_SCALING_TENSOR;
    out.packed.scale = scale;
    out.packed.amax = sink_amax;
    out.packed.scale_inv = sink_sinv;
    /* Delayed mode = "quantize with this scale": the same element-wise encode as current
     * scaling once the scale is the full tensor's (its decode-scale and amax writes go to sinks). */
    gln_quant_config_t cfg = *q;
    cfg.rowwise = 1;
    cfg.columnwise = 0;
    cfg.delayed = 1;
    gln_status_t st;
    if (!local_amax)
        GLN_CHECK(st, done, rows ? gln_op_grouped_amax(ctx, "materialize (FP8 gather)", &in, q->amax_nan_propagate, amax)
                                 : gln_ctx_zero(ctx, amax, (size_t)n * sizeof(float))); /* a padding-only shard */
    GLN_CHECK(st, done, gln_comm_allreduce_agreed(sw->comm, local_amax ? local_amax : amax, amax, (size_t)n,
                                                  GLN_DTYPE_FP32, GLN_REDUCE_MAX));
    /* the encode scales, and the decode scales of all N experts (also those outside this shard) */
    GLN_CHECK(st, done, gln_op_scales_from_amax(ctx, "materialize (FP8 gather)", amax, n, gln_fp8_max(q->fp8_dtype),
                                                q->power_2_scale, q->amax_epsilon, scale, scale_inv));
    if (rows) st = gln_op_grouped_quantize(ctx, &cfg, &in, &out);
done:
    free(splits);
    return st;
}

/* The block-scaled shard, quantized as [shard_len / cols, cols] with cols =
 * gln_sharded_block_cols (one gln_quantize; the codes / tile grid to fp8_sscale).
 * 128x128: whole 128-row tiles of whole rows (experts padded to 128-row multiples with zero rows,
 * which leave a tile's amax as it is), so each tile and its scale equal those of the full
 * weight's quantization.
 * MXFP8, fp8_gather alone: [shard_len/128, 128] rowwise.  Blocks are 32 consecutive elements of
 * one weight row (K_in % 128 == 0, shards of whole 128-element rows), so each block and its E8M0
 * code equal those of the full weight's quantization; the codes come out in flat block order (4
 * per row of the shard view, no column padding).
 * MXFP8, quantized_shard: [shard_len/K_in, K_in], rowwise AND columnwise in one call (one pass on
 * the GPU).  The shard is whole 32-row groups and each expert starts on a group boundary
 * (pad32(K_out) rows apart), so every 32x1 column block of the view lies in one expert; the zero
 * rows padding an expert's last group leave its amax as it is, which is how gln_quantize treats
 * the partial last block of a full weight.  So every byte and code of both copies equals those
 * of quantizing the full weight.  Rowwise codes: [pad128(rows), K_in/32], the first shard_len/32
 * in flat order; columnwise: [pad4(rows/32), K_in], the first shard_len/32 one row of K_in per
 * 32-row group, in order. */
gln_status_t gln_sharded_quantize_blocks(gln_sharded_weights_t *sw) {
    const int both = gln_sharded_mx_qshard(sw);
    const int64_t cols = gln_sharded_block_cols(sw), rows = sw->shard_len / cols;
    gln_quant_config_t cfg = sw->cfg.fp8_quant;
    cfg.rowwise = 1;
    cfg.columnwise = both;
    gln_tensor_t in = gln_tensor_make(sw->cfg.working_dtype, rows, cols, sw->working);
    gln_tensor_t out = gln_tensor_make(cfg.fp8_dtype, rows, cols, sw->fp8_shard);
    out.scaling = cfg.mode; /* MXFP8_1D or BLOCK_2D */
    out.scale_inv = sw->fp8_sscale;
    out.col_data = both ? sw->fp8_col : NULL;
    out.col_scale_inv = both ? sw->fp8_col_sscale : NULL;
    return gln_op_quantize(sw->ctx, &cfg, &in, &out);
}

/* The stored decode scales of a per-tensor quantized shard: N floats after the work arrays. */
static float *stored_scales(gln_sharded_weights_t *sw) { return sw->fp8_work + 4 * (size_t)sw->cfg.num_experts; }

/* A new group's quantized shard: its working shard is zero on every rank, so the global amaxes
 * are 0 without any exchange; the scales are those gln_quantize gives a zero weight (and the
 * zero FP8 shard is its encoding).  Block modes quantize the zero shard (local scales). */
gln_status_t gln_sharded_quantize_initial(gln_sharded_weights_t *sw) {
    if (!sw->cfg.quantized_shard) return GLN_STATUS_SUCCESS;
    if (gln_sharded_block_cols(sw)) return gln_sharded_quantize_blocks(sw);
    const gln_quant_config_t *q = &sw->cfg.fp8_quant;
    const int32_t n = sw->cfg.num_experts;
    GLN_TRY(gln_op_require(sw->ctx, "gln_sharded_weights_create", GLN_SLOT_SCALES_FROM_AMAX));
    GLN_TRY(gln_ctx_zero(sw->ctx, sw->fp8_work, (size_t)n * sizeof(float)));
    return gln_op_scales_from_amax(sw->ctx, "gln_sharded_weights_create", sw->fp8_work, n,
                                   gln_fp8_max(q->fp8_dtype), q->power_2_scale, q->amax_epsilon,
                                   sw->fp8_work + n, stored_scales(sw));
}

gln_status_t gln_sharded_requantize_after(gln_sharded_weights_t *sw, const char *fn, gln_status_t local,
                                          const float *local_amax) {
    if (!sw->cfg.quantized_shard) return local;
    if (local == GLN_STATUS_SUCCESS) local = gln_sharded_require_no_prefetch(fn, sw);
    gln_agree_t shape = {{GLN_CALL_REQUANTIZE, sw->shard_len, sw->cfg.fp8_quant.mode, 0, 0, 0},
                         {"call", "shard_len", "fp8_quant.mode", "", "", ""}};
    GLN_TRY(gln_sharded_agree(sw, fn, local, &shape));
    /* block scales are local: no exchange, the agreement is the only collective */
    if (gln_sharded_block_cols(sw)) return gln_sharded_quantize_blocks(sw);
    /* a caller's amaxes ignore NaN; under NaN propagation they are computed here */
    const float *amax = sw->cfg.fp8_quant.amax_nan_propagate ? NULL : local_amax;
    return gln_sharded_quantize_tensor(sw, stored_scales(sw), amax);
}

gln_status_t gln_sharded_requantize(gln_sharded_weights_t *sw, const char *fn, const float *local_amax) {
    return gln_sharded_requantize_after(sw, fn, GLN_STATUS_SUCCESS, local_amax);
}

gln_status_t gln_sharded_weights_requantize(gln_sharded_weights_t *sw) {
    static const char *fn = "gln_sharded_weights_requantize";
    GLN_REQUIRE_NOT_NULL(fn, sw);
    return gln_sharded_requantize(sw, fn, NULL);
}

/* The per-tensor decode scales of a quantized shard into a gather buffer: the same on every rank
 * (the MAX all-reduce made them), so copied locally instead of gathered. */
gln_status_t gln_sharded_copy_scales(gln_sharded_weights_t *sw, float *scale_inv) {
    return gln_op_memcpy(sw->ctx, scale_inv, stored_scales(sw), (size_t)sw->cfg.num_experts * sizeof(float),
                         GLN_COPY_BACKEND_TO_BACKEND);
}

/* The columnwise copies of a gathered per-tensor or 128x128 quantized shard (MXFP8 gathers its
 * stored columnwise shard instead).  buf: a backward buffer whose rowwise FP8 bytes and scales
 * are complete in stream order.  Per-tensor: each expert's bytes transposed,
 * the decode scale shared.  128x128: the bytes transposed, and each expert's tile grid
 * [ceil(K_out/128), ceil(K_in/128)] (row pitch pad4(ceil(K_in/128))) transposed into
 * [ceil(K_in/128), pad4(ceil(K_out/128))] with zero padding, the layout gln_quantize writes.
 * Exact: the scale of a tensor or of a 128x128 tile does not depend on the direction. */
gln_status_t gln_sharded_columnwise(gln_sharded_weights_t *sw, char *buf) {
    static const char *call = "gln_sharded_weights: materialize_backward (quantized shard)";
    const int64_t ko = sw->cfg.out_features, ki = sw->cfg.in_features, n = sw->cfg.num_experts;
    gln_transpose_t t = {1, n, ko, ki, buf, ki, sw->expert_stride, buf + gln_sharded_col_offset(sw), ko, ko * ki};
    GLN_TRY(gln_op_transpose_batched(sw->ctx, call, &t));
    if (!gln_sharded_fp8_2d(sw)) return GLN_STATUS_SUCCESS;
    const int64_t tr = (ko + 127) / 128, tc = (ki + 127) / 128, grid = gln_sharded_col_grid_elems(sw);
    const int64_t row_pitch = gln_sharded_2d_grid_cols(sw);
    float *cs = (float *)(buf + gln_sharded_col_scales_offset(sw));
    GLN_TRY(gln_ctx_zero(sw->ctx, cs, (size_t)(n * grid) * sizeof(float)));
    gln_transpose_t g = {sizeof(float), n, tr, tc, buf + gln_sharded_fp8_scales_offset(sw), row_pitch,
                         tr * row_pitch, cs, (tr + 3) / 4 * 4, grid};
    return gln_op_transpose_batched(sw->ctx, call, &g);
}

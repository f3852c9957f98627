/* Sharded weight group: the layout of its buffers — which FP8 all-gather it runs, and the sizes
 * and offsets of the gathered buffers (sharded.h describes each layout).  Pure arithmetic on the
 * group's configuration and shard sizes, shared by creation, the FP8 shard and the hooks. */
#include <stddef.h>
#include <stdint.h>

#include "weights/sharded.h"

size_t gln_sharded_full_bytes(const gln_sharded_weights_t *sw) {
    return (size_t)sw->ranks * (size_t)sw->shard_len * gln_dtype_size(sw->cfg.working_dtype);
}

size_t gln_sharded_fp8_scales_offset(const gln_sharded_weights_t *sw) {
    return ((size_t)sw->ranks * (size_t)sw->shard_len + 15) & ~(size_t)15;
}

int gln_sharded_fp8_mx(const gln_sharded_weights_t *sw) {
    return sw->cfg.fp8_gather && sw->cfg.fp8_quant.mode == GLN_SCALING_MXFP8_1D;
}

int gln_sharded_mx_qshard(const gln_sharded_weights_t *sw) {
    return gln_sharded_fp8_mx(sw) && sw->cfg.quantized_shard;
}

int gln_sharded_fp8_2d(const gln_sharded_weights_t *sw) {
    return sw->cfg.fp8_gather && sw->cfg.fp8_quant.mode == GLN_SCALING_BLOCK_2D;
}

void gln_sharded_expert_segment(const gln_sharded_weights_t *sw, int32_t e, int64_t *lo, int64_t *hi) {
    int64_t a = (int64_t)e * sw->expert_stride, b = a + sw->expert_elems;
    int64_t s0 = sw->shard_offset, s1 = sw->shard_offset + sw->shard_len;
    *lo = a > s0 ? a : s0;
    *hi = b < s1 ? b : s1;
}

int64_t gln_sharded_block_cols(const gln_sharded_weights_t *sw) {
    if (gln_sharded_fp8_2d(sw) || gln_sharded_mx_qshard(sw)) return sw->cfg.in_features;
    return gln_sharded_fp8_mx(sw) ? 128 : 0;
}

int64_t gln_sharded_2d_grid_cols(const gln_sharded_weights_t *sw) {
    return ((sw->cfg.in_features + 127) / 128 + 3) / 4 * 4;
}

/* pad128(K_out) rows of K_in/32 codes (K_in is a multiple of 128: no column padding) */
size_t gln_sharded_mx_grid_bytes(const gln_sharded_weights_t *sw) {
    size_t rows = ((size_t)sw->cfg.out_features + 127) & ~(size_t)127;
    return rows * (size_t)(sw->cfg.in_features / 32);
}

/* pad4(ceil(K_out/32)) rows of K_in codes (K_in is a multiple of 128: no column padding) */
size_t gln_sharded_mx_col_grid_bytes(const gln_sharded_weights_t *sw) {
    size_t rows = ((size_t)(sw->cfg.out_features + 31) / 32 + 3) & ~(size_t)3;
    return rows * (size_t)sw->cfg.in_features;
}

size_t gln_sharded_col_offset(const gln_sharded_weights_t *sw) {
    return (gln_sharded_fp8_bytes(sw) + 15) & ~(size_t)15;
}

int64_t gln_sharded_col_grid_elems(const gln_sharded_weights_t *sw) {
    int64_t tr = (sw->cfg.out_features + 127) / 128, tc = (sw->cfg.in_features + 127) / 128;
    return tc * ((tr + 3) / 4 * 4);
}

size_t gln_sharded_col_scales_offset(const gln_sharded_weights_t *sw) {
    size_t col = (size_t)sw->cfg.num_experts * (size_t)sw->expert_elems;
    return (gln_sharded_col_offset(sw) + col + 15) & ~(size_t)15;
}

size_t gln_sharded_qshard_backward_bytes(const gln_sharded_weights_t *sw) {
    if (gln_sharded_fp8_mx(sw)) /* the columnwise copy alone, laid out like the forward's */
        return gln_sharded_fp8_scales_offset(sw) + (size_t)sw->cfg.num_experts * gln_sharded_mx_col_grid_bytes(sw) +
               (size_t)sw->ranks * (size_t)sw->shard_len / 32;
    size_t grids = gln_sharded_fp8_2d(sw) ? (size_t)sw->cfg.num_experts *
                                                (size_t)gln_sharded_col_grid_elems(sw) * sizeof(float)
                                          : 0;
    return gln_sharded_col_scales_offset(sw) + grids;
}

size_t gln_sharded_fp8_bytes(const gln_sharded_weights_t *sw) {
    size_t n = (size_t)sw->cfg.num_experts;
    if (gln_sharded_fp8_mx(sw))
        return gln_sharded_fp8_scales_offset(sw) + n * gln_sharded_mx_grid_bytes(sw) +
               (size_t)sw->ranks * (size_t)sw->shard_len / 32;
    if (gln_sharded_fp8_2d(sw))
        return gln_sharded_fp8_scales_offset(sw) + (size_t)sw->ranks * sw->sscale_bytes;
    return gln_sharded_fp8_scales_offset(sw) + n * sizeof(float);
}

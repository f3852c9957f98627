/* A batched 2-D transpose of small-element matrices: the columnwise FP8 copies (bytes) and the
 * transposed 128x128 tile-scale grids (FP32) that the sharded group's quantized shard hands to
 * the dgrad.  Strides count elements, so padded sources and destinations (a padded expert, a
 * scale grid with padded columns) are described as they lie. */
#ifndef GLN_BACKEND_TRANSPOSE_H
#define GLN_BACKEND_TRANSPOSE_H

#include <stddef.h>
#include <stdint.h>

/* dst[b·dst_stride + c·dst_ld + r] = src[b·src_stride + r·src_ld + c] for b < batch, r < rows,
 * c < cols; elements of elem_size bytes (1 or 4); nothing else of dst is written.  The caller
 * guarantees rows <= dst_ld, cols <= src_ld and non-overlapping src / dst. */
typedef struct gln_transpose {
    size_t elem_size;
    int64_t batch, rows, cols;
    const void *src;
    int64_t src_ld, src_stride;
    void *dst;
    int64_t dst_ld, dst_stride;
} gln_transpose_t;

/* The reference: the CPU backend's slot, and the twin the CUDA kernel is tested against. */
void gln_transpose_batched_ref(const gln_transpose_t *t);

#endif

/* Tensor descriptors: quantized buffer sizes (on the one layout definition of
 * tensor/scale_layout.h: scale grids, member scale sizes, where the scale of element (r, c)
 * lives), grouped-tensor member views and the generic argument checks every public call
 * applies to tensors. */
#ifndef GLN_TENSOR_TENSOR_H
#define GLN_TENSOR_TENSOR_H

#include "grouplin.h"
#include "tensor/scale_layout.h" /* scale grids, member scale sizes, scale placement */

/* 1 when a [rows, cols] tensor has no element.  Every buffer of an empty tensor is empty, and
 * so is every scale grid except the one scale of per-tensor scaling (each grid of the layout
 * table has a factor ceil(0 / block) or pad(0)): operations on empty tensors return at once,
 * whatever the other dimension (an [R, 0] tensor must not cost R steps). */
static inline int gln_tensor_is_empty(const gln_tensor_t *t) { return t->rows == 0 || t->cols == 0; }

/* 1 for the high-precision dtypes (fp32, bf16, fp16): the one definition of the idea. */
static inline int gln_dtype_is_high_precision(gln_dtype_t d) {
    return d == GLN_DTYPE_FP32 || d == GLN_DTYPE_BF16 || d == GLN_DTYPE_FP16;
}

const char *gln_scaling_name(gln_scaling_mode_t mode);
int gln_scaling_mode_valid(gln_scaling_mode_t mode);

/* gln_quant_layout for internal callers: failures are reported under `fn`, the public call
 * that needed the layout. */
gln_status_t gln_layout_compute(const char *fn, gln_scaling_mode_t mode, gln_dtype_t dtype, int64_t rows,
                                int64_t cols, gln_quant_layout_t *layout);

/* Generic checks of a tensor argument named `name` of call `fn`: non-NULL, rows / cols in
 * [0, GLN_MAX_DIM] and rows·cols <= GLN_MAX_ELEMS, a
 * valid dtype, data non-NULL for a non-empty plain tensor, FP8 dtype iff a scaling mode. */
gln_status_t gln_tensor_validate(const char *fn, const char *name, const gln_tensor_t *t);

/* Checks of a grouped tensor: num >= 1, splits non-NULL, packed tensor valid, and for host
 * splits each split >= 0 and their sum <= packed.rows. */
gln_status_t gln_grouped_validate(const char *fn, const char *name, const gln_grouped_tensor_t *g);
/* The split checks alone, for a backend that can read its own splits (CPU). */
gln_status_t gln_grouped_validate_splits(const char *fn, const char *name, const gln_grouped_tensor_t *g);

/* View of member i (host-readable splits): data / col_data at element offset Σ_{j<i} splits[j]·cols,
 * scales at the member's scale offsets, per-tensor amax / scale pointers offset by i.  NULL
 * buffers stay NULL. */
gln_status_t gln_grouped_member(const gln_grouped_tensor_t *g, int32_t i, gln_tensor_t *member);

#endif

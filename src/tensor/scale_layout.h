/* Quantized scale layouts: THE definition of the padded scale grids of the table above
 * gln_tensor_t in grouplin.h, of the scale elements of one (grouped-tensor) member, and of where
 * the decode scale of logical element (r, c) lives.  Header-only and `GLN_HD static inline`, so
 * the tensor module (buffer sizes, member offsets), the CPU quantizers and GEMMs and the CUDA
 * kernels all compute a layout with the same code: there is no device twin.
 *
 * Pure integer arithmetic on shapes the callers have checked (rows, cols within the size limits
 * of grouplin.h: no product here comes near int64 overflow, see gln_layout_compute). */
#ifndef GLN_TENSOR_SCALE_LAYOUT_H
#define GLN_TENSOR_SCALE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "common/host_device.h"
#include "grouplin.h"

/* Round n up to a multiple of m (m > 0, n >= 0). */
GLN_HD static inline int64_t gln_round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
GLN_HD static inline int64_t gln_ceil_div(int64_t n, int64_t m) { return (n + m - 1) / m; }

/* Elements along one block edge per mode: 32 (MXFP8), 128 (block), 0 otherwise. */
GLN_HD static inline int64_t gln_scaling_block(gln_scaling_mode_t mode) {
    if (mode == GLN_SCALING_MXFP8_1D) return 32;
    if (mode == GLN_SCALING_BLOCK_1D || mode == GLN_SCALING_BLOCK_2D) return 128;
    return 0;
}

/* Bytes of one scale element: 4 (TENSOR, BLOCK_*: FP32), 1 (MXFP8: E8M0), 0 (NONE). */
GLN_HD static inline size_t gln_scale_elem_size(gln_scaling_mode_t mode) {
    if (mode == GLN_SCALING_NONE) return 0;
    return mode == GLN_SCALING_MXFP8_1D ? 1 : 4;
}

/* 1 when the columnwise data copy is stored transposed ([cols, rows]): TENSOR and BLOCK_*. */
GLN_HD static inline int gln_scaling_transposes(gln_scaling_mode_t mode) {
    return mode == GLN_SCALING_TENSOR || mode == GLN_SCALING_BLOCK_1D || mode == GLN_SCALING_BLOCK_2D;
}

/* The padded scale grid [*gr, *gc] of the rowwise (columnwise = 0) or columnwise copy of an
 * [R, C] tensor: the table above gln_tensor_t in grouplin.h.  NONE (or an invalid mode): 0 x 0. */
GLN_HD static inline void gln_scale_grid(gln_scaling_mode_t mode, int64_t R, int64_t C, int columnwise,
                                         int64_t *gr, int64_t *gc) {
    switch (mode) {
    case GLN_SCALING_TENSOR:
        *gr = 1;
        *gc = 1;
        return;
    case GLN_SCALING_MXFP8_1D:
        if (!columnwise) {
            *gr = gln_round_up(R, 128);
            *gc = gln_round_up(gln_ceil_div(C, 32), 4);
        } else {
            *gr = gln_round_up(gln_ceil_div(R, 32), 4);
            *gc = gln_round_up(C, 128);
        }
        return;
    case GLN_SCALING_BLOCK_1D:
        if (!columnwise) {
            *gr = gln_ceil_div(C, 128);
            *gc = gln_round_up(R, 4);
        } else {
            *gr = gln_ceil_div(R, 128);
            *gc = gln_round_up(C, 4);
        }
        return;
    case GLN_SCALING_BLOCK_2D:
        if (!columnwise) {
            *gr = gln_ceil_div(R, 128);
            *gc = gln_round_up(gln_ceil_div(C, 128), 4);
        } else {
            *gr = gln_ceil_div(C, 128);
            *gc = gln_round_up(gln_ceil_div(R, 128), 4);
        }
        return;
    default:
        *gr = 0;
        *gc = 0;
        return;
    }
}

/* Scale elements of one member (rowwise / columnwise) of `rows` rows: the whole padded grid
 * (TENSOR: always 1; NONE: 0).  A grouped tensor's member i starts at the sum of these over
 * the members before it (gln_grouped_scale_offsets). */
GLN_HD static inline int64_t gln_member_scale_elems(gln_scaling_mode_t mode, int64_t rows, int64_t cols,
                                                    int columnwise) {
    int64_t gr, gc;
    gln_scale_grid(mode, rows, cols, columnwise, &gr, &gc);
    return gr * gc;
}

/* Index of the scale of logical element (r, c) in a copy's scale buffer whose grid is `gc`
 * wide (the second value of gln_scale_grid): for kernels that compute the grid once per tensor.
 * TENSOR: 0; NONE (or an invalid mode): -1. */
GLN_HD static inline int64_t gln_scale_index_in_grid(gln_scaling_mode_t mode, int columnwise, int64_t r,
                                                     int64_t c, int64_t gc) {
    switch (mode) {
    case GLN_SCALING_TENSOR: return 0;
    case GLN_SCALING_MXFP8_1D: return columnwise ? (r / 32) * gc + c : r * gc + c / 32;
    case GLN_SCALING_BLOCK_1D: return columnwise ? (r / 128) * gc + c : (c / 128) * gc + r;
    case GLN_SCALING_BLOCK_2D: return columnwise ? (c / 128) * gc + r / 128 : (r / 128) * gc + c / 128;
    default: return -1;
    }
}

/* Index into the rowwise (columnwise = 0) or columnwise scale buffer of the scale applied to
 * logical element (r, c) of a [rows, cols] tensor; -1 for GLN_SCALING_NONE.  THE definition of
 * scale placement, used by the quantizers and the GEMMs of every backend alike. */
GLN_HD static inline int64_t gln_scale_index(gln_scaling_mode_t mode, int64_t rows, int64_t cols, int columnwise,
                                             int64_t r, int64_t c) {
    int64_t gr, gc;
    gln_scale_grid(mode, rows, cols, columnwise, &gr, &gc);
    return gln_scale_index_in_grid(mode, columnwise, r, c, gc);
}

#endif

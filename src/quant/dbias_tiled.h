/* The summation order of the bias gradient when it is computed in the same pass as the
 * quantization of dy (the fused grouped quantize + dbias, backend slot grouped_quantize_dbias).
 *
 * The plain grouped dbias sums a member's column in row order, a chain as long as the member:
 * a kernel that quantizes dy tile by tile cannot follow it.  The fused order follows the tiles
 * of the CUDA quantize kernels (src/backend/cuda/cuda_quant_tile.cuh: 128-row tiles, 256
 * threads, thread t owning rows t/4 and t/4 + 64 of the tile), and the CPU reference below
 * computes exactly it, so both backends give the same bits.  For member i (rows 0..m-1 of its
 * own) and column j, with v(r) = dy_i[r, j] widened to FP32 (exact) for r < m and +0 past m:
 *
 *   tile t (rows 128t .. 128t+127), q = 0..63:  a_q = v(128t + q) + v(128t + q + 64)
 *   groups of 8 (w = 0..7), a pairwise tree:    d_w = ((a_8w + a_8w+1) + (a_8w+2 + a_8w+3))
 *                                                   + ((a_8w+4 + a_8w+5) + (a_8w+6 + a_8w+7))
 *   the tile, in order:                         p_t = (((d_0 + d_1) + d_2) + ...) + d_7
 *   the member, in tile order:                  s = ((0 + p_0) + p_1) + ...;  s = s + old (accumulate)
 *   rounded once to the dbias dtype.  An empty member writes 0 (or, accumulating, is left alone).
 *
 * Every + is one FP32 addition; a NaN operand comes back quieted, the first operand's when both
 * are NaN (the host's SSE rule, gln_dev_add on the device), and a NaN made by the addition itself
 * (Inf - Inf) is 0x7FFFFFFF (the device's; the host's default NaN would be 0xFFC00000).  The error bound is that of any
 * FP32 summation of m terms ((m - 1)·u·Σ|v|); the tree makes it smaller than the row chain's. */
#ifndef GLN_QUANT_DBIAS_TILED_H
#define GLN_QUANT_DBIAS_TILED_H

#include "grouplin.h"

#define GLN_DBIAS_TILE_ROWS 128

/* dbias[i] (+)= the tiled-order column sums of member i of dy (host splits), as above. */
gln_status_t gln_grouped_dbias_tiled_ref(const gln_grouped_tensor_t *dy, gln_tensor_t *dbias, int accumulate);

#endif

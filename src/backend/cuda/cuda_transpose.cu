/* The batched transpose (backend/transpose.h) on the context's stream: the sharded group's
 * columnwise FP8 copies (1-byte elements) and transposed tile-scale grids (4-byte elements).
 *
 * One 32x32 tile per block iteration, staged through shared memory so that both the reads (a
 * warp takes 32 consecutive elements of one source row) and the writes (32 consecutive elements
 * of one destination row) are coalesced; the tile is padded to 33 words per row so that the
 * column-wise pass hits 32 distinct banks.  Elements move as raw bits (uint8_t / uint32_t), so
 * the result equals gln_transpose_batched_ref bit for bit, NaN payloads included.  A grid-stride
 * loop over all tiles of all matrices takes any batch and shape with one launch. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_dist.h"
#include "common/error.h"
#include "numerics/numerics.h"
}
#include "backend/cuda/cuda_device.h"

#define GLN_TRANSPOSE_TILE 32
#define GLN_TRANSPOSE_ROWS 8 /* threadIdx.y extent: each thread moves TILE / ROWS elements */

template <typename T>
__global__ void gln_transpose_batched_kernel(gln_transpose_t t, int64_t row_tiles, int64_t col_tiles,
                                             int64_t tiles) {
    __shared__ uint32_t tile[GLN_TRANSPOSE_TILE][GLN_TRANSPOSE_TILE + 1];
    const T *src = (const T *)t.src;
    T *dst = (T *)t.dst;
    const int64_t per_matrix = row_tiles * col_tiles;
    for (int64_t id = blockIdx.x; id < tiles; id += gridDim.x) {
        const int64_t b = id / per_matrix, rest = id % per_matrix;
        const int64_t r0 = rest / col_tiles * GLN_TRANSPOSE_TILE, c0 = rest % col_tiles * GLN_TRANSPOSE_TILE;
        const T *s = src + b * t.src_stride;
        T *d = dst + b * t.dst_stride;
        for (int j = threadIdx.y; j < GLN_TRANSPOSE_TILE; j += GLN_TRANSPOSE_ROWS) {
            const int64_t r = r0 + j, c = c0 + threadIdx.x;
            if (r < t.rows && c < t.cols) tile[j][threadIdx.x] = s[r * t.src_ld + c];
        }
        __syncthreads();
        for (int j = threadIdx.y; j < GLN_TRANSPOSE_TILE; j += GLN_TRANSPOSE_ROWS) {
            const int64_t c = c0 + j, r = r0 + threadIdx.x;
            if (r < t.rows && c < t.cols) d[c * t.dst_ld + r] = (T)tile[threadIdx.x][j];
        }
        __syncthreads(); /* the tile is refilled by the next iteration */
    }
}

extern "C" gln_status_t gln_cuda_transpose_batched(gln_context_t *ctx, const gln_transpose_t *t) {
    if (t->batch <= 0 || t->rows <= 0 || t->cols <= 0) return GLN_STATUS_SUCCESS;
    const int64_t rt = (t->rows + GLN_TRANSPOSE_TILE - 1) / GLN_TRANSPOSE_TILE;
    const int64_t ct = (t->cols + GLN_TRANSPOSE_TILE - 1) / GLN_TRANSPOSE_TILE;
    const int64_t tiles = t->batch * rt * ct;
    const unsigned int blocks = (unsigned int)(tiles < 65536 ? tiles : 65536); /* grid-stride past it */
    const dim3 threads(GLN_TRANSPOSE_TILE, GLN_TRANSPOSE_ROWS);
    cudaStream_t stream = gln_cuda_state(ctx)->stream;
    if (t->elem_size == 1) {
        gln_transpose_batched_kernel<uint8_t><<<blocks, threads, 0, stream>>>(*t, rt, ct, tiles);
    } else if (t->elem_size == 4) {
        gln_transpose_batched_kernel<uint32_t><<<blocks, threads, 0, stream>>>(*t, rt, ct, tiles);
    } else {
        return gln_fail(GLN_STATUS_INTERNAL_ERROR, "transpose_batched: element size %zu is not 1 or 4",
                        t->elem_size);
    }
    return gln_cuda_check_launch("gln_sharded_weights (columnwise copies)", "gln_transpose_batched_kernel");
}

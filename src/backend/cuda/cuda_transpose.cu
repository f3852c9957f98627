/* The batched transpose (backend/transpose.h) on the context's stream: the sharded group's
 * columnwise FP8 copies (1-byte elements) and transposed tile-scale grids (4-byte elements).
 *
 * One 32x32 tile per block iteration, staged through shared memory so that both the reads (a
 * warp takes 32 consecutive elements of one source row) and the writes (32 consecutive elements
 * of one destination row) are coalesced; the tile is padded to 33 words per row so that the
 * column-wise pass hits 32 distinct banks.  Elements move as raw bits (uint8_t / uint32_t), so
 * the result equals gln_transpose_batched_ref bit for bit, NaN payloads included.  A grid-stride
 * loop over all tiles of all matrices takes any batch and shape with one launch.
 *
 * FP8 bytes, the bulk of the work (a backward materialization transposes every expert weight),
 * take a 64x64 tile in which each thread moves 4 bytes as one 32-bit word both ways, so a warp
 * reads and writes 64-byte runs instead of 32 single bytes; that needs 4-byte aligned rows
 * (pointers, leading dimensions and batch strides multiples of 4), which the sharded group's
 * experts have whenever K_in and K_out are multiples of 4.  Other byte matrices, and the FP32
 * tile grids, take the element tile. */
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

#define GLN_TRANSPOSE_WORD_TILE 64 /* bytes per side of the 4-byte-word tile */
#define GLN_TRANSPOSE_WORD_THREADS 256
#define GLN_TRANSPOSE_MAX_BLOCKS 8192 /* far more than the resident blocks; the rest grid-strides */

/* One word (4 bytes at c..c+3 of a tile row), or the bytes of it inside the matrix at an edge. */
__device__ __forceinline__ void word_load(const uint8_t *row, int64_t c, int64_t cols, uint8_t *out) {
    if (c + 3 < cols) {
        *(uint32_t *)out = *(const uint32_t *)(row + c);
        return;
    }
    for (int k = 0; k < 4; k++)
        if (c + k < cols) out[k] = row[c + k];
}

__global__ void __launch_bounds__(GLN_TRANSPOSE_WORD_THREADS)
    gln_transpose_bytes_kernel(gln_transpose_t t, int64_t row_tiles, int64_t col_tiles, int64_t tiles) {
    /* rows of 68 bytes: 4-byte aligned for the word stores, and 17 words apart so that the
     * column reads spread over the banks */
    __shared__ __align__(4) uint8_t tile[GLN_TRANSPOSE_WORD_TILE][GLN_TRANSPOSE_WORD_TILE + 4];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16; /* 16 words a tile row, 16 rows a pass */
    const int64_t per_matrix = row_tiles * col_tiles;
    for (int64_t id = blockIdx.x; id < tiles; id += gridDim.x) {
        const int64_t b = id / per_matrix, rest = id % per_matrix;
        const int64_t r0 = rest / col_tiles * GLN_TRANSPOSE_WORD_TILE, c0 = rest % col_tiles * GLN_TRANSPOSE_WORD_TILE;
        const uint8_t *s = (const uint8_t *)t.src + b * t.src_stride;
        uint8_t *d = (uint8_t *)t.dst + b * t.dst_stride;
        for (int j = ty; j < GLN_TRANSPOSE_WORD_TILE; j += 16) {
            const int64_t r = r0 + j;
            if (r < t.rows) word_load(s + r * t.src_ld, c0 + 4 * tx, t.cols, &tile[j][4 * tx]);
        }
        __syncthreads();
        for (int j = ty; j < GLN_TRANSPOSE_WORD_TILE; j += 16) { /* destination row c0 + j */
            const int64_t c = c0 + j, r = r0 + 4 * tx;
            if (c >= t.cols) continue;
            uint8_t *out = d + c * t.dst_ld;
            if (r + 3 < t.rows) {
                const uint32_t w = (uint32_t)tile[4 * tx][j] | (uint32_t)tile[4 * tx + 1][j] << 8 |
                                   (uint32_t)tile[4 * tx + 2][j] << 16 | (uint32_t)tile[4 * tx + 3][j] << 24;
                *(uint32_t *)(out + r) = w; /* little-endian: byte k of the word is row r + k */
            } else {
                for (int k = 0; k < 4; k++)
                    if (r + k < t.rows) out[r + k] = tile[4 * tx + k][j];
            }
        }
        __syncthreads(); /* the tile is refilled by the next iteration */
    }
}

/* Bytes whose every row start is 4-byte aligned on both sides. */
static int words_aligned(const gln_transpose_t *t) {
    return t->elem_size == 1 && (uintptr_t)t->src % 4 == 0 && (uintptr_t)t->dst % 4 == 0 && t->src_ld % 4 == 0 &&
           t->dst_ld % 4 == 0 && t->src_stride % 4 == 0 && t->dst_stride % 4 == 0;
}

static unsigned int grid_of(int64_t tiles) {
    return (unsigned int)(tiles < GLN_TRANSPOSE_MAX_BLOCKS ? tiles : GLN_TRANSPOSE_MAX_BLOCKS);
}

extern "C" gln_status_t gln_cuda_transpose_batched(gln_context_t *ctx, const gln_transpose_t *t) {
    if (t->batch <= 0 || t->rows <= 0 || t->cols <= 0) return GLN_STATUS_SUCCESS;
    cudaStream_t stream = gln_cuda_state(ctx)->stream;
    if (words_aligned(t)) {
        const int64_t wrt = (t->rows + GLN_TRANSPOSE_WORD_TILE - 1) / GLN_TRANSPOSE_WORD_TILE;
        const int64_t wct = (t->cols + GLN_TRANSPOSE_WORD_TILE - 1) / GLN_TRANSPOSE_WORD_TILE;
        const int64_t wtiles = t->batch * wrt * wct;
        gln_transpose_bytes_kernel<<<grid_of(wtiles), GLN_TRANSPOSE_WORD_THREADS, 0, stream>>>(*t, wrt, wct, wtiles);
        return gln_cuda_check_launch("gln_sharded_weights (columnwise copies)", "gln_transpose_bytes_kernel");
    }
    const int64_t rt = (t->rows + GLN_TRANSPOSE_TILE - 1) / GLN_TRANSPOSE_TILE;
    const int64_t ct = (t->cols + GLN_TRANSPOSE_TILE - 1) / GLN_TRANSPOSE_TILE;
    const int64_t tiles = t->batch * rt * ct;
    const unsigned int blocks = grid_of(tiles);
    const dim3 threads(GLN_TRANSPOSE_TILE, GLN_TRANSPOSE_ROWS);
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

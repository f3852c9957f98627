/* Grouped dequantization to bf16 on the device: the first half of the MXFP8 / power-of-two
 * block-scaled grouped GEMMs on Hopper (DESIGN.md §7), which has no tensor-core path for those
 * scale modes.  Every member of a grouped MXFP8_1D / BLOCK_1D / BLOCK_2D tensor, rowwise or
 * columnwise copy, becomes a bf16 [rows, cols] matrix in the normal orientation at the member's
 * packed rows; cuda_grouped_gemm.c then runs the bf16 CUTLASS grouped GEMMs on it.
 *
 * Exactness: each element is fp8 value × decode scale in FP32 (the operand order and NaN rule
 * of gln_dequant_kernel in cuda_quant.cu, so the CPU's dequantization bit for bit), rounded once
 * to bf16.  With a power-of-two scale the product has at most 4 significant bits, so the bf16
 * rounding changes nothing unless the scale pushes the value below bf16's normal range.
 *
 * Layouts (tensor/scale_layout.h, grouplin.h): member i's data starts at element
 * row_start_i · cols in both copies; the BLOCK columnwise copy is stored transposed per member
 * ([cols, m_i]), the MXFP8 one is not.  Member i's scales start at plan->srow[i] / scol[i] and
 * use the padded grid of an [m_i, cols] tensor.
 *
 * One launch for all members: a block converts a 64 × 64 tile of one member (the grid is the
 * host's bound on member tiles, blocks past the last tile exit, gln_group_tile_warp finds the
 * member), so nothing waits for the host.  Output in 16-byte stores of 8 bf16 when the columns
 * allow; the transposed copy goes through a shared-memory tile so that reads and writes are both
 * along memory.  The experts' weights (a list of same-shape tensors, no splits) use the same
 * tile code, 64 tensors per launch. */
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "numerics/numerics.h"
#include "tensor/scale_layout.h"
#include "tensor/tensor.h"
}

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_group.cuh"

#define DQ_TILE 64             /* rows and columns of one block's tile */
#define DQ_THREADS 256
#define DQ_VEC 8               /* bf16 per 16-byte store */
#define DQ_LIST_CHUNK 64       /* tensors of a list per launch (pointers travel by value) */
#define DQ_MAX_GRID_Y 65535

/* What is uniform across one launch. */
typedef struct dq_copy {
    int mode;        /* gln_scaling_mode_t */
    int columnwise;  /* which copy (its scale grid) */
    int transposed;  /* the copy is stored [cols, m] per member (BLOCK columnwise) */
    int fp8;         /* gln_dtype_t of the data */
    int vec;         /* cols % 8 == 0 and the buffers aligned: 8-byte loads, 16-byte stores */
    int64_t cols;
} dq_copy_t;

/* The decode scale of logical element (r, c) of a member whose scale grid is gc wide. */
__device__ __forceinline__ float dq_scale(const void *scales, const dq_copy_t &d, int64_t r, int64_t c, int64_t gc) {
    const int64_t k = gln_scale_index_in_grid((gln_scaling_mode_t)d.mode, d.columnwise, r, c, gc);
    return d.mode == GLN_SCALING_MXFP8_1D ? gln_e8m0_decode(((const uint8_t *)scales)[k])
                                          : ((const float *)scales)[k];
}

/* scale × fp8 in FP32 (scale first, as gln_dequant_kernel), one rounding to bf16. */
__device__ __forceinline__ uint16_t dq_value(uint8_t b, float scale, int fp8) {
    return gln_f32_to_bf16_bits(gln_dev_mul(scale, gln_dev_from_fp8(b, fp8)));
}

/* Eight bf16 (h[0] at the lowest address) as one 16-byte store. */
__device__ __forceinline__ void dq_store8(uint16_t *dst, const uint16_t h[DQ_VEC]) {
    uint4 v;
    v.x = (uint32_t)h[0] | (uint32_t)h[1] << 16;
    v.y = (uint32_t)h[2] | (uint32_t)h[3] << 16;
    v.z = (uint32_t)h[4] | (uint32_t)h[5] << 16;
    v.w = (uint32_t)h[6] | (uint32_t)h[7] << 16;
    *(uint4 *)dst = v;
}

/* An untransposed copy: thread (rr, 8-column group) converts its 8 columns of each of its rows. */
__device__ void dq_tile_rows(const dq_copy_t &d, const uint8_t *q, const void *scales, uint16_t *out, int64_t m,
                             int64_t gc, int64_t tr0, int64_t c0) {
    const int64_t c = c0 + (int64_t)(threadIdx.x % (DQ_TILE / DQ_VEC)) * DQ_VEC;
    if (c >= d.cols) return;
    for (int rr = (int)threadIdx.x / (DQ_TILE / DQ_VEC); rr < DQ_TILE; rr += DQ_THREADS / (DQ_TILE / DQ_VEC)) {
        const int64_t r = tr0 + rr;
        if (r >= m) return;
        const uint8_t *src = q + (size_t)r * (size_t)d.cols + (size_t)c;
        uint16_t *dst = out + (size_t)r * (size_t)d.cols + (size_t)c;
        if (d.vec) {
            const uint2 raw = *(const uint2 *)src;
            uint16_t h[DQ_VEC];
            for (int j = 0; j < DQ_VEC; j++) {
                const uint8_t b = (uint8_t)((j < 4 ? raw.x : raw.y) >> (8 * (j % 4)));
                h[j] = dq_value(b, dq_scale(scales, d, r, c + j, gc), d.fp8);
            }
            dq_store8(dst, h);
        } else {
            for (int j = 0; j < DQ_VEC && c + j < d.cols; j++)
                dst[j] = dq_value(src[j], dq_scale(scales, d, r, c + j, gc), d.fp8);
        }
    }
}

/* A transposed copy (member stored [cols, m]): converted into the shared tile[c][r] with reads
 * along r, then written out along c. */
__device__ void dq_tile_transposed(const dq_copy_t &d, const uint8_t *q, const void *scales, uint16_t *out,
                                   int64_t m, int64_t gc, int64_t tr0, int64_t c0,
                                   uint16_t (*tile)[DQ_TILE + 2]) {
    for (int idx = (int)threadIdx.x; idx < DQ_TILE * DQ_TILE; idx += DQ_THREADS) {
        const int rr = idx % DQ_TILE, cc = idx / DQ_TILE;
        const int64_t r = tr0 + rr, c = c0 + cc;
        if (r < m && c < d.cols)
            tile[cc][rr] = dq_value(q[(size_t)c * (size_t)m + (size_t)r], dq_scale(scales, d, r, c, gc), d.fp8);
    }
    __syncthreads(); /* every thread of the block reaches it: the loop above is uniform */
    const int cg = (int)(threadIdx.x % (DQ_TILE / DQ_VEC)) * DQ_VEC;
    const int64_t c = c0 + cg;
    if (c >= d.cols) return;
    for (int rr = (int)threadIdx.x / (DQ_TILE / DQ_VEC); rr < DQ_TILE; rr += DQ_THREADS / (DQ_TILE / DQ_VEC)) {
        const int64_t r = tr0 + rr;
        if (r >= m) return;
        uint16_t *dst = out + (size_t)r * (size_t)d.cols + (size_t)c;
        if (d.vec) { /* c + 8 <= cols: every entry read was written above */
            uint16_t h[DQ_VEC];
            for (int j = 0; j < DQ_VEC; j++) h[j] = tile[cg + j][rr];
            dq_store8(dst, h);
        } else {
            for (int j = 0; j < DQ_VEC && c + j < d.cols; j++) dst[j] = tile[cg + j][rr];
        }
    }
}

/* Tile (rows tr0.., columns c0..) of one member of m rows; q, scales and out at its start. */
__device__ void dq_tile(const dq_copy_t &d, const uint8_t *q, const void *scales, uint16_t *out, int64_t m,
                        int64_t tr0, int64_t c0, uint16_t (*tile)[DQ_TILE + 2]) {
    int64_t gr, gc;
    gln_scale_grid((gln_scaling_mode_t)d.mode, m, d.cols, d.columnwise, &gr, &gc);
    if (d.transposed) dq_tile_transposed(d, q, scales, out, m, gc, tr0, c0, tile);
    else dq_tile_rows(d, q, scales, out, m, gc, tr0, c0);
}

/* Scale pointer at element offset `elems` of a scale buffer of the launch's mode. */
__device__ __forceinline__ const void *dq_scales_at(const void *scales, int mode, int64_t elems) {
    return mode == GLN_SCALING_MXFP8_1D ? (const void *)((const uint8_t *)scales + elems)
                                        : (const void *)((const float *)scales + elems);
}

/* Grid: x = the bound on member tiles, y = column tiles. */
__global__ void gln_grouped_dequant_kernel(const uint8_t *q, const void *scales, const int64_t *rows,
                                           const int64_t *scale_offsets, int32_t num, dq_copy_t d, uint16_t *out) {
    __shared__ uint16_t tile[DQ_TILE][DQ_TILE + 2];
    int32_t member;
    int64_t r0, m, t;
    if (!gln_group_tile_warp(rows, num, DQ_TILE, (int64_t)blockIdx.x, &member, &r0, &m, &t)) return;
    const size_t base = (size_t)r0 * (size_t)d.cols;
    dq_tile(d, q + base, dq_scales_at(scales, d.mode, scale_offsets[member]), out + base, m, t * DQ_TILE,
            (int64_t)blockIdx.y * DQ_TILE, tile);
}

typedef struct dq_list {
    const uint8_t *q[DQ_LIST_CHUNK];
    const void *scales[DQ_LIST_CHUNK];
} dq_list_t;

/* Grid: x = row tiles, y = column tiles, z = tensors of the chunk; tensor j into out + j·R·cols. */
__global__ void gln_list_dequant_kernel(dq_list_t l, int64_t R, dq_copy_t d, uint16_t *out) {
    __shared__ uint16_t tile[DQ_TILE][DQ_TILE + 2];
    const int j = (int)blockIdx.z;
    dq_tile(d, l.q[j], l.scales[j], out + (size_t)j * (size_t)R * (size_t)d.cols, R, (int64_t)blockIdx.x * DQ_TILE,
            (int64_t)blockIdx.y * DQ_TILE, tile);
}

/* ---- host side ------------------------------------------------------------------------------ */

static int dq_mode_ok(gln_scaling_mode_t mode, gln_dtype_t dtype) {
    return gln_dtype_is_fp8(dtype) &&
           (mode == GLN_SCALING_MXFP8_1D || mode == GLN_SCALING_BLOCK_1D || mode == GLN_SCALING_BLOCK_2D);
}

static int aligned(const void *p, uintptr_t bytes) { return ((uintptr_t)p & (bytes - 1)) == 0; }

/* The launch description of copy `columnwise` of tensors like t; vec still to be narrowed by the
 * caller for every data pointer. */
static dq_copy_t dq_copy_of(const gln_tensor_t *t, int columnwise, const void *out) {
    dq_copy_t d;
    d.mode = (int)t->scaling;
    d.columnwise = columnwise;
    d.transposed = columnwise && gln_scaling_transposes(t->scaling);
    d.fp8 = (int)t->dtype;
    d.cols = t->cols;
    d.vec = t->cols % DQ_VEC == 0 && aligned(out, 16);
    return d;
}

static gln_status_t dq_check(const gln_tensor_t *t, int columnwise, const char *what, const char *call) {
    if (!dq_mode_ok(t->scaling, t->dtype))
        return gln_fail(GLN_STATUS_NOT_SUPPORTED, "%s: %s is %s %s; the grouped dequantization takes MXFP8_1D, "
                        "BLOCK_1D or BLOCK_2D FP8", call, what, gln_dtype_name(t->dtype), gln_scaling_name(t->scaling));
    const void *q = columnwise ? t->col_data : t->data, *s = columnwise ? t->col_scale_inv : t->scale_inv;
    if (!q || !s)
        return gln_fail(GLN_STATUS_INVALID_ARGUMENT, "%s: %s has no %s copy (data or scales NULL)", call, what,
                        columnwise ? "columnwise" : "rowwise");
    if (gln_ceil_div(t->cols, DQ_TILE) > DQ_MAX_GRID_Y)
        return gln_fail(GLN_STATUS_NOT_SUPPORTED, "%s: %s has %lld columns; the grouped dequantization takes at most "
                        "%lld", call, what, (long long)t->cols, (long long)DQ_MAX_GRID_Y * DQ_TILE);
    return GLN_STATUS_SUCCESS;
}

extern "C" gln_status_t gln_cuda_grouped_dequantize_bf16(gln_context_t *ctx, const gln_grouped_tensor_t *g,
                                                         int columnwise, const gln_cuda_plan_t *plan, void *out,
                                                         const char *call) {
    const gln_tensor_t *t = &g->packed;
    GLN_TRY(dq_check(t, columnwise, "the grouped operand", call));
    if (t->rows == 0 || t->cols == 0) return GLN_STATUS_SUCCESS;
    const uint8_t *q = (const uint8_t *)(columnwise ? t->col_data : t->data);
    dq_copy_t d = dq_copy_of(t, columnwise, out);
    d.vec = d.vec && aligned(q, 8); /* member starts are multiples of cols (a multiple of 8) */
    const int64_t tiles = gln_group_tiles_bound(t->rows, g->num, DQ_TILE);
    if (tiles > INT32_MAX)
        return gln_fail(GLN_STATUS_NOT_SUPPORTED, "%s: %lld rows are too many for the grouped dequantization", call,
                        (long long)t->rows);
    const dim3 grid((unsigned int)tiles, (unsigned int)gln_ceil_div(t->cols, DQ_TILE));
    gln_grouped_dequant_kernel<<<grid, DQ_THREADS, 0, gln_cuda_state(ctx)->stream>>>(
        q, columnwise ? t->col_scale_inv : t->scale_inv, plan->rows, columnwise ? plan->scol : plan->srow, g->num, d,
        (uint16_t *)out);
    return gln_cuda_check_launch(call, "gln_grouped_dequant_kernel");
}

/* The list's tensors share shape, mode and dtype with list[0] (checked). */
static gln_status_t dq_list_check(const gln_tensor_t *list, int32_t num, int columnwise, const char *call) {
    for (int32_t i = 0; i < num; i++) {
        char what[48];
        snprintf(what, sizeof what, "tensor %d of the list", (int)i);
        GLN_TRY(dq_check(&list[i], columnwise, what, call));
        const gln_tensor_t *a = &list[i], *b = &list[0];
        if (a->rows != b->rows || a->cols != b->cols || a->dtype != b->dtype || a->scaling != b->scaling)
            return gln_fail(GLN_STATUS_INVALID_ARGUMENT, "%s: %s is %s %s [%lld, %lld], tensor 0 %s %s [%lld, %lld]; "
                            "the list must share one", call, what, gln_dtype_name(a->dtype),
                            gln_scaling_name(a->scaling), (long long)a->rows, (long long)a->cols,
                            gln_dtype_name(b->dtype), gln_scaling_name(b->scaling), (long long)b->rows,
                            (long long)b->cols);
    }
    return GLN_STATUS_SUCCESS;
}

extern "C" gln_status_t gln_cuda_dequantize_list_bf16(gln_context_t *ctx, const gln_tensor_t *list, int32_t num,
                                                      int columnwise, void *out, const char *call) {
    if (num <= 0) return GLN_STATUS_SUCCESS;
    GLN_TRY(dq_list_check(list, num, columnwise, call));
    const int64_t R = list[0].rows, C = list[0].cols;
    if (R == 0 || C == 0) return GLN_STATUS_SUCCESS;
    if (gln_ceil_div(R, DQ_TILE) > INT32_MAX)
        return gln_fail(GLN_STATUS_NOT_SUPPORTED, "%s: %lld rows are too many for the dequantization", call,
                        (long long)R);
    dq_copy_t d = dq_copy_of(&list[0], columnwise, out);
    for (int32_t i = 0; i < num; i++) d.vec = d.vec && aligned(columnwise ? list[i].col_data : list[i].data, 8);
    /* every tensor's output starts at a multiple of R·C elements: 16 bytes when C % 8 == 0 */
    const dim3 grid((unsigned int)gln_ceil_div(R, DQ_TILE), (unsigned int)gln_ceil_div(C, DQ_TILE), 1);
    for (int32_t first = 0; first < num; first += DQ_LIST_CHUNK) {
        dq_list_t l;
        memset(&l, 0, sizeof l);
        const int32_t n = num - first < DQ_LIST_CHUNK ? num - first : DQ_LIST_CHUNK;
        for (int32_t j = 0; j < n; j++) {
            const gln_tensor_t *t = &list[first + j];
            l.q[j] = (const uint8_t *)(columnwise ? t->col_data : t->data);
            l.scales[j] = columnwise ? t->col_scale_inv : t->scale_inv;
        }
        const dim3 g3(grid.x, grid.y, (unsigned int)n);
        gln_list_dequant_kernel<<<g3, DQ_THREADS, 0, gln_cuda_state(ctx)->stream>>>(
            l, R, d, (uint16_t *)out + (size_t)first * (size_t)R * (size_t)C);
        GLN_TRY(gln_cuda_check_launch(call, "gln_list_dequant_kernel"));
    }
    return GLN_STATUS_SUCCESS;
}

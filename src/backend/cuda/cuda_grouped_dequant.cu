/* Grouped dequantization to bf16 on the device: the first half of the MXFP8 / power-of-two
 * block-scaled grouped GEMMs on Hopper, which has no tensor-core path for those scale modes.
 * Every member of a grouped MXFP8_1D / BLOCK_1D / BLOCK_2D tensor, rowwise or columnwise copy,
 * becomes a bf16 [rows, cols] matrix in the normal orientation at the member's packed rows;
 * cuda_grouped_gemm.c then runs the bf16 CUTLASS grouped GEMMs on it.
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
 * One launch for all members, nothing waits for the host: the grid is sized from host-known
 * bounds (gln_group_tiles_bound), gln_group_tile_warp finds each tile's member from the device
 * plan, tiles past the last real one are skipped.  The experts' weights (a list of same-shape
 * tensors, no splits) use the same code, 64 tensors per launch.
 *
 * Two kernels, one per stored orientation, both persistent (as many blocks as fit on the device
 * at once, each looping over work items: a tile of one member's rows × a chunk of columns):
 *   - gln_dequant_rows_kernel, copies stored in the normal orientation (MXFP8 both copies, BLOCK
 *     rowwise): an item is DQ_TR rows × DQ_CC columns; each thread converts units of 16 (or 8)
 *     FP8 codes along a row (one 16- or 8-byte load, two or one 16-byte bf16 stores),
 *     DQ_TR·DQ_CC / 16 / DQ_THREADS units per item with every load issued before the first
 *     conversion.  The decode scale is read once per unit (one E8M0 code per 32 columns, one FP32
 *     scale per 128 columns) or, for the MXFP8 columnwise copy (one code per column per 32 rows),
 *     once per item: the 16 codes of the thread's columns, shared by all DQ_TR = 32 rows of the
 *     item.  Columns not a multiple of 8, or unaligned buffers: the same kernel one element at a
 *     time (units of 1), same rules.
 *   - gln_dequant_transposed_kernel, the BLOCK columnwise copies (stored [cols, m] per member):
 *     an item is DQT_R rows × DQT_C columns, read along the stored rows (32 codes of one column
 *     per thread, one scale), converted into a shared bf16 tile and written out along the output
 *     rows in 16-byte stores (element by element where the columns or the run do not allow).
 *   - Fast conversion: two codes at a time through the hardware cvt to f16x2 (exact: every E4M3
 *     and E5M2 value is an fp16 value), widened to FP32 (exact), one FP32 multiply by the scale,
 *     then the bf16 rounding of gln_f32_to_bf16_bits for a non-NaN value (round to nearest even by
 *     adding 0x7FFF plus the kept lsb).  That is the reference's value whenever the codes are
 *     finite and the scale is finite, which a unit checks first (four codes at a time on the
 *     bytes); a unit holding a NaN or Inf code, or with a non-finite scale, takes the reference
 *     path element by element (dq_value: gln_dev_mul and gln_f32_to_bf16_bits).
 * gln_cuda_dequant_last_kernel (cuda_block.h) names the kernel launched last, for the tests. */
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cuda_fp16.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_block.h"
#include "common/error.h"
#include "numerics/numerics.h"
#include "tensor/scale_layout.h"
#include "tensor/tensor.h"
}

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_group.cuh"

#define DQ_VEC 8               /* bf16 per 16-byte store */
#define DQ_LIST_CHUNK 64       /* tensors of a list per launch (pointers travel by value) */

/* What is uniform across one launch. */
typedef struct dq_copy {
    int mode;        /* gln_scaling_mode_t */
    int columnwise;  /* which copy (its scale grid) */
    int transposed;  /* the copy is stored [cols, m] per member (BLOCK columnwise) */
    int fp8;         /* gln_dtype_t of the data */
    int vec;         /* cols % 8 == 0 and the output 16-byte aligned: 16-byte stores */
    int svec;        /* MXFP8 columnwise: the scale buffers 16-byte aligned (vector scale loads) */
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

/* Scale pointer at element offset `elems` of a scale buffer of the launch's mode. */
__device__ __forceinline__ const void *dq_scales_at(const void *scales, int mode, int64_t elems) {
    return mode == GLN_SCALING_MXFP8_1D ? (const void *)((const uint8_t *)scales + elems)
                                        : (const void *)((const float *)scales + elems);
}

typedef struct dq_list {
    const uint8_t *q[DQ_LIST_CHUNK];
    const void *scales[DQ_LIST_CHUNK];
} dq_list_t;

/* ---- the kernels ---------------------------------------------------------------------------- */

#define DQ_THREADS 256
#define DQ_TR 32   /* rows of an item (untransposed copies): the MXFP8 columnwise block height */
#define DQ_CC 512  /* columns of an item (untransposed copies) */
#define DQT_R 64    /* rows of an item (transposed copies) */
#define DQT_C 128   /* columns of an item (transposed copies) */
#define DQT_RUN 32  /* codes of one stored row per thread (transposed copies) */

/* Which copy, as a template argument. */
enum { DQK_MX_ROW, DQK_MX_COL, DQK_B1_ROW, DQK_B2_ROW, DQK_B1_COL, DQK_B2_COL };

/* Where a launch's items come from: a grouped tensor (members from the plan) or a list chunk. */
typedef struct dq_src {
    const uint8_t *q;             /* grouped: the copy's packed data */
    const void *scales;           /* grouped: the copy's scale buffer */
    const int64_t *rows;          /* grouped: plan rows [num + 1] */
    const int64_t *scale_offsets; /* grouped: plan srow or scol */
    int32_t num;                  /* grouped: members */
    int list;                     /* 1: the tensors of dq_list_t, R rows each */
    int64_t R;                    /* list: rows of every tensor */
    int64_t row_tiles;            /* list: row tiles per tensor; grouped: the host's bound on member tiles */
    int64_t col_chunks;           /* column chunks per row tile */
    int64_t items;                /* row tiles (of all tensors) × column chunks */
} dq_src_t;

/* One work item: member (or tensor) data, scales and output at its first row, its rows, the
 * item's first row within it and first column. */
typedef struct dq_item {
    const uint8_t *q;
    const void *s;
    uint16_t *out;
    int64_t m, r0, c0;
} dq_item_t;

/* Item `it` with `tr` rows × `cc` columns; 0 when past the last member tile (grouped only).
 * Every thread of the block calls it with the same `it` (a warp-wide search): all get the same
 * answer. */
__device__ __forceinline__ int dq_find(const dq_src_t &src, const dq_list_t &l, const dq_copy_t &d, int64_t it,
                                       int tr, int cc, uint16_t *out, dq_item_t *x) {
    const int64_t t = it / src.col_chunks;
    x->c0 = (it - t * src.col_chunks) * cc;
    if (src.list) {
        const int64_t j = t / src.row_tiles;
        x->q = l.q[j];
        x->s = l.scales[j];
        x->out = out + (size_t)j * (size_t)src.R * (size_t)d.cols;
        x->m = src.R;
        x->r0 = (t - j * src.row_tiles) * tr;
        return 1;
    }
    int32_t member;
    int64_t first_row, tile;
    if (!gln_group_tile_warp(src.rows, src.num, tr, t, &member, &first_row, &x->m, &tile)) return 0;
    const size_t base = (size_t)first_row * (size_t)d.cols;
    x->q = src.q + base;
    x->s = dq_scales_at(src.scales, d.mode, src.scale_offsets[member]);
    x->out = out + base;
    x->r0 = tile * tr;
    return 1;
}

/* Nonzero when one of the four FP8 codes in w is NaN or Inf (E4M3: magnitude 0x7F; E5M2: the
 * exponent field all ones).  Bytewise on the masked word: adding 1 (or 4) sets a byte's top bit
 * exactly for those codes, and no byte carries into the next. */
template <int FP8>
__device__ __forceinline__ uint32_t dq_special4(uint32_t w) {
    if (FP8 == GLN_DTYPE_FP8_E4M3) return ((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u;
    return ((w & 0x7C7C7C7Cu) + 0x04040404u) & 0x80808080u;
}

/* Nonzero when one of the four E8M0 codes in w is 0xFF (NaN). */
__device__ __forceinline__ uint32_t dq_e8m0_nan4(uint32_t w) { return ((w & 0x7F7F7F7Fu) + 0x01010101u) & w & 0x80808080u; }

/* The finite-scale E8M0 decode (code != 0xFF): gln_e8m0_decode without the NaN case. */
__device__ __forceinline__ float dq_e8m0_finite(uint32_t code) {
    return __uint_as_float(code ? code << 23 : 0x00400000u);
}

__device__ __forceinline__ int dq_finite(float s) { return (__float_as_uint(s) & 0x7F800000u) != 0x7F800000u; }

/* The two codes in the low 16 bits of `pair` (the lower byte first) as FP32, exactly. */
template <int FP8>
__device__ __forceinline__ float2 dq_fp8x2(uint32_t pair) {
    uint32_t h;
    const unsigned short p16 = (unsigned short)pair;
    if (FP8 == GLN_DTYPE_FP8_E4M3) asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h) : "h"(p16));
    else asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h) : "h"(p16));
    return make_float2(__half2float(__ushort_as_half((unsigned short)(h & 0xFFFFu))),
                       __half2float(__ushort_as_half((unsigned short)(h >> 16))));
}

/* bf16 bits of a non-NaN FP32 value in the high half of the result: gln_f32_to_bf16_bits's
 * rounding (nearest even; overflow carries into Inf). */
__device__ __forceinline__ uint32_t dq_bf16_hi(float v) {
    const uint32_t u = __float_as_uint(v);
    return u + 0x7FFFu + ((u >> 16) & 1u);
}

/* Four codes (w, lowest byte first) times their scales s[0..3] into two words of two bf16 each
 * (the first element in the low half).  Only for finite codes and finite scales. */
template <int FP8>
__device__ __forceinline__ void dq_fast4(uint32_t w, const float s[4], uint32_t o[2]) {
    const float2 a = dq_fp8x2<FP8>(w), b = dq_fp8x2<FP8>(w >> 16);
    o[0] = __byte_perm(dq_bf16_hi(__fmul_rn(s[0], a.x)), dq_bf16_hi(__fmul_rn(s[1], a.y)), 0x7632);
    o[1] = __byte_perm(dq_bf16_hi(__fmul_rn(s[2], b.x)), dq_bf16_hi(__fmul_rn(s[3], b.y)), 0x7632);
}

/* The same four codes through the reference path (any code, any scale). */
__device__ __forceinline__ void dq_ref4(uint32_t w, const float s[4], int fp8, uint32_t o[2]) {
    uint32_t h[4];
#pragma unroll
    for (int j = 0; j < 4; j++) h[j] = dq_value((uint8_t)(w >> (8 * j)), s[j], fp8);
    o[0] = h[0] | h[1] << 16;
    o[1] = h[2] | h[3] << 16;
}

/* VEC codes as VEC / 4 words. */
template <int VEC> struct dq_raw { uint32_t w[VEC / 4]; };

template <int VEC>
__device__ __forceinline__ dq_raw<VEC> dq_load(const uint8_t *p) {
    dq_raw<VEC> r;
    if constexpr (VEC == 16) {
        const uint4 v = __ldg((const uint4 *)p);
        r.w[0] = v.x, r.w[1] = v.y, r.w[2] = v.z, r.w[3] = v.w;
    } else {
        static_assert(VEC == 8, "units of 16 or 8 codes");
        const uint2 v = __ldg((const uint2 *)p);
        r.w[0] = v.x, r.w[1] = v.y;
    }
    return r;
}

/* The decode scale of unit (r, c) (member-local) of a copy whose scale is uniform over the unit;
 * *bad = 1 when it is not finite. */
template <int KIND>
__device__ __forceinline__ float dq_unit_scale(const void *s, int64_t r, int64_t c, int64_t gc, int *bad) {
    if (KIND == DQK_MX_ROW) {
        const uint32_t code = ((const uint8_t *)s)[(size_t)r * (size_t)gc + (size_t)(c >> 5)];
        *bad = code == 0xFFu;
        return code == 0xFFu ? 0.0f : dq_e8m0_finite(code);
    }
    float v;
    if (KIND == DQK_B1_ROW) v = ((const float *)s)[(size_t)(c >> 7) * (size_t)gc + (size_t)r];
    else if (KIND == DQK_B2_ROW) v = ((const float *)s)[(size_t)(r >> 7) * (size_t)gc + (size_t)(c >> 7)];
    else if (KIND == DQK_B1_COL) v = ((const float *)s)[(size_t)(r >> 7) * (size_t)gc + (size_t)c];
    else v = ((const float *)s)[(size_t)(c >> 7) * (size_t)gc + (size_t)(r >> 7)]; /* DQK_B2_COL */
    *bad = !dq_finite(v);
    return v;
}

/* Untransposed copy, one item, units of VEC (16 or 8) codes; cols % VEC == 0 and the buffers
 * aligned (checked by the host). */
template <int KIND, int FP8, int VEC>
__device__ __forceinline__ void dq_rows_vec(const dq_copy_t &d, const dq_item_t &x, int64_t gc) {
    constexpr int UPR = DQ_CC / VEC;            /* units per item row */
    constexpr int RPP = DQ_THREADS / UPR;       /* item rows per pass of the block */
    constexpr int NU = DQ_TR / RPP;             /* units per thread */
    static_assert(DQ_THREADS % UPR == 0 && DQ_TR % RPP == 0, "item shape");
    const int cu = (int)threadIdx.x % UPR, rr0 = (int)threadIdx.x / UPR;
    const int64_t c = x.c0 + (int64_t)cu * VEC;
    if (c >= d.cols) return; /* cols % VEC == 0: a unit is inside the row or past it */
    /* MXFP8 columnwise: the codes of this thread's VEC columns, one per column for all the item's
     * rows (x.r0 is a multiple of 32 = DQ_TR) */
    float cs[VEC];
    int cbad = 0;
    if (KIND == DQK_MX_COL) {
        const uint8_t *sp = (const uint8_t *)x.s + (size_t)(x.r0 >> 5) * (size_t)gc + (size_t)c;
        uint32_t sw[VEC / 4];
        if (d.svec) {
            const dq_raw<VEC> r = dq_load<VEC>(sp);
#pragma unroll
            for (int k = 0; k < VEC / 4; k++) sw[k] = r.w[k];
        } else {
#pragma unroll
            for (int k = 0; k < VEC / 4; k++)
                sw[k] = (uint32_t)sp[4 * k] | (uint32_t)sp[4 * k + 1] << 8 | (uint32_t)sp[4 * k + 2] << 16 |
                        (uint32_t)sp[4 * k + 3] << 24;
        }
#pragma unroll
        for (int k = 0; k < VEC / 4; k++) {
            cbad |= dq_e8m0_nan4(sw[k]) != 0;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const uint32_t code = (sw[k] >> (8 * j)) & 0xFFu;
                cs[4 * k + j] = gln_e8m0_decode((uint8_t)code);
            }
        }
    }
    dq_raw<VEC> raw[NU];
#pragma unroll
    for (int k = 0; k < NU; k++) { /* every load in flight before the first conversion */
        const int64_t r = x.r0 + rr0 + k * RPP;
        if (r < x.m) raw[k] = dq_load<VEC>(x.q + (size_t)r * (size_t)d.cols + (size_t)c);
    }
#pragma unroll
    for (int k = 0; k < NU; k++) {
        const int64_t r = x.r0 + rr0 + k * RPP;
        if (r >= x.m) break; /* rows grow with k */
        float s[VEC];
        int bad = cbad;
        if (KIND == DQK_MX_COL) {
#pragma unroll
            for (int j = 0; j < VEC; j++) s[j] = cs[j];
        } else {
            const float u = dq_unit_scale<KIND>(x.s, r, c, gc, &bad);
#pragma unroll
            for (int j = 0; j < VEC; j++) s[j] = u;
            if (bad && KIND == DQK_MX_ROW) { /* the NaN scale itself, for the reference path */
#pragma unroll
                for (int j = 0; j < VEC; j++) s[j] = gln_e8m0_decode(0xFF);
            }
        }
        uint32_t special = 0;
#pragma unroll
        for (int w = 0; w < VEC / 4; w++) special |= dq_special4<FP8>(raw[k].w[w]);
        uint32_t o[VEC / 2];
        if (!bad && !special) {
#pragma unroll
            for (int w = 0; w < VEC / 4; w++) dq_fast4<FP8>(raw[k].w[w], &s[4 * w], &o[2 * w]);
        } else {
#pragma unroll
            for (int w = 0; w < VEC / 4; w++) dq_ref4(raw[k].w[w], &s[4 * w], FP8, &o[2 * w]);
        }
        uint4 *dst = (uint4 *)(x.out + (size_t)r * (size_t)d.cols + (size_t)c);
#pragma unroll
        for (int v = 0; v < VEC / 8; v++) /* the intrinsic: a plain assignment was split into 4-byte stores */
            __stwb(dst + v, make_uint4(o[4 * v], o[4 * v + 1], o[4 * v + 2], o[4 * v + 3]));
    }
}

/* Untransposed copy, one item, one element at a time (any columns, any alignment). */
template <int KIND, int FP8>
__device__ __forceinline__ void dq_rows_scalar(const dq_copy_t &d, const dq_item_t &x, int64_t gc) {
    for (int e = (int)threadIdx.x; e < DQ_TR * DQ_CC; e += DQ_THREADS) {
        const int64_t r = x.r0 + e / DQ_CC, c = x.c0 + e % DQ_CC;
        if (r >= x.m || c >= d.cols) continue;
        const size_t i = (size_t)r * (size_t)d.cols + (size_t)c;
        x.out[i] = dq_value(x.q[i], dq_scale(x.s, d, r, c, gc), FP8);
    }
}

/* MXFP8 copies and BLOCK rowwise copies.  VEC: 16 or 8 (vector units) or 1 (scalar). */
template <int KIND, int FP8, int VEC>
__global__ void __launch_bounds__(DQ_THREADS)
gln_dequant_rows_kernel(dq_src_t src, dq_list_t l, dq_copy_t d, uint16_t *out) {
    for (int64_t it = blockIdx.x; it < src.items; it += gridDim.x) {
        dq_item_t x;
        if (!dq_find(src, l, d, it, DQ_TR, DQ_CC, out, &x)) break; /* items grow: no later one is real */
        int64_t gr, gc;
        gln_scale_grid((gln_scaling_mode_t)d.mode, x.m, d.cols, d.columnwise, &gr, &gc);
        if constexpr (VEC == 1) dq_rows_scalar<KIND, FP8>(d, x, gc);
        else dq_rows_vec<KIND, FP8, VEC>(d, x, gc);
    }
}

/* BLOCK columnwise copies (member stored [cols, m]).  Thread t converts DQT_RUN = 32 codes of
 * stored row (column) c0 + t % DQT_C, starting at row r0 + (t / DQT_C) · 32: two 16-byte loads
 * when the run is aligned and inside the member, one scale (32 rows inside one 128-row block),
 * into tile[row][column]; then the tile's rows go out in 16-byte stores of 8 columns. */
template <int KIND, int FP8>
__global__ void __launch_bounds__(DQ_THREADS)
gln_dequant_transposed_kernel(dq_src_t src, dq_list_t l, dq_copy_t d, uint16_t *out) {
    static_assert(DQT_C * (DQT_R / DQT_RUN) == DQ_THREADS, "one run per thread");
    __shared__ __align__(16) uint16_t tile[DQT_R][DQT_C + 8]; /* +8: rows stay 16-byte aligned */
    const int cl = (int)threadIdx.x % DQT_C, rl = ((int)threadIdx.x / DQT_C) * DQT_RUN;
    for (int64_t it = blockIdx.x; it < src.items; it += gridDim.x) {
        dq_item_t x;
        if (!dq_find(src, l, d, it, DQT_R, DQT_C, out, &x)) break; /* uniform over the block */
        int64_t gr, gc;
        gln_scale_grid((gln_scaling_mode_t)d.mode, x.m, d.cols, d.columnwise, &gr, &gc);
        const int64_t c = x.c0 + cl, r = x.r0 + rl;
        if (c < d.cols && r < x.m) {
            const uint8_t *run = x.q + (size_t)c * (size_t)x.m + (size_t)r;
            int bad;
            const float s = dq_unit_scale<KIND>(x.s, r, c, gc, &bad);
            const float s4[4] = {s, s, s, s};
            if (r + DQT_RUN <= x.m && ((uintptr_t)run & 15u) == 0) {
                const dq_raw<16> a = dq_load<16>(run), b = dq_load<16>(run + 16);
                uint32_t w[8] = {a.w[0], a.w[1], a.w[2], a.w[3], b.w[0], b.w[1], b.w[2], b.w[3]};
                uint32_t special = 0;
#pragma unroll
                for (int k = 0; k < 8; k++) special |= dq_special4<FP8>(w[k]);
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    uint32_t o[2];
                    if (!bad && !special) dq_fast4<FP8>(w[k], s4, o);
                    else dq_ref4(w[k], s4, FP8, o);
                    tile[rl + 4 * k][cl] = (uint16_t)o[0];
                    tile[rl + 4 * k + 1][cl] = (uint16_t)(o[0] >> 16);
                    tile[rl + 4 * k + 2][cl] = (uint16_t)o[1];
                    tile[rl + 4 * k + 3][cl] = (uint16_t)(o[1] >> 16);
                }
            } else {
                for (int j = 0; j < DQT_RUN && r + j < x.m; j++) tile[rl + j][cl] = dq_value(run[j], s, FP8);
            }
        }
        __syncthreads();
        for (int u = (int)threadIdx.x; u < DQT_R * (DQT_C / DQ_VEC); u += DQ_THREADS) {
            const int rr = u / (DQT_C / DQ_VEC), cc = (u % (DQT_C / DQ_VEC)) * DQ_VEC;
            const int64_t ro = x.r0 + rr, co = x.c0 + cc;
            if (ro >= x.m || co >= d.cols) continue;
            uint16_t *dst = x.out + (size_t)ro * (size_t)d.cols + (size_t)co;
            if (d.vec) { /* cols % 8 == 0: all 8 columns exist and were written above */
                *(uint4 *)dst = *(const uint4 *)&tile[rr][cc];
            } else {
                for (int j = 0; j < DQ_VEC && co + j < d.cols; j++) dst[j] = tile[rr][cc + j];
            }
        }
        __syncthreads(); /* before the next item overwrites the tile */
    }
}

/* ---- host side ------------------------------------------------------------------------------ */

static int dq_mode_ok(gln_scaling_mode_t mode, gln_dtype_t dtype) {
    return gln_dtype_is_fp8(dtype) &&
           (mode == GLN_SCALING_MXFP8_1D || mode == GLN_SCALING_BLOCK_1D || mode == GLN_SCALING_BLOCK_2D);
}

static int aligned(const void *p, uintptr_t bytes) { return ((uintptr_t)p & (bytes - 1)) == 0; }

/* The launch description of copy `columnwise` of tensors like t (svec still to be set by the
 * caller, from the scale pointers). */
static dq_copy_t dq_copy_of(const gln_tensor_t *t, int columnwise, const void *out) {
    dq_copy_t d;
    d.mode = (int)t->scaling;
    d.columnwise = columnwise;
    d.transposed = columnwise && gln_scaling_transposes(t->scaling);
    d.fp8 = (int)t->dtype;
    d.cols = t->cols;
    d.vec = t->cols % DQ_VEC == 0 && aligned(out, 16);
    d.svec = 0;
    return d;
}

/* ---- launch ---------------------------------------------------------------------------------- */

typedef void (*dq_kernel_t)(dq_src_t, dq_list_t, dq_copy_t, uint16_t *);

template <int KIND>
static dq_kernel_t dq_pick_fp8(int fp8, int vec) {
    if constexpr (KIND == DQK_B1_COL || KIND == DQK_B2_COL) {
        (void)vec;
        return fp8 == GLN_DTYPE_FP8_E4M3 ? gln_dequant_transposed_kernel<KIND, GLN_DTYPE_FP8_E4M3>
                                         : gln_dequant_transposed_kernel<KIND, GLN_DTYPE_FP8_E5M2>;
    } else {
        if (fp8 == GLN_DTYPE_FP8_E4M3)
            return vec == 16 ? gln_dequant_rows_kernel<KIND, GLN_DTYPE_FP8_E4M3, 16>
                 : vec == 8  ? gln_dequant_rows_kernel<KIND, GLN_DTYPE_FP8_E4M3, 8>
                             : gln_dequant_rows_kernel<KIND, GLN_DTYPE_FP8_E4M3, 1>;
        return vec == 16 ? gln_dequant_rows_kernel<KIND, GLN_DTYPE_FP8_E5M2, 16>
             : vec == 8  ? gln_dequant_rows_kernel<KIND, GLN_DTYPE_FP8_E5M2, 8>
                         : gln_dequant_rows_kernel<KIND, GLN_DTYPE_FP8_E5M2, 1>;
    }
}

/* The kernel of copy d with units of `vec` codes (16, 8 or 1; ignored for the transposed copies). */
static dq_kernel_t dq_pick(const dq_copy_t &d, int vec) {
    if (d.mode == GLN_SCALING_MXFP8_1D)
        return d.columnwise ? dq_pick_fp8<DQK_MX_COL>(d.fp8, vec) : dq_pick_fp8<DQK_MX_ROW>(d.fp8, vec);
    if (d.mode == GLN_SCALING_BLOCK_1D)
        return d.columnwise ? dq_pick_fp8<DQK_B1_COL>(d.fp8, vec) : dq_pick_fp8<DQK_B1_ROW>(d.fp8, vec);
    return d.columnwise ? dq_pick_fp8<DQK_B2_COL>(d.fp8, vec) : dq_pick_fp8<DQK_B2_ROW>(d.fp8, vec);
}

/* Units of 16 codes when the columns and every data pointer allow, else 8, else 1 (member and
 * tensor starts are multiples of cols codes, so of 16 / 8 bytes when cols is). */
static int dq_vec(int64_t cols, uintptr_t data_or, const void *out) {
    if (!aligned(out, 16)) return 1;
    if (cols % 16 == 0 && (data_or & 15u) == 0) return 16;
    if (cols % 8 == 0 && (data_or & 7u) == 0) return 8;
    return 1;
}

/* Item shape of the copy: rows and columns. */
static void dq_item_shape(const dq_copy_t &d, int64_t *tr, int64_t *tc) {
    *tr = d.transposed ? DQT_R : DQ_TR;
    *tc = d.transposed ? DQT_C : DQ_CC;
}

/* Which kernel ran last (cuda_block.h): set by each launch, taken by the probe. */
static const char *dq_last_kernel;

extern "C" const char *gln_cuda_dequant_last_kernel(void) {
    return __atomic_exchange_n(&dq_last_kernel, (const char *)NULL, __ATOMIC_RELAXED);
}

static const char *dq_kernel_name(const dq_copy_t &d, int vec) {
    if (d.transposed) return "gln_dequant_transposed_kernel";
    return vec == 16 ? "gln_dequant_rows_kernel<16>" : vec == 8 ? "gln_dequant_rows_kernel<8>" : "gln_dequant_rows_kernel<1>";
}

/* Launch `k` (units of `vec` codes) on as many blocks as fit on the device at once, at most
 * src.items. */
static gln_status_t dq_launch(gln_context_t *ctx, dq_kernel_t k, int vec, const dq_src_t &src, const dq_list_t &l,
                              const dq_copy_t &d, uint16_t *out, const char *call) {
    if (src.items <= 0) return GLN_STATUS_SUCCESS;
    int64_t blocks = 0;
    GLN_TRY(gln_cuda_persistent_grid((const void *)k, DQ_THREADS, 0, 0, src.items, 0, call, &blocks));
    k<<<(unsigned int)blocks, DQ_THREADS, 0, gln_cuda_state(ctx)->stream>>>(src, l, d, out);
    GLN_TRY(gln_cuda_check_launch(call, d.transposed ? "gln_dequant_transposed_kernel" : "gln_dequant_rows_kernel"));
    __atomic_store_n(&dq_last_kernel, dq_kernel_name(d, vec), __ATOMIC_RELAXED);
    return GLN_STATUS_SUCCESS;
}

static gln_status_t dq_check(const gln_tensor_t *t, int columnwise, const char *what, const char *call) {
    if (!dq_mode_ok(t->scaling, t->dtype))
        return gln_fail(GLN_STATUS_NOT_SUPPORTED, "%s: %s is %s %s; the grouped dequantization takes MXFP8_1D, "
                        "BLOCK_1D or BLOCK_2D FP8", call, what, gln_dtype_name(t->dtype), gln_scaling_name(t->scaling));
    const void *q = columnwise ? t->col_data : t->data, *s = columnwise ? t->col_scale_inv : t->scale_inv;
    if (!q || !s)
        return gln_fail(GLN_STATUS_INVALID_ARGUMENT, "%s: %s has no %s copy (data or scales NULL)", call, what,
                        columnwise ? "columnwise" : "rowwise");
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
    const void *scales = columnwise ? t->col_scale_inv : t->scale_inv;
    /* member scale offsets are multiples of 128 codes for MXFP8 (gln_member_scale_elems) */
    d.svec = aligned(scales, 16);
    int64_t tr, tc;
    dq_item_shape(d, &tr, &tc);
    dq_src_t src;
    memset(&src, 0, sizeof src);
    src.q = q;
    src.scales = scales;
    src.rows = plan->rows;
    src.scale_offsets = columnwise ? plan->scol : plan->srow;
    src.num = g->num;
    src.row_tiles = gln_group_tiles_bound(t->rows, g->num, tr);
    src.col_chunks = gln_ceil_div(t->cols, tc);
    src.items = src.row_tiles * src.col_chunks;
    dq_list_t none;
    memset(&none, 0, sizeof none);
    const int vec = dq_vec(t->cols, (uintptr_t)q, out);
    return dq_launch(ctx, dq_pick(d, vec), vec, src, none, d, (uint16_t *)out, call);
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
    dq_copy_t d = dq_copy_of(&list[0], columnwise, out);
    uintptr_t data_or = 0, scale_or = 0;
    for (int32_t i = 0; i < num; i++) {
        data_or |= (uintptr_t)(columnwise ? list[i].col_data : list[i].data);
        scale_or |= (uintptr_t)(columnwise ? list[i].col_scale_inv : list[i].scale_inv);
    }
    d.svec = (scale_or & 15u) == 0;
    const int vec = dq_vec(C, data_or, out);
    int64_t tr, tc;
    dq_item_shape(d, &tr, &tc);
    /* every tensor's output starts at a multiple of R·C elements: 16 bytes when C % 8 == 0 */
    for (int32_t first = 0; first < num; first += DQ_LIST_CHUNK) {
        dq_list_t l;
        memset(&l, 0, sizeof l);
        const int32_t n = num - first < DQ_LIST_CHUNK ? num - first : DQ_LIST_CHUNK;
        for (int32_t j = 0; j < n; j++) {
            const gln_tensor_t *t = &list[first + j];
            l.q[j] = (const uint8_t *)(columnwise ? t->col_data : t->data);
            l.scales[j] = columnwise ? t->col_scale_inv : t->scale_inv;
        }
        uint16_t *o = (uint16_t *)out + (size_t)first * (size_t)R * (size_t)C;
        dq_src_t src;
        memset(&src, 0, sizeof src);
        src.list = 1;
        src.num = n;
        src.R = R;
        src.row_tiles = gln_ceil_div(R, tr);
        src.col_chunks = gln_ceil_div(C, tc);
        src.items = (int64_t)n * src.row_tiles * src.col_chunks;
        GLN_TRY(dq_launch(ctx, dq_pick(d, vec), vec, src, l, d, o, call));
    }
    return GLN_STATUS_SUCCESS;
}

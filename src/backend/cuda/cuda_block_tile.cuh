/* Device code shared by the FP8 block-scaling quantizers (cuda_block.cu dispatches to them):
 * BLOCK_1D (1x128 rowwise / 128x1 columnwise blocks) and BLOCK_2D (128x128 tiles shared by both
 * copies), bitwise equal to gln_quantize_block_ref (src/quant/quant_block.c).
 *
 * Numerics, per block: amax = max |x| over its valid elements, NaN ignored (TE's fmaxf rule) or
 * propagated (cfg->amax_nan_propagate); scale = gln_scale_from_amax_impl(amax, fp8_max,
 * power_2_scale, epsilon, max finite of the input dtype); stored decode scale = 1 / scale (IEEE
 * division); data = one saturating RNE encode of the FP32 product x·scale.  A max is exact in any
 * order and only whether a NaN amax is NaN matters (it gives scale 1), so a kernel reduces in
 * its own order.  Two conversions use the hardware instead of the numerics.h bit code, which is
 * several times slower and would make the kernels compute-bound: FP32 -> FP8 by cvt.rn.satfinite
 * (equal to gln_f32_to_e4m3_bits / e5m2 on every non-NaN input; a NaN x is given the reference's
 * sign | 0x7F after the fact), fp16 -> FP32 by cvt.f32.f16 (exact; a NaN keeps its sign, its
 * payload does not matter).  gln_cuda_block_selfcheck proves both over every input.
 *
 * Work decomposition, common to the kernels: 128x128 tiles of a member (tiles start at the
 * member's first row: BLOCK_1D columnwise blocks and BLOCK_2D tiles are aligned to the member),
 * 256 threads, each owning 8 rows x 8 columns held in registers after ONE read of the input.
 * From those registers: row amaxes (half-warp shuffles), column amaxes (shuffles + shared memory)
 * or the tile amax; the rowwise copy (8-byte stores); the transposed copy through a swizzled
 * 128x128-byte shared tile (16-byte stores where the member's rows allow), and every scale of the
 * member's padded grid, padding (0) included, so no memset is needed.  A grouped launch sizes its
 * grid from host-known values (packed rows, member count, columns); blocks past the last real
 * tile exit.  Rows and scale offsets come from the device group plan.
 *
 * The "packed" helpers (bq_pk_*) work on a thread's bf16 / fp16 codes kept two per 32-bit word
 * (w[p][k]: row p, columns 2k and 2k + 1 of the thread's 8) and widen each to FP32 where it is
 * used, so no FP32 copy of the tile stays live: the TMA and activation-on-load kernels use them.
 * Their values are those of bq_unpack2, so their bytes are the general kernel's. */
#ifndef GLN_BACKEND_CUDA_BLOCK_TILE_CUH
#define GLN_BACKEND_CUDA_BLOCK_TILE_CUH

#ifndef __CUDACC__
#error "cuda_block_tile.cuh is for CUDA sources only"
#endif

#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "numerics/numerics.h"
#include "quant/quant.h"
#include "tensor/scale_layout.h"
#include "tensor/tensor.h"
}

#include "backend/cuda/cuda_act.cuh"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_group.cuh"

#define BQ_EDGE 128    /* block / tile edge */
#define BQ_THREADS 256 /* 16 row groups x 16 column groups */
#define BQ_FULL 0xFFFFFFFFu

/* Input dtypes of the kernel template. */
enum { BQ_IN_FP32 = 0, BQ_IN_BF16 = 1, BQ_IN_FP16 = 2 };

typedef struct bq_args {
    const void *x;
    int64_t cols, ctiles; /* columns, 128-column tiles */
    int64_t tiles;        /* grid bound: row tiles (bound) x ctiles */
    uint8_t *q;           /* rowwise data [rows, cols] and scales (NULL: no rowwise copy) */
    float *s;
    uint8_t *qt;          /* transposed copies ([cols, m_i] at row_start_i · cols) and scales */
    float *cs;
    const int64_t *rows;  /* plan: member rows, rowwise / columnwise scale offsets; rows NULL: one */
    const int64_t *srow;  /* member of single_rows rows with its scales at 0 */
    const int64_t *scol;
    int32_t num;
    int64_t single_rows;
    float fp8_max, epsilon, value_for_inf;
    int pow2;
    int vec_in, vec_q;    /* 16-byte input loads / 8-byte rowwise stores are aligned */
    int act;              /* activation on load (bq_act_load): GLN_ACT_LOAD_NONE, or x is the bf16 input
                             of an activation whose [rows, cols] bf16 output is quantized */
    int64_t ld;           /* with act: x's row stride in elements (SwiGLU 2·cols, GELU cols) */
} bq_args_t;

/* One 128x128 tile of one member. */
typedef struct bq_tile {
    int64_t mrow0;     /* the member's first packed row */
    int64_t m;         /* the member's rows */
    int64_t tr, ct;    /* row tile within the member, column tile */
    int64_t rs, c0;    /* first member row, first column of the tile */
    int nr, nc;        /* valid rows, columns */
    int64_t so_r, so_c;/* the member's scale offsets */
} bq_tile_t;

/* ---- small device helpers ------------------------------------------------------------------ */

/* Column (within the tile) of element j of column group cg: 8 adjacent columns for 2-byte
 * inputs (one 16-byte load); for FP32 two runs of 4, 64 apart, so each load instruction of a
 * half-warp covers 256 contiguous bytes. */
template <int IN>
__device__ __forceinline__ int bq_col(int cg, int j) {
    if (IN == BQ_IN_FP32) return j < 4 ? cg * 4 + j : 64 + cg * 4 + (j - 4);
    return cg * 8 + j;
}

/* Swizzle of the transposed tile: column c's 8-byte row chunk k lives at chunk k ^ swz(c), so
 * the 8-byte stores of a half-warp (16 column groups, one chunk) hit 16 different bank pairs for
 * both column layouts of bq_col. */
__device__ __forceinline__ int bq_swz(int c) { return ((c >> 2) ^ (c >> 6)) & 15; }

/* |x| accumulated into an amax: NaN ignored (fmaxf, starting from 0 so never NaN) or, with
 * NANP, propagated (the integer max of the magnitude bits: NaN patterns order above Inf). */
template <bool NANP>
__device__ __forceinline__ float bq_max(float a, float b) {
    if (NANP) return __uint_as_float(max(__float_as_uint(a), __float_as_uint(b)));
    return fmaxf(a, b);
}
template <bool NANP>
__device__ __forceinline__ float bq_absmax(float a, float x) {
    return bq_max<NANP>(a, __uint_as_float(__float_as_uint(x) & 0x7FFFFFFFu));
}

/* Build with -DGLN_BLOCK_SOFT_CONVERT to use the numerics.h conversions instead of the hardware
 * ones (slower; for bisecting a mismatch that gln_cuda_block_selfcheck reports). */
__device__ __forceinline__ float bq_fp16(uint32_t h) {
#ifdef GLN_BLOCK_SOFT_CONVERT
    return gln_fp16_bits_to_f32((uint16_t)h);
#else
    const float f = __half2float(__ushort_as_half((unsigned short)h));
    return __uint_as_float(__float_as_uint(f) | ((h & 0x8000u) << 16)); /* a NaN keeps its sign */
#endif
}

template <int IN>
__device__ __forceinline__ float bq_load1(const void *x, size_t i) {
    if (IN == BQ_IN_FP32) return ((const float *)x)[i];
    const uint32_t h = ((const uint16_t *)x)[i];
    return IN == BQ_IN_BF16 ? __uint_as_float(h << 16) : bq_fp16(h);
}

/* Two 16-bit elements of a 32-bit word as FP32. */
template <int IN>
__device__ __forceinline__ void bq_unpack2(uint32_t w, float *lo, float *hi) {
    if (IN == BQ_IN_BF16) {
        *lo = __uint_as_float(w << 16);
        *hi = __uint_as_float(w & 0xFFFF0000u);
    } else {
        *lo = bq_fp16(w & 0xFFFFu);
        *hi = bq_fp16(w >> 16);
    }
}

/* FP8 codes of lo (byte 0) and hi (byte 1): saturating RNE, as gln_f32_to_e4m3_bits /
 * gln_f32_to_e5m2_bits for every non-NaN input (NaN: see bq_nan_byte). */
template <bool E5M2>
__device__ __forceinline__ uint32_t bq_cvt2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(GLN_BLOCK_SOFT_CONVERT)
    return __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, E5M2 ? __NV_E5M2 : __NV_E4M3);
#else
    return E5M2 ? gln_f32_to_e5m2_bits(lo) | ((uint32_t)gln_f32_to_e5m2_bits(hi) << 8)
                : gln_f32_to_e4m3_bits(lo) | ((uint32_t)gln_f32_to_e4m3_bits(hi) << 8);
#endif
}

/* The reference's code for a NaN x (x·scale keeps x's sign on the host): sign | 0x7F. */
__device__ __forceinline__ uint32_t bq_nan_byte(float x) { return ((__float_as_uint(x) >> 24) & 0x80u) | 0x7Fu; }

/* The 8 codes of x[0..7]·s, byte k = element k (one FP32 multiply each, no contraction). */
template <bool E5M2>
__device__ __forceinline__ uint2 bq_enc8(const float x[8], float s) {
    uint32_t b[4];
#pragma unroll
    for (int k = 0; k < 4; k++) b[k] = bq_cvt2<E5M2>(__fmul_rn(x[2 * k], s), __fmul_rn(x[2 * k + 1], s));
    return make_uint2(b[0] | (b[1] << 16), b[2] | (b[3] << 16));
}

/* Byte k (a compile-time index after unrolling) of w set to b. */
__device__ __forceinline__ void bq_set_byte(uint2 *w, int k, uint32_t b) {
    uint32_t *word = k < 4 ? &w->x : &w->y;
    const int sh = (k & 3) * 8;
    *word = (*word & ~(0xFFu << sh)) | (b << sh);
}

/* Transpose a 4x4 byte matrix (rows a..d, byte j = column j): o[j] = column j, byte i = row i. */
__device__ __forceinline__ void bq_tr4(uint32_t a, uint32_t b, uint32_t c, uint32_t d, uint32_t o[4]) {
    const uint32_t t0 = __byte_perm(a, b, 0x5140), t1 = __byte_perm(c, d, 0x5140);
    const uint32_t t2 = __byte_perm(a, b, 0x7362), t3 = __byte_perm(c, d, 0x7362);
    o[0] = __byte_perm(t0, t1, 0x5410);
    o[1] = __byte_perm(t0, t1, 0x7632);
    o[2] = __byte_perm(t2, t3, 0x5410);
    o[3] = __byte_perm(t2, t3, 0x7632);
}

/* 8x8 byte transpose: col[j] byte p = row[p] byte j. */
__device__ __forceinline__ void bq_tr8(const uint2 row[8], uint2 col[8]) {
    uint32_t o[4];
    bq_tr4(row[0].x, row[1].x, row[2].x, row[3].x, o);
    for (int j = 0; j < 4; j++) col[j].x = o[j];
    bq_tr4(row[0].y, row[1].y, row[2].y, row[3].y, o);
    for (int j = 0; j < 4; j++) col[4 + j].x = o[j];
    bq_tr4(row[4].x, row[5].x, row[6].x, row[7].x, o);
    for (int j = 0; j < 4; j++) col[j].y = o[j];
    bq_tr4(row[4].y, row[5].y, row[6].y, row[7].y, o);
    for (int j = 0; j < 4; j++) col[4 + j].y = o[j];
}

__device__ __forceinline__ float bq_scale(const bq_args_t &a, float amax) {
    return gln_scale_from_amax_impl(amax, a.fp8_max, a.pow2, a.epsilon, a.value_for_inf);
}

/* ---- the tile: which, load ------------------------------------------------------------------- */

/* Tile t of the grid (row tile in member order x column tile); 0 past the last real tile (then
 * every later t is too).  Every thread of the block computes the same answer. */
__device__ __forceinline__ int bq_find(const bq_args_t &a, int64_t t, bq_tile_t *tl) {
    const int64_t rt = t / a.ctiles;
    int32_t i = 0;
    int64_t r0 = 0, m = a.single_rows, tim = rt;
    if (a.rows) {
        if (!gln_group_tile_warp(a.rows, a.num, BQ_EDGE, rt, &i, &r0, &m, &tim)) return 0;
    } else if (rt >= gln_ceil_div(m, BQ_EDGE)) {
        return 0;
    }
    tl->mrow0 = r0, tl->m = m, tl->tr = tim, tl->ct = t - rt * a.ctiles;
    tl->rs = tim * BQ_EDGE, tl->c0 = tl->ct * BQ_EDGE;
    tl->nr = (int)min((int64_t)BQ_EDGE, m - tl->rs);
    tl->nc = (int)min((int64_t)BQ_EDGE, a.cols - tl->c0);
    tl->so_r = a.rows ? a.srow[i] : 0;
    tl->so_c = a.rows ? a.scol[i] : 0;
    return 1;
}

/* ---- scales ---------------------------------------------------------------------------------- */

/* Row amaxes of a half-warp's 8 rows (ra[p]: this lane's 8 columns of row p) reduced and spread:
 * 8 shuffles leave lane cg with the full amax of row cg >> 1 (a reduce-scatter butterfly). */
template <bool NANP>
__device__ __forceinline__ float bq_row_amax(const float ra[8], int lane) {
    const bool b3 = lane & 8, b2 = lane & 4, b1 = lane & 2;
    float a4[4], a2[2];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float send = b3 ? ra[k] : ra[k + 4], keep = b3 ? ra[k + 4] : ra[k];
        a4[k] = bq_max<NANP>(keep, __shfl_xor_sync(BQ_FULL, send, 8));
    }
#pragma unroll
    for (int k = 0; k < 2; k++) {
        const float send = b2 ? a4[k] : a4[k + 2], keep = b2 ? a4[k + 2] : a4[k];
        a2[k] = bq_max<NANP>(keep, __shfl_xor_sync(BQ_FULL, send, 4));
    }
    const float send = b1 ? a2[0] : a2[1], keep = b1 ? a2[1] : a2[0];
    const float a1 = bq_max<NANP>(keep, __shfl_xor_sync(BQ_FULL, send, 2));
    return bq_max<NANP>(a1, __shfl_xor_sync(BQ_FULL, a1, 1));
}

/* BLOCK_1D rowwise: rscale[p] = encode scale of tile row rg*8 + p; its decode scale (or the
 * grid's padding 0 for rows in [m, pad4(m))) is written by one lane per row.  bq_row_spread does
 * it from `scale`, lane cg's encode scale of row cg >> 1 of its half-warp (bq_row_amax's row). */
__device__ __forceinline__ void bq_row_spread(const bq_args_t &a, const bq_tile_t &tl, float scale, int rg, int cg,
                                              float rscale[8]) {
    const int lane = threadIdx.x & 31, own = cg >> 1;
#pragma unroll
    for (int p = 0; p < 8; p++) rscale[p] = __shfl_sync(BQ_FULL, scale, (lane & 16) | (p << 1));
    const int64_t rl = tl.rs + rg * 8 + own, gc = gln_round_up(tl.m, 4);
    if ((cg & 1) || rl >= gc) return;
    a.s[tl.so_r + tl.ct * gc + rl] = rl < tl.m ? 1.0f / scale : 0.0f;
}
template <bool NANP>
__device__ __forceinline__ void bq_row_scales(const bq_args_t &a, const bq_tile_t &tl, const float ra[8], int rg,
                                              int cg, float rscale[8]) {
    bq_row_spread(a, tl, bq_scale(a, bq_row_amax<NANP>(ra, threadIdx.x & 31)), rg, cg, rscale);
}

/* BLOCK_1D columnwise, first half: this warp's column maxima (ca[j]: this lane's 8 rows of
 * column j) into colmax[warp][], one shuffle step leaving each lane 4 columns. */
template <int IN, bool NANP>
__device__ __forceinline__ void bq_col_partials(const float ca[8], int cg, float (*colmax)[BQ_EDGE]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const bool b4 = lane & 16; /* the warp's second row group */
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float send = b4 ? ca[k] : ca[k + 4], keep = b4 ? ca[k + 4] : ca[k];
        colmax[warp][bq_col<IN>(cg, (b4 ? 4 : 0) + k)] = bq_max<NANP>(keep, __shfl_xor_sync(BQ_FULL, send, 16));
    }
}

/* Second half: one thread per column reduces the warps' maxima into the encode scale cscale[c]
 * and writes its decode scale (or the padding 0 of columns in [cols, pad4(cols))): that last part
 * is bq_col_scale_out's, from column c's amax.  Starts and ends with a block barrier. */
__device__ __forceinline__ void bq_col_scale_out(const bq_args_t &a, const bq_tile_t &tl, int c, float amax,
                                                 float *cscale) {
    const float scale = bq_scale(a, amax);
    cscale[c] = scale;
    const int64_t gc = gln_round_up(a.cols, 4);
    if (tl.c0 + c < gc) a.cs[tl.so_c + tl.tr * gc + tl.c0 + c] = c < tl.nc ? 1.0f / scale : 0.0f;
}
template <bool NANP>
__device__ __forceinline__ void bq_col_scales(const bq_args_t &a, const bq_tile_t &tl,
                                              const float (*colmax)[BQ_EDGE], float *cscale) {
    __syncthreads();
    const int c = threadIdx.x;
    if (c < BQ_EDGE) {
        float amax = 0.0f;
#pragma unroll
        for (int w = 0; w < BQ_THREADS / 32; w++) amax = bq_max<NANP>(amax, colmax[w][c]);
        bq_col_scale_out(a, tl, c, amax, cscale);
    }
    __syncthreads();
}

/* BLOCK_2D: the tile's encode scale; thread 0 writes the decode scale into each present grid and
 * the padding 0 after the last tile of a grid row.  bq_tile_scale_of does it from the amax of the
 * thread's elements. */
template <bool NANP>
__device__ __forceinline__ float bq_tile_scale_of(const bq_args_t &a, const bq_tile_t &tl, float amax, float *wmax) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) amax = bq_max<NANP>(amax, __shfl_xor_sync(BQ_FULL, amax, off));
    if ((threadIdx.x & 31) == 0) wmax[threadIdx.x >> 5] = amax;
    __syncthreads();
    amax = wmax[0];
#pragma unroll
    for (int w = 1; w < BQ_THREADS / 32; w++) amax = bq_max<NANP>(amax, wmax[w]);
    const float scale = bq_scale(a, amax);
    if (threadIdx.x == 0) {
        const float inv = 1.0f / scale;
        if (a.q) { /* rowwise grid [mtiles, pad4(ctiles)] */
            const int64_t gc = gln_round_up(a.ctiles, 4);
            float *row = a.s + tl.so_r + tl.tr * gc;
            row[tl.ct] = inv;
            if (tl.ct == a.ctiles - 1)
                for (int64_t k = a.ctiles; k < gc; k++) row[k] = 0.0f;
        }
        if (a.qt) { /* columnwise grid [ctiles, pad4(mtiles)] */
            const int64_t mt = gln_ceil_div(tl.m, BQ_EDGE), gc = gln_round_up(mt, 4);
            float *row = a.cs + tl.so_c + tl.ct * gc;
            row[tl.tr] = inv;
            if (tl.tr == mt - 1)
                for (int64_t k = mt; k < gc; k++) row[k] = 0.0f;
        }
    }
    return scale;
}
template <bool NANP>
__device__ __forceinline__ float bq_tile_scale(const bq_args_t &a, const bq_tile_t &tl, const float ra[8],
                                               float *wmax) {
    float amax = ra[0];
#pragma unroll
    for (int p = 1; p < 8; p++) amax = bq_max<NANP>(amax, ra[p]);
    return bq_tile_scale_of<NANP>(a, tl, amax, wmax);
}

/* ---- stores ---------------------------------------------------------------------------------- */

/* The rowwise codes: row word p (byte j = column bq_col(cg, j)) of tile row rg*8 + p. */
template <int IN>
__device__ __forceinline__ void bq_store_rows(const bq_args_t &a, const bq_tile_t &tl, const uint2 w[8], int rg,
                                              int cg) {
#pragma unroll
    for (int p = 0; p < 8; p++) {
        const int r = rg * 8 + p;
        if (r >= tl.nr) continue;
        uint8_t *row = a.q + (size_t)(tl.mrow0 + tl.rs + r) * (size_t)a.cols + (size_t)tl.c0;
        if (a.vec_q && IN == BQ_IN_FP32) {
            if (cg * 4 < tl.nc) *(uint32_t *)(row + cg * 4) = w[p].x;
            if (64 + cg * 4 < tl.nc) *(uint32_t *)(row + 64 + cg * 4) = w[p].y;
        } else if (a.vec_q) {
            if (cg * 8 < tl.nc) *(uint2 *)(row + cg * 8) = w[p];
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (bq_col<IN>(cg, j) < tl.nc) row[bq_col<IN>(cg, j)] = (uint8_t)((j < 4 ? w[p].x : w[p].y) >> ((j & 3) * 8));
        }
    }
}

/* Column word j (byte p = tile row rg*8 + p) into the shared transposed tile: 128 bytes per
 * tile column, row chunk rg at chunk rg ^ bq_swz(column). */
template <int IN>
__device__ __forceinline__ void bq_stage_cols(uint8_t *tp, const uint2 w[8], int rg, int cg) {
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int c = bq_col<IN>(cg, j);
        *(uint2 *)(tp + c * BQ_EDGE + ((rg ^ bq_swz(c)) << 3)) = w[j];
    }
}

/* Byte offset in the shared tile of (tile column c, tile row r). */
__device__ __forceinline__ int bq_tp_at(int c, int r) { return c * BQ_EDGE + ((((r >> 3) ^ bq_swz(c)) << 3) | (r & 7)); }

/* The transposed copy of the tile from the shared tile: tile column c is member column c0 + c,
 * its nr bytes at qt + mrow0·cols + (c0 + c)·m + rs.  16-byte stores (8 lanes per column) when
 * every column starts 16-byte aligned, else 4-byte or single-byte stores (32 lanes per column). */
static __device__ void bq_store_tpose(const bq_args_t &a, const bq_tile_t &tl, const uint8_t *tp) {
    uint8_t *dst = a.qt + (size_t)tl.mrow0 * (size_t)a.cols + (size_t)tl.c0 * (size_t)tl.m + (size_t)tl.rs;
    const size_t m = (size_t)tl.m;
    const uintptr_t addr = (uintptr_t)dst;
    if ((m & 15) == 0 && (addr & 15) == 0) { /* nr is a multiple of 16 too */
        for (int u = threadIdx.x; u < BQ_EDGE * 8; u += BQ_THREADS) {
            const int c = u >> 3, k = u & 7, h = bq_swz(c);
            if (c >= tl.nc || k * 16 >= tl.nr) continue;
            uint4 v = *(const uint4 *)(tp + c * BQ_EDGE + (((2 * k) ^ h) >> 1) * 16);
            if (h & 1) v = make_uint4(v.z, v.w, v.x, v.y); /* chunk 2k sits in the high half */
            *(uint4 *)(dst + (size_t)c * m + 16 * k) = v;
        }
    } else if ((m & 3) == 0 && (addr & 3) == 0) {
        for (int u = threadIdx.x; u < BQ_EDGE * 32; u += BQ_THREADS) {
            const int c = u >> 5, r = (u & 31) * 4;
            if (c < tl.nc && r < tl.nr) *(uint32_t *)(dst + (size_t)c * m + r) = *(const uint32_t *)(tp + bq_tp_at(c, r));
        }
    } else {
        for (int u = threadIdx.x; u < BQ_EDGE * BQ_EDGE; u += BQ_THREADS) {
            const int c = u >> 7, r = u & 127;
            if (c < tl.nc && r < tl.nr) dst[(size_t)c * m + r] = tp[bq_tp_at(c, r)];
        }
    }
}

/* ---- NaN fix-ups, the transposed copy -------------------------------------------------------- */

/* NaN elements: the reference's code (sign | 0x7F) into row word p byte j (rw) or column word j
 * byte p (cw).  Two functions rather than an optional pointer, so the word arrays stay in
 * registers.  bq_fix_nan8: the same for one word and the 8 values it encodes. */
__device__ __forceinline__ void bq_fix_nan8(const float x[8], uint2 *word) {
#pragma unroll
    for (int j = 0; j < 8; j++)
        if (gln_f32_isnan(x[j])) bq_set_byte(word, j, bq_nan_byte(x[j]));
}
__device__ __forceinline__ void bq_fix_nan_rows(const float v[8][8], uint2 rw[8]) {
#pragma unroll
    for (int p = 0; p < 8; p++) bq_fix_nan8(v[p], &rw[p]);
}
__device__ __forceinline__ void bq_fix_nan_cols(const float v[8][8], uint2 cw[8]) {
#pragma unroll
    for (int p = 0; p < 8; p++)
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (gln_f32_isnan(v[p][j])) bq_set_byte(&cw[j], p, bq_nan_byte(v[p][j]));
}

/* The transposed copy from column words: staged in the shared tile, then stored. */
template <int IN>
__device__ __forceinline__ void bq_tpose_out(const bq_args_t &a, const bq_tile_t &tl, const uint2 cw[8], int rg,
                                             int cg, uint8_t *tp) {
    bq_stage_cols<IN>(tp, cw, rg, cg);
    __syncthreads();
    bq_store_tpose(a, tl, tp);
}
/* ---- packed 16-bit codes (the TMA and activation-on-load kernels) -------------------------- */

/* Element j of row p of the thread's packed codes as FP32: bq_unpack2's value. */
template <int IN>
__device__ __forceinline__ float bq_pk_elem(const uint32_t w[8][4], int p, int j) {
    float lo, hi;
    bq_unpack2<IN>(w[p][j >> 1], &lo, &hi);
    return (j & 1) ? hi : lo;
}

/* A non-NaN magnitude code (0 <= h <= Inf's code) as FP32: exact. */
template <int IN>
__device__ __forceinline__ float bq_pk_widen(uint32_t h) {
    return IN == BQ_IN_BF16 ? __uint_as_float(h << 16) : bq_fp16(h);
}

/* The tile of row tile rt (in member order) and column tile ct (ct < ctiles): bq_find's tile
 * for t = rt·ctiles + ct, without the division; 0 past the last real tile. */
__device__ __forceinline__ int bq_find_at(const bq_args_t &a, int64_t rt, int64_t ct, bq_tile_t *tl) {
    int32_t i = 0;
    int64_t r0 = 0, m = a.single_rows, tim = rt;
    if (a.rows) {
        if (!gln_group_tile_warp(a.rows, a.num, BQ_EDGE, rt, &i, &r0, &m, &tim)) return 0;
    } else if (rt >= gln_ceil_div(m, BQ_EDGE)) {
        return 0;
    }
    tl->mrow0 = r0, tl->m = m, tl->tr = tim, tl->ct = ct;
    tl->rs = tim * BQ_EDGE, tl->c0 = ct * BQ_EDGE;
    tl->nr = (int)min((int64_t)BQ_EDGE, m - tl->rs);
    tl->nc = (int)min((int64_t)BQ_EDGE, a.cols - tl->c0);
    tl->so_r = a.rows ? a.srow[i] : 0;
    tl->so_c = a.rows ? a.scol[i] : 0;
    return 1;
}


/* bq_store_rows for 2-byte inputs, with the row pointer stepped by cols. */
__device__ __forceinline__ void bq_pk_store_rows(const bq_args_t &a, const bq_tile_t &tl, const uint2 w[8], int rg,
                                               int cg) {
    const int c = cg * 8;
    uint8_t *row = a.q + (size_t)(tl.mrow0 + tl.rs + rg * 8) * (size_t)a.cols + (size_t)(tl.c0 + c);
#pragma unroll
    for (int p = 0; p < 8; p++) {
        uint8_t *rp = row;
        row += a.cols;
        if (rg * 8 + p >= tl.nr) continue;
        if (a.vec_q) {
            if (c < tl.nc) *(uint2 *)rp = w[p];
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (c + j < tl.nc) rp[j] = (uint8_t)((j < 4 ? w[p].x : w[p].y) >> ((j & 3) * 8));
        }
    }
}

/* Which lines of the thread's 8x8 packed elements a finish step walks. */
enum { BQ_PK_ROWS = 0, BQ_PK_COLS = 1 };

/* The FP32 values of line l: row l (x[e] = column e) or column l (x[e] = row e). */
template <int IN, int LINES>
__device__ __forceinline__ void bq_pk_line(const uint32_t w[8][4], int l, float x[8]) {
#pragma unroll
    for (int e = 0; e < 8; e++) x[e] = LINES == BQ_PK_COLS ? bq_pk_elem<IN>(w, e, l) : bq_pk_elem<IN>(w, l, e);
}

/* The thread's 8 packed words of its rows (row p under scale s[p]) or of its columns (column j
 * under s[j]), NaN codes fixed where the thread holds a NaN (the packed kernels' finish steps;
 * each element widened where it is used, so no FP32 copy of the tile stays live). */
template <int IN, bool E5M2, int LINES>
__device__ __forceinline__ void bq_pk_enc(const uint32_t w[8][4], const float s[8], bool has_nan, uint2 out[8]) {
#pragma unroll
    for (int l = 0; l < 8; l++) {
        float x[8];
        bq_pk_line<IN, LINES>(w, l, x);
        out[l] = bq_enc8<E5M2>(x, s[l]);
    }
    if (!has_nan) return;
#pragma unroll
    for (int l = 0; l < 8; l++) {
        float x[8];
        bq_pk_line<IN, LINES>(w, l, x);
        bq_fix_nan8(x, &out[l]);
    }
}

/* ---- launchers: one per kernel file, called by the dispatch in cuda_block.cu ------------------ */

/* The grid of kernel k with `smem` bytes of dynamic shared memory per block: as many blocks as
 * are resident at once (at most one per SM when one_per_sm), at most a->tiles, capped by
 * GLN_CUDA_QUANT_GRID. */
gln_status_t gln_block_quant_grid(const void *k, size_t smem, bq_args_t *a, unsigned int *grid, const char *call,
                                  int one_per_sm);

/* gln_block_quant_kernel (cuda_block_general.cu): any input dtype, alignment and shape. */
gln_status_t gln_block_quant_launch_general(gln_context_t *ctx, const gln_quant_config_t *cfg, gln_dtype_t dtype,
                                            bq_args_t *a, const char *call);

/* gln_block_quant_act_kernel (cuda_block_act.cu): a->act set, bf16, cols % 8 == 0, a 16-byte
 * aligned activation input (the caller checks). */
gln_status_t gln_block_quant_launch_act(gln_context_t *ctx, const gln_quant_config_t *cfg, bq_args_t *a,
                                        const char *call);

/* gln_block_quant_tma_kernel (cuda_block_tma.cu), where gln_block_quant_tma_refusal says it can
 * take the call: *launched = 1 once launched, 0 when the driver refuses the tensor map. */
const char *gln_block_quant_tma_refusal(gln_dtype_t dtype, const bq_args_t *a, int64_t in_rows);
gln_status_t gln_block_quant_launch_tma(gln_context_t *ctx, const gln_quant_config_t *cfg, bq_args_t *a,
                                        int64_t in_rows, int *launched, const char *call);

#endif

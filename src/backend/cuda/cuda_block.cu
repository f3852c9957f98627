/* CUDA FP8 block-scaling quantization (BLOCK_1D: 1x128 rowwise / 128x1 columnwise blocks;
 * BLOCK_2D: 128x128 tiles shared by both copies), bitwise equal to gln_quantize_block_ref
 * (src/quant/quant_block.c), for one tensor or for every member of a grouped tensor in one
 * launch (a single tensor is a grouped tensor of one member: one kernel per mode).
 *
 * Numerics, per block: amax = max |x| over its valid elements, NaN ignored (TE's fmaxf rule) or
 * propagated (cfg->amax_nan_propagate); scale = gln_scale_from_amax_impl(amax, fp8_max,
 * power_2_scale, epsilon, max finite of the input dtype); stored decode scale = 1 / scale (IEEE
 * division); data = one saturating RNE encode of the FP32 product x·scale.  A max is exact in any
 * order and only whether a NaN amax is NaN matters (it gives scale 1), so the kernel reduces in
 * its own order.  Two conversions use the hardware instead of the numerics.h bit code, which is
 * several times slower and would make the kernel compute-bound: FP32 -> FP8 by cvt.rn.satfinite
 * (equal to gln_f32_to_e4m3_bits / e5m2 on every non-NaN input; a NaN x is given the reference's
 * sign | 0x7F after the fact), fp16 -> FP32 by cvt.f32.f16 (exact; a NaN keeps its sign, its
 * payload does not matter).  gln_cuda_block_selfcheck proves both over every input.
 *
 * Work decomposition: 128x128 tiles of a member (tiles start at the member's first row: BLOCK_1D
 * columnwise blocks and BLOCK_2D tiles are aligned to the member), walked by a persistent grid
 * (as many blocks as are resident; each starts its tile by asking L2 for its next one, so its
 * loads find L2 rather than DRAM; GLN_CUDA_QUANT_PREFETCH=0: one block per tile, no prefetch), 256
 * threads, each owning 8 rows x 8 columns held in registers after ONE read of the input (16-byte
 * loads).  From those registers: row amaxes (half-warp shuffles), column amaxes (shuffles + shared
 * memory) or the tile amax; the rowwise copy (8-byte stores); the transposed copy through a
 * swizzled 128x128-byte shared tile (16-byte stores where the member's rows allow), and every
 * scale of the member's padded grid, padding (0) included, so no memset is needed.  A grouped
 * launch sizes its grid from host-known values (packed rows, member count, columns); blocks past
 * the last real tile exit.  Rows and scale offsets come from the device group plan.
 *
 * What the main loop costs (issue 9; cuobjdump -sass of the bf16 E4M3 NaN-ignoring kernels, main
 * loop compiled with the NaN fix-ups and the unaligned load / store fallbacks cut out, so what is
 * left is what a full, NaN-free, aligned tile runs): ~1,900 static instructions per thread per
 * 128x128 tile for both BLOCK_1D and BLOCK_2D, ~2,300 run with the transposed store's loop (4
 * passes of ~120) and the member search: ~36 per element (64 per thread).  ptxas: 117 (1D) / 128
 * (2D) registers, no spills, 2 blocks per SM.  Where they go: ~390-460 IMAD and ~150 IADD3 —
 * 64-bit address arithmetic per row for the 8 loads and 8 rowwise stores and per pass of the
 * transposed store (c·m in 64 bits), plus a 64-bit division t / ctiles per tile in bq_find (the
 * I2F / F2I / MUFU.RCP sequence and a slow-path call) done twice (this tile and the prefetched
 * one) and a 32-bit division k / lines per prefetch pass; ~150 FMNMX and ~150 LOP3 for the
 * amaxes on unpacked FP32 values (|x| mask, fmaxf per element for the row and again for the
 * column amax, and a third integer max per element for the NaN flag); 64-128 FMUL + 32-64 F2FP
 * for the encodes (the floor); ~55 SHFL for the row amax butterfly and the scale broadcast.
 * Levers not yet taken (issue 9, second half): amax on the packed bf16 words with __vmaxu2 (one
 * op per 2 elements, the NaN flag from the same max) before bq_load widens them, with the
 * fmaxf path only for a thread holding a NaN; (row tile, column tile) advanced without
 * division and the prefetch walk in shifts (lines is 1, 2 or 4 per row for a full tile);
 * 32-bit in-tile offsets from one 64-bit row base per tile; the BLOCK_1D column amax on packed
 * pairs too.  gln_block_quant2_kernel (below, bf16 only) takes the division-free walk, the
 * shift-based prefetch, the packed amaxes (rows and BLOCK_1D columns) and per-row pointer steps;
 * it stays at 128 registers (2 blocks per SM), so the register / occupancy lever is still open.
 * gln_block_quant3_kernel (v3, below v2; the default for bf16 with a 16-byte aligned base and
 * cols % 8 == 0; GLN_CUDA_BLOCK_TMA=0: v2) runs v2's per-thread code on tiles that a Hopper
 * tensor copy (TMA) brings into a 3-stage shared-memory ring ahead of use, so a block's next two
 * tiles are in flight while it computes and stores one (v2: no load in flight then).  ptxas (s6): 121
 * (2D) / 128 (1D) registers, no spills, 101 KiB of shared memory, 2 blocks per SM. */
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

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
#include "backend/cuda/cuda_tma.cuh"

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
    int prefetch;         /* persistent grid: each tile prefetches the block's next into L2 */
    int act;              /* activation on load (bq_load): GLN_ACT_LOAD_NONE, or x is the bf16 input
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

/* Ask L2 for the input lines of tile tl (the block's next): one 128-byte line per thread per
 * step, rows of the tile by lines of its valid columns.  Only a hint (prefetch.global.L2): the
 * tile is read into registers as usual when its turn comes, from L2 by then, so a block's loads
 * wait on L2 latency rather than on DRAM's while it converts and stores the current tile. */
template <int IN>
__device__ __forceinline__ void bq_prefetch(const bq_args_t &a, const bq_tile_t &tl) {
    const int es = IN == BQ_IN_FP32 ? 4 : 2, row_bytes = tl.nc * es, lines = (row_bytes + 127) / 128;
    /* with act: the activation input's rows, both halves for SwiGLU */
    const size_t ld = a.act != GLN_ACT_LOAD_NONE ? (size_t)a.ld : (size_t)a.cols;
    const int halves = a.act == gln_act_load_kind(GLN_ACT_SWIGLU) ? 2 : 1, per_row = lines * halves;
    for (int k = (int)threadIdx.x; k < tl.nr * per_row; k += BQ_THREADS) {
        const int r = k / per_row, l = k % per_row % lines, half = k % per_row / lines;
        const char *p = (const char *)a.x +
                        ((size_t)(tl.mrow0 + tl.rs + r) * ld + (size_t)tl.c0 + (size_t)half * (size_t)a.cols) * es +
                        (size_t)l * 128;
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
    }
}

/* v[p][j] = x at tile row rg*8 + p, tile column bq_col(cg, j); 0 outside the tile (a 0 leaves
 * every amax unchanged). */
template <int IN>
__device__ __forceinline__ void bq_load(const bq_args_t &a, const bq_tile_t &tl, int rg, int cg, float v[8][8]) {
#pragma unroll
    for (int p = 0; p < 8; p++) {
#pragma unroll
        for (int j = 0; j < 8; j++) v[p][j] = 0.0f;
        const int r = rg * 8 + p;
        if (r >= tl.nr) continue;
        const size_t base = (size_t)(tl.mrow0 + tl.rs + r) * (size_t)a.cols + (size_t)tl.c0;
        if (IN == BQ_IN_BF16 && a.act != GLN_ACT_LOAD_NONE) {
            /* the activation's bf16 outputs, computed from its input (cuda_act.cuh): the values the
             * load below reads from a buffer the activation kernel wrote.  The host sets act only
             * for cols % 8 == 0 and a 16-byte aligned input, so a chunk is whole or absent. */
            if (cg * 8 < tl.nc) {
                uint32_t o[4];
                gln_act_load_bf16x8(a.act, a.x, a.ld, a.cols, tl.mrow0 + tl.rs + r, tl.c0 + cg * 8, o);
                bq_unpack2<IN>(o[0], &v[p][0], &v[p][1]);
                bq_unpack2<IN>(o[1], &v[p][2], &v[p][3]);
                bq_unpack2<IN>(o[2], &v[p][4], &v[p][5]);
                bq_unpack2<IN>(o[3], &v[p][6], &v[p][7]);
            }
        } else if (!a.vec_in) {
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (bq_col<IN>(cg, j) < tl.nc) v[p][j] = bq_load1<IN>(a.x, base + (size_t)bq_col<IN>(cg, j));
        } else if (IN == BQ_IN_FP32) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                if (bq_col<IN>(cg, 4 * h) >= tl.nc) continue;
                const float4 f = __ldcs((const float4 *)((const float *)a.x + base + bq_col<IN>(cg, 4 * h)));
                v[p][4 * h] = f.x, v[p][4 * h + 1] = f.y, v[p][4 * h + 2] = f.z, v[p][4 * h + 3] = f.w;
            }
        } else if (cg * 8 < tl.nc) {
            const uint4 u = __ldcs((const uint4 *)((const uint16_t *)a.x + base + cg * 8));
            bq_unpack2<IN>(u.x, &v[p][0], &v[p][1]);
            bq_unpack2<IN>(u.y, &v[p][2], &v[p][3]);
            bq_unpack2<IN>(u.z, &v[p][4], &v[p][5]);
            bq_unpack2<IN>(u.w, &v[p][6], &v[p][7]);
        }
    }
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
__device__ void bq_store_tpose(const bq_args_t &a, const bq_tile_t &tl, const uint8_t *tp) {
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

/* ---- the kernel ------------------------------------------------------------------------------ */

/* NaN elements: the reference's code (sign | 0x7F) into row word p byte j (rw) or column word j
 * byte p (cw).  Two functions rather than an optional pointer, so the word arrays stay in
 * registers. */
__device__ __forceinline__ void bq_fix_nan_rows(const float v[8][8], uint2 rw[8]) {
#pragma unroll
    for (int p = 0; p < 8; p++)
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (gln_f32_isnan(v[p][j])) bq_set_byte(&rw[p], j, bq_nan_byte(v[p][j]));
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

/* BLOCK_2D after the load: one scale, one encode; the column words are the row words'
 * transpose. */
template <int IN, bool NANP, bool E5M2>
__device__ __forceinline__ void bq_finish_2d(const bq_args_t &a, const bq_tile_t &tl, const float v[8][8],
                                             const float ra[8], bool has_nan, int rg, int cg, uint8_t *tp,
                                             float *wmax) {
    const float scale = bq_tile_scale<NANP>(a, tl, ra, wmax);
    uint2 rw[8];
#pragma unroll
    for (int p = 0; p < 8; p++) rw[p] = bq_enc8<E5M2>(v[p], scale);
    if (has_nan) bq_fix_nan_rows(v, rw);
    if (a.q) bq_store_rows<IN>(a, tl, rw, rg, cg);
    if (!a.qt) return;
    uint2 cw[8];
    bq_tr8(rw, cw);
    bq_tpose_out<IN>(a, tl, cw, rg, cg, tp);
}

/* BLOCK_1D after the load: the column maxima go to shared memory first, the rowwise copy is
 * encoded and stored while they wait for the barrier, then the columnwise copy (keeping few
 * words live at a time). */
template <int IN, bool NANP, bool E5M2>
__device__ __forceinline__ void bq_finish_1d(const bq_args_t &a, const bq_tile_t &tl, const float v[8][8],
                                             const float ra[8], const float ca[8], bool has_nan, int rg, int cg,
                                             uint8_t *tp, float (*colmax)[BQ_EDGE], float *cscale) {
    if (a.qt) bq_col_partials<IN, NANP>(ca, cg, colmax);
    if (a.q) {
        float rscale[8];
        uint2 rw[8];
        bq_row_scales<NANP>(a, tl, ra, rg, cg, rscale);
#pragma unroll
        for (int p = 0; p < 8; p++) rw[p] = bq_enc8<E5M2>(v[p], rscale[p]);
        if (has_nan) bq_fix_nan_rows(v, rw);
        bq_store_rows<IN>(a, tl, rw, rg, cg);
    }
    if (!a.qt) return;
    bq_col_scales<NANP>(a, tl, colmax, cscale);
    uint2 cw[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        float col[8];
#pragma unroll
        for (int p = 0; p < 8; p++) col[p] = v[p][j];
        cw[j] = bq_enc8<E5M2>(col, cscale[bq_col<IN>(cg, j)]);
    }
    if (has_nan) bq_fix_nan_cols(v, cw);
    bq_tpose_out<IN>(a, tl, cw, rg, cg, tp);
}

template <int IN, bool TWO_D, bool NANP, bool E5M2>
__global__ void __launch_bounds__(BQ_THREADS, 2) gln_block_quant_kernel(const bq_args_t a) {
    __shared__ __align__(16) uint8_t tp[BQ_EDGE * BQ_EDGE];
    __shared__ float colmax[BQ_THREADS / 32][BQ_EDGE];
    __shared__ float cscale[BQ_EDGE];
    __shared__ float wmax[BQ_THREADS / 32];
    const int cg = threadIdx.x & 15, rg = threadIdx.x >> 4;
    for (int64_t t = blockIdx.x; t < a.tiles; t += gridDim.x) {
        bq_tile_t tl;
        if (!bq_find(a, t, &tl)) return;
        if (a.prefetch && t + gridDim.x < a.tiles) { /* block-uniform */
            bq_tile_t nx;
            if (bq_find(a, t + gridDim.x, &nx)) bq_prefetch<IN>(a, nx);
        }
        __syncthreads(); /* the previous tile's shared memory has been read */
        float v[8][8], ra[8], ca[8];
        bq_load<IN>(a, tl, rg, cg, v);
        uint32_t any = 0; /* max magnitude bits: > 0x7F800000 when this thread holds a NaN */
#pragma unroll
        for (int j = 0; j < 8; j++) ca[j] = 0.0f;
#pragma unroll
        for (int p = 0; p < 8; p++) {
            ra[p] = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                ra[p] = bq_absmax<NANP>(ra[p], v[p][j]);
                if (!TWO_D) ca[j] = bq_absmax<NANP>(ca[j], v[p][j]);
                if (!NANP) any = max(any, __float_as_uint(v[p][j]) & 0x7FFFFFFFu);
            }
            if (NANP) any = max(any, __float_as_uint(ra[p]));
        }
        const bool has_nan = any > 0x7F800000u;
        if (TWO_D)
            bq_finish_2d<IN, NANP, E5M2>(a, tl, v, ra, has_nan, rg, cg, tp, wmax);
        else
            bq_finish_1d<IN, NANP, E5M2>(a, tl, v, ra, ca, has_nan, rg, cg, tp, colmax, cscale);
    }
}

/* ---- v2 (issue 9): 16-bit inputs --------------------------------------------------------------
 *
 * gln_block_quant2_kernel is the default for bf16 input (GLN_CUDA_BLOCK_V1=1: the kernel above for
 * every input; fp16 stays on v1, see bq_pick, though the code takes fp16 too).  Same tiles,
 * threads, scales, encodes and stores as v1; what changes is how a thread gets there:
 *   - the tile walk: (row tile, column tile) is advanced by the grid stride with one carry, so the
 *     only divisions are two per block, before the loop (v1: a 64-bit t / ctiles per find);
 *   - the load keeps the raw 16-bit codes, packed two per word (w[p][k]: row p, columns 2k and
 *     2k + 1 of the thread's 8), and the FP32 values are those of bq_unpack2 made from them;
 *   - the amaxes: on a thread holding no NaN, the packed unsigned max (__vmaxu2) of the magnitude
 *     bits (code & 0x7FFF) — one op per 2 elements for the row and one for the column amax.  For
 *     non-negative, non-NaN values of one format the order of the codes is the order of the
 *     values, and the widening is exact and monotone, so the widened max code IS the FP32 max
 *     that v1's fmaxf / integer-max loop returns (0 included: elements outside the tile are the
 *     code 0).  The same max says whether the thread holds a NaN (a magnitude code above Inf's);
 *     a thread that does runs v1's FP32 loop on the same FP32 values instead (the slow path);
 *   - row addresses: one 64-bit pointer per tile, stepped by cols per row (v1: a 64-bit multiply
 *     per row for the loads and again for the rowwise stores);
 *   - the L2 prefetch walk: 4 slots per row (a row of at most 128 two-byte columns is 1 or 2
 *     lines, times 2 halves for SwiGLU), shifts instead of v1's 32-bit division.
 * Scales (bq_row_scales, bq_col_partials, bq_col_scales, bq_tile_scale), the encodes (bq_enc8),
 * the NaN fix-ups and the transposed store are v1's functions, called with the same values. */

/* Element j of row p of the thread's packed codes as FP32: bq_unpack2's value. */
template <int IN>
__device__ __forceinline__ float bq2_elem(const uint32_t w[8][4], int p, int j) {
    float lo, hi;
    bq_unpack2<IN>(w[p][j >> 1], &lo, &hi);
    return (j & 1) ? hi : lo;
}

/* A non-NaN magnitude code (0 <= h <= Inf's code) as FP32: exact. */
template <int IN>
__device__ __forceinline__ float bq2_widen(uint32_t h) {
    return IN == BQ_IN_BF16 ? __uint_as_float(h << 16) : bq_fp16(h);
}

/* The tile of row tile rt (in member order) and column tile ct (ct < ctiles): bq_find's tile
 * for t = rt·ctiles + ct, without the division; 0 past the last real tile. */
__device__ __forceinline__ int bq2_find(const bq_args_t &a, int64_t rt, int64_t ct, bq_tile_t *tl) {
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

/* bq_prefetch for 2-byte inputs: a row's valid columns are 1 or 2 lines (nc <= 128), times 1 or
 * 2 halves, so slot s < 4 of row r is line s & (lines - 1) of half s >> (lines - 1). */
__device__ __forceinline__ void bq2_prefetch(const bq_args_t &a, const bq_tile_t &tl) {
    const int lines = tl.nc > 64 ? 2 : 1;
    const size_t ld = a.act != GLN_ACT_LOAD_NONE ? (size_t)a.ld : (size_t)a.cols;
    const int halves = a.act == gln_act_load_kind(GLN_ACT_SWIGLU) ? 2 : 1, per_row = lines * halves;
    const char *base = (const char *)a.x + ((size_t)(tl.mrow0 + tl.rs) * ld + (size_t)tl.c0) * 2;
    for (int k = (int)threadIdx.x; k < BQ_EDGE * 4; k += BQ_THREADS) {
        const int r = k >> 2, s = k & 3;
        if (r >= tl.nr || s >= per_row) continue;
        const int l = s & (lines - 1), half = s >> (lines - 1);
        const char *p = base + (size_t)r * ld * 2 + (size_t)half * (size_t)a.cols * 2 + (size_t)l * 128;
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
    }
}

/* bq_load's elements as packed codes: w[p][k] = the codes of tile row rg*8 + p, tile columns
 * cg*8 + 2k (low half) and cg*8 + 2k + 1 (high half); 0 outside the tile.  The same three
 * paths as bq_load (activation on load, scalar, 16-byte). */
template <int IN>
__device__ __forceinline__ void bq2_load(const bq_args_t &a, const bq_tile_t &tl, int rg, int cg, uint32_t w[8][4]) {
    const int c = cg * 8;
    const uint16_t *xr = (const uint16_t *)a.x + (size_t)(tl.mrow0 + tl.rs + rg * 8) * (size_t)a.cols + (size_t)(tl.c0 + c);
#pragma unroll
    for (int p = 0; p < 8; p++) {
        const uint16_t *xp = xr;
        xr += a.cols;
#pragma unroll
        for (int k = 0; k < 4; k++) w[p][k] = 0u;
        const int r = rg * 8 + p;
        if (r >= tl.nr) continue;
        if (IN == BQ_IN_BF16 && a.act != GLN_ACT_LOAD_NONE) {
            if (c < tl.nc) gln_act_load_bf16x8(a.act, a.x, a.ld, a.cols, tl.mrow0 + tl.rs + r, tl.c0 + c, w[p]);
        } else if (!a.vec_in) {
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (c + j < tl.nc) w[p][j >> 1] |= (uint32_t)xp[j] << ((j & 1) * 16);
        } else if (c < tl.nc) {
            const uint4 u = __ldcs((const uint4 *)xp);
            w[p][0] = u.x, w[p][1] = u.y, w[p][2] = u.z, w[p][3] = u.w;
        }
    }
}

/* bq_store_rows for 2-byte inputs, with the row pointer stepped by cols. */
__device__ __forceinline__ void bq2_store_rows(const bq_args_t &a, const bq_tile_t &tl, const uint2 w[8], int rg,
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

/* bq_fix_nan_rows / bq_fix_nan_cols on the packed codes (each element widened where it is
 * tested, so no FP32 copy of the tile stays live). */
template <int IN>
__device__ __forceinline__ void bq2_fix_nan_rows(const uint32_t w[8][4], uint2 rw[8]) {
#pragma unroll
    for (int p = 0; p < 8; p++)
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float x = bq2_elem<IN>(w, p, j);
            if (gln_f32_isnan(x)) bq_set_byte(&rw[p], j, bq_nan_byte(x));
        }
}
template <int IN>
__device__ __forceinline__ void bq2_fix_nan_cols(const uint32_t w[8][4], uint2 cw[8]) {
#pragma unroll
    for (int p = 0; p < 8; p++)
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float x = bq2_elem<IN>(w, p, j);
            if (gln_f32_isnan(x)) bq_set_byte(&cw[j], p, bq_nan_byte(x));
        }
}

/* The FP32 values of row p (x[j] = column j) or of column j (x[p] = row p). */
template <int IN>
__device__ __forceinline__ void bq2_row(const uint32_t w[8][4], int p, float x[8]) {
#pragma unroll
    for (int j = 0; j < 8; j++) x[j] = bq2_elem<IN>(w, p, j);
}
template <int IN>
__device__ __forceinline__ void bq2_col(const uint32_t w[8][4], int j, float x[8]) {
#pragma unroll
    for (int p = 0; p < 8; p++) x[p] = bq2_elem<IN>(w, p, j);
}

/* The thread's 8 packed row words under row p's scale rs[p] / 8 packed column words under column
 * j's scale cs[j], NaN codes fixed where the thread holds a NaN (v2's and v3's finish steps). */
template <int IN, bool E5M2>
__device__ __forceinline__ void bq2_enc_rows(const uint32_t w[8][4], const float rs[8], bool has_nan, uint2 rw[8]) {
#pragma unroll
    for (int p = 0; p < 8; p++) {
        float x[8];
        bq2_row<IN>(w, p, x);
        rw[p] = bq_enc8<E5M2>(x, rs[p]);
    }
    if (has_nan) bq2_fix_nan_rows<IN>(w, rw);
}
template <int IN, bool E5M2>
__device__ __forceinline__ void bq2_enc_cols(const uint32_t w[8][4], const float cs[8], bool has_nan, uint2 cw[8]) {
#pragma unroll
    for (int j = 0; j < 8; j++) {
        float x[8];
        bq2_col<IN>(w, j, x);
        cw[j] = bq_enc8<E5M2>(x, cs[j]);
    }
    if (has_nan) bq2_fix_nan_cols<IN>(w, cw);
}

/* bq_finish_2d on the packed codes, with bq2_store_rows. */
template <int IN, bool NANP, bool E5M2>
__device__ __forceinline__ void bq2_finish_2d(const bq_args_t &a, const bq_tile_t &tl, const uint32_t w[8][4],
                                              const float ra[8], bool has_nan, int rg, int cg, uint8_t *tp,
                                              float *wmax) {
    const float scale = bq_tile_scale<NANP>(a, tl, ra, wmax);
    const float rs[8] = {scale, scale, scale, scale, scale, scale, scale, scale};
    uint2 rw[8];
    bq2_enc_rows<IN, E5M2>(w, rs, has_nan, rw);
    if (a.q) bq2_store_rows(a, tl, rw, rg, cg);
    if (!a.qt) return;
    uint2 cw[8];
    bq_tr8(rw, cw);
    bq_tpose_out<IN>(a, tl, cw, rg, cg, tp);
}

/* bq_finish_1d on the packed codes, with bq2_store_rows. */
template <int IN, bool NANP, bool E5M2>
__device__ __forceinline__ void bq2_finish_1d(const bq_args_t &a, const bq_tile_t &tl, const uint32_t w[8][4],
                                              const float ra[8], const float ca[8], bool has_nan, int rg, int cg,
                                              uint8_t *tp, float (*colmax)[BQ_EDGE], float *cscale) {
    if (a.qt) bq_col_partials<IN, NANP>(ca, cg, colmax);
    if (a.q) {
        float rscale[8];
        uint2 rw[8];
        bq_row_scales<NANP>(a, tl, ra, rg, cg, rscale);
        bq2_enc_rows<IN, E5M2>(w, rscale, has_nan, rw);
        bq2_store_rows(a, tl, rw, rg, cg);
    }
    if (!a.qt) return;
    bq_col_scales<NANP>(a, tl, colmax, cscale);
    float cs[8];
#pragma unroll
    for (int j = 0; j < 8; j++) cs[j] = cscale[bq_col<IN>(cg, j)];
    uint2 cw[8];
    bq2_enc_cols<IN, E5M2>(w, cs, has_nan, cw);
    bq_tpose_out<IN>(a, tl, cw, rg, cg, tp);
}

/* The thread's row amaxes ra[p] and (BLOCK_1D) column amaxes ca[j] of its packed codes, and
 * whether it holds a NaN: the packed magnitude maxima when it holds none, v1's FP32 loop on the
 * same values when it does (the v2 comment above says why both give v1's amaxes). */
template <int IN, bool TWO_D, bool NANP>
__device__ __forceinline__ bool bq2_amax(const uint32_t w[8][4], float ra[8], float ca[8]) {
    const uint32_t inf_code = IN == BQ_IN_BF16 ? 0x7F80u : 0x7C00u, mag = 0x7FFF7FFFu;
    /* packed magnitude maxima: rm[p] of row p (2 halves), cm[k] of columns 2k, 2k + 1 */
    uint32_t rm[8], cm[4] = {0u, 0u, 0u, 0u}, all = 0u;
#pragma unroll
    for (int p = 0; p < 8; p++) {
        rm[p] = __vmaxu2(__vmaxu2(w[p][0] & mag, w[p][1] & mag), __vmaxu2(w[p][2] & mag, w[p][3] & mag));
        all = __vmaxu2(all, rm[p]);
        if (!TWO_D)
#pragma unroll
            for (int k = 0; k < 4; k++) cm[k] = __vmaxu2(cm[k], w[p][k] & mag);
    }
    const bool has_nan = max(all & 0xFFFFu, all >> 16) > inf_code;
    if (!has_nan) {
#pragma unroll
        for (int p = 0; p < 8; p++) ra[p] = bq2_widen<IN>(max(rm[p] & 0xFFFFu, rm[p] >> 16));
#pragma unroll
        for (int k = 0; k < 4; k++) {
            ca[2 * k] = TWO_D ? 0.0f : bq2_widen<IN>(cm[k] & 0xFFFFu);
            ca[2 * k + 1] = TWO_D ? 0.0f : bq2_widen<IN>(cm[k] >> 16);
        }
    } else { /* v1's loop on the same values */
#pragma unroll
        for (int j = 0; j < 8; j++) ca[j] = 0.0f;
#pragma unroll
        for (int p = 0; p < 8; p++) {
            ra[p] = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float x = bq2_elem<IN>(w, p, j);
                ra[p] = bq_absmax<NANP>(ra[p], x);
                if (!TWO_D) ca[j] = bq_absmax<NANP>(ca[j], x);
            }
        }
    }
    return has_nan;
}

template <int IN, bool TWO_D, bool NANP, bool E5M2>
__global__ void __launch_bounds__(BQ_THREADS, 2) gln_block_quant2_kernel(const bq_args_t a) {
    static_assert(IN == BQ_IN_BF16 || IN == BQ_IN_FP16, "v2 takes 2-byte inputs");
    __shared__ __align__(16) uint8_t tp[BQ_EDGE * BQ_EDGE];
    __shared__ float colmax[BQ_THREADS / 32][BQ_EDGE];
    __shared__ float cscale[BQ_EDGE];
    __shared__ float wmax[BQ_THREADS / 32];
    const int cg = threadIdx.x & 15, rg = threadIdx.x >> 4;
    /* t = rt·ctiles + ct with 0 <= ct < ctiles throughout; the stride gridDim.x likewise */
    const int64_t step = gridDim.x, srt = step / a.ctiles, sct = step - srt * a.ctiles;
    int64_t rt = blockIdx.x / a.ctiles, ct = blockIdx.x - rt * a.ctiles;
    for (int64_t t = blockIdx.x; t < a.tiles; t += step) {
        bq_tile_t tl;
        if (!bq2_find(a, rt, ct, &tl)) return;
        ct += sct, rt += srt; /* now t + step's */
        if (ct >= a.ctiles) ct -= a.ctiles, rt++;
        if (a.prefetch && t + step < a.tiles) { /* block-uniform */
            bq_tile_t nx;
            if (bq2_find(a, rt, ct, &nx)) bq2_prefetch(a, nx);
        }
        __syncthreads(); /* the previous tile's shared memory has been read */
        uint32_t w[8][4];
        bq2_load<IN>(a, tl, rg, cg, w);
        float ra[8], ca[8];
        const bool has_nan = bq2_amax<IN, TWO_D, NANP>(w, ra, ca);
        if (TWO_D)
            bq2_finish_2d<IN, NANP, E5M2>(a, tl, w, ra, has_nan, rg, cg, tp, wmax);
        else
            bq2_finish_1d<IN, NANP, E5M2>(a, tl, w, ra, ca, has_nan, rg, cg, tp, colmax, cscale);
    }
}

/* ---- v3 (issue 9): bf16 input through a bulk-copy (TMA) load pipeline ------------------------
 *
 * gln_block_quant3_kernel is the default for bf16 input whose base is 16-byte aligned, whose
 * columns are a multiple of 8 and which is not an activation on load (bq_v3_refusal on the host;
 * GLN_CUDA_BLOCK_TMA=0: v2 as before).  v2 holds a tile in registers after load-then-use 16-byte
 * loads, so while a block encodes and stores a tile none of its loads are in flight.  v3 keeps a
 * ring of BQ3_STAGES (3) tiles in dynamic shared memory, filled by the Hopper tensor copy
 * (cp.async.bulk.tensor, cuda_tma.cuh) that costs no registers and runs while the block computes:
 * while the block works on its tile j, the copies of its tiles j + 1 and j + 2 are in flight or
 * landed.
 *
 *   - Loads: one 2-D tensor map over the packed input [rows, cols] (bf16, row stride cols·2
 *     bytes), box 128 rows x 128 columns, no swizzle: a stage is the tile, row r at r·256 bytes.
 *     A box that crosses into the next member's rows loads them (bq3_load masks them to 0, as
 *     bq2_load does); rows past the tensor's end and columns past cols load as 0.  The copy
 *     always delivers the whole box (32768 bytes, zero fill included), so every stage's barrier
 *     expects exactly BQ3_STAGE_BYTES.  Reading the stage: lane (rg, cg) reads 16 bytes of row
 *     rg*8 + p at column cg*8; each 8-lane phase of a warp's 16-byte loads covers 128 contiguous
 *     bytes of one row, so the unswizzled tile has no bank conflicts.
 *   - Producer: warp 0 walks the block's tiles (v2's walk, its state in shared memory), finds
 *     the next one (bq2_find needs a whole warp) and its lane 0 writes it into the stage's slot
 *     (the tile, or "none"), arms the stage's "full" mbarrier with the box bytes and issues the
 *     copy.  The prologue issues the block's first BQ3_STAGES - 1 tiles; at the top of iteration
 *     j, after the block barrier that ends tile j - 1, it issues tile j + BQ3_STAGES - 1 into the
 *     stage tile j - 1 used.  A copy is issued only for a real tile (t < tiles and bq2_find finds
 *     it); real tiles are a prefix of the block's walk, so the copies issued are exactly those of
 *     the tiles the loop consumes, and a block leaves (at the first slot that says "none") with
 *     no copy in flight into its shared memory.
 *   - Consumers (all 256 threads, warp 0 included): read the tile from the stage's slot (no
 *     per-warp search, and no walk state in their registers), wait on the stage's barrier (phase
 *     parity flips each time the ring wraps), read their 8x8 codes from it into the same
 *     registers as v2 and run v2's code from there: bq2_amax, bq2_finish_1d / _2d (scales,
 *     encodes, NaN fix-ups, rowwise stores, transposed store), so every output byte is v2's.
 *   - The transposed copy's 16 KB staging tile is the consumed stage itself (that leaves room
 *     for 2 blocks per SM).  It is safe: every thread's reads of the input precede a block barrier
 *     that precedes the first staging write (bq_tile_scale's in BLOCK_2D, bq_col_scales' in
 *     BLOCK_1D; the staging only exists with the columnwise copy, where that barrier is always
 *     reached), and the stage is refilled only after the block barrier at the top of the next
 *     iteration, which every thread reaches after its staging reads.  Each thread fences its
 *     ordinary shared accesses against the async proxy (fence.proxy.async) before that barrier,
 *     so the tensor copy's writes are ordered after the staging writes.
 *   - Shared memory: 3 x 32 KB stages (+ 128 bytes to align the ring) dynamic, plus 2.8 KB
 *     of column maxima / scales, the barriers, slots and walk static: 101,296 bytes (BLOCK_1D),
 *     2 blocks per SM (228 KB).
 *     4 stages would leave 1 block per SM (8 warps), too few to hide the barrier waits and the
 *     shuffles; 2 tiles in flight per block are 128 KB per SM, well above what the DRAM latency
 *     asks for at the copy bandwidth (~20-30 KB per SM).
 *   - Grid: persistent as v2 (as many blocks as are resident, from the occupancy calculator with
 *     the dynamic shared memory); GLN_CUDA_QUANT_PREFETCH=0 still gives one block per tile (the
 *     pipeline then holds one tile, for the A/B); GLN_CUDA_BLOCK_GRID=N caps it at N blocks (the
 *     tests wrap the ring many times that way).  No L2 prefetch: the copies run ahead instead.
 *   - Registers: 128 (1D) / 121 (2D), no spills (ptxas -v, s6), with the thread's row / column group made opaque
 *     per tile (else the compiler hoists the staging addresses out of the loop and spills them).
 * Stores stay v2's ordinary stores (8-byte rowwise, 16-byte transposed): staging the rowwise
 * codes in shared memory for bulk stores is a lever left for measurement. */

#define BQ3_STAGES 3
#define BQ3_STAGE_BYTES (BQ_EDGE * BQ_EDGE * 2) /* one bf16 tile: 128 rows of 256 bytes */
#define BQ3_DYN_SMEM (BQ3_STAGES * BQ3_STAGE_BYTES + 128)

/* Warp 0's walk over the block's tiles, in shared memory (no consumer register holds it): the
 * next tile to issue, t = rt·ctiles + ct (0 <= ct < ctiles), and the grid stride as srt row
 * tiles and sct column tiles, so a step is one carry (v2's walk). */
typedef struct bq3_walk {
    int64_t t, rt, ct, srt, sct;
} bq3_walk_t;

/* A stage's tile, written by warp 0's lane 0 when it issues the stage's copy: real = 0 when the
 * walk has no tile there (past the grid bound or past the last real tile). */
typedef struct bq3_slot {
    bq_tile_t tl;
    int real;
} bq3_slot_t;

/* Warp 0 (every lane): the walk's next tile into `slot`; if it is real, lane 0 arms `full` with the
 * box's bytes and copies the tile's box into `stage`; the walk advances. */
__device__ __forceinline__ void bq3_issue(const bq_args_t &a, const CUtensorMap *map, bq3_walk_t *walk,
                                          bq3_slot_t *slot, uint8_t *stage, uint64_t *full) {
    const int64_t t = walk->t, rt = walk->rt, ct = walk->ct;
    bq_tile_t tl;
    const int real = t < a.tiles && bq2_find(a, rt, ct, &tl); /* warp-uniform */
    __syncwarp(); /* every lane has read the walk */
    if ((threadIdx.x & 31) == 0) {
        slot->real = real;
        if (real) {
            slot->tl = tl;
            gln_mbar_expect_tx(full, BQ3_STAGE_BYTES);
            gln_tma_load_2d(stage, map, full, (int32_t)(tl.mrow0 + tl.rs), (int32_t)tl.c0);
        }
        int64_t nrt = rt + walk->srt, nct = ct + walk->sct;
        if (nct >= a.ctiles) nct -= a.ctiles, nrt++;
        walk->t = t + gridDim.x, walk->rt = nrt, walk->ct = nct;
    }
    __syncwarp(); /* the advanced walk is seen by the warp's next call */
}

/* bq2_load's packed codes from a landed stage: w[p][k] = tile row rg*8 + p, tile columns
 * cg*8 + 2k (low half) and + 1 (high half); 0 for rows past the member's tile and for columns
 * past the tensor's (cols % 8 == 0, so a thread's 8 columns are all valid or all not).  The box
 * always lands whole (rows of the next member or the zero fill past the tensor's end, the zero
 * fill past cols), so the 8 reads need no guard; the zeroing runs only on a thread whose rows or
 * columns leave the tile (a partial tile's). */
__device__ __forceinline__ void bq3_load(const uint8_t *stage, const bq_tile_t &tl, int rg, int cg, uint32_t w[8][4]) {
    const uint8_t *src = stage + rg * 8 * (BQ_EDGE * 2) + cg * 16;
#pragma unroll
    for (int p = 0; p < 8; p++) {
        const uint4 u = *(const uint4 *)(src + p * (BQ_EDGE * 2));
        w[p][0] = u.x, w[p][1] = u.y, w[p][2] = u.z, w[p][3] = u.w;
    }
    const int rows = cg * 8 < tl.nc ? tl.nr - rg * 8 : 0; /* the thread's rows in the tile, if > 0 */
    if (rows < 8) {
#pragma unroll
        for (int p = 0; p < 8; p++)
            if (p >= rows) w[p][0] = w[p][1] = w[p][2] = w[p][3] = 0u;
    }
}

/* ---- v3's own per-thread code (s6): the amaxes stay packed to the scales -----------------------
 *
 * v2's code (bq2_amax, bq2_finish_*) widens the packed maxima to FP32 before the row butterfly and
 * the column partials, and takes an FP32 slow path on a thread holding a NaN.  v3 keeps the
 * maxima packed (two bf16 magnitude codes per word) until each block's amax is known, and widens
 * only that:
 *   - NaN codes (magnitude > 0x7F80): with NANP they are kept, as they order above every number
 *     in the unsigned max and widen to a NaN, and a NaN amax is all the scale rule looks at
 *     (gln_scale_from_amax_impl: scale 1 for any NaN); without NANP a thread holding one recomputes
 *     its maxima with those codes replaced by 0 (fmaxf's "ignore NaN": the max of the others, 0 if
 *     none, as v1's loop starting from 0).  Non-NaN magnitude codes order as their values, and the
 *     widening is exact, so every block amax is v1's and v2's.
 *   - Row amax: bq_row_amax's butterfly on the packed words (the same shuffles, __vmaxu2 for
 *     bq_max), one widening at the end.
 *   - Column partials: the two row groups of a warp combined packed (2 shuffles, a reduce-scatter:
 *     each lane keeps 2 of its 4 column pairs) and stored as one 8-byte word per lane into
 *     colmaxp[warp][64 column pairs]: a warp's 32 stores cover 256 contiguous bytes, no bank
 *     conflict (v1 / v2: 4 scalar stores per lane, 4-way conflicts).
 *   - Column scales: thread c < 128 reduces its pair's 8 words and widens its half.
 *   - Encode scales of the columnwise copy read back as 2 16-byte loads per lane (v1 / v2: 8 scalar
 *     loads, 4-way conflicts).
 *   - Rowwise stores, transposed store: the 8-byte / 16-byte paths without per-row or per-chunk
 *     guards for a whole tile (the common case), v2's functions otherwise.
 *   - Staging of the transposed copy: two swizzle values per thread instead of eight.
 * Encodes and NaN fix-ups are v2's functions. */

/* The packed magnitude maxima of the thread's codes: rm[p] of row p (both halves are row p),
 * cm[k] of columns 2k (low) and 2k + 1 (high) over the 8 rows (BLOCK_1D), *all of everything.
 * DROP_NAN: NaN codes count as 0. */
template <bool TWO_D, bool DROP_NAN>
__device__ __forceinline__ void bq3_pmax(const uint32_t w[8][4], uint32_t rm[8], uint32_t cm[4], uint32_t *all) {
    uint32_t acc = 0u;
#pragma unroll
    for (int k = 0; k < 4; k++) cm[k] = 0u;
#pragma unroll
    for (int p = 0; p < 8; p++) {
        uint32_t m[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            m[k] = w[p][k] & 0x7FFF7FFFu;
            if (DROP_NAN) m[k] &= ~__vcmpgtu2(m[k], 0x7F807F80u); /* 0xFFFF in each NaN half */
        }
        rm[p] = __vmaxu2(__vmaxu2(m[0], m[1]), __vmaxu2(m[2], m[3]));
        acc = __vmaxu2(acc, rm[p]);
        if (!TWO_D)
#pragma unroll
            for (int k = 0; k < 4; k++) cm[k] = __vmaxu2(cm[k], m[k]);
    }
    *all = acc;
}

/* bq3_pmax with v3's NaN rule (above); returns whether the thread holds a NaN (bq2_amax's
 * has_nan, which selects the NaN fix-ups of the encodes). */
template <bool TWO_D, bool NANP>
__device__ __forceinline__ bool bq3_amax(const uint32_t w[8][4], uint32_t rm[8], uint32_t cm[4], uint32_t *all) {
    bq3_pmax<TWO_D, false>(w, rm, cm, all);
    const bool has_nan = max(*all & 0xFFFFu, *all >> 16) > 0x7F80u;
    if (!NANP && has_nan) bq3_pmax<TWO_D, true>(w, rm, cm, all);
    return has_nan;
}

/* The larger of a packed word's two magnitude codes, widened to FP32 (exact). */
__device__ __forceinline__ float bq3_widen_max(uint32_t v) { return __uint_as_float(max(v & 0xFFFFu, v >> 16) << 16); }

/* bq_row_scales on the packed row maxima: bq_row_amax's butterfly with __vmaxu2, so lane cg ends
 * with row cg >> 1 of its half-warp, as there. */
__device__ __forceinline__ void bq3_row_scales(const bq_args_t &a, const bq_tile_t &tl, const uint32_t rm[8], int rg,
                                               int cg, float rscale[8]) {
    const int lane = threadIdx.x & 31;
    const bool b3 = lane & 8, b2 = lane & 4, b1 = lane & 2;
    uint32_t a4[4], a2[2];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const uint32_t send = b3 ? rm[k] : rm[k + 4], keep = b3 ? rm[k + 4] : rm[k];
        a4[k] = __vmaxu2(keep, __shfl_xor_sync(BQ_FULL, send, 8));
    }
#pragma unroll
    for (int k = 0; k < 2; k++) {
        const uint32_t send = b2 ? a4[k] : a4[k + 2], keep = b2 ? a4[k + 2] : a4[k];
        a2[k] = __vmaxu2(keep, __shfl_xor_sync(BQ_FULL, send, 4));
    }
    const uint32_t send = b1 ? a2[0] : a2[1], keep = b1 ? a2[1] : a2[0];
    uint32_t a1 = __vmaxu2(keep, __shfl_xor_sync(BQ_FULL, send, 2));
    a1 = __vmaxu2(a1, __shfl_xor_sync(BQ_FULL, a1, 1));
    bq_row_spread(a, tl, bq_scale(a, bq3_widen_max(a1)), rg, cg, rscale);
}

/* Column pairs of a tile (BLOCK_1D column partials, packed) */
#define BQ3_PAIRS (BQ_EDGE / 2)

/* bq_col_partials on the packed column maxima: lane (rg, cg) of warp w leaves the max over the
 * warp's 16 rows of its column pairs cg*4 + 2·b4 and + 1 (b4: the warp's second row group) in
 * colmaxp[w][cg*4 + 2·b4 ...], one 8-byte store. */
__device__ __forceinline__ void bq3_col_partials(const uint32_t cm[4], int cg, uint32_t (*colmaxp)[BQ3_PAIRS]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const bool b4 = lane & 16;
    uint32_t o[2];
#pragma unroll
    for (int k = 0; k < 2; k++) {
        const uint32_t send = b4 ? cm[k] : cm[k + 2], keep = b4 ? cm[k + 2] : cm[k];
        o[k] = __vmaxu2(keep, __shfl_xor_sync(BQ_FULL, send, 16));
    }
    *(uint2 *)&colmaxp[warp][cg * 4 + (b4 ? 2 : 0)] = make_uint2(o[0], o[1]);
}

/* bq_col_scales on the packed partials: thread c < 128 takes the max of its pair's 8 words, then
 * its half (c even: low).  Starts and ends with a block barrier. */
__device__ __forceinline__ void bq3_col_scales(const bq_args_t &a, const bq_tile_t &tl,
                                               const uint32_t (*colmaxp)[BQ3_PAIRS], float *cscale) {
    __syncthreads();
    const int c = threadIdx.x;
    if (c < BQ_EDGE) {
        uint32_t v = 0u;
#pragma unroll
        for (int w = 0; w < BQ_THREADS / 32; w++) v = __vmaxu2(v, colmaxp[w][c >> 1]);
        bq_col_scale_out(a, tl, c, __uint_as_float(((c & 1) ? v >> 16 : v & 0xFFFFu) << 16), cscale);
    }
    __syncthreads();
}

/* bq2_store_rows; a thread whose 8 rows and 8 columns are all in the tile, on an 8-byte aligned
 * rowwise output, stores without per-row guards. */
__device__ __forceinline__ void bq3_store_rows(const bq_args_t &a, const bq_tile_t &tl, const uint2 w[8], int rg,
                                               int cg) {
    const int c = cg * 8;
    if (!a.vec_q || rg * 8 + 8 > tl.nr || c >= tl.nc) {
        bq2_store_rows(a, tl, w, rg, cg);
        return;
    }
    uint8_t *row = a.q + (size_t)(tl.mrow0 + tl.rs + rg * 8) * (size_t)a.cols + (size_t)(tl.c0 + c);
#pragma unroll
    for (int p = 0; p < 8; p++, row += a.cols) *(uint2 *)row = w[p];
}

/* bq_stage_cols for 2-byte inputs (tile column cg*8 + j): bq_swz(cg*8 + j) is
 * ((2·cg + (j >> 2)) ^ (cg >> 3)) & 15, one value for j < 4 and one for j >= 4, so the 8 stores
 * take two base addresses and immediate offsets j·128 (the compiler does not see that through the
 * opaque cg).  Same bytes at the same places as bq_stage_cols<BQ_IN_BF16>. */
__device__ __forceinline__ void bq3_stage_cols(uint8_t *tp, const uint2 w[8], int rg, int cg) {
    uint8_t *col = tp + cg * 8 * BQ_EDGE;
    uint8_t *lo = col + ((rg ^ bq_swz(cg * 8)) << 3), *hi = col + ((rg ^ bq_swz(cg * 8 + 4)) << 3);
#pragma unroll
    for (int j = 0; j < 4; j++) {
        *(uint2 *)(lo + j * BQ_EDGE) = w[j];
        *(uint2 *)(hi + (4 + j) * BQ_EDGE) = w[4 + j];
    }
}

/* bq_store_tpose; for a whole tile whose transposed rows start 16-byte aligned, its 16-byte path
 * unrolled: pass i of thread t is bq_store_tpose's u = t + 256·i (column (t >> 3) + 32·i, chunk
 * t & 7), none of whose guards can fail there. */
__device__ __forceinline__ void bq3_store_tpose(const bq_args_t &a, const bq_tile_t &tl, const uint8_t *tp) {
    const size_t m = (size_t)tl.m;
    uint8_t *dst = a.qt + (size_t)tl.mrow0 * (size_t)a.cols + (size_t)tl.c0 * m + (size_t)tl.rs;
    if (tl.nr < BQ_EDGE || tl.nc < BQ_EDGE || (m & 15) != 0 || ((uintptr_t)dst & 15) != 0) {
        bq_store_tpose(a, tl, tp);
        return;
    }
    const int k = threadIdx.x & 7, c0 = threadIdx.x >> 3;
    uint8_t *d = dst + (size_t)c0 * m + 16 * k;
#pragma unroll
    for (int i = 0; i < BQ_EDGE * 8 / BQ_THREADS; i++, d += (size_t)(BQ_THREADS / 8) * m) {
        const int c = c0 + (BQ_THREADS / 8) * i, h = bq_swz(c);
        uint4 v = *(const uint4 *)(tp + c * BQ_EDGE + (((2 * k) ^ h) >> 1) * 16);
        if (h & 1) v = make_uint4(v.z, v.w, v.x, v.y); /* chunk 2k sits in the high half */
        *(uint4 *)d = v;
    }
}

/* bq2_finish_2d with the packed tile amax (thread_amax: the widened max of the thread's codes). */
template <bool NANP, bool E5M2>
__device__ __forceinline__ void bq3_finish_2d(const bq_args_t &a, const bq_tile_t &tl, const uint32_t w[8][4],
                                              float thread_amax, bool has_nan, int rg, int cg, uint8_t *tp,
                                              float *wmax) {
    constexpr int IN = BQ_IN_BF16;
    const float scale = bq_tile_scale_of<NANP>(a, tl, thread_amax, wmax);
    const float rs[8] = {scale, scale, scale, scale, scale, scale, scale, scale};
    uint2 rw[8];
    bq2_enc_rows<IN, E5M2>(w, rs, has_nan, rw);
    if (a.q) bq3_store_rows(a, tl, rw, rg, cg);
    if (!a.qt) return;
    uint2 cw[8];
    bq_tr8(rw, cw);
    bq3_stage_cols(tp, cw, rg, cg);
    __syncthreads();
    bq3_store_tpose(a, tl, tp);
}

/* bq2_finish_1d with the packed maxima. */
template <bool NANP, bool E5M2>
__device__ __forceinline__ void bq3_finish_1d(const bq_args_t &a, const bq_tile_t &tl, const uint32_t w[8][4],
                                              const uint32_t rm[8], const uint32_t cm[4], bool has_nan, int rg,
                                              int cg, uint8_t *tp, uint32_t (*colmaxp)[BQ3_PAIRS],
                                              float *cscale) {
    constexpr int IN = BQ_IN_BF16;
    if (a.qt) bq3_col_partials(cm, cg, colmaxp);
    if (a.q) {
        float rscale[8];
        uint2 rw[8];
        bq3_row_scales(a, tl, rm, rg, cg, rscale);
        bq2_enc_rows<IN, E5M2>(w, rscale, has_nan, rw);
        bq3_store_rows(a, tl, rw, rg, cg);
    }
    if (!a.qt) return;
    bq3_col_scales(a, tl, colmaxp, cscale);
    const float4 s0 = *(const float4 *)(cscale + cg * 8), s1 = *(const float4 *)(cscale + cg * 8 + 4);
    const float cs[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w}; /* column cg*8 + j's */
    uint2 cw[8];
    bq2_enc_cols<IN, E5M2>(w, cs, has_nan, cw);
    bq3_stage_cols(tp, cw, rg, cg);
    __syncthreads();
    bq3_store_tpose(a, tl, tp);
}

template <bool TWO_D, bool NANP, bool E5M2>
__global__ void __launch_bounds__(BQ_THREADS, 2) gln_block_quant3_kernel(const bq_args_t a,
                                                                         const __grid_constant__ CUtensorMap map) {
    gln_pdl_wait(); /* launched by gln_cuda_launch: the previous kernels' writes first */
    gln_pdl_launch_dependents();
    extern __shared__ uint8_t bq3_dyn[];
    __shared__ __align__(8) uint32_t colmaxp[BQ_THREADS / 32][BQ3_PAIRS];
    __shared__ __align__(16) float cscale[BQ_EDGE];
    __shared__ float wmax[BQ_THREADS / 32];
    __shared__ __align__(8) uint64_t full[BQ3_STAGES];
    __shared__ bq3_slot_t slot[BQ3_STAGES];
    __shared__ bq3_walk_t walk;
    /* the ring at a 128-byte aligned shared address (the tensor copy's destination alignment) */
    uint8_t *ring = bq3_dyn + ((128u - (gln_smem_addr(bq3_dyn) & 127u)) & 127u);
    const bool producer = threadIdx.x < 32;
    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < BQ3_STAGES; s++) gln_mbar_init(&full[s], 1);
        gln_mbar_init_fence();
        walk.t = blockIdx.x, walk.rt = (int64_t)blockIdx.x / a.ctiles;
        walk.ct = (int64_t)blockIdx.x - walk.rt * a.ctiles;
        walk.srt = (int64_t)gridDim.x / a.ctiles, walk.sct = (int64_t)gridDim.x - walk.srt * a.ctiles;
    }
    __syncthreads();
    if (producer)
#pragma unroll
        for (int s = 0; s < BQ3_STAGES - 1; s++)
            bq3_issue(a, &map, &walk, &slot[s], ring + s * BQ3_STAGE_BYTES, &full[s]);
    int stage = 0;       /* tile j's stage: j % BQ3_STAGES */
    uint32_t parity = 0; /* and the parity of its barrier's phase: (j / BQ3_STAGES) & 1 */
    for (;;) {
        gln_fence_async_smem(); /* this thread's shared accesses of tile j - 1 before the refill */
        __syncthreads();        /* tile j - 1 is done: its stage, slot and the shared scratch are free */
        if (!slot[stage].real) return; /* block-uniform; no later tile is real, none was issued */
        const bq_tile_t &tl = slot[stage].tl; /* read where used: fewer live registers */
        if (producer) {
            const int s = stage == 0 ? BQ3_STAGES - 1 : stage - 1;
            bq3_issue(a, &map, &walk, &slot[s], ring + s * BQ3_STAGE_BYTES, &full[s]);
        }
        gln_mbar_wait(&full[stage], parity);
        /* the thread's row / column group, made opaque per tile so that the compiler does not hoist
         * the addresses derived from them out of the loop (held across it they spill, ptxas -v) */
        int cg = threadIdx.x & 15, rg = threadIdx.x >> 4;
        asm volatile("" : "+r"(cg), "+r"(rg));
        uint8_t *buf = ring + stage * BQ3_STAGE_BYTES;
        uint32_t w[8][4];
        bq3_load(buf, tl, rg, cg, w);
        uint32_t rm[8], cm[4], all;
        const bool has_nan = bq3_amax<TWO_D, NANP>(w, rm, cm, &all);
        /* buf is the transposed copy's staging tile from here on (see above) */
        if (TWO_D)
            bq3_finish_2d<NANP, E5M2>(a, tl, w, bq3_widen_max(all), has_nan, rg, cg, buf, wmax);
        else
            bq3_finish_1d<NANP, E5M2>(a, tl, w, rm, cm, has_nan, rg, cg, buf, colmaxp, cscale);
        if (++stage == BQ3_STAGES) stage = 0, parity ^= 1u;
    }
}

/* ---- launch ---------------------------------------------------------------------------------- */

typedef void (*bq_kernel_t)(const bq_args_t);

template <int IN, bool TWO_D>
static bq_kernel_t bq_pick2(int nanp, int e5m2) {
    if (nanp) return e5m2 ? gln_block_quant_kernel<IN, TWO_D, true, true> : gln_block_quant_kernel<IN, TWO_D, true, false>;
    return e5m2 ? gln_block_quant_kernel<IN, TWO_D, false, true> : gln_block_quant_kernel<IN, TWO_D, false, false>;
}

template <int IN>
static bq_kernel_t bq_pick1(int two_d, int nanp, int e5m2) {
    return two_d ? bq_pick2<IN, true>(nanp, e5m2) : bq_pick2<IN, false>(nanp, e5m2);
}

template <int IN, bool TWO_D>
static bq_kernel_t bq2_pick2(int nanp, int e5m2) {
    if (nanp) return e5m2 ? gln_block_quant2_kernel<IN, TWO_D, true, true> : gln_block_quant2_kernel<IN, TWO_D, true, false>;
    return e5m2 ? gln_block_quant2_kernel<IN, TWO_D, false, true> : gln_block_quant2_kernel<IN, TWO_D, false, false>;
}

template <int IN>
static bq_kernel_t bq2_pick1(int two_d, int nanp, int e5m2) {
    return two_d ? bq2_pick2<IN, true>(nanp, e5m2) : bq2_pick2<IN, false>(nanp, e5m2);
}

typedef void (*bq3_kernel_t)(const bq_args_t, const CUtensorMap);

template <bool TWO_D>
static bq3_kernel_t bq3_pick2(int nanp, int e5m2) {
    if (nanp) return e5m2 ? gln_block_quant3_kernel<TWO_D, true, true> : gln_block_quant3_kernel<TWO_D, true, false>;
    return e5m2 ? gln_block_quant3_kernel<TWO_D, false, true> : gln_block_quant3_kernel<TWO_D, false, false>;
}

/* GLN_CUDA_BLOCK_V1=1: gln_block_quant_kernel (v1) for every input, to A/B it against
 * gln_block_quant2_kernel; read at every call. */
static int bq_v1_forced(void) {
    const char *e = getenv("GLN_CUDA_BLOCK_V1");
    return e && e[0] == '1';
}

/* GLN_CUDA_BLOCK_TMA: 0 = v2 (or v1 under GLN_CUDA_BLOCK_V1=1) where v3 would run; 2 = v3
 * required: a call v3 cannot take fails with GLN_STATUS_NOT_SUPPORTED saying why (the tests use it
 * to prove which shapes run on v3); unset or anything else = v3 where it applies, else the
 * fallback.  Read at every call. */
enum { BQ_V3_OFF = 0, BQ_V3_AUTO = 1, BQ_V3_REQUIRED = 2 };
static int bq_v3_mode(void) {
    const char *e = getenv("GLN_CUDA_BLOCK_TMA");
    if (e && e[0] == '0' && e[1] == '\0') return BQ_V3_OFF;
    if (e && e[0] == '2' && e[1] == '\0') return BQ_V3_REQUIRED;
    return BQ_V3_AUTO;
}

/* GLN_CUDA_BLOCK_GRID=N (N > 0): at most N blocks, whatever the kernel, so that each block walks
 * many tiles (the tests use it to wrap v3's stage ring many times on small tensors); read at
 * every call. */
static int64_t bq_grid_cap(void) { return gln_cuda_env_grid_cap("GLN_CUDA_BLOCK_GRID"); }

/* v3's conditions (see its comment): bf16 read as is from a 16-byte aligned base with cols % 8
 * == 0 (a.vec_in), and row / column coordinates that fit the tensor copy's 32-bit ones; not
 * switched off (GLN_CUDA_BLOCK_TMA=0, GLN_CUDA_BLOCK_V1=1).  NULL when v3 can take the call, else
 * the reason, for GLN_CUDA_BLOCK_TMA=2's message. */
static const char *bq_v3_refusal(gln_dtype_t dtype, const bq_args_t *a, int64_t in_rows) {
    if (dtype != GLN_DTYPE_BF16) return "the input is not bf16";
    if (a->act != GLN_ACT_LOAD_NONE) return "the input is an activation computed on load";
    if (a->cols % 8 != 0) return "the columns are not a multiple of 8";
    if (!a->vec_in) return "the input's base is not 16-byte aligned";
    if (in_rows <= 0 || in_rows > INT32_MAX) return "the packed rows are outside [1, INT32_MAX]";
    if (a->cols > INT32_MAX) return "the columns exceed INT32_MAX";
    if (bq_v1_forced()) return "GLN_CUDA_BLOCK_V1=1 selects v1";
    if (bq_v3_mode() == BQ_V3_OFF) return "GLN_CUDA_BLOCK_TMA=0 selects v2";
    return NULL;
}

/* Where v3 does not run (bq_launch tries it first; GLN_CUDA_BLOCK_TMA=2: nothing runs instead): v2 for bf16 input (every path: scalar,
 * 16-byte, activation on load); v1 for FP32 and fp16
 * (v2's fp16 instances spill under the 128-register bound: 12-72 bytes, ptxas -v). */
static bq_kernel_t bq_pick(gln_dtype_t dtype, int two_d, int nanp, int e5m2) {
    if (dtype == GLN_DTYPE_BF16 && !bq_v1_forced()) return bq2_pick1<BQ_IN_BF16>(two_d, nanp, e5m2);
    if (dtype == GLN_DTYPE_FP32) return bq_pick1<BQ_IN_FP32>(two_d, nanp, e5m2);
    if (dtype == GLN_DTYPE_BF16) return bq_pick1<BQ_IN_BF16>(two_d, nanp, e5m2);
    return bq_pick1<BQ_IN_FP16>(two_d, nanp, e5m2);
}

/* The arguments shared by both entry points (in: the packed input; out: the packed output). */
static bq_args_t bq_args_make(const gln_quant_config_t *cfg, const gln_tensor_t *in, const gln_tensor_t *out) {
    bq_args_t a;
    memset(&a, 0, sizeof a);
    a.x = in->data;
    a.cols = in->cols;
    a.ctiles = gln_ceil_div(in->cols, BQ_EDGE);
    if (cfg->rowwise) a.q = (uint8_t *)out->data, a.s = (float *)out->scale_inv;
    if (cfg->columnwise) a.qt = (uint8_t *)out->col_data, a.cs = (float *)out->col_scale_inv;
    a.fp8_max = gln_fp8_max(cfg->fp8_dtype);
    a.epsilon = cfg->amax_epsilon;
    a.value_for_inf = gln_hp_max(in->dtype);
    a.pow2 = cfg->power_2_scale;
    const int64_t per16 = in->dtype == GLN_DTYPE_FP32 ? 4 : 8; /* elements per 16-byte load */
    a.vec_in = in->cols % per16 == 0 && ((uintptr_t)in->data & 15) == 0;
    a.vec_q = in->cols % per16 == 0 && ((uintptr_t)a.q & 7) == 0;
    return a;
}

/* The grid: one block per tile, or (GLN_CUDA_QUANT_PREFETCH unset or not 0) as many blocks as are
 * resident at once with `smem` bytes of dynamic shared memory each — at most one per SM when
 * one_per_sm; GLN_CUDA_BLOCK_GRID caps it. */
static gln_status_t bq_grid(const void *k, size_t smem, bq_args_t *a, unsigned int *grid, const char *call,
                            int one_per_sm = 0) {
    int64_t blocks = a->tiles;
    /* GLN_CUDA_QUANT_PREFETCH=0: one block per tile, no prefetch (to measure what it gains) */
    const char *env = getenv("GLN_CUDA_QUANT_PREFETCH");
    a->prefetch = !(env && env[0] == '0');
    if (a->prefetch) { /* persistent: as many blocks as are resident at once */
        int dev = 0, sms = 0, per_sm = 0;
        GLN_TRY(gln_cuda_check(cudaGetDevice(&dev), call, "cudaGetDevice"));
        GLN_TRY(gln_cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), call,
                               "cudaDeviceGetAttribute(multiprocessors)"));
        GLN_TRY(gln_cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, BQ_THREADS, smem), call,
                               "cudaOccupancyMaxActiveBlocksPerMultiprocessor"));
        const int64_t resident = (int64_t)(sms > 0 ? sms : 1) * (per_sm > 0 && !one_per_sm ? per_sm : 1);
        if (resident < blocks) blocks = resident;
    }
    const int64_t cap = bq_grid_cap();
    if (cap && cap < blocks) blocks = cap;
    *grid = (unsigned int)(blocks < INT_MAX ? blocks : INT_MAX);
    return GLN_STATUS_SUCCESS;
}

/* v3 (bq_v3_refusal gave NULL): *launched = 1 once it is launched, 0 when the driver refuses the tensor map
 * (the caller then launches v2). */
static gln_status_t bq_launch_v3(gln_context_t *ctx, const gln_quant_config_t *cfg, bq_args_t *a, int64_t in_rows,
                                 int *launched, const char *call) {
    *launched = 0;
    CUtensorMap map;
    if (gln_tma_encode_2d(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, a->x, (uint64_t)in_rows, (uint64_t)a->cols,
                          (uint64_t)a->cols * 2u, BQ_EDGE, BQ_EDGE, CU_TENSOR_MAP_SWIZZLE_NONE) != 0)
        return GLN_STATUS_SUCCESS;
    const int two_d = cfg->mode == GLN_SCALING_BLOCK_2D, nanp = cfg->amax_nan_propagate != 0,
              e5m2 = cfg->fp8_dtype == GLN_DTYPE_FP8_E5M2;
    const bq3_kernel_t k = two_d ? bq3_pick2<true>(nanp, e5m2) : bq3_pick2<false>(nanp, e5m2);
    /* the dynamic shared memory above 48 KB, allowed once per instance (a racing first call sets
     * the same value again) */
    static int allowed[8];
    const int inst = two_d * 4 + nanp * 2 + e5m2;
    if (!__atomic_load_n(&allowed[inst], __ATOMIC_ACQUIRE)) {
        GLN_TRY(gln_cuda_check(cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    BQ3_DYN_SMEM),
                               call, "cudaFuncSetAttribute(gln_block_quant3_kernel, max dynamic shared memory)"));
        __atomic_store_n(&allowed[inst], 1, __ATOMIC_RELEASE);
    }
    unsigned int grid = 0;
    /* one tensor in 1×128 blocks: one block per SM, not the two that fit.  On the H200 that took
     * 16384 x 8192 from 78 to 86 % of a copy (8192-24576 rows, 8064-16384 columns alike); grouped
     * tensors and 128×128 blocks keep two, which measured faster for them (bench/RESULTS.md,
     * twelfth session) */
    GLN_TRY(bq_grid((const void *)k, BQ3_DYN_SMEM, a, &grid, call, !a->rows && !two_d));
    GLN_TRY(gln_cuda_check(gln_cuda_launch(k, dim3(grid), dim3(BQ_THREADS), BQ3_DYN_SMEM, gln_cuda_state(ctx)->stream,
                                           *a, map),
                           call, "gln_block_quant3_kernel"));
    *launched = 1;
    return gln_cuda_check_launch(call, "gln_block_quant3_kernel");
}

/* row_tiles: the bound on 128-row tiles over all members (host-known); in_rows: the packed input's
 * rows (v3's tensor map). */
static gln_status_t bq_launch(gln_context_t *ctx, const gln_quant_config_t *cfg, gln_dtype_t dtype, bq_args_t *a,
                              int64_t row_tiles, int64_t in_rows, const char *call) {
    if (!a->q && !a->qt) return GLN_STATUS_SUCCESS;
    a->tiles = row_tiles * a->ctiles;
    if (a->tiles == 0) return GLN_STATUS_SUCCESS;
    const int required = bq_v3_mode() == BQ_V3_REQUIRED;
    const char *refusal = bq_v3_refusal(dtype, a, in_rows);
    if (!refusal) {
        int launched = 0;
        GLN_TRY(bq_launch_v3(ctx, cfg, a, in_rows, &launched, call));
        if (launched) return GLN_STATUS_SUCCESS;
        refusal = "the driver refused the input's tensor map";
    }
    if (required)
        return gln_fail(GLN_STATUS_NOT_SUPPORTED,
                        "%s: GLN_CUDA_BLOCK_TMA=2 requires the TMA block-scaling kernel (v3), which cannot take "
                        "this call: %s",
                        call, refusal);
    const bq_kernel_t k = bq_pick(dtype, cfg->mode == GLN_SCALING_BLOCK_2D, cfg->amax_nan_propagate,
                                  cfg->fp8_dtype == GLN_DTYPE_FP8_E5M2);
    unsigned int grid = 0;
    GLN_TRY(bq_grid((const void *)k, 0, a, &grid, call));
    k<<<grid, BQ_THREADS, 0, gln_cuda_state(ctx)->stream>>>(*a);
    return gln_cuda_check_launch(call, "gln_block_quant_kernel");
}

extern "C" gln_status_t gln_cuda_grouped_quantize_block(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                        const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                                        const gln_cuda_plan_t *plan, const char *call) {
    bq_args_t a = bq_args_make(cfg, &in->packed, &out->packed);
    a.rows = plan->rows, a.srow = plan->srow, a.scol = plan->scol, a.num = plan->num;
    return bq_launch(ctx, cfg, in->packed.dtype, &a, gln_group_tiles_bound(in->packed.rows, plan->num, BQ_EDGE),
                     in->packed.rows, call);
}

extern "C" gln_status_t gln_cuda_quantize_block(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                const gln_tensor_t *in, gln_tensor_t *out, const char *call) {
    bq_args_t a = bq_args_make(cfg, in, out);
    a.num = 1, a.single_rows = in->rows;
    return bq_launch(ctx, cfg, in->dtype, &a, gln_ceil_div(in->rows, BQ_EDGE), in->rows, call);
}

/* Activation on load (gln_activation_forward_quantize): `in` describes the activation's bf16
 * output [rows, H] but its data is the activation's input, ld elements per row (cuda_backend.h). */
extern "C" gln_status_t gln_cuda_grouped_quantize_block_act(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                            gln_activation_t act, int64_t ld,
                                                            const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                                            const gln_cuda_plan_t *plan, const char *call) {
    bq_args_t a = bq_args_make(cfg, &in->packed, &out->packed);
    a.rows = plan->rows, a.srow = plan->srow, a.scol = plan->scol, a.num = plan->num;
    a.act = gln_act_load_kind((int)act), a.ld = ld;
    return bq_launch(ctx, cfg, in->packed.dtype, &a, gln_group_tiles_bound(in->packed.rows, plan->num, BQ_EDGE),
                     in->packed.rows, call);
}

/* ---- self-check of the fast conversions ------------------------------------------------------ */

/* Every FP32 bit pattern u, paired with -u so the byte order of bq_cvt2 is checked too: the
 * kernels' encode (hardware conversion + NaN fix-up) against numerics.h. */
template <bool E5M2>
__global__ void bq_selfcheck_encode_kernel(unsigned long long *count, unsigned int *first) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < ((uint64_t)1 << 32); i += stride) {
        const uint32_t u = (uint32_t)i;
        const float x = __uint_as_float(u), y = __uint_as_float(u ^ 0x80000000u);
        uint2 w = make_uint2(bq_cvt2<E5M2>(x, y), 0);
        if (gln_f32_isnan(x)) bq_set_byte(&w, 0, bq_nan_byte(x));
        if (gln_f32_isnan(y)) bq_set_byte(&w, 1, bq_nan_byte(y));
        const uint32_t want = E5M2 ? gln_f32_to_e5m2_bits(x) | ((uint32_t)gln_f32_to_e5m2_bits(y) << 8)
                                   : gln_f32_to_e4m3_bits(x) | ((uint32_t)gln_f32_to_e4m3_bits(y) << 8);
        if (w.x != want) {
            atomicAdd(count, 1ull);
            atomicMin(first, u);
        }
    }
}

/* Every fp16 bit pattern: bq_fp16 against gln_fp16_bits_to_f32 (bits equal; NaN: sign only). */
__global__ void bq_selfcheck_fp16_kernel(unsigned long long *count, unsigned int *first) {
    const uint32_t h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h > 0xFFFFu) return;
    const float got = bq_fp16(h), want = gln_fp16_bits_to_f32((uint16_t)h);
    const bool ok = gln_f32_isnan(want) ? gln_f32_isnan(got) && (__float_as_uint(got) >> 31) == (__float_as_uint(want) >> 31)
                                        : __float_as_uint(got) == __float_as_uint(want);
    if (!ok) {
        atomicAdd(count, 1ull);
        atomicMin(first, h);
    }
}

typedef struct bq_check {
    unsigned long long count[3];
    unsigned int first[3];
} bq_check_t;

extern "C" gln_status_t gln_cuda_block_selfcheck(gln_context_t *ctx, unsigned long long counts[3],
                                                 unsigned int first[3], const char *call) {
    cudaStream_t st = gln_cuda_state(ctx)->stream;
    bq_check_t h, *d = NULL;
    memset(&h, 0, sizeof h);
    for (int k = 0; k < 3; k++) h.first[k] = UINT_MAX;
    GLN_TRY(gln_cuda_scratch_alloc(ctx, sizeof h, (void **)&d, call));
    gln_status_t s = gln_cuda_check(cudaMemcpyAsync(d, &h, sizeof h, cudaMemcpyHostToDevice, st), call, "cudaMemcpyAsync");
    if (s == GLN_STATUS_SUCCESS) {
        bq_selfcheck_encode_kernel<false><<<4096, 256, 0, st>>>(&d->count[0], &d->first[0]);
        bq_selfcheck_encode_kernel<true><<<4096, 256, 0, st>>>(&d->count[1], &d->first[1]);
        bq_selfcheck_fp16_kernel<<<256, 256, 0, st>>>(&d->count[2], &d->first[2]);
        s = gln_cuda_check_launch(call, "bq_selfcheck kernels");
    }
    if (s == GLN_STATUS_SUCCESS)
        s = gln_cuda_check(cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, st), call, "cudaMemcpyAsync");
    if (s == GLN_STATUS_SUCCESS) s = gln_cuda_check(cudaStreamSynchronize(st), call, "cudaStreamSynchronize");
    gln_cuda_scratch_free(ctx, d);
    for (int k = 0; k < 3; k++) counts[k] = h.count[k], first[k] = h.first[k];
    return s;
}

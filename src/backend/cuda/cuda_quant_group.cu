/* Fast per-tensor (TENSOR: current and delayed scaling) and MXFP8 quantization of a group of
 * members — a grouped tensor, or a single tensor as a group of one — in a fixed number of launches
 * whatever the member count, reading the member layout from the group plan on the device: no host
 * synchronization, no allocation but stream-ordered scratch, so a call captures in a CUDA graph.
 *
 * Work is cut into tiles of GQ_TR rows x GQ_TC columns of one member (a member's last row tile
 * may be partial; an empty member has none).  A setup kernel turns the plan's row offsets into
 * each member's first row tile (tile_start) and zeroes the amax partials (the same kernel alone
 * compares device-resident out->splits with in->splits: gln_cuda_check_out_splits).  The tile
 * kernels are persistent: the grid is sized from the host-known packed shape and the occupancy,
 * and block b takes a contiguous range of the device-known tiles, so it walks the members once
 * and flushes each member's amax partial with one atomic per block (a block reduction first).
 * Each thread owns a 16-column chunk of two tile rows (rr and rr + 64): 16-byte loads, 16-byte
 * stores of FP8 codes.  Software pipeline (PIPE, the default; GLN_CUDA_QUANT_PIPE=0 for the
 * load-then-use loop): the next tile's loads are issued before the current tile is converted and
 * stored, so a block keeps 2 tiles of bytes in flight, and launch bounds hold the register count
 * to the load-then-use kernels' occupancy.
 *
 *   TENSOR current  amax kernel (reads x once) -> scale kernel (one thread per member) -> cast
 *                   kernel (reads x once, writes the rowwise copy and, through a shared-memory
 *                   tile, the member's transposed copy [cols, m_i]): two passes over x, as the
 *                   scale depends on the member's amax.  Both passes run on one grid and the cast
 *                   pass walks each block's tiles in reverse (GLN_CUDA_QUANT_REVERSE=0: forward),
 *                   so it starts on the tiles the amax pass read last, still in the 50 MB L2.
 *   TENSOR delayed  cast kernel with the given scales, accumulating the amax in the same pass ->
 *                   finalize kernel (amax max-accumulated, scale_inv; with an amax record, the
 *                   layer's history row 0 too: gln_cuda_quantize_members_record).
 *   TENSOR v2       the default for every TENSOR pass without dbias (gq_tensor2_kernel): load U
 *                   tiles, then use them, no spills; GLN_CUDA_QUANT_V2=0 selects the kernels
 *                   above (and the unfused history record) for A/B runs.
 *   TENSOR v3       the cast passes (current's cast, delayed's cast + amax) of bf16 / fp16 on
 *                   the 16-byte path without dbias (gq_tensor3_kernel): v2's loop with fewer
 *                   instructions (no division, no NaN-code check on NaN-free data, the
 *                   transposed tile in 32-bit words); GLN_CUDA_QUANT_V3=0: v2 for A/B runs.
 *   TENSOR v4       the default for every TENSOR pass of bf16 / fp16 without dbias or activation,
 *                   16-byte aligned input, cols % 8 == 0 (gq_tensor4_kernel: current's amax and
 *                   cast passes, delayed's cast + amax): v3's per-element code fed by a
 *                   bulk-copy (TMA) pipeline — tiles land in a ring of shared-memory stages
 *                   through a 2-D tensor map while the block converts earlier ones;
 *                   GLN_CUDA_QUANT_TMA=0: v3 / v2 for A/B runs.
 *   MXFP8           one kernel: a chunk's amax with its neighbour lane's gives the rowwise 1x32
 *                   code; the tile's |x| through shared memory gives the columnwise 32x1 codes;
 *                   both copies and both E8M0 grids (their padding zeroed) from one read; the
 *                   grids compact, or (gln_cuda_quantize_members_swizzled) straight in the
 *                   cuBLAS 128x4-tile order of gln_mxfp8_swizzle_ref.  bf16 / fp16 input with
 *                   rows of a multiple of 8 elements, 16-byte aligned buffers, no dbias and no
 *                   activation on load runs gq_mx3_kernel (v3: 2-D tensor-map loads into a ring
 *                   of shared-memory stages, one thread issuing them tiles ahead; the MXFP8 v3
 *                   section), the rest of the 16-byte path without dbias gq_mx2_kernel (v2:
 *                   fewer instructions, 3 blocks per SM; the MXFP8 v2 section says what changed
 *                   and why), everything else gq_mx_kernel (v1).  GLN_CUDA_QUANT_MX=2: v2 (or
 *                   v1) where v3 would run; =1: v1 for all; =3: v3 required (a pass it cannot
 *                   take fails, saying why); GLN_CUDA_QUANT_MX_BLOCKS=n caps v3's grid (tests:
 *                   many tiles per block).
 *   dbias (gln_cuda_quantize_members_dbias, grouped dy): the pass that reads x for the amax
 *                   (current: the amax pass; delayed: the cast pass; MXFP8: its one pass) also
 *                   writes each tile's column sums in the order of quant/dbias_tiled.h (a tree
 *                   over the tile's rows through warp shuffles, then the 8 warps in order) to
 *                   scratch; a finalize kernel sums a member's tiles in order (+ the old value)
 *                   and rounds once.  cfg NULL: the amax kernel runs for the sums alone.
 *
 * Bit-exact with the CPU reference (src/quant/quant_tensor.c, quant_mxfp8.c):
 *   - amax: max |x| compared on the source bits (magnitude bits order like the values; widening
 *     to FP32 is exact and monotonic); NaN elements ignored, or under cfg->amax_nan_propagate the
 *     per-tensor amax is |x| of the member's lowest-index NaN (the CPU's first NaN) and a block's
 *     code is 0xFF;
 *   - scales through gln_scale_from_amax_impl / gln_e8m0_from_amax_impl / gln_e8m0_inverse_bits,
 *     scale_inv = 1/scale (IEEE division);
 *   - codes: x·scale with one FP32 multiply (__fmul_rn), then the hardware's cvt.rn.satfinite,
 *     which rounds to nearest even and saturates exactly like gln_f32_to_fp8_generic for every
 *     non-NaN FP32 value.  A product that is NaN (NaN element, NaN scale, Inf·0) comes out as an
 *     FP8 NaN code; such a chunk is redone with numerics.h's software path (gln_dev_mul +
 *     gln_dev_to_fp8), which keeps the NaN's sign as the reference does.  (GLN_CUDA_FP8_CVT=0
 *     encodes everything in software.)
 * Shapes whose rows are not 16-element aligned (cols % 16 != 0, unaligned buffers) run the same
 * kernels with scalar loads and stores (VEC = false); transposed stores check their alignment per
 * chunk, since a member's column stride m_i is known only on the device. */
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
#include "numerics/numerics.h"
#include "tensor/scale_layout.h"
#include "tensor/tensor.h"
}

#include "backend/cuda/cuda_act.cuh"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_plan.cuh"
#include "backend/cuda/cuda_tma.cuh"

#ifndef GLN_CUDA_FP8_CVT
#define GLN_CUDA_FP8_CVT 1
#endif

#define GQ_TR 128     /* rows of a tile (four MXFP8 32-row blocks) */
#define GQ_TC 64      /* columns of a tile */
#define GQ_CHUNK 16   /* elements of one thread's chunk (one row) */
#define GQ_PER_ROW (GQ_TC / GQ_CHUNK)
#define GQ_THREADS 256
#define GQ_PASS (GQ_THREADS / GQ_PER_ROW) /* rows covered by one chunk per thread: 64 */
#define GQ_RPT (GQ_TR / GQ_PASS)          /* chunks per thread per tile (rows rr, rr + 64): 2 */
#define GQ_FULL 0xFFFFFFFFu
static_assert(GQ_TR % GQ_PASS == 0 && GQ_TR % 32 == 0, "a tile is whole passes and whole MXFP8 blocks");
static_assert((GQ_TR / 32) * GQ_TC == GQ_THREADS, "MXFP8 columnwise: one (32-row block, column) per thread");
static_assert((GQ_TR / GQ_CHUNK) * GQ_TC == GQ_RPT * GQ_THREADS, "transposed phase: GQ_RPT chunks per thread");

enum { GQ_F32 = 0, GQ_BF16 = 1, GQ_F16 = 2 };
enum { GQ_AMAX = 0, GQ_CAST = 1, GQ_CAST_AMAX = 2, GQ_MODE_MASK = 3, GQ_DBIAS = 4 /* | AMAX or CAST_AMAX */ };

/* One member's amax partial: atomics only raise both fields, so zero means "nothing yet". */
typedef struct gq_amax {
    unsigned long long nan_not; /* ~(lowest packed index of a NaN element); 0 = no NaN */
    unsigned int max_bits;      /* FP32 bits of the largest non-NaN |x| */
    unsigned int pad_;
} gq_amax_t;

typedef struct gq_args {
    const void *x;
    uint8_t *q, *qc;                            /* rowwise / columnwise data (NULL: not made) */
    uint8_t *s, *cs;                            /* MXFP8 rowwise / columnwise E8M0 grids */
    const float *scale;                         /* TENSOR cast: per-member encode scales */
    gq_amax_t *work;                            /* TENSOR: per-member amax partials */
    const int64_t *rows, *tstart, *srow, *scol; /* plan + first row tiles; rows NULL: one member */
    int64_t single_rows, cols, n_ct;            /* n_ct: column tiles */
    int64_t gc_r, gc_c, nb;                     /* MXFP8 grid widths; 32-column blocks of a row */
    int32_t num;
    int e5m2, nanp, floor_rule, emax;
    int reverse;                                /* walk each block's tiles last to first */
    int strided;                                /* tile order across blocks (gq_walk) */
    int swz;                                    /* MXFP8: grids in the swizzled GEMM layout */
    float fp8_max;
    float *dpart; /* dbias: per (row tile, column) partial sums [row tiles][cols] (NULL: none) */
    int act;      /* activation on load (gq_xload): GLN_ACT_LOAD_NONE, or x is the bf16 input of an
                     activation whose [rows, cols] bf16 output the kernel quantizes */
    int64_t ld;   /* with act: x's row stride in elements (SwiGLU 2·cols, GELU cols) */
} gq_args_t;

typedef void (*gq_kernel_t)(gq_args_t);

/* ---- elements --------------------------------------------------------------------------- */

/* W: 32-bit words holding one chunk; NAN_ABOVE: |x| bits above it are NaN. */
template <int DT> struct gq_traits;
template <> struct gq_traits<GQ_F32> { enum { W = 16, ES = 4, NAN_ABOVE = 0x7F800000 }; };
template <> struct gq_traits<GQ_BF16> { enum { W = 8, ES = 2, NAN_ABOVE = 0x7F80 }; };
template <> struct gq_traits<GQ_F16> { enum { W = 8, ES = 2, NAN_ABOVE = 0x7C00 }; };

/* Source bits of element e of a chunk. */
template <int DT> __device__ __forceinline__ uint32_t gq_elem(const uint32_t *w, int e) {
    if (DT == GQ_F32) return w[e];
    return (w[e >> 1] >> ((e & 1) * 16)) & 0xFFFFu;
}

/* The element's value, exact for every non-NaN input (the hardware widening). */
template <int DT> __device__ __forceinline__ float gq_value(uint32_t b) {
    if (DT == GQ_F32) return __uint_as_float(b);
    if (DT == GQ_BF16) return __uint_as_float(b << 16);
    return __half2float(__ushort_as_half((unsigned short)b));
}

/* The reference's widening (NaN payloads kept as numerics.h keeps them): for the NaN paths. */
template <int DT> __device__ __forceinline__ float gq_value_ref(uint32_t b) {
    if (DT == GQ_F32) return __uint_as_float(b);
    if (DT == GQ_BF16) return gln_bf16_bits_to_f32((uint16_t)b);
    return gln_fp16_bits_to_f32((uint16_t)b);
}

/* Chunk of n (<= 16) elements from element i0 of x; missing elements read as +0 (no effect on
 * an amax, never stored).  VEC: n is 16 or 0 and the chunk is 16-byte aligned. */
template <int DT, bool VEC>
__device__ __forceinline__ void gq_load(const void *x, size_t i0, int n, uint32_t (&w)[gq_traits<DT>::W]) {
    constexpr int W = gq_traits<DT>::W;
    if (VEC && n == GQ_CHUNK) {
        const uint4 *p = (const uint4 *)((const char *)x + i0 * gq_traits<DT>::ES);
#pragma unroll
        for (int v = 0; v < W / 4; v++) {
            const uint4 u = __ldg(p + v);
            w[4 * v] = u.x, w[4 * v + 1] = u.y, w[4 * v + 2] = u.z, w[4 * v + 3] = u.w;
        }
        return;
    }
#pragma unroll
    for (int v = 0; v < W; v++) w[v] = 0;
    if (!VEC) {
#pragma unroll
        for (int e = 0; e < GQ_CHUNK; e++) {
            if (e >= n) break;
            if (DT == GQ_F32) w[e] = __ldg((const uint32_t *)x + i0 + e);
            else w[e >> 1] |= (uint32_t)__ldg((const unsigned short *)x + i0 + e) << ((e & 1) * 16);
        }
    }
}

/* The 16 activation outputs of a bf16 chunk (8 words) at packed row `row`, column c: n of them
 * computed (n is 16, 8 or 0; see gq_xload), the rest +0 like gq_load's missing elements. */
__device__ __forceinline__ void gq_act_load(const gq_args_t &a, int64_t row, int64_t c, int n, uint32_t *w) {
#pragma unroll
    for (int p = 0; p < 2; p++) {
        uint32_t o[4] = {0u, 0u, 0u, 0u};
        if (8 * p < n) gln_act_load_bf16x8(a.act, a.x, a.ld, a.cols, row, c + 8 * p, o);
#pragma unroll
        for (int v = 0; v < 4; v++) w[4 * p + v] = o[v];
    }
}

/* gq_load of the chunk at packed row `row`, column c (element i0 = row·cols + c), or with a.act
 * the activation's bf16 outputs there, computed from its input (cuda_act.cuh): the words a bf16
 * buffer written by the activation kernel would hold, so the rest of the kernel cannot tell the
 * two apart.  a.act is a kernel argument (warp-uniform); the host sets it only for bf16 with
 * cols % 8 == 0 and a 16-byte aligned input, so n is 16, 8 or 0 and the loads are 16 bytes. */
template <int DT, bool VEC>
__device__ __forceinline__ void gq_xload(const gq_args_t &a, int64_t row, int64_t c, size_t i0, int n,
                                         uint32_t (&w)[gq_traits<DT>::W]) {
    if (DT == GQ_BF16 && a.act != GLN_ACT_LOAD_NONE) gq_act_load(a, row, c, n, w);
    else gq_load<DT, VEC>(a.x, i0, n, w);
}

/* Largest |x| bits of a chunk, NaN included (a NaN's bits exceed every other's). */
template <int DT> __device__ __forceinline__ uint32_t gq_absmax(const uint32_t (&w)[gq_traits<DT>::W]) {
    uint32_t m = 0;
    if (DT == GQ_F32) {
#pragma unroll
        for (int v = 0; v < gq_traits<DT>::W; v++) m = max(m, w[v] & 0x7FFFFFFFu);
    } else {
#pragma unroll
        for (int v = 0; v < gq_traits<DT>::W; v++) m = __vmaxu2(m, w[v] & 0x7FFF7FFFu);
        m = max(m & 0xFFFFu, m >> 16);
    }
    return m;
}

/* A chunk's words by value, for the out-of-line rare paths (the hot path's arrays stay in
 * registers: nothing takes their address). */
template <int DT> struct gq_words {
    uint32_t w[gq_traits<DT>::W];
};
template <int DT> __device__ __forceinline__ gq_words<DT> gq_pack(const uint32_t (&w)[gq_traits<DT>::W]) {
    gq_words<DT> c;
#pragma unroll
    for (int v = 0; v < gq_traits<DT>::W; v++) c.w[v] = w[v];
    return c;
}

/* Largest non-NaN |x| bits of a chunk (low 32 bits) and its first NaN element (high 32 bits;
 * 0xFFFFFFFF: none): the rare path of a chunk holding a NaN. */
template <int DT> __device__ __noinline__ unsigned long long gq_absmax_fin(gq_words<DT> c) {
    uint32_t m = 0, first = 0xFFFFFFFFu;
    for (int e = 0; e < GQ_CHUNK; e++) {
        const uint32_t b = gq_elem<DT>(c.w, e) & (DT == GQ_F32 ? 0x7FFFFFFFu : 0x7FFFu);
        if (b > (uint32_t)gq_traits<DT>::NAN_ABOVE) {
            if (first == 0xFFFFFFFFu) first = (uint32_t)e;
        } else {
            m = max(m, b);
        }
    }
    return (unsigned long long)first << 32 | m;
}

/* ---- FP8 codes ------------------------------------------------------------------------- */

/* Codes of lo (low byte) and hi: RNE, saturating to the finite max (NaN: some NaN code). */
template <int E5M2> __device__ __forceinline__ uint32_t gq_cvt2(float lo, float hi) {
    unsigned short r;
    if (E5M2) asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    else asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
}

typedef struct gq_mults {
    float m[GQ_CHUNK];
} gq_mults_t;

/* The reference path: element e's code = encode(gln_dev_mul(x, mult[e])) through numerics.h. */
template <int DT> __device__ __noinline__ uint4 gq_encode_ref(gq_words<DT> c, gq_mults_t mult, int e5m2) {
    const int fp8 = e5m2 ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
    uint32_t b[4] = {0, 0, 0, 0};
    for (int e = 0; e < GQ_CHUNK; e++) {
        const uint32_t code = gln_dev_to_fp8(gln_dev_mul(gq_value_ref<DT>(gq_elem<DT>(c.w, e)), mult.m[e]), fp8);
        b[e >> 2] |= code << ((e & 3) * 8);
    }
    return make_uint4(b[0], b[1], b[2], b[3]);
}

template <int DT>
__device__ __forceinline__ void gq_encode_slow(const uint32_t (&w)[gq_traits<DT>::W], const float (&mult)[GQ_CHUNK],
                                               int e5m2, uint32_t (&b)[4]) {
    gq_mults_t m;
#pragma unroll
    for (int e = 0; e < GQ_CHUNK; e++) m.m[e] = mult[e];
    const uint4 r = gq_encode_ref<DT>(gq_pack<DT>(w), m, e5m2);
    b[0] = r.x, b[1] = r.y, b[2] = r.z, b[3] = r.w;
}

/* 16 codes of x[e]·mult[e], four per word (element e in byte e % 4 of word e / 4). */
template <int DT, int E5M2>
__device__ __forceinline__ void gq_encode_fmt(const uint32_t (&w)[gq_traits<DT>::W], const float (&mult)[GQ_CHUNK],
                                              uint32_t (&b)[4]) {
#if GLN_CUDA_FP8_CVT
    /* a byte of (code | M) is 0xFF exactly when the code is an FP8 NaN (E4M3 S.1111.111,
     * E5M2 S.11111.xx); satfinite never makes one from a non-NaN product */
    const uint32_t M = E5M2 ? 0x83838383u : 0x80808080u;
    uint32_t nan = 0;
#pragma unroll
    for (int v = 0; v < 4; v++) {
        float p[4];
#pragma unroll
        for (int j = 0; j < 4; j++) p[j] = __fmul_rn(gq_value<DT>(gq_elem<DT>(w, 4 * v + j)), mult[4 * v + j]);
        const uint32_t word = gq_cvt2<E5M2>(p[0], p[1]) | (gq_cvt2<E5M2>(p[2], p[3]) << 16);
        const uint32_t y = ~(word | M); /* zero bytes = NaN codes */
        nan |= (y - 0x01010101u) & ~y & 0x80808080u;
        b[v] = word;
    }
    if (nan) gq_encode_slow<DT>(w, mult, E5M2, b);
#else
    gq_encode_slow<DT>(w, mult, E5M2, b);
#endif
}

template <int DT>
__device__ __forceinline__ void gq_encode(const uint32_t (&w)[gq_traits<DT>::W], const float (&mult)[GQ_CHUNK],
                                          int e5m2, uint32_t (&b)[4]) {
    if (e5m2) gq_encode_fmt<DT, 1>(w, mult, b);
    else gq_encode_fmt<DT, 0>(w, mult, b);
}

/* Store n (<= 16) codes at p, 16 bytes at once where p is aligned, else in pieces. */
__device__ __forceinline__ void gq_store16(uint8_t *p, const uint32_t (&b)[4], int n) {
    const uintptr_t a = (uintptr_t)p;
    if (n == GQ_CHUNK && (a & 15) == 0) {
        *(uint4 *)p = make_uint4(b[0], b[1], b[2], b[3]);
        return;
    }
    if (n == GQ_CHUNK && (a & 3) == 0) {
#pragma unroll
        for (int v = 0; v < 4; v++) ((uint32_t *)p)[v] = b[v];
        return;
    }
#pragma unroll
    for (int e = 0; e < GQ_CHUNK; e++)
        if (e < n) p[e] = (uint8_t)(b[e >> 2] >> ((e & 3) * 8));
}

/* ---- members and tiles ------------------------------------------------------------------- */

/* The member owning the row tiles [t0, t1); its first packed row, rows and scale offsets. */
typedef struct gq_cursor {
    int32_t i;
    int64_t t0, t1, row0, m, srow, scol;
} gq_cursor_t;

__device__ __forceinline__ void gq_member(const gq_args_t &a, int32_t i, gq_cursor_t &c) {
    c.i = i;
    if (!a.rows) {
        c.t0 = 0, c.t1 = (a.single_rows + GQ_TR - 1) / GQ_TR;
        c.row0 = 0, c.m = a.single_rows, c.srow = 0, c.scol = 0;
        return;
    }
    c.t0 = __ldg(a.tstart + i), c.t1 = __ldg(a.tstart + i + 1);
    c.row0 = __ldg(a.rows + i), c.m = __ldg(a.rows + i + 1) - c.row0;
    c.srow = a.srow ? __ldg(a.srow + i) : 0;
    c.scol = a.scol ? __ldg(a.scol + i) : 0;
}

/* The member owning row tile rt (< the total): the largest i with tstart[i] <= rt, which is
 * never empty (an empty member's successor has the same start). */
__device__ __forceinline__ int32_t gq_find(const gq_args_t &a, int64_t rt) {
    if (!a.rows) return 0;
    int32_t lo = 0, hi = a.num - 1;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo + 1) / 2;
        if (__ldg(a.tstart + mid) <= rt) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Point the cursor at the member owning row tile rt (block-uniform; a search only when rt is
 * outside the current member, so walking forward or backward costs one search per member). */
__device__ __forceinline__ void gq_locate(const gq_args_t &a, int64_t rt, gq_cursor_t &c) {
    if (rt < c.t0 || rt >= c.t1) gq_member(a, gq_find(a, rt), c);
}

/* Members base .. base + 31, one a lane: true if one of them owns row tile rt, whose lane then
 * writes its cursor to *c (shared memory).  Each lane loads its member's tile starts, rows and
 * scale offsets at once, so the whole window costs one round of loads. */
__device__ __forceinline__ bool gq_window_warp(const gq_args_t &a, int32_t base, int64_t rt, gq_cursor_t *c) {
    const int32_t i = base + (int32_t)(threadIdx.x & 31);
    bool mine = false; /* one lane at most: empty members own nothing */
    if (i >= 0 && i < a.num) {
        const int64_t t0 = __ldg(a.tstart + i), t1 = __ldg(a.tstart + i + 1);
        const int64_t row0 = __ldg(a.rows + i), row1 = __ldg(a.rows + i + 1);
        const int64_t srow = a.srow ? __ldg(a.srow + i) : 0, scol = a.scol ? __ldg(a.scol + i) : 0;
        mine = t0 <= rt && rt < t1;
        if (mine) c->i = i, c->t0 = t0, c->t1 = t1, c->row0 = row0, c->m = row1 - row0, c->srow = srow, c->scol = scol;
    }
    return __any_sync(GQ_FULL, mine);
}

/* gq_locate by a whole warp, on a cursor in shared memory (every lane calls it with the same rt;
 * on return every lane sees the cursor of rt's member), for a walk that meets a new member at
 * nearly every tile (the strided order over many small members).  gq_locate's binary search is
 * ~log2(num) dependent loads, then the member's; here the window of 32 members from the current
 * one on (walking forward; ending at it walking backward) is tried first, one round of loads,
 * and only a longer jump first narrows the range 32-fold per round (keeping tstart[lo] <= rt:
 * the owner is the last member whose start is <= rt, and it is never empty). */
__device__ __forceinline__ void gq_locate_warp(const gq_args_t &a, int64_t rt, gq_cursor_t *c) {
    const int64_t t0 = c->t0, t1 = c->t1;
    const int32_t ci = c->i;
    if (rt >= t0 && rt < t1) return; /* warp-uniform */
    __syncwarp();                    /* every lane has read the cursor */
    if (!a.rows) {
        if ((threadIdx.x & 31) == 0) gq_member(a, 0, *c);
    } else if (!(t1 >= t0 && gq_window_warp(a, rt >= t1 ? ci : ci - 31, rt, c))) {
        int32_t lo = 0, n = a.num; /* the owner is in [lo, lo + n) */
        const int32_t lane = (int32_t)(threadIdx.x & 31);
        while (n > 32) {
            const int32_t step = (n + 31) / 32;
            const bool le = lane * step < n && __ldg(a.tstart + lo + lane * step) <= rt;
            const int last = 31 - __clz((int)__ballot_sync(GQ_FULL, le)); /* lane 0's start is <= rt */
            lo += last * step;
            n = min(step, n - last * step);
        }
        gq_window_warp(a, lo, rt, c); /* the owner is one of these */
    }
    __syncwarp(); /* the new cursor is seen by every lane */
}

/* One thread's part of a tile: GQ_RPT chunks (rows rr and rr + GQ_PASS) of column chunk k,
 * loaded into registers.  Tiles are loaded one ahead of their use (the kernels' software
 * pipeline), so a block keeps the next tile's bytes in flight while it converts and stores the
 * current one: twice the bytes in flight per SM of a load-then-use loop. */
template <int DT> struct gq_tile {
    int64_t rt;     /* row tile over all members (the dbias partial's row) */
    int64_t r0, c0; /* member-local first row, first column */
    int n[GQ_RPT];  /* valid elements of each chunk (0: row past the member) */
    size_t i0[GQ_RPT];
    uint32_t w[GQ_RPT][gq_traits<DT>::W];
};

template <int DT, bool VEC>
__device__ __forceinline__ void gq_tile_load(const gq_args_t &a, const gq_cursor_t &cur, int64_t id, gq_tile<DT> &T) {
    const int t = threadIdx.x, rr = t / GQ_PER_ROW, k = t % GQ_PER_ROW;
    const int64_t rt = id / a.n_ct, ct = id % a.n_ct;
    T.rt = rt;
    T.r0 = (rt - cur.t0) * GQ_TR, T.c0 = ct * GQ_TC;
    const int64_t c = T.c0 + k * GQ_CHUNK;
    const int nc = c < a.cols ? (int)min((int64_t)GQ_CHUNK, a.cols - c) : 0;
#pragma unroll
    for (int h = 0; h < GQ_RPT; h++) {
        const int64_t r = T.r0 + rr + h * GQ_PASS;
        T.n[h] = r < cur.m ? nc : 0;
        T.i0[h] = (size_t)(cur.row0 + r) * (size_t)a.cols + (size_t)c;
        gq_xload<DT, VEC>(a, cur.row0 + r, c, T.i0[h], T.n[h], T.w[h]);
    }
}

/* This block's tiles [*lo, *hi): an even share of all the tiles (row tiles x column tiles). */
__device__ __forceinline__ void gq_range(const gq_args_t &a, int64_t *lo, int64_t *hi) {
    const int64_t row_tiles = a.rows ? __ldg(a.tstart + a.num) : (a.single_rows + GQ_TR - 1) / GQ_TR;
    const int64_t T = row_tiles * a.n_ct, G = gridDim.x, b = blockIdx.x, q = T / G, r = T % G;
    *lo = q * b + r * b / G; /* = floor(b·T / G) without overflowing */
    *hi = q * (b + 1) + r * (b + 1) / G;
}

/* The tiles one block walks: first, first + step, ... (count of them; ids over all members, row
 * tile-major).  Contiguous (per-tensor kernels): the block's range of gq_range, each block streaming
 * its own band of the tensor.  Strided (MXFP8 and delayed scaling; gq_strided): block b takes tiles b,
 * b + G, b + 2G, ... so the blocks resident together cover neighbouring tiles — whole rows of
 * the input read and whole rows of the transposed copy written at one time, the access pattern
 * of a plain copy — instead of 128-byte pieces of ~400 rows scattered over the tensor (which is
 * what the DRAM sees from the contiguous order).  Tile order changes no byte: amax partials are
 * max-reduced and every tile's output is its own. */
typedef struct gq_walk {
    int64_t first, step, count;
} gq_walk_t;

__device__ __forceinline__ gq_walk_t gq_walk(const gq_args_t &a) {
    gq_walk_t w;
    if (a.strided) {
        const int64_t row_tiles = a.rows ? __ldg(a.tstart + a.num) : (a.single_rows + GQ_TR - 1) / GQ_TR;
        const int64_t T = row_tiles * a.n_ct, G = gridDim.x, b = blockIdx.x;
        w.count = b < T ? (T - 1 - b) / G + 1 : 0;
        w.first = a.reverse ? T - 1 - b : b;
        w.step = a.reverse ? -G : G;
    } else {
        int64_t lo, hi;
        gq_range(a, &lo, &hi);
        w.count = hi - lo;
        w.first = a.reverse ? hi - 1 : lo;
        w.step = a.reverse ? -1 : 1;
    }
    return w;
}

/* ---- setup: tile starts, amax partials, the out->splits check ---------------------------- */

/* Exclusive prefix sum over the block (GQ_THREADS threads); *total = the sum of all. */
__device__ int64_t gq_block_scan(int64_t v, int64_t *total) {
    __shared__ int64_t warp_sum[GQ_THREADS / 32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    int64_t inc = v;
    for (int off = 1; off < 32; off <<= 1) {
        const int64_t n = __shfl_up_sync(GQ_FULL, inc, off);
        if (lane >= off) inc += n;
    }
    if (lane == 31) warp_sum[wid] = inc;
    __syncthreads();
    int64_t base = 0, all = 0;
    for (int w = 0; w < GQ_THREADS / 32; w++) {
        if (w < wid) base += warp_sum[w];
        all += warp_sum[w];
    }
    *total = all;
    return base + inc - v;
}

/* A deferred plan first (plan.splits: gln_cuda_plan_defer's job, its rows are `rows`); then
 * tstart[i] = row tiles of the members before i (tstart[num] = all); work[0..nwork) = 0 and
 * *done = 0 (gq4_finish's counter, where given); the
 * first member whose device-resident out split differs from in's goes to the async error word
 * (the kernels follow in's splits). */
static_assert(GQ_THREADS == GLN_PLAN_THREADS, "the setup block computes a deferred plan");
__global__ void __launch_bounds__(GQ_THREADS)
    gq_setup_kernel(gln_cuda_plan_job_t plan, const int64_t *rows, int32_t num, int64_t *tstart, gq_amax_t *work,
                    int32_t nwork, unsigned int *done, const int64_t *in_splits, const int64_t *out_splits,
                    gln_cuda_async_error_t *err) {
    __shared__ int32_t first_bad;
    gln_pdl_wait(); /* launched by gln_cuda_launch: the previous kernels' writes first */
    gln_pdl_launch_dependents();
    if (plan.splits) {
        gln_plan_compute(plan);
        __syncthreads(); /* its rows, written by the block, before the tile starts read them */
    }
    const int t = threadIdx.x;
    for (int32_t i = t; i < nwork; i += GQ_THREADS) work[i].nan_not = 0, work[i].max_bits = 0, work[i].pad_ = 0;
    if (done && t == 0) *done = 0;
    if (out_splits) {
        if (t == 0) first_bad = INT_MAX;
        __syncthreads();
        for (int32_t i = t; i < num; i += GQ_THREADS)
            if (out_splits[i] != in_splits[i]) atomicMin(&first_bad, i);
        __syncthreads();
        if (t == 0 && first_bad != INT_MAX && err) {
            if (atomicCAS(&err->kind, GLN_CUDA_ASYNC_NONE, GLN_CUDA_ASYNC_SPLITS_MISMATCH) == GLN_CUDA_ASYNC_NONE)
                err->member = first_bad, err->value = (long long)out_splits[first_bad];
            __threadfence_system(); /* the error word is mapped host memory */
        }
    }
    if (!tstart) return;
    const int32_t per = (num + GQ_THREADS - 1) / GQ_THREADS, i0 = t * per;
    const int32_t i1 = i0 + per < num ? i0 + per : num;
    int64_t mine = 0, total = 0;
    for (int32_t i = i0; i < i1; i++) mine += (rows[i + 1] - rows[i] + GQ_TR - 1) / GQ_TR;
    int64_t run = gq_block_scan(mine, &total);
    for (int32_t i = i0; i < i1; i++) {
        tstart[i] = run;
        run += (rows[i + 1] - rows[i] + GQ_TR - 1) / GQ_TR;
    }
    if (t == 0) tstart[num] = total;
}

/* ---- dbias: column sums of a tile in the order of quant/dbias_tiled.h ------------------------ */

/* One 32-bit float sum tree step: a + b, the lower tile row's operand first (gln_dev_add picks the
 * first NaN operand, so the order is part of the result when NaN comes in). */
template <bool SAFE> __device__ __forceinline__ float gq_dsum_add(float lower, float upper) {
    return SAFE ? gln_dev_add(lower, upper) : __fadd_rn(lower, upper);
}

/* s[e] = v(rr) + v(rr + 64), then the pairwise tree over the 8 rr of the warp (lane bits 2..4
 * are rr bits 0..2: thread t owns rows t / GQ_PER_ROW and that + GQ_PASS). */
template <int DT, bool SAFE>
__device__ __forceinline__ void gq_dsum_warp(const uint32_t (&w)[GQ_RPT][gq_traits<DT>::W], float (&s)[GQ_CHUNK]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int e = 0; e < GQ_CHUNK; e++) {
        const uint32_t b0 = gq_elem<DT>(w[0], e), b1 = gq_elem<DT>(w[1], e);
        s[e] = SAFE ? gln_dev_add(gq_value_ref<DT>(b0), gq_value_ref<DT>(b1)) : __fadd_rn(gq_value<DT>(b0), gq_value<DT>(b1));
    }
#pragma unroll
    for (int bit = GQ_PER_ROW; bit < 32; bit <<= 1) {
        const bool upper = (lane & bit) != 0;
#pragma unroll
        for (int e = 0; e < GQ_CHUNK; e++) {
            const float o = __shfl_xor_sync(GQ_FULL, s[e], bit);
            s[e] = upper ? gq_dsum_add<SAFE>(o, s[e]) : gq_dsum_add<SAFE>(s[e], o);
        }
    }
}

/* The tile's partial column sums p_t into a.dpart[rt][column] (every thread calls this: it
 * synchronizes).  Without NaN in the tile the adds run as plain FP32 adds, which equal
 * gln_dev_add's whenever no operand is NaN (a NaN made from Inf - Inf is the canonical one in
 * both); a tile holding a NaN takes gln_dev_add throughout. */
static_assert(GQ_RPT == 2 && GQ_PER_ROW == 4 && GQ_THREADS == 256 && GQ_TR == 128,
              "the tiled dbias order of quant/dbias_tiled.h is this thread layout");
template <int DT>
__device__ __forceinline__ void gq_dbias_tile(const gq_args_t &a, const gq_tile<DT> &T, float (*dsum)[GQ_TC]) {
    const int t = threadIdx.x, lane = t & 31, wid = t >> 5, k = t % GQ_PER_ROW;
    uint32_t big = 0;
#pragma unroll
    for (int h = 0; h < GQ_RPT; h++) big = max(big, gq_absmax<DT>(T.w[h]));
    float s[GQ_CHUNK];
    if (__syncthreads_or(big > (uint32_t)gq_traits<DT>::NAN_ABOVE)) gq_dsum_warp<DT, true>(T.w, s);
    else gq_dsum_warp<DT, false>(T.w, s);
    if ((lane & (32 - GQ_PER_ROW)) == 0) { /* rr % 8 == 0: the warp's d_w for this chunk */
#pragma unroll
        for (int e = 0; e < GQ_CHUNK; e++) dsum[wid][k * GQ_CHUNK + e] = s[e];
    }
    __syncthreads();
    if (t < GQ_TC && T.c0 + t < a.cols) {
        float p = dsum[0][t];
#pragma unroll
        for (int v = 1; v < GQ_THREADS / 32; v++) p = gln_dev_add(p, dsum[v][t]);
        a.dpart[(size_t)T.rt * (size_t)a.cols + (size_t)(T.c0 + t)] = p;
    }
    /* dsum is rewritten only after the next tile's __syncthreads_or, past these reads */
}

#define GQ_DBIAS_CHUNK 128 /* members per finalize launch (their output pointers by value) */

typedef struct gq_dbias_out {
    void *data[GQ_DBIAS_CHUNK];
    int dtype[GQ_DBIAS_CHUNK];
} gq_dbias_out_t;

/* Member first + blockIdx.y, column j: s = Σ p_t over its row tiles in order (+ old), rounded once. */
__global__ void gq_dbias_finalize_kernel(const float *part, const int64_t *tstart, int64_t cols, int32_t first,
                                         gq_dbias_out_t out, int accumulate) {
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int32_t i = (int32_t)blockIdx.y;
    if (j >= cols) return;
    const int64_t t0 = tstart[first + i], t1 = tstart[first + i + 1];
    if (t0 == t1 && accumulate) return; /* empty member: nothing to add */
    float acc = 0.0f;
    for (int64_t t = t0; t < t1; t++) acc = gln_dev_add(acc, part[(size_t)t * (size_t)cols + (size_t)j]);
    if (accumulate) acc = gln_dev_add(acc, gln_dev_load(out.data[i], out.dtype[i], (size_t)j));
    gln_dev_store(out.data[i], out.dtype[i], (size_t)j, acc);
}

/* ---- TENSOR ------------------------------------------------------------------------------- */

/* Blocks per SM the compiler must allow (registers): a pipelined kernel holds two tiles, so it
 * is held to the occupancy of the load-then-use one, which keeps as many tiles in flight per SM
 * and twice as many per block (FP32 chunks need twice the registers: two blocks).  Load-
 * then-use (PIPE false, GLN_CUDA_QUANT_PIPE=0) keeps the compiler's choice.  The dbias variants
 * hold 16 more sums per thread: one block fewer too. */
__host__ __device__ constexpr int gq_min_blocks(int dt, int modes, bool pipe) {
    return !pipe ? 1 : dt == GQ_F32 ? 2 : ((modes & GQ_MODE_MASK) == GQ_AMAX ? 4 : 3) - ((modes & GQ_DBIAS) ? 1 : 0);
}

/* Fold a chunk into this thread's amax partial (largest non-NaN |x| as FP32 bits, lowest NaN). */
template <int DT>
__device__ __forceinline__ void gq_amax_chunk(const uint32_t (&w)[gq_traits<DT>::W], size_t i0, uint32_t &best,
                                              unsigned long long &nan_not) {
    uint32_t m = gq_absmax<DT>(w);
    if (m > (uint32_t)gq_traits<DT>::NAN_ABOVE) {
        const unsigned long long f = gq_absmax_fin<DT>(gq_pack<DT>(w));
        m = (uint32_t)f;
        nan_not = max(nan_not, ~(unsigned long long)(i0 + (size_t)(f >> 32)));
    }
    best = max(best, __float_as_uint(gq_value<DT>(m)));
}

/* The block's partials into the member's: a warp reduction, then one warp over the warps' values
 * and ONE atomic per field per block (not per warp: the last tiles of every block meet at the
 * same member address).  Every thread of the block calls this (block-uniform: it synchronizes). */
__device__ __forceinline__ void gq_flush(gq_amax_t *w, uint32_t best, unsigned long long nan_not) {
    __shared__ uint32_t warp_best[GQ_THREADS / 32];
    __shared__ unsigned long long warp_nan[GQ_THREADS / 32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    for (int off = 16; off > 0; off >>= 1) {
        best = max(best, __shfl_xor_sync(GQ_FULL, best, off));
        nan_not = max(nan_not, __shfl_xor_sync(GQ_FULL, nan_not, off));
    }
    if (lane == 0) warp_best[wid] = best, warp_nan[wid] = nan_not;
    __syncthreads();
    if (wid == 0) {
        best = lane < GQ_THREADS / 32 ? warp_best[lane] : 0u;
        nan_not = lane < GQ_THREADS / 32 ? warp_nan[lane] : 0ull;
        for (int off = 16; off > 0; off >>= 1) {
            best = max(best, __shfl_xor_sync(GQ_FULL, best, off));
            nan_not = max(nan_not, __shfl_xor_sync(GQ_FULL, nan_not, off));
        }
        if (lane == 0) {
            if (best) atomicMax(&w->max_bits, best);
            if (nan_not) atomicMax(&w->nan_not, nan_not);
        }
    }
    __syncthreads(); /* warp_best / warp_nan are rewritten by the next flush */
}

/* Column tc's 16 codes of tile rows j*16 .. j*16+15, packed like a chunk. */
__device__ __forceinline__ void gq_tile_column(const uint8_t (*tile)[GQ_TC], int j, int tc, uint32_t (&o)[4]) {
#pragma unroll
    for (int v = 0; v < 4; v++) {
        const int r = j * GQ_CHUNK + 4 * v;
        o[v] = (uint32_t)tile[r][tc] | (uint32_t)tile[r + 1][tc] << 8 | (uint32_t)tile[r + 2][tc] << 16 |
               (uint32_t)tile[r + 3][tc] << 24;
    }
}

/* The codes of one tile's chunks (x · s): the rowwise copy, and the member's transposed copy
 * through the shared tile.  Every thread of the block calls it (it synchronizes). */
template <int DT>
__device__ __forceinline__ void gq_tensor_codes(const gq_args_t &a, uint8_t (*tile)[GQ_TC], const gq_cursor_t &cur,
                                                float s, int64_t r0, int64_t c0,
                                                const uint32_t (&w)[GQ_RPT][gq_traits<DT>::W],
                                                const int (&n)[GQ_RPT], const size_t (&i0)[GQ_RPT]) {
    const int t = threadIdx.x, rr = t / GQ_PER_ROW, k = t % GQ_PER_ROW;
    const int tc = t % GQ_TC, tj = t / GQ_TC; /* transposed phase: tile column, first 16-row chunk */
    float mult[GQ_CHUNK];
#pragma unroll
    for (int e = 0; e < GQ_CHUNK; e++) mult[e] = s;
#pragma unroll
    for (int h = 0; h < GQ_RPT; h++) {
        uint32_t b[4];
        gq_encode<DT>(w[h], mult, a.e5m2, b);
        if (a.q && n[h]) gq_store16(a.q + i0[h], b, n[h]);
        if (a.qc) *(uint4 *)&tile[rr + h * GQ_PASS][k * GQ_CHUNK] = make_uint4(b[0], b[1], b[2], b[3]);
    }
    if (!a.qc) return; /* block-uniform */
    __syncthreads();
    const int64_t C = a.cols, cc = c0 + tc;
#pragma unroll
    for (int h = 0; h < GQ_RPT; h++) {
        const int j = tj + h * (GQ_THREADS / GQ_TC);
        const int64_t rs = r0 + j * GQ_CHUNK;
        if (cc < C && rs < cur.m) {
            uint32_t o[4];
            gq_tile_column(tile, j, tc, o);
            /* member i's transposed copy [C, m_i] starts at element row0 · C */
            gq_store16(a.qc + (size_t)cur.row0 * (size_t)C + (size_t)cc * (size_t)cur.m + (size_t)rs, o,
                       (int)min((int64_t)GQ_CHUNK, cur.m - rs));
        }
    }
    __syncthreads(); /* the tile is rewritten by the next one */
}

/* MODE GQ_AMAX: per-member amax partials only.  GQ_CAST: codes with the per-member scales (the
 * rowwise copy and/or, through the tile, the transposed copy).  GQ_CAST_AMAX: both in one pass.
 * a.reverse: the block walks its tiles last to first — the cast pass of current scaling, launched
 * with the amax pass's grid, so it starts on the tiles the amax pass read last, still in L2. */
template <int DT, bool VEC, int MODES, bool PIPE>
__global__ void __launch_bounds__(GQ_THREADS, gq_min_blocks(DT, MODES, PIPE)) gq_tensor_kernel(const gq_args_t a) {
    constexpr int MODE = MODES & GQ_MODE_MASK;        /* GQ_AMAX, GQ_CAST or GQ_CAST_AMAX */
    constexpr bool DBIAS = (MODES & GQ_DBIAS) != 0; /* with the dbias partials (a.dpart) */
    __shared__ __align__(16) uint8_t tile[GQ_TR][GQ_TC];
    __shared__ float dsum[DBIAS ? GQ_THREADS / 32 : 1][GQ_TC]; /* dbias: the warps' sums */
    const gq_walk_t wk = gq_walk(a);
    if (wk.count <= 0) return;
    const int64_t count = wk.count, step = wk.step;
    int64_t id = wk.first;
    gq_cursor_t cur, nxt;
    gq_member(a, gq_find(a, id / a.n_ct), cur);
    nxt = cur;
    gq_tile<DT> T, N;
    if (PIPE) gq_tile_load<DT, VEC>(a, cur, id, T);
    float s = MODE != GQ_AMAX ? __ldg(a.scale + cur.i) : 0.0f;
    uint32_t best = 0;
    unsigned long long nan_not = 0;
    for (int64_t done = 0; done < count; done++, id += step) {
        const bool more = done + 1 < count; /* block-uniform */
        if (!PIPE) {                         /* load, then use */
            gq_locate(a, id / a.n_ct, nxt);
            if (nxt.i != cur.i) { /* block-uniform: the next member */
                if (MODE != GQ_CAST) gq_flush(a.work + cur.i, best, nan_not), best = 0, nan_not = 0;
                if (MODE != GQ_AMAX) s = __ldg(a.scale + nxt.i);
            }
            cur = nxt;
            gq_tile_load<DT, VEC>(a, cur, id, T);
        } else if (more) { /* the next tile's loads, in flight during this one */
            gq_locate(a, (id + step) / a.n_ct, nxt);
            gq_tile_load<DT, VEC>(a, nxt, id + step, N);
        }
        if (MODE != GQ_CAST) {
#pragma unroll
            for (int h = 0; h < GQ_RPT; h++) gq_amax_chunk<DT>(T.w[h], T.i0[h], best, nan_not);
            if (DBIAS) gq_dbias_tile<DT>(a, T, dsum);
        }
        if (MODE != GQ_AMAX) gq_tensor_codes<DT>(a, tile, cur, s, T.r0, T.c0, T.w, T.n, T.i0);
        if (PIPE && more) {
            if (nxt.i != cur.i) { /* block-uniform: the next member */
                if (MODE != GQ_CAST) gq_flush(a.work + cur.i, best, nan_not), best = 0, nan_not = 0;
                if (MODE != GQ_AMAX) s = __ldg(a.scale + nxt.i);
            }
            cur = nxt;
            T = N;
        }
    }
    if (MODE != GQ_CAST) gq_flush(a.work + cur.i, best, nan_not);
}

/* ---- TENSOR, v2 (the default outside v3's cases; GLN_CUDA_QUANT_V2=0: the kernel above) -------
 * Load-then-use over U tiles at a time: a thread issues all U x GQ_RPT chunk loads of its next U
 * tiles (U x 64 bytes of bf16 / fp16), then reduces and encodes them.  What this buys over the
 * pipelined kernel above: (a) no spills — the pipelined kernel holds two tiles with their full
 * index state (two cursors, i0[], n[]) under its 80-register bound and spills in the hot loop;
 * here a tile keeps only its member, first row, rows and column tile, the rest is recomputed;
 * (b) more bytes in flight per thread (amax pass: 3 tiles = 192 bytes per thread, 96 KB per SM
 * at 2 blocks per SM; cast: 2 tiles, 64 KB per SM).  Numerics are those of gq_tensor_kernel, element for
 * element: the same amax fold (gq_amax_chunk), the same encode (gq_encode), the same stores. */

/* Tiles per step: what fits the register bound with the tile's words live (FP32 chunks are
 * twice the words). */
__host__ __device__ constexpr int gq2_tiles(int dt, int mode) {
    return mode == GQ_AMAX ? (dt == GQ_F32 ? 2 : 3) : (dt == GQ_F32 ? 1 : 2); /* 2-byte amax at 4: spills */
}
/* Blocks per SM: 2 (128 registers).  At 3 (80 registers) ptxas spills 100-600 bytes in every
 * mode; 2 blocks of U tiles keep more bytes in flight per SM than 3 blocks of the pipelined
 * kernel (cast: 512 threads x 128 bytes; amax: 512 x 192 bytes).  The current-scaling passes
 * share one grid (the smaller of the two kernels' occupancy). */
#define GQ2_MIN_BLOCKS 2

/* What a loaded tile needs later: its member, the member's first packed row and rows, the tile's
 * first member row and column tile. */
typedef struct gq2_meta {
    int64_t row0, m, r0;
    int32_t i, ct;
} gq2_meta_t;

/* x·s for a whole chunk with one scale: gq_encode with a uniform multiplier. */
template <int DT>
__device__ __forceinline__ void gq2_encode(const uint32_t (&w)[gq_traits<DT>::W], float s, int e5m2, uint32_t (&b)[4]) {
    float mult[GQ_CHUNK];
#pragma unroll
    for (int e = 0; e < GQ_CHUNK; e++) mult[e] = s;
    gq_encode<DT>(w, mult, e5m2, b);
}

/* gq_tensor_codes from a tile's meta: the rowwise copy and, through the shared tile, the
 * member's transposed copy.  Every thread of the block calls it (it synchronizes). */
template <int DT>
__device__ __forceinline__ void gq2_codes(const gq_args_t &a, uint8_t (*tile)[GQ_TC], const gq2_meta_t &M, float s,
                                          const uint32_t (&w)[GQ_RPT][gq_traits<DT>::W]) {
    const int t = threadIdx.x, rr = t / GQ_PER_ROW, k = t % GQ_PER_ROW;
    const int64_t C = a.cols, c0 = (int64_t)M.ct * GQ_TC, c = c0 + k * GQ_CHUNK;
    const int nc = c < C ? (int)min((int64_t)GQ_CHUNK, C - c) : 0;
#pragma unroll
    for (int h = 0; h < GQ_RPT; h++) {
        uint32_t b[4];
        gq2_encode<DT>(w[h], s, a.e5m2, b);
        const int64_t r = M.r0 + rr + h * GQ_PASS;
        if (a.q && r < M.m && nc) gq_store16(a.q + (size_t)(M.row0 + r) * (size_t)C + (size_t)c, b, nc);
        if (a.qc) *(uint4 *)&tile[rr + h * GQ_PASS][k * GQ_CHUNK] = make_uint4(b[0], b[1], b[2], b[3]);
    }
    if (!a.qc) return; /* block-uniform */
    __syncthreads();
    const int tc = t % GQ_TC, tj = t / GQ_TC;
    const int64_t cc = c0 + tc;
#pragma unroll
    for (int h = 0; h < GQ_RPT; h++) {
        const int j = tj + h * (GQ_THREADS / GQ_TC);
        const int64_t rs = M.r0 + j * GQ_CHUNK;
        if (cc < C && rs < M.m) {
            uint32_t o[4];
            gq_tile_column(tile, j, tc, o);
            gq_store16(a.qc + (size_t)M.row0 * (size_t)C + (size_t)cc * (size_t)M.m + (size_t)rs, o,
                       (int)min((int64_t)GQ_CHUNK, M.m - rs));
        }
    }
    __syncthreads(); /* the tile is rewritten by the next one */
}

template <int DT, bool VEC, int MODE>
__global__ void __launch_bounds__(GQ_THREADS, GQ2_MIN_BLOCKS) gq_tensor2_kernel(const gq_args_t a) {
    constexpr int U = gq2_tiles(DT, MODE), W = gq_traits<DT>::W;
    __shared__ __align__(16) uint8_t tile[MODE != GQ_AMAX ? GQ_TR : 1][GQ_TC];
    const gq_walk_t wk = gq_walk(a);
    if (wk.count <= 0) return;
    const int t = threadIdx.x, rr = t / GQ_PER_ROW, k = t % GQ_PER_ROW;
    const int64_t count = wk.count, step = wk.step, first = wk.first;
    gq_cursor_t lc; /* the loads' cursor: the member of the last tile loaded */
    gq_member(a, gq_find(a, first / a.n_ct), lc);
    int32_t ci = lc.i; /* the member whose amax partial / scale is in use */
    float s = MODE != GQ_AMAX ? __ldg(a.scale + ci) : 0.0f;
    uint32_t best = 0;
    unsigned long long nan_not = 0;
    for (int64_t done = 0; done < count; done += U) {
        gq2_meta_t M[U];
        uint32_t w[U][GQ_RPT][W];
#pragma unroll
        for (int u = 0; u < U; u++) { /* every load of the U tiles first */
            if (done + u >= count) break; /* block-uniform */
            const int64_t id = first + step * (done + u), rt = id / a.n_ct;
            gq_locate(a, rt, lc);
            M[u].i = lc.i, M[u].row0 = lc.row0, M[u].m = lc.m, M[u].r0 = (rt - lc.t0) * GQ_TR;
            M[u].ct = (int32_t)(id - rt * a.n_ct);
            const int64_t c = (int64_t)M[u].ct * GQ_TC + k * GQ_CHUNK;
            const int nc = c < a.cols ? (int)min((int64_t)GQ_CHUNK, a.cols - c) : 0;
#pragma unroll
            for (int h = 0; h < GQ_RPT; h++) {
                const int64_t r = M[u].r0 + rr + h * GQ_PASS;
                gq_xload<DT, VEC>(a, M[u].row0 + r, c, (size_t)(M[u].row0 + r) * (size_t)a.cols + (size_t)c,
                                  r < M[u].m ? nc : 0, w[u][h]);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (done + u >= count) break; /* block-uniform */
            if (M[u].i != ci) { /* block-uniform: the next member */
                if (MODE != GQ_CAST) gq_flush(a.work + ci, best, nan_not), best = 0, nan_not = 0;
                ci = M[u].i;
                if (MODE != GQ_AMAX) s = __ldg(a.scale + ci);
            }
            if (MODE != GQ_CAST) {
                const size_t c = (size_t)M[u].ct * GQ_TC + (size_t)(k * GQ_CHUNK);
#pragma unroll
                for (int h = 0; h < GQ_RPT; h++)
                    gq_amax_chunk<DT>(w[u][h], (size_t)(M[u].row0 + M[u].r0 + rr + h * GQ_PASS) * (size_t)a.cols + c,
                                      best, nan_not);
            }
            if (MODE != GQ_AMAX) gq2_codes<DT>(a, tile, M[u], s, w[u]);
        }
    }
    if (MODE != GQ_CAST) gq_flush(a.work + ci, best, nan_not);
}

/* The per-tensor scale step's arguments: the amax partials `work` of num members (of x, dtype),
 * the config's rule (nanp, current, fp8_max, pow2, epsilon), the outputs and the delayed amax
 * record.  done: the arrival counter of gq_tensor4_kernel's fused step (gq4_finish; zeroed by the
 * setup kernel), NULL where gq_tensor_scale_kernel runs the step. */
typedef struct gq_scale_job {
    const gq_amax_t *work;
    const void *x;
    int dtype;
    int32_t num;
    int nanp, current;
    float fp8_max;
    int pow2;
    float epsilon;
    float *amax, *scale, *scale_inv, *col_scale_inv;
    gln_cuda_amax_record_t rec;
    unsigned int *done;
} gq_scale_job_t;

/* Member i's step from its partial w: the amax (with nan_propagate, |x| of the lowest NaN, loaded
 * the reference's way), then current: scale from amax; delayed: amax max-accumulated and the given
 * scale, and with rec.history the fused fp8_state_record: history slot first + i·stride
 * max-accumulates the member's amax exactly as gln_fp8_state_record_kernel would right after.
 * scale_inv = 1/scale in every present copy. */
__device__ __forceinline__ void gq_scale_member(const gq_scale_job_t &j, int32_t i, gq_amax_t w) {
    const float a = j.nanp && w.nan_not ? gln_f32_abs(gln_dev_load(j.x, j.dtype, (size_t)~w.nan_not))
                                        : __uint_as_float(w.max_bits);
    float s;
    if (j.current) {
        s = gln_scale_from_amax_impl(a, j.fp8_max, j.pow2, j.epsilon, GLN_FP32_MAX);
        j.scale[i] = s;
        if (j.amax) j.amax[i] = a;
    } else {
        const float acc = gln_f32_max_amax(j.amax[i], a, j.nanp);
        j.amax[i] = acc;
        if (j.rec.history) {
            float *h = &j.rec.history[j.rec.first + (int64_t)i * j.rec.stride];
            *h = gln_f32_max_amax(*h, acc, j.rec.nan_propagate);
        }
        s = j.scale[i];
    }
    const float inv = 1.0f / s;
    if (j.scale_inv) j.scale_inv[i] = inv;
    if (j.col_scale_inv) j.col_scale_inv[i] = inv;
}

/* One thread per member: gq_scale_member after the amax kernel. */
__global__ void gq_tensor_scale_kernel(const gq_scale_job_t j) {
    gln_pdl_wait(); /* launched by gln_cuda_launch: the previous kernels' writes first */
    gln_pdl_launch_dependents();
    const int32_t i = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < j.num) gq_scale_member(j, i, j.work[i]);
}

/* ---- MXFP8 -------------------------------------------------------------------------------- */

template <int DT> struct gq_abs_elem { typedef uint16_t type; };
template <> struct gq_abs_elem<GQ_F32> { typedef uint32_t type; };

/* Byte of E8M0 entry (i, j) of a grid in the cuBLAS 128x4-tile order, T = (padded j) / 4: the
 * formula of gln_mxfp8_swizzle_ref (src/quant/quant_mxfp8.c). */
__host__ __device__ __forceinline__ int64_t gq_swz(int64_t i, int64_t j, int64_t T) {
    return ((i >> 7) * T + (j >> 2)) * 512 + (i & 31) * 16 + ((i & 127) >> 5) * 4 + (j & 3);
}

/* A member's rowwise grid entry (row r, 32-column block jb): compact [round_up(m, 128)][gc_r],
 * or swizzled with i = r, j = jb. */
__device__ __forceinline__ int64_t gq_sidx_row(const gq_args_t &a, int64_t r, int64_t jb) {
    return a.swz ? gq_swz(r, jb, a.gc_r / 4) : r * a.gc_r + jb;
}

/* A member's columnwise grid entry (32-row block rb, column cc) for a member of m rows: compact
 * [round_up(ceil(m / 32), 4)][gc_c], or swizzled as the transposed grid: i = cc, j = rb. */
__device__ __forceinline__ int64_t gq_sidx_col(const gq_args_t &a, int64_t rb, int64_t cc, int64_t m) {
    return a.swz ? gq_swz(cc, rb, gln_round_up(gln_ceil_div(m, 32), 4) / 4) : rb * a.gc_c + cc;
}

/* Zero entries [r_lo, r_hi) x [c_lo, c_hi) (compact coordinates) of a member's rowwise grid
 * (col 0) or columnwise grid (col 1; m: the member's rows), with the block's threads. */
__device__ __forceinline__ void gq_zero(const gq_args_t &a, uint8_t *g, int col, int64_t m, int64_t r_lo,
                                        int64_t r_hi, int64_t c_lo, int64_t c_hi) {
    if (r_hi <= r_lo || c_hi <= c_lo) return;
    const int64_t w = c_hi - c_lo, n = (r_hi - r_lo) * w;
    for (int64_t i = threadIdx.x; i < n; i += GQ_THREADS) {
        const int64_t r = r_lo + i / w, c = c_lo + i % w;
        g[col ? gq_sidx_col(a, r, c, m) : gq_sidx_row(a, r, c)] = 0;
    }
}

/* The E8M0 code of a block from its largest non-NaN |x| bits and whether it holds a NaN. */
template <int DT> __device__ __forceinline__ uint8_t gq_mx_code(const gq_args_t &a, uint32_t fin, int nan) {
    if (nan && a.nanp) return 0xFF;
    return gln_e8m0_from_amax_impl(gq_value<DT>(fin), a.fp8_max, a.emax, a.floor_rule);
}

/* The rowwise E8M0 code of a 32-column block with v1's checks (this lane's chunk w and its
 * neighbour lane's, so both lanes must call; fin: the chunk's |x| maximum bits, NaN patterns
 * ordering above Inf) and the chunk's 16 codes into b through the NaN-checking encode.  v1's
 * rowwise step, and the rare path of gq_mx_row_block. */
template <int DT>
__device__ __forceinline__ uint8_t gq_mx_row_checked(const gq_args_t &a, const uint32_t (&w)[gq_traits<DT>::W],
                                                     uint32_t fin, float (&mult)[GQ_CHUNK], uint32_t (&b)[4]) {
    const int hn = fin > (uint32_t)gq_traits<DT>::NAN_ABOVE;
    if (hn) fin = (uint32_t)gq_absmax_fin<DT>(gq_pack<DT>(w));
    fin = max(fin, __shfl_xor_sync(GQ_FULL, fin, 1));
    const int nan2 = hn | __shfl_xor_sync(GQ_FULL, hn, 1);
    const uint8_t code = gq_mx_code<DT>(a, fin, nan2);
    const float s = gln_e8m0_inverse_bits(code);
#pragma unroll
    for (int e = 0; e < GQ_CHUNK; e++) mult[e] = s;
    gq_encode<DT>(w, mult, a.e5m2, b);
    return code;
}

/* Zero the padding of member cur's grids that this tile owns: rowwise, the padded blocks of its
 * rows (last column tile) and its blocks of the padded rows (last row tile); columnwise the same
 * with 32-row blocks. */
__device__ __forceinline__ void gq_mx_padding(const gq_args_t &a, const gq_cursor_t &cur, int64_t r0, int64_t ct) {
    const int last_ct = ct == a.n_ct - 1, last_rt = r0 + GQ_TR >= cur.m;
    const int64_t c0 = ct * GQ_TC;
    if (a.q) {
        uint8_t *g = a.s + cur.srow;
        if (last_ct) gq_zero(a, g, 0, cur.m, r0, min(r0 + GQ_TR, cur.m), a.nb, a.gc_r);
        if (last_rt) gq_zero(a, g, 0, cur.m, cur.m, gln_round_up(cur.m, 128), ct * 2, last_ct ? a.gc_r : ct * 2 + 2);
    }
    if (a.qc) {
        uint8_t *g = a.cs + cur.scol;
        const int64_t nbr = gln_ceil_div(cur.m, 32);
        if (last_ct) gq_zero(a, g, 1, cur.m, r0 / 32, min(r0 / 32 + GQ_TR / 32, nbr), a.cols, a.gc_c);
        if (last_rt) gq_zero(a, g, 1, cur.m, nbr, gln_round_up(nbr, 4), c0, last_ct ? a.gc_c : c0 + GQ_TC);
    }
}

template <int DT, bool VEC, bool PIPE, bool DBIAS>
__global__ void __launch_bounds__(GQ_THREADS) gq_mx_kernel(const gq_args_t a) {
    typedef typename gq_abs_elem<DT>::type abs_t;
    __shared__ __align__(16) abs_t absbuf[GQ_TR][GQ_TC]; /* |x| bits of the tile (NaN kept) */
    __shared__ __align__(16) float colmult[GQ_TR / 32][GQ_TC];
    __shared__ float dsum[DBIAS ? GQ_THREADS / 32 : 1][GQ_TC]; /* dbias: the warps' sums */
    const int t = threadIdx.x, rr = t / GQ_PER_ROW, k = t % GQ_PER_ROW;
    const int64_t C = a.cols;
    const gq_walk_t wk = gq_walk(a);
    if (wk.count <= 0) return;
    const int64_t lo = wk.first, step = wk.step;
    gq_cursor_t cur, nxt;
    gq_member(a, gq_find(a, lo / a.n_ct), cur);
    nxt = cur;
    gq_tile<DT> T, N;
    if (PIPE) gq_tile_load<DT, VEC>(a, cur, lo, T);
    int64_t id = lo;
    for (int64_t j = 0; j < wk.count; j++, id += step) {
        if (!PIPE) { /* load, then use */
            gq_locate(a, id / a.n_ct, cur);
            gq_tile_load<DT, VEC>(a, cur, id, T);
        } else {
            if (j > 0) { /* the tile loaded during the previous one */
                cur = nxt;
                T = N;
            }
            if (j + 1 < wk.count) { /* block-uniform: the next tile's loads, in flight during this one */
                gq_locate(a, (id + step) / a.n_ct, nxt);
                gq_tile_load<DT, VEC>(a, nxt, id + step, N);
            }
        }
        const int64_t ct = id % a.n_ct, r0 = T.r0, c0 = T.c0;
        const int64_t c = c0 + k * GQ_CHUNK;
        const int(&n)[GQ_RPT] = T.n;
        const size_t(&i0)[GQ_RPT] = T.i0;
        uint32_t(&w)[GQ_RPT][gq_traits<DT>::W] = T.w;
        if (DBIAS) gq_dbias_tile<DT>(a, T, dsum);
        float mult[GQ_CHUNK];
        uint32_t b[4];
        if (a.q) { /* rowwise: this chunk and its neighbour lane's form one 32-column block */
#pragma unroll
            for (int h = 0; h < GQ_RPT; h++) {
                const uint8_t code = gq_mx_row_checked<DT>(a, w[h], gq_absmax<DT>(w[h]), mult, b);
                if (n[h]) {
                    gq_store16(a.q + i0[h], b, n[h]);
                    if (k % 2 == 0) a.s[cur.srow + gq_sidx_row(a, r0 + rr + h * GQ_PASS, c / 32)] = code;
                }
            }
        }
        if (a.qc) { /* columnwise: 32-row blocks of each column through shared memory */
            const uint32_t mask = DT == GQ_F32 ? 0x7FFFFFFFu : 0x7FFF7FFFu;
#pragma unroll
            for (int h = 0; h < GQ_RPT; h++) {
                uint4 *row = (uint4 *)&absbuf[rr + h * GQ_PASS][k * GQ_CHUNK];
#pragma unroll
                for (int v = 0; v < gq_traits<DT>::W / 4; v++)
                    row[v] = make_uint4(w[h][4 * v] & mask, w[h][4 * v + 1] & mask, w[h][4 * v + 2] & mask,
                                        w[h][4 * v + 3] & mask);
            }
            __syncthreads();
            { /* (GQ_TR / 32) x GQ_TC = 256 (block, column) pairs: one per thread */
                const int cc = t % GQ_TC, bb = t / GQ_TC;
                uint32_t fm = 0;
                int nn = 0;
#pragma unroll 8
                for (int i = 0; i < 32; i++) {
                    const uint32_t v = absbuf[bb * 32 + i][cc];
                    if (v > (uint32_t)gq_traits<DT>::NAN_ABOVE) nn = 1;
                    else fm = max(fm, v);
                }
                const uint8_t code = gq_mx_code<DT>(a, fm, nn);
                colmult[bb][cc] = gln_e8m0_inverse_bits(code);
                const int64_t rb = r0 / 32 + bb; /* the member's 32-row block */
                if (rb * 32 < cur.m && c0 + cc < C) a.cs[cur.scol + gq_sidx_col(a, rb, c0 + cc, cur.m)] = code;
            }
            __syncthreads();
#pragma unroll
            for (int h = 0; h < GQ_RPT; h++) {
                const float4 *cm = (const float4 *)&colmult[(rr + h * GQ_PASS) / 32][k * GQ_CHUNK];
#pragma unroll
                for (int v = 0; v < 4; v++) {
                    const float4 f = cm[v];
                    mult[4 * v] = f.x, mult[4 * v + 1] = f.y, mult[4 * v + 2] = f.z, mult[4 * v + 3] = f.w;
                }
                gq_encode<DT>(w[h], mult, a.e5m2, b);
                if (n[h]) gq_store16(a.qc + i0[h], b, n[h]);
            }
        }
        gq_mx_padding(a, cur, r0, ct);
        if (a.qc) __syncthreads(); /* absbuf and colmult are rewritten by the next tile */
    }
}

/* ---- MXFP8, v2 (the default for bf16 / fp16 input, 16-element rows, no dbias; GLN_CUDA_QUANT_MX=1
 * selects gq_mx_kernel above for A/B runs) --------------------------------------------------
 * What the v1 main loop costs, and why (cuobjdump -sass of gq_mx_kernel<bf16, VEC, PIPE>, ptxas):
 * 128 registers with a 16-byte stack frame (2 blocks of 256 threads per SM: 25 % occupancy), and
 * a main loop of ~4,200 SASS instructions, of which the hot path runs well over half per tile
 * (32 elements per thread): two 64-bit divisions per tile (id / n_ct and id % n_ct, for the
 * loaded tile and again for the processed one: a 64-bit divide is an inlined ~60-instruction
 * sequence plus a slow-path call), the whole 64-bit index state of two tiles (two cursors, i0[],
 * n[]) copied at every tile, NaN detection on every 4 encoded codes (5 instructions per word),
 * the columnwise amax as 32 16-bit shared loads per thread with a compare and select each (NaN
 * bookkeeping), and a 16-entry multiplier array per chunk even for the rowwise copy's one scale.
 * This kernel:
 *   - walks its tiles as (row tile, column tile) pairs advanced by the precomputed quotient and
 *     remainder of the step (no division in the loop), with one cursor;
 *   - keeps the common case on a fast path and NaN on the v1 code: a warp whose chunks hold no
 *     NaN (warp vote) encodes its rowwise copy without the NaN-code check (a finite or infinite
 *     x times a finite positive power of two is never NaN, and satfinite never makes a NaN code
 *     from a non-NaN product); a tile with no NaN (the vote of the barrier the columnwise phase
 *     needs anyway) reduces its 32-row column blocks on packed pairs: 128 threads each take 2
 *     columns of one 32-row block, 32 32-bit shared loads and __vmaxu2 (conflict-free: a warp
 *     reads one 128-byte row), then encodes without the check.  A NaN tile runs v1's columnwise
 *     code and the checked encode, a NaN warp v1's rowwise code, so their bytes are v1's;
 *   - the E8M0 round-up code as in gln_e8m0_from_amax_impl with 1 / fp8_max computed once per
 *     thread (the same IEEE division, so the same product), the rowwise encode with a scalar
 *     scale;
 *   - load-then-use under __launch_bounds__(256, 3): 80 registers, 3 blocks of 256 threads per SM
 *     (37.5 % occupancy).  v1's software pipeline (the next tile's words held during this one)
 *     does not fit: at 80 registers ptxas spilled the whole next tile to local memory every
 *     tile, and at 64 (4 blocks) a load-then-use loop spills 340 bytes.  Bytes in flight per SM
 *     are 3 x 256 x 64 against v1's 2 x 256 x 128 (its two tiles), with 50 % more warps to
 *     overlap one block's barrier phases with another's loads.  What ptxas still spills at 80
 *     (~190 bytes) is loop-invariant state reloaded a few times per tile (~20 local loads and
 *     stores per tile against ~600 instructions), and the saves around the rare paths' calls.
 * Measured on the SASS (cuobjdump -sass; hot path = the main loop compiled with the NaN paths,
 * the grid padding, E5M2, the floor rule and the swizzled grids cut out, so what is left is what
 * a full, NaN-free bf16 tile runs): v1 ~1,000 static instructions in the loop + its unrolled
 * column loop (46 x 4) = ~1,140 per thread per tile of 32 elements (~35 per element; ~80 of
 * them byte / word stores of v1's unaligned fallbacks, not run); v2 ~600 + 16 x 4 in the column
 * loop (warps 0-3 only) = ~620 (~19 per element).  Of v2's: 64 FMUL and 32 F2FP (the two copies'
 * products and conversions: the floor), ~64 bf16 unpacks (shift / mask), ~24 for the packed
 * amaxes and the absbuf stores, ~60 of 64-bit index and address arithmetic, the rest scale
 * codes, scale stores and branches.  The remaining lever is the unpack shared by both copies
 * (ptxas recomputes it under the 80-register bound) and 32-bit in-tile offsets.
 * Every byte equals v1's: the same loads (gq_load), amaxes (max is exact in any order), codes,
 * multipliers, FP32 products, hardware conversions and store offsets. */
#define GQ_MX2_MIN_BLOCKS 3

/* The E8M0 code of a block whose largest |x| bits fin (no NaN in the block): gq_mx_code with
 * nan = 0, the round-up rule's 1 / fp8_max precomputed (rinv = 1.0f / a.fp8_max). */
template <int DT>
__device__ __forceinline__ uint8_t gq_mx2_code(const gq_args_t &a, uint32_t fin, float rinv) {
    const float v = gq_value<DT>(fin);
    if (a.floor_rule) return gln_e8m0_from_amax_impl(v, a.fp8_max, a.emax, 1);
    return gln_e8m0_round_up_bits(__fmul_rn(v, rinv));
}

/* 16 codes of x[e]·s (one scale), or of x[e]·mult[e] (MULT), four per word, with no NaN-code
 * check: only for chunks without NaN and finite positive multipliers (the codes are then those
 * of gq_encode_fmt, whose check would find nothing). */
template <int DT, int E5M2, bool MULT>
__device__ __forceinline__ void gq_mx2_encode_fmt(const uint32_t (&w)[gq_traits<DT>::W], float s,
                                                  const float (&mult)[GQ_CHUNK], uint32_t (&b)[4]) {
#pragma unroll
    for (int v = 0; v < 4; v++) {
        float p[4];
#pragma unroll
        for (int j = 0; j < 4; j++) p[j] = __fmul_rn(gq_value<DT>(gq_elem<DT>(w, 4 * v + j)), MULT ? mult[4 * v + j] : s);
        b[v] = gq_cvt2<E5M2>(p[0], p[1]) | (gq_cvt2<E5M2>(p[2], p[3]) << 16);
    }
}

template <int DT, bool MULT>
__device__ __forceinline__ void gq_mx2_encode(const uint32_t (&w)[gq_traits<DT>::W], float s,
                                              const float (&mult)[GQ_CHUNK], int e5m2, uint32_t (&b)[4]) {
    if (e5m2) gq_mx2_encode_fmt<DT, 1, MULT>(w, s, mult, b);
    else gq_mx2_encode_fmt<DT, 0, MULT>(w, s, mult, b);
}

/* The rowwise copy of one chunk: the E8M0 code of its 32-column block (this lane's 16 elements
 * and its neighbour lane's, so both lanes must call) and the chunk's 16 codes into b.  m: the
 * chunk's |x| maximum (bits; NaN patterns order above Inf).  fast (warp-uniform): no lane of the
 * warp holds a NaN, so gq_mx2_code and the unchecked encode give the bytes of v1's code, which
 * runs otherwise.  Shared by gq_mx2_kernel and gq_mx3_kernel. */
template <int DT>
__device__ __forceinline__ uint8_t gq_mx_row_block(const gq_args_t &a, const uint32_t (&w)[gq_traits<DT>::W],
                                                   uint32_t m, bool fast, float rinv, float (&mult)[GQ_CHUNK],
                                                   uint32_t (&b)[4]) {
    if (fast) {
        const uint32_t fin = max(m, __shfl_xor_sync(GQ_FULL, m, 1));
        const uint8_t code = gq_mx2_code<DT>(a, fin, rinv);
        gq_mx2_encode<DT, false>(w, gln_e8m0_inverse_bits(code), mult, a.e5m2, b);
        return code;
    }
    return gq_mx_row_checked<DT>(a, w, m, mult, b);
}

template <int DT>
__global__ void __launch_bounds__(GQ_THREADS, GQ_MX2_MIN_BLOCKS) gq_mx2_kernel(const gq_args_t a) {
    static_assert(DT != GQ_F32, "v2 takes 2-byte inputs (16 bits per |x| in absbuf)");
    constexpr int W = gq_traits<DT>::W;
    __shared__ __align__(16) uint16_t absbuf[GQ_TR][GQ_TC]; /* |x| bits of the tile (NaN kept) */
    __shared__ __align__(16) float colmult[GQ_TR / 32][GQ_TC];
    const int t = threadIdx.x, rr = t / GQ_PER_ROW, k = t % GQ_PER_ROW;
    const int64_t C = a.cols;
    const gq_walk_t wk = gq_walk(a);
    if (wk.count <= 0) return;
    const float rinv = 1.0f / a.fp8_max; /* gln_e8m0_from_amax_impl's factor, computed the same way */
    /* the walk as (row tile, column tile): id = rt · n_ct + ct, advanced by step = sq · n_ct + sr
     * (sr in [0, n_ct): floor division, so a negative step works too) */
    const int64_t sq = wk.step >= 0 ? wk.step / a.n_ct : -((-wk.step + a.n_ct - 1) / a.n_ct);
    const int64_t sr = wk.step - sq * a.n_ct;
    int64_t rt = wk.first / a.n_ct, ct = wk.first % a.n_ct;
    gq_cursor_t cur;
    gq_member(a, gq_find(a, rt), cur);
    for (int64_t j = 0; j < wk.count; j++) {
        gq_locate(a, rt, cur);
        const int64_t r0 = (rt - cur.t0) * GQ_TR, c0 = ct * GQ_TC, c = c0 + k * GQ_CHUNK;
        const size_t i0 = (size_t)(cur.row0 + r0 + rr) * (size_t)C + (size_t)c;
        bool ok[GQ_RPT];    /* chunk h (rows rr, rr + 64) is in the member: 16 valid elements */
        uint32_t w[GQ_RPT][W];
#pragma unroll
        for (int h = 0; h < GQ_RPT; h++) {
            ok[h] = c < C && r0 + rr + h * GQ_PASS < cur.m;
            gq_xload<DT, true>(a, cur.row0 + r0 + rr + h * GQ_PASS, c, i0 + (size_t)(h * GQ_PASS) * (size_t)C,
                               ok[h] ? GQ_CHUNK : 0, w[h]);
        }
        uint32_t m[GQ_RPT]; /* |x| maxima of the chunks (bits; NaN patterns order above Inf) */
        bool nan = false;
#pragma unroll
        for (int h = 0; h < GQ_RPT; h++) {
            m[h] = 0;
#pragma unroll
            for (int v = 0; v < W; v++) m[h] = __vmaxu2(m[h], w[h][v] & 0x7FFF7FFFu);
            m[h] = max(m[h] & 0xFFFFu, m[h] >> 16);
            nan |= m[h] > (uint32_t)gq_traits<DT>::NAN_ABOVE;
        }
        float mult[GQ_CHUNK];
        uint32_t b[4];
        if (a.q) { /* rowwise: this chunk and its neighbour lane's form one 32-column block */
            const bool warp_nan = __any_sync(GQ_FULL, nan);
#pragma unroll
            for (int h = 0; h < GQ_RPT; h++) {
                const uint8_t code = gq_mx_row_block<DT>(a, w[h], m[h], !warp_nan, rinv, mult, b);
                if (ok[h]) {
                    *(uint4 *)(a.q + i0 + (size_t)(h * GQ_PASS) * (size_t)C) = make_uint4(b[0], b[1], b[2], b[3]);
                    if (k % 2 == 0) a.s[cur.srow + gq_sidx_row(a, r0 + rr + h * GQ_PASS, c / 32)] = code;
                }
            }
        }
        if (a.qc) { /* columnwise: 32-row blocks of each column through shared memory */
#pragma unroll
            for (int h = 0; h < GQ_RPT; h++) {
                uint4 *row = (uint4 *)&absbuf[rr + h * GQ_PASS][k * GQ_CHUNK];
#pragma unroll
                for (int v = 0; v < W / 4; v++)
                    row[v] = make_uint4(w[h][4 * v] & 0x7FFF7FFFu, w[h][4 * v + 1] & 0x7FFF7FFFu,
                                        w[h][4 * v + 2] & 0x7FFF7FFFu, w[h][4 * v + 3] & 0x7FFF7FFFu);
            }
            const bool tile_nan = __syncthreads_or(nan) != 0; /* block-uniform */
            if (!tile_nan) {
                if (t < (GQ_TR / 32) * (GQ_TC / 2)) { /* (32-row block, column pair): 128 threads */
                    const int bb = t / (GQ_TC / 2), cp = t % (GQ_TC / 2);
                    const uint32_t *col = (const uint32_t *)&absbuf[bb * 32][0] + cp;
                    uint32_t pm = 0;
#pragma unroll 8
                    for (int i = 0; i < 32; i++) pm = __vmaxu2(pm, col[i * (GQ_TC / 2)]);
                    const uint8_t lo = gq_mx2_code<DT>(a, pm & 0xFFFFu, rinv), hi = gq_mx2_code<DT>(a, pm >> 16, rinv);
                    *(float2 *)&colmult[bb][2 * cp] = make_float2(gln_e8m0_inverse_bits(lo), gln_e8m0_inverse_bits(hi));
                    const int64_t rb = r0 / 32 + bb, cc = c0 + 2 * cp;
                    if (rb * 32 < cur.m) {
                        if (cc < C) a.cs[cur.scol + gq_sidx_col(a, rb, cc, cur.m)] = lo;
                        if (cc + 1 < C) a.cs[cur.scol + gq_sidx_col(a, rb, cc + 1, cur.m)] = hi;
                    }
                }
            } else { /* v1's columnwise amax: one (32-row block, column) per thread */
                const int cc = t % GQ_TC, bb = t / GQ_TC;
                uint32_t fm = 0;
                int nn = 0;
#pragma unroll 8
                for (int i = 0; i < 32; i++) {
                    const uint32_t v = absbuf[bb * 32 + i][cc];
                    if (v > (uint32_t)gq_traits<DT>::NAN_ABOVE) nn = 1;
                    else fm = max(fm, v);
                }
                const uint8_t code = gq_mx_code<DT>(a, fm, nn);
                colmult[bb][cc] = gln_e8m0_inverse_bits(code);
                const int64_t rb = r0 / 32 + bb;
                if (rb * 32 < cur.m && c0 + cc < C) a.cs[cur.scol + gq_sidx_col(a, rb, c0 + cc, cur.m)] = code;
            }
            __syncthreads();
#pragma unroll
            for (int h = 0; h < GQ_RPT; h++) {
                const float4 *cm = (const float4 *)&colmult[(rr + h * GQ_PASS) / 32][k * GQ_CHUNK];
#pragma unroll
                for (int v = 0; v < 4; v++) {
                    const float4 f = cm[v];
                    mult[4 * v] = f.x, mult[4 * v + 1] = f.y, mult[4 * v + 2] = f.z, mult[4 * v + 3] = f.w;
                }
                if (!tile_nan) gq_mx2_encode<DT, true>(w[h], 0.0f, mult, a.e5m2, b);
                else gq_encode<DT>(w[h], mult, a.e5m2, b);
                if (ok[h]) *(uint4 *)(a.qc + i0 + (size_t)(h * GQ_PASS) * (size_t)C) = make_uint4(b[0], b[1], b[2], b[3]);
            }
        }
        gq_mx_padding(a, cur, r0, ct);
        if (a.qc) __syncthreads(); /* absbuf and colmult are rewritten by the next tile */
        rt += sq, ct += sr; /* the next tile */
        if (ct >= a.n_ct) ct -= a.n_ct, rt++;
    }
}

/* ---- MXFP8, v3: a bulk-copy (TMA) load pipeline (the default for bf16 / fp16 input with rows of
 * a multiple of 8 elements, 16-byte aligned buffers, no dbias, no activation on load;
 * GLN_CUDA_QUANT_MX=2 selects gq_mx2_kernel, =1 gq_mx_kernel, =3 requires this one) ---------------
 * Why: v2 holds its tile in registers after load-then-use 16-byte loads (3 blocks x 256 threads x
 * 64 bytes in flight per SM); while a block computes and stores, its loads are not in flight, and
 * it reached 54 % of a device copy.  Here one thread of the block keeps the loads of the next
 * tiles in flight as tensor-map boxes into shared memory, which costs no registers, while every
 * thread converts the current tile from shared memory (bench/lab/lab_stream.cu: a bf16 -> E4M3
 * cast through the same pipeline ran at 90-94 % of a copy on an H200).
 *   - Tiles of GQ_TR = 128 rows x GQ_MX3_TC = 128 columns of one member, so a tile row is one
 *     whole 128-byte line of each FP8 copy (the lab's 128-column tiles stored slightly faster than
 *     64-column ones).  The walk is gq_walk's (the kernel's a.n_ct counts 128-column tiles), the
 *     members come from the device plan (gq_locate_warp), the grid is persistent.
 *   - Loads: one 2-D tensor map over the packed input [rows, cols], encoded on the host per call
 *     (gq_mx3_try), boxes of 128 rows x 64 columns (128 bytes a row, 128-byte swizzle: 16-byte
 *     unit u of box row r lands at unit u ^ (r % 8), gq_mx3_unit); a tile is two
 *     boxes, the second not issued when it starts at or past the last column, and the barrier
 *     expects exactly the issued boxes' bytes (a box's bytes count in full, zero-filled parts
 *     included).  A box at a member's row row0 + r0 reaches into the next member's rows (real
 *     data) or past the tensor (zero-filled): rows at or past the member's are never read as data
 *     (v2 loads them as +0; here they are skipped or replaced by +0).  Columns past cols inside an
 *     issued box are zero-filled by the copy, which is what the upper 8 elements of a row's last
 *     chunk need when cols % 16 == 8 (v1 loads them as +0 too); chunks past cols are never read.
 *   - A ring of GQ_MX3_STAGES = 3 stages of 32 KB in dynamic shared memory, one "full" mbarrier
 *     and one slot each.  Warp 0 issues the first 3 tiles, then at the top of tile j the boxes of
 *     tile j + 2 into the stage that the barrier of tile j - 1 released; before arming a stage the
 *     warp finds the tile's member (gq_locate_warp: a window of 32 members, one member a lane, in
 *     one round of loads) and lane 0 writes the member and the tile into the stage's slot, which
 *     the other threads read after their wait (the barrier's arrival releases it), so the member
 *     search runs once per tile in one warp, not in all 256 threads.  (Until the eighth session
 *     thread 0 searched alone, a binary search of ~log2(members) dependent loads between two
 *     tiles' barriers: over 128 Qwen3-like weights the grouped launch took 1.18x one tensor of
 *     the same bytes; with the warp's window 1.10x.)  One block barrier a
 *     tile (__syncthreads_or, which also says whether the tile holds a NaN) publishes the
 *     columnwise multipliers and frees the stage: the multipliers go through two colmult buffers
 *     (tile j uses buffer j % 2), so no second barrier guards their reuse.  ~104 KB a block
 *     (stages 1024-byte aligned for the swizzle): 2 blocks (512 threads) per SM, up to 6 tiles =
 *     192 KB of loads in flight per SM.  __launch_bounds__(256, 2): 124 registers (bf16) / 118
 *     (fp16), no spills (CUDA 13, sm_90a).
 *   - The tiles are walked round-robin across blocks (gq_walk's strided order), so the blocks
 *     resident together read neighbouring tiles as a copy does.  H200, 16384 x 8192 bf16
 *     (seventh session, bench/gpu_quantize): 69.5 % of a device copy in contiguous bands, 81.0 %
 *     strided with the member search in every thread, 80.4 % strided with the slots; on 128
 *     Qwen3-like weights (a new member at nearly every tile) 71.0 %, 62.8 % and 70.9 %.
 *   - Tried and left (seventh session): a warp-specialized form (256 converters and a load warp
 *     that waits on per-stage "empty" barriers, the converters releasing a stage before their
 *     encodes and stores).  In bench/lab/lab_mx.cu's lighter per-thread code it was the fastest
 *     (88.8 % of a copy at 4 stages x 1 block per SM, against 83.1 % for this structure); in the
 *     library, with 8 converting warps per SM it ran at 54.3 %, and at 2 blocks of 288 threads
 *     ptxas caps it at 96 registers and spills (88-104 bytes).  The library's per-thread code
 *     (runtime E8M0 rules and formats, members, swizzled grids, padding) needs the 16 warps.
 *   - Per tile, thread t takes chunk k = t % 8 (16 columns) of rows rr + 32 h, h = 0..3, rr =
 *     gq_mx3_row(t) (a warp: 4 whole rows x 128 columns; chunk h lies in 32-row block h): the four
 *     chunks from the stage into registers, then v2's rowwise code per chunk (the neighbour lane
 *     completes the 32-column block; a warp vote of NaN picks the unchecked encode or v1's checked
 *     one).  Columnwise: each thread reduces one (32-row block, column pair) straight from the
 *     stage (32 32-bit loads, a warp reading one whole 128-byte box row), rows past the member
 *     and columns past cols left out; a pair holding a NaN redoes its two columns v1's way (NaN
 *     left out of the maximum, code 0xFF under nan_propagate).  The multipliers go through shared
 *     memory (colmult, in a permuted order); the vote of the barrier that publishes them says
 *     whether the tile holds a NaN: v2's unchecked encode without, v1's checked one with.
 *   - Stores: 16 bytes a chunk per copy (cols % 16 == 0) or two 8-byte halves (cols % 16 == 8: a
 *     row then starts 8-byte aligned; the upper half only for a full chunk), a byte per scale;
 *     the grids' padding zeroed as v1 does, for 128-column tiles (gq_mx3_padding).
 * Every byte equals v2's and v1's: the same elements (a stage holds the input's bits), the same
 * amaxes (max is exact in any order; what is left out was +0 there), the same codes, multipliers,
 * FP32 products, conversions and store offsets.
 * Shared-memory traffic (sixth session): ncu on an H200 (16384 x 8192 bf16, E4M3) counted 6.4-way
 * bank conflicts on the shared loads, 363 wavefronts per warp per tile where 80 would do: the
 * colmult reads (4 float4 per chunk at colmult[h][16 k + 4 v]: lanes k of a quarter warp 64 bytes
 * apart, 4-way, 16 x 16 = 256 wavefronts) and the chunk reads (lanes k and k + 4 on the same
 * banks, the two boxes' rows both starting on bank 0: 2-way, 8 x 8 = 64).  Now: the swizzled
 * boxes with the lane order of gq_mx3_row (chunk reads 8 x 4 = 32), colmult permuted so that a
 * quarter warp reads 8 consecutive float4 (16 loads x 1 to 4 = 16 to 64, 1 where the hardware
 * merges the quarters' identical addresses), the column pairs' reads unchanged in count (32 x 1,
 * un-swizzled per row: one XOR per 4 rows) = 80 to 128 wavefronts per warp per tile; at 2 blocks
 * per SM that takes the stage reads from ~49 % of an SM's shared bandwidth to 14-22 % (the TMA
 * writes, 256 wavefronts a tile, come on top).  Also per tile: the rowwise scale indices as one
 * gq_sidx_row and a step, the columnwise pair's second index as the first plus a constant.
 * The alternative weighed against this layout: each column-pair thread encodes its pair for its
 * 32 rows straight from the stage (no colmult, no second barrier, no w[] live across the
 * barrier).  Per element it costs ~4 instructions (2 unpacks, 2 FMUL, half a cvt pair, a 2-byte
 * store and its 64-bit address per row pair) against ~2.9 here (unpack, FMUL, half a cvt, a
 * quarter of a multiplier load, a sixteenth of a store), and 32 2-byte stores per thread per tile
 * (256 warp stores of 64 bytes) against 4 16-byte ones (32 warp stores of 512 bytes); it saves a
 * barrier and the register pressure of w[].  Kept as is: in bench/lab/lab_mx.cu (H200, 16384 x
 * 8192) the direct encode in this warp-specialized structure ran at 76.6 % of a copy, against
 * 88.8 % with colmult.
 * Stores stay plain stores (a bulk store through shared memory would need another 32 KB of
 * staging per block). */
#include "backend/cuda/cuda_tma.cuh"

#define GQ_MX3_TC 128                                       /* columns of a tile: two boxes */
#define GQ_MX3_BOX_C 64                                     /* columns of a box: 128 bytes a row */
#define GQ_MX3_BOX_BYTES (GQ_TR * GQ_MX3_BOX_C * 2)          /* 16 KB */
#define GQ_MX3_STAGES 3
#define GQ_MX3_STAGE_BYTES ((GQ_MX3_TC / GQ_MX3_BOX_C) * GQ_MX3_BOX_BYTES)
#define GQ_MX3_PER_ROW (GQ_MX3_TC / GQ_CHUNK)               /* chunks of a tile row: 8 */
#define GQ_MX3_PASS (GQ_THREADS / GQ_MX3_PER_ROW)           /* rows of one chunk per thread: 32 */
#define GQ_MX3_RPT (GQ_TR / GQ_MX3_PASS)                    /* chunks per thread per tile: 4 */
#define GQ_MX3_COLMULT_BYTES ((GQ_TR / 32) * GQ_MX3_TC * 4) /* one buffer: float4 colmult[4][32], permuted */
#define GQ_MX3_MIN_BLOCKS 2 /* what the shared memory allows */

/* A stage's tile, written by the issuing thread before it arms the stage's barrier: the member
 * (its cursor) and the tile's (row tile, column tile). */
typedef struct gq_mx3_slot {
    gq_cursor_t cur;
    int64_t rt, ct;
} gq_mx3_slot_t;

/* The issuing warp's state (its lane 0 writes it), in shared memory so that it holds no register
 * of the other threads: the next tile to load (row tile, column tile), its member, the tiles
 * issued so far and the next stage. */
typedef struct gq_mx3_producer {
    gq_cursor_t cur;
    int64_t rt, ct, issued;
    int st;
} gq_mx3_producer_t;

/* Dynamic shared memory: the stages, two colmult buffers, the barriers, the slots, the issuer's
 * state, and the slack that aligns the stages to 1024 bytes (the period of the 128-byte swizzle). */
#define GQ_MX3_SMEM                                                                                     \
    (GQ_MX3_STAGES * GQ_MX3_STAGE_BYTES + 2 * GQ_MX3_COLMULT_BYTES + GQ_MX3_STAGES * 8 +              \
     GQ_MX3_STAGES * sizeof(gq_mx3_slot_t) + sizeof(gq_mx3_producer_t) + 1024)
static_assert(GQ_MX3_PASS == 32, "chunk h of a thread lies in 32-row block h");
static_assert((GQ_TR / 32) * (GQ_MX3_TC / 2) == GQ_THREADS, "columnwise: one (32-row block, column pair) per thread");
static_assert(GQ_MX3_STAGE_BYTES % 1024 == 0 && GQ_MX3_BOX_BYTES % 1024 == 0 && GQ_MX3_COLMULT_BYTES % 16 == 0,
              "stage, box and colmult alignment");
static_assert(GQ_MX3_BOX_C * 2 == 128 && GQ_TR == 128 && GQ_MX3_PER_ROW == 8, "a box row is one 128-byte swizzle span");

/* Byte offset in a stage of the 16-byte unit u (0..7) of box row r: the tensor map's 128-byte
 * swizzle stores unit u of row r at unit u ^ (r % 8) of the row (boxes and stages are
 * 1024-byte aligned, so r % 8 is the row's position in the swizzle period). */
__device__ __forceinline__ int gq_mx3_unit(int r, int u) {
    return r * (GQ_MX3_BOX_C * 2) + ((u ^ (r & 7)) << 4);
}

/* Where thread t reads its chunks (and stores them): row rr of the tile's first 32 rows (chunk h
 * is row rr + 32 h), column chunk k (tile columns 16k .. 16k + 15).  Lane l of warp wp takes
 * k = l % 8 of row 4 wp + q for k < 4, and of row 4 wp + (q ^ 1) for k >= 4, q = l / 8.  A warp
 * covers rows 4 wp .. 4 wp + 3 whole (its stores write four whole 128-byte lines of each copy),
 * lanes 2j and 2j + 1 hold the two halves of one 32-column block (gq_mx_row_block), and the 8
 * lanes of a quarter warp (one 16-byte shared load each, the unit of a conflict-free access) read
 * box 0 of one row and box 1 of a row of the other parity: units 2 (k % 4) ^ x of the first and
 * 2 (k % 4) ^ x ^ 1 of the second, 8 distinct 16-byte units, so neither of a chunk's two loads
 * meets a bank conflict (unswizzled, lanes k and k + 4 meet the same banks: 2-way). */
__device__ __forceinline__ int gq_mx3_row(int t) {
    const int l = t % 32, q = l / 8;
    return 4 * (t / 32) + ((l % 8) < 4 ? q : (q ^ 1));
}

/* The 8 words (elements in column order) of a chunk: the units at byte offsets o (the lower 8
 * elements) and o ^ 16 (the upper 8) of the stage, o = gq_mx3_unit(row, 2 (k % 4)) in box k / 4. */
__device__ __forceinline__ void gq_mx3_chunk(const uint8_t *lo_p, const uint8_t *hi_p, uint32_t (&w)[8]) {
    const uint4 lo = *(const uint4 *)lo_p, hi = *(const uint4 *)hi_p;
    w[0] = lo.x, w[1] = lo.y, w[2] = lo.z, w[3] = lo.w;
    w[4] = hi.x, w[5] = hi.y, w[6] = hi.z, w[7] = hi.w;
}

/* n (16, or 8 when cols % 16 == 8) codes at p: one 16-byte store when every row starts 16-byte
 * aligned (al16: cols % 16 == 0, so n is 16), else 8-byte halves. */
__device__ __forceinline__ void gq_mx3_store(uint8_t *p, const uint32_t (&b)[4], int n, bool al16) {
    if (al16) {
        *(uint4 *)p = make_uint4(b[0], b[1], b[2], b[3]);
        return;
    }
    *(uint2 *)p = make_uint2(b[0], b[1]);
    if (n == GQ_CHUNK) *(uint2 *)(p + 8) = make_uint2(b[2], b[3]);
}

/* v1's columnwise amax of one column of a 32-row block on a swizzled stage (blk: the block's first
 * box row; its element in row i at blk + gq_mx3_unit(i, u) + e; nv rows of the member): the
 * largest non-NaN |x| bits, bit 31 set when a NaN is among them.  The rare path of a column pair
 * holding a NaN. */
template <int DT> __device__ __noinline__ uint32_t gq_mx3_col_fin(const uint8_t *blk, int u, int e, int nv) {
    uint32_t fm = 0, nn = 0;
    for (int i = 0; i < nv; i++) {
        const uint32_t v = *(const uint16_t *)(blk + gq_mx3_unit(i, u) + e) & 0x7FFFu;
        if (v > (uint32_t)gq_traits<DT>::NAN_ABOVE) nn = 1u << 31;
        else fm = max(fm, v);
    }
    return fm | nn;
}

/* gq_mx_padding for 128-column tiles: the padding of member cur's grids that tile (r0, ct) owns. */
__device__ __forceinline__ void gq_mx3_padding(const gq_args_t &a, const gq_cursor_t &cur, int64_t r0, int64_t ct) {
    constexpr int JB = GQ_MX3_TC / 32; /* 32-column blocks of a tile */
    const int last_ct = ct == a.n_ct - 1, last_rt = r0 + GQ_TR >= cur.m;
    const int64_t c0 = ct * GQ_MX3_TC;
    if (a.q) {
        uint8_t *g = a.s + cur.srow;
        if (last_ct) gq_zero(a, g, 0, cur.m, r0, min(r0 + GQ_TR, cur.m), a.nb, a.gc_r);
        if (last_rt) gq_zero(a, g, 0, cur.m, cur.m, gln_round_up(cur.m, 128), ct * JB, last_ct ? a.gc_r : ct * JB + JB);
    }
    if (a.qc) {
        uint8_t *g = a.cs + cur.scol;
        const int64_t nbr = gln_ceil_div(cur.m, 32);
        if (last_ct) gq_zero(a, g, 1, cur.m, r0 / 32, min(r0 / 32 + GQ_TR / 32, nbr), a.cols, a.gc_c);
        if (last_rt) gq_zero(a, g, 1, cur.m, nbr, gln_round_up(nbr, 4), c0, last_ct ? a.gc_c : c0 + GQ_MX3_TC);
    }
}

/* map: the packed input [rows, cols] in boxes of GQ_TR x GQ_MX3_BOX_C, 128-byte swizzle; a.n_ct:
 * 128-column tiles. */
template <int DT>
__global__ void __launch_bounds__(GQ_THREADS, GQ_MX3_MIN_BLOCKS)
    gq_mx3_kernel(const __grid_constant__ CUtensorMap map, const gq_args_t a) {
    static_assert(DT != GQ_F32, "v3 takes 2-byte inputs");
    constexpr int W = gq_traits<DT>::W, S = GQ_MX3_STAGES;
    extern __shared__ __align__(1024) uint8_t gq_mx3_smem[];
    gln_pdl_wait(); /* launched by gln_cuda_launch: the previous kernels' writes first */
    gln_pdl_launch_dependents();
    const gq_walk_t wk = gq_walk(a);
    if (wk.count <= 0) return; /* block-uniform, before any barrier */
    uint8_t *stages = gq_mx3_smem + ((1024u - (gln_smem_addr(gq_mx3_smem) & 1023u)) & 1023u);
    /* colmult buffer b: float4 [h][8 v + k], the multipliers of elements 4v .. 4v + 3 of column
     * chunk k in 32-row block h, so that the 8 lanes of a quarter warp (k = 0..7) read 8
     * consecutive float4 (no bank conflict; the warp's other quarters read the same ones) */
    float *const cmbase = (float *)(stages + S * GQ_MX3_STAGE_BYTES);
    uint64_t *const full = (uint64_t *)(stages + S * GQ_MX3_STAGE_BYTES + 2 * GQ_MX3_COLMULT_BYTES);
    gq_mx3_slot_t *const slot = (gq_mx3_slot_t *)(full + S);
    gq_mx3_producer_t *const P = (gq_mx3_producer_t *)(slot + S); /* warp 0's */
    const int t = threadIdx.x;
    const int64_t C = a.cols, count = wk.count;
    /* the walk as (row tile, column tile), advanced by the step's floor quotient and remainder */
    const int64_t sq = wk.step >= 0 ? wk.step / a.n_ct : -((-wk.step + a.n_ct - 1) / a.n_ct);
    const int64_t sr = wk.step - sq * a.n_ct;
    /* warp 0 issues the loads: tile P->issued of the block, at (P->rt, P->ct), into stage P->st;
     * the whole warp finds the tile's member (gq_locate_warp), lane 0 writes it and the tile's
     * position into the stage's slot (the barrier's arrival releases them) and issues the boxes */
    auto issue = [&]() {
        gq_locate_warp(a, P->rt, &P->cur);
        if (t == 0) {
            const gq_cursor_t cur = P->cur;
            const int64_t prt = P->rt, pct = P->ct;
            const int pst = P->st;
            slot[pst].cur = cur, slot[pst].rt = prt, slot[pst].ct = pct;
            const int32_t row = (int32_t)(cur.row0 + (prt - cur.t0) * GQ_TR), col = (int32_t)(pct * GQ_MX3_TC);
            const bool two = col + GQ_MX3_BOX_C < C; /* the second box holds columns of the tensor */
            uint8_t *dst = stages + pst * GQ_MX3_STAGE_BYTES;
            gln_mbar_expect_tx(&full[pst], two ? 2 * GQ_MX3_BOX_BYTES : GQ_MX3_BOX_BYTES);
            gln_tma_load_2d(dst, &map, &full[pst], row, col);
            if (two) gln_tma_load_2d(dst + GQ_MX3_BOX_BYTES, &map, &full[pst], row, col + GQ_MX3_BOX_C);
            P->issued++;
            P->st = pst + 1 == S ? 0 : pst + 1;
            const int64_t nct = pct + sr;
            P->rt = prt + sq + (nct >= a.n_ct), P->ct = nct >= a.n_ct ? nct - a.n_ct : nct;
        }
        __syncwarp(); /* the warp's next call sees the advanced walk */
    };
    if (t == 0) {
        for (int s = 0; s < S; s++) gln_mbar_init(&full[s], 1);
        gln_mbar_init_fence();
        P->rt = wk.first / a.n_ct, P->ct = wk.first % a.n_ct, P->issued = 0, P->st = 0;
        P->cur.i = 0, P->cur.t0 = 0, P->cur.t1 = -1; /* no member yet: the first search is a full one */
    }
    if (t < 32) {
        __syncwarp();
        while (P->issued < count && P->issued < S) issue(); /* P->issued: warp-uniform after the syncs */
    }
    __syncthreads();

    const int rr = gq_mx3_row(t), k = t % GQ_MX3_PER_ROW;
    /* this thread's chunk h: stage bytes o_lo + 4096 h (elements 0..7) and o_hi + 4096 h (8..15);
     * rr + 32 h has the swizzle phase of rr, and o_lo's bit 4 is the parity of its unit */
    const int o_lo = (k / 4) * GQ_MX3_BOX_BYTES + gq_mx3_unit(rr, 2 * (k % 4)), o_hi = o_lo ^ 16;
    /* columnwise: (32-row block bb, column pair cp), its words at stage bytes
     * o_col + gq_mx3_unit(i, u) for rows i = 0..31 of the block (a warp reads one whole 128-byte
     * box row per row: no bank conflict) */
    const int bb = t / (GQ_MX3_TC / 2), cp = t % (GQ_MX3_TC / 2), u = (cp % 32) / 4;
    const int o_col = (cp / 32) * GQ_MX3_BOX_BYTES + bb * 32 * (GQ_MX3_BOX_C * 2) + (cp % 4) * 4;
    /* its pair's two multipliers in a colmult buffer (floats) */
    const int cm_off = (bb * (GQ_MX3_TC / 4) + ((cp % 8) / 2) * 8 + cp / 8) * 4 + 2 * (cp % 2);
    const bool al16 = C % GQ_CHUNK == 0;
    const float rinv = 1.0f / a.fp8_max; /* gln_e8m0_from_amax_impl's factor, computed the same way */
    int st = 0;         /* the stage of tile j */
    uint32_t phase = 0; /* the parity of its barrier's phase this tile completes */
    for (int64_t j = 0; j < count; j++) {
        /* tile j + S - 1 into the stage that the barrier of tile j - 1 released */
        if (t < 32 && j > 0 && P->issued < count) issue();
        gln_mbar_wait(&full[st], phase);
        const gq_cursor_t cur = slot[st].cur; /* read before the stage is released */
        const int64_t rt = slot[st].rt, ct = slot[st].ct;
        const int64_t r0 = (rt - cur.t0) * GQ_TR, c0 = ct * GQ_MX3_TC, c = c0 + k * GQ_CHUNK;
        const int rv = (int)min(cur.m - r0, (int64_t)GQ_TR); /* the member's rows in the tile (>= 1) */
        const int nc = c < C ? (C - c >= GQ_CHUNK ? GQ_CHUNK : GQ_CHUNK / 2) : 0; /* cols % 8 == 0 */
        const int64_t i0 = (cur.row0 + r0 + rr) * C + c; /* chunk 0's first element; chunk h: + 32 h C */
        const uint8_t *tile = stages + st * GQ_MX3_STAGE_BYTES;
        bool ok[GQ_MX3_RPT]; /* chunk h holds elements of the member */
        uint32_t w[GQ_MX3_RPT][W];
#pragma unroll
        for (int h = 0; h < GQ_MX3_RPT; h++) {
            ok[h] = nc != 0 && rr + h * GQ_MX3_PASS < rv;
            if (ok[h]) {
                const int oh = h * GQ_MX3_PASS * (GQ_MX3_BOX_C * 2);
                gq_mx3_chunk(tile + o_lo + oh, tile + o_hi + oh, w[h]);
            } else {
#pragma unroll
                for (int v = 0; v < W; v++) w[h][v] = 0;
            }
        }
        if (!a.qc) __syncthreads(); /* block-uniform: every thread is done with stage st */
        float mult[GQ_CHUNK];
        uint32_t b[4];
        if (a.q) { /* rowwise, v2's code: this chunk and its neighbour lane's form one 32-column block */
            /* grid entry of (row r0 + rr + 32 h, block c / 32): chunk 0's + h sstep, as r0 % 128 == 0
             * and rr < 32 (gq_swz: i >> 7 and i & 31 fixed, (i & 127) >> 5 = h; compact: 32 h rows) */
            const int64_t s0 = cur.srow + gq_sidx_row(a, r0 + rr, c / 32), sstep = a.swz ? 4 : GQ_MX3_PASS * a.gc_r;
#pragma unroll
            for (int h = 0; h < GQ_MX3_RPT; h++) {
                uint32_t m = 0; /* |x| maximum (bits; NaN patterns order above Inf) */
#pragma unroll
                for (int v = 0; v < W; v++) m = __vmaxu2(m, w[h][v] & 0x7FFF7FFFu);
                m = max(m & 0xFFFFu, m >> 16);
                const bool fast = !__any_sync(GQ_FULL, m > (uint32_t)gq_traits<DT>::NAN_ABOVE); /* warp-uniform */
                const uint8_t code = gq_mx_row_block<DT>(a, w[h], m, fast, rinv, mult, b);
                if (ok[h]) {
                    gq_mx3_store(a.q + i0 + h * GQ_MX3_PASS * C, b, nc, al16);
                    if (k % 2 == 0) a.s[s0 + h * sstep] = code;
                }
            }
        }
        if (a.qc) { /* columnwise: 32-row blocks of each column, from the stage */
            const int64_t cc = c0 + 2 * cp;                            /* cc < C: cc + 1 < C too */
            const int nv = cc < C ? max(0, min(32, rv - bb * 32)) : 0; /* the pair's member rows */
            const uint8_t *blk = tile + o_col;
            uint32_t pm = 0; /* both columns' |x| maxima, packed like the elements */
            if (nv == 32) { /* rows 8 g + x: the swizzle offset computed once per x */
#pragma unroll
                for (int x = 0; x < 8; x++) {
                    const uint8_t *px = blk + gq_mx3_unit(x, u);
#pragma unroll
                    for (int g = 0; g < 4; g++)
                        pm = __vmaxu2(pm, *(const uint32_t *)(px + g * 8 * (GQ_MX3_BOX_C * 2)) & 0x7FFF7FFFu);
                }
            } else {
                for (int i = 0; i < nv; i++) pm = __vmaxu2(pm, *(const uint32_t *)(blk + gq_mx3_unit(i, u)) & 0x7FFF7FFFu);
            }
            const uint32_t mlo = pm & 0xFFFFu, mhi = pm >> 16;
            const int cnan = max(mlo, mhi) > (uint32_t)gq_traits<DT>::NAN_ABOVE;
            uint8_t lo, hi;
            if (!cnan) {
                lo = gq_mx2_code<DT>(a, mlo, rinv), hi = gq_mx2_code<DT>(a, mhi, rinv);
            } else { /* v1's column amax and code, each column of the pair */
                const uint32_t flo = gq_mx3_col_fin<DT>(blk - (cp % 4) * 4, u, (cp % 4) * 4, nv);
                const uint32_t fhi = gq_mx3_col_fin<DT>(blk - (cp % 4) * 4, u, (cp % 4) * 4 + 2, nv);
                lo = gq_mx_code<DT>(a, flo & 0x7FFFFFFFu, (int)(flo >> 31));
                hi = gq_mx_code<DT>(a, fhi & 0x7FFFFFFFu, (int)(fhi >> 31));
            }
            /* buffer j % 2: a thread writing it at tile j has passed the barrier of tile j - 1, so
             * every thread has finished its reads of it at tile j - 2 */
            float *const cm = cmbase + (j & 1) * (GQ_MX3_COLMULT_BYTES / 4);
            *(float2 *)(cm + cm_off) = make_float2(gln_e8m0_inverse_bits(lo), gln_e8m0_inverse_bits(hi));
            if (nv > 0) { /* the member's 32-row block rb, columns cc and cc + 1 (cc even: gq_swz's
                           * i & 31 grows by one, nothing else moves; compact: the next byte) */
                const int64_t s_lo = cur.scol + gq_sidx_col(a, r0 / 32 + bb, cc, cur.m);
                a.cs[s_lo] = lo;
                a.cs[s_lo + (a.swz ? 16 : 1)] = hi;
            }
            /* block-uniform; colmult complete, and every thread is done with stage st */
            const bool tile_nan = __syncthreads_or(cnan) != 0;
            const float4 *const cm4 = (const float4 *)cm;
#pragma unroll
            for (int h = 0; h < GQ_MX3_RPT; h++) {
#pragma unroll
                for (int v = 0; v < 4; v++) {
                    const float4 f = cm4[h * (GQ_MX3_TC / 4) + v * 8 + k];
                    mult[4 * v] = f.x, mult[4 * v + 1] = f.y, mult[4 * v + 2] = f.z, mult[4 * v + 3] = f.w;
                }
                if (!tile_nan) gq_mx2_encode<DT, true>(w[h], 0.0f, mult, a.e5m2, b);
                else gq_encode<DT>(w[h], mult, a.e5m2, b);
                if (ok[h]) gq_mx3_store(a.qc + i0 + h * GQ_MX3_PASS * C, b, nc, al16);
            }
        }
        gq_mx3_padding(a, cur, r0, ct);
        if (++st == S) st = 0, phase ^= 1u;
    }
}

/* GLN_CUDA_QUANT_MX: 1 selects gq_mx_kernel for every MXFP8 pass and 2 gq_mx2_kernel (or v1) where
 * gq_mx3_kernel would run (A/B runs); 3 requires gq_mx3_kernel: a pass it cannot take fails with
 * GLN_STATUS_NOT_SUPPORTED saying why (tests and benchmarks prove which kernel ran).  Unset or
 * anything else: gq_mx3_kernel where it applies.  Read at every call.  Returns 0 (off), 1 (where
 * it applies) or 2 (required). */
static int gq_mx3_mode(void) {
    const char *e = getenv("GLN_CUDA_QUANT_MX");
    if (e && (e[0] == '1' || e[0] == '2')) return 0;
    return e && e[0] == '3' ? 2 : 1;
}

/* GLN_CUDA_QUANT_MX_BLOCKS=n caps gq_mx3_kernel's grid at n blocks, so that a block walks many
 * tiles through its ring on a small tensor (tests) or to measure fewer blocks; read at every call. */
static int64_t gq_mx3_block_cap(void) { return gln_cuda_env_grid_cap("GLN_CUDA_QUANT_MX_BLOCKS"); }

/* gq_mx3_kernel<DT>'s dynamic shared memory limit, raised once per device (bit d of `done`; a
 * racing first call raises it twice, which is harmless). */
template <int DT> static gln_status_t gq_mx3_attr(int dev, const char *call) {
    static unsigned long long done = 0;
    const unsigned long long bit = dev >= 0 && dev < 64 ? 1ull << dev : 0ull;
    if (bit && (__atomic_load_n(&done, __ATOMIC_ACQUIRE) & bit)) return GLN_STATUS_SUCCESS;
    GLN_TRY(gln_cuda_check(cudaFuncSetAttribute(gq_mx3_kernel<DT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                GQ_MX3_SMEM),
                           call, "cudaFuncSetAttribute(gq_mx3_kernel, dynamic shared memory)"));
    if (bit) __atomic_fetch_or(&done, bit, __ATOMIC_RELEASE);
    return GLN_STATUS_SUCCESS;
}

/* Launch gq_mx3_kernel<DT> on the resident blocks (at most one per tile, at most the cap);
 * *taken = 0 when it does not fit on this device (v2 / v1 run then). */
template <int DT>
static gln_status_t gq_mx3_launch(const gq_args_t *a, const CUtensorMap *map, int64_t tiles, cudaStream_t stream,
                                  const char *call, int *taken) {
    int dev = 0, sms = 0, per_sm = 0;
    GLN_TRY(gln_cuda_check(cudaGetDevice(&dev), call, "cudaGetDevice"));
    GLN_TRY(gq_mx3_attr<DT>(dev, call));
    GLN_TRY(gln_cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), call,
                           "cudaDeviceGetAttribute(multiprocessors)"));
    GLN_TRY(gln_cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gq_mx3_kernel<DT>, GQ_THREADS,
                                                                         GQ_MX3_SMEM),
                           call, "cudaOccupancyMaxActiveBlocksPerMultiprocessor(gq_mx3_kernel)"));
    if (per_sm <= 0) return GLN_STATUS_SUCCESS;
    *taken = 1;
    int64_t blocks = (int64_t)(sms > 0 ? sms : 1) * per_sm;
    const int64_t cap = gq_mx3_block_cap();
    if (cap > 0 && blocks > cap) blocks = cap;
    if (blocks > tiles) blocks = tiles;
    if (blocks <= 0) return GLN_STATUS_SUCCESS;
    GLN_TRY(gln_cuda_check(gln_cuda_launch(gq_mx3_kernel<DT>, dim3((unsigned int)blocks), dim3(GQ_THREADS), GQ_MX3_SMEM,
                                           stream, *map, *a),
                           call, "gq_mx3_kernel"));
    return gln_cuda_check_launch(call, "gq_mx3_kernel");
}

/* Why gq_mx3_kernel cannot take this pass (NULL: it can; *empty: with nothing to run, else with
 * the tensor map encoded): bf16 / fp16 input, cols a multiple of 8 (16-byte rows for the tensor
 * map; the coordinates are 32-bit), input and outputs 16-byte aligned, no dbias, no activation on
 * load. */
static const char *gq_mx3_refusal(const gq_args_t *a, const gln_tensor_t *in, CUtensorMap *map, int *empty) {
    const int64_t R = in->rows, C = in->cols;
    const int bf16 = in->dtype == GLN_DTYPE_BF16;
    *empty = 0;
    if (!bf16 && in->dtype != GLN_DTYPE_FP16) return "the input is not bf16 or fp16";
    if (a->dpart) return "a fused dbias runs on gq_mx_kernel";
    if (a->act != GLN_ACT_LOAD_NONE) return "an activation on load runs on gq_mx2_kernel / gq_mx_kernel";
    if (R <= 0 || C <= 0) { /* no element and no grid entry */
        *empty = 1;
        return NULL;
    }
    if (C % 8 != 0) return "cols is not a multiple of 8";
    if (R > INT32_MAX || C > INT32_MAX) return "rows or cols exceed 2^31 - 1";
    if (((uintptr_t)a->x | (uintptr_t)a->q | (uintptr_t)a->qc) & 15u) return "a buffer is not 16-byte aligned";
    if (gln_tma_encode_2d(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, a->x,
                          (uint64_t)R, (uint64_t)C, (uint64_t)C * 2u, GQ_TR, GQ_MX3_BOX_C, CU_TENSOR_MAP_SWIZZLE_128B))
        return "the driver refused the tensor map";
    return NULL;
}

/* The MXFP8 pass of gq_members on gq_mx3_kernel where it applies (*taken = 1; the status is the
 * launch's); row_tiles: gq_members' bound on the row tiles.  *taken = 0: v2 / v1 run instead,
 * unless GLN_CUDA_QUANT_MX=3 requires v3 (GLN_STATUS_NOT_SUPPORTED naming the reason). */
static int gq_order_forced(void);
static gln_status_t gq_mx3_try(const gq_args_t *a, const gln_tensor_t *in, int64_t row_tiles, cudaStream_t stream,
                               const char *call, int *taken) {
    *taken = 0;
    const int mode = gq_mx3_mode();
    if (mode == 0) return GLN_STATUS_SUCCESS;
    CUtensorMap map;
    int empty = 0;
    const char *why = gq_mx3_refusal(a, in, &map, &empty);
    if (!why && empty) {
        *taken = 1;
        return GLN_STATUS_SUCCESS;
    }
    if (!why) {
        gq_args_t m = *a;
        m.n_ct = gln_ceil_div(in->cols, GQ_MX3_TC);
        /* Round-robin (strided) tiles unless GLN_CUDA_QUANT_ORDER=contiguous: the blocks resident
         * together read neighbouring tiles, as a copy does (H200, seventh session, 16384 x 8192
         * bf16: 81.0 % of a device copy strided against 69.5 % in contiguous bands).  The member
         * search that strided tiles make frequent (small members: a new member nearly every tile)
         * runs in the issuing thread, which writes the result into the stage's slot. */
        m.strided = gq_order_forced() != 0;
        const int64_t tiles = row_tiles * m.n_ct;
        GLN_TRY(in->dtype == GLN_DTYPE_BF16 ? gq_mx3_launch<GQ_BF16>(&m, &map, tiles, stream, call, taken)
                                            : gq_mx3_launch<GQ_F16>(&m, &map, tiles, stream, call, taken));
        if (*taken) return GLN_STATUS_SUCCESS;
        why = "it does not fit on this device (shared memory)";
    }
    if (mode < 2) return GLN_STATUS_SUCCESS;
    return gln_fail(GLN_STATUS_NOT_SUPPORTED,
                    "%s: GLN_CUDA_QUANT_MX=3 requires gq_mx3_kernel, which cannot take this pass: %s (%s, %lld x %lld)",
                    call, why, gln_dtype_name(in->dtype), (long long)in->rows, (long long)in->cols);
}

/* ---- TENSOR, v3 (the default for bf16 / fp16 input on the 16-byte path without dbias, cast
 * passes; GLN_CUDA_QUANT_V3=0 selects gq_tensor2_kernel for A/B runs) -------------------------
 * Findings (ptxas -v and cuobjdump -sass of the bf16 kernels, sm_90a, CUDA 13; census build: the
 * activation-on-load path, E5M2 and the unaligned store fallbacks cut out, so the main loop holds
 * the E4M3 hot path plus the member switch; one pass of the loop = 2 tiles = 64 elements a thread):
 *   v2 cast (gq_tensor2_kernel<bf16, VEC, CAST>): 116 registers, no spills, 2 blocks / SM; main
 *   loop 934 SASS instructions (~14.6 per element): 283 IMAD (64-bit tile id / n_ct division and
 *   index math), 64 LDS.U8 + 48 PRMT / shifts for the transposed tile read a byte at a time,
 *   64 FMUL + 32 F2FP (the floor), 4 words of NaN-code check per chunk;
 *   v3 cast (this kernel): 125 registers, no spills, 2 blocks / SM; main loop 645 instructions
 *   (~10.1 per element, -31 %): 143 IMAD, 16 LDS.32 + 32 PRMT for the transposed tile, the same
 *   64 FMUL + 32 F2FP, no NaN-code check.  Delayed (CAST_AMAX): v2 118 registers, loop 1437;
 *   v3 128 registers, loop 1206 (-16 %; the member switch's inlined block reduction, run once
 *   per member, is a large part of both).  At 3 blocks per SM (80 registers) the census cast
 *   kernel fits in 79 registers without spills but the delayed one spills 162 bytes; and current
 *   scaling's cast pass runs on the amax pass's grid (gq_run_tensor: the v2 amax kernel, 2 blocks
 *   per SM), so 3 would not be used there.  Kept at 2 (GQ3_MIN_BLOCKS); worth an A/B on the GPU.
 *   What is left per element is the bf16 unpack (1), FMUL (1), F2FP (0.5) and ~4 of 64-bit
 *   address and bounds arithmetic per chunk.
 * The ideas of gq_mx2_kernel, applied to the per-tensor cast:
 *   - walks (row tile, column tile) pairs advanced by the step's quotient and remainder (no
 *     division in the loop), like gq_mx2_kernel;
 *   - encodes without the NaN-code check (x·s two at a time through cvt.rn.satfinite) when the
 *     scale is finite and nonzero and the chunk holds no NaN: then no product is NaN, and
 *     satfinite never makes a NaN code from a non-NaN product, so the codes are those of the
 *     checked encode.  "No NaN" is known per member in the cast pass of current scaling (the amax
 *     pass before it recorded the member's lowest NaN in work[i].nan_not, 0 = none), and per warp
 *     in the delayed pass (a vote on the tile's packed |x| maximum, which the amax needs anyway);
 *     otherwise the warp runs v2's checked encode (gq2_encode), so its bytes are v2's;
 *   - delayed: the amax fold on packed 16-bit pairs (__vmaxu2 over the tile's words, one compare
 *     per tile), v2's per-chunk fold (gq_amax_chunk, with the NaN index) only for a thread whose
 *     tile holds a NaN.  max is exact in any order and widening 16-bit magnitudes is monotonic, so
 *     the partials are v2's;
 *   - the transposed copy through a swizzled tile of 32-bit words (gq3_pos): the rowwise phase
 *     stores each chunk as two 64-bit words, the transposed phase reads 8 words (8 rows x 4
 *     columns), transposes the 4x4 byte blocks with 8 byte permutes and stores 8 codes per column
 *     (rows of 8: a warp covers 2 columns x 128 rows, two whole 128-byte lines); both phases are
 *     free of bank conflicts (see gq3_pos).  The stores cover the same bytes as v2's 16-row ones.
 * Every byte equals v2's: the same loads (gq_xload), amax partials, scales, FP32 products,
 * hardware conversions and store addresses. */
#define GQ3_MIN_BLOCKS 2
#define GQ3_TILES 2 /* tiles loaded before any is used */

/* Index (in 32-bit words) of word w (columns 4w .. 4w+3) of tile row `row` in the swizzled
 * tile: row pairs of 32 words, XOR-swizzled by X(row), constant within a row pair (so it is a
 * bijection).  X = 16·bit3(row) ^ 2·bits4-6(row) ^ 2·bit1(row): even, so the 64-bit stores of
 * words (4k, 4k+1) and (4k+2, 4k+3) stay aligned.
 *   - transposed reads: a warp reads, at step i, row 8g + i for g = 0..15 (lane & 15), words
 *     c0, c0+1: bit 4 of the bank from g's bit 0 (row bit 3), bits 1-3 from g's bits 1-3 (row
 *     bits 4-6): 32 distinct banks;
 *   - rowwise writes (64-bit): a half warp writes rows 4q .. 4q+3 (two row pairs, differing in
 *     row bit 1), words {4k, 4k+1} or {4k+2, 4k+3} for k = 0..3: the two pairs land on
 *     complementary word pairs, both parities on both halves: 32 distinct banks. */
__device__ __forceinline__ int gq3_pos(int row, int w) {
    const int x = (((row >> 3) & 1) << 4) ^ (((row >> 4) & 7) << 1) ^ (((row >> 1) & 1) << 1);
    return 32 * (row >> 1) + ((16 * (row & 1) + w) ^ x);
}

/* Store the 8 codes of (lo, hi) (byte e of the pair at p[e]), n (<= 8) of them. */
__device__ __forceinline__ void gq3_store8(uint8_t *p, uint32_t lo, uint32_t hi, int n) {
    const uintptr_t a = (uintptr_t)p;
    if (n == 8 && (a & 7) == 0) {
        *(uint2 *)p = make_uint2(lo, hi);
        return;
    }
    if (n == 8 && (a & 3) == 0) {
        ((uint32_t *)p)[0] = lo, ((uint32_t *)p)[1] = hi;
        return;
    }
#pragma unroll
    for (int e = 0; e < 8; e++)
        if (e < n) p[e] = (uint8_t)((e < 4 ? lo : hi) >> ((e & 3) * 8));
}

/* Columns c = 0..3 of the 4x4 byte block whose rows are v0..v3 (byte c of v_r is (r, c)):
 * o[c] = (v0.c, v1.c, v2.c, v3.c). */
__device__ __forceinline__ void gq3_transpose4(uint32_t v0, uint32_t v1, uint32_t v2, uint32_t v3, uint32_t (&o)[4]) {
    /* t0 = (v0.0, v1.0, v0.1, v1.1), t1 = (v0.2, v1.2, v0.3, v1.3); t2, t3 the same of v2, v3 */
    const uint32_t t0 = __byte_perm(v0, v1, 0x5140), t1 = __byte_perm(v0, v1, 0x7362);
    const uint32_t t2 = __byte_perm(v2, v3, 0x5140), t3 = __byte_perm(v2, v3, 0x7362);
    o[0] = __byte_perm(t0, t2, 0x5410), o[1] = __byte_perm(t0, t2, 0x7632);
    o[2] = __byte_perm(t1, t3, 0x5410), o[3] = __byte_perm(t1, t3, 0x7632);
}

/* MODE GQ_CAST (current scaling's cast pass: a.work holds the amax pass's partials of the same
 * x) or GQ_CAST_AMAX (delayed scaling). */
template <int DT, int MODE>
__global__ void __launch_bounds__(GQ_THREADS, GQ3_MIN_BLOCKS) gq_tensor3_kernel(const gq_args_t a) {
    static_assert(DT != GQ_F32 && (MODE == GQ_CAST || MODE == GQ_CAST_AMAX), "v3: 2-byte inputs, cast passes");
    constexpr int U = GQ3_TILES, W = gq_traits<DT>::W;
    __shared__ __align__(16) uint32_t tile[GQ_TR * GQ_TC / 4];
    const gq_walk_t wk = gq_walk(a);
    if (wk.count <= 0) return;
    const int t = threadIdx.x, rr = t / GQ_PER_ROW, k = t % GQ_PER_ROW;
    const int lane = t & 31, g = lane & 15, cg = 2 * (t >> 5) + (lane >> 4); /* transposed phase */
    const int64_t C = a.cols;
    const size_t passC = (size_t)GQ_PASS * (size_t)C; /* elements from row rr to row rr + GQ_PASS */
    /* transposed reads: row 8g + i, word cg is at rd ^ K(i) + 32·(i >> 1), K(i) = 16·bit0(i) |
     * 2·bit1(i): gq3_pos(8g + i, cg) with the thread's terms folded into rd */
    const int rd = 128 * g + ((16 * (g & 1)) | (cg ^ (2 * (g >> 1))));
    const float dummy[GQ_CHUNK] = {};
    /* the walk as (row tile, column tile), as in gq_mx2_kernel */
    const int64_t sq = wk.step >= 0 ? wk.step / a.n_ct : -((-wk.step + a.n_ct - 1) / a.n_ct);
    const int64_t sr = wk.step - sq * a.n_ct;
    int64_t rt = wk.first / a.n_ct, ct = wk.first % a.n_ct;
    gq_cursor_t lc; /* the loads' cursor */
    gq_member(a, gq_find(a, rt), lc);
    int32_t ci = -1; /* the member whose amax partial / scale is in use (none yet) */
    float s = 0.0f;
    bool fast = false; /* block-uniform: s finite and nonzero (CAST: and the member has no NaN) */
    uint32_t best = 0;
    unsigned long long nan_not = 0;
    for (int64_t done = 0; done < wk.count; done += U) {
        gq2_meta_t M[U];
        size_t e0[U]; /* element of the thread's chunk h = 0: (row0 + r0 + rr) · C + c */
        uint32_t w[U][GQ_RPT][W];
#pragma unroll
        for (int u = 0; u < U; u++) { /* every load of the U tiles first */
            if (done + u >= wk.count) break; /* block-uniform */
            gq_locate(a, rt, lc);
            M[u].i = lc.i, M[u].row0 = lc.row0, M[u].m = lc.m, M[u].r0 = (rt - lc.t0) * GQ_TR;
            M[u].ct = (int32_t)ct;
            const int64_t c = ct * GQ_TC + k * GQ_CHUNK;
            e0[u] = (size_t)(M[u].row0 + M[u].r0 + rr) * (size_t)C + (size_t)c;
#pragma unroll
            for (int h = 0; h < GQ_RPT; h++) {
                const int64_t r = M[u].r0 + rr + h * GQ_PASS;
                gq_xload<DT, true>(a, M[u].row0 + r, c, e0[u] + (size_t)h * passC, r < M[u].m && c < C ? GQ_CHUNK : 0,
                                   w[u][h]);
            }
            rt += sq, ct += sr; /* the next tile */
            if (ct >= a.n_ct) ct -= a.n_ct, rt++;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (done + u >= wk.count) break; /* block-uniform */
            if (M[u].i != ci) { /* block-uniform: the next member */
                if (MODE == GQ_CAST_AMAX && ci >= 0) gq_flush(a.work + ci, best, nan_not), best = 0, nan_not = 0;
                ci = M[u].i;
                s = __ldg(a.scale + ci);
                /* x·s is NaN only for a NaN x; GLN_CUDA_FP8_CVT=0 builds encode everything in software */
                fast = GLN_CUDA_FP8_CVT && (__float_as_uint(s) & 0x7FFFFFFFu) < 0x7F800000u && s != 0.0f;
                if (MODE == GQ_CAST) fast = fast && a.work[ci].nan_not == 0;
            }
            const int64_t c = (int64_t)M[u].ct * GQ_TC + k * GQ_CHUNK;
            bool use_fast = fast;
            if (MODE == GQ_CAST_AMAX) {
                uint32_t pm = 0; /* packed |x| maxima of the thread's chunks (NaN patterns order above Inf) */
#pragma unroll
                for (int h = 0; h < GQ_RPT; h++)
#pragma unroll
                    for (int v = 0; v < W; v++) pm = __vmaxu2(pm, w[u][h][v] & 0x7FFF7FFFu);
                const uint32_t tm = max(pm & 0xFFFFu, pm >> 16);
                const bool nan = tm > (uint32_t)gq_traits<DT>::NAN_ABOVE;
                if (!nan) {
                    best = max(best, __float_as_uint(gq_value<DT>(tm)));
                } else { /* v2's fold, with the lowest NaN's index */
#pragma unroll
                    for (int h = 0; h < GQ_RPT; h++)
                        gq_amax_chunk<DT>(w[u][h], e0[u] + (size_t)h * passC, best, nan_not);
                }
                use_fast = fast && !__any_sync(GQ_FULL, nan);
            }
#pragma unroll
            for (int h = 0; h < GQ_RPT; h++) {
                uint32_t b[4];
                if (use_fast) gq_mx2_encode<DT, false>(w[u][h], s, dummy, a.e5m2, b); /* warp-uniform */
                else gq2_encode<DT>(w[u][h], s, a.e5m2, b);
                const int64_t r = M[u].r0 + rr + h * GQ_PASS;
                if (a.q && r < M[u].m && c < C)
                    *(uint4 *)(a.q + e0[u] + (size_t)h * passC) = make_uint4(b[0], b[1], b[2], b[3]);
                if (a.qc) {
                    const int row = rr + h * GQ_PASS;
                    *(uint2 *)&tile[gq3_pos(row, 4 * k)] = make_uint2(b[0], b[1]);
                    *(uint2 *)&tile[gq3_pos(row, 4 * k + 2)] = make_uint2(b[2], b[3]);
                }
            }
            if (!a.qc) continue; /* block-uniform */
            __syncthreads();
            uint32_t v[8]; /* rows 8g .. 8g+7, columns 4cg .. 4cg+3 */
#pragma unroll
            for (int i = 0; i < 8; i++) v[i] = tile[(rd ^ (16 * (i & 1) | 2 * ((i >> 1) & 1))) + 32 * (i >> 1)];
            uint32_t lo[4], hi[4];
            gq3_transpose4(v[0], v[1], v[2], v[3], lo);
            gq3_transpose4(v[4], v[5], v[6], v[7], hi);
            const int64_t rs = M[u].r0 + 8 * g, cc = (int64_t)M[u].ct * GQ_TC + 4 * cg;
            if (rs < M[u].m) {
                const int n = (int)min((int64_t)8, M[u].m - rs);
                /* member i's transposed copy [C, m_i] starts at element row0 · C */
                uint8_t *p = a.qc + (size_t)M[u].row0 * (size_t)C + (size_t)cc * (size_t)M[u].m + (size_t)rs;
#pragma unroll
                for (int j = 0; j < 4; j++)
                    if (cc + j < C) gq3_store8(p + (size_t)j * (size_t)M[u].m, lo[j], hi[j], n);
            }
            __syncthreads(); /* the tile is rewritten by the next one */
        }
    }
    if (MODE == GQ_CAST_AMAX && ci >= 0) gq_flush(a.work + ci, best, nan_not);
}

/* ---- TENSOR, v4: a bulk-copy (TMA) load pipeline (the default where it applies; GLN_CUDA_QUANT_TMA=0
 * selects v3 / v2 for A/B runs) -------------------------------------------------------------------
 * Why: v2 / v3 hold a tile in registers between their 16-byte loads and its use (64 KB in flight
 * per SM at 2 blocks of 116-128 registers), so while a block converts and stores, its loads are
 * not in flight.  Here the tensor memory accelerator copies tiles into a ring of shared-memory
 * stages: bytes in flight cost no registers and stay in flight while the block computes.
 *   - Loads: one 2-D tensor map over the packed input [rows, cols] (bf16 / fp16), boxes of
 *     GQ_TR x 64 elements (128 rows x 128 bytes): one instruction per 16 KB box, issued by
 *     warp 0's lane 0 (a tile is one box, or two: TC below).  A box starts at the tile's packed row
 *     (member row0 + r0), so a member's partial last tile also loads the next member's first
 *     rows (masked below, as the register kernels mask them) and rows past the tensor / columns
 *     past cols load as zero (the tensor map's out-of-bounds fill).  The box's bytes land in
 *     full, out-of-bounds fill included, so the stage's barrier expects each issued box's 16 KB.
 *     The 128-byte swizzle (16-byte unit u of box row r at unit u ^ (r % 8); gq4_read) makes a
 *     warp's reads of its 8 rows x 4 chunks (TC = 64) free of bank conflicts, which an unswizzled
 *     128-byte pitch would make 2-way.
 *   - Ring: S stages (1024-byte aligned for the swizzle), a "full" mbarrier and a slot each
 *     (gq4_slot_t: the tile and its member, written by the producer before it arms the stage, so
 *     no consumer searches or walks).  The producer is warp 0 (gq4_issue): the whole warp finds
 *     the member (gq_locate_warp: one round of loads over a window of 32 members, where a binary
 *     search by one thread was ~log2(members) dependent loads; TC = 64 keeps lane 0's gq_locate,
 *     which its 80-register budget holds without spilling), lane 0 arms the barrier and issues.
 *     The prologue issues tiles 0..S-1; tile j waits on stage j % S with parity (j / S) % 2 and
 *     every thread copies its chunks (TC = 64: rows rr, rr + 64, 16 elements each) to registers.
 *     Without a transposed copy, the block barrier after those reads lets warp 0 refill the stage
 *     with tile j + S.  With one:
 *       - TC = 64: the transposed tile is a static double buffer, so one block barrier per tile
 *         suffices (tile j + 2 rewrites tile j's buffer only after every thread has passed tile
 *         j + 1's barrier, i.e. finished its reads of tile j), after which warp 0 refills the
 *         stage with tile j + S;
 *       - TC = 128: the transposed tile is staged in the consumed stage itself (as the block
 *         kernels' v3 does), which leaves room for 3 stages at 2 blocks per SM: a barrier after
 *         the chunk reads (every thread is out of stage j, and out of stage j - 1's transposed
 *         reads), after which warp 0 refills stage j - 1 with tile j - 1 + S, and the barrier
 *         between the transposed writes and reads; each thread fences its ordinary accesses of
 *         the stage against the async proxy (fence.proxy.async) after its transposed reads, so
 *         the next copy into the stage is ordered after them.  2 tiles in flight per block while
 *         one is converted.
 *   - Amax partials are flushed per warp (gq_flush_warp: shuffles and one atomic per warp, no
 *     block barrier) when the member changes, which the strided order over small members does at
 *     nearly every tile; max is exact in any order.
 *   - Everything after the registers hold the chunk is v3's code: the same member switch, the
 *     amax fold on packed pairs (v2's per-chunk fold with the NaN index for a thread whose tile
 *     holds a NaN), the same encodes (gq_mx2_encode without the NaN-code check when v3 would skip
 *     it, gq2_encode otherwise), the same transposed tile layout (gq3_pos) and stores.  The
 *     amax pass of current scaling (MODE GQ_AMAX) is the same loop without outputs.
 *   - A chunk outside the member (rows past m, columns past cols) reads as +0, as gq_load's
 *     missing elements do, so amax partials and NaN votes see only the member's elements.  With
 *     cols % 16 == 8 the last chunk of a row holds 8 valid columns (the other 8 are the zero fill)
 *     and stores 8 codes (gq4_store).
 * Conditions (gq4_refusal): bf16 / fp16 input without activation-on-load or dbias, x 16-byte
 * aligned, cols % 8 == 0 (the tensor map's 16-byte row stride), packed rows and cols below 2^31 -
 * 128 (the box coordinates are 32-bit); the outputs may have any alignment (stores check theirs).
 * Also only with v2 and v3 enabled: GLN_CUDA_QUANT_V2=0 / GLN_CUDA_QUANT_V3=0 keep selecting those
 * kernels.  GLN_CUDA_QUANT_TMA=2 requires this kernel: a pass it cannot take fails with
 * GLN_STATUS_NOT_SUPPORTED naming the reason (tests prove which kernel ran);
 * GLN_CUDA_QUANT_TMA_BLOCKS=n caps its grid (tests: a block turns its stage ring many times).
 * Every byte equals v3's (and v2's where v3 does not apply): the same element bits reach the same
 * functions, and the loads never change a bit.
 * Outputs are plain 16-byte stores (staging them in shared memory for bulk stores is a further
 * step only if the stores show up as the limit).
 *
 * Two tilings, one body (template parameter TC; GLN_CUDA_QUANT_TC=64 or =128 selects one, unset:
 * 128 where cols > 64, else 64, since a 128-column tile of a narrower tensor is half empty):
 *   TC = 64: tiles of 128 x 64, one box each; thread t owns column chunk k = t % 4 of rows
 *     rr = t / 4 and rr + 64 (GQ_RPT = 2).  A warp's rowwise store covers 8 rows x 64 bytes, half
 *     of each 128-byte line.  3 blocks of 256 threads per SM (<= 80 registers: ptxas -v, CUDA 13,
 *     sm_90a: 72-80, no spills) with 3 stages each: 3 x (48 KB ring + 16 KB transposed tiles +
 *     2 KB) = 200 KB of shared memory, 9 tiles = 144 KB in flight per SM.  H200, 16384 x 8192
 *     bf16: delayed R+T 71-73 % of a device copy, current R+T 52-54 % (ncu: 1.3 eligible warps per
 *     scheduler, ~14.7 thread instructions per element, DRAM 66 %).
 *   TC = 128 (bench/lab/lab_stream.cu: the same cast with whole-line transposed stores moved
 *     75.2 % of a copy with 128 x 64 tiles and 82.6 % with 128 x 128): a tile is two boxes of
 *     the same map side by side in one 32 KB stage (box b at byte b · 16 KB, each with its own
 *     128-byte swizzle).  The second box is issued only where it starts before cols, and the
 *     stage's barrier expects exactly the issued boxes' bytes (gq4_issue), as gq_mx3_kernel does;
 *     its chunks are then all past cols, so they are never read as data (replaced by +0 like
 *     every chunk outside the member) and the transposed phase skips that half (its columns are
 *     >= cols).  Thread t: lane l = t % 32 of warp w = t / 32 owns column chunk k = 4·bit3(l) +
 *     (l % 4) of rows rr + 32h, rr = 4w + 2·bit4(l) + bit2(l), h = 0..3 (RPT = 4; gq4_thread):
 *       - a warp's rowwise store covers 4 rows x 128 bytes, 4 whole lines;
 *       - stage reads (16 bytes a lane; conflicts are counted per 8 lanes): lanes 8q .. 8q+7 read
 *         rows r, r + 1 (r even) of one box at units 2(l % 4) (+1) ^ (row % 8); the rows' XOR
 *         keys differ in bit 0, so the 8 units are distinct: no conflict (the mapping with 8
 *         chunks of one row per 8 lanes would read units of the same parity of both boxes, 2-way);
 *       - transposed tile: one gq3_pos sub-tile per box, sub-tile 1 at 2050 words (2 words past a
 *         bank period) so that the 64-bit stores of lanes 16q .. 16q+15 (rows r, r + 1, both boxes,
 *         4 chunks) hit 32 distinct banks: box 0's words have bank bits 0-1 in {0, 1} or in {2, 3}
 *         (gq3_pos's key is even), box 1's the other two; the transposed reads (one sub-tile per
 *         instruction, all banks shifted alike) stay free of conflicts;
 *       - the transposed phase is v4's twice (columns 64b + 4cg .. of sub-tile b).
 *     Blocks and stages (228 KB of shared memory per SM, 1 KB of it reserved per block): a block
 *     holds S x 32 KB of ring + 1 KB of alignment slack + ~0.7 KB of barriers, slots and walk.
 *     3 stages: ~97.7 KB, 2 blocks per SM (16 warps; one block's barriers overlap the other's
 *     work).  Before the eighth session the transposed tile had its own double buffer (2 x 16.4
 *     KB), which left room for 2 stages at 2 blocks; in one H200 run (both strided, two rounds
 *     each) the two forms were within noise on the large tensors (16384 x 8192: 73.7 / 74.2 %
 *     of a copy staged in the stage, 73.7 / 74.6 % double-buffered) and the staged form ahead on
 *     the small ones (DeepSeek-like dy 50.5 / 48.8 against 46.5 / 46.6 %, Qwen3-like x 51.4 /
 *     49.4 against 47.3 / 48.2 %), so it stayed.  Registers (ptxas -v, CUDA 13, sm_90a; the
 *     limit at 2 blocks is 128): cast 111 / 113, amax 80, cast + amax 96 / 99 (bf16 / fp16), no
 *     spills.  TC = 64: 72-80 registers, cast 4 / 16 and cast + amax 16 bytes of spill (bf16 /
 *     fp16) since the slots.  512 threads per block was not taken: GQ_THREADS is the block
 *     reduction's and the transposed phase's size throughout this file.
 *   Current scaling's amax pass runs on the same TC, stage ring and grid as its cast pass
 *     (gq4_first_pass / gq_run_tensor), so block b covers the same tiles in both passes and the
 *     reversed cast pass starts on the tiles the amax pass read last (still in L2). */
#ifndef GQ4_STAGES
#define GQ4_STAGES 3
#endif
#ifndef GQ4_MIN_BLOCKS
#define GQ4_MIN_BLOCKS 3
#endif
#ifndef GQ4W_STAGES
#define GQ4W_STAGES 3 /* TC = 128 */
#endif
#ifndef GQ4W_MIN_BLOCKS
#define GQ4W_MIN_BLOCKS 2 /* TC = 128 */
#endif
#define GQ4_BOX_C 64                          /* columns of a box: a 128-byte row of bf16 / fp16 */
#define GQ4_BOX_BYTES (GQ_TR * GQ4_BOX_C * 2) /* one box: 16 KB */
#define GQ4_SUB_WORDS (GQ_TR * GQ4_BOX_C / 4 + 2) /* a transposed sub-tile (one box's codes) + bank offset */
static_assert(GQ4_BOX_C * 2 == 128, "a box row is one 128-byte swizzle span");

/* The geometry of tiling TC (the section's comment). */
template <int TC> struct gq4_geo {
    static_assert(TC == 64 || TC == 128, "v4 tiles are 64 or 128 columns wide");
    static constexpr int NB = TC / GQ4_BOX_C;          /* boxes of a tile */
    static constexpr int PER_ROW = TC / GQ_CHUNK;      /* chunks of a tile row */
    static constexpr int PASS = GQ_THREADS / PER_ROW;  /* rows between a thread's chunks */
    static constexpr int RPT = GQ_TR / PASS;           /* chunks per thread per tile */
    static constexpr int S = TC == 64 ? GQ4_STAGES : GQ4W_STAGES;
    static constexpr int MIN_BLOCKS = TC == 64 ? GQ4_MIN_BLOCKS : GQ4W_MIN_BLOCKS;
    static constexpr int STAGE = NB * GQ4_BOX_BYTES;   /* bytes of a stage */
    static constexpr int SMEM = S * STAGE + 1024;      /* dynamic: the ring + slack to align it */
    /* the transposed tile staged in the consumed stage (TC = 128) or in a static double buffer */
    static constexpr bool IN_STAGE = TC == 128;
    static_assert(!IN_STAGE || NB * GQ4_SUB_WORDS * 4 <= STAGE, "the transposed tile fits in its stage");
};
static_assert(gq4_geo<64>::RPT == GQ_RPT && gq4_geo<64>::PASS == GQ_PASS, "TC = 64 is the file's tile");

/* Thread t's tile row rr (its chunks are rows rr + h · PASS) and column chunk k (columns
 * 16k .. 16k+15 of the tile, in box k / 4); the mapping of TC = 128 is the section's. */
template <int TC> __device__ __forceinline__ void gq4_thread(int t, int &rr, int &k) {
    if (TC == 64) {
        rr = t / GQ_PER_ROW, k = t % GQ_PER_ROW;
    } else {
        const int l = t & 31;
        rr = 4 * (t >> 5) + 2 * (l >> 4) + ((l >> 2) & 1);
        k = 4 * ((l >> 3) & 1) + (l & 3);
    }
}

/* The producer's walk (warp 0's, kept in shared memory so it costs no registers): the next
 * tile to load and the member cursor of the loads. */
typedef struct gq4_prod {
    gq_cursor_t c;
    int64_t rt, ct;
} gq4_prod_t;

/* A stage's tile, written by the producer before it arms the stage's barrier: the member (its
 * cursor) and the tile's (row tile, column tile). */
typedef struct gq4_slot {
    gq_cursor_t c;
    int64_t rt, ct;
} gq4_slot_t;

/* Warp 0 (every lane): the producer's next tile.  The warp finds its member (gq_locate_warp;
 * TC = 64: lane 0, gq_locate), lane 0 writes it and the tile into `slot`, arms `bar` for the tile's boxes and loads them into
 * `dst`; the walk advances.  A 128-column tile's second box is issued only where it starts
 * before cols (else its chunks are all past cols and never read), and the barrier expects the
 * issued boxes' bytes. */
template <int TC>
__device__ __forceinline__ void gq4_issue(const gq_args_t &a, const CUtensorMap *map, gq4_prod_t *p, gq4_slot_t *slot,
                                          int64_t sq, int64_t sr, uint8_t *dst, uint64_t *bar) {
    if (TC == 128) gq_locate_warp(a, p->rt, &p->c);
    if ((threadIdx.x & 31) == 0) {
        if (TC == 64) gq_locate(a, p->rt, p->c); /* 80 registers: the warp's search would spill */
        const gq_cursor_t c = p->c;
        int64_t rt = p->rt, ct = p->ct;
        slot->c = c, slot->rt = rt, slot->ct = ct;
        const int32_t row = (int32_t)(c.row0 + (rt - c.t0) * GQ_TR), col = (int32_t)(ct * TC);
        const bool second = TC == 128 && (int64_t)col + GQ4_BOX_C < a.cols;
        gln_mbar_expect_tx(bar, second ? 2u * GQ4_BOX_BYTES : (uint32_t)GQ4_BOX_BYTES);
        gln_tma_load_2d(dst, map, bar, row, col);
        if (second) gln_tma_load_2d(dst + GQ4_BOX_BYTES, map, bar, row, col + GQ4_BOX_C);
        rt += sq, ct += sr;
        if (ct >= a.n_ct) ct -= a.n_ct, rt++;
        p->rt = rt, p->ct = ct;
    }
    __syncwarp(); /* the warp's next call sees the advanced walk */
}

/* gq_flush for one warp: its lanes' amax partials max-reduced, one atomic each (none when 0).
 * No block barrier, so a member switch at nearly every tile (the strided order over small
 * members) costs shuffles, not two barriers; 8 atomics per block and member visit instead of 1. */
__device__ __forceinline__ void gq_flush_warp(gq_amax_t *w, uint32_t best, unsigned long long nan_not) {
    for (int off = 16; off > 0; off >>= 1) {
        best = max(best, __shfl_xor_sync(GQ_FULL, best, off));
        nan_not = max(nan_not, __shfl_xor_sync(GQ_FULL, nan_not, off));
    }
    if ((threadIdx.x & 31) == 0) {
        if (best) atomicMax(&w->max_bits, best);
        if (nan_not) atomicMax(&w->nan_not, nan_not);
    }
}

/* The 8 words (16 elements, columns 16k .. 16k+15 of the box) of box row `row` of a swizzled box:
 * 16-byte units 2k and 2k+1 of the row, stored at unit ^ (row % 8). */
__device__ __forceinline__ void gq4_read(const uint8_t *box, int row, int k, uint32_t (&w)[8]) {
    const uint8_t *r = box + row * 128;
    const int x = row & 7;
    const uint4 u0 = *(const uint4 *)(r + (((2 * k) ^ x) << 4)), u1 = *(const uint4 *)(r + (((2 * k + 1) ^ x) << 4));
    w[0] = u0.x, w[1] = u0.y, w[2] = u0.z, w[3] = u0.w;
    w[4] = u1.x, w[5] = u1.y, w[6] = u1.z, w[7] = u1.w;
}

/* n (16, or 8 for a row's last chunk when cols % 16 == 8) codes at p: 16- or 8-byte stores where
 * p is aligned for them, else gq_store16's narrower ones. */
__device__ __forceinline__ void gq4_store(uint8_t *p, const uint32_t (&b)[4], int n) {
    const uintptr_t a = (uintptr_t)p;
    if (n == GQ_CHUNK && (a & 15) == 0) {
        *(uint4 *)p = make_uint4(b[0], b[1], b[2], b[3]);
    } else if ((a & 7) == 0 && (n == 8 || n == GQ_CHUNK)) {
        *(uint2 *)p = make_uint2(b[0], b[1]);
        if (n == GQ_CHUNK) *(uint2 *)(p + 8) = make_uint2(b[2], b[3]);
    } else {
        gq_store16(p, b, n);
    }
}

/* The scale step fused into the end of an amax pass (fin.done given): the last block to arrive
 * runs gq_scale_member for every member, one launch fewer than gq_tensor_scale_kernel after the
 * pass.  Every thread fences its amax atomics before its block arrives; the last block fences
 * again and reads the partials from L2.  Every thread of every block calls it. */
__device__ __forceinline__ void gq4_finish(const gq_scale_job_t &fin) {
    __shared__ int last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(fin.done, 1u) == gridDim.x - 1u;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int32_t i = (int32_t)threadIdx.x; i < fin.num; i += GQ_THREADS) {
        gq_amax_t w;
        w.nan_not = __ldcg(&fin.work[i].nan_not), w.max_bits = __ldcg(&fin.work[i].max_bits), w.pad_ = 0;
        gq_scale_member(fin, i, w);
    }
}

/* MODE GQ_AMAX (current scaling's amax pass), GQ_CAST (its cast pass: a.work holds the amax
 * pass's partials of the same x, on the same TC and grid) or GQ_CAST_AMAX (delayed scaling); TC
 * the tile's columns (a.n_ct counts TC-column tiles).  `map`: gq4_refusal's map of a.x (boxes of
 * 128 rows x 64 columns, 128-byte swizzle). */
template <int DT, int MODE, int TC>
__global__ void __launch_bounds__(GQ_THREADS, gq4_geo<TC>::MIN_BLOCKS)
    gq_tensor4_kernel(const __grid_constant__ CUtensorMap map, const gq_args_t a, const gq_scale_job_t fin) {
    static_assert(DT != GQ_F32, "v4: 2-byte inputs (a box row is 128 bytes)");
    typedef gq4_geo<TC> G;
    constexpr int S = G::S, W = gq_traits<DT>::W, RPT = G::RPT, PASS = G::PASS, NB = G::NB;
    constexpr bool CASTS = MODE != GQ_AMAX, IN_STAGE = G::IN_STAGE;
    constexpr bool BUF = CASTS && !IN_STAGE; /* the static double buffer of the transposed tile */
    /* transposed, x2; sub-tile b (box b's codes) at word b · GQ4_SUB_WORDS */
    __shared__ __align__(16) uint32_t tile[BUF ? 2 : 1][BUF ? NB * GQ4_SUB_WORDS : 1];
    __shared__ __align__(8) uint64_t full[S];
    __shared__ gq4_slot_t slot[S];
    __shared__ gq4_prod_t prod;
    extern __shared__ __align__(1024) uint8_t gq4_dyn[];
    gln_pdl_wait(); /* launched by gln_cuda_launch: the previous kernels' writes first */
    gln_pdl_launch_dependents();
    const gq_walk_t wk = gq_walk(a);
    const bool finish = MODE != GQ_CAST && fin.done != NULL; /* the scale step fused (gq4_finish) */
    if (wk.count <= 0) {
        if (finish) gq4_finish(fin);
        return;
    }
    /* the ring, 1024-byte aligned in the shared window (the 128-byte swizzle repeats every 1024) */
    uint8_t *const ring = gq4_dyn + ((1024u - (gln_smem_addr(gq4_dyn) & 1023u)) & 1023u);
    const int t = threadIdx.x;
    int rr, k;
    gq4_thread<TC>(t, rr, k);
    const int kb = k & 3, box = k >> 2; /* the chunk within its box, the box */
    const int lane = t & 31, g = lane & 15, cg = 2 * (t >> 5) + (lane >> 4); /* transposed phase */
    const int64_t C = a.cols, count = wk.count;
    const size_t passC = (size_t)PASS * (size_t)C;
    const int rd = 128 * g + ((16 * (g & 1)) | (cg ^ (2 * (g >> 1)))); /* as in gq_tensor3_kernel */
    const float dummy[GQ_CHUNK] = {};
    /* the walk as (row tile, column tile), as in gq_mx2_kernel */
    const int64_t sq = wk.step >= 0 ? wk.step / a.n_ct : -((-wk.step + a.n_ct - 1) / a.n_ct);
    const int64_t sr = wk.step - sq * a.n_ct;
    if (t == 0) {
#pragma unroll
        for (int s = 0; s < S; s++) gln_mbar_init(&full[s], 1);
        gln_mbar_init_fence();
        prod.rt = wk.first / a.n_ct, prod.ct = wk.first % a.n_ct;
        prod.c.i = 0, prod.c.t0 = 0, prod.c.t1 = -1; /* no member yet: the first search is a full one */
    }
    if (t < 32) {
        __syncwarp();
        for (int s = 0; s < S && s < count; s++)
            gq4_issue<TC>(a, &map, &prod, &slot[s], sq, sr, ring + s * G::STAGE, &full[s]);
    }
    __syncthreads(); /* the barriers are initialized before anyone waits on them */
    int32_t ci = -1; /* the member whose amax partial / scale is in use (none yet) */
    float s = 0.0f;
    bool fast = false; /* block-uniform: s finite and nonzero (CAST: and the member has no NaN) */
    uint32_t best = 0;
    unsigned long long nan_not = 0;
    int stage = 0;
    uint32_t parity = 0;
    const bool tr = CASTS && a.qc != NULL; /* block-uniform: a transposed phase (with its barrier) */
    for (int64_t j = 0; j < count; j++) {
        uint8_t *const st = ring + stage * G::STAGE;
        gln_mbar_wait(&full[stage], parity);
        const gq_cursor_t lc = slot[stage].c; /* read before the stage is refilled */
        const int64_t rt = slot[stage].rt, ct = slot[stage].ct;
        if (lc.i != ci) { /* block-uniform: the next member */
            if (MODE != GQ_CAST && ci >= 0) gq_flush_warp(a.work + ci, best, nan_not), best = 0, nan_not = 0;
            ci = lc.i;
            if (CASTS) {
                s = __ldg(a.scale + ci);
                /* x·s is NaN only for a NaN x; GLN_CUDA_FP8_CVT=0 builds encode everything in software */
                fast = GLN_CUDA_FP8_CVT && (__float_as_uint(s) & 0x7FFFFFFFu) < 0x7F800000u && s != 0.0f;
                if (MODE == GQ_CAST) fast = fast && a.work[ci].nan_not == 0;
            }
        }
        const int64_t r0 = (rt - lc.t0) * GQ_TR, c = ct * TC + k * GQ_CHUNK;
        const int nc = c < C ? (int)min((int64_t)GQ_CHUNK, C - c) : 0; /* 16, 8 or 0 */
        const size_t e0 = (size_t)(lc.row0 + r0 + rr) * (size_t)C + (size_t)c; /* chunk h = 0's element */
        bool ok[RPT]; /* chunk h (row rr + h · PASS) is in the member */
        uint32_t w[RPT][W];
#pragma unroll
        for (int h = 0; h < RPT; h++) {
            ok[h] = nc > 0 && r0 + rr + h * PASS < lc.m;
            /* a chunk past cols may lie in a second box that was not issued: read, then replaced */
            gq4_read(st + box * GQ4_BOX_BYTES, rr + h * PASS, kb, w[h]);
            if (!ok[h]) {
#pragma unroll
                for (int v = 0; v < W; v++) w[h][v] = 0u; /* not the member's: +0, like gq_load */
            }
        }
        if (!tr) { /* every thread's words are out of the stage: refill it */
            __syncthreads();
            if (t < 32 && j + S < count) gq4_issue<TC>(a, &map, &prod, &slot[stage], sq, sr, st, &full[stage]);
        } else if (IN_STAGE) {
            /* every thread is out of this stage (its words are read) and out of the previous one
             * (tile j - 1's transposed reads): this stage may take the transposed tile, the
             * previous one its next tile, j - 1 + S */
            __syncthreads();
            const int prev = stage == 0 ? S - 1 : stage - 1;
            if (t < 32 && j >= 1 && j - 1 + S < count)
                gq4_issue<TC>(a, &map, &prod, &slot[prev], sq, sr, ring + prev * G::STAGE, &full[prev]);
        }
        bool use_fast = fast;
        if (MODE != GQ_CAST) {
            uint32_t pm = 0; /* packed |x| maxima of the thread's chunks (NaN patterns order above Inf) */
#pragma unroll
            for (int h = 0; h < RPT; h++)
#pragma unroll
                for (int v = 0; v < W; v++) pm = __vmaxu2(pm, w[h][v] & 0x7FFF7FFFu);
            const uint32_t tm = max(pm & 0xFFFFu, pm >> 16);
            const bool nan = tm > (uint32_t)gq_traits<DT>::NAN_ABOVE;
            if (!nan) {
                best = max(best, __float_as_uint(gq_value<DT>(tm)));
            } else { /* v2's fold, with the lowest NaN's index */
#pragma unroll
                for (int h = 0; h < RPT; h++) gq_amax_chunk<DT>(w[h], e0 + (size_t)h * passC, best, nan_not);
            }
            if (MODE == GQ_CAST_AMAX) use_fast = fast && !__any_sync(GQ_FULL, nan);
        }
        if (CASTS) {
            uint32_t *const tb = IN_STAGE ? (uint32_t *)st : tile[BUF ? (j & 1) : 0];
            uint32_t *const tw = tb + box * GQ4_SUB_WORDS; /* this chunk's sub-tile */
#pragma unroll
            for (int h = 0; h < RPT; h++) {
                uint32_t b[4];
                if (use_fast) gq_mx2_encode<DT, false>(w[h], s, dummy, a.e5m2, b); /* warp-uniform */
                else gq2_encode<DT>(w[h], s, a.e5m2, b);
                if (a.q && ok[h]) gq4_store(a.q + e0 + (size_t)h * passC, b, nc);
                if (tr) {
                    const int row = rr + h * PASS;
                    *(uint2 *)&tw[gq3_pos(row, 4 * kb)] = make_uint2(b[0], b[1]);
                    *(uint2 *)&tw[gq3_pos(row, 4 * kb + 2)] = make_uint2(b[2], b[3]);
                }
            }
            if (tr) {
                __syncthreads(); /* the transposed tile is written; every thread is past its stage reads */
                if (!IN_STAGE && t < 32 && j + S < count)
                    gq4_issue<TC>(a, &map, &prod, &slot[stage], sq, sr, st, &full[stage]);
#pragma unroll
                for (int bx = 0; bx < NB; bx++) {
                    const int64_t cb = ct * TC + bx * GQ4_BOX_C; /* the sub-tile's first column */
                    if (cb >= C) break;                         /* block-uniform: nothing of it is stored */
                    const uint32_t *const sub = tb + bx * GQ4_SUB_WORDS;
                    uint32_t v[8]; /* rows 8g .. 8g+7, columns 4cg .. 4cg+3 of the sub-tile */
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        v[i] = sub[(rd ^ (16 * (i & 1) | 2 * ((i >> 1) & 1))) + 32 * (i >> 1)];
                    uint32_t lo[4], hi[4];
                    gq3_transpose4(v[0], v[1], v[2], v[3], lo);
                    gq3_transpose4(v[4], v[5], v[6], v[7], hi);
                    const int64_t rs = r0 + 8 * g, cc = cb + 4 * cg;
                    if (rs < lc.m) {
                        const int n = (int)min((int64_t)8, lc.m - rs);
                        /* member i's transposed copy [C, m_i] starts at element row0 · C */
                        uint8_t *p = a.qc + (size_t)lc.row0 * (size_t)C + (size_t)cc * (size_t)lc.m + (size_t)rs;
#pragma unroll
                        for (int q = 0; q < 4; q++)
                            if (cc + q < C) gq3_store8(p + (size_t)q * (size_t)lc.m, lo[q], hi[q], n);
                    }
                }
                /* IN_STAGE: the stage's next copy is issued after the next tile's first barrier,
                 * which every thread reaches after these reads; its ordinary accesses to the stage
                 * are ordered before that copy's writes by this fence.  Else no barrier here: the
                 * next tile writes the other buffer (see above). */
                if (IN_STAGE) gln_fence_async_smem();
            }
        }
        if (++stage == S) stage = 0, parity ^= 1u;
    }
    if (MODE != GQ_CAST && ci >= 0) gq_flush_warp(a.work + ci, best, nan_not);
    if (finish) gq4_finish(fin);
}

/* ---- host side ---------------------------------------------------------------------------- */

static int gq_dt(gln_dtype_t d) { return d == GLN_DTYPE_FP32 ? GQ_F32 : d == GLN_DTYPE_BF16 ? GQ_BF16 : GQ_F16; }

static int gq_aligned(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* GLN_CUDA_QUANT_PIPE=0: the load-then-use kernels (to measure what the software pipeline gains). */
static int gq_pipe_enabled(void) { return gln_cuda_env_switch("GLN_CUDA_QUANT_PIPE"); }

template <int DT, int MODE> static gq_kernel_t gq_tensor_pick2(int vec, int pipe) {
    if (pipe) return vec ? gq_tensor_kernel<DT, true, MODE, true> : gq_tensor_kernel<DT, false, MODE, true>;
    return vec ? gq_tensor_kernel<DT, true, MODE, false> : gq_tensor_kernel<DT, false, MODE, false>;
}

/* GLN_CUDA_QUANT_V2=0: the first kernels (gq_tensor_kernel for every TENSOR pass), to A/B them
 * against the v2 ones in one run (bench/gpu_quantize prints which ran). */
static int gq_v2_enabled(void) { return gln_cuda_env_switch("GLN_CUDA_QUANT_V2"); }

template <int DT, int MODE> static gq_kernel_t gq_tensor2_pick(int vec) {
    return vec ? gq_tensor2_kernel<DT, true, MODE> : gq_tensor2_kernel<DT, false, MODE>;
}

/* GLN_CUDA_QUANT_V3=0: gq_tensor2_kernel for the cast passes that gq_tensor3_kernel takes by
 * default (bf16 / fp16 on the 16-byte path without dbias), to A/B them; read at every call. */
static int gq_v3_enabled(void) { return gln_cuda_env_switch("GLN_CUDA_QUANT_V3"); }

template <int MODE> static gq_kernel_t gq_tensor_pick(int dt, int vec) {
    if ((MODE & GQ_DBIAS) == 0 && gq_v2_enabled()) { /* the dbias variants stay on v1 */
        constexpr int M = MODE & GQ_MODE_MASK;
        if ((M == GQ_CAST || M == GQ_CAST_AMAX) && vec && dt != GQ_F32 && gq_v3_enabled()) {
            constexpr int M3 = M == GQ_CAST ? GQ_CAST : GQ_CAST_AMAX; /* an instantiable mode */
            return dt == GQ_BF16 ? gq_tensor3_kernel<GQ_BF16, M3> : gq_tensor3_kernel<GQ_F16, M3>;
        }
        if (dt == GQ_F32) return gq_tensor2_pick<GQ_F32, M>(vec);
        if (dt == GQ_BF16) return gq_tensor2_pick<GQ_BF16, M>(vec);
        return gq_tensor2_pick<GQ_F16, M>(vec);
    }
    const int pipe = gq_pipe_enabled();
    if (dt == GQ_F32) return gq_tensor_pick2<GQ_F32, MODE>(vec, pipe);
    if (dt == GQ_BF16) return gq_tensor_pick2<GQ_BF16, MODE>(vec, pipe);
    return gq_tensor_pick2<GQ_F16, MODE>(vec, pipe);
}

template <int DT, bool DBIAS> static gq_kernel_t gq_mx_pick3(int vec, int pipe) {
    if (pipe) return vec ? gq_mx_kernel<DT, true, true, DBIAS> : gq_mx_kernel<DT, false, true, DBIAS>;
    return vec ? gq_mx_kernel<DT, true, false, DBIAS> : gq_mx_kernel<DT, false, false, DBIAS>;
}

template <int DT> static gq_kernel_t gq_mx_pick2(int vec, int pipe, int dbias) {
    return dbias ? gq_mx_pick3<DT, true>(vec, pipe) : gq_mx_pick3<DT, false>(vec, pipe);
}

/* GLN_CUDA_QUANT_MX=1: gq_mx_kernel (v1) for every MXFP8 pass, to A/B it against gq_mx2_kernel;
 * read at every call. */
static int gq_mx_v1_forced(void) {
    const char *e = getenv("GLN_CUDA_QUANT_MX");
    return e && e[0] == '1';
}

/* gq_mx2_kernel for 2-byte inputs on the 16-byte path without dbias; gq_mx_kernel otherwise
 * (GLN_CUDA_QUANT_PIPE=0 selects its load-then-use loop). */
static gq_kernel_t gq_mx_pick(int dt, int vec, int dbias) {
    if (vec && !dbias && dt != GQ_F32 && !gq_mx_v1_forced())
        return dt == GQ_BF16 ? gq_mx2_kernel<GQ_BF16> : gq_mx2_kernel<GQ_F16>;
    const int pipe = gq_pipe_enabled();
    if (dt == GQ_F32) return gq_mx_pick2<GQ_F32>(vec, pipe, dbias);
    if (dt == GQ_BF16) return gq_mx_pick2<GQ_BF16>(vec, pipe, dbias);
    return gq_mx_pick2<GQ_F16>(vec, pipe, dbias);
}

/* Blocks of a persistent tile kernel over at most `tiles` tiles: as many as fit on the device at
 * once, or one per SM when one_per_sm (never more than the tiles). */
static gln_status_t gq_grid(const void *kernel, int64_t tiles, int64_t *blocks, const char *call, size_t smem = 0,
                            int one_per_sm = 0) {
    int dev = 0, sms = 0, per_sm = 0;
    GLN_TRY(gln_cuda_check(cudaGetDevice(&dev), call, "cudaGetDevice"));
    GLN_TRY(gln_cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), call,
                           "cudaDeviceGetAttribute(multiprocessors)"));
    GLN_TRY(gln_cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, GQ_THREADS, smem), call,
                           "cudaOccupancyMaxActiveBlocksPerMultiprocessor"));
    *blocks = (int64_t)(sms > 0 ? sms : 1) * (per_sm > 0 && !one_per_sm ? per_sm : 1);
    if (*blocks > tiles) *blocks = tiles;
    return GLN_STATUS_SUCCESS;
}

/* Launch a persistent tile kernel on `blocks` blocks (nothing to do without tiles). */
static gln_status_t gq_launch_on(gq_kernel_t kernel, const gq_args_t *a, int64_t tiles, int64_t blocks,
                                 cudaStream_t stream, const char *call, const char *name) {
    if (tiles <= 0 || blocks <= 0) return GLN_STATUS_SUCCESS;
    kernel<<<(unsigned int)blocks, GQ_THREADS, 0, stream>>>(*a);
    return gln_cuda_check_launch(call, name);
}

static gln_status_t gq_launch(gq_kernel_t kernel, const gq_args_t *a, int64_t tiles, cudaStream_t stream,
                              const char *call, const char *name) {
    if (tiles <= 0) return GLN_STATUS_SUCCESS;
    int64_t blocks = 0;
    GLN_TRY(gq_grid((const void *)kernel, tiles, &blocks, call));
    return gq_launch_on(kernel, a, tiles, blocks, stream, call, name);
}

/* Scratch of one call: tile starts [num + 1], amax partials [num], scales [num] (current scaling
 * without out->scale).  A single tensor uses the context's fixed buffers instead (no allocation). */
typedef struct gq_scratch {
    void *block;
    int64_t *tstart;
    gq_amax_t *work;
    unsigned int *done; /* TENSOR: gq4_finish's arrival counter */
    float *scale;
} gq_scratch_t;

static gln_status_t gq_scratch_get(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *out,
                                   int32_t num, int grouped, gq_scratch_t *sc, const char *call) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    const int tensor = cfg->mode == GLN_SCALING_TENSOR, own_scale = tensor && !cfg->delayed && !out->scale;
    memset(sc, 0, sizeof *sc);
    if (!grouped) {
        sc->work = (gq_amax_t *)s->amax_work; /* 16 bytes, the layout of gq_amax_t */
        sc->done = tensor ? (unsigned int *)((char *)s->amax_work + 128) : NULL; /* within its 256 bytes */
        sc->scale = own_scale ? s->scale_tmp : out->scale;
        return GLN_STATUS_SUCCESS;
    }
    const size_t n = (size_t)num, b_ts = (n + 1) * sizeof(int64_t), b_work = tensor ? n * sizeof(gq_amax_t) : 0;
    const size_t b_done = tensor ? 16 : 0, b_scale = own_scale ? n * sizeof(float) : 0;
    GLN_TRY(gln_cuda_scratch_alloc(ctx, b_ts + b_work + b_done + b_scale, &sc->block, call));
    sc->tstart = (int64_t *)sc->block;
    sc->work = tensor ? (gq_amax_t *)((char *)sc->block + b_ts) : NULL;
    sc->done = tensor ? (unsigned int *)((char *)sc->block + b_ts + b_work) : NULL;
    sc->scale = own_scale ? (float *)((char *)sc->block + b_ts + b_work + b_done) : out->scale;
    return GLN_STATUS_SUCCESS;
}

/* The tile order (gq_walk): round-robin across blocks for MXFP8, a band of consecutive tiles per
 * block for the per-tensor kernels (whose current-scaling cast pass relies on the band to find
 * its tiles in L2).  The order matters little: in one H200 run on 16384 x 8192 bf16, MXFP8 took
 * 253 us strided against 257 contiguous, current R 199 / 214, current R+T 291 / 301, delayed
 * R+T 224 / 220 (bench/RESULTS.md, 2026-12-03 third session) — the DRAM locality of the tile
 * walk was not what held those kernels at ~50 % of a copy.  Once the kernels run near the copy it
 * does matter: MXFP8 v3 on 16384 x 8192 69.5 % of a copy contiguous, 81.0 % strided; delayed
 * per-tensor v4 71.4 / 75.6 %, but on the small grouped x of the Qwen3-like shape 49.0 / 42.0 %
 * (seventh session).  With the member search in one warp and the amax flushed per warp (eighth
 * session) the strided order wins for delayed scaling on every MoE tensor but DeepSeek-like dy
 * (16384 x 8192 71.2 -> 73.6 %, Qwen3-like x 48.5 -> 50.5 %, Qwen3-like weights 73.9 -> 77.3 %;
 * dy 47.7 -> 46.2 %), so delayed scaling walks strided too.  Current scaling keeps its bands: its
 * cast pass starts where its amax pass ended (the tiles still in L2), and strided it lost on the
 * small members (Qwen3-like x 35.5 -> 31.2 %, grouped / one tensor 1.02 -> 1.11).
 * GLN_CUDA_QUANT_ORDER=strided or =contiguous forces one order; read once per process. */
static int gq_order_forced(void) { /* -1: not forced; else 1 strided, 0 contiguous */
    static int forced = -2;          /* -2: not read yet */
    if (forced == -2) {
        const char *e = getenv("GLN_CUDA_QUANT_ORDER");
        forced = e && !strcmp(e, "strided") ? 1 : e && !strcmp(e, "contiguous") ? 0 : -1;
    }
    return forced;
}
static int gq_strided(const gln_quant_config_t *cfg) {
    const int forced = gq_order_forced();
    if (forced >= 0) return forced;
    return cfg->mode == GLN_SCALING_MXFP8_1D || (cfg->mode == GLN_SCALING_TENSOR && cfg->delayed);
}

static gq_args_t gq_args_make(const gln_quant_config_t *cfg, const gln_tensor_t *in, const gln_tensor_t *out,
                              int32_t num, const gln_cuda_plan_t *plan, const gq_scratch_t *sc) {
    gq_args_t a;
    memset(&a, 0, sizeof a);
    a.strided = gq_strided(cfg);
    const int tensor = cfg->mode == GLN_SCALING_TENSOR;
    a.x = in->data;
    a.q = cfg->rowwise ? (uint8_t *)out->data : NULL;
    a.qc = cfg->columnwise ? (uint8_t *)out->col_data : NULL;
    if (!tensor) {
        a.s = cfg->rowwise ? (uint8_t *)out->scale_inv : NULL;
        a.cs = cfg->columnwise ? (uint8_t *)out->col_scale_inv : NULL;
    }
    a.scale = sc->scale;
    a.work = sc->work;
    if (plan) a.rows = plan->rows, a.tstart = sc->tstart, a.srow = plan->srow, a.scol = plan->scol;
    a.single_rows = in->rows;
    a.cols = in->cols;
    a.n_ct = gln_ceil_div(in->cols, GQ_TC);
    a.nb = gln_ceil_div(in->cols, 32);
    a.gc_r = gln_round_up(a.nb, 4);
    a.gc_c = gln_round_up(in->cols, 128);
    a.num = num;
    a.e5m2 = cfg->fp8_dtype == GLN_DTYPE_FP8_E5M2;
    a.nanp = cfg->amax_nan_propagate;
    a.floor_rule = cfg->e8m0_rounding == GLN_E8M0_ROUND_FLOOR;
    a.emax = a.e5m2 ? 15 : 8; /* the OCP rule's emax_elem: exponent of the largest power of two <= max */
    a.fp8_max = a.e5m2 ? GLN_FP8_E5M2_MAX : GLN_FP8_E4M3_MAX;
    return a;
}

/* 16-byte chunks everywhere: rows of a multiple of 16 elements, buffers 16-byte aligned (member
 * offsets are then multiples of 16 elements too). */
static int gq_vec_ok(const gq_args_t *a) {
    return a->cols % GQ_CHUNK == 0 && gq_aligned(a->x) && gq_aligned(a->q) && gq_aligned(a->qc);
}

/* GLN_CUDA_QUANT_REVERSE=0 turns the reversed cast pass off (to measure what it gains). */
static int gq_reverse_enabled(void) { return gln_cuda_env_switch("GLN_CUDA_QUANT_REVERSE"); }

/* GLN_CUDA_QUANT_TMA: 0 selects v3 / v2 where gq_tensor4_kernel (the TMA pipeline) is the default,
 * to A/B them; 2 requires gq_tensor4_kernel: a per-tensor pass it cannot take fails with
 * GLN_STATUS_NOT_SUPPORTED saying why (tests and benchmarks prove which kernel ran).  Unset or
 * anything else: v4 where it applies.  Read at every call.  Returns 0 (off), 1 (where it applies)
 * or 2 (required). */
static int gq_tma_mode(void) {
    const char *e = getenv("GLN_CUDA_QUANT_TMA");
    if (e && e[0] == '0') return 0;
    return e && e[0] == '2' ? 2 : 1;
}

/* GLN_CUDA_QUANT_TC=64 / =128: gq_tensor4_kernel's tile columns; unset or anything else: 128 where
 * cols > 64, else 64 (the section's comment).  Read at every call. */
static int gq4_tc(int64_t cols) {
    const char *e = getenv("GLN_CUDA_QUANT_TC");
    if (e && strcmp(e, "64") == 0) return 64;
    if (e && strcmp(e, "128") == 0) return 128;
    return cols > 64 ? 128 : 64;
}

/* GLN_CUDA_QUANT_TMA_BLOCKS=n caps gq_tensor4_kernel's grid at n blocks (both passes of current
 * scaling share it), so that a block walks many tiles and members through its stage ring on a
 * small tensor (tests) or to measure fewer blocks; read at every call. */
static int64_t gq4_block_cap(void) { return gln_cuda_env_grid_cap("GLN_CUDA_QUANT_TMA_BLOCKS"); }

/* Why gq_tensor4_kernel cannot take this pass (NULL: it can, with *map encoded; *empty: there is
 * no element, and the register kernels' launches do nothing).  The section's conditions; the
 * switches of the older kernels keep selecting them, so each switch names one kernel. */
static const char *gq4_refusal(const gq_args_t *a, const gln_tensor_t *in, CUtensorMap *map, int *empty) {
    *empty = 0;
    if (!gq_v2_enabled()) return "GLN_CUDA_QUANT_V2=0 selects the v1 kernels";
    if (!gq_v3_enabled()) return "GLN_CUDA_QUANT_V3=0 selects gq_tensor2_kernel";
    if (in->dtype != GLN_DTYPE_BF16 && in->dtype != GLN_DTYPE_FP16) return "the input is not bf16 or fp16";
    if (a->dpart) return "a fused dbias runs on gq_tensor_kernel";
    if (a->act != GLN_ACT_LOAD_NONE) return "an activation on load runs on gq_tensor2_kernel / gq_tensor_kernel";
    if (in->rows <= 0 || a->cols <= 0) {
        *empty = 1;
        return "the tensor is empty";
    }
    if (a->cols % 8 != 0) return "cols is not a multiple of 8";
    if (a->cols > INT32_MAX - 128 || in->rows > INT32_MAX - GQ_TR) return "rows or cols exceed 2^31 - 129";
    if (!gq_aligned(a->x)) return "x is not 16-byte aligned";
    if (gln_tma_encode_2d(map, in->dtype == GLN_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                           : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                          a->x, (uint64_t)in->rows, (uint64_t)a->cols, (uint64_t)a->cols * 2u, GQ_TR, GQ4_BOX_C,
                          CU_TENSOR_MAP_SWIZZLE_128B) != 0)
        return "the driver refused the tensor map";
    return NULL;
}

typedef void (*gq4_kernel_t)(CUtensorMap, gq_args_t, gq_scale_job_t);

/* gq_tensor4_kernel<DT, MODE, TC> with its dynamic shared memory allowed on the current device
 * (set once per device and instantiation: more than the default 48 KB needs the attribute). */
template <int DT, int MODE, int TC> static gln_status_t gq4_get(int dev, gq4_kernel_t *k, const char *call) {
    static unsigned long long ready = 0; /* bit d: set on device d (< 64; others set it every call) */
    *k = gq_tensor4_kernel<DT, MODE, TC>;
    const unsigned long long bit = dev >= 0 && dev < 64 ? 1ull << dev : 0ull;
    if (bit && (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) & bit)) return GLN_STATUS_SUCCESS;
    GLN_TRY(gln_cuda_check(cudaFuncSetAttribute((const void *)*k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                gq4_geo<TC>::SMEM),
                           call, "cudaFuncSetAttribute(gq_tensor4_kernel, MaxDynamicSharedMemorySize)"));
    if (bit) __atomic_fetch_or(&ready, bit, __ATOMIC_RELEASE);
    return GLN_STATUS_SUCCESS;
}

template <int MODE, int TC> static gln_status_t gq4_pick_tc(int dt, gq4_kernel_t *k, const char *call) {
    int dev = 0;
    GLN_TRY(gln_cuda_check(cudaGetDevice(&dev), call, "cudaGetDevice"));
    return dt == GQ_BF16 ? gq4_get<GQ_BF16, MODE, TC>(dev, k, call) : gq4_get<GQ_F16, MODE, TC>(dev, k, call);
}

/* The kernel of MODE for tile columns tc (64 or 128) and its dynamic shared memory. */
template <int MODE>
static gln_status_t gq4_pick(int dt, int tc, gq4_kernel_t *k, size_t *smem, const char *call) {
    *smem = tc == 128 ? (size_t)gq4_geo<128>::SMEM : (size_t)gq4_geo<64>::SMEM;
    return tc == 128 ? gq4_pick_tc<MODE, 128>(dt, k, call) : gq4_pick_tc<MODE, 64>(dt, k, call);
}

/* fin: the fused scale step of an amax pass (fin.done NULL: none); with it, the pass runs even
 * without tiles (its blocks still arrive). */
static gln_status_t gq4_launch(gq4_kernel_t k, size_t smem, const CUtensorMap *map, const gq_args_t *a,
                               const gq_scale_job_t *fin, int64_t tiles, int64_t blocks, cudaStream_t st,
                               const char *call, const char *name) {
    if (!fin->done && (tiles <= 0 || blocks <= 0)) return GLN_STATUS_SUCCESS;
    if (blocks <= 0) blocks = 1;
    GLN_TRY(gln_cuda_check(gln_cuda_launch(k, dim3((unsigned int)blocks), dim3(GQ_THREADS), smem, st, *map, *a, *fin),
                           call, name));
    return gln_cuda_check_launch(call, name);
}

/* What gq4_first_pass hands on to current scaling's cast pass: the arguments with a.n_ct in the
 * pass's tiles, their count, the grid and the kernel's tiling. */
typedef struct gq4_run {
    gq_args_t a;
    int64_t tiles, blocks;
    int tc;
} gq4_run_t;

/* The first pass of gq_run_tensor on gq_tensor4_kernel (current: the amax pass, on the grid and
 * tiling both passes share, handed on in *run; delayed: cast + amax), or *map_ok = 0 where the
 * pass is not v4's (the caller then runs v3 / v2), unless GLN_CUDA_QUANT_TMA=2 requires v4:
 * GLN_STATUS_NOT_SUPPORTED naming the reason.  tiles: gq_members' bound in 64-column tiles; fin:
 * the scale step the pass fuses (fin->done NULL: none). */
static gln_status_t gq4_first_pass(const gln_quant_config_t *cfg, const gq_args_t *a, const gln_tensor_t *in,
                                   const gq_scale_job_t *fin, int64_t tiles, cudaStream_t st, CUtensorMap *map,
                                   int *map_ok, gq4_run_t *run, const char *call) {
    *map_ok = 0;
    const int mode = gq_tma_mode();
    if (mode == 0) return GLN_STATUS_SUCCESS;
    int empty = 0;
    const char *why = gq4_refusal(a, in, map, &empty);
    if (why) {
        if (mode < 2 || empty) return GLN_STATUS_SUCCESS;
        return gln_fail(GLN_STATUS_NOT_SUPPORTED,
                        "%s: GLN_CUDA_QUANT_TMA=2 requires gq_tensor4_kernel, which cannot take this pass: %s "
                        "(%s, %lld x %lld)",
                        call, why, gln_dtype_name(in->dtype), (long long)in->rows, (long long)a->cols);
    }
    *map_ok = 1;
    const int dt = gq_dt(in->dtype), tc = gq4_tc(a->cols);
    /* the same row tiles (gq_members' bound: tiles = row_tiles · a->n_ct, cols > 0 here), in tc-column tiles */
    run->a = *a;
    run->a.n_ct = gln_ceil_div(a->cols, tc);
    run->tiles = tiles / a->n_ct * run->a.n_ct;
    run->tc = tc;
    const int64_t cap = gq4_block_cap();
    gq4_kernel_t k = NULL;
    size_t smem = 0;
    if (cfg->delayed) {
        GLN_TRY(gq4_pick<GQ_CAST_AMAX>(dt, tc, &k, &smem, call));
        /* one tensor: one block per SM, not the two that fit.  On the H200 that took 16384 x 8192
         * from 80 to 87 % of a copy (8192-24576 rows, 8064-16384 columns alike); a grouped tensor
         * keeps two, with which it runs 15-25 points faster (bench/RESULTS.md, twelfth session) */
        GLN_TRY(gq_grid((const void *)k, run->tiles, &run->blocks, call, smem, !a->rows));
        if (cap > 0 && run->blocks > cap) run->blocks = cap;
        return gq4_launch(k, smem, map, &run->a, fin, run->tiles, run->blocks, st, call,
                          "gq_tensor4_kernel<cast+amax>");
    }
    gq4_kernel_t cast = NULL;
    size_t cast_smem = 0;
    int64_t cast_blocks = 0;
    GLN_TRY(gq4_pick<GQ_AMAX>(dt, tc, &k, &smem, call));
    GLN_TRY(gq4_pick<GQ_CAST>(dt, tc, &cast, &cast_smem, call));
    GLN_TRY(gq_grid((const void *)k, run->tiles, &run->blocks, call, smem));
    GLN_TRY(gq_grid((const void *)cast, run->tiles, &cast_blocks, call, cast_smem));
    if (cast_blocks < run->blocks) run->blocks = cast_blocks;
    if (cap > 0 && run->blocks > cap) run->blocks = cap;
    return gq4_launch(k, smem, map, &run->a, fin, run->tiles, run->blocks, st, call, "gq_tensor4_kernel<amax>");
}

/* GLN_CUDA_QUANT_FUSED_SCALE=0: the scale step as its own kernel after gq_tensor4_kernel's amax
 * pass too (to measure what fusing it saves); read at every call. */
static int gq_fused_scale_enabled(void) { return gln_cuda_env_switch("GLN_CUDA_QUANT_FUSED_SCALE"); }

/* done: the scratch's arrival counter, zeroed by the setup kernel (gq4_finish). */
static gln_status_t gq_run_tensor(gln_context_t *ctx, const gln_quant_config_t *cfg, const gq_args_t *a,
                                  const gln_tensor_t *in, gln_tensor_t *out, int64_t tiles, unsigned int *done,
                                  const gln_cuda_amax_record_t *rec, const char *call) {
    cudaStream_t st = gln_cuda_state(ctx)->stream;
    const int dt = gq_dt(in->dtype), vec = gq_vec_ok(a);
    gq_scale_job_t fin;
    memset(&fin, 0, sizeof fin);
    fin.work = (const gq_amax_t *)a->work, fin.x = in->data, fin.dtype = (int)in->dtype, fin.num = a->num;
    fin.nanp = cfg->amax_nan_propagate, fin.current = !cfg->delayed, fin.fp8_max = a->fp8_max;
    fin.pow2 = cfg->power_2_scale, fin.epsilon = cfg->amax_epsilon;
    fin.amax = out->amax, fin.scale = (float *)a->scale;
    fin.scale_inv = cfg->rowwise ? (float *)out->scale_inv : NULL;
    fin.col_scale_inv = cfg->columnwise ? (float *)out->col_scale_inv : NULL;
    if (rec && cfg->delayed) fin.rec = *rec;
    gq_scale_job_t fused = fin; /* the v4 amax pass runs the step in its last block */
    fused.done = gq_fused_scale_enabled() ? done : NULL;
    /* current scaling: both passes on one grid (the fewer blocks of the two kernels' occupancy), so
     * block b reads the same tiles twice, the second time last to first: the tiles it read last are
     * still in L2 (50 MB on an H200) when the cast pass starts on them */
    int64_t blocks = 0, cast_blocks = 0;
    CUtensorMap map;
    int tma = 0;
    gq4_run_t v4;
    GLN_TRY(gq4_first_pass(cfg, a, in, &fused, tiles, st, &map, &tma, &v4, call)); /* v4: launched there */
    if (!tma && !cfg->delayed) {
        const gq_kernel_t amax = a->dpart ? gq_tensor_pick<GQ_AMAX | GQ_DBIAS>(dt, vec) : gq_tensor_pick<GQ_AMAX>(dt, vec);
        GLN_TRY(gq_grid((const void *)amax, tiles, &blocks, call));
        GLN_TRY(gq_grid((const void *)gq_tensor_pick<GQ_CAST>(dt, vec), tiles, &cast_blocks, call));
        if (cast_blocks < blocks) blocks = cast_blocks;
        GLN_TRY(gq_launch_on(amax, a, tiles, blocks, st, call, "gq_tensor_kernel<amax>"));
    } else if (!tma) {
        const gq_kernel_t k = a->dpart ? gq_tensor_pick<GQ_CAST_AMAX | GQ_DBIAS>(dt, vec)
                                       : gq_tensor_pick<GQ_CAST_AMAX>(dt, vec);
        GLN_TRY(gq_launch(k, a, tiles, st, call, "gq_tensor_kernel<cast+amax>"));
    }
    if (!tma || !fused.done) {
        GLN_TRY(gln_cuda_check(gln_cuda_launch(gq_tensor_scale_kernel,
                                               dim3((unsigned int)gln_ceil_div(a->num, GQ_THREADS)), dim3(GQ_THREADS),
                                               0, st, fin),
                               call, "gq_tensor_scale_kernel"));
        GLN_TRY(gln_cuda_check_launch(call, "gq_tensor_scale_kernel"));
    }
    if (cfg->delayed) return GLN_STATUS_SUCCESS;
    gq_args_t r = *a;
    r.reverse = gq_reverse_enabled();
    if (tma) { /* the amax pass's tiling, tiles and grid */
        gq_args_t r4 = v4.a;
        r4.reverse = r.reverse;
        gq4_kernel_t cast = NULL;
        size_t smem = 0;
        GLN_TRY(gq4_pick<GQ_CAST>(dt, v4.tc, &cast, &smem, call));
        const gq_scale_job_t none = {};
        return gq4_launch(cast, smem, &map, &r4, &none, v4.tiles, v4.blocks, st, call, "gq_tensor4_kernel<cast>");
    }
    return gq_launch_on(gq_tensor_pick<GQ_CAST>(dt, vec), &r, tiles, blocks, st, call, "gq_tensor_kernel<cast>");
}

extern "C" gln_status_t gln_cuda_check_out_splits(gln_context_t *ctx, int32_t num, const int64_t *in_splits,
                                                  const int64_t *out_splits, const char *call) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    const gln_cuda_plan_job_t no_plan = {};
    GLN_TRY(gln_cuda_check(gln_cuda_launch(gq_setup_kernel, dim3(1), dim3(GQ_THREADS), 0, s->stream, no_plan,
                                           (const int64_t *)NULL, num, (int64_t *)NULL, (gq_amax_t *)NULL, 0,
                                           (unsigned int *)NULL, in_splits, out_splits, s->async_dev),
                           call, "gq_setup_kernel"));
    return gln_cuda_check_launch(call, "gq_setup_kernel");
}

/* The dbias finalize launches: members in chunks of GQ_DBIAS_CHUNK (their outputs by value). */
static gln_status_t gq_dbias_finalize(gln_context_t *ctx, const float *part, const int64_t *tstart, int64_t cols,
                                      int32_t num, gln_tensor_t *dbias, int accumulate, const char *call) {
    cudaStream_t st = gln_cuda_state(ctx)->stream;
    const unsigned int col_blocks = (unsigned int)gln_ceil_div(cols, GQ_THREADS);
    for (int32_t first = 0; first < num; first += GQ_DBIAS_CHUNK) {
        const int32_t n = num - first < GQ_DBIAS_CHUNK ? num - first : GQ_DBIAS_CHUNK;
        gq_dbias_out_t out;
        memset(&out, 0, sizeof out);
        for (int32_t i = 0; i < n; i++) out.data[i] = dbias[first + i].data, out.dtype[i] = (int)dbias[first + i].dtype;
        gq_dbias_finalize_kernel<<<dim3(col_blocks, (unsigned int)n), GQ_THREADS, 0, st>>>(part, tstart, cols, first,
                                                                                           out, accumulate);
        GLN_TRY(gln_cuda_check_launch(call, "gq_dbias_finalize_kernel"));
    }
    return GLN_STATUS_SUCCESS;
}

/* cfg NULL: the dbias alone (the amax kernel reading x once, its amaxes discarded).  act, ld:
 * gq_args_t's activation on load (GLN_ACT_LOAD_NONE: none). */
static gln_status_t gq_members(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                               gln_tensor_t *out, int32_t num, const gln_cuda_plan_t *plan, gln_tensor_t *dbias,
                               int accumulate, int swizzled, const gln_cuda_amax_record_t *rec, const char *call,
                               int act = GLN_ACT_LOAD_NONE, int64_t ld = 0) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    gln_quant_config_t only_dbias = GLN_QUANT_CONFIG_INIT;
    if (!cfg) {
        only_dbias.rowwise = 0, only_dbias.columnwise = 0;
        cfg = &only_dbias, out = (gln_tensor_t *)in; /* no output is written */
    }
    const int tensor = cfg->mode == GLN_SCALING_TENSOR, quantize = cfg->rowwise || cfg->columnwise;
    if (!tensor && cfg->mode != GLN_SCALING_MXFP8_1D)
        return gln_fail(GLN_STATUS_INTERNAL_ERROR, "%s: gln_cuda_quantize_members takes TENSOR or MXFP8_1D, not %s",
                        call, gln_scaling_name(cfg->mode));
    if (dbias && !plan) return gln_fail(GLN_STATUS_INTERNAL_ERROR, "%s: a fused dbias needs the group plan", call);
    if (in->cols == 0) dbias = NULL; /* every dbias is empty */
    gq_scratch_t sc;
    GLN_TRY(gq_scratch_get(ctx, cfg, out, num, plan != NULL, &sc, call));
    gq_args_t a = gq_args_make(cfg, in, out, num, plan, &sc);
    a.swz = swizzled && cfg->mode == GLN_SCALING_MXFP8_1D;
    a.act = act, a.ld = ld;
    /* tiles: a bound from what the host knows (each member adds at most one partial row tile) */
    const int64_t row_tiles = gln_ceil_div(in->rows, GQ_TR) + (plan ? num : 0), tiles = row_tiles * a.n_ct;
    void *part = NULL;
    gln_status_t st = GLN_STATUS_SUCCESS;
    if (dbias && row_tiles > 0)
        st = gln_cuda_scratch_alloc(ctx, (size_t)row_tiles * (size_t)in->cols * sizeof(float), &part, call);
    a.dpart = (float *)part;
    if (st == GLN_STATUS_SUCCESS && (plan || tensor)) {
        const gln_cuda_plan_job_t job = plan ? plan->pending : gln_cuda_plan_job_t{}; /* a deferred plan */
        st = gln_cuda_check(gln_cuda_launch(gq_setup_kernel, dim3(1), dim3(GQ_THREADS), 0, s->stream, job, a.rows,
                                            num, sc.tstart, sc.work, tensor ? num : (int32_t)0, sc.done,
                                            (const int64_t *)NULL, (const int64_t *)NULL, s->async_dev),
                            call, "gq_setup_kernel");
        if (st == GLN_STATUS_SUCCESS) st = gln_cuda_check_launch(call, "gq_setup_kernel");
    }
    if (st == GLN_STATUS_SUCCESS) {
        const int dt = gq_dt(in->dtype), vec = gq_vec_ok(&a);
        if (!quantize) { /* the dbias alone */
            if (a.dpart)
                st = gq_launch(gq_tensor_pick<GQ_AMAX | GQ_DBIAS>(dt, vec), &a, tiles, s->stream, call,
                               "gq_tensor_kernel<dbias>");
        } else if (tensor) {
            st = gq_run_tensor(ctx, cfg, &a, in, out, tiles, sc.done, rec, call);
        } else {
            int taken = 0; /* gq_mx3_kernel where it applies, else v2 / v1 */
            st = gq_mx3_try(&a, in, row_tiles, s->stream, call, &taken);
            if (st == GLN_STATUS_SUCCESS && !taken)
                st = gq_launch(gq_mx_pick(dt, vec, a.dpart != NULL), &a, tiles, s->stream, call, "gq_mx_kernel");
        }
    }
    if (st == GLN_STATUS_SUCCESS && dbias)
        st = gq_dbias_finalize(ctx, a.dpart, sc.tstart, in->cols, num, dbias, accumulate, call);
    if (part) gln_cuda_scratch_free(ctx, part);
    if (sc.block) gln_cuda_scratch_free(ctx, sc.block);
    return st;
}

extern "C" gln_status_t gln_cuda_quantize_members(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                  const gln_tensor_t *in, gln_tensor_t *out, int32_t num,
                                                  const gln_cuda_plan_t *plan, const char *call) {
    return gq_members(ctx, cfg, in, out, num, plan, NULL, 0, 0, NULL, call);
}

extern "C" gln_status_t gln_cuda_quantize_members_swizzled(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                           const gln_tensor_t *in, gln_tensor_t *out, int32_t num,
                                                           const gln_cuda_plan_t *plan, const char *call) {
    return gq_members(ctx, cfg, in, out, num, plan, NULL, 0, 1, NULL, call);
}

extern "C" gln_status_t gln_cuda_quantize_members_dbias(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                        const gln_tensor_t *in, gln_tensor_t *out, int32_t num,
                                                        const gln_cuda_plan_t *plan, gln_tensor_t *dbias,
                                                        int accumulate, const char *call) {
    return gq_members(ctx, cfg, in, out, num, plan, dbias, accumulate, 0, NULL, call);
}

extern "C" gln_status_t gln_cuda_quantize_members_record(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                         const gln_tensor_t *in, gln_tensor_t *out, int32_t num,
                                                         const gln_cuda_plan_t *plan, gln_tensor_t *dbias,
                                                         int accumulate, const gln_cuda_amax_record_t *rec,
                                                         const char *call) {
    return gq_members(ctx, cfg, in, out, num, plan, dbias, accumulate, 0, rec, call);
}

/* Activation on load (gln_activation_forward_quantize): `in` describes the activation's bf16
 * output [rows, H] but its data is the activation's input, ld elements per row (cuda_backend.h). */
extern "C" gln_status_t gln_cuda_quantize_members_act(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                      gln_activation_t act, int64_t ld, const gln_tensor_t *in,
                                                      gln_tensor_t *out, int32_t num, const gln_cuda_plan_t *plan,
                                                      const char *call) {
    return gq_members(ctx, cfg, in, out, num, plan, NULL, 0, 0, NULL, call, gln_act_load_kind((int)act), ld);
}

/* ---- the standalone MXFP8 scale swizzle (backend slot mxfp8_swizzle) ----------------------- */

/* One thread per swizzled byte (i, j) of the padded grid [Ip, Jp]: the compact entry or 0. */
__global__ void gq_swizzle_kernel(int64_t I, int64_t J, int64_t Ip, int64_t Jp, int columnwise,
                                  const uint8_t *compact, uint8_t *swizzled) {
    const int64_t n = Ip * Jp, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        const int64_t i = e / Jp, j = e % Jp;
        uint8_t v = 0;
        if (i < I && j < J) v = columnwise ? compact[j * Ip + i] : compact[i * Jp + j];
        swizzled[gq_swz(i, j, Jp / 4)] = v;
    }
}

extern "C" gln_status_t gln_cuda_mxfp8_swizzle(gln_context_t *ctx, int64_t rows, int64_t cols, int columnwise,
                                               const uint8_t *compact, uint8_t *swizzled) {
    const int64_t I = columnwise ? cols : rows, J = gln_ceil_div(columnwise ? rows : cols, 32);
    const int64_t Ip = gln_round_up(I, 128), Jp = gln_round_up(J, 4);
    if (Ip * Jp == 0) return GLN_STATUS_SUCCESS;
    gq_swizzle_kernel<<<gln_dev_blocks((size_t)(Ip * Jp), GQ_THREADS), GQ_THREADS, 0, gln_cuda_state(ctx)->stream>>>(
        I, J, Ip, Jp, columnwise, compact, swizzled);
    return gln_cuda_check_launch("gln_mxfp8_swizzle_scales (cuda)", "gq_swizzle_kernel");
}

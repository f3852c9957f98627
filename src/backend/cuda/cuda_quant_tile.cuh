/* What the per-tensor (cuda_quant_tensor.cu) and MXFP8 (cuda_quant_mxfp8.cu) quantizers and their
 * dispatch (cuda_quant_members.cu) share: the tile geometry, the kernel arguments, element loads
 * and FP8 encodes, the member lookup on the device plan, the tile walk, the amax partials and the
 * dbias column sums of a tile, and the host's grid helpers.
 *
 * Work is cut into tiles of GQ_TR rows x GQ_TC columns of one member (a member's last row tile
 * may be partial; an empty member has none; the TMA kernels use 128-column tiles of the same
 * rows).  The kernels are persistent: the grid is sized from the host-known packed shape and the
 * occupancy, and each block walks its tiles (gq_walk), finding each tile's member from the
 * plan's tile starts (gq_locate, gq_locate_warp).  In the general kernels each thread owns a
 * 16-column chunk of two tile rows (rr and rr + 64): 16-byte loads, 16-byte stores of FP8 codes;
 * shapes whose rows are not 16-element aligned (cols % 16 != 0, unaligned buffers) run the same
 * kernels with scalar loads and stores (VEC = false).
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
 *     gln_dev_to_fp8), which keeps the NaN's sign as the reference does.  (Building with
 *     -DGLN_CUDA_FP8_CVT=0 encodes everything in software.)  Where a chunk is known to hold no
 *     NaN and the multiplier is finite and nonzero, the encode skips that check
 *     (gq_encode_unchecked): the same codes. */
#ifndef GLN_CUDA_QUANT_TILE_CUH
#define GLN_CUDA_QUANT_TILE_CUH

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

/* x·s for a whole chunk with one scale: gq_encode with a uniform multiplier. */
template <int DT>
__device__ __forceinline__ void gq_encode_uniform(const uint32_t (&w)[gq_traits<DT>::W], float s, int e5m2, uint32_t (&b)[4]) {
    float mult[GQ_CHUNK];
#pragma unroll
    for (int e = 0; e < GQ_CHUNK; e++) mult[e] = s;
    gq_encode<DT>(w, mult, e5m2, b);
}

/* 16 codes of x[e]·s (one scale), or of x[e]·mult[e] (MULT), four per word, with no NaN-code
 * check: only for chunks without NaN and finite positive multipliers (the codes are then those
 * of gq_encode_fmt, whose check would find nothing). */
template <int DT, int E5M2, bool MULT>
__device__ __forceinline__ void gq_encode_unchecked_fmt(const uint32_t (&w)[gq_traits<DT>::W], float s,
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
__device__ __forceinline__ void gq_encode_unchecked(const uint32_t (&w)[gq_traits<DT>::W], float s,
                                              const float (&mult)[GQ_CHUNK], int e5m2, uint32_t (&b)[4]) {
    if (e5m2) gq_encode_unchecked_fmt<DT, 1, MULT>(w, s, mult, b);
    else gq_encode_unchecked_fmt<DT, 0, MULT>(w, s, mult, b);
}

/* ---- host side ---------------------------------------------------------------------------- */

static inline int gq_dt(gln_dtype_t d) { return d == GLN_DTYPE_FP32 ? GQ_F32 : d == GLN_DTYPE_BF16 ? GQ_BF16 : GQ_F16; }

static inline int gq_aligned(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* 16-byte chunks everywhere: rows of a multiple of 16 elements, buffers 16-byte aligned (member
 * offsets are then multiples of 16 elements too). */
static inline int gq_vec_ok(const gq_args_t *a) {
    return a->cols % GQ_CHUNK == 0 && gq_aligned(a->x) && gq_aligned(a->q) && gq_aligned(a->qc);
}

/* cuda_quant_members.cu: GLN_CUDA_QUANT_GRID=N (N > 0) caps every quantize grid at N blocks, so
 * that a block walks many tiles and members (tests, benchmarks); 0 when unset. */
int64_t gq_grid_cap(void);
/* Blocks of a persistent tile kernel over at most `tiles` tiles: as many as fit on the device at
 * once, or one per SM when one_per_sm, never more than the tiles nor gq_grid_cap. */
gln_status_t gq_grid(const void *kernel, int64_t tiles, int64_t *blocks, const char *call, size_t smem = 0,
                     int one_per_sm = 0);
/* Launch a general tile kernel on `blocks` blocks (nothing to do without tiles); gq_launch sizes
 * the grid with gq_grid first. */
gln_status_t gq_launch_on(gq_kernel_t kernel, const gq_args_t *a, int64_t tiles, int64_t blocks, cudaStream_t stream,
                          const char *call, const char *name);
gln_status_t gq_launch(gq_kernel_t kernel, const gq_args_t *a, int64_t tiles, cudaStream_t stream, const char *call,
                       const char *name);
/* Record the kernel a quantize pass runs on (read back by gln_cuda_quant_last_kernel). */
void gq_probe(const char *kernel);

/* cuda_quant_tensor.cu: a TENSOR pass (current: amax, scale, cast; delayed: cast + amax, then the
 * scale step with its amax record rec, NULL for none); tiles: gq_members' bound in 64-column
 * tiles; done: the scratch's arrival counter of the fused scale step.  And the dbias column sums
 * alone (cfg NULL in gq_members), on the general kernel's amax pass. */
gln_status_t tq_run(gln_context_t *ctx, const gln_quant_config_t *cfg, const gq_args_t *a, const gln_tensor_t *in,
                    gln_tensor_t *out, int64_t tiles, unsigned int *done, const gln_cuda_amax_record_t *rec,
                    const char *call);
gln_status_t tq_run_dbias(const gq_args_t *a, const gln_tensor_t *in, int64_t tiles, cudaStream_t stream,
                          const char *call);

/* cuda_quant_mxfp8.cu: an MXFP8_1D pass; row_tiles and tiles: gq_members' bounds. */
gln_status_t mxq_run(const gq_args_t *a, const gln_tensor_t *in, int64_t row_tiles, int64_t tiles,
                     cudaStream_t stream, const char *call);

#endif /* GLN_CUDA_QUANT_TILE_CUH */

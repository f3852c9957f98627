/* Kernel lab: can a warp-specialized MXFP8 quantizer reach >= 80 % of a device copy on
 * an H200, where the library's mxq_tma_kernel stops at ~71 %?
 *
 * Standalone (it does not link the library; it includes numerics/numerics.h for the host
 * reference's scale rule and conversions, and backend/cuda/cuda_tma.cuh for the TMA primitives):
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc bench/lab/lab_mx.cu -o lab_mx
 *   ./lab_mx [--shape RxC] [--iters N]          (default 16384x8192, 20 timed runs per variant)
 *
 * What it quantizes: a bf16 tensor [R, C] (R % 128 == 0, C % 128 == 0) to MXFP8 E4M3 the library's
 * way with its default options (TE's rule, amax_nan_propagate = 0):
 *   - rowwise copy q [R, C] with the compact scale grid s [R, C / 32] (blocks of 32 columns of a
 *     row), columnwise copy qc [R, C] (row-major like the input, NOT transposed) with the compact
 *     grid cs [R / 32, C] (blocks of 32 rows of a column);
 *   - per block the largest |x| that is not a NaN (NaN elements are left out of the amax); the
 *     E8M0 code by the round-up rule, gln_e8m0_from_amax_impl(amax, 448, 8, 0) (Inf amax -> 254,
 *     0 -> 0); the multiplier 2^(127 - code) (gln_e8m0_inverse_bits); each element's code the RNE
 *     satfinite E4M3 of the FP32 product x * multiplier (Inf -> +-448), a NaN element's code
 *     sign | 0x7F (what the library's gln_dev_mul + gln_dev_to_fp8 give: the NaN keeps its sign).
 * The data holds a spread of exponents (normal values over ~2^-66 .. 2^66, zeros, bf16
 * subnormals, values near the bf16 maximum) and a few hundred Inf and NaN of both signs.
 *
 * For every variant the run is checked byte for byte (both copies, both grids) against the host
 * reference before it is timed; a mismatch prints MISMATCH and the first differing index, the
 * variant is not timed, and the program exits 1.
 *
 * Variants (all 128x128 bf16 tiles as two 128x64 boxes, 128-byte swizzle, into a ring of stages;
 * a persistent grid, block b taking tiles b, b + grid, ...; the thread <-> data mapping of
 * mxq_tma_kernel: thread t reads chunk k = t % 8 (16 columns) of rows rr + 32 h, h = 0..3, and
 * reduces (32-row block t / 64, column pair t % 64) straight from the stage):
 *   ctrl   the library's structure, re-implemented compactly: 256 threads, thread 0 issues the loads
 *          (S - 1 tiles ahead), every thread rowwise + columnwise amax, the multipliers published
 *          in shared memory behind a block-wide barrier, the columnwise encode from the chunks
 *          held in registers, a second block-wide barrier releasing the stage.  2 blocks / SM.
 *   ws     warp-specialized: a 9th warp (lane 0) issues the loads, waiting on a per-stage EMPTY
 *          mbarrier (256 arrivals) and arming the FULL one; the 8 consumer warps arrive on EMPTY as
 *          soon as they have read the stage (before their encodes and stores), exchange the
 *          columnwise multipliers through a double-buffered shared buffer behind a named barrier
 *          among the 256 consumers (bar.sync 1, 256): no block-wide barrier in the steady state.
 *   ws+d   ws with the columnwise encode done by the column-pair thread from its 32 words (held in
 *          registers from the amax pass): 32 2-byte stores a thread per tile instead of 4 16-byte
 *          ones, but no multiplier exchange and no barrier at all among the consumers.
 *   ctrl+d the same direct columnwise encode in the control's structure (one block-wide barrier a
 *          tile).
 * Predictions per SM (tiles of loads in flight while the converting threads work on one; a
 * tile is 32 KB; registers as ptxas gives them, CUDA 13, sm_90a, no spills):
 *   ctrl   S=3, 2 blocks: 2 x 2 tiles = 128 KB; 2 block-wide barriers a tile; 116 registers
 *          (the library's mxq_tma_kernel: 122).
 *   ws     S=4, 1 block: 3 tiles = 96 KB, and the stage is refilled as soon as it is read (before
 *          the encodes and stores), so up to 4 (128 KB) during the stores; S=6, 1 block: 5-6 tiles
 *          = 160-192 KB; S=3, 2 blocks: 2 x (2-3) tiles = 128-192 KB.  Per tile: 1 named barrier,
 *          1 FULL wait, 256 EMPTY arrivals.  128 registers at 1 block (288 threads), 96 at 2
 *          blocks (cap 112).
 *   ws+d   as ws, no barrier among the consumers; 128 registers at 1 block, 94 at 2 blocks.
 *   ctrl+d S=3, 2 blocks: 128 KB, 1 block-wide barrier a tile, 120 registers.
 * The control differs from mxq_tma_kernel where the lab does not need it: one tensor (no members,
 * no padding, compact grids only), a NaN handled per chunk / column pair (a rare branch that
 * recomputes the maximum without NaN and rewrites the NaN elements' codes) instead of the
 * library's warp and block votes between an unchecked and a checked encode.  All variants share
 * that numerics code, so the lab compares their structures.
 * Bytes: useful GB/s counts 2 B read + 1 + 1 B written per element + 2 scale bytes per 32
 * elements; the device copy counts 2 B read + 2 B written. */
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_tma.cuh"
#include "lab_check.h"
#include "numerics/numerics.h"

#define TR 128                        /* tile rows */
#define TC 128                        /* tile columns: two boxes */
#define BOX_C 64                      /* box columns: 128 bytes of bf16, one swizzle span */
#define BOX_BYTES (TR * BOX_C * 2)    /* 16 KB */
#define STAGE_BYTES (2 * BOX_BYTES)   /* 32 KB */
#define CT 256                        /* converting threads (all of ctrl, the consumers of ws) */
#define CM_BYTES ((TR / 32) * TC * 4) /* one buffer of columnwise multipliers: 2 KB */
#define NAN_ABOVE 0x7F80u             /* bf16 |x| bits above this are NaN */
#define FULL 0xFFFFFFFFu

/* ---- device helpers ------------------------------------------------------------------------ */

/* Byte offset in a box of the 16-byte unit u (0..7) of box row r: the 128-byte swizzle puts unit
 * u of row r at unit u ^ (r % 8) (stages are 1024-byte aligned). */
__device__ __forceinline__ int unit_off(int r, int u) { return r * (BOX_C * 2) + ((u ^ (r & 7)) << 4); }

/* mxq_tma_row: lane l of warp wp takes chunk k = l % 8 of row 4 wp + q (k < 4) or 4 wp + (q ^ 1)
 * (k >= 4), q = l / 8: lanes 2j, 2j + 1 share a row (one 32-column block), no bank conflict. */
__device__ __forceinline__ int chunk_row(int t) {
    const int l = t % 32, q = l / 8;
    return 4 * (t / 32) + ((l % 8) < 4 ? q : (q ^ 1));
}

__device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }

/* E4M3 codes of lo (low byte) and hi: RNE, satfinite. */
__device__ __forceinline__ uint32_t cvt2(float lo, float hi) {
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
}

/* The E8M0 code of a block whose largest non-NaN |x| has bf16 bits fin: gln_e8m0_from_amax_impl's
 * round-up rule, amax * (1 / 448) in FP32 then the smallest code at or above it. */
__device__ __forceinline__ uint8_t mx_code(uint32_t fin) {
    return gln_e8m0_round_up_bits(__fmul_rn(bf_lo(fin), 1.0f / GLN_FP8_E4M3_MAX));
}

/* |x| maximum of 8 words (16 bf16) as bits; NaN patterns order above Inf. */
__device__ __forceinline__ uint32_t absmax8(const uint32_t (&w)[8]) {
    uint32_t m = 0;
#pragma unroll
    for (int v = 0; v < 8; v++) m = __vmaxu2(m, w[v] & 0x7FFF7FFFu);
    return max(m & 0xFFFFu, m >> 16);
}

/* The rare path: the largest |x| bits of 8 words leaving NaN out. */
__device__ __forceinline__ uint32_t finmax8(const uint32_t (&w)[8]) {
    uint32_t m = 0;
#pragma unroll
    for (int e = 0; e < 16; e++) {
        const uint32_t v = (w[e / 2] >> (16 * (e % 2))) & 0x7FFFu;
        if (v <= NAN_ABOVE) m = max(m, v);
    }
    return m;
}

/* The code of a NaN element: its sign | 0x7F. */
__device__ __forceinline__ uint32_t nan_code(uint32_t h) { return ((h >> 8) & 0x80u) | 0x7Fu; }

/* The rare path: byte e of b becomes the NaN code of element e where that element is a NaN. */
__device__ __forceinline__ void nanfix16(const uint32_t (&w)[8], uint32_t (&b)[4]) {
#pragma unroll
    for (int e = 0; e < 16; e++) {
        const uint32_t h = (w[e / 2] >> (16 * (e % 2))) & 0xFFFFu;
        if ((h & 0x7FFFu) > NAN_ABOVE) {
            const int sh = 8 * (e % 4);
            b[e / 4] = (b[e / 4] & ~(0xFFu << sh)) | (nan_code(h) << sh);
        }
    }
}

/* 16 codes of x[e] * s (one multiplier), element e in byte e % 4 of word e / 4. */
__device__ __forceinline__ void enc16s(const uint32_t (&w)[8], float s, uint32_t (&b)[4]) {
#pragma unroll
    for (int v = 0; v < 4; v++)
        b[v] = cvt2(__fmul_rn(bf_lo(w[2 * v]), s), __fmul_rn(bf_hi(w[2 * v]), s)) |
               cvt2(__fmul_rn(bf_lo(w[2 * v + 1]), s), __fmul_rn(bf_hi(w[2 * v + 1]), s)) << 16;
}

/* 16 codes of x[e] * m[e]: m[v] holds the multipliers of elements 4v .. 4v + 3. */
__device__ __forceinline__ void enc16m(const uint32_t (&w)[8], const float4 (&m)[4], uint32_t (&b)[4]) {
#pragma unroll
    for (int v = 0; v < 4; v++)
        b[v] = cvt2(__fmul_rn(bf_lo(w[2 * v]), m[v].x), __fmul_rn(bf_hi(w[2 * v]), m[v].y)) |
               cvt2(__fmul_rn(bf_lo(w[2 * v + 1]), m[v].z), __fmul_rn(bf_hi(w[2 * v + 1]), m[v].w)) << 16;
}

__device__ __forceinline__ void named_sync_consumers() { asm volatile("bar.sync 1, %0;" ::"n"(CT) : "memory"); }

struct args {
    int64_t rows, cols;
    uint8_t *q, *qc, *s, *cs;
};

/* Shared memory of a variant: the stages (1024-byte aligned: the slack), the multiplier buffers
 * (none for the direct columnwise encode; two for ws), the FULL and EMPTY barriers. */
static constexpr size_t smem_bytes(bool ws, bool direct, int S) {
    return 1024 + (size_t)S * STAGE_BYTES + (direct ? 0 : (ws ? 2 : 1) * CM_BYTES) + 2 * 8 * (size_t)S;
}

/* WS: a producer warp (warp CT / 32) besides the CT converting threads; else thread 0 of the CT
 * issues.  DIRECT: the column-pair thread encodes its columns itself.  S stages, MINB blocks per
 * SM for the register cap. */
template <bool WS, bool DIRECT, int S, int MINB>
__global__ void __launch_bounds__(CT + (WS ? 32 : 0), MINB) mx_kernel(const __grid_constant__ CUtensorMap map, const args a) {
    extern __shared__ __align__(1024) uint8_t smem_raw[];
    uint8_t *stages = smem_raw + ((1024u - (gln_smem_addr(smem_raw) & 1023u)) & 1023u);
    float *cmbase = (float *)(stages + S * STAGE_BYTES);
    uint64_t *full = (uint64_t *)(stages + S * STAGE_BYTES + (DIRECT ? 0 : (WS ? 2 : 1) * CM_BYTES));
    uint64_t *empty = full + S;
    const int t = threadIdx.x;
    const int64_t C = a.cols, ctiles = C / TC, ntiles = (a.rows / TR) * ctiles;
    const int64_t grid = gridDim.x, first = blockIdx.x;

    /* tile it of this block into its stage (one thread) */
    auto issue = [&](int64_t it) {
        const int64_t tile = first + it * grid;
        if (tile >= ntiles) return;
        const int st = (int)(it % S);
        const int32_t r0 = (int32_t)((tile / ctiles) * TR), c0 = (int32_t)((tile % ctiles) * TC);
        uint8_t *dst = stages + st * STAGE_BYTES;
        gln_mbar_expect_tx(&full[st], STAGE_BYTES);
        gln_tma_load_2d(dst, &map, &full[st], r0, c0);
        gln_tma_load_2d(dst + BOX_BYTES, &map, &full[st], r0, c0 + BOX_C);
    };

    if (t == 0) {
        for (int s = 0; s < S; s++) {
            gln_mbar_init(&full[s], 1);
            if (WS) gln_mbar_init(&empty[s], CT);
        }
        gln_mbar_init_fence();
        if (!WS)
            for (int s = 0; s < S; s++) issue(s);
    }
    __syncthreads(); /* the only block-wide barrier of ws */

    if (WS && t >= CT) { /* the producer warp: lane 0 refills each stage once its consumers released it */
        if (t == CT) {
            for (int64_t it = 0; first + it * grid < ntiles; it++) {
                const int st = (int)(it % S);
                if (it >= S) gln_mbar_wait(&empty[st], (uint32_t)((it / S - 1) & 1));
                issue(it);
            }
        }
        return;
    }

    /* converting threads */
    const int rr = chunk_row(t), k = t % 8;
    const int o_lo = (k / 4) * BOX_BYTES + unit_off(rr, 2 * (k % 4)), o_hi = o_lo ^ 16;
    const int bb = t / (TC / 2), cp = t % (TC / 2), u = (cp % 32) / 4;
    const int o_col = (cp / 32) * BOX_BYTES + bb * 32 * (BOX_C * 2) + (cp % 4) * 4;
    /* the pair's two multipliers in a buffer of floats: float4 [bb][8 v + kk] holds those of elements
     * 4v .. 4v + 3 of column chunk kk (mxq_tma_kernel's colmult order, so that a quarter warp reads 8
     * consecutive float4); columns 2 cp, 2 cp + 1 are elements 2 (cp % 8), + 1 of chunk cp / 8 */
    const int cm_off = (bb * (TC / 4) + ((cp % 8) / 2) * 8 + cp / 8) * 4 + 2 * (cp % 2);
    for (int64_t it = 0;; it++) {
        const int64_t tile = first + it * grid;
        if (tile >= ntiles) break;
        if (!WS && t == 0 && it > 0) issue(it + S - 1); /* into the stage released by the last barrier */
        const int st = (int)(it % S);
        const int64_t r0 = (tile / ctiles) * TR, c0 = (tile % ctiles) * TC;
        gln_mbar_wait(&full[st], (uint32_t)((it / S) & 1));
        const uint8_t *tile_p = stages + st * STAGE_BYTES;

        /* rowwise: chunk h = row rr + 32 h, columns 16 k .. 16 k + 15 */
        const size_t i0 = (size_t)(r0 + rr) * (size_t)C + (size_t)(c0 + 16 * k);
        const size_t s0 = (size_t)(r0 + rr) * (size_t)(C / 32) + (size_t)((c0 + 16 * k) / 32);
        uint32_t w[DIRECT ? 1 : 4][8]; /* ctrl / ws keep the chunks for the columnwise encode */
        unsigned nanmask = 0;
#pragma unroll
        for (int h = 0; h < 4; h++) {
            uint32_t(&wr)[8] = w[DIRECT ? 0 : h];
            const int oh = h * 32 * (BOX_C * 2);
            const uint4 lo = *(const uint4 *)(tile_p + o_lo + oh), hi = *(const uint4 *)(tile_p + o_hi + oh);
            wr[0] = lo.x, wr[1] = lo.y, wr[2] = lo.z, wr[3] = lo.w, wr[4] = hi.x, wr[5] = hi.y, wr[6] = hi.z, wr[7] = hi.w;
            uint32_t m = absmax8(wr);
            const bool nan = m > NAN_ABOVE;
            if (nan) m = finmax8(wr), nanmask |= 1u << h;
            const uint32_t fin = max(m, __shfl_xor_sync(FULL, m, 1));
            const uint8_t code = mx_code(fin);
            uint32_t b[4];
            enc16s(wr, gln_e8m0_inverse_bits(code), b);
            if (nan) nanfix16(wr, b);
            *(uint4 *)(a.q + i0 + (size_t)h * 32 * (size_t)C) = make_uint4(b[0], b[1], b[2], b[3]);
            if (k % 2 == 0) a.s[s0 + (size_t)h * 32 * (size_t)(C / 32)] = code;
        }

        /* columnwise: (32-row block bb, columns c0 + 2 cp, + 1), rows 8 g + x of the block */
        const uint8_t *blk = tile_p + o_col;
        uint32_t cw[DIRECT ? 32 : 1];
        uint32_t pm = 0;
#pragma unroll
        for (int x = 0; x < 8; x++) {
            const uint8_t *px = blk + unit_off(x, u);
#pragma unroll
            for (int g = 0; g < 4; g++) {
                const uint32_t v = *(const uint32_t *)(px + g * 8 * (BOX_C * 2));
                if (DIRECT) cw[8 * g + x] = v;
                pm = __vmaxu2(pm, v & 0x7FFF7FFFu);
            }
        }
        uint32_t mlo = pm & 0xFFFFu, mhi = pm >> 16;
        const bool pnan = max(mlo, mhi) > NAN_ABOVE;
        if (pnan) { /* the rare path: the two columns' maxima without their NaN */
            mlo = 0, mhi = 0;
            for (int i = 0; i < 32; i++) {
                const uint32_t v = *(const uint32_t *)(blk + unit_off(i, u));
                if ((v & 0x7FFFu) <= NAN_ABOVE) mlo = max(mlo, v & 0x7FFFu);
                if (((v >> 16) & 0x7FFFu) <= NAN_ABOVE) mhi = max(mhi, (v >> 16) & 0x7FFFu);
            }
        }
        if (WS) gln_mbar_arrive(&empty[st]); /* this thread's last read of the stage */
        const uint8_t clo = mx_code(mlo), chi = mx_code(mhi);
        const size_t csi = (size_t)(r0 / 32 + bb) * (size_t)C + (size_t)(c0 + 2 * cp);
        *(uint16_t *)(a.cs + csi) = (uint16_t)(clo | (uint32_t)chi << 8);
        const float flo = gln_e8m0_inverse_bits(clo), fhi = gln_e8m0_inverse_bits(chi);
        if (DIRECT) {
            uint8_t *dst = a.qc + (size_t)(r0 + 32 * bb) * (size_t)C + (size_t)(c0 + 2 * cp);
#pragma unroll
            for (int i = 0; i < 32; i++) {
                uint32_t c2 = cvt2(__fmul_rn(bf_lo(cw[i]), flo), __fmul_rn(bf_hi(cw[i]), fhi));
                if (pnan) {
                    if ((cw[i] & 0x7FFFu) > NAN_ABOVE) c2 = (c2 & 0xFF00u) | nan_code(cw[i] & 0xFFFFu);
                    if (((cw[i] >> 16) & 0x7FFFu) > NAN_ABOVE) c2 = (c2 & 0x00FFu) | nan_code(cw[i] >> 16) << 8;
                }
                *(uint16_t *)(dst + (size_t)i * (size_t)C) = (uint16_t)c2;
            }
        } else {
            /* ws: buffer it % 2 (a thread that writes it at tile it has passed the barrier of
             * tile it - 1, so every thread has finished reading it at tile it - 2) */
            float *cm = cmbase + (WS ? (int)(it & 1) * (CM_BYTES / 4) : 0);
            *(float2 *)(cm + cm_off) = make_float2(flo, fhi);
            if (WS) named_sync_consumers();
            else __syncthreads();
            const float4 *cm4 = (const float4 *)cm;
#pragma unroll
            for (int h = 0; h < 4; h++) {
                float4 m[4];
#pragma unroll
                for (int v = 0; v < 4; v++) m[v] = cm4[h * (TC / 4) + v * 8 + k];
                uint32_t b[4];
                enc16m(w[DIRECT ? 0 : h], m, b);
                if (nanmask >> h & 1) nanfix16(w[DIRECT ? 0 : h], b);
                *(uint4 *)(a.qc + i0 + (size_t)h * 32 * (size_t)C) = make_uint4(b[0], b[1], b[2], b[3]);
            }
        }
        if (!WS) __syncthreads(); /* stage st (and the multipliers) are free */
    }
}

/* ---- host ------------------------------------------------------------------------------------ */

static float bf16_to_f32(uint16_t h) { return gln_f32_from_bits((uint32_t)h << 16); }

/* An element's code: NaN -> sign | 0x7F (the library keeps a NaN's sign), else the RNE satfinite
 * E4M3 of the FP32 product (the host's SSE multiply rounds to nearest even, subnormals kept). */
static uint8_t host_enc(uint16_t x, float mult) {
    if ((x & 0x7FFFu) > NAN_ABOVE) return (uint8_t)(((x >> 8) & 0x80u) | 0x7Fu);
    return gln_f32_to_e4m3_bits(bf16_to_f32(x) * mult);
}

/* The block's code from its elements x[0], x[stride], ... (32 of them), NaN left out. */
static uint8_t host_code(const uint16_t *x, size_t stride) {
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) amax = gln_f32_max_fin(amax, gln_f32_abs(bf16_to_f32(x[(size_t)i * stride])));
    return gln_e8m0_from_amax_impl(amax, GLN_FP8_E4M3_MAX, 8, 0);
}

static void host_ref(const uint16_t *x, int64_t R, int64_t C, uint8_t *q, uint8_t *qc, uint8_t *s, uint8_t *cs) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t cb = 0; cb < C / 32; cb++) {
            const size_t o = (size_t)r * C + (size_t)cb * 32;
            const uint8_t code = host_code(x + o, 1);
            s[(size_t)r * (C / 32) + cb] = code;
            const float mult = gln_e8m0_inverse_bits(code);
            for (int j = 0; j < 32; j++) q[o + j] = host_enc(x[o + j], mult);
        }
    for (int64_t rb = 0; rb < R / 32; rb++)
        for (int64_t c = 0; c < C; c++) {
            const size_t o = (size_t)rb * 32 * C + (size_t)c;
            const uint8_t code = host_code(x + o, (size_t)C);
            cs[(size_t)rb * C + c] = code;
            const float mult = gln_e8m0_inverse_bits(code);
            for (int i = 0; i < 32; i++) qc[o + (size_t)i * C] = host_enc(x[o + (size_t)i * C], mult);
        }
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd() {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return rng_state;
}

/* bf16 data: per element a random sign and mantissa, an exponent 127 + region shift + spread
 * (normal values over ~2^-66 .. 2^66, so blocks' codes span ~100 values); 1/64 zeros, 1/256 bf16
 * subnormals, 1/1024 near the bf16 maximum; then a few hundred Inf and NaN (random signs and
 * payloads) at random places. */
static void make_data(uint16_t *x, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
            const uint64_t z = rnd();
            const uint32_t sign = (uint32_t)(z >> 63) << 15, mant = (uint32_t)(z >> 20) & 0x7Fu;
            const int shift = (int)(((r / 64) * 5 + (c / 96) * 3) % 7) * 10 - 30;
            const int e = 127 + shift + (int)((z >> 30) % 73) - 36;
            uint32_t h = sign | ((uint32_t)e << 7) | mant;
            const uint32_t sel = (uint32_t)(z >> 8) & 1023u;
            if (sel < 16) h = sign;                              /* zero */
            else if (sel < 20) h = sign | (mant ? mant : 1u);    /* subnormal */
            else if (sel == 20) h = sign | 0x7F00u | mant;       /* near the maximum */
            x[(size_t)r * C + c] = (uint16_t)h;
        }
    const size_t n = (size_t)R * C;
    for (int i = 0; i < 300; i++) {
        const uint64_t z = rnd();
        const uint32_t sign = (uint32_t)(z >> 63) << 15;
        const size_t at = (size_t)(z % n);
        if (i % 2) x[at] = (uint16_t)(sign | 0x7F80u); /* Inf */
        else x[at] = (uint16_t)(sign | 0x7F80u | (((uint32_t)(z >> 40) & 0x7Fu) | 1u)); /* NaN */
    }
}

typedef void (*kern_t)(CUtensorMap, args);

struct variant {
    const char *name;
    kern_t k;
    int threads;
    size_t smem;
};

/* First index where two buffers differ, or -1. */
static int64_t first_diff(const uint8_t *a, const uint8_t *b, size_t n) {
    if (!memcmp(a, b, n)) return -1;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return (int64_t)i;
    return -1;
}

#define V(name, WS, D, S, MB) {name, mx_kernel<WS, D, S, MB>, CT + (WS ? 32 : 0), smem_bytes(WS, D, S)}

int main(int argc, char **argv) {
    int64_t rows = 16384, cols = 8192;
    int iters = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
            long r = 0, c = 0;
            if (sscanf(argv[++i], "%ldx%ld", &r, &c) != 2) r = -1;
            rows = r, cols = c;
        } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: lab_mx [--shape RxC] [--iters N]\n");
            return 2;
        }
    }
    if (rows <= 0 || cols <= 0 || rows % TR || cols % TC || rows > (1 << 24) || cols > (1 << 24) || iters < 1) {
        fprintf(stderr, "lab_mx: --shape needs rows, cols > 0 (at most 2^24), multiples of 128; --iters >= 1\n");
        return 2;
    }
    const size_t n = (size_t)rows * (size_t)cols, ns = n / 32;
    std::vector<uint16_t> hx(n);
    std::vector<uint8_t> rq(n), rqc(n), rs(ns), rcs(ns), gq(n), gqc(n), gs(ns), gcs(ns);
    make_data(hx.data(), rows, cols);
    host_ref(hx.data(), rows, cols, rq.data(), rqc.data(), rs.data(), rcs.data());

    void *dx, *dy;
    uint8_t *dq, *dqc, *ds, *dcs;
    CK(cudaMalloc(&dx, n * 2));
    CK(cudaMalloc(&dy, n * 2));
    CK(cudaMalloc((void **)&dq, n));
    CK(cudaMalloc((void **)&dqc, n));
    CK(cudaMalloc((void **)&ds, ns));
    CK(cudaMalloc((void **)&dcs, ns));
    CK(cudaMemcpy(dx, hx.data(), n * 2, cudaMemcpyHostToDevice));
    CUtensorMap map;
    if (gln_tma_encode_2d(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, dx, rows, cols, cols * 2, TR, BOX_C,
                          CU_TENSOR_MAP_SWIZZLE_128B)) {
        fprintf(stderr, "lab_mx: tensor map refused\n");
        return 1;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    std::vector<cudaEvent_t> ev(2 * (size_t)iters);
    for (auto &e : ev) CK(cudaEventCreate(&e));
    /* median of iters timed launches of f, after 3 untimed ones */
    auto time_med = [&](auto f) {
        for (int i = 0; i < 3; i++) f();
        for (int i = 0; i < iters; i++) {
            CK(cudaEventRecord(ev[2 * i]));
            f();
            CK(cudaEventRecord(ev[2 * i + 1]));
        }
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<float> ms(iters);
        for (int i = 0; i < iters; i++) CK(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
        std::sort(ms.begin(), ms.end());
        return (double)ms[iters / 2];
    };

    const double copy_ms = time_med([&] { CK(cudaMemcpyAsync(dy, dx, n * 2, cudaMemcpyDeviceToDevice)); });
    const double copy = 4.0 * n / (copy_ms * 1e-3) / 1e9;
    printf("lab_mx %ldx%ld bf16 -> MXFP8 E4M3 (rowwise + columnwise), %s, %d SMs, median of %d\n", (long)rows,
           (long)cols, prop.name, prop.multiProcessorCount, iters);
    printf("%-30s %8.1f GB/s  %8.1f us\n", "device copy", copy, 1e3 * copy_ms);

    const variant vs[] = {
        V("ctrl S=3 2/SM", false, false, 3, 2),  V("ws S=4 1/SM", true, false, 4, 1),
        V("ws S=6 1/SM", true, false, 6, 1),     V("ws S=3 2/SM", true, false, 3, 2),
        V("ws+d S=4 1/SM", true, true, 4, 1),    V("ws+d S=6 1/SM", true, true, 6, 1),
        V("ws+d S=3 2/SM", true, true, 3, 2),    V("ctrl+d S=3 2/SM", false, true, 3, 2),
    };
    const args a = {rows, cols, dq, dqc, ds, dcs};
    const double bytes = 4.0 * n + 2.0 * ns;
    int bad = 0;
    for (const variant &v : vs) {
        CK(cudaFuncSetAttribute(v.k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)v.smem));
        int per_sm = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, v.k, v.threads, v.smem));
        cudaFuncAttributes fa;
        CK(cudaFuncGetAttributes(&fa, v.k));
        if (per_sm < 1) {
            printf("%-30s does not fit on an SM\n", v.name);
            bad = 1;
            continue;
        }
        const int grid = per_sm * prop.multiProcessorCount;
        CK(cudaMemset(dq, 0xEE, n));
        CK(cudaMemset(dqc, 0xEE, n));
        CK(cudaMemset(ds, 0xEE, ns));
        CK(cudaMemset(dcs, 0xEE, ns));
        v.k<<<grid, v.threads, v.smem>>>(map, a);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(gq.data(), dq, n, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(gqc.data(), dqc, n, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(gs.data(), ds, ns, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(gcs.data(), dcs, ns, cudaMemcpyDeviceToHost));
        const struct {
            const char *what;
            const uint8_t *got, *want;
            size_t n;
        } cmp[4] = {{"rowwise copy", gq.data(), rq.data(), n},
                    {"columnwise copy", gqc.data(), rqc.data(), n},
                    {"rowwise scales", gs.data(), rs.data(), ns},
                    {"columnwise scales", gcs.data(), rcs.data(), ns}};
        int wrong = 0;
        for (const auto &c : cmp) {
            const int64_t i = first_diff(c.got, c.want, c.n);
            if (i >= 0) {
                printf("%-30s MISMATCH in the %s at index %lld: 0x%02X, host 0x%02X\n", v.name, c.what, (long long)i,
                       c.got[i], c.want[i]);
                wrong = 1;
            }
        }
        if (wrong) {
            bad = 1;
            continue;
        }
        const double ms = time_med([&] { v.k<<<grid, v.threads, v.smem>>>(map, a); });
        const double gbs = bytes / (ms * 1e-3) / 1e9;
        printf("%-30s %8.1f GB/s  %8.1f us  %5.1f %% of copy  (%d block(s)/SM x %d threads, %d regs, %zu B smem)\n",
               v.name, gbs, 1e3 * ms, 100 * gbs / copy, per_sm, v.threads, fa.numRegs, v.smem);
    }
    for (auto &e : ev) cudaEventDestroy(e);
    cudaFree(dx), cudaFree(dy), cudaFree(dq), cudaFree(dqc), cudaFree(ds), cudaFree(dcs);
    if (bad) printf("lab_mx: FAILED (a variant differs from the host reference or does not fit)\n");
    return bad;
}

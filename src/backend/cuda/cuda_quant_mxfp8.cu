/* MXFP8_1D quantization of a group of members (gq_members' MXFP8 pass, cuda_quant_members.cu),
 * and the standalone scale swizzle.  One pass over x: a chunk's amax with its neighbour lane's
 * gives the rowwise 1x32 code; the tile's |x| gives the columnwise 32x1 codes; both copies and
 * both E8M0 grids (their padding zeroed) from one read; the grids compact, or
 * (gln_cuda_quantize_members_swizzled) straight in the cuBLAS 128x4-tile order of
 * gln_mxfp8_swizzle_ref.  Two kernels:
 *   mxq_tma_kernel      bf16 / fp16 input with rows of a multiple of 8 elements, 16-byte aligned
 *                       buffers, no dbias and no activation on load: 128 x 128 tiles copied by
 *                       the tensor memory accelerator into a ring of shared-memory stages (the
 *                       section below says how);
 *   mxq_general_kernel  everything else (FP32 input, unaligned buffers or rows, the fused dbias
 *                       sums, activation on load): 128 x 64 tiles in registers, the next tile's
 *                       loads issued before the current one is converted.
 * Both give the same bytes (cuda_quant_tile.cuh: the numerics). */
#include "backend/cuda/cuda_quant_tile.cuh"

/* ---- the general kernel and the helpers both kernels share -------------------------------- */

template <int DT> struct mxq_abs_elem { typedef uint16_t type; };
template <> struct mxq_abs_elem<GQ_F32> { typedef uint32_t type; };

/* Byte of E8M0 entry (i, j) of a grid in the cuBLAS 128x4-tile order, T = (padded j) / 4: the
 * formula of gln_mxfp8_swizzle_ref (src/quant/quant_mxfp8.c). */
__host__ __device__ __forceinline__ int64_t mxq_swz(int64_t i, int64_t j, int64_t T) {
    return ((i >> 7) * T + (j >> 2)) * 512 + (i & 31) * 16 + ((i & 127) >> 5) * 4 + (j & 3);
}

/* A member's rowwise grid entry (row r, 32-column block jb): compact [round_up(m, 128)][gc_r],
 * or swizzled with i = r, j = jb. */
__device__ __forceinline__ int64_t mxq_sidx_row(const gq_args_t &a, int64_t r, int64_t jb) {
    return a.swz ? mxq_swz(r, jb, a.gc_r / 4) : r * a.gc_r + jb;
}

/* A member's columnwise grid entry (32-row block rb, column cc) for a member of m rows: compact
 * [round_up(ceil(m / 32), 4)][gc_c], or swizzled as the transposed grid: i = cc, j = rb. */
__device__ __forceinline__ int64_t mxq_sidx_col(const gq_args_t &a, int64_t rb, int64_t cc, int64_t m) {
    return a.swz ? mxq_swz(cc, rb, gln_round_up(gln_ceil_div(m, 32), 4) / 4) : rb * a.gc_c + cc;
}

/* Zero entries [r_lo, r_hi) x [c_lo, c_hi) (compact coordinates) of a member's rowwise grid
 * (col 0) or columnwise grid (col 1; m: the member's rows), with the block's threads. */
__device__ __forceinline__ void mxq_zero(const gq_args_t &a, uint8_t *g, int col, int64_t m, int64_t r_lo,
                                        int64_t r_hi, int64_t c_lo, int64_t c_hi) {
    if (r_hi <= r_lo || c_hi <= c_lo) return;
    const int64_t w = c_hi - c_lo, n = (r_hi - r_lo) * w;
    for (int64_t i = threadIdx.x; i < n; i += GQ_THREADS) {
        const int64_t r = r_lo + i / w, c = c_lo + i % w;
        g[col ? mxq_sidx_col(a, r, c, m) : mxq_sidx_row(a, r, c)] = 0;
    }
}

/* The E8M0 code of a block from its largest non-NaN |x| bits and whether it holds a NaN. */
template <int DT> __device__ __forceinline__ uint8_t mxq_code(const gq_args_t &a, uint32_t fin, int nan) {
    if (nan && a.nanp) return 0xFF;
    return gln_e8m0_from_amax_impl(gq_value<DT>(fin), a.fp8_max, a.emax, a.floor_rule);
}

/* The rowwise E8M0 code of a 32-column block with the NaN checks (this lane's chunk w and its
 * neighbour lane's, so both lanes must call; fin: the chunk's |x| maximum bits, NaN patterns
 * ordering above Inf) and the chunk's 16 codes into b through the NaN-checking encode.  The general
 * rowwise step, and the rare path of mxq_row_block. */
template <int DT>
__device__ __forceinline__ uint8_t mxq_row_checked(const gq_args_t &a, const uint32_t (&w)[gq_traits<DT>::W],
                                                     uint32_t fin, float (&mult)[GQ_CHUNK], uint32_t (&b)[4]) {
    const int hn = fin > (uint32_t)gq_traits<DT>::NAN_ABOVE;
    if (hn) fin = (uint32_t)gq_absmax_fin<DT>(gq_pack<DT>(w));
    fin = max(fin, __shfl_xor_sync(GQ_FULL, fin, 1));
    const int nan2 = hn | __shfl_xor_sync(GQ_FULL, hn, 1);
    const uint8_t code = mxq_code<DT>(a, fin, nan2);
    const float s = gln_e8m0_inverse_bits(code);
#pragma unroll
    for (int e = 0; e < GQ_CHUNK; e++) mult[e] = s;
    gq_encode<DT>(w, mult, a.e5m2, b);
    return code;
}

/* Zero the padding of member cur's grids that this tile owns: rowwise, the padded blocks of its
 * rows (last column tile) and its blocks of the padded rows (last row tile); columnwise the same
 * with 32-row blocks. */
__device__ __forceinline__ void mxq_padding(const gq_args_t &a, const gq_cursor_t &cur, int64_t r0, int64_t ct) {
    const int last_ct = ct == a.n_ct - 1, last_rt = r0 + GQ_TR >= cur.m;
    const int64_t c0 = ct * GQ_TC;
    if (a.q) {
        uint8_t *g = a.s + cur.srow;
        if (last_ct) mxq_zero(a, g, 0, cur.m, r0, min(r0 + GQ_TR, cur.m), a.nb, a.gc_r);
        if (last_rt) mxq_zero(a, g, 0, cur.m, cur.m, gln_round_up(cur.m, 128), ct * 2, last_ct ? a.gc_r : ct * 2 + 2);
    }
    if (a.qc) {
        uint8_t *g = a.cs + cur.scol;
        const int64_t nbr = gln_ceil_div(cur.m, 32);
        if (last_ct) mxq_zero(a, g, 1, cur.m, r0 / 32, min(r0 / 32 + GQ_TR / 32, nbr), a.cols, a.gc_c);
        if (last_rt) mxq_zero(a, g, 1, cur.m, nbr, gln_round_up(nbr, 4), c0, last_ct ? a.gc_c : c0 + GQ_TC);
    }
}

template <int DT, bool VEC, bool DBIAS>
__global__ void __launch_bounds__(GQ_THREADS) mxq_general_kernel(const gq_args_t a) {
    typedef typename mxq_abs_elem<DT>::type abs_t;
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
    gq_tile_load<DT, VEC>(a, cur, lo, T);
    int64_t id = lo;
    for (int64_t j = 0; j < wk.count; j++, id += step) {
        if (j > 0) { /* the tile loaded during the previous one */
            cur = nxt;
            T = N;
        }
        if (j + 1 < wk.count) { /* block-uniform: the next tile's loads, in flight during this one */
            gq_locate(a, (id + step) / a.n_ct, nxt);
            gq_tile_load<DT, VEC>(a, nxt, id + step, N);
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
                const uint8_t code = mxq_row_checked<DT>(a, w[h], gq_absmax<DT>(w[h]), mult, b);
                if (n[h]) {
                    gq_store16(a.q + i0[h], b, n[h]);
                    if (k % 2 == 0) a.s[cur.srow + mxq_sidx_row(a, r0 + rr + h * GQ_PASS, c / 32)] = code;
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
                const uint8_t code = mxq_code<DT>(a, fm, nn);
                colmult[bb][cc] = gln_e8m0_inverse_bits(code);
                const int64_t rb = r0 / 32 + bb; /* the member's 32-row block */
                if (rb * 32 < cur.m && c0 + cc < C) a.cs[cur.scol + mxq_sidx_col(a, rb, c0 + cc, cur.m)] = code;
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
        mxq_padding(a, cur, r0, ct);
        if (a.qc) __syncthreads(); /* absbuf and colmult are rewritten by the next tile */
    }
}

/* The E8M0 code of a block whose largest |x| bits fin (no NaN in the block): mxq_code with
 * nan = 0, the round-up rule's 1 / fp8_max precomputed (rinv = 1.0f / a.fp8_max). */
template <int DT>
__device__ __forceinline__ uint8_t mxq_code_finite(const gq_args_t &a, uint32_t fin, float rinv) {
    const float v = gq_value<DT>(fin);
    if (a.floor_rule) return gln_e8m0_from_amax_impl(v, a.fp8_max, a.emax, 1);
    return gln_e8m0_round_up_bits(__fmul_rn(v, rinv));
}

/* The rowwise copy of one chunk: the E8M0 code of its 32-column block (this lane's 16 elements
 * and its neighbour lane's, so both lanes must call) and the chunk's 16 codes into b.  m: the
 * chunk's |x| maximum (bits; NaN patterns order above Inf).  fast (warp-uniform): no lane of the
 * warp holds a NaN, so mxq_code_finite and the unchecked encode give the bytes of
 * mxq_row_checked, which runs otherwise. */
template <int DT>
__device__ __forceinline__ uint8_t mxq_row_block(const gq_args_t &a, const uint32_t (&w)[gq_traits<DT>::W],
                                                   uint32_t m, bool fast, float rinv, float (&mult)[GQ_CHUNK],
                                                   uint32_t (&b)[4]) {
    if (fast) {
        const uint32_t fin = max(m, __shfl_xor_sync(GQ_FULL, m, 1));
        const uint8_t code = mxq_code_finite<DT>(a, fin, rinv);
        gq_encode_unchecked<DT, false>(w, gln_e8m0_inverse_bits(code), mult, a.e5m2, b);
        return code;
    }
    return mxq_row_checked<DT>(a, w, m, mult, b);
}

/* ---- MXFP8, the fast kernel: a bulk-copy (TMA) load pipeline -------------------------------
 * For bf16 / fp16 input with rows of a multiple of 8 elements, 16-byte aligned buffers, no dbias,
 * no activation on load (mxq_tma_refusal).  Why: a kernel holding its tile in registers after
 * 16-byte loads has no loads in flight while it computes and stores.  Here one thread of the
 * block keeps the loads of the next tiles in flight as tensor-map boxes into shared memory, which
 * costs no registers, while every thread converts the current tile from shared memory
 * (bench/lab/lab_mx.cu and lab_stream.cu measure this structure against a device copy).
 *   - Tiles of GQ_TR = 128 rows x MXQ_TMA_TC = 128 columns of one member, so a tile row is one
 *     whole 128-byte line of each FP8 copy.  The walk is gq_walk's (the kernel's a.n_ct counts
 *     128-column tiles), strided across blocks so that the blocks resident together read
 *     neighbouring tiles as a copy does; the members come from the device plan
 *     (gq_locate_warp), the grid is persistent.
 *   - Loads: one 2-D tensor map over the packed input [rows, cols], encoded on the host per call
 *     (mxq_tma_try), boxes of 128 rows x 64 columns (128 bytes a row, 128-byte swizzle: 16-byte
 *     unit u of box row r lands at unit u ^ (r % 8), mxq_tma_unit); a tile is two boxes, the
 *     second not issued when it starts at or past the last column, and the barrier expects
 *     exactly the issued boxes' bytes (a box's bytes count in full, zero-filled parts included).
 *     A box at a member's row row0 + r0 reaches into the next member's rows (real data) or past
 *     the tensor (zero-filled): rows at or past the member's are never read as data (skipped or
 *     replaced by +0, as gq_load's missing elements).  Columns past cols inside an issued box are
 *     zero-filled by the copy, which is what the upper 8 elements of a row's last chunk need when
 *     cols % 16 == 8; chunks past cols are never read.
 *   - A ring of MXQ_TMA_STAGES = 3 stages of 32 KB in dynamic shared memory, one "full" mbarrier
 *     and one slot each.  Warp 0 issues the first 3 tiles, then at the top of tile j the boxes of
 *     tile j + 2 into the stage that the barrier of tile j - 1 released; before arming a stage the
 *     warp finds the tile's member (gq_locate_warp: a window of 32 members, one member a lane, in
 *     one round of loads) and lane 0 writes the member and the tile into the stage's slot, which
 *     the other threads read after their wait (the barrier's arrival releases it), so the member
 *     search runs once per tile in one warp, not in all 256 threads.  One block barrier a tile
 *     (__syncthreads_or, which also says whether the tile holds a NaN) publishes the columnwise
 *     multipliers and frees the stage: the multipliers go through two colmult buffers (tile j
 *     uses buffer j % 2), so no second barrier guards their reuse.  ~104 KB a block (stages
 *     1024-byte aligned for the swizzle): 2 blocks (512 threads) per SM, up to 6 tiles = 192 KB
 *     of loads in flight per SM.  __launch_bounds__(256, 2): 124 registers (bf16) / 118 (fp16),
 *     no spills (CUDA 13, sm_90a).
 *   - A warp-specialized form (converting warps and a load warp waiting on per-stage "empty"
 *     barriers) is faster in the lab's lighter per-thread code, but the library's per-thread code
 *     (runtime E8M0 rules and formats, members, swizzled grids, padding) needs the 16 warps, and
 *     with fewer it spills.
 *   - Per tile, thread t takes chunk k = t % 8 (16 columns) of rows rr + 32 h, h = 0..3, rr =
 *     mxq_tma_row(t) (a warp: 4 whole rows x 128 columns; chunk h lies in 32-row block h): the four
 *     chunks from the stage into registers, then the rowwise code per chunk (mxq_row_block: the
 *     neighbour lane completes the 32-column block; a warp vote of NaN picks the unchecked encode
 *     or the checked one).  Columnwise: each thread reduces one (32-row block, column pair)
 *     straight from the stage (32 32-bit loads, a warp reading one whole 128-byte box row), rows
 *     past the member and columns past cols left out; a pair holding a NaN redoes its two columns
 *     one by one (NaN left out of the maximum, code 0xFF under nan_propagate).  The multipliers go
 *     through shared memory (colmult, in a permuted order); the vote of the barrier that publishes
 *     them says whether the tile holds a NaN: the unchecked encode without, the checked one with.
 *   - Stores: 16 bytes a chunk per copy (cols % 16 == 0) or two 8-byte halves (cols % 16 == 8: a
 *     row then starts 8-byte aligned; the upper half only for a full chunk), a byte per scale;
 *     the grids' padding zeroed for 128-column tiles (mxq_tma_padding).
 * Every byte equals mxq_general_kernel's: the same elements (a stage holds the input's bits), the
 * same amaxes (max is exact in any order; what is left out was +0 there), the same codes,
 * multipliers, FP32 products, conversions and store offsets.
 * Shared-memory traffic: the swizzled boxes with the lane order of mxq_tma_row make the chunk
 * reads free of bank conflicts (8 x 4 = 32 wavefronts per warp per tile), colmult is permuted so
 * that a quarter warp reads 8 consecutive float4 (16 to 64 wavefronts), and the column pairs'
 * reads are one 128-byte row per load (32): 80 to 128 wavefronts per warp per tile, where the
 * natural layouts took 363 (ncu on an H200, 16384 x 8192 bf16, E4M3).  The rowwise scale indices
 * are one mxq_sidx_row and a step per tile, the columnwise pair's second index the first plus a
 * constant.
 * Encoding each column pair straight from the stage (no colmult, no second barrier) costs more
 * instructions per element and 2-byte stores; it ran slower in the lab (bench/lab/lab_mx.cu).
 * Stores stay plain stores (a bulk store through shared memory would need another 32 KB of
 * staging per block). */

#define MXQ_TMA_TC 128                                       /* columns of a tile: two boxes */
#define MXQ_TMA_BOX_C 64                                     /* columns of a box: 128 bytes a row */
#define MXQ_TMA_BOX_BYTES (GQ_TR * MXQ_TMA_BOX_C * 2)          /* 16 KB */
#define MXQ_TMA_STAGES 3
#define MXQ_TMA_STAGE_BYTES ((MXQ_TMA_TC / MXQ_TMA_BOX_C) * MXQ_TMA_BOX_BYTES)
#define MXQ_TMA_PER_ROW (MXQ_TMA_TC / GQ_CHUNK)               /* chunks of a tile row: 8 */
#define MXQ_TMA_PASS (GQ_THREADS / MXQ_TMA_PER_ROW)           /* rows of one chunk per thread: 32 */
#define MXQ_TMA_RPT (GQ_TR / MXQ_TMA_PASS)                    /* chunks per thread per tile: 4 */
#define MXQ_TMA_COLMULT_BYTES ((GQ_TR / 32) * MXQ_TMA_TC * 4) /* one buffer: float4 colmult[4][32], permuted */
#define MXQ_TMA_MIN_BLOCKS 2 /* what the shared memory allows */

/* A stage's tile, written by the issuing thread before it arms the stage's barrier: the member
 * (its cursor) and the tile's (row tile, column tile). */
typedef struct mxq_tma_slot {
    gq_cursor_t cur;
    int64_t rt, ct;
} mxq_tma_slot_t;

/* The issuing warp's state (its lane 0 writes it), in shared memory so that it holds no register
 * of the other threads: the next tile to load (row tile, column tile), its member, the tiles
 * issued so far and the next stage. */
typedef struct mxq_tma_producer {
    gq_cursor_t cur;
    int64_t rt, ct, issued;
    int st;
} mxq_tma_producer_t;

/* Dynamic shared memory: the stages, two colmult buffers, the barriers, the slots, the issuer's
 * state, and the slack that aligns the stages to 1024 bytes (the period of the 128-byte swizzle). */
#define MXQ_TMA_SMEM                                                                                     \
    (MXQ_TMA_STAGES * MXQ_TMA_STAGE_BYTES + 2 * MXQ_TMA_COLMULT_BYTES + MXQ_TMA_STAGES * 8 +              \
     MXQ_TMA_STAGES * sizeof(mxq_tma_slot_t) + sizeof(mxq_tma_producer_t) + 1024)
static_assert(MXQ_TMA_PASS == 32, "chunk h of a thread lies in 32-row block h");
static_assert((GQ_TR / 32) * (MXQ_TMA_TC / 2) == GQ_THREADS, "columnwise: one (32-row block, column pair) per thread");
static_assert(MXQ_TMA_STAGE_BYTES % 1024 == 0 && MXQ_TMA_BOX_BYTES % 1024 == 0 && MXQ_TMA_COLMULT_BYTES % 16 == 0,
              "stage, box and colmult alignment");
static_assert(MXQ_TMA_BOX_C * 2 == 128 && GQ_TR == 128 && MXQ_TMA_PER_ROW == 8, "a box row is one 128-byte swizzle span");

/* Byte offset in a stage of the 16-byte unit u (0..7) of box row r: the tensor map's 128-byte
 * swizzle stores unit u of row r at unit u ^ (r % 8) of the row (boxes and stages are
 * 1024-byte aligned, so r % 8 is the row's position in the swizzle period). */
__device__ __forceinline__ int mxq_tma_unit(int r, int u) {
    return r * (MXQ_TMA_BOX_C * 2) + ((u ^ (r & 7)) << 4);
}

/* Where thread t reads its chunks (and stores them): row rr of the tile's first 32 rows (chunk h
 * is row rr + 32 h), column chunk k (tile columns 16k .. 16k + 15).  Lane l of warp wp takes
 * k = l % 8 of row 4 wp + q for k < 4, and of row 4 wp + (q ^ 1) for k >= 4, q = l / 8.  A warp
 * covers rows 4 wp .. 4 wp + 3 whole (its stores write four whole 128-byte lines of each copy),
 * lanes 2j and 2j + 1 hold the two halves of one 32-column block (mxq_row_block), and the 8
 * lanes of a quarter warp (one 16-byte shared load each, the unit of a conflict-free access) read
 * box 0 of one row and box 1 of a row of the other parity: units 2 (k % 4) ^ x of the first and
 * 2 (k % 4) ^ x ^ 1 of the second, 8 distinct 16-byte units, so neither of a chunk's two loads
 * meets a bank conflict (unswizzled, lanes k and k + 4 meet the same banks: 2-way). */
__device__ __forceinline__ int mxq_tma_row(int t) {
    const int l = t % 32, q = l / 8;
    return 4 * (t / 32) + ((l % 8) < 4 ? q : (q ^ 1));
}

/* The 8 words (elements in column order) of a chunk: the units at byte offsets o (the lower 8
 * elements) and o ^ 16 (the upper 8) of the stage, o = mxq_tma_unit(row, 2 (k % 4)) in box k / 4. */
__device__ __forceinline__ void mxq_tma_chunk(const uint8_t *lo_p, const uint8_t *hi_p, uint32_t (&w)[8]) {
    const uint4 lo = *(const uint4 *)lo_p, hi = *(const uint4 *)hi_p;
    w[0] = lo.x, w[1] = lo.y, w[2] = lo.z, w[3] = lo.w;
    w[4] = hi.x, w[5] = hi.y, w[6] = hi.z, w[7] = hi.w;
}

/* n (16, or 8 when cols % 16 == 8) codes at p: one 16-byte store when every row starts 16-byte
 * aligned (al16: cols % 16 == 0, so n is 16), else 8-byte halves. */
__device__ __forceinline__ void mxq_tma_store(uint8_t *p, const uint32_t (&b)[4], int n, bool al16) {
    if (al16) {
        *(uint4 *)p = make_uint4(b[0], b[1], b[2], b[3]);
        return;
    }
    *(uint2 *)p = make_uint2(b[0], b[1]);
    if (n == GQ_CHUNK) *(uint2 *)(p + 8) = make_uint2(b[2], b[3]);
}

/* The columnwise amax of one column of a 32-row block on a swizzled stage (blk: the block's first
 * box row; its element in row i at blk + mxq_tma_unit(i, u) + e; nv rows of the member): the
 * largest non-NaN |x| bits, bit 31 set when a NaN is among them.  The rare path of a column pair
 * holding a NaN. */
template <int DT> __device__ __noinline__ uint32_t mxq_tma_col_fin(const uint8_t *blk, int u, int e, int nv) {
    uint32_t fm = 0, nn = 0;
    for (int i = 0; i < nv; i++) {
        const uint32_t v = *(const uint16_t *)(blk + mxq_tma_unit(i, u) + e) & 0x7FFFu;
        if (v > (uint32_t)gq_traits<DT>::NAN_ABOVE) nn = 1u << 31;
        else fm = max(fm, v);
    }
    return fm | nn;
}

/* mxq_padding for 128-column tiles: the padding of member cur's grids that tile (r0, ct) owns. */
__device__ __forceinline__ void mxq_tma_padding(const gq_args_t &a, const gq_cursor_t &cur, int64_t r0, int64_t ct) {
    constexpr int JB = MXQ_TMA_TC / 32; /* 32-column blocks of a tile */
    const int last_ct = ct == a.n_ct - 1, last_rt = r0 + GQ_TR >= cur.m;
    const int64_t c0 = ct * MXQ_TMA_TC;
    if (a.q) {
        uint8_t *g = a.s + cur.srow;
        if (last_ct) mxq_zero(a, g, 0, cur.m, r0, min(r0 + GQ_TR, cur.m), a.nb, a.gc_r);
        if (last_rt) mxq_zero(a, g, 0, cur.m, cur.m, gln_round_up(cur.m, 128), ct * JB, last_ct ? a.gc_r : ct * JB + JB);
    }
    if (a.qc) {
        uint8_t *g = a.cs + cur.scol;
        const int64_t nbr = gln_ceil_div(cur.m, 32);
        if (last_ct) mxq_zero(a, g, 1, cur.m, r0 / 32, min(r0 / 32 + GQ_TR / 32, nbr), a.cols, a.gc_c);
        if (last_rt) mxq_zero(a, g, 1, cur.m, nbr, gln_round_up(nbr, 4), c0, last_ct ? a.gc_c : c0 + MXQ_TMA_TC);
    }
}

/* map: the packed input [rows, cols] in boxes of GQ_TR x MXQ_TMA_BOX_C, 128-byte swizzle; a.n_ct:
 * 128-column tiles. */
template <int DT>
__global__ void __launch_bounds__(GQ_THREADS, MXQ_TMA_MIN_BLOCKS)
    mxq_tma_kernel(const __grid_constant__ CUtensorMap map, const gq_args_t a) {
    static_assert(DT != GQ_F32, "2-byte inputs (a box row is 128 bytes)");
    constexpr int W = gq_traits<DT>::W, S = MXQ_TMA_STAGES;
    extern __shared__ __align__(1024) uint8_t mxq_tma_smem[];
    gln_pdl_wait(); /* launched by gln_cuda_launch: the previous kernels' writes first */
    gln_pdl_launch_dependents();
    const gq_walk_t wk = gq_walk(a);
    if (wk.count <= 0) return; /* block-uniform, before any barrier */
    uint8_t *stages = mxq_tma_smem + ((1024u - (gln_smem_addr(mxq_tma_smem) & 1023u)) & 1023u);
    /* colmult buffer b: float4 [h][8 v + k], the multipliers of elements 4v .. 4v + 3 of column
     * chunk k in 32-row block h, so that the 8 lanes of a quarter warp (k = 0..7) read 8
     * consecutive float4 (no bank conflict; the warp's other quarters read the same ones) */
    float *const cmbase = (float *)(stages + S * MXQ_TMA_STAGE_BYTES);
    uint64_t *const full = (uint64_t *)(stages + S * MXQ_TMA_STAGE_BYTES + 2 * MXQ_TMA_COLMULT_BYTES);
    mxq_tma_slot_t *const slot = (mxq_tma_slot_t *)(full + S);
    mxq_tma_producer_t *const P = (mxq_tma_producer_t *)(slot + S); /* warp 0's */
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
            const int32_t row = (int32_t)(cur.row0 + (prt - cur.t0) * GQ_TR), col = (int32_t)(pct * MXQ_TMA_TC);
            const bool two = col + MXQ_TMA_BOX_C < C; /* the second box holds columns of the tensor */
            uint8_t *dst = stages + pst * MXQ_TMA_STAGE_BYTES;
            gln_mbar_expect_tx(&full[pst], two ? 2 * MXQ_TMA_BOX_BYTES : MXQ_TMA_BOX_BYTES);
            gln_tma_load_2d(dst, &map, &full[pst], row, col);
            if (two) gln_tma_load_2d(dst + MXQ_TMA_BOX_BYTES, &map, &full[pst], row, col + MXQ_TMA_BOX_C);
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

    const int rr = mxq_tma_row(t), k = t % MXQ_TMA_PER_ROW;
    /* this thread's chunk h: stage bytes o_lo + 4096 h (elements 0..7) and o_hi + 4096 h (8..15);
     * rr + 32 h has the swizzle phase of rr, and o_lo's bit 4 is the parity of its unit */
    const int o_lo = (k / 4) * MXQ_TMA_BOX_BYTES + mxq_tma_unit(rr, 2 * (k % 4)), o_hi = o_lo ^ 16;
    /* columnwise: (32-row block bb, column pair cp), its words at stage bytes
     * o_col + mxq_tma_unit(i, u) for rows i = 0..31 of the block (a warp reads one whole 128-byte
     * box row per row: no bank conflict) */
    const int bb = t / (MXQ_TMA_TC / 2), cp = t % (MXQ_TMA_TC / 2), u = (cp % 32) / 4;
    const int o_col = (cp / 32) * MXQ_TMA_BOX_BYTES + bb * 32 * (MXQ_TMA_BOX_C * 2) + (cp % 4) * 4;
    /* its pair's two multipliers in a colmult buffer (floats) */
    const int cm_off = (bb * (MXQ_TMA_TC / 4) + ((cp % 8) / 2) * 8 + cp / 8) * 4 + 2 * (cp % 2);
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
        const int64_t r0 = (rt - cur.t0) * GQ_TR, c0 = ct * MXQ_TMA_TC, c = c0 + k * GQ_CHUNK;
        const int rv = (int)min(cur.m - r0, (int64_t)GQ_TR); /* the member's rows in the tile (>= 1) */
        const int nc = c < C ? (C - c >= GQ_CHUNK ? GQ_CHUNK : GQ_CHUNK / 2) : 0; /* cols % 8 == 0 */
        const int64_t i0 = (cur.row0 + r0 + rr) * C + c; /* chunk 0's first element; chunk h: + 32 h C */
        const uint8_t *tile = stages + st * MXQ_TMA_STAGE_BYTES;
        bool ok[MXQ_TMA_RPT]; /* chunk h holds elements of the member */
        uint32_t w[MXQ_TMA_RPT][W];
#pragma unroll
        for (int h = 0; h < MXQ_TMA_RPT; h++) {
            ok[h] = nc != 0 && rr + h * MXQ_TMA_PASS < rv;
            if (ok[h]) {
                const int oh = h * MXQ_TMA_PASS * (MXQ_TMA_BOX_C * 2);
                mxq_tma_chunk(tile + o_lo + oh, tile + o_hi + oh, w[h]);
            } else {
#pragma unroll
                for (int v = 0; v < W; v++) w[h][v] = 0;
            }
        }
        if (!a.qc) __syncthreads(); /* block-uniform: every thread is done with stage st */
        float mult[GQ_CHUNK];
        uint32_t b[4];
        if (a.q) { /* rowwise: this chunk and its neighbour lane's form one 32-column block */
            /* grid entry of (row r0 + rr + 32 h, block c / 32): chunk 0's + h sstep, as r0 % 128 == 0
             * and rr < 32 (mxq_swz: i >> 7 and i & 31 fixed, (i & 127) >> 5 = h; compact: 32 h rows) */
            const int64_t s0 = cur.srow + mxq_sidx_row(a, r0 + rr, c / 32), sstep = a.swz ? 4 : MXQ_TMA_PASS * a.gc_r;
#pragma unroll
            for (int h = 0; h < MXQ_TMA_RPT; h++) {
                uint32_t m = 0; /* |x| maximum (bits; NaN patterns order above Inf) */
#pragma unroll
                for (int v = 0; v < W; v++) m = __vmaxu2(m, w[h][v] & 0x7FFF7FFFu);
                m = max(m & 0xFFFFu, m >> 16);
                const bool fast = !__any_sync(GQ_FULL, m > (uint32_t)gq_traits<DT>::NAN_ABOVE); /* warp-uniform */
                const uint8_t code = mxq_row_block<DT>(a, w[h], m, fast, rinv, mult, b);
                if (ok[h]) {
                    mxq_tma_store(a.q + i0 + h * MXQ_TMA_PASS * C, b, nc, al16);
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
                    const uint8_t *px = blk + mxq_tma_unit(x, u);
#pragma unroll
                    for (int g = 0; g < 4; g++)
                        pm = __vmaxu2(pm, *(const uint32_t *)(px + g * 8 * (MXQ_TMA_BOX_C * 2)) & 0x7FFF7FFFu);
                }
            } else {
                for (int i = 0; i < nv; i++) pm = __vmaxu2(pm, *(const uint32_t *)(blk + mxq_tma_unit(i, u)) & 0x7FFF7FFFu);
            }
            const uint32_t mlo = pm & 0xFFFFu, mhi = pm >> 16;
            const int cnan = max(mlo, mhi) > (uint32_t)gq_traits<DT>::NAN_ABOVE;
            uint8_t lo, hi;
            if (!cnan) {
                lo = mxq_code_finite<DT>(a, mlo, rinv), hi = mxq_code_finite<DT>(a, mhi, rinv);
            } else { /* each column of the pair on its own, NaN left out of its maximum */
                const uint32_t flo = mxq_tma_col_fin<DT>(blk - (cp % 4) * 4, u, (cp % 4) * 4, nv);
                const uint32_t fhi = mxq_tma_col_fin<DT>(blk - (cp % 4) * 4, u, (cp % 4) * 4 + 2, nv);
                lo = mxq_code<DT>(a, flo & 0x7FFFFFFFu, (int)(flo >> 31));
                hi = mxq_code<DT>(a, fhi & 0x7FFFFFFFu, (int)(fhi >> 31));
            }
            /* buffer j % 2: a thread writing it at tile j has passed the barrier of tile j - 1, so
             * every thread has finished its reads of it at tile j - 2 */
            float *const cm = cmbase + (j & 1) * (MXQ_TMA_COLMULT_BYTES / 4);
            *(float2 *)(cm + cm_off) = make_float2(gln_e8m0_inverse_bits(lo), gln_e8m0_inverse_bits(hi));
            if (nv > 0) { /* the member's 32-row block rb, columns cc and cc + 1 (cc even: mxq_swz's
                           * i & 31 grows by one, nothing else moves; compact: the next byte) */
                const int64_t s_lo = cur.scol + mxq_sidx_col(a, r0 / 32 + bb, cc, cur.m);
                a.cs[s_lo] = lo;
                a.cs[s_lo + (a.swz ? 16 : 1)] = hi;
            }
            /* block-uniform; colmult complete, and every thread is done with stage st */
            const bool tile_nan = __syncthreads_or(cnan) != 0;
            const float4 *const cm4 = (const float4 *)cm;
#pragma unroll
            for (int h = 0; h < MXQ_TMA_RPT; h++) {
#pragma unroll
                for (int v = 0; v < 4; v++) {
                    const float4 f = cm4[h * (MXQ_TMA_TC / 4) + v * 8 + k];
                    mult[4 * v] = f.x, mult[4 * v + 1] = f.y, mult[4 * v + 2] = f.z, mult[4 * v + 3] = f.w;
                }
                if (!tile_nan) gq_encode_unchecked<DT, true>(w[h], 0.0f, mult, a.e5m2, b);
                else gq_encode<DT>(w[h], mult, a.e5m2, b);
                if (ok[h]) mxq_tma_store(a.qc + i0 + h * MXQ_TMA_PASS * C, b, nc, al16);
            }
        }
        mxq_tma_padding(a, cur, r0, ct);
        if (++st == S) st = 0, phase ^= 1u;
    }
}

/* ---- host side ---------------------------------------------------------------------------- */

/* mxq_tma_kernel<DT>'s dynamic shared memory limit, raised once per device (bit d of `done`; a
 * racing first call raises it twice, which is harmless). */
template <int DT> static gln_status_t mxq_tma_attr(int dev, const char *call) {
    static unsigned long long done = 0;
    const unsigned long long bit = dev >= 0 && dev < 64 ? 1ull << dev : 0ull;
    if (bit && (__atomic_load_n(&done, __ATOMIC_ACQUIRE) & bit)) return GLN_STATUS_SUCCESS;
    GLN_TRY(gln_cuda_check(cudaFuncSetAttribute(mxq_tma_kernel<DT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                MXQ_TMA_SMEM),
                           call, "cudaFuncSetAttribute(mxq_tma_kernel, dynamic shared memory)"));
    if (bit) __atomic_fetch_or(&done, bit, __ATOMIC_RELEASE);
    return GLN_STATUS_SUCCESS;
}

/* Launch mxq_tma_kernel<DT> on the resident blocks (at most one per tile, at most gq_grid_cap);
 * *taken = 0 when it does not fit on this device (mxq_general_kernel runs then). */
template <int DT>
static gln_status_t mxq_tma_launch(const gq_args_t *a, const CUtensorMap *map, int64_t tiles, cudaStream_t stream,
                                   const char *call, int *taken) {
    int dev = 0;
    GLN_TRY(gln_cuda_check(cudaGetDevice(&dev), call, "cudaGetDevice"));
    GLN_TRY(mxq_tma_attr<DT>(dev, call));
    int per_sm = 0;
    GLN_TRY(gln_cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mxq_tma_kernel<DT>, GQ_THREADS,
                                                                         MXQ_TMA_SMEM),
                           call, "cudaOccupancyMaxActiveBlocksPerMultiprocessor(mxq_tma_kernel)"));
    if (per_sm <= 0) return GLN_STATUS_SUCCESS;
    *taken = 1;
    int64_t blocks = 0;
    GLN_TRY(gq_grid((const void *)mxq_tma_kernel<DT>, tiles, &blocks, call, MXQ_TMA_SMEM));
    if (blocks <= 0) return GLN_STATUS_SUCCESS;
    GLN_TRY(gln_cuda_check(gln_cuda_launch(mxq_tma_kernel<DT>, dim3((unsigned int)blocks), dim3(GQ_THREADS),
                                           MXQ_TMA_SMEM, stream, *map, *a),
                           call, "mxq_tma_kernel"));
    return gln_cuda_check_launch(call, "mxq_tma_kernel");
}

/* Why mxq_tma_kernel cannot take this pass (NULL: it can; *empty: with nothing to run, else with
 * the tensor map encoded): bf16 / fp16 input, cols a multiple of 8 (16-byte rows for the tensor
 * map; the coordinates are 32-bit), input and outputs 16-byte aligned, no dbias, no activation on
 * load. */
static const char *mxq_tma_refusal(const gq_args_t *a, const gln_tensor_t *in, CUtensorMap *map, int *empty) {
    const int64_t R = in->rows, C = in->cols;
    const int bf16 = in->dtype == GLN_DTYPE_BF16;
    *empty = 0;
    if (!bf16 && in->dtype != GLN_DTYPE_FP16) return "the input is not bf16 or fp16";
    if (a->dpart) return "a fused dbias runs on mxq_general_kernel";
    if (a->act != GLN_ACT_LOAD_NONE) return "an activation on load runs on mxq_general_kernel";
    if (R <= 0 || C <= 0) { /* no element and no grid entry */
        *empty = 1;
        return NULL;
    }
    if (C % 8 != 0) return "cols is not a multiple of 8";
    if (R > INT32_MAX || C > INT32_MAX) return "rows or cols exceed 2^31 - 1";
    if (((uintptr_t)a->x | (uintptr_t)a->q | (uintptr_t)a->qc) & 15u) return "a buffer is not 16-byte aligned";
    if (gln_tma_encode_2d(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, a->x,
                          (uint64_t)R, (uint64_t)C, (uint64_t)C * 2u, GQ_TR, MXQ_TMA_BOX_C, CU_TENSOR_MAP_SWIZZLE_128B))
        return "the driver refused the tensor map";
    return NULL;
}

/* The MXFP8 pass on mxq_tma_kernel where it can take it (*taken = 1; the status is the launch's);
 * row_tiles: gq_members' bound on the row tiles. */
static gln_status_t mxq_tma_try(const gq_args_t *a, const gln_tensor_t *in, int64_t row_tiles, cudaStream_t stream,
                                const char *call, int *taken) {
    *taken = 0;
    CUtensorMap map;
    int empty = 0;
    if (mxq_tma_refusal(a, in, &map, &empty)) return GLN_STATUS_SUCCESS;
    if (empty) {
        *taken = 1;
        return GLN_STATUS_SUCCESS;
    }
    gq_args_t m = *a;
    m.n_ct = gln_ceil_div(in->cols, MXQ_TMA_TC);
    m.strided = 1; /* see the kernel's section: neighbouring tiles on the resident blocks */
    const int64_t tiles = row_tiles * m.n_ct;
    return in->dtype == GLN_DTYPE_BF16 ? mxq_tma_launch<GQ_BF16>(&m, &map, tiles, stream, call, taken)
                                       : mxq_tma_launch<GQ_F16>(&m, &map, tiles, stream, call, taken);
}

template <int DT> static gq_kernel_t mxq_general_dt(int vec, int dbias) {
    if (dbias) return vec ? mxq_general_kernel<DT, true, true> : mxq_general_kernel<DT, false, true>;
    return vec ? mxq_general_kernel<DT, true, false> : mxq_general_kernel<DT, false, false>;
}

/* mxq_general_kernel for dtype dt, with 16-byte chunks where vec (gq_vec_ok), with the dbias sums
 * where dbias. */
static gq_kernel_t mxq_general_pick(int dt, int vec, int dbias) {
    if (dt == GQ_F32) return mxq_general_dt<GQ_F32>(vec, dbias);
    if (dt == GQ_BF16) return mxq_general_dt<GQ_BF16>(vec, dbias);
    return mxq_general_dt<GQ_F16>(vec, dbias);
}

gln_status_t mxq_run(const gq_args_t *a, const gln_tensor_t *in, int64_t row_tiles, int64_t tiles,
                     cudaStream_t stream, const char *call) {
    int taken = 0;
    GLN_TRY(mxq_tma_try(a, in, row_tiles, stream, call, &taken));
    gq_probe(taken ? "mxq_tma_kernel" : "mxq_general_kernel");
    if (taken) return GLN_STATUS_SUCCESS;
    return gq_launch(mxq_general_pick(gq_dt(in->dtype), gq_vec_ok(a), a->dpart != NULL), a, tiles, stream, call,
                     "mxq_general_kernel");
}

/* ---- the standalone MXFP8 scale swizzle (backend slot mxfp8_swizzle) ----------------------- */

/* One thread per swizzled byte (i, j) of the padded grid [Ip, Jp]: the compact entry or 0. */
__global__ void mxq_swizzle_kernel(int64_t I, int64_t J, int64_t Ip, int64_t Jp, int columnwise,
                                  const uint8_t *compact, uint8_t *swizzled) {
    const int64_t n = Ip * Jp, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        const int64_t i = e / Jp, j = e % Jp;
        uint8_t v = 0;
        if (i < I && j < J) v = columnwise ? compact[j * Ip + i] : compact[i * Jp + j];
        swizzled[mxq_swz(i, j, Jp / 4)] = v;
    }
}

extern "C" gln_status_t gln_cuda_mxfp8_swizzle(gln_context_t *ctx, int64_t rows, int64_t cols, int columnwise,
                                               const uint8_t *compact, uint8_t *swizzled) {
    const int64_t I = columnwise ? cols : rows, J = gln_ceil_div(columnwise ? rows : cols, 32);
    const int64_t Ip = gln_round_up(I, 128), Jp = gln_round_up(J, 4);
    if (Ip * Jp == 0) return GLN_STATUS_SUCCESS;
    mxq_swizzle_kernel<<<gln_dev_blocks((size_t)(Ip * Jp), GQ_THREADS), GQ_THREADS, 0, gln_cuda_state(ctx)->stream>>>(
        I, J, Ip, Jp, columnwise, compact, swizzled);
    return gln_cuda_check_launch("gln_mxfp8_swizzle_scales (cuda)", "mxq_swizzle_kernel");
}

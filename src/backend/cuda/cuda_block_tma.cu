/* The fast FP8 block-scaling quantizer: gln_block_quant_tma_kernel, for bf16 input whose base is
 * 16-byte aligned and whose columns are a multiple of 8 (gln_block_quant_tma_refusal says what
 * else it needs; the general kernel of cuda_block_general.cu takes the rest).  A ring of
 * BQ_TMA_STAGES (3) tiles in dynamic shared memory is filled by the Hopper tensor copy
 * (cp.async.bulk.tensor, cuda_tma.cuh), which costs no registers and runs while the block
 * computes: while the block works on its tile j, the copies of its tiles j + 1 and j + 2 are in
 * flight or landed.  A kernel that loads a tile into registers has no load in flight while it
 * encodes and stores.
 *
 *   - Loads: one 2-D tensor map over the packed input [rows, cols] (bf16, row stride cols·2
 *     bytes), box 128 rows x 128 columns, no swizzle: a stage is the tile, row r at r·256 bytes.
 *     A box that crosses into the next member's rows loads them (bq_tma_load masks them to 0);
 *     rows past the tensor's end and columns past cols load as 0.  The copy always delivers the
 *     whole box (32768 bytes, zero fill included), so every stage's barrier expects exactly
 *     BQ_TMA_STAGE_BYTES.  Reading the stage: lane (rg, cg) reads 16 bytes of row rg*8 + p at
 *     column cg*8; each 8-lane phase of a warp's 16-byte loads covers 128 contiguous bytes of one
 *     row, so the unswizzled tile has no bank conflicts.
 *   - Producer: warp 0 walks the block's tiles (one carry per step, its state in shared memory),
 *     finds the next one (bq_find_at needs a whole warp) and its lane 0 writes it into the
 *     stage's slot (the tile, or "none"), arms the stage's "full" mbarrier with the box bytes and
 *     issues the copy.  The prologue issues the block's first BQ_TMA_STAGES - 1 tiles; at the top
 *     of iteration j, after the block barrier that ends tile j - 1, it issues tile
 *     j + BQ_TMA_STAGES - 1 into the stage tile j - 1 used.  A copy is issued only for a real
 *     tile (t < tiles and bq_find_at finds it); real tiles are a prefix of the block's walk, so
 *     the copies issued are exactly those of the tiles the loop consumes, and a block leaves (at
 *     the first slot that says "none") with no copy in flight into its shared memory.
 *   - Consumers (all 256 threads, warp 0 included): read the tile from the stage's slot (no
 *     per-warp search, and no walk state in their registers), wait on the stage's barrier (phase
 *     parity flips each time the ring wraps), read their 8x8 codes from it into packed registers
 *     and run the per-thread code below (amaxes, scales, encodes, NaN fix-ups, rowwise stores,
 *     transposed store).
 *   - The transposed copy's 16 KB staging tile is the consumed stage itself (that leaves room
 *     for 2 blocks per SM).  It is safe: every thread's reads of the input precede a block barrier
 *     that precedes the first staging write (bq_tile_scale_of's in BLOCK_2D, bq_tma_col_scales'
 *     in BLOCK_1D; the staging only exists with the columnwise copy, where that barrier is always
 *     reached), and the stage is refilled only after the block barrier at the top of the next
 *     iteration, which every thread reaches after its staging reads.  Each thread fences its
 *     ordinary shared accesses against the async proxy (fence.proxy.async) before that barrier,
 *     so the tensor copy's writes are ordered after the staging writes.
 *   - Shared memory: 3 x 32 KB stages (+ 128 bytes to align the ring) dynamic, plus 2.8 KB
 *     of column maxima / scales, the barriers, slots and walk static: 101,296 bytes (BLOCK_1D),
 *     2 blocks per SM (228 KB).  4 stages would leave 1 block per SM (8 warps), too few to hide
 *     the barrier waits and the shuffles; 2 tiles in flight per block are 128 KB per SM, well
 *     above what the DRAM latency asks for at the copy bandwidth (~20-30 KB per SM).
 *   - Grid: persistent (as many blocks as are resident, from the occupancy calculator with the
 *     dynamic shared memory; one per SM for a single tensor in BLOCK_1D, see the launcher);
 *     GLN_CUDA_QUANT_GRID=N caps it at N blocks (the tests wrap the ring many times that way).
 *     No L2 prefetch: the copies run ahead instead.
 *   - Registers: 128 (1D) / 121 (2D), no spills (ptxas -v), with the thread's row / column group
 *     made opaque per tile (else the compiler hoists the staging addresses out of the loop and
 *     spills them).
 * Stores are ordinary stores (8-byte rowwise, 16-byte transposed): staging the rowwise codes in
 * shared memory for bulk stores is a lever left for measurement. */
#include "backend/cuda/cuda_block_tile.cuh"
#include "backend/cuda/cuda_tma.cuh"

#define BQ_TMA_STAGES 3
#define BQ_TMA_STAGE_BYTES (BQ_EDGE * BQ_EDGE * 2) /* one bf16 tile: 128 rows of 256 bytes */
#define BQ_TMA_DYN_SMEM (BQ_TMA_STAGES * BQ_TMA_STAGE_BYTES + 128)

/* Warp 0's walk over the block's tiles, in shared memory (no consumer register holds it): the
 * next tile to issue, t = rt·ctiles + ct (0 <= ct < ctiles), and the grid stride as srt row
 * tiles and sct column tiles, so a step is one carry. */
typedef struct bq_tma_walk {
    int64_t t, rt, ct, srt, sct;
} bq_tma_walk_t;

/* A stage's tile, written by warp 0's lane 0 when it issues the stage's copy: real = 0 when the
 * walk has no tile there (past the grid bound or past the last real tile). */
typedef struct bq_tma_slot {
    bq_tile_t tl;
    int real;
} bq_tma_slot_t;

/* Warp 0 (every lane): the walk's next tile into `slot`; if it is real, lane 0 arms `full` with the
 * box's bytes and copies the tile's box into `stage`; the walk advances. */
__device__ __forceinline__ void bq_tma_issue(const bq_args_t &a, const CUtensorMap *map, bq_tma_walk_t *walk,
                                          bq_tma_slot_t *slot, uint8_t *stage, uint64_t *full) {
    const int64_t t = walk->t, rt = walk->rt, ct = walk->ct;
    bq_tile_t tl;
    const int real = t < a.tiles && bq_find_at(a, rt, ct, &tl); /* warp-uniform */
    __syncwarp(); /* every lane has read the walk */
    if ((threadIdx.x & 31) == 0) {
        slot->real = real;
        if (real) {
            slot->tl = tl;
            gln_mbar_expect_tx(full, BQ_TMA_STAGE_BYTES);
            gln_tma_load_2d(stage, map, full, (int32_t)(tl.mrow0 + tl.rs), (int32_t)tl.c0);
        }
        int64_t nrt = rt + walk->srt, nct = ct + walk->sct;
        if (nct >= a.ctiles) nct -= a.ctiles, nrt++;
        walk->t = t + gridDim.x, walk->rt = nrt, walk->ct = nct;
    }
    __syncwarp(); /* the advanced walk is seen by the warp's next call */
}

/* The thread's packed codes (cuda_block_tile.cuh) from a landed stage: w[p][k] = tile row rg*8 + p, tile columns
 * cg*8 + 2k (low half) and + 1 (high half); 0 for rows past the member's tile and for columns
 * past the tensor's (cols % 8 == 0, so a thread's 8 columns are all valid or all not).  The box
 * always lands whole (rows of the next member or the zero fill past the tensor's end, the zero
 * fill past cols), so the 8 reads need no guard; the zeroing runs only on a thread whose rows or
 * columns leave the tile (a partial tile's). */
__device__ __forceinline__ void bq_tma_load(const uint8_t *stage, const bq_tile_t &tl, int rg, int cg, uint32_t w[8][4]) {
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

/* ---- per-thread code: the amaxes stay packed up to the scales ---------------------------------
 *
 * The maxima stay packed (two bf16 magnitude codes per word) until each block's amax is known, and
 * only that is widened:
 *   - NaN codes (magnitude > 0x7F80): with NANP they are kept, as they order above every number
 *     in the unsigned max and widen to a NaN, and a NaN amax is all the scale rule looks at
 *     (gln_scale_from_amax_impl: scale 1 for any NaN); without NANP a thread holding one recomputes
 *     its maxima with those codes replaced by 0 (fmaxf's "ignore NaN": the max of the others, 0 if
 *     none, as an FP32 loop starting from 0).  Non-NaN magnitude codes order as their values, and
 *     the widening is exact, so every block amax is the general kernel's.
 *   - Row amax: bq_row_amax's butterfly on the packed words (the same shuffles, __vmaxu2 for
 *     bq_max), one widening at the end.
 *   - Column partials: the two row groups of a warp combined packed (2 shuffles, a reduce-scatter:
 *     each lane keeps 2 of its 4 column pairs) and stored as one 8-byte word per lane into
 *     colmaxp[warp][64 column pairs]: a warp's 32 stores cover 256 contiguous bytes, no bank
 *     conflict (bq_col_partials: 4 scalar stores per lane, 4-way conflicts).
 *   - Column scales: thread c < 128 reduces its pair's 8 words and widens its half.
 *   - Encode scales of the columnwise copy read back as 2 16-byte loads per lane (instead of 8
 *     scalar loads with 4-way conflicts).
 *   - Rowwise stores, transposed store: the 8-byte / 16-byte paths without per-row or per-chunk
 *     guards for a whole tile (the common case), the general functions otherwise.
 *   - Staging of the transposed copy: two swizzle values per thread instead of eight.
 * Encodes and NaN fix-ups are the packed helpers of cuda_block_tile.cuh. */

/* The packed magnitude maxima of the thread's codes: rm[p] of row p (both halves are row p),
 * cm[k] of columns 2k (low) and 2k + 1 (high) over the 8 rows (BLOCK_1D), *all of everything.
 * DROP_NAN: NaN codes count as 0. */
template <bool TWO_D, bool DROP_NAN>
__device__ __forceinline__ void bq_tma_pmax(const uint32_t w[8][4], uint32_t rm[8], uint32_t cm[4], uint32_t *all) {
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

/* bq_tma_pmax with the NaN rule above; returns whether the thread holds a NaN (which selects
 * the NaN fix-ups of the encodes). */
template <bool TWO_D, bool NANP>
__device__ __forceinline__ bool bq_tma_amax(const uint32_t w[8][4], uint32_t rm[8], uint32_t cm[4], uint32_t *all) {
    bq_tma_pmax<TWO_D, false>(w, rm, cm, all);
    const bool has_nan = max(*all & 0xFFFFu, *all >> 16) > 0x7F80u;
    if (!NANP && has_nan) bq_tma_pmax<TWO_D, true>(w, rm, cm, all);
    return has_nan;
}

/* The larger of a packed word's two magnitude codes, widened to FP32 (exact). */
__device__ __forceinline__ float bq_tma_widen_max(uint32_t v) { return __uint_as_float(max(v & 0xFFFFu, v >> 16) << 16); }

/* bq_row_scales on the packed row maxima: bq_row_amax's butterfly with __vmaxu2, so lane cg ends
 * with row cg >> 1 of its half-warp, as there. */
__device__ __forceinline__ void bq_tma_row_scales(const bq_args_t &a, const bq_tile_t &tl, const uint32_t rm[8], int rg,
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
    bq_row_spread(a, tl, bq_scale(a, bq_tma_widen_max(a1)), rg, cg, rscale);
}

/* Column pairs of a tile (BLOCK_1D column partials, packed) */
#define BQ_TMA_PAIRS (BQ_EDGE / 2)

/* bq_col_partials on the packed column maxima: lane (rg, cg) of warp w leaves the max over the
 * warp's 16 rows of its column pairs cg*4 + 2·b4 and + 1 (b4: the warp's second row group) in
 * colmaxp[w][cg*4 + 2·b4 ...], one 8-byte store. */
__device__ __forceinline__ void bq_tma_col_partials(const uint32_t cm[4], int cg, uint32_t (*colmaxp)[BQ_TMA_PAIRS]) {
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
__device__ __forceinline__ void bq_tma_col_scales(const bq_args_t &a, const bq_tile_t &tl,
                                               const uint32_t (*colmaxp)[BQ_TMA_PAIRS], float *cscale) {
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

/* bq_pk_store_rows; a thread whose 8 rows and 8 columns are all in the tile, on an 8-byte aligned
 * rowwise output, stores without per-row guards. */
__device__ __forceinline__ void bq_tma_store_rows(const bq_args_t &a, const bq_tile_t &tl, const uint2 w[8], int rg,
                                               int cg) {
    const int c = cg * 8;
    if (!a.vec_q || rg * 8 + 8 > tl.nr || c >= tl.nc) {
        bq_pk_store_rows(a, tl, w, rg, cg);
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
__device__ __forceinline__ void bq_tma_stage_cols(uint8_t *tp, const uint2 w[8], int rg, int cg) {
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
__device__ __forceinline__ void bq_tma_store_tpose(const bq_args_t &a, const bq_tile_t &tl, const uint8_t *tp) {
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

/* BLOCK_2D after the load, with the packed tile amax (thread_amax: the widened max of the thread's codes). */
template <bool NANP, bool E5M2>
__device__ __forceinline__ void bq_tma_finish_2d(const bq_args_t &a, const bq_tile_t &tl, const uint32_t w[8][4],
                                              float thread_amax, bool has_nan, int rg, int cg, uint8_t *tp,
                                              float *wmax) {
    constexpr int IN = BQ_IN_BF16;
    const float scale = bq_tile_scale_of<NANP>(a, tl, thread_amax, wmax);
    const float rs[8] = {scale, scale, scale, scale, scale, scale, scale, scale};
    uint2 rw[8];
    bq_pk_enc<IN, E5M2, BQ_PK_ROWS>(w, rs, has_nan, rw);
    if (a.q) bq_tma_store_rows(a, tl, rw, rg, cg);
    if (!a.qt) return;
    uint2 cw[8];
    bq_tr8(rw, cw);
    bq_tma_stage_cols(tp, cw, rg, cg);
    __syncthreads();
    bq_tma_store_tpose(a, tl, tp);
}

/* BLOCK_1D after the load, with the packed maxima. */
template <bool NANP, bool E5M2>
__device__ __forceinline__ void bq_tma_finish_1d(const bq_args_t &a, const bq_tile_t &tl, const uint32_t w[8][4],
                                              const uint32_t rm[8], const uint32_t cm[4], bool has_nan, int rg,
                                              int cg, uint8_t *tp, uint32_t (*colmaxp)[BQ_TMA_PAIRS],
                                              float *cscale) {
    constexpr int IN = BQ_IN_BF16;
    if (a.qt) bq_tma_col_partials(cm, cg, colmaxp);
    if (a.q) {
        float rscale[8];
        uint2 rw[8];
        bq_tma_row_scales(a, tl, rm, rg, cg, rscale);
        bq_pk_enc<IN, E5M2, BQ_PK_ROWS>(w, rscale, has_nan, rw);
        bq_tma_store_rows(a, tl, rw, rg, cg);
    }
    if (!a.qt) return;
    bq_tma_col_scales(a, tl, colmaxp, cscale);
    const float4 s0 = *(const float4 *)(cscale + cg * 8), s1 = *(const float4 *)(cscale + cg * 8 + 4);
    const float cs[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w}; /* column cg*8 + j's */
    uint2 cw[8];
    bq_pk_enc<IN, E5M2, BQ_PK_COLS>(w, cs, has_nan, cw);
    bq_tma_stage_cols(tp, cw, rg, cg);
    __syncthreads();
    bq_tma_store_tpose(a, tl, tp);
}

template <bool TWO_D, bool NANP, bool E5M2>
__global__ void __launch_bounds__(BQ_THREADS, 2) gln_block_quant_tma_kernel(const bq_args_t a,
                                                                         const __grid_constant__ CUtensorMap map) {
    gln_pdl_wait(); /* launched by gln_cuda_launch: the previous kernels' writes first */
    gln_pdl_launch_dependents();
    extern __shared__ uint8_t bq_tma_dyn[];
    __shared__ __align__(8) uint32_t colmaxp[BQ_THREADS / 32][BQ_TMA_PAIRS];
    __shared__ __align__(16) float cscale[BQ_EDGE];
    __shared__ float wmax[BQ_THREADS / 32];
    __shared__ __align__(8) uint64_t full[BQ_TMA_STAGES];
    __shared__ bq_tma_slot_t slot[BQ_TMA_STAGES];
    __shared__ bq_tma_walk_t walk;
    /* the ring at a 128-byte aligned shared address (the tensor copy's destination alignment) */
    uint8_t *ring = bq_tma_dyn + ((128u - (gln_smem_addr(bq_tma_dyn) & 127u)) & 127u);
    const bool producer = threadIdx.x < 32;
    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < BQ_TMA_STAGES; s++) gln_mbar_init(&full[s], 1);
        gln_mbar_init_fence();
        walk.t = blockIdx.x, walk.rt = (int64_t)blockIdx.x / a.ctiles;
        walk.ct = (int64_t)blockIdx.x - walk.rt * a.ctiles;
        walk.srt = (int64_t)gridDim.x / a.ctiles, walk.sct = (int64_t)gridDim.x - walk.srt * a.ctiles;
    }
    __syncthreads();
    if (producer)
#pragma unroll
        for (int s = 0; s < BQ_TMA_STAGES - 1; s++)
            bq_tma_issue(a, &map, &walk, &slot[s], ring + s * BQ_TMA_STAGE_BYTES, &full[s]);
    int stage = 0;       /* tile j's stage: j % BQ_TMA_STAGES */
    uint32_t parity = 0; /* and the parity of its barrier's phase: (j / BQ_TMA_STAGES) & 1 */
    for (;;) {
        gln_fence_async_smem(); /* this thread's shared accesses of tile j - 1 before the refill */
        __syncthreads();        /* tile j - 1 is done: its stage, slot and the shared scratch are free */
        if (!slot[stage].real) return; /* block-uniform; no later tile is real, none was issued */
        const bq_tile_t &tl = slot[stage].tl; /* read where used: fewer live registers */
        if (producer) {
            const int s = stage == 0 ? BQ_TMA_STAGES - 1 : stage - 1;
            bq_tma_issue(a, &map, &walk, &slot[s], ring + s * BQ_TMA_STAGE_BYTES, &full[s]);
        }
        gln_mbar_wait(&full[stage], parity);
        /* the thread's row / column group, made opaque per tile so that the compiler does not hoist
         * the addresses derived from them out of the loop (held across it they spill, ptxas -v) */
        int cg = threadIdx.x & 15, rg = threadIdx.x >> 4;
        asm volatile("" : "+r"(cg), "+r"(rg));
        uint8_t *buf = ring + stage * BQ_TMA_STAGE_BYTES;
        uint32_t w[8][4];
        bq_tma_load(buf, tl, rg, cg, w);
        uint32_t rm[8], cm[4], all;
        const bool has_nan = bq_tma_amax<TWO_D, NANP>(w, rm, cm, &all);
        /* buf is the transposed copy's staging tile from here on (see above) */
        if (TWO_D)
            bq_tma_finish_2d<NANP, E5M2>(a, tl, w, bq_tma_widen_max(all), has_nan, rg, cg, buf, wmax);
        else
            bq_tma_finish_1d<NANP, E5M2>(a, tl, w, rm, cm, has_nan, rg, cg, buf, colmaxp, cscale);
        if (++stage == BQ_TMA_STAGES) stage = 0, parity ^= 1u;
    }
}


/* ---- launch ---------------------------------------------------------------------------------- */

typedef void (*bq_tma_kernel_t)(const bq_args_t, const CUtensorMap);

template <bool TWO_D>
static bq_tma_kernel_t bq_tma_pick(int nanp, int e5m2) {
    if (nanp) return e5m2 ? gln_block_quant_tma_kernel<TWO_D, true, true> : gln_block_quant_tma_kernel<TWO_D, true, false>;
    return e5m2 ? gln_block_quant_tma_kernel<TWO_D, false, true> : gln_block_quant_tma_kernel<TWO_D, false, false>;
}

/* NULL when the kernel can take the call, else why not: bf16 read as is from a 16-byte aligned
 * base with cols % 8 == 0 (a.vec_in), no activation on load, and row / column coordinates that
 * fit the tensor copy's 32-bit ones. */
const char *gln_block_quant_tma_refusal(gln_dtype_t dtype, const bq_args_t *a, int64_t in_rows) {
    if (dtype != GLN_DTYPE_BF16) return "the input is not bf16";
    if (a->act != GLN_ACT_LOAD_NONE) return "the input is an activation computed on load";
    if (a->cols % 8 != 0) return "the columns are not a multiple of 8";
    if (!a->vec_in) return "the input's base is not 16-byte aligned";
    if (in_rows <= 0 || in_rows > INT32_MAX) return "the packed rows are outside [1, INT32_MAX]";
    if (a->cols > INT32_MAX) return "the columns exceed INT32_MAX";
    return NULL;
}

gln_status_t gln_block_quant_launch_tma(gln_context_t *ctx, const gln_quant_config_t *cfg, bq_args_t *a,
                                        int64_t in_rows, int *launched, const char *call) {
    *launched = 0;
    CUtensorMap map;
    if (gln_tma_encode_2d(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, a->x, (uint64_t)in_rows, (uint64_t)a->cols,
                          (uint64_t)a->cols * 2u, BQ_EDGE, BQ_EDGE, CU_TENSOR_MAP_SWIZZLE_NONE) != 0)
        return GLN_STATUS_SUCCESS;
    const int two_d = cfg->mode == GLN_SCALING_BLOCK_2D, nanp = cfg->amax_nan_propagate != 0,
              e5m2 = cfg->fp8_dtype == GLN_DTYPE_FP8_E5M2;
    const bq_tma_kernel_t k = two_d ? bq_tma_pick<true>(nanp, e5m2) : bq_tma_pick<false>(nanp, e5m2);
    /* the dynamic shared memory above 48 KB, allowed once per instance (a racing first call sets
     * the same value again) */
    static int allowed[8];
    const int inst = two_d * 4 + nanp * 2 + e5m2;
    if (!__atomic_load_n(&allowed[inst], __ATOMIC_ACQUIRE)) {
        GLN_TRY(gln_cuda_check(cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    BQ_TMA_DYN_SMEM),
                               call, "cudaFuncSetAttribute(gln_block_quant_tma_kernel, max dynamic shared memory)"));
        __atomic_store_n(&allowed[inst], 1, __ATOMIC_RELEASE);
    }
    unsigned int grid = 0;
    /* one tensor in 1x128 blocks: one block per SM, not the two that fit.  On the H200 that took
     * 16384 x 8192 from 78 to 86 % of a copy (8192-24576 rows, 8064-16384 columns alike); grouped
     * tensors and 128x128 blocks keep two, which measured faster for them (bench/RESULTS.md,
     * 2026-12-04) */
    GLN_TRY(gln_block_quant_grid((const void *)k, BQ_TMA_DYN_SMEM, a, &grid, call, !a->rows && !two_d));
    GLN_TRY(gln_cuda_check(gln_cuda_launch(k, dim3(grid), dim3(BQ_THREADS), BQ_TMA_DYN_SMEM,
                                           gln_cuda_state(ctx)->stream, *a, map),
                           call, "gln_block_quant_tma_kernel"));
    *launched = 1;
    return gln_cuda_check_launch(call, "gln_block_quant_tma_kernel");
}

/* Per-tensor quantization (TENSOR: current and delayed scaling) of a group of members, the kernels
 * behind gq_members' TENSOR passes (cuda_quant_members.cu):
 *   current  amax pass (reads x once) -> scale step (one thread per member) -> cast pass (reads x
 *            once, writes the rowwise copy and, through a shared-memory tile, the member's
 *            transposed copy [cols, m_i]): two passes over x, as the scale depends on the
 *            member's amax.  Both passes run on one grid and the cast pass walks each block's
 *            tiles in reverse, so it starts on the tiles the amax pass read last, still in L2.
 *   delayed  cast pass with the given scales, accumulating the amax in the same pass -> scale
 *            step (amax max-accumulated, scale_inv; with an amax record, the layer's history row
 *            0 too: gln_cuda_quantize_members_record).
 * Two kernels for the passes:
 *   tq_tma_kernel      bf16 / fp16 without dbias or activation on load, a 16-byte aligned input,
 *                      cols % 8 == 0: tiles copied by the tensor memory accelerator into a ring
 *                      of shared-memory stages (the section below says how); the amax pass's last
 *                      block runs the scale step;
 *   tq_general_kernel  everything else (FP32 input, unaligned buffers or rows, the fused dbias
 *                      sums, activation on load): 16-byte register loads of the next tile issued
 *                      before the current one is converted (2 tiles in flight per block), scalar
 *                      loads and stores where the rows are not 16-byte chunks; the scale step is
 *                      tq_scale_kernel.
 * Both give the same bytes (cuda_quant_tile.cuh: the numerics). */
#include "backend/cuda/cuda_quant_tile.cuh"

/* ---- the general kernel ------------------------------------------------------------------- */

/* Blocks per SM the compiler must allow (registers): the kernel holds two tiles (the one it
 * converts and the next one's loads in flight), 4 blocks for the amax pass, 3 for the casts, one
 * fewer with the dbias sums (16 more per thread); FP32 chunks need twice the registers: 2. */
__host__ __device__ constexpr int tq_min_blocks(int dt, int modes) {
    return dt == GQ_F32 ? 2 : ((modes & GQ_MODE_MASK) == GQ_AMAX ? 4 : 3) - ((modes & GQ_DBIAS) ? 1 : 0);
}

/* Column tc's 16 codes of tile rows j*16 .. j*16+15, packed like a chunk. */
__device__ __forceinline__ void tq_tile_column(const uint8_t (*tile)[GQ_TC], int j, int tc, uint32_t (&o)[4]) {
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
__device__ __forceinline__ void tq_codes(const gq_args_t &a, uint8_t (*tile)[GQ_TC], const gq_cursor_t &cur,
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
            tq_tile_column(tile, j, tc, o);
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
template <int DT, bool VEC, int MODES>
__global__ void __launch_bounds__(GQ_THREADS, tq_min_blocks(DT, MODES)) tq_general_kernel(const gq_args_t a) {
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
    gq_tile_load<DT, VEC>(a, cur, id, T);
    float s = MODE != GQ_AMAX ? __ldg(a.scale + cur.i) : 0.0f;
    uint32_t best = 0;
    unsigned long long nan_not = 0;
    for (int64_t done = 0; done < count; done++, id += step) {
        const bool more = done + 1 < count; /* block-uniform */
        if (more) { /* the next tile's loads, in flight during this one */
            gq_locate(a, (id + step) / a.n_ct, nxt);
            gq_tile_load<DT, VEC>(a, nxt, id + step, N);
        }
        if (MODE != GQ_CAST) {
#pragma unroll
            for (int h = 0; h < GQ_RPT; h++) gq_amax_chunk<DT>(T.w[h], T.i0[h], best, nan_not);
            if (DBIAS) gq_dbias_tile<DT>(a, T, dsum);
        }
        if (MODE != GQ_AMAX) tq_codes<DT>(a, tile, cur, s, T.r0, T.c0, T.w, T.n, T.i0);
        if (more) {
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


/* The per-tensor scale step's arguments: the amax partials `work` of num members (of x, dtype),
 * the config's rule (nanp, current, fp8_max, pow2, epsilon), the outputs and the delayed amax
 * record.  done: the arrival counter of tq_tma_kernel's fused step (tq_finish_scale; zeroed by the
 * setup kernel), NULL where tq_scale_kernel runs the step. */
typedef struct tq_scale_job {
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
} tq_scale_job_t;

/* Member i's step from its partial w: the amax (with nan_propagate, |x| of the lowest NaN, loaded
 * the reference's way), then current: scale from amax; delayed: amax max-accumulated and the given
 * scale, and with rec.history the fused fp8_state_record: history slot first + i·stride
 * max-accumulates the member's amax exactly as gln_fp8_state_record_kernel would right after.
 * scale_inv = 1/scale in every present copy. */
__device__ __forceinline__ void tq_scale_member(const tq_scale_job_t &j, int32_t i, gq_amax_t w) {
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

/* One thread per member: tq_scale_member after the amax kernel. */
__global__ void tq_scale_kernel(const tq_scale_job_t j) {
    gln_pdl_wait(); /* launched by gln_cuda_launch: the previous kernels' writes first */
    gln_pdl_launch_dependents();
    const int32_t i = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < j.num) tq_scale_member(j, i, j.work[i]);
}

/* ---- TENSOR, the fast kernel: a bulk-copy (TMA) load pipeline ------------------------------
 * Why: a kernel holding its tile in registers between 16-byte loads and their use (as
 * tq_general_kernel does) has no loads in flight while a block converts and stores.  Here the
 * tensor memory accelerator copies tiles into a ring of shared-memory stages: bytes in flight
 * cost no registers and stay in flight while the block computes.
 *   - Loads: one 2-D tensor map over the packed input [rows, cols] (bf16 / fp16), boxes of
 *     GQ_TR x 64 elements (128 rows x 128 bytes): one instruction per 16 KB box, issued by
 *     warp 0's lane 0 (a tile is one box, or two: TC below).  A box starts at the tile's packed row
 *     (member row0 + r0), so a member's partial last tile also loads the next member's first
 *     rows (masked below) and rows past the tensor / columns past cols load as zero (the tensor
 *     map's out-of-bounds fill).  The box's bytes land in full, out-of-bounds fill included, so
 *     the stage's barrier expects each issued box's 16 KB.  The 128-byte swizzle (16-byte unit u
 *     of box row r at unit u ^ (r % 8); tq_tma_read) makes a warp's reads of its 8 rows x 4
 *     chunks (TC = 64) free of bank conflicts, which an unswizzled 128-byte pitch would make 2-way.
 *   - Ring: S stages (1024-byte aligned for the swizzle), a "full" mbarrier and a slot each
 *     (tq_tma_slot_t: the tile and its member, written by the producer before it arms the stage,
 *     so no consumer searches or walks).  The producer is warp 0 (tq_tma_issue): the whole warp
 *     finds the member (gq_locate_warp: one round of loads over a window of 32 members; TC = 64
 *     keeps lane 0's gq_locate, which its 80-register budget holds without spilling), lane 0 arms
 *     the barrier and issues.  The prologue issues tiles 0..S-1; tile j waits on stage j % S with
 *     parity (j / S) % 2 and every thread copies its chunks to registers.  Without a transposed
 *     copy, the block barrier after those reads lets warp 0 refill the stage with tile j + S.
 *     With one:
 *       - TC = 64: the transposed tile is a static double buffer, so one block barrier per tile
 *         suffices (tile j + 2 rewrites tile j's buffer only after every thread has passed tile
 *         j + 1's barrier, i.e. finished its reads of tile j), after which warp 0 refills the
 *         stage with tile j + S;
 *       - TC = 128: the transposed tile is staged in the consumed stage itself, which leaves room
 *         for 3 stages at 2 blocks per SM: a barrier after the chunk reads (every thread is out
 *         of stage j, and out of stage j - 1's transposed reads), after which warp 0 refills
 *         stage j - 1 with tile j - 1 + S, and the barrier between the transposed writes and
 *         reads; each thread fences its ordinary accesses of the stage against the async proxy
 *         (fence.proxy.async) after its transposed reads, so the next copy into the stage is
 *         ordered after them.  2 tiles in flight per block while one is converted.
 *   - Amax partials are flushed per warp (gq_flush_warp: shuffles and one atomic per warp, no
 *     block barrier) when the member changes, which the strided order over small members does at
 *     nearly every tile; max is exact in any order.
 *   - Per chunk: the amax fold on packed pairs (gq_amax_chunk with the NaN index for a thread
 *     whose chunks hold a NaN), the encode without the NaN-code check where the scale is finite
 *     and nonzero and the member (warp, for delayed scaling) holds no NaN, gq_encode_uniform
 *     otherwise; the transposed tile in 32-bit words (tq_tpos) and 8-byte transposed stores.  The
 *     amax pass of current scaling (MODE GQ_AMAX) is the same loop without outputs.
 *   - A chunk outside the member (rows past m, columns past cols) reads as +0, as gq_load's
 *     missing elements do, so amax partials and NaN votes see only the member's elements.  With
 *     cols % 16 == 8 the last chunk of a row holds 8 valid columns (the other 8 are the zero fill)
 *     and stores 8 codes (tq_tma_store).
 * Conditions (tq_tma_refusal): bf16 / fp16 input without activation-on-load or dbias, x 16-byte
 * aligned, cols % 8 == 0 (the tensor map's 16-byte row stride), packed rows and cols below 2^31 -
 * 128 (the box coordinates are 32-bit); the outputs may have any alignment (stores check theirs).
 * Every byte equals tq_general_kernel's: the same element bits reach the same functions, and the
 * loads never change a bit.
 *
 * Two tilings, one body (template parameter TC: 128 where cols > 64, else 64, since a 128-column
 * tile of a narrower tensor is half empty; tq_tma_cols):
 *   TC = 64: tiles of 128 x 64, one box each; thread t owns column chunk k = t % 4 of rows
 *     rr = t / 4 and rr + 64 (GQ_RPT = 2).  A warp's rowwise store covers 8 rows x 64 bytes, half
 *     of each 128-byte line.  3 blocks of 256 threads per SM (<= 80 registers) with 3 stages
 *     each: 3 x (48 KB ring + 16 KB transposed tiles + 2 KB) = 200 KB of shared memory, 9 tiles =
 *     144 KB in flight per SM.
 *   TC = 128: a tile is two boxes of the same map side by side in one 32 KB stage (box b at byte
 *     b · 16 KB, each with its own 128-byte swizzle), so the rowwise and transposed stores write
 *     whole 128-byte lines.  The second box is issued only where it starts before cols, and the
 *     stage's barrier expects exactly the issued boxes' bytes (tq_tma_issue); its chunks are then
 *     all past cols, so they are never read as data (replaced by +0 like every chunk outside the
 *     member) and the transposed phase skips that half.  Thread t: lane l = t % 32 of warp
 *     w = t / 32 owns column chunk k = 4·bit3(l) + (l % 4) of rows rr + 32h, rr = 4w + 2·bit4(l)
 *     + bit2(l), h = 0..3 (RPT = 4; tq_tma_thread):
 *       - a warp's rowwise store covers 4 rows x 128 bytes, 4 whole lines;
 *       - stage reads (16 bytes a lane; conflicts are counted per 8 lanes): lanes 8q .. 8q+7 read
 *         rows r, r + 1 (r even) of one box at units 2(l % 4) (+1) ^ (row % 8); the rows' XOR
 *         keys differ in bit 0, so the 8 units are distinct: no conflict;
 *       - transposed tile: one tq_tpos sub-tile per box, sub-tile 1 at 2050 words (2 words past a
 *         bank period) so that the 64-bit stores of lanes 16q .. 16q+15 (rows r, r + 1, both boxes,
 *         4 chunks) hit 32 distinct banks; the transposed reads (one sub-tile per instruction,
 *         all banks shifted alike) stay free of conflicts;
 *       - the transposed phase is TC = 64's, once per sub-tile.
 *     A block holds S x 32 KB of ring + 1 KB of alignment slack + ~0.7 KB of barriers, slots and
 *     walk: 3 stages, ~97.7 KB, 2 blocks per SM (16 warps; one block's barriers overlap the
 *     other's work).  Registers (the limit at 2 blocks is 128): cast 111 / 113, amax 80, cast +
 *     amax 96 / 99 (bf16 / fp16), no spills.
 *   Current scaling's amax pass runs on the same TC, stage ring and grid as its cast pass
 *     (tq_tma_first_pass / tq_run), so block b covers the same tiles in both passes and the
 *     reversed cast pass starts on the tiles the amax pass read last (still in L2). */
#define TQ_TMA_STAGES_64 3
#define TQ_TMA_MIN_BLOCKS_64 3
#define TQ_TMA_STAGES_128 3 /* TC = 128 */
#define TQ_TMA_MIN_BLOCKS_128 2 /* TC = 128 */
#define TQ_BOX_C 64                          /* columns of a box: a 128-byte row of bf16 / fp16 */
#define TQ_BOX_BYTES (GQ_TR * TQ_BOX_C * 2) /* one box: 16 KB */
#define TQ_SUB_WORDS (GQ_TR * TQ_BOX_C / 4 + 2) /* a transposed sub-tile (one box's codes) + bank offset */
static_assert(TQ_BOX_C * 2 == 128, "a box row is one 128-byte swizzle span");

/* The geometry of tiling TC (the section's comment). */
template <int TC> struct tq_tma_geo {
    static_assert(TC == 64 || TC == 128, "tiles of 64 or 128 columns");
    static constexpr int NB = TC / TQ_BOX_C;          /* boxes of a tile */
    static constexpr int PER_ROW = TC / GQ_CHUNK;      /* chunks of a tile row */
    static constexpr int PASS = GQ_THREADS / PER_ROW;  /* rows between a thread's chunks */
    static constexpr int RPT = GQ_TR / PASS;           /* chunks per thread per tile */
    static constexpr int S = TC == 64 ? TQ_TMA_STAGES_64 : TQ_TMA_STAGES_128;
    static constexpr int MIN_BLOCKS = TC == 64 ? TQ_TMA_MIN_BLOCKS_64 : TQ_TMA_MIN_BLOCKS_128;
    static constexpr int STAGE = NB * TQ_BOX_BYTES;   /* bytes of a stage */
    static constexpr int SMEM = S * STAGE + 1024;      /* dynamic: the ring + slack to align it */
    /* the transposed tile staged in the consumed stage (TC = 128) or in a static double buffer */
    static constexpr bool IN_STAGE = TC == 128;
    static_assert(!IN_STAGE || NB * TQ_SUB_WORDS * 4 <= STAGE, "the transposed tile fits in its stage");
};
static_assert(tq_tma_geo<64>::RPT == GQ_RPT && tq_tma_geo<64>::PASS == GQ_PASS, "TC = 64 is the file's tile");

/* Thread t's tile row rr (its chunks are rows rr + h · PASS) and column chunk k (columns
 * 16k .. 16k+15 of the tile, in box k / 4); the mapping of TC = 128 is the section's. */
template <int TC> __device__ __forceinline__ void tq_tma_thread(int t, int &rr, int &k) {
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
typedef struct tq_tma_prod {
    gq_cursor_t c;
    int64_t rt, ct;
} tq_tma_prod_t;

/* A stage's tile, written by the producer before it arms the stage's barrier: the member (its
 * cursor) and the tile's (row tile, column tile). */
typedef struct tq_tma_slot {
    gq_cursor_t c;
    int64_t rt, ct;
} tq_tma_slot_t;

/* Warp 0 (every lane): the producer's next tile.  The warp finds its member (gq_locate_warp;
 * TC = 64: lane 0, gq_locate), lane 0 writes it and the tile into `slot`, arms `bar` for the tile's boxes and loads them into
 * `dst`; the walk advances.  A 128-column tile's second box is issued only where it starts
 * before cols (else its chunks are all past cols and never read), and the barrier expects the
 * issued boxes' bytes. */
template <int TC>
__device__ __forceinline__ void tq_tma_issue(const gq_args_t &a, const CUtensorMap *map, tq_tma_prod_t *p, tq_tma_slot_t *slot,
                                          int64_t sq, int64_t sr, uint8_t *dst, uint64_t *bar) {
    if (TC == 128) gq_locate_warp(a, p->rt, &p->c);
    if ((threadIdx.x & 31) == 0) {
        if (TC == 64) gq_locate(a, p->rt, p->c); /* 80 registers: the warp's search would spill */
        const gq_cursor_t c = p->c;
        int64_t rt = p->rt, ct = p->ct;
        slot->c = c, slot->rt = rt, slot->ct = ct;
        const int32_t row = (int32_t)(c.row0 + (rt - c.t0) * GQ_TR), col = (int32_t)(ct * TC);
        const bool second = TC == 128 && (int64_t)col + TQ_BOX_C < a.cols;
        gln_mbar_expect_tx(bar, second ? 2u * TQ_BOX_BYTES : (uint32_t)TQ_BOX_BYTES);
        gln_tma_load_2d(dst, map, bar, row, col);
        if (second) gln_tma_load_2d(dst + TQ_BOX_BYTES, map, bar, row, col + TQ_BOX_C);
        rt += sq, ct += sr;
        if (ct >= a.n_ct) ct -= a.n_ct, rt++;
        p->rt = rt, p->ct = ct;
    }
    __syncwarp(); /* the warp's next call sees the advanced walk */
}


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
__device__ __forceinline__ int tq_tpos(int row, int w) {
    const int x = (((row >> 3) & 1) << 4) ^ (((row >> 4) & 7) << 1) ^ (((row >> 1) & 1) << 1);
    return 32 * (row >> 1) + ((16 * (row & 1) + w) ^ x);
}

/* Store the 8 codes of (lo, hi) (byte e of the pair at p[e]), n (<= 8) of them. */
__device__ __forceinline__ void tq_store8(uint8_t *p, uint32_t lo, uint32_t hi, int n) {
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
__device__ __forceinline__ void tq_transpose4(uint32_t v0, uint32_t v1, uint32_t v2, uint32_t v3, uint32_t (&o)[4]) {
    /* t0 = (v0.0, v1.0, v0.1, v1.1), t1 = (v0.2, v1.2, v0.3, v1.3); t2, t3 the same of v2, v3 */
    const uint32_t t0 = __byte_perm(v0, v1, 0x5140), t1 = __byte_perm(v0, v1, 0x7362);
    const uint32_t t2 = __byte_perm(v2, v3, 0x5140), t3 = __byte_perm(v2, v3, 0x7362);
    o[0] = __byte_perm(t0, t2, 0x5410), o[1] = __byte_perm(t0, t2, 0x7632);
    o[2] = __byte_perm(t1, t3, 0x5410), o[3] = __byte_perm(t1, t3, 0x7632);
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
__device__ __forceinline__ void tq_tma_read(const uint8_t *box, int row, int k, uint32_t (&w)[8]) {
    const uint8_t *r = box + row * 128;
    const int x = row & 7;
    const uint4 u0 = *(const uint4 *)(r + (((2 * k) ^ x) << 4)), u1 = *(const uint4 *)(r + (((2 * k + 1) ^ x) << 4));
    w[0] = u0.x, w[1] = u0.y, w[2] = u0.z, w[3] = u0.w;
    w[4] = u1.x, w[5] = u1.y, w[6] = u1.z, w[7] = u1.w;
}

/* n (16, or 8 for a row's last chunk when cols % 16 == 8) codes at p: 16- or 8-byte stores where
 * p is aligned for them, else gq_store16's narrower ones. */
__device__ __forceinline__ void tq_tma_store(uint8_t *p, const uint32_t (&b)[4], int n) {
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
 * runs tq_scale_member for every member, one launch fewer than tq_scale_kernel after the
 * pass.  Every thread fences its amax atomics before its block arrives; the last block fences
 * again and reads the partials from L2.  Every thread of every block calls it. */
__device__ __forceinline__ void tq_finish_scale(const tq_scale_job_t &fin) {
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
        tq_scale_member(fin, i, w);
    }
}

/* MODE GQ_AMAX (current scaling's amax pass), GQ_CAST (its cast pass: a.work holds the amax
 * pass's partials of the same x, on the same TC and grid) or GQ_CAST_AMAX (delayed scaling); TC
 * the tile's columns (a.n_ct counts TC-column tiles).  `map`: tq_tma_refusal's map of a.x (boxes of
 * 128 rows x 64 columns, 128-byte swizzle). */
template <int DT, int MODE, int TC>
__global__ void __launch_bounds__(GQ_THREADS, tq_tma_geo<TC>::MIN_BLOCKS)
    tq_tma_kernel(const __grid_constant__ CUtensorMap map, const gq_args_t a, const tq_scale_job_t fin) {
    static_assert(DT != GQ_F32, "2-byte inputs (a box row is 128 bytes)");
    typedef tq_tma_geo<TC> G;
    constexpr int S = G::S, W = gq_traits<DT>::W, RPT = G::RPT, PASS = G::PASS, NB = G::NB;
    constexpr bool CASTS = MODE != GQ_AMAX, IN_STAGE = G::IN_STAGE;
    constexpr bool BUF = CASTS && !IN_STAGE; /* the static double buffer of the transposed tile */
    /* transposed, x2; sub-tile b (box b's codes) at word b · TQ_SUB_WORDS */
    __shared__ __align__(16) uint32_t tile[BUF ? 2 : 1][BUF ? NB * TQ_SUB_WORDS : 1];
    __shared__ __align__(8) uint64_t full[S];
    __shared__ tq_tma_slot_t slot[S];
    __shared__ tq_tma_prod_t prod;
    extern __shared__ __align__(1024) uint8_t tq_tma_dyn[];
    gln_pdl_wait(); /* launched by gln_cuda_launch: the previous kernels' writes first */
    gln_pdl_launch_dependents();
    const gq_walk_t wk = gq_walk(a);
    const bool finish = MODE != GQ_CAST && fin.done != NULL; /* the scale step fused (tq_finish_scale) */
    if (wk.count <= 0) {
        if (finish) tq_finish_scale(fin);
        return;
    }
    /* the ring, 1024-byte aligned in the shared window (the 128-byte swizzle repeats every 1024) */
    uint8_t *const ring = tq_tma_dyn + ((1024u - (gln_smem_addr(tq_tma_dyn) & 1023u)) & 1023u);
    const int t = threadIdx.x;
    int rr, k;
    tq_tma_thread<TC>(t, rr, k);
    const int kb = k & 3, box = k >> 2; /* the chunk within its box, the box */
    const int lane = t & 31, g = lane & 15, cg = 2 * (t >> 5) + (lane >> 4); /* transposed phase */
    const int64_t C = a.cols, count = wk.count;
    const size_t passC = (size_t)PASS * (size_t)C;
    const int rd = 128 * g + ((16 * (g & 1)) | (cg ^ (2 * (g >> 1)))); /* row 8g, words 4cg.. in tq_tpos */
    const float dummy[GQ_CHUNK] = {};
    /* the walk as (row tile, column tile), advanced by the step's floor quotient and remainder */
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
            tq_tma_issue<TC>(a, &map, &prod, &slot[s], sq, sr, ring + s * G::STAGE, &full[s]);
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
            tq_tma_read(st + box * TQ_BOX_BYTES, rr + h * PASS, kb, w[h]);
            if (!ok[h]) {
#pragma unroll
                for (int v = 0; v < W; v++) w[h][v] = 0u; /* not the member's: +0, like gq_load */
            }
        }
        if (!tr) { /* every thread's words are out of the stage: refill it */
            __syncthreads();
            if (t < 32 && j + S < count) tq_tma_issue<TC>(a, &map, &prod, &slot[stage], sq, sr, st, &full[stage]);
        } else if (IN_STAGE) {
            /* every thread is out of this stage (its words are read) and out of the previous one
             * (tile j - 1's transposed reads): this stage may take the transposed tile, the
             * previous one its next tile, j - 1 + S */
            __syncthreads();
            const int prev = stage == 0 ? S - 1 : stage - 1;
            if (t < 32 && j >= 1 && j - 1 + S < count)
                tq_tma_issue<TC>(a, &map, &prod, &slot[prev], sq, sr, ring + prev * G::STAGE, &full[prev]);
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
            } else { /* the general fold, with the lowest NaN's index */
#pragma unroll
                for (int h = 0; h < RPT; h++) gq_amax_chunk<DT>(w[h], e0 + (size_t)h * passC, best, nan_not);
            }
            if (MODE == GQ_CAST_AMAX) use_fast = fast && !__any_sync(GQ_FULL, nan);
        }
        if (CASTS) {
            uint32_t *const tb = IN_STAGE ? (uint32_t *)st : tile[BUF ? (j & 1) : 0];
            uint32_t *const tw = tb + box * TQ_SUB_WORDS; /* this chunk's sub-tile */
#pragma unroll
            for (int h = 0; h < RPT; h++) {
                uint32_t b[4];
                if (use_fast) gq_encode_unchecked<DT, false>(w[h], s, dummy, a.e5m2, b); /* warp-uniform */
                else gq_encode_uniform<DT>(w[h], s, a.e5m2, b);
                if (a.q && ok[h]) tq_tma_store(a.q + e0 + (size_t)h * passC, b, nc);
                if (tr) {
                    const int row = rr + h * PASS;
                    *(uint2 *)&tw[tq_tpos(row, 4 * kb)] = make_uint2(b[0], b[1]);
                    *(uint2 *)&tw[tq_tpos(row, 4 * kb + 2)] = make_uint2(b[2], b[3]);
                }
            }
            if (tr) {
                __syncthreads(); /* the transposed tile is written; every thread is past its stage reads */
                if (!IN_STAGE && t < 32 && j + S < count)
                    tq_tma_issue<TC>(a, &map, &prod, &slot[stage], sq, sr, st, &full[stage]);
#pragma unroll
                for (int bx = 0; bx < NB; bx++) {
                    const int64_t cb = ct * TC + bx * TQ_BOX_C; /* the sub-tile's first column */
                    if (cb >= C) break;                         /* block-uniform: nothing of it is stored */
                    const uint32_t *const sub = tb + bx * TQ_SUB_WORDS;
                    uint32_t v[8]; /* rows 8g .. 8g+7, columns 4cg .. 4cg+3 of the sub-tile */
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        v[i] = sub[(rd ^ (16 * (i & 1) | 2 * ((i >> 1) & 1))) + 32 * (i >> 1)];
                    uint32_t lo[4], hi[4];
                    tq_transpose4(v[0], v[1], v[2], v[3], lo);
                    tq_transpose4(v[4], v[5], v[6], v[7], hi);
                    const int64_t rs = r0 + 8 * g, cc = cb + 4 * cg;
                    if (rs < lc.m) {
                        const int n = (int)min((int64_t)8, lc.m - rs);
                        /* member i's transposed copy [C, m_i] starts at element row0 · C */
                        uint8_t *p = a.qc + (size_t)lc.row0 * (size_t)C + (size_t)cc * (size_t)lc.m + (size_t)rs;
#pragma unroll
                        for (int q = 0; q < 4; q++)
                            if (cc + q < C) tq_store8(p + (size_t)q * (size_t)lc.m, lo[q], hi[q], n);
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
    if (finish) tq_finish_scale(fin);
}

/* ---- host side ---------------------------------------------------------------------------- */

template <int DT, int MODE> static gq_kernel_t tq_general_vec(int vec) {
    return vec ? tq_general_kernel<DT, true, MODE> : tq_general_kernel<DT, false, MODE>;
}

/* tq_general_kernel of MODES (GQ_AMAX / GQ_CAST / GQ_CAST_AMAX, | GQ_DBIAS) for dtype dt, with
 * 16-byte chunks where vec (gq_vec_ok). */
template <int MODES> static gq_kernel_t tq_general_pick(int dt, int vec) {
    if (dt == GQ_F32) return tq_general_vec<GQ_F32, MODES>(vec);
    if (dt == GQ_BF16) return tq_general_vec<GQ_BF16, MODES>(vec);
    return tq_general_vec<GQ_F16, MODES>(vec);
}

/* tq_tma_kernel's tile columns: 128 where cols > 64, else 64 (a 128-column tile of a narrower
 * tensor is half empty). */
static int tq_tma_cols(int64_t cols) { return cols > 64 ? 128 : 64; }

/* Why tq_tma_kernel cannot take this pass (NULL: it can, with *map encoded; *empty: there is no
 * element, and the general kernels' launches do nothing): the conditions of the kernel's
 * section. */
static const char *tq_tma_refusal(const gq_args_t *a, const gln_tensor_t *in, CUtensorMap *map, int *empty) {
    *empty = 0;
    if (in->dtype != GLN_DTYPE_BF16 && in->dtype != GLN_DTYPE_FP16) return "the input is not bf16 or fp16";
    if (a->dpart) return "a fused dbias runs on tq_general_kernel";
    if (a->act != GLN_ACT_LOAD_NONE) return "an activation on load runs on tq_general_kernel";
    if (in->rows <= 0 || a->cols <= 0) {
        *empty = 1;
        return "the tensor is empty";
    }
    if (a->cols % 8 != 0) return "cols is not a multiple of 8";
    if (a->cols > INT32_MAX - 128 || in->rows > INT32_MAX - GQ_TR) return "rows or cols exceed 2^31 - 129";
    if (!gq_aligned(a->x)) return "x is not 16-byte aligned";
    if (gln_tma_encode_2d(map, in->dtype == GLN_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                           : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                          a->x, (uint64_t)in->rows, (uint64_t)a->cols, (uint64_t)a->cols * 2u, GQ_TR, TQ_BOX_C,
                          CU_TENSOR_MAP_SWIZZLE_128B) != 0)
        return "the driver refused the tensor map";
    return NULL;
}

typedef void (*tq_tma_kernel_t)(CUtensorMap, gq_args_t, tq_scale_job_t);

/* tq_tma_kernel<DT, MODE, TC> with its dynamic shared memory allowed on the current device
 * (set once per device and instantiation: more than the default 48 KB needs the attribute). */
template <int DT, int MODE, int TC> static gln_status_t tq_tma_get(int dev, tq_tma_kernel_t *k, const char *call) {
    static unsigned long long ready = 0; /* bit d: set on device d (< 64; others set it every call) */
    *k = tq_tma_kernel<DT, MODE, TC>;
    const unsigned long long bit = dev >= 0 && dev < 64 ? 1ull << dev : 0ull;
    if (bit && (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) & bit)) return GLN_STATUS_SUCCESS;
    GLN_TRY(gln_cuda_check(cudaFuncSetAttribute((const void *)*k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                tq_tma_geo<TC>::SMEM),
                           call, "cudaFuncSetAttribute(tq_tma_kernel, MaxDynamicSharedMemorySize)"));
    if (bit) __atomic_fetch_or(&ready, bit, __ATOMIC_RELEASE);
    return GLN_STATUS_SUCCESS;
}

template <int MODE, int TC> static gln_status_t tq_tma_pick_tc(int dt, tq_tma_kernel_t *k, const char *call) {
    int dev = 0;
    GLN_TRY(gln_cuda_check(cudaGetDevice(&dev), call, "cudaGetDevice"));
    return dt == GQ_BF16 ? tq_tma_get<GQ_BF16, MODE, TC>(dev, k, call) : tq_tma_get<GQ_F16, MODE, TC>(dev, k, call);
}

/* The kernel of MODE for tile columns tc (64 or 128) and its dynamic shared memory. */
template <int MODE>
static gln_status_t tq_tma_pick(int dt, int tc, tq_tma_kernel_t *k, size_t *smem, const char *call) {
    *smem = tc == 128 ? (size_t)tq_tma_geo<128>::SMEM : (size_t)tq_tma_geo<64>::SMEM;
    return tc == 128 ? tq_tma_pick_tc<MODE, 128>(dt, k, call) : tq_tma_pick_tc<MODE, 64>(dt, k, call);
}

/* fin: the fused scale step of an amax pass (fin.done NULL: none); with it, the pass runs even
 * without tiles (its blocks still arrive). */
static gln_status_t tq_tma_launch(tq_tma_kernel_t k, size_t smem, const CUtensorMap *map, const gq_args_t *a,
                               const tq_scale_job_t *fin, int64_t tiles, int64_t blocks, cudaStream_t st,
                               const char *call, const char *name) {
    if (!fin->done && (tiles <= 0 || blocks <= 0)) return GLN_STATUS_SUCCESS;
    if (blocks <= 0) blocks = 1;
    GLN_TRY(gln_cuda_check(gln_cuda_launch(k, dim3((unsigned int)blocks), dim3(GQ_THREADS), smem, st, *map, *a, *fin),
                           call, name));
    return gln_cuda_check_launch(call, name);
}

/* What tq_tma_first_pass hands on to current scaling's cast pass: the arguments with a.n_ct in the
 * pass's tiles, their count, the grid and the kernel's tiling. */
typedef struct tq_tma_run {
    gq_args_t a;
    int64_t tiles, blocks;
    int tc;
} tq_tma_run_t;

/* The first pass of tq_run on tq_tma_kernel (current: the amax pass, on the grid and tiling both
 * passes share, handed on in *run; delayed: cast + amax), or *map_ok = 0 where the kernel cannot
 * take the pass (tq_run then runs tq_general_kernel).  tiles: gq_members' bound in 64-column
 * tiles; fin: the scale step the pass fuses into its last block. */
static gln_status_t tq_tma_first_pass(const gln_quant_config_t *cfg, const gq_args_t *a, const gln_tensor_t *in,
                                      const tq_scale_job_t *fin, int64_t tiles, cudaStream_t st, CUtensorMap *map,
                                      int *map_ok, tq_tma_run_t *run, const char *call) {
    *map_ok = 0;
    int empty = 0;
    if (tq_tma_refusal(a, in, map, &empty)) return GLN_STATUS_SUCCESS;
    *map_ok = 1;
    const int dt = gq_dt(in->dtype), tc = tq_tma_cols(a->cols);
    /* the same row tiles (gq_members' bound: tiles = row_tiles · a->n_ct, cols > 0 here), in tc-column tiles */
    run->a = *a;
    run->a.n_ct = gln_ceil_div(a->cols, tc);
    run->tiles = tiles / a->n_ct * run->a.n_ct;
    run->tc = tc;
    tq_tma_kernel_t k = NULL;
    size_t smem = 0;
    if (cfg->delayed) {
        GLN_TRY(tq_tma_pick<GQ_CAST_AMAX>(dt, tc, &k, &smem, call));
        /* one tensor: one block per SM, not the two that fit (on the H200, 16384 x 8192 from 80 to
         * 87 % of a copy); a grouped tensor runs faster with two (bench/RESULTS.md) */
        GLN_TRY(gq_grid((const void *)k, run->tiles, &run->blocks, call, smem, !a->rows));
        return tq_tma_launch(k, smem, map, &run->a, fin, run->tiles, run->blocks, st, call,
                             "tq_tma_kernel<cast+amax>");
    }
    tq_tma_kernel_t cast = NULL;
    size_t cast_smem = 0;
    int64_t cast_blocks = 0;
    GLN_TRY(tq_tma_pick<GQ_AMAX>(dt, tc, &k, &smem, call));
    GLN_TRY(tq_tma_pick<GQ_CAST>(dt, tc, &cast, &cast_smem, call));
    GLN_TRY(gq_grid((const void *)k, run->tiles, &run->blocks, call, smem));
    GLN_TRY(gq_grid((const void *)cast, run->tiles, &cast_blocks, call, cast_smem));
    if (cast_blocks < run->blocks) run->blocks = cast_blocks;
    return tq_tma_launch(k, smem, map, &run->a, fin, run->tiles, run->blocks, st, call, "tq_tma_kernel<amax>");
}

/* The scale step's arguments for this pass (done NULL: tq_scale_kernel runs it). */
static tq_scale_job_t tq_scale_job_make(const gln_quant_config_t *cfg, const gq_args_t *a, const gln_tensor_t *in,
                                        gln_tensor_t *out, const gln_cuda_amax_record_t *rec) {
    tq_scale_job_t fin;
    memset(&fin, 0, sizeof fin);
    fin.work = (const gq_amax_t *)a->work, fin.x = in->data, fin.dtype = (int)in->dtype, fin.num = a->num;
    fin.nanp = cfg->amax_nan_propagate, fin.current = !cfg->delayed, fin.fp8_max = a->fp8_max;
    fin.pow2 = cfg->power_2_scale, fin.epsilon = cfg->amax_epsilon;
    fin.amax = out->amax, fin.scale = (float *)a->scale;
    fin.scale_inv = cfg->rowwise ? (float *)out->scale_inv : NULL;
    fin.col_scale_inv = cfg->columnwise ? (float *)out->col_scale_inv : NULL;
    if (rec && cfg->delayed) fin.rec = *rec;
    return fin;
}

/* tq_run on tq_general_kernel: the first pass (current: amax, on the grid both passes share,
 * returned in *blocks; delayed: cast + amax), then the scale step as its own kernel. */
static gln_status_t tq_general_first_pass(const gln_quant_config_t *cfg, const gq_args_t *a, const gln_tensor_t *in,
                                          const tq_scale_job_t *fin, int64_t tiles, cudaStream_t st,
                                          int64_t *blocks, const char *call) {
    const int dt = gq_dt(in->dtype), vec = gq_vec_ok(a);
    if (!cfg->delayed) {
        const gq_kernel_t amax = a->dpart ? tq_general_pick<GQ_AMAX | GQ_DBIAS>(dt, vec) : tq_general_pick<GQ_AMAX>(dt, vec);
        int64_t cast_blocks = 0;
        GLN_TRY(gq_grid((const void *)amax, tiles, blocks, call));
        GLN_TRY(gq_grid((const void *)tq_general_pick<GQ_CAST>(dt, vec), tiles, &cast_blocks, call));
        if (cast_blocks < *blocks) *blocks = cast_blocks;
        GLN_TRY(gq_launch_on(amax, a, tiles, *blocks, st, call, "tq_general_kernel<amax>"));
    } else {
        const gq_kernel_t k = a->dpart ? tq_general_pick<GQ_CAST_AMAX | GQ_DBIAS>(dt, vec)
                                       : tq_general_pick<GQ_CAST_AMAX>(dt, vec);
        GLN_TRY(gq_launch(k, a, tiles, st, call, "tq_general_kernel<cast+amax>"));
    }
    GLN_TRY(gln_cuda_check(gln_cuda_launch(tq_scale_kernel, dim3((unsigned int)gln_ceil_div(a->num, GQ_THREADS)),
                                           dim3(GQ_THREADS), 0, st, *fin),
                           call, "tq_scale_kernel"));
    return gln_cuda_check_launch(call, "tq_scale_kernel");
}

/* Current scaling runs both passes on one grid (the fewer blocks of the two kernels' occupancy),
 * so block b reads the same tiles twice, the second time last to first: the tiles it read last
 * are still in L2 (50 MB on an H200) when the cast pass starts on them.  On tq_tma_kernel the amax
 * pass's last block runs the scale step (one launch fewer). */
gln_status_t tq_run(gln_context_t *ctx, const gln_quant_config_t *cfg, const gq_args_t *a, const gln_tensor_t *in,
                    gln_tensor_t *out, int64_t tiles, unsigned int *done, const gln_cuda_amax_record_t *rec,
                    const char *call) {
    cudaStream_t st = gln_cuda_state(ctx)->stream;
    const tq_scale_job_t fin = tq_scale_job_make(cfg, a, in, out, rec);
    tq_scale_job_t fused = fin;
    fused.done = done;
    CUtensorMap map;
    int tma = 0;
    tq_tma_run_t run;
    int64_t blocks = 0;
    GLN_TRY(tq_tma_first_pass(cfg, a, in, &fused, tiles, st, &map, &tma, &run, call));
    gq_probe(tma ? "tq_tma_kernel" : "tq_general_kernel");
    if (!tma) GLN_TRY(tq_general_first_pass(cfg, a, in, &fin, tiles, st, &blocks, call));
    if (cfg->delayed) return GLN_STATUS_SUCCESS;
    if (tma) { /* the amax pass's tiling, tiles and grid */
        gq_args_t r = run.a;
        r.reverse = 1;
        tq_tma_kernel_t cast = NULL;
        size_t smem = 0;
        GLN_TRY(tq_tma_pick<GQ_CAST>(gq_dt(in->dtype), run.tc, &cast, &smem, call));
        const tq_scale_job_t none = {};
        return tq_tma_launch(cast, smem, &map, &r, &none, run.tiles, run.blocks, st, call, "tq_tma_kernel<cast>");
    }
    gq_args_t r = *a;
    r.reverse = 1;
    const gq_kernel_t cast = tq_general_pick<GQ_CAST>(gq_dt(in->dtype), gq_vec_ok(a));
    return gq_launch_on(cast, &r, tiles, blocks, st, call, "tq_general_kernel<cast>");
}

gln_status_t tq_run_dbias(const gq_args_t *a, const gln_tensor_t *in, int64_t tiles, cudaStream_t stream,
                          const char *call) {
    gq_probe("tq_general_kernel");
    return gq_launch(tq_general_pick<GQ_AMAX | GQ_DBIAS>(gq_dt(in->dtype), gq_vec_ok(a)), a, tiles, stream, call,
                     "tq_general_kernel<dbias>");
}

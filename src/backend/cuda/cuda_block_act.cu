/* Activation + FP8 block-scaling quantize in one pass: gln_block_quant_act_kernel quantizes the
 * bf16 output of a SwiGLU or GELU (cuda_act.cuh) that it computes from the activation's input
 * while it loads, so the activation's output is never written and read back
 * (gln_activation_forward_quantize, cuda_act_quant.c).  Its bytes are those of the activation
 * kernel into a bf16 tensor followed by the block quantize: only the load differs.  It takes a
 * bf16 input with columns a multiple of 8 and a 16-byte aligned base (cuda_act_quant.c runs the
 * activation and the quantize separately for anything else).
 *
 * Same tiles, threads, scales, encodes and stores as the general kernel
 * (cuda_block_general.cu); what differs is how a thread gets there:
 *   - the tile walk: (row tile, column tile) is advanced by the grid stride with one carry, so the
 *     only divisions are two per block, before the loop (the general kernel: a 64-bit t / ctiles
 *     per tile);
 *   - the thread keeps the activation's bf16 codes packed two per word (cuda_block_tile.cuh's
 *     bq_pk_* helpers), widened to FP32 where they are used;
 *   - the amaxes: on a thread holding no NaN, the packed unsigned max (__vmaxu2) of the magnitude
 *     bits (code & 0x7FFF) — one op per 2 elements for the row and one for the column amax.  For
 *     non-negative, non-NaN values the order of the codes is the order of the values, and the
 *     widening is exact and monotone, so the widened max code IS the FP32 max that an fmaxf /
 *     integer-max loop returns (0 included: elements outside the tile are the code 0).  The same
 *     max says whether the thread holds a NaN (a magnitude code above Inf's); a thread that does
 *     runs the FP32 loop on the same values instead;
 *   - the L2 prefetch of the block's next tile: 4 slots per row (a row of at most 128 bf16 columns
 *     is 1 or 2 lines, times 2 halves for SwiGLU), shifts instead of a division.
 * ptxas: 128 registers at most (the launch bound), 2 blocks per SM. */
#include "backend/cuda/cuda_block_tile.cuh"

/* The activation input's lines of tile tl (the block's next) into L2: a row's valid columns are
 * 1 or 2 lines (nc <= 128), times 1 or 2 halves, so slot s < 4 of row r is line s & (lines - 1)
 * of half s >> (lines - 1). */
__device__ __forceinline__ void bq_act_prefetch(const bq_args_t &a, const bq_tile_t &tl) {
    const int lines = tl.nc > 64 ? 2 : 1;
    const size_t ld = (size_t)a.ld;
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

/* w[p][k] = the activation's bf16 outputs at tile row rg*8 + p, tile columns cg*8 + 2k (low half)
 * and cg*8 + 2k + 1 (high half), computed from its input (cuda_act.cuh); 0 outside the tile.
 * cols % 8 == 0, so a thread's 8 columns are all in the tile or none is. */
__device__ __forceinline__ void bq_act_load(const bq_args_t &a, const bq_tile_t &tl, int rg, int cg, uint32_t w[8][4]) {
    const int c = cg * 8;
#pragma unroll
    for (int p = 0; p < 8; p++) {
#pragma unroll
        for (int k = 0; k < 4; k++) w[p][k] = 0u;
        const int r = rg * 8 + p;
        if (r < tl.nr && c < tl.nc)
            gln_act_load_bf16x8(a.act, a.x, a.ld, a.cols, tl.mrow0 + tl.rs + r, tl.c0 + c, w[p]);
    }
}

/* The general kernel's bq_finish_2d on the packed codes, with bq_pk_store_rows. */
template <int IN, bool NANP, bool E5M2>
__device__ __forceinline__ void bq_act_finish_2d(const bq_args_t &a, const bq_tile_t &tl, const uint32_t w[8][4],
                                              const float ra[8], bool has_nan, int rg, int cg, uint8_t *tp,
                                              float *wmax) {
    const float scale = bq_tile_scale<NANP>(a, tl, ra, wmax);
    const float rs[8] = {scale, scale, scale, scale, scale, scale, scale, scale};
    uint2 rw[8];
    bq_pk_enc<IN, E5M2, BQ_PK_ROWS>(w, rs, has_nan, rw);
    if (a.q) bq_pk_store_rows(a, tl, rw, rg, cg);
    if (!a.qt) return;
    uint2 cw[8];
    bq_tr8(rw, cw);
    bq_tpose_out<IN>(a, tl, cw, rg, cg, tp);
}

/* The general kernel's bq_finish_1d on the packed codes, with bq_pk_store_rows. */
template <int IN, bool NANP, bool E5M2>
__device__ __forceinline__ void bq_act_finish_1d(const bq_args_t &a, const bq_tile_t &tl, const uint32_t w[8][4],
                                              const float ra[8], const float ca[8], bool has_nan, int rg, int cg,
                                              uint8_t *tp, float (*colmax)[BQ_EDGE], float *cscale) {
    if (a.qt) bq_col_partials<IN, NANP>(ca, cg, colmax);
    if (a.q) {
        float rscale[8];
        uint2 rw[8];
        bq_row_scales<NANP>(a, tl, ra, rg, cg, rscale);
        bq_pk_enc<IN, E5M2, BQ_PK_ROWS>(w, rscale, has_nan, rw);
        bq_pk_store_rows(a, tl, rw, rg, cg);
    }
    if (!a.qt) return;
    bq_col_scales<NANP>(a, tl, colmax, cscale);
    float cs[8];
#pragma unroll
    for (int j = 0; j < 8; j++) cs[j] = cscale[bq_col<IN>(cg, j)];
    uint2 cw[8];
    bq_pk_enc<IN, E5M2, BQ_PK_COLS>(w, cs, has_nan, cw);
    bq_tpose_out<IN>(a, tl, cw, rg, cg, tp);
}

/* The thread's row amaxes ra[p] and (BLOCK_1D) column amaxes ca[j] of its packed codes, and
 * whether it holds a NaN: the packed magnitude maxima when it holds none, the FP32 loop on the
 * same values when it does (the file comment says why both give the same amaxes). */
template <int IN, bool TWO_D, bool NANP>
__device__ __forceinline__ bool bq_act_amax(const uint32_t w[8][4], float ra[8], float ca[8]) {
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
        for (int p = 0; p < 8; p++) ra[p] = bq_pk_widen<IN>(max(rm[p] & 0xFFFFu, rm[p] >> 16));
#pragma unroll
        for (int k = 0; k < 4; k++) {
            ca[2 * k] = TWO_D ? 0.0f : bq_pk_widen<IN>(cm[k] & 0xFFFFu);
            ca[2 * k + 1] = TWO_D ? 0.0f : bq_pk_widen<IN>(cm[k] >> 16);
        }
    } else { /* the FP32 loop on the same values */
#pragma unroll
        for (int j = 0; j < 8; j++) ca[j] = 0.0f;
#pragma unroll
        for (int p = 0; p < 8; p++) {
            ra[p] = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float x = bq_pk_elem<IN>(w, p, j);
                ra[p] = bq_absmax<NANP>(ra[p], x);
                if (!TWO_D) ca[j] = bq_absmax<NANP>(ca[j], x);
            }
        }
    }
    return has_nan;
}

template <int IN, bool TWO_D, bool NANP, bool E5M2>
__global__ void __launch_bounds__(BQ_THREADS, 2) gln_block_quant_act_kernel(const bq_args_t a) {
    static_assert(IN == BQ_IN_BF16, "the activation's output is bf16");
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
        if (!bq_find_at(a, rt, ct, &tl)) return;
        ct += sct, rt += srt; /* now t + step's */
        if (ct >= a.ctiles) ct -= a.ctiles, rt++;
        if (t + step < a.tiles) { /* block-uniform */
            bq_tile_t nx;
            if (bq_find_at(a, rt, ct, &nx)) bq_act_prefetch(a, nx);
        }
        __syncthreads(); /* the previous tile's shared memory has been read */
        uint32_t w[8][4];
        bq_act_load(a, tl, rg, cg, w);
        float ra[8], ca[8];
        const bool has_nan = bq_act_amax<IN, TWO_D, NANP>(w, ra, ca);
        if (TWO_D)
            bq_act_finish_2d<IN, NANP, E5M2>(a, tl, w, ra, has_nan, rg, cg, tp, wmax);
        else
            bq_act_finish_1d<IN, NANP, E5M2>(a, tl, w, ra, ca, has_nan, rg, cg, tp, colmax, cscale);
    }
}

/* ---- launch ---------------------------------------------------------------------------------- */

typedef void (*bq_kernel_t)(const bq_args_t);

template <bool TWO_D>
static bq_kernel_t bq_act_pick(int nanp, int e5m2) {
    if (nanp)
        return e5m2 ? gln_block_quant_act_kernel<BQ_IN_BF16, TWO_D, true, true>
                    : gln_block_quant_act_kernel<BQ_IN_BF16, TWO_D, true, false>;
    return e5m2 ? gln_block_quant_act_kernel<BQ_IN_BF16, TWO_D, false, true>
                : gln_block_quant_act_kernel<BQ_IN_BF16, TWO_D, false, false>;
}

gln_status_t gln_block_quant_launch_act(gln_context_t *ctx, const gln_quant_config_t *cfg, bq_args_t *a,
                                        const char *call) {
    const int nanp = cfg->amax_nan_propagate != 0, e5m2 = cfg->fp8_dtype == GLN_DTYPE_FP8_E5M2;
    const bq_kernel_t k =
        cfg->mode == GLN_SCALING_BLOCK_2D ? bq_act_pick<true>(nanp, e5m2) : bq_act_pick<false>(nanp, e5m2);
    unsigned int grid = 0;
    GLN_TRY(gln_block_quant_grid((const void *)k, 0, a, &grid, call, 0));
    k<<<grid, BQ_THREADS, 0, gln_cuda_state(ctx)->stream>>>(*a);
    return gln_cuda_check_launch(call, "gln_block_quant_act_kernel");
}

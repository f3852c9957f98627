/* The general FP8 block-scaling quantizer: gln_block_quant_kernel takes every input the
 * dispatch (cuda_block.cu) gives it — fp32, bf16 and fp16, any alignment (16-byte loads and
 * 8-byte rowwise stores where the base and the columns allow, element by element otherwise), any
 * shape.  It runs where the TMA kernel (cuda_block_tma.cu) cannot: fp32 and fp16 input, bf16 whose
 * base is not 16-byte aligned or whose columns are not a multiple of 8, and the rare call whose
 * tensor map the driver refuses.
 *
 * Each thread converts its 8x8 elements to FP32 on load (cuda_block_tile.cuh's decomposition).
 * The grid is persistent (as many blocks as are resident); each block starts a tile by asking L2
 * for its next one (bq_prefetch), so its loads find L2 rather than DRAM.
 *
 * What the main loop costs (cuobjdump -sass of the bf16 E4M3 NaN-ignoring instances, the NaN
 * fix-ups and the unaligned load / store paths cut out): ~1,900 static instructions per thread
 * per 128x128 tile for both BLOCK_1D and BLOCK_2D, ~36 per element; ptxas: 117 (1D) / 128 (2D)
 * registers, no spills, 2 blocks per SM.  Most of it is 64-bit address arithmetic per row, a
 * 64-bit division t / ctiles per tile in bq_find, and the FP32 amaxes (fmaxf per element for the
 * row and again for the column amax); the packed-code kernels avoid those on bf16. */
#include "backend/cuda/cuda_block_tile.cuh"

/* Ask L2 for the input lines of tile tl (the block's next): one 128-byte line per thread per
 * step, rows of the tile by lines of its valid columns.  Only a hint (prefetch.global.L2): the
 * tile is read into registers as usual when its turn comes, from L2 by then, so a block's loads
 * wait on L2 latency rather than on DRAM's while it converts and stores the current tile. */
template <int IN>
__device__ __forceinline__ void bq_prefetch(const bq_args_t &a, const bq_tile_t &tl) {
    const int es = IN == BQ_IN_FP32 ? 4 : 2, row_bytes = tl.nc * es, lines = (row_bytes + 127) / 128;
    for (int k = (int)threadIdx.x; k < tl.nr * lines; k += BQ_THREADS) {
        const int r = k / lines, l = k % lines;
        const char *p = (const char *)a.x + ((size_t)(tl.mrow0 + tl.rs + r) * (size_t)a.cols + (size_t)tl.c0) * es +
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
        if (!a.vec_in) {
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
        if (t + gridDim.x < a.tiles) { /* block-uniform */
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

gln_status_t gln_block_quant_launch_general(gln_context_t *ctx, const gln_quant_config_t *cfg, gln_dtype_t dtype,
                                            bq_args_t *a, const char *call) {
    const int two_d = cfg->mode == GLN_SCALING_BLOCK_2D, nanp = cfg->amax_nan_propagate != 0,
              e5m2 = cfg->fp8_dtype == GLN_DTYPE_FP8_E5M2;
    const bq_kernel_t k = dtype == GLN_DTYPE_FP32   ? bq_pick1<BQ_IN_FP32>(two_d, nanp, e5m2)
                          : dtype == GLN_DTYPE_BF16 ? bq_pick1<BQ_IN_BF16>(two_d, nanp, e5m2)
                                                    : bq_pick1<BQ_IN_FP16>(two_d, nanp, e5m2);
    unsigned int grid = 0;
    GLN_TRY(gln_block_quant_grid((const void *)k, 0, a, &grid, call, 0));
    k<<<grid, BQ_THREADS, 0, gln_cuda_state(ctx)->stream>>>(*a);
    return gln_cuda_check_launch(call, "gln_block_quant_kernel");
}

/* The CUDA grouped GEMM through one CUTLASS launch (cutlass/grouped_sm90.cuh): which argument
 * sets a kernel covers, and their translation into gln_cutlass_grouped_t.
 *
 * Covered today (everything else takes the per-expert cuBLASLt loop of cuda_gemm.c, which has
 * the same semantics):
 *   TN (fprop)  bf16 x, bf16 W_i            -> bf16 y        (+ bf16 bias_i, in the epilogue)
 *   NN (dgrad)  bf16 dy, bf16 W_i           -> bf16 dx
 *   NT (wgrad)  bf16 dy, bf16 x             -> fp32 dW_i     (main_grad; accumulate or not)
 *                                           -> bf16 dW_i     (no fused main_grad)
 *   TN / NN     per-tensor FP8 x or dy (rowwise) with per-tensor E4M3 W_i (rowwise for TN, the
 *               transposed copy for NN)  -> bf16, E4M3 × E4M3 or E5M2 × E4M3 (HYBRID dgrad);
 *               E4M3 × E4M3 also -> fp16 / fp32 (fp16 / fp32 activations; the bias then of
 *               that dtype too), 128×128 cooperative in every regime
 *   NT (wgrad)  per-tensor FP8 dy and E4M3 x through their transposed copies -> fp32 dW_i
 *               (E4M3 × E4M3 also -> bf16 dW_i);
 *               experts whose row count is not a multiple of 16 (a TMA stride) read from
 *               zero-padded copies (gln_cuda_wgrad_pad, chosen on the device)
 *   all three   MXFP8 operands, and BLOCK_1D / BLOCK_2D operands whose scales the caller knows to
 *               be powers of two (args->block_scales_pow2), by exact emulation: Hopper has no
 *               tensor-core path for these scale modes, so each operand's copy is dequantized
 *               into bf16 scratch on the device (cuda_grouped_dequant.cu: fp8 × 2^k is exact in
 *               bf16 — docs/numerics.md) and the bf16 kernels above run on it, bias epilogue and
 *               FP32 main_grad included.  Always CUTLASS, whatever the expert sizes: the loop
 *               would dequantize expert by expert (and, for block scales, run ⌈K/128⌉ GEMMs).
 *               E4M3 FP8 block scaling itself (FP32 or power-of-two scales, 1×128 × 128×128)
 *               goes first to CUTLASS's block-scaled kernels (cuda_grouped_blockwise.c), which
 *               apply the scales per 128-block of K to FP32 partial sums; what they do not
 *               cover comes here (FP32 block scales of other cases: the per-expert loop).
 * with every row stride a multiple of 16 bytes, every base pointer 16-byte aligned (TMA), and
 * every dimension within int32 (CUTLASS's problem shapes).  Row offsets come from the group plan
 * (device splits: computed on the device, no host synchronization) or from the host splits.
 *
 * FP8 accumulation follows TransformerEngine's defaults: the forward GEMM (TN) uses the tensor
 * cores' fast accumulation, dgrad (NN) and wgrad (NT) promote to FP32 after every 128-wide K
 * tile, which reproduces cuBLASLt's split accumulator bit for bit (tests/test_cuda_grouped_gemm.c
 * checks it on random FP8 data).  The promoted main
 * loop holds its accumulator twice: on the H200 its 256×128 tiles spilled and ran at half the
 * speed of 128×128, so the promoted kernels of large experts take 128×192 (64 × 192 a consumer
 * warpgroup, the most that fits).
 *
 * Tile regime, from shapes the host knows (never the device splits), with avg = packed rows /
 * experts (the split dimension: M in fprop / dgrad, K in wgrad):
 *   large   avg >= GLN_CUTLASS_LARGE_ROWS (1024): 256×128 tiles, 1×2 clusters, cooperative,
 *           where an instantiation exists (bf16 TN / NN, FP8 fast-accumulating TN); the promoted
 *           FP8 dgrads (E4M3 and HYBRID) on cooperative 128×192 (Mixtral-like HYBRID 3.514 ms
 *           against 3.694 for 128×128, DeepGEMM's E4M3 1.722 against 1.834); the bf16
 *           wgrad into FP32 on the small regime's cooperative 128×256 (Mixtral-like 6.22 ms
 *           against 6.99 for cooperative 128×128 in the lab), the FP8 wgrads on cooperative
 *           128×128 with each K tile's promotion overlapped with the next tile's MMAs
 *           (cutlass/grouped_fp8_overlap.cuh; the same output bits; against CUTLASS's main loop
 *           on the same tile, 2026-12-04: Mixtral-like E4M3 3.460 / 4.071 ms against 3.663 /
 *           4.166, HYBRID 3.576 against 4.139, DeepGEMM's E4M3 1.786 against 1.998);
 *   small   avg <= GLN_CUTLASS_SMALL_ROWS (256; 512 for the bf16 fprop and dgrad) and at
 *           least GLN_CUTLASS_SMALL_EXPERTS (8) experts (Qwen3-like: 128 × 128 rows; for bf16
 *           fprop / dgrad also DeepSeek-like: 32 × 512, where the lab timed the pingpong kernels
 *           at 0.662 / 0.667 ms against 0.684 / 0.743 for the medium regime's cooperative
 *           128×128, 2026-12-04): the pingpong instantiations of
 *           cutlass/grouped_variants.h (128×128 tiles; 64×128 for promoted FP8, whose doubled
 *           accumulator would spill at 128 rows), no cluster — except the wgrads into FP32: bf16
 *           on cooperative 128×256 (the lab measured the builder's pingpong kernel slowest
 *           there: Qwen3-like 0.643 ms against 0.514), FP8 on the medium regime's kernels
 *           below.  An expert of ≤ 256 rows has one or
 *           two M tiles (wgrad: one or two K blocks), so a CTA switches experts — new TMA
 *           descriptors — almost every tile, and the fprop / dgrad are bound by streaming the
 *           weights, the wgrad by main_grad's FP32 read and write: pingpong is chosen to hide
 *           one tile's epilogue and expert switch under the other warpgroup's main loop, which
 *           cooperative tiles serialize (the reasoning; the H200 comparison is the lab's table
 *           below, not yet recorded).  Few experts (< 8) this small are a handful of tiles
 *           either way; they stay medium.  K and N do not enter (yet): the lab runs the regimes
 *           and two lab-only tile shapes per stage on any of the four benchmark shapes;
 *   medium  everything else, and any layout / recipe without a small or large instantiation
 *           (HYBRID E5M2 kernels): 128×128 cooperative, no cluster — except the wgrads
 *           into FP32, which run pingpong kernels with 64×64 epilogue subtiles, one warpgroup's
 *           main_grad epilogue under the other's main loop: bf16 on 128×128 tiles
 *           (cutlass/grouped_bf16_nt_f32_pp.cuh; DeepSeek-like 1.180 ms against 1.438 in the
 *           lab), FP8 (E4M3 and HYBRID, promoted: 64×128 tiles) in this regime and the small one
 *           (cutlass/grouped_fp8_wgrad_pp.cuh; DeepSeek-like 1.195 / 1.176 ms against 1.236 /
 *           1.231, Qwen3-like 0.497 / 0.508 against 0.525 / 0.516); large-regime experts do not
 *           take these (on Mixtral-like experts the FP8 pingpong kernel took 6.2 ms against
 *           4.6 for the cooperative one).
 * bench/lab/grouped_tiles runs the regimes side by side on one shape, each checked against the
 * CPU first.
 *
 * Few, large experts with host splits keep the per-expert cuBLASLt loop (no host synchronization
 * is needed there, and on the H200 cuBLASLt beat these CUTLASS kernels on the Mixtral and
 * DeepGEMM shapes — 8 experts of 4096 rows — in bf16 fprop / dgrad by 2–8 %, in the FP8 dgrad
 * by 9–15 % and in the wgrad by 20–30 %; bench/RESULTS.md): average rows per expert at least
 * GLN_CUTLASS_LOOP_ROWS, except the FP8 fprop, where CUTLASS's fast-accumulating kernel wins.
 * With device splits the CUTLASS kernels always run: the loop would have to read the splits back.
 *
 * Environment (for comparisons, benchmarks and the kernel lab): GLN_CUDA_GROUPED_LOOP=1 forces
 * the loop; GLN_CUTLASS_TILES=small, =medium or =large forces a regime; GLN_CUTLASS_RASTER=m|n|auto
 * (default: along the dimension with fewer tiles per expert, from host-known shapes) sets the tile
 * order of every CUTLASS grouped kernel, block-scaled ones included, read once a process
 * (cutlass/grouped_sm90.cuh: the rule and why; `auto` resolves to along N). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_grouped_blockwise.h"
#include "backend/cuda/cutlass/grouped_variants.h"
#include "common/checked.h"
#include "common/error.h"
#include "tensor/tensor.h"

#ifdef GLN_HAVE_CUTLASS

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }
static int fits_int(int64_t x) { return x >= 0 && x <= INT32_MAX; }

#define GLN_CUTLASS_LARGE_ROWS 1024
#define GLN_CUTLASS_SMALL_ROWS 256
#define GLN_CUTLASS_SMALL_ROWS_BF16 512 /* the bf16 fprop / dgrad: pingpong up to 512 rows */
#define GLN_CUTLASS_SMALL_EXPERTS 8
#define GLN_CUTLASS_LOOP_ROWS 2048

/* g->large_tiles / g->small_tiles from the environment override or the heuristic (top of the
 * file); packed_rows: the split dimension's packed extent, known on the host; small_rows: the
 * small regime's limit on the average rows per expert for this call's kernel. */
static void tile_regime(gln_cutlass_grouped_t *g, int64_t packed_rows, int32_t num, int64_t small_rows) {
    const char *e = getenv("GLN_CUTLASS_TILES");
    const int64_t avg = num > 0 ? packed_rows / num : 0;
    int large = avg >= GLN_CUTLASS_LARGE_ROWS;
    int small = avg <= small_rows && num >= GLN_CUTLASS_SMALL_EXPERTS;
    if (e && !strcmp(e, "small")) large = 0, small = 1;
    if (e && !strcmp(e, "medium")) large = 0, small = 0;
    if (e && !strcmp(e, "large")) large = 1, small = 0;
    g->large_tiles = large;
    g->small_tiles = small;
    g->split_rows = packed_rows;
}

static int forced_loop(void) {
    const char *e = getenv("GLN_CUDA_GROUPED_LOOP");
    return e && *e && strcmp(e, "0") != 0;
}

/* A per-tensor FP8 operand (its scaling and dtype), or bf16. */
static int is_tensor_fp8(const gln_tensor_t *t) { return gln_dtype_is_fp8(t->dtype) && t->scaling == GLN_SCALING_TENSOR; }

/* The kernel for TN / NN operands (b: the grouped activations or gradient, a: the weights), or
 * GLN_CUTLASS_KERNEL_COUNT_ when none fits.  *fp8 tells whether the weights' copies are FP8. */
static gln_cutlass_kernel_t pick_tn_nn(gln_gemm_layout_t layout, const gln_tensor_t *b, const gln_tensor_t *a0,
                                       int *fp8) {
    *fp8 = 0;
    if (b->dtype == GLN_DTYPE_BF16 && a0->dtype == GLN_DTYPE_BF16)
        return layout == GLN_LAYOUT_TN ? GLN_CUTLASS_BF16_TN : GLN_CUTLASS_BF16_NN;
    if (!is_tensor_fp8(b) || !is_tensor_fp8(a0) || a0->dtype != GLN_DTYPE_FP8_E4M3) return GLN_CUTLASS_KERNEL_COUNT_;
    *fp8 = 1;
    return b->dtype == GLN_DTYPE_FP8_E4M3 ? GLN_CUTLASS_E4M3_TN : GLN_CUTLASS_E5M2_E4M3_TN;
}

/* TN / NN: fills g (offsets excepted) when a kernel fits; returns 0 otherwise. */
static int plan_tn_nn(const gln_grouped_gemm_args_t *args, gln_cutlass_grouped_t *g, const void **b_ptrs,
                      const float **b_scales, const void **biases) {
    const gln_grouped_tensor_t *gb = args->b;
    const gln_tensor_t *x = &gb->packed, *dp = &args->d_grouped->packed;
    const gln_tensor_t *w0 = &args->a_list[0];
    int fp8 = 0;
    if (args->bias_list && args->layout != GLN_LAYOUT_TN) return 0;
    const gln_cutlass_kernel_t kernel = pick_tn_nn(args->layout, x, w0, &fp8);
    /* D: bf16, or fp16 / fp32 from E4M3 × E4M3 (layers with fp16 / fp32 activations) */
    if (kernel == GLN_CUTLASS_KERNEL_COUNT_) return 0;
    const int d_other = dp->dtype == GLN_DTYPE_FP16 || dp->dtype == GLN_DTYPE_FP32;
    if (dp->dtype != GLN_DTYPE_BF16 && !(d_other && kernel == GLN_CUTLASS_E4M3_TN)) return 0;
    const int64_t ed = (int64_t)gln_dtype_size(dp->dtype);
    const int tn = args->layout == GLN_LAYOUT_TN;
    /* only the bf16 and fast-accumulating E4M3 fprop kernels have the bias epilogue (a TN call on
     * E5M2 activations would otherwise lose its bias) */
    if (args->bias_list && kernel == GLN_CUTLASS_E5M2_E4M3_TN) return 0;
    /* D [rows, n] = B [rows, k] · op(A): TN A_i [n, k]; NN A_i [k, n] (FP8: its copy [n, k]) */
    const int64_t k = x->cols, n = tn ? w0->rows : w0->cols;
    const size_t ex = gln_dtype_size(x->dtype), ew = gln_dtype_size(w0->dtype);
    if (!fits_int(x->rows) || !fits_int(k) || !fits_int(n) || k == 0 || n == 0) return 0;
    /* the weights' leading dimension: k (K-major: TN, or FP8 NN's transposed copy) or n */
    const int64_t w_ld = (tn || fp8) ? k : n;
    if ((k * (int64_t)ex) % 16 || (w_ld * (int64_t)ew) % 16 || (n * ed) % 16) return 0;
    const void *xd = x->data;
    if (!xd || !aligned16(xd) || !aligned16(dp->data)) return 0;
    if (fp8 && !x->scale_inv) return 0;
    for (int32_t i = 0; i < gb->num; i++) {
        const gln_tensor_t *w = &args->a_list[i];
        if (w->dtype != w0->dtype || w->scaling != w0->scaling || w->rows != w0->rows || w->cols != w0->cols) return 0;
        const void *p = fp8 && !tn ? w->col_data : w->data;
        const float *s = fp8 ? (const float *)(tn ? w->scale_inv : w->col_scale_inv) : NULL;
        if (!p || !aligned16(p) || (fp8 && !s)) return 0;
        b_ptrs[i] = p;
        b_scales[i] = s;
        if (args->bias_list) { /* a row [1, n] per expert, of D's dtype */
            const gln_tensor_t *bias = &args->bias_list[i];
            if (bias->dtype != dp->dtype || bias->rows != 1 || bias->cols != n || !bias->data ||
                !aligned16(bias->data))
                return 0;
            biases[i] = bias->data;
        }
    }
    memset(g, 0, sizeof *g);
    g->kernel = kernel;
    g->num = gb->num;
    g->split_is_k = 0;
    g->n = n, g->k = k;
    g->a = xd, g->a_row_bytes = k * (int64_t)ex;
    g->b_list = b_ptrs;
    g->d = dp->data, g->d_row_bytes = n * ed;
    g->d_dtype = dp->dtype;
    g->a_scale = fp8 ? (const float *)x->scale_inv : NULL;
    g->b_scale_list = fp8 ? b_scales : NULL;
    g->bias_list = args->bias_list ? biases : NULL;
    g->accumulate = args->accumulate;
    const int bf16 = kernel == GLN_CUTLASS_BF16_TN || kernel == GLN_CUTLASS_BF16_NN;
    tile_regime(g, x->rows, gb->num, bf16 ? GLN_CUTLASS_SMALL_ROWS_BF16 : GLN_CUTLASS_SMALL_ROWS);
    /* TE's FP8 GEMM accumulation: fast in the forward GEMM, promoted to FP32 in dgrad */
    g->fast_accumulate = fp8 && tn;
    return 1;
}

/* The splits of the two NT operands must be one plan: the same device array, or equal host ones
 * (a mismatch is left to the loop, which reports it). */
static int operands_share_splits(const gln_grouped_tensor_t *a, const gln_grouped_tensor_t *b) {
    if (a->splits_on_backend != b->splits_on_backend) return 0;
    if (a->splits == b->splits) return 1;
    return !a->splits_on_backend && memcmp(a->splits, b->splits, (size_t)a->num * sizeof(int64_t)) == 0;
}

/* NT (wgrad): dW_i [m, n] = dy_i [rows_i, m]ᵀ · x_i [rows_i, n], bf16 into fp32. */
static int plan_nt(const gln_grouped_gemm_args_t *args, gln_cutlass_grouped_t *g, void **d_ptrs) {
    const gln_grouped_tensor_t *gdy = args->b, *gx = args->a_grouped;
    const gln_tensor_t *dy = &gdy->packed, *x = &gx->packed;
    if (dy->dtype != GLN_DTYPE_BF16 || x->dtype != GLN_DTYPE_BF16) return 0;
    if (!operands_share_splits(gdy, gx)) return 0; /* one plan for both operands */
    const int64_t m = dy->cols, n = x->cols;
    if (!fits_int(dy->rows) || !fits_int(x->rows) || !fits_int(m) || !fits_int(n) || m == 0 || n == 0) return 0;
    if ((m * 2) % 16 || (n * 2) % 16) return 0;
    if (!dy->data || !x->data || !aligned16(dy->data) || !aligned16(x->data)) return 0;
    /* dW: the FP32 main_grad, or bf16 gradients (no fused accumulation, bf16 parameters) */
    const gln_dtype_t dt = args->d_list[0].dtype;
    if (dt != GLN_DTYPE_FP32 && dt != GLN_DTYPE_BF16) return 0;
    for (int32_t i = 0; i < gdy->num; i++) {
        const gln_tensor_t *d = &args->d_list[i];
        if (d->dtype != dt || d->rows != m || d->cols != n || !d->data || !aligned16(d->data)) return 0;
        d_ptrs[i] = d->data;
    }
    memset(g, 0, sizeof *g);
    g->kernel = GLN_CUTLASS_BF16_NT_F32;
    g->d_dtype = dt;
    g->num = gdy->num;
    g->split_is_k = 1;
    g->m = m, g->n = n;
    g->a = dy->data, g->a_row_bytes = m * 2;
    g->b = x->data, g->b_row_bytes = n * 2;
    g->d_list = d_ptrs;
    g->accumulate = args->accumulate;
    tile_regime(g, dy->rows, gdy->num, GLN_CUTLASS_SMALL_ROWS);
    return 1;
}

/* NT (wgrad) on per-tensor FP8: dW_i [m, n] = alpha_i · dy_i [rows_i, m]ᵀ · x_i [rows_i, n] from the
 * transposed (columnwise) copies, K-major along the rows: dy_i's copy [m, rows_i] at element
 * row_start·m, x_i's [n, rows_i] at row_start·n.  Experts whose row count is not a multiple of
 * 16 read zero-padded copies (k_align; run_fp8_wgrad_padded).  x_scales receives
 * &x->col_scale_inv[i]. */
static int plan_nt_fp8(const gln_grouped_gemm_args_t *args, gln_cutlass_grouped_t *g, void **d_ptrs,
                       const float **x_scales) {
    const gln_grouped_tensor_t *gdy = args->b, *gx = args->a_grouped;
    const gln_tensor_t *dy = &gdy->packed, *x = &gx->packed;
    if (!is_tensor_fp8(dy) || !is_tensor_fp8(x) || x->dtype != GLN_DTYPE_FP8_E4M3) return 0;
    if (!operands_share_splits(gdy, gx)) return 0;
    const int64_t m = dy->cols, n = x->cols;
    if (!fits_int(dy->rows) || !fits_int(x->rows) || !fits_int(m) || !fits_int(n) || m == 0 || n == 0) return 0;
    if (m % 16 || n % 16) return 0; /* every expert's copies start 16-byte aligned */
    if (!dy->col_data || !x->col_data || !aligned16(dy->col_data) || !aligned16(x->col_data)) return 0;
    if (!dy->col_scale_inv || !x->col_scale_inv) return 0;
    /* dW: FP32 main_grad, or bf16 gradients (E4M3 or, under HYBRID, E5M2 gradients) */
    const gln_dtype_t dt = args->d_list[0].dtype;
    if (dt != GLN_DTYPE_FP32 && dt != GLN_DTYPE_BF16) return 0;
    for (int32_t i = 0; i < gdy->num; i++) {
        const gln_tensor_t *d = &args->d_list[i];
        if (d->dtype != dt || d->rows != m || d->cols != n || !d->data || !aligned16(d->data)) return 0;
        d_ptrs[i] = d->data;
        x_scales[i] = (const float *)x->col_scale_inv + i;
    }
    memset(g, 0, sizeof *g);
    g->kernel = dy->dtype == GLN_DTYPE_FP8_E4M3 ? GLN_CUTLASS_E4M3_WGRAD : GLN_CUTLASS_E5M2_E4M3_WGRAD;
    g->d_dtype = dt;
    g->num = gdy->num;
    g->split_is_k = 1;
    g->m = m, g->n = n;
    g->a = dy->col_data, g->a_row_bytes = m;
    g->b = x->col_data, g->b_row_bytes = n;
    g->d_list = d_ptrs;
    g->a_scale = (const float *)dy->col_scale_inv;
    g->b_scale_list = x_scales;
    g->accumulate = args->accumulate;
    g->k_align = gln_cuda_wgrad_k_align(gdy);
    tile_regime(g, dy->rows, gdy->num, GLN_CUTLASS_SMALL_ROWS);
    return 1;
}

/* The kernel lab (bench/lab/grouped_tiles.c) points this at its own instantiations to time
 * tile configurations that are not in the library on the calls the dispatcher plans; it returns
 * GLN_STATUS_NOT_SUPPORTED for the calls it leaves to the library's kernels.  NULL otherwise. */
gln_status_t (*gln_cutlass_lab_kernel)(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call) = NULL;
/* The kernel lab sets this to time the promoted FP8 kernels with fewer FP32 promotions
 * (gln_cutlass_grouped_t.promotion_k); 0 otherwise. */
int32_t gln_cutlass_lab_promotion_k = 0;

static gln_status_t run_kernel(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *fn);

/* The FP8 wgrad when some expert's row count may not be a multiple of g->k_align: those experts'
 * transposed copies zero-padded into scratch first (cuda_wgrad_pad.cu), then one CUTLASS launch
 * for every expert. */
static gln_status_t run_fp8_wgrad_padded(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *fn) {
    gln_cutlass_grouped_t p = *g;
    GLN_TRY(gln_cuda_wgrad_pad(ctx, &p, fn));
    const gln_status_t st = run_kernel(ctx, &p, fn);
    gln_cuda_wgrad_pad_release(ctx, &p);
    return st;
}

static int is_fp8_wgrad(const gln_cutlass_grouped_t *g) {
    return g->kernel == GLN_CUTLASS_E4M3_WGRAD || g->kernel == GLN_CUTLASS_E5M2_E4M3_WGRAD;
}

static gln_status_t run_kernel(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *fn) {
    /* k_align <= 1: the host saw every split aligned (plan_nt_fp8) */
    if (is_fp8_wgrad(g) && g->k_align > 1 && !g->a_pad) return run_fp8_wgrad_padded(ctx, g, fn);
    if (gln_cutlass_lab_kernel) {
        const gln_status_t st = gln_cutlass_lab_kernel(ctx, g, fn);
        if (st != GLN_STATUS_NOT_SUPPORTED) return st;
    }
    switch (g->kernel) {
    case GLN_CUTLASS_BF16_TN:
        if (g->small_tiles) return gln_cutlass_run_bf16_tn_small(ctx, g, fn);
        return g->large_tiles ? gln_cutlass_run_bf16_tn_large(ctx, g, fn) : gln_cutlass_run_bf16_tn(ctx, g, fn);
    case GLN_CUTLASS_BF16_NN:
        if (g->small_tiles) return gln_cutlass_run_bf16_nn_small(ctx, g, fn);
        return g->large_tiles ? gln_cutlass_run_bf16_nn_large(ctx, g, fn) : gln_cutlass_run_bf16_nn(ctx, g, fn);
    case GLN_CUTLASS_BF16_NT_F32:
        if (g->d_dtype == GLN_DTYPE_BF16) return gln_cutlass_run_bf16_nt_bf16(ctx, g, fn);
        /* cooperative 128×256 for small and large experts, pingpong 128×128 between */
        if (g->small_tiles || g->large_tiles) return gln_cutlass_run_bf16_nt_f32(ctx, g, fn);
        return gln_cutlass_run_bf16_nt_f32_pp(ctx, g, fn);
    case GLN_CUTLASS_E4M3_TN:
        if (g->d_dtype == GLN_DTYPE_FP16)
            return g->fast_accumulate ? gln_cutlass_run_e4m3_tn_fast_f16(ctx, g, fn)
                                      : gln_cutlass_run_e4m3_tn_f16(ctx, g, fn);
        if (g->d_dtype == GLN_DTYPE_FP32)
            return g->fast_accumulate ? gln_cutlass_run_e4m3_tn_fast_f32(ctx, g, fn)
                                      : gln_cutlass_run_e4m3_tn_f32(ctx, g, fn);
        if (!g->fast_accumulate) {
            if (g->small_tiles) return gln_cutlass_run_e4m3_tn_small(ctx, g, fn);
            return g->large_tiles ? gln_cutlass_run_e4m3_tn_large(ctx, g, fn) : gln_cutlass_run_e4m3_tn(ctx, g, fn);
        }
        if (g->small_tiles) return gln_cutlass_run_e4m3_tn_fast_small(ctx, g, fn);
        return g->large_tiles ? gln_cutlass_run_e4m3_tn_fast_large(ctx, g, fn) : gln_cutlass_run_e4m3_tn_fast(ctx, g, fn);
    case GLN_CUTLASS_E5M2_E4M3_TN:
        return g->large_tiles ? gln_cutlass_run_e5m2_e4m3_tn_large(ctx, g, fn) : gln_cutlass_run_e5m2_e4m3_tn(ctx, g, fn);
    case GLN_CUTLASS_E4M3_WGRAD:
    case GLN_CUTLASS_E5M2_E4M3_WGRAD: {
        gln_status_t st;
        const int e5m2 = g->kernel == GLN_CUTLASS_E5M2_E4M3_WGRAD;
        if (g->d_dtype == GLN_DTYPE_BF16)
            st = e5m2 ? gln_cutlass_run_e5m2_e4m3_wgrad_bf16(ctx, g, fn) : gln_cutlass_run_e4m3_wgrad_bf16(ctx, g, fn);
        else if (g->large_tiles)
            st = e5m2 ? gln_cutlass_run_e5m2_e4m3_wgrad(ctx, g, fn) : gln_cutlass_run_e4m3_wgrad(ctx, g, fn);
        else
            st = e5m2 ? gln_cutlass_run_e5m2_e4m3_wgrad_pp(ctx, g, fn) : gln_cutlass_run_e4m3_wgrad_pp(ctx, g, fn);
        return st;
    }
    default: return gln_fail(GLN_STATUS_INTERNAL_ERROR, "%s: CUTLASS kernel %d does not exist", fn, (int)g->kernel);
    }
}

/* The host arrays a plan fills (one entry per expert). */
typedef struct host_lists {
    void **ptrs;
    const void **biases;
    const float **scales;
} host_lists_t;

/* Any kernel for these arguments: fills g (offsets excepted), or returns 0. */
static int plan_any(const gln_grouped_gemm_args_t *args, gln_cutlass_grouped_t *g, const host_lists_t *h) {
    memset(g, 0, sizeof *g);
    const int ok = args->layout == GLN_LAYOUT_NT ? plan_nt(args, g, h->ptrs) || plan_nt_fp8(args, g, h->ptrs, h->scales)
                                                 : plan_tn_nn(args, g, (const void **)h->ptrs, h->scales, h->biases);
    g->promotion_k = gln_cutlass_lab_promotion_k; /* 0 (every tile) outside the kernel lab */
    return ok;
}

/* ---- MXFP8 and power-of-two block scales: dequantize to bf16, then the bf16 kernels ---------- */

static int is_block_mode(gln_scaling_mode_t m) { return m == GLN_SCALING_BLOCK_1D || m == GLN_SCALING_BLOCK_2D; }

/* An operand the bf16 kernels can take once dequantized exactly. */
static int is_emulated(const gln_tensor_t *t, int block_pow2) {
    if (!gln_dtype_is_fp8(t->dtype)) return 0;
    return t->scaling == GLN_SCALING_MXFP8_1D || (is_block_mode(t->scaling) && block_pow2);
}

static int emulated_call(const gln_grouped_gemm_args_t *args) {
    const int p2 = args->block_scales_pow2;
    if (!is_emulated(&args->b->packed, p2)) return 0;
    if (args->layout == GLN_LAYOUT_NT) return is_emulated(&args->a_grouped->packed, p2);
    /* the weights are dequantized by one batched launch: one dtype, mode and shape */
    const gln_tensor_t *w0 = &args->a_list[0];
    for (int32_t i = 0; i < args->b->num; i++) {
        const gln_tensor_t *w = &args->a_list[i];
        if (!is_emulated(w, p2) || w->dtype != w0->dtype || w->scaling != w0->scaling || w->rows != w0->rows ||
            w->cols != w0->cols)
            return 0;
    }
    return 1;
}

/* The bf16 twins of the operands and what backs them. */
typedef struct emulated {
    gln_grouped_gemm_args_t args;  /* the call on the twins */
    gln_grouped_tensor_t b, a;     /* twins of args->b and (NT) args->a_grouped */
    gln_tensor_t *w;               /* TN / NN: host [num], twins of the weights */
    void *b16, *a16;               /* device bf16 scratch */
    gln_cuda_plan_t plan_b, plan_a;
} emulated_t;

/* A bf16 view of shape [rows, cols] at data. */
static gln_tensor_t bf16_view(int64_t rows, int64_t cols, void *data) {
    return gln_tensor_make(GLN_DTYPE_BF16, rows, cols, data);
}

/* Twins pointing at `b16` / `a16` (a16: the weights, num · rows · cols, or NT's x). */
static void emulated_views(emulated_t *e, const gln_grouped_gemm_args_t *args, void *b16, void *a16) {
    const gln_tensor_t *pb = &args->b->packed;
    e->args = *args;
    e->b = *args->b;
    e->b.packed = bf16_view(pb->rows, pb->cols, b16);
    e->args.b = &e->b;
    if (args->layout == GLN_LAYOUT_NT) {
        const gln_tensor_t *pa = &args->a_grouped->packed;
        e->a = *args->a_grouped;
        e->a.packed = bf16_view(pa->rows, pa->cols, a16);
        e->args.a_grouped = &e->a;
        return;
    }
    const gln_tensor_t *w0 = &args->a_list[0];
    const size_t per = (size_t)w0->rows * (size_t)w0->cols;
    for (int32_t i = 0; i < args->b->num; i++)
        e->w[i] = bf16_view(w0->rows, w0->cols, a16 ? (uint16_t *)a16 + (size_t)i * per : NULL);
    e->args.a_list = e->w;
}

/* Would a bf16 kernel take the twins?  Probed with a 256-byte-aligned placeholder address
 * (the plans only check alignment), before any scratch is taken. */
static int emulated_fits(emulated_t *e, const gln_grouped_gemm_args_t *args, const host_lists_t *h) {
    void *probe = (void *)(uintptr_t)256;
    gln_cutlass_grouped_t g;
    emulated_views(e, args, probe, probe);
    return plan_any(&e->args, &g, h);
}

static gln_status_t bf16_scratch(gln_context_t *ctx, int64_t rows, int64_t cols, void **p, const char *fn) {
    size_t bytes;
    GLN_TRY(gln_shape_bytes(fn, "the bf16 operand", rows, cols, 2, &bytes));
    return gln_cuda_scratch_alloc(ctx, bytes, p, fn);
}

/* Plans, scratch and the dequantizations, all in stream order. */
static gln_status_t emulated_prepare(gln_context_t *ctx, emulated_t *e, const gln_grouped_gemm_args_t *args,
                                     const char *fn) {
    const gln_grouped_tensor_t *gb = args->b;
    const int nt = args->layout == GLN_LAYOUT_NT;
    GLN_TRY(gln_cuda_plan_make(ctx, gb, gb->packed.scaling, &e->plan_b, fn));
    GLN_TRY(bf16_scratch(ctx, gb->packed.rows, gb->packed.cols, &e->b16, fn));
    /* the copy each layout reads (see gln_gemm_layout_t): b columnwise in NT only, A except in TN */
    GLN_TRY(gln_cuda_grouped_dequantize_bf16(ctx, gb, nt, &e->plan_b, e->b16, fn));
    if (nt) {
        const gln_grouped_tensor_t *ga = args->a_grouped;
        GLN_TRY(gln_cuda_plan_make(ctx, ga, ga->packed.scaling, &e->plan_a, fn));
        GLN_TRY(bf16_scratch(ctx, ga->packed.rows, ga->packed.cols, &e->a16, fn));
        return gln_cuda_grouped_dequantize_bf16(ctx, ga, 1, &e->plan_a, e->a16, fn);
    }
    const gln_tensor_t *w0 = &args->a_list[0];
    int64_t w_rows;
    if (gln_mul_overflow_i64((int64_t)gb->num, w0->rows, &w_rows))
        return gln_fail(GLN_STATUS_INVALID_ARGUMENT, "%s: %d weights of %lld rows overflow int64", fn, (int)gb->num,
                        (long long)w0->rows);
    GLN_TRY(bf16_scratch(ctx, w_rows, w0->cols, &e->a16, fn));
    return gln_cuda_dequantize_list_bf16(ctx, args->a_list, gb->num, args->layout != GLN_LAYOUT_TN, e->a16, fn);
}

static void emulated_release(gln_context_t *ctx, emulated_t *e) {
    gln_cuda_scratch_free(ctx, e->b16);
    gln_cuda_scratch_free(ctx, e->a16);
    gln_cuda_plan_free(ctx, &e->plan_b);
    gln_cuda_plan_free(ctx, &e->plan_a);
    free(e->w);
}

/* The emulated grouped GEMM: *handled = 1 once the twins fit a kernel. */
static gln_status_t run_emulated(gln_context_t *ctx, const gln_grouped_gemm_args_t *args, const host_lists_t *h,
                                 int *handled, const char *fn) {
    emulated_t e;
    memset(&e, 0, sizeof e);
    if (args->layout != GLN_LAYOUT_NT && !(e.w = calloc((size_t)args->b->num, sizeof *e.w)))
        return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory for %d experts", fn, (int)args->b->num);
    gln_status_t st = GLN_STATUS_SUCCESS;
    if (emulated_fits(&e, args, h)) {
        *handled = 1;
        st = emulated_prepare(ctx, &e, args, fn);
        gln_cutlass_grouped_t g;
        emulated_views(&e, args, e.b16, e.a16);
        if (st == GLN_STATUS_SUCCESS && plan_any(&e.args, &g, h)) {
            /* NT: the plan of the operand with fewer packed rows, whose clamped offsets (bad
             * device splits) stay inside both twins */
            const int a_first = args->layout == GLN_LAYOUT_NT && args->a_grouped->packed.rows < args->b->packed.rows;
            g.offsets = a_first ? e.plan_a.rows : e.plan_b.rows;
            st = run_kernel(ctx, &g, fn);
        } else if (st == GLN_STATUS_SUCCESS) {
            *handled = 0; /* the scratch came back less aligned than the probe: the loop */
        }
    }
    emulated_release(ctx, &e);
    return st;
}

/* ---- the entry point ------------------------------------------------------------------------ */

/* Per-tensor FP8 and bf16 operands straight into a kernel. */
static gln_status_t run_direct(gln_context_t *ctx, const gln_grouped_gemm_args_t *args, const host_lists_t *h,
                               int *handled, const char *fn) {
    gln_cutlass_grouped_t g;
    const int nt = args->layout == GLN_LAYOUT_NT;
    const int fits = plan_any(args, &g, h);
    /* few large experts with host splits: the loop (see the top of this file), except where
     * CUTLASS wins there too (the fast-accumulating FP8 fprop) or the loop has no FP8 NT GEMM
     * of its own (the FP8 wgrad) */
    const int64_t avg_rows = args->b->packed.rows / args->b->num;
    const int fp8_wgrad = is_fp8_wgrad(&g);
    const int loop_wins = !args->b->splits_on_backend && avg_rows >= GLN_CUTLASS_LOOP_ROWS &&
                          !(g.fast_accumulate && args->layout == GLN_LAYOUT_TN) && !(nt && fp8_wgrad);
    if (!fits || loop_wins) return GLN_STATUS_SUCCESS;
    int64_t *offsets = NULL;
    *handled = 1;
    gln_status_t st = gln_cuda_group_offsets(ctx, args->b, &offsets, fn);
    if (st == GLN_STATUS_SUCCESS) {
        g.offsets = offsets;
        st = run_kernel(ctx, &g, fn);
    }
    gln_cuda_scratch_free(ctx, offsets);
    return st;
}

gln_status_t gln_cuda_grouped_gemm_cutlass(gln_context_t *ctx, const gln_grouped_gemm_args_t *args, int *handled) {
    static const char *fn = "gln_grouped_gemm (cuda)";
    *handled = 0;
    if (forced_loop()) return GLN_STATUS_SUCCESS;
    /* FP8 block scaling (FP32 or power-of-two scales): CUTLASS's block-scaled kernels */
    gln_status_t bst = gln_cuda_grouped_gemm_blockwise(ctx, args, handled);
    if (*handled || bst != GLN_STATUS_SUCCESS) return bst;
    const int32_t num = args->b->num;
    host_lists_t h;
    h.ptrs = calloc((size_t)num, sizeof(void *));
    h.biases = calloc((size_t)num, sizeof(void *));
    h.scales = calloc((size_t)num, sizeof(float *));
    gln_status_t st = GLN_STATUS_SUCCESS;
    if (!h.ptrs || !h.scales || !h.biases)
        st = gln_fail(GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory for %d experts", fn, (int)num);
    else if (emulated_call(args))
        st = run_emulated(ctx, args, &h, handled, fn);
    else
        st = run_direct(ctx, args, &h, handled, fn);
    free(h.ptrs);
    free((void *)h.biases);
    free((void *)h.scales);
    return st;
}

#else /* built without CUTLASS: the loop does every grouped GEMM */

gln_status_t gln_cuda_grouped_gemm_cutlass(gln_context_t *ctx, const gln_grouped_gemm_args_t *args, int *handled) {
    (void)ctx, (void)args;
    *handled = 0;
    return GLN_STATUS_SUCCESS;
}

#endif

/* The grouped GEMM on FP8 block-scaled operands (BLOCK_1D activations / gradients, BLOCK_2D
 * weights, E4M3) through CUTLASS's block-scaled grouped kernels (cuda_grouped_blockwise.h): which
 * argument sets fit, and their translation.  FP32 and power-of-two scales take the same kernel:
 * the scales multiply FP32 partial sums per 128-wide K block, which for powers of two is the value
 * the dequantize-first emulation computes, without its dequantization pass.
 *
 *   TN (fprop)  x rowwise 1×128 · W_i rowwise 128×128        -> bf16 y (+ bf16 bias_i)
 *   NN (dgrad)  dy rowwise 1×128 · W_i's transposed copy      -> bf16 dx
 *   NT (wgrad)  dy and x columnwise (1×128 along the tokens)  -> fp32 dW_i (main_grad, beta = 1
 *               when accumulating); experts whose row count is not a multiple of 16 read
 *               zero-padded copies of their data (gln_cuda_wgrad_pad, chosen on the device)
 * with K (the reduction dim of TN / NN) and every FP8 row a multiple of 16 bytes, the wgrad's
 * M and N multiples of 16, 16-byte aligned buffers and dimensions within int32.  Everything
 * else (E5M2 gradients, BLOCK_1D weights, fp32 outputs of TN / NN) is left to the other paths.
 *
 * Row offsets and the members' scale offsets come from the group plan (device splits: computed
 * on the device), so a call never waits for the host and captures in a CUDA graph.
 *
 * Environment (kernel lab, comparisons): GLN_CUDA_BLOCKWISE=0 turns this path off (pow2 scales
 * then take the dequantize emulation, FP32 scales the per-expert loop); GLN_CUTLASS_BLOCKWISE=
 * coop | cluster | pingpong forces the fprop / dgrad instantiation (tn_variant below);
 * GLN_CUTLASS_RASTER steers the tile scheduler as for every
 * CUTLASS grouped kernel (cutlass/grouped_sm90.cuh, documented in cuda_grouped_gemm.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_grouped_blockwise.h"
#include "common/error.h"
#include "tensor/tensor.h"

#ifdef GLN_HAVE_CUTLASS

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }
static int fits_int(int64_t x) { return x >= 0 && x <= INT32_MAX; }

static int disabled(void) {
    const char *e = getenv("GLN_CUDA_BLOCKWISE");
    return e && !strcmp(e, "0");
}

/* The fprop / dgrad instantiation, from shapes the host knows (never the device splits): the
 * cooperative 128×128 kernel on 2×1 clusters for large experts (avg = packed rows / experts >=
 * 1024, the large regime of cuda_grouped_gemm.c; the lab's winner on DeepGEMM's shape), on 1×1
 * clusters otherwise (an expert of one or two M tiles would idle half a cluster).
 * GLN_CUTLASS_BLOCKWISE=coop or =cluster forces one (other candidates: bench/lab/lab_block.c). */
typedef enum bw_tn { BW_TN_COOP, BW_TN_CLUSTER } bw_tn_t;

static bw_tn_t tn_variant(int64_t packed_rows, int32_t num) {
    const char *e = getenv("GLN_CUTLASS_BLOCKWISE");
    if (e && !strcmp(e, "coop")) return BW_TN_COOP;
    if (e && !strcmp(e, "cluster")) return BW_TN_CLUSTER;
    return num > 0 && packed_rows / num >= 1024 ? BW_TN_CLUSTER : BW_TN_COOP;
}

gln_status_t (*gln_cutlass_lab_blockwise)(gln_context_t *ctx, const gln_cutlass_blockwise_t *bw, const char *call) = NULL;

/* The lab's instantiation when it takes the call (*taken = 1), else nothing. */
static gln_status_t lab_kernel(gln_context_t *ctx, const gln_cutlass_blockwise_t *bw, const char *fn, int *taken) {
    *taken = 0;
    if (!gln_cutlass_lab_blockwise) return GLN_STATUS_SUCCESS;
    const gln_status_t st = gln_cutlass_lab_blockwise(ctx, bw, fn);
    if (st == GLN_STATUS_NOT_SUPPORTED) return GLN_STATUS_SUCCESS;
    *taken = 1;
    return st;
}

static int is_block_e4m3(const gln_tensor_t *t, gln_scaling_mode_t mode) {
    return t->dtype == GLN_DTYPE_FP8_E4M3 && t->scaling == mode;
}

/* TN / NN: fills bw (offsets and scale starts excepted) when the kernel fits; 0 otherwise.
 * w_ptrs / w_scales / biases: host [num], filled here. */
static int plan_tn_nn(const gln_grouped_gemm_args_t *args, gln_cutlass_blockwise_t *bw, const void **w_ptrs,
                      const float **w_scales, const void **biases) {
    const gln_grouped_tensor_t *gb = args->b;
    const gln_tensor_t *x = &gb->packed, *dp = &args->d_grouped->packed, *w0 = &args->a_list[0];
    const int tn = args->layout == GLN_LAYOUT_TN;
    if (!is_block_e4m3(x, GLN_SCALING_BLOCK_1D) || !is_block_e4m3(w0, GLN_SCALING_BLOCK_2D)) return 0;
    if (dp->dtype != GLN_DTYPE_BF16 || (args->bias_list && !tn)) return 0;
    /* D [rows, n] = B [rows, k] · op(W): TN W_i [n, k]; NN W_i [k, n], read through its copy [n, k] */
    const int64_t k = x->cols, n = tn ? w0->rows : w0->cols;
    if (!fits_int(x->rows) || !fits_int(k) || !fits_int(n) || k == 0 || n == 0) return 0;
    if (k % 16 || n % 8) return 0; /* FP8 rows of k bytes, bf16 rows of n elements: 16-byte strides */
    if (!x->data || !x->scale_inv || !aligned16(x->data) || !dp->data || !aligned16(dp->data)) return 0;
    for (int32_t i = 0; i < gb->num; i++) {
        const gln_tensor_t *w = &args->a_list[i];
        if (w->dtype != w0->dtype || w->scaling != w0->scaling || w->rows != w0->rows || w->cols != w0->cols) return 0;
        const void *p = tn ? w->data : w->col_data;
        const float *s = (const float *)(tn ? w->scale_inv : w->col_scale_inv);
        if (!p || !aligned16(p) || !s) return 0;
        w_ptrs[i] = p;
        w_scales[i] = s;
        if (args->bias_list) { /* a bf16 row [1, n] per expert */
            const gln_tensor_t *bias = &args->bias_list[i];
            if (bias->dtype != GLN_DTYPE_BF16 || bias->rows != 1 || bias->cols != n || !bias->data ||
                !aligned16(bias->data))
                return 0;
            biases[i] = bias->data;
        }
    }
    memset(bw, 0, sizeof *bw);
    gln_cutlass_grouped_t *g = &bw->g;
    g->num = gb->num;
    g->n = n, g->k = k;
    g->a = x->data, g->a_row_bytes = k;
    g->b_list = w_ptrs;
    g->b_scale_list = w_scales;
    g->d = dp->data, g->d_row_bytes = n * 2;
    g->bias_list = args->bias_list ? biases : NULL;
    g->accumulate = args->accumulate;
    bw->a_sf = (const float *)x->scale_inv;
    bw->packed_rows = x->rows;
    g->split_rows = x->rows;
    return 1;
}

/* The splits of the two NT operands must be one plan (as cuda_grouped_gemm.c requires). */
static int operands_share_splits(const gln_grouped_tensor_t *a, const gln_grouped_tensor_t *b) {
    if (a->splits_on_backend != b->splits_on_backend) return 0;
    if (a->splits == b->splits) return 1;
    return !a->splits_on_backend && memcmp(a->splits, b->splits, (size_t)a->num * sizeof(int64_t)) == 0;
}

/* NT: dW_i [m, n] = dy_i [rows_i, m]ᵀ · x_i [rows_i, n] from the transposed copies: dy_i's
 * [m, rows_i] at element row_start · m, x_i's [n, rows_i] at row_start · n. */
static int plan_nt(const gln_grouped_gemm_args_t *args, gln_cutlass_blockwise_t *bw, void **d_ptrs) {
    const gln_grouped_tensor_t *gdy = args->b, *gx = args->a_grouped;
    const gln_tensor_t *dy = &gdy->packed, *x = &gx->packed;
    if (!is_block_e4m3(dy, GLN_SCALING_BLOCK_1D) || !is_block_e4m3(x, GLN_SCALING_BLOCK_1D)) return 0;
    if (!operands_share_splits(gdy, gx)) return 0;
    const int64_t m = dy->cols, n = x->cols;
    if (!fits_int(dy->rows) || !fits_int(x->rows) || !fits_int(m) || !fits_int(n) || m == 0 || n == 0) return 0;
    if (m % 16 || n % 16) return 0; /* every expert's copies start 16-byte aligned */
    if (!dy->col_data || !x->col_data || !aligned16(dy->col_data) || !aligned16(x->col_data)) return 0;
    if (!dy->col_scale_inv || !x->col_scale_inv) return 0;
    for (int32_t i = 0; i < gdy->num; i++) {
        const gln_tensor_t *d = &args->d_list[i];
        if (d->dtype != GLN_DTYPE_FP32 || d->rows != m || d->cols != n || !d->data || !aligned16(d->data)) return 0;
        d_ptrs[i] = d->data;
    }
    memset(bw, 0, sizeof *bw);
    gln_cutlass_grouped_t *g = &bw->g;
    g->num = gdy->num;
    g->split_is_k = 1;
    g->m = m, g->n = n;
    g->a = dy->col_data, g->a_row_bytes = m;
    g->b = x->col_data, g->b_row_bytes = n;
    g->d_list = d_ptrs;
    g->accumulate = args->accumulate;
    g->k_align = gln_cuda_wgrad_k_align(gdy);
    g->split_rows = dy->rows;
    bw->a_sf = (const float *)dy->col_scale_inv;
    bw->b_sf = (const float *)x->col_scale_inv;
    return 1;
}

/* The host lists a plan fills (one entry per expert). */
typedef struct bw_lists {
    void **ptrs;
    const float **scales;
    const void **biases;
} bw_lists_t;

static gln_status_t run_tn_nn(gln_context_t *ctx, gln_cutlass_blockwise_t *bw, const gln_grouped_gemm_args_t *args,
                              const char *fn) {
    gln_cuda_plan_t plan;
    memset(&plan, 0, sizeof plan);
    gln_status_t st = GLN_STATUS_SUCCESS;
    GLN_CHECK(st, fail, gln_cuda_plan_make(ctx, args->b, GLN_SCALING_BLOCK_1D, &plan, fn));
    bw->g.offsets = plan.rows;
    bw->a_sf_start = plan.srow;
    int taken = 0;
    GLN_CHECK(st, fail, lab_kernel(ctx, bw, fn, &taken));
    if (!taken) {
        st = tn_variant(args->b->packed.rows, args->b->num) == BW_TN_CLUSTER
                 ? gln_cutlass_run_blockwise_tn_large(ctx, bw, fn)
                 : gln_cutlass_run_blockwise_tn(ctx, bw, fn);
    }
fail:
    gln_cuda_plan_free(ctx, &plan);
    return st;
}

static gln_status_t run_nt(gln_context_t *ctx, gln_cutlass_blockwise_t *bw, const gln_grouped_gemm_args_t *args,
                           const char *fn) {
    gln_cuda_plan_t plan_dy, plan_x;
    memset(&plan_dy, 0, sizeof plan_dy);
    memset(&plan_x, 0, sizeof plan_x);
    gln_status_t st = GLN_STATUS_SUCCESS;
    GLN_CHECK(st, fail, gln_cuda_plan_make(ctx, args->b, GLN_SCALING_BLOCK_1D, &plan_dy, fn));
    GLN_CHECK(st, fail, gln_cuda_plan_make(ctx, args->a_grouped, GLN_SCALING_BLOCK_1D, &plan_x, fn));
    /* the row offsets of the operand with fewer packed rows: their clamped values (bad device
     * splits) stay inside both copies */
    bw->g.offsets = args->a_grouped->packed.rows < args->b->packed.rows ? plan_x.rows : plan_dy.rows;
    bw->a_sf_start = plan_dy.scol;
    bw->b_sf_start = plan_x.scol;
    int taken = 0;
    GLN_CHECK(st, fail, gln_cuda_wgrad_pad(ctx, &bw->g, fn));
    GLN_CHECK(st, fail, lab_kernel(ctx, bw, fn, &taken));
    if (!taken) st = gln_cutlass_run_blockwise_wgrad(ctx, bw, fn);
fail:
    gln_cuda_wgrad_pad_release(ctx, &bw->g);
    gln_cuda_plan_free(ctx, &plan_dy);
    gln_cuda_plan_free(ctx, &plan_x);
    return st;
}

gln_status_t gln_cuda_grouped_gemm_blockwise(gln_context_t *ctx, const gln_grouped_gemm_args_t *args, int *handled) {
    static const char *fn = "gln_grouped_gemm (cuda, block-scaled)";
    *handled = 0;
    if (disabled()) return GLN_STATUS_SUCCESS;
    const int32_t num = args->b->num;
    bw_lists_t h;
    h.ptrs = calloc((size_t)num, sizeof(void *));
    h.scales = calloc((size_t)num, sizeof(float *));
    h.biases = calloc((size_t)num, sizeof(void *));
    gln_status_t st = GLN_STATUS_SUCCESS;
    gln_cutlass_blockwise_t bw;
    const int nt = args->layout == GLN_LAYOUT_NT;
    if (!h.ptrs || !h.scales || !h.biases) {
        st = gln_fail(GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory for %d experts", fn, (int)num);
    } else if (nt ? plan_nt(args, &bw, h.ptrs) : plan_tn_nn(args, &bw, (const void **)h.ptrs, h.scales, h.biases)) {
        *handled = 1;
        st = nt ? run_nt(ctx, &bw, args, fn) : run_tn_nn(ctx, &bw, args, fn);
    }
    free(h.ptrs);
    free((void *)h.scales);
    free((void *)h.biases);
    return st;
}

/* One GEMM of the split path (gln_gemm on block-scaled operands) as a group of one: B's rows
 * are the token rows in every layout (TN x, NN dy, NT dy), so one host split of B->rows. */
gln_status_t gln_cuda_gemm_blockwise_single(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                                            const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias,
                                            int accumulate, int *handled) {
    *handled = 0;
    int64_t split = B->rows;
    gln_grouped_tensor_t gb = {1, &split, 0, *B}, ga = {1, &split, 0, *A}, gd = {1, &split, 0, *D};
    gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
    a.layout = layout;
    a.accumulate = accumulate;
    a.b = &gb;
    if (layout == GLN_LAYOUT_NT) {
        if (bias) return GLN_STATUS_SUCCESS;
        a.a_grouped = &ga;
        a.d_list = D;
    } else {
        a.a_list = A;
        a.d_grouped = &gd;
        a.bias_list = bias;
    }
    return gln_cuda_grouped_gemm_blockwise(ctx, &a, handled);
}

#else /* built without CUTLASS */

gln_status_t gln_cuda_gemm_blockwise_single(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                                            const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias,
                                            int accumulate, int *handled) {
    (void)ctx, (void)layout, (void)A, (void)B, (void)D, (void)bias, (void)accumulate;
    *handled = 0;
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_cuda_grouped_gemm_blockwise(gln_context_t *ctx, const gln_grouped_gemm_args_t *args, int *handled) {
    (void)ctx, (void)args;
    *handled = 0;
    return GLN_STATUS_SUCCESS;
}

#endif

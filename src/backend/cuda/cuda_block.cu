/* CUDA FP8 block-scaling quantization (BLOCK_1D: 1x128 rowwise / 128x1 columnwise blocks;
 * BLOCK_2D: 128x128 tiles shared by both copies), bitwise equal to gln_quantize_block_ref
 * (src/quant/quant_block.c), for one tensor or for every member of a grouped tensor in one
 * launch (a single tensor is a grouped tensor of one member).  This file builds the launch
 * arguments and picks the kernel; the numerics and the tile decomposition are in
 * cuda_block_tile.cuh.
 *
 * One job, three kernels, each for what the others cannot take:
 *   gln_block_quant_tma_kernel (cuda_block_tma.cu)      bf16 input, 16-byte aligned base,
 *       cols % 8 == 0, packed rows and columns within the tensor copy's 32-bit coordinates: a
 *       Hopper tensor-copy load pipeline, the fast path;
 *   gln_block_quant_kernel (cuda_block_general.cu)      everything else: fp32 and fp16 input,
 *       unaligned bf16, columns not a multiple of 8, a tensor map the driver refuses;
 *   gln_block_quant_act_kernel (cuda_block_act.cu)      the activation + quantize of
 *       gln_activation_forward_quantize, which computes its input while it loads.
 * gln_cuda_block_quant_last_kernel (cuda_block.h) names the kernel launched last, so the tests
 * can prove each is reached.
 *
 * Grids are persistent (as many blocks as are resident at once); GLN_CUDA_QUANT_GRID=N caps them
 * at N blocks (read at every call), which the tests use to make each block walk many tiles. */
#include "backend/cuda/cuda_block_tile.cuh"

extern "C" {
#include "backend/cuda/cuda_block.h"
}

/* ---- which kernel ran ------------------------------------------------------------------------ */

static const char *bq_last_kernel; /* atomic: set by each launch, taken by the probe */

static void bq_record(const char *kernel) { __atomic_store_n(&bq_last_kernel, kernel, __ATOMIC_RELAXED); }

extern "C" const char *gln_cuda_block_quant_last_kernel(void) {
    return __atomic_exchange_n(&bq_last_kernel, (const char *)NULL, __ATOMIC_RELAXED);
}

/* ---- launch ---------------------------------------------------------------------------------- */

/* The arguments shared by the entry points (in: the packed input; out: the packed output). */
static bq_args_t bq_args_make(const gln_quant_config_t *cfg, const gln_tensor_t *in, const gln_tensor_t *out) {
    bq_args_t a;
    memset(&a, 0, sizeof a);
    a.x = in->data;
    a.cols = in->cols;
    a.ctiles = gln_ceil_div(in->cols, BQ_EDGE);
    if (cfg->rowwise) a.q = (uint8_t *)out->data, a.s = (float *)out->scale_inv;
    if (cfg->columnwise) a.qt = (uint8_t *)out->col_data, a.cs = (float *)out->col_scale_inv;
    a.fp8_max = gln_fp8_max(cfg->fp8_dtype);
    a.epsilon = cfg->amax_epsilon;
    a.value_for_inf = gln_hp_max(in->dtype);
    a.pow2 = cfg->power_2_scale;
    const int64_t per16 = in->dtype == GLN_DTYPE_FP32 ? 4 : 8; /* elements per 16-byte load */
    a.vec_in = in->cols % per16 == 0 && ((uintptr_t)in->data & 15) == 0;
    a.vec_q = in->cols % per16 == 0 && ((uintptr_t)a.q & 7) == 0;
    return a;
}

gln_status_t gln_block_quant_grid(const void *k, size_t smem, bq_args_t *a, unsigned int *grid, const char *call,
                                  int one_per_sm) {
    int64_t blocks = 0;
    GLN_TRY(gln_cuda_persistent_grid(k, BQ_THREADS, smem, one_per_sm, a->tiles,
                                     gln_cuda_env_grid_cap("GLN_CUDA_QUANT_GRID"), call, &blocks));
    *grid = (unsigned int)(blocks < INT_MAX ? blocks : INT_MAX);
    return GLN_STATUS_SUCCESS;
}

/* row_tiles: the bound on 128-row tiles over all members (host-known); in_rows: the packed input's
 * rows (the TMA kernel's tensor map). */
static gln_status_t bq_launch(gln_context_t *ctx, const gln_quant_config_t *cfg, gln_dtype_t dtype, bq_args_t *a,
                              int64_t row_tiles, int64_t in_rows, const char *call) {
    if (!a->q && !a->qt) return GLN_STATUS_SUCCESS;
    a->tiles = row_tiles * a->ctiles;
    if (a->tiles == 0) return GLN_STATUS_SUCCESS;
    if (a->act != GLN_ACT_LOAD_NONE) {
        GLN_TRY(gln_block_quant_launch_act(ctx, cfg, a, call));
        bq_record("gln_block_quant_act_kernel");
        return GLN_STATUS_SUCCESS;
    }
    if (!gln_block_quant_tma_refusal(dtype, a, in_rows)) {
        int launched = 0;
        GLN_TRY(gln_block_quant_launch_tma(ctx, cfg, a, in_rows, &launched, call));
        if (launched) {
            bq_record("gln_block_quant_tma_kernel");
            return GLN_STATUS_SUCCESS;
        }
    }
    GLN_TRY(gln_block_quant_launch_general(ctx, cfg, dtype, a, call));
    bq_record("gln_block_quant_kernel");
    return GLN_STATUS_SUCCESS;
}

extern "C" gln_status_t gln_cuda_grouped_quantize_block(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                        const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                                        const gln_cuda_plan_t *plan, const char *call) {
    bq_args_t a = bq_args_make(cfg, &in->packed, &out->packed);
    a.rows = plan->rows, a.srow = plan->srow, a.scol = plan->scol, a.num = plan->num;
    return bq_launch(ctx, cfg, in->packed.dtype, &a, gln_group_tiles_bound(in->packed.rows, plan->num, BQ_EDGE),
                     in->packed.rows, call);
}

extern "C" gln_status_t gln_cuda_quantize_block(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                const gln_tensor_t *in, gln_tensor_t *out, const char *call) {
    bq_args_t a = bq_args_make(cfg, in, out);
    a.num = 1, a.single_rows = in->rows;
    return bq_launch(ctx, cfg, in->dtype, &a, gln_ceil_div(in->rows, BQ_EDGE), in->rows, call);
}

/* Activation on load (gln_activation_forward_quantize): `in` describes the activation's bf16
 * output [rows, H] but its data is the activation's input, ld elements per row (cuda_backend.h).
 * The activation kernel's conditions are the caller's (cuda_act_quant.c); checked here too. */
extern "C" gln_status_t gln_cuda_grouped_quantize_block_act(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                            gln_activation_t act, int64_t ld,
                                                            const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                                            const gln_cuda_plan_t *plan, const char *call) {
    const gln_tensor_t *t = &in->packed;
    if (t->dtype != GLN_DTYPE_BF16 || t->cols % 8 != 0 || ((uintptr_t)t->data & 15u) != 0 || ld < t->cols)
        return gln_fail(GLN_STATUS_NOT_SUPPORTED,
                        "%s: the fused activation + block quantize takes a bf16 output with columns a multiple of "
                        "8, a 16-byte aligned input and a row stride >= the columns (got %s, %lld columns, stride "
                        "%lld)",
                        call, gln_dtype_name(t->dtype), (long long)t->cols, (long long)ld);
    bq_args_t a = bq_args_make(cfg, t, &out->packed);
    a.rows = plan->rows, a.srow = plan->srow, a.scol = plan->scol, a.num = plan->num;
    a.act = gln_act_load_kind((int)act), a.ld = ld;
    return bq_launch(ctx, cfg, t->dtype, &a, gln_group_tiles_bound(t->rows, plan->num, BQ_EDGE), t->rows, call);
}

/* ---- self-check of the fast conversions ------------------------------------------------------ */

/* Every FP32 bit pattern u, paired with -u so the byte order of bq_cvt2 is checked too: the
 * kernels' encode (hardware conversion + NaN fix-up) against numerics.h. */
template <bool E5M2>
__global__ void bq_selfcheck_encode_kernel(unsigned long long *count, unsigned int *first) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < ((uint64_t)1 << 32); i += stride) {
        const uint32_t u = (uint32_t)i;
        const float x = __uint_as_float(u), y = __uint_as_float(u ^ 0x80000000u);
        uint2 w = make_uint2(bq_cvt2<E5M2>(x, y), 0);
        if (gln_f32_isnan(x)) bq_set_byte(&w, 0, bq_nan_byte(x));
        if (gln_f32_isnan(y)) bq_set_byte(&w, 1, bq_nan_byte(y));
        const uint32_t want = E5M2 ? gln_f32_to_e5m2_bits(x) | ((uint32_t)gln_f32_to_e5m2_bits(y) << 8)
                                   : gln_f32_to_e4m3_bits(x) | ((uint32_t)gln_f32_to_e4m3_bits(y) << 8);
        if (w.x != want) {
            atomicAdd(count, 1ull);
            atomicMin(first, u);
        }
    }
}

/* Every fp16 bit pattern: bq_fp16 against gln_fp16_bits_to_f32 (bits equal; NaN: sign only). */
__global__ void bq_selfcheck_fp16_kernel(unsigned long long *count, unsigned int *first) {
    const uint32_t h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h > 0xFFFFu) return;
    const float got = bq_fp16(h), want = gln_fp16_bits_to_f32((uint16_t)h);
    const bool ok = gln_f32_isnan(want) ? gln_f32_isnan(got) && (__float_as_uint(got) >> 31) == (__float_as_uint(want) >> 31)
                                        : __float_as_uint(got) == __float_as_uint(want);
    if (!ok) {
        atomicAdd(count, 1ull);
        atomicMin(first, h);
    }
}

typedef struct bq_check {
    unsigned long long count[3];
    unsigned int first[3];
} bq_check_t;

extern "C" gln_status_t gln_cuda_block_selfcheck(gln_context_t *ctx, unsigned long long counts[3],
                                                 unsigned int first[3], const char *call) {
    cudaStream_t st = gln_cuda_state(ctx)->stream;
    bq_check_t h, *d = NULL;
    memset(&h, 0, sizeof h);
    for (int k = 0; k < 3; k++) h.first[k] = UINT_MAX;
    GLN_TRY(gln_cuda_scratch_alloc(ctx, sizeof h, (void **)&d, call));
    gln_status_t s = gln_cuda_check(cudaMemcpyAsync(d, &h, sizeof h, cudaMemcpyHostToDevice, st), call, "cudaMemcpyAsync");
    if (s == GLN_STATUS_SUCCESS) {
        bq_selfcheck_encode_kernel<false><<<4096, 256, 0, st>>>(&d->count[0], &d->first[0]);
        bq_selfcheck_encode_kernel<true><<<4096, 256, 0, st>>>(&d->count[1], &d->first[1]);
        bq_selfcheck_fp16_kernel<<<256, 256, 0, st>>>(&d->count[2], &d->first[2]);
        s = gln_cuda_check_launch(call, "bq_selfcheck kernels");
    }
    if (s == GLN_STATUS_SUCCESS)
        s = gln_cuda_check(cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, st), call, "cudaMemcpyAsync");
    if (s == GLN_STATUS_SUCCESS) s = gln_cuda_check(cudaStreamSynchronize(st), call, "cudaStreamSynchronize");
    gln_cuda_scratch_free(ctx, d);
    for (int k = 0; k < 3; k++) counts[k] = h.count[k], first[k] = h.first[k];
    return s;
}

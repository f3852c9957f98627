/* The CUDA backend: its per-context state, error translation and the functions of its ops table.
 *
 * Shared by the C files (cuda_backend.c, cuda_gemm.c) and the CUDA files (*.cu).  The .cu files
 * include <cuda_runtime.h> and <cublasLt.h> first and then this header inside extern "C", so
 * every function declared here has C linkage.
 *
 * Threading model: one context = one device + one stream.  Every kernel and cuBLASLt call of a
 * context is issued on that stream, so operations are ordered as the caller issued them.  Copies
 * that touch host memory (and reading device-resident splits) synchronize the stream before
 * returning; everything else is asynchronous until gln_synchronize(). */
#ifndef GLN_BACKEND_CUDA_BACKEND_H
#define GLN_BACKEND_CUDA_BACKEND_H

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "backend/backend.h"
#include "backend/context.h"

/* cuBLASLt workspace per context (what cuBLAS recommends for Hopper). */
#define GLN_CUDA_WORKSPACE_BYTES ((size_t)32 << 20)

/* Scratch of the amax kernels: the largest |x| as FP32 bits (non-NaN values only) and the
 * smallest index holding a NaN (UINT64_MAX when none). */
typedef struct gln_cuda_amax_work {
    unsigned long long nan_index;
    unsigned int max_bits;
    unsigned int pad_;
} gln_cuda_amax_work_t;

/* The first error a kernel found in device-resident arguments (kind 0 = none), in mapped host
 * memory: kernels write it, gln_context_async_error reads it after a synchronize. */
typedef struct gln_cuda_async_error {
    int kind;            /* GLN_CUDA_ASYNC_* */
    int member;          /* the offending member of a grouped tensor */
    long long value;     /* its split, or the running sum that passed the rows */
} gln_cuda_async_error_t;
enum {
    GLN_CUDA_ASYNC_NONE = 0,
    GLN_CUDA_ASYNC_NEGATIVE_SPLIT = 1,
    GLN_CUDA_ASYNC_SPLITS_PAST_ROWS = 2,
    GLN_CUDA_ASYNC_SPLITS_MISMATCH = 3, /* device-resident out->splits != in->splits; value: out's split */
    GLN_CUDA_ASYNC_MOE_INDEX = 4        /* a MoE call's experts / row_of entry out of range (cuda_moe.cu);
                                           member: the entry (saturated to INT_MAX), value: its content */
};

typedef struct gln_cuda_state {
    cudaStream_t stream;          /* where every operation of the context is enqueued */
    cudaStream_t own_stream;      /* the context's own stream (NULL while a caller's is borrowed
                                   * and none was ever needed) */
    gln_cuda_async_error_t *async_host;   /* mapped pinned memory ... */
    gln_cuda_async_error_t *async_dev;    /* ... and its device address */
    cudaMemPool_t pool;           /* the context's stream-ordered pool (gln_cuda_scratch_alloc):
                                   * kept memory is reused, never returned to the driver before
                                   * the context is destroyed */
    cublasLtHandle_t lt;
    void *workspace;              /* cuBLASLt workspace, GLN_CUDA_WORKSPACE_BYTES */
    /* FP8 GEMM decode scales: cuBLASLt on sm_90 refuses a scale pointer into the middle of an
     * allocation, so each operand's scale is copied into its own allocation before the call. */
    float *scale_a;
    float *scale_b;
    gln_cuda_amax_work_t *amax_work; /* 256 bytes: the amax scratch, at byte 128 the quantizers'
                                      * arrival counter of a single tensor (cuda_quant_members.cu) */
    float *scale_tmp;             /* current scaling without a caller scale buffer */
    float *amax_tmp;              /* current scaling without a caller amax buffer */
} gln_cuda_state_t;

/* 1 when the CUDA runtime sees at least one device (gln_backend_available(GLN_BACKEND_CUDA)). */
int gln_cuda_device_present(void);

/* Translate a failure into GLN_STATUS_BACKEND_ERROR "<call>: <what> failed: <name>: <string>";
 * success passes through. */
gln_status_t gln_cuda_check(cudaError_t err, const char *call, const char *what);
gln_status_t gln_cublas_check(cublasStatus_t status, const char *call, const char *what);
/* The launch status of the last kernel (cudaGetLastError). */
gln_status_t gln_cuda_check_launch(const char *call, const char *kernel);
/* A grid cap from the environment variable `name` (the quantize kernels' test and measurement
 * switches): its value when it is a positive integer, else 0 (no cap).  Read at every call. */
int64_t gln_cuda_env_grid_cap(const char *name);
/* *blocks: the grid of a persistent kernel (`threads` per block, `smem` bytes of dynamic shared
 * memory) over `items` work items: as many blocks as the current device holds at once (one per
 * SM when one_per_sm), never more than items, nor cap when cap > 0. */
gln_status_t gln_cuda_persistent_grid(const void *kernel, int threads, size_t smem, int one_per_sm, int64_t items,
                                      int64_t cap, const char *call, int64_t *blocks);
/* An on / off switch from the environment variable `name` (the backend's A/B switches): 0 when
 * its value starts with '0', else 1 (unset: 1).  Read at every call. */
int gln_cuda_env_switch(const char *name);
/* 0 when GLN_CUDA_PDL=0 (the quantizers' kernels then launch without programmatic dependent
 * launch, to measure what it gains; cuda_device.h's gln_cuda_launch), else 1.  Read at every call. */
int gln_cuda_pdl_enabled(void);

/* Stream-ordered memory on the context's stream, for every buffer the library allocates for
 * itself (the scratch_alloc / scratch_free slots): the caller's allocator when the context
 * options gave one, else the context's pool; 0 bytes gives NULL.  Inside a CUDA graph capture
 * the allocations become the graph's own memory, so a replay allocates nothing. */
gln_status_t gln_cuda_scratch_alloc(gln_context_t *ctx, size_t bytes, void **ptr, const char *call);
void gln_cuda_scratch_free(gln_context_t *ctx, void *ptr);

/* Host copy of a grouped tensor's splits (copied with one synchronous cudaMemcpy when they live
 * on the device — the non-graph-safe fallback), checked: each >= 0 and their sum <= rows.
 * *host_splits is malloc'ed; free() it. */
gln_status_t gln_cuda_host_splits(gln_context_t *ctx, const char *call, const char *name,
                                  const gln_grouped_tensor_t *g, int64_t **host_splits);

/* ---- the group plan (cuda_plan.cu) -------------------------------------------------------
 * A grouped tensor's member layout on the device, computed once per call and passed down to
 * every grouped kernel: row offsets and, for the block-scaled modes, the members' scale offsets
 * (the layout of gln_grouped_scale_offsets).  Device splits: a one-block kernel on the stream,
 * or for a deferred plan the consumer's own setup kernel (no host wait either way), which clamps
 * bad splits (negative -> 0, a running sum past the packed rows -> the rows) and records the
 * first in the async error word.  Host splits (checked at the boundary): prefix sums on the host,
 * passed to small kernels by value. */
/* One plan computation on the device (cuda_plan.cuh): the splits (device, num of them) of a
 * grouped tensor of rows x cols in scaling mode `mode`, into offsets / srow / scol (device
 * [num + 1] each); err: the async error word.  splits NULL: nothing to compute. */
typedef struct gln_cuda_plan_job {
    const int64_t *splits;
    int32_t num;
    int64_t rows, cols;
    int mode;
    int64_t *offsets, *srow, *scol;
    gln_cuda_async_error_t *err;
} gln_cuda_plan_job_t;

typedef struct gln_cuda_plan {
    int32_t num;
    int64_t *rows;   /* device [num + 1]: member i owns packed rows rows[i] .. rows[i+1] */
    int64_t *srow;   /* device [num + 1]: member i's rowwise scales start at element srow[i] */
    int64_t *scol;   /* device [num + 1]: ... and its columnwise scales at scol[i] */
    /* a deferred plan (gln_cuda_plan_defer): not computed yet, its consumer's setup kernel computes
     * it first; pending.splits NULL: the plan is on the device */
    gln_cuda_plan_job_t pending;
} gln_cuda_plan_t;

/* The plan of g for scaling mode `mode` (NONE: srow = scol = 0; TENSOR: srow[i] = scol[i] = i).
 * One scratch allocation. */
gln_status_t gln_cuda_plan_make(gln_context_t *ctx, const gln_grouped_tensor_t *g, gln_scaling_mode_t mode,
                                gln_cuda_plan_t *plan, const char *call);
/* The same, but with device splits the plan is only allocated and described (plan->pending): for
 * gln_cuda_quantize_members* alone, whose setup kernel computes it before anything reads it, one
 * launch fewer per call.  Host splits: gln_cuda_plan_make. */
gln_status_t gln_cuda_plan_defer(gln_context_t *ctx, const gln_grouped_tensor_t *g, gln_scaling_mode_t mode,
                                 gln_cuda_plan_t *plan, const char *call);
void gln_cuda_plan_free(gln_context_t *ctx, gln_cuda_plan_t *plan);

/* Only the row offsets of the plan (device [g->num + 1]; free with gln_cuda_scratch_free). */
gln_status_t gln_cuda_group_offsets(gln_context_t *ctx, const gln_grouped_tensor_t *g, int64_t **offsets,
                                    const char *call);

/* ---- CUTLASS grouped GEMMs (cutlass/, built when GLN_HAVE_CUTLASS) ------------------------- */

/* The instantiations.  CUTLASS's A is the grouped token-row operand, B the other one, D row-major. */
typedef enum gln_cutlass_kernel {
    GLN_CUTLASS_BF16_TN,      /* A [M,K] · B [N,K]ᵀ, bf16 -> bf16 (fprop) */
    GLN_CUTLASS_BF16_NN,      /* A [M,K] · B [K,N], bf16 -> bf16 (dgrad) */
    GLN_CUTLASS_BF16_NT_F32,  /* A [K,M]ᵀ · B [K,N], bf16 -> fp32 (wgrad into main_grad) */
    GLN_CUTLASS_E4M3_TN,      /* E4M3 × E4M3, both K-major, -> bf16 (per-tensor FP8 fprop, dgrad) */
    GLN_CUTLASS_E5M2_E4M3_TN, /* E5M2 gradient × E4M3 weight, K-major, -> bf16 (HYBRID dgrad) */
    GLN_CUTLASS_E4M3_WGRAD,   /* E4M3 dy_iᵀ · E4M3 x_i from the transposed copies, -> fp32 (FP8 wgrad) */
    GLN_CUTLASS_E5M2_E4M3_WGRAD, /* E5M2 dy × E4M3 x, as above (HYBRID wgrad) */
    GLN_CUTLASS_KERNEL_COUNT_
} gln_cutlass_kernel_t;

/* One grouped GEMM in CUTLASS's terms: expert i computes D_i [M_i, N] = alpha_i · A_i · B_i
 * (+ D_i when accumulating).  Expert i owns the rows offsets[i] .. offsets[i+1] of the grouped
 * operands; that row count is M_i (split_is_k = 0: fprop, dgrad; then K_i = k) or K_i
 * (split_is_k = 1: wgrad; then M_i = m).  A is grouped; B and D are grouped when their rows are
 * the split dimension (B when split_is_k, D otherwise), else per-expert pointer lists. */
typedef struct gln_cutlass_grouped {
    gln_cutlass_kernel_t kernel;
    int32_t num;
    const int64_t *offsets;          /* device [num + 1] */
    int split_is_k;
    int64_t m, n, k;                 /* the fixed dimensions (the split one is ignored) */
    const void *a;                   /* expert i's A starts at a + offsets[i] · a_row_bytes */
    int64_t a_row_bytes;
    const void *b;                   /* grouped B (split_is_k) ... */
    int64_t b_row_bytes;
    const void *const *b_list;       /* ... or host [num] of device pointers */
    void *d;                         /* grouped D (!split_is_k) ... */
    int64_t d_row_bytes;
    void *const *d_list;             /* ... or host [num] of device pointers */
    const float *a_scale;            /* FP8: device [num], A's per-expert decode scale; else NULL */
    const float *const *b_scale_list;/* FP8: host [num] of device pointers to B's decode scale */
    const void *const *bias_list;    /* TN: host [num] of device pointers to bf16 [1, n] biases, or NULL */
    int accumulate;                  /* D += (beta = 1); else D = */
    int large_tiles;                 /* the large-expert instantiation, where one exists */
    int small_tiles;                 /* the small-expert one (pingpong; cutlass/grouped_variants.h) */
    gln_dtype_t d_dtype;             /* D's dtype: bf16 / fp16 / fp32 where an instantiation has it */
    int fast_accumulate;             /* FP8: no FP32 promotion in the K loop (TE's fprop default) */
    int32_t k_align;                 /* split_is_k: experts whose row count is not a multiple of
                                      * this cannot be read in place by TMA (their K stride): with
                                      * a_pad / b_pad they are read from there, padded; without,
                                      * they get no tiles and the caller computes them (0 or 1:
                                      * no such rule) */
    const void *a_pad, *b_pad;       /* FP8 wgrad: the padded copies of gln_cuda_wgrad_pad, or NULL */
    int64_t split_rows;              /* the split dimension's packed rows, known on the host (for
                                      * the tile order, grouped_sm90.cuh); 0: unknown */
    int32_t promotion_k;             /* FP8 with FP32 promotion: K elements between promotions, a
                                      * multiple of the tile's K; 0: one tile (128, CUTLASS's and
                                      * DeepSeek's interval).  Only the kernel lab sets it, to
                                      * measure what the promotion's drain of the MMA pipe costs */
} gln_cutlass_grouped_t;

/* cutlass/grouped_*.cu, one per gln_cutlass_kernel_t value. */
gln_status_t gln_cutlass_run_bf16_tn(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
gln_status_t gln_cutlass_run_bf16_nn(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
gln_status_t gln_cutlass_run_bf16_nt_f32(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
gln_status_t gln_cutlass_run_e4m3_tn(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
gln_status_t gln_cutlass_run_e5m2_e4m3_tn(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
gln_status_t gln_cutlass_run_bf16_tn_large(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
gln_status_t gln_cutlass_run_bf16_nn_large(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
gln_status_t gln_cutlass_run_e4m3_tn_fast(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
gln_status_t gln_cutlass_run_e4m3_tn_fast_large(gln_context_t *ctx, const gln_cutlass_grouped_t *g,
                                                const char *call);
gln_status_t gln_cutlass_run_e4m3_wgrad(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);
gln_status_t gln_cutlass_run_e5m2_e4m3_wgrad(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call);

/* cuda_wgrad_pad.cu: for a wgrad (split_is_k) whose experts' row counts may not be multiples of
 * g->k_align (> 1), scratch copies of those experts' transposed FP8 copies with every row
 * zero-padded to the next multiple, at row offsets[i] + k_align · i of (split_rows + k_align ·
 * num) rows of g->m / g->n bytes, into g->a_pad / g->b_pad; the setup kernels point those experts
 * there.  Aligned experts are skipped on the device.  k_align <= 1: nothing (NULL pads).  Release
 * with gln_cuda_wgrad_pad_release after the GEMM is enqueued (stream-ordered). */
gln_status_t gln_cuda_wgrad_pad(gln_context_t *ctx, gln_cutlass_grouped_t *g, const char *call);
/* The k_align of a wgrad over dy's splits: 16 (a TMA stride), or 1 when the host holds the
 * splits and every one is a multiple of 16 (nothing to pad: no scratch, no pad launch; with
 * device splits the pad kernel skips the aligned experts on the device). */
int32_t gln_cuda_wgrad_k_align(const gln_grouped_tensor_t *dy);
void gln_cuda_wgrad_pad_release(gln_context_t *ctx, gln_cutlass_grouped_t *g);

/* cuda_grouped_gemm.c: the grouped GEMM through one CUTLASS launch when the arguments fit a
 * kernel (*handled = 1, and the status is the call's), else *handled = 0 and nothing ran. */
gln_status_t gln_cuda_grouped_gemm_cutlass(gln_context_t *ctx, const gln_grouped_gemm_args_t *args, int *handled);

/* ---- ops table slots ---------------------------------------------------------------------- */

/* cuda_grouped.c */
gln_status_t gln_cuda_grouped_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                       const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out);
gln_status_t gln_cuda_grouped_quantize_dbias(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                             const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                             gln_tensor_t *dbias, int accumulate);
/* The grouped_quantize_record slot (backend.h): delayed TENSOR with the history record fused into
 * the amax finalize launch; other configs quantize, then record. */
gln_status_t gln_cuda_grouped_quantize_record(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                              const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                              gln_tensor_t *dbias, int accumulate, float *history_row0,
                                              int32_t first, int32_t stride, int nan_propagate);
/* MXFP8_1D grouped quantize (cfg->mode MXFP8_1D, arguments as gln_grouped_quantize accepts them)
 * writing both scale grids straight in the swizzled GEMM layout: member i's grid at its compact
 * offset, equal to gln_mxfp8_swizzle_scales of its compact grid (padding 0). */
gln_status_t gln_cuda_grouped_quantize_mxfp8_swizzled(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                      const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out);
/* cuda_act_quant.c: the activation_forward_quantize slot (arguments already valid) */
gln_status_t gln_cuda_activation_forward_quantize(gln_context_t *ctx, gln_activation_t act, gln_dtype_t hp_dtype,
                                                  const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                                  gln_grouped_tensor_t *out);
/* cuda_quant_mxfp8.cu: the mxfp8_swizzle slot (arguments already valid) */
gln_status_t gln_cuda_mxfp8_swizzle(gln_context_t *ctx, int64_t rows, int64_t cols, int columnwise,
                                    const uint8_t *compact, uint8_t *swizzled);

/* cuda_quant.cu */
gln_status_t gln_cuda_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                               gln_tensor_t *out);
gln_status_t gln_cuda_dequantize(gln_context_t *ctx, const gln_tensor_t *in, int columnwise,
                                 gln_tensor_t *out);

/* cuda_gemm.c */
gln_status_t gln_cuda_gemm(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                           const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias,
                           int accumulate);
gln_status_t gln_cuda_grouped_gemm(gln_context_t *ctx, const gln_grouped_gemm_args_t *args);

/* cuda_reduce.cu */
gln_status_t gln_cuda_grouped_dbias(gln_context_t *ctx, const gln_grouped_tensor_t *dy,
                                    gln_tensor_t *dbias, int accumulate);
gln_status_t gln_cuda_amax(gln_context_t *ctx, const gln_tensor_t *x, int nan_propagate, float *amax);
gln_status_t gln_cuda_cast(gln_context_t *ctx, const gln_tensor_t *in, gln_tensor_t *out);

/* cuda_fp8_state.cu: the delayed-scaling state slots (one kernel each, on the stream) */
gln_status_t gln_cuda_fp8_state_gather(gln_context_t *ctx, const float *state_scale, int32_t first,
                                       int32_t stride, int32_t n, float *scale, float *amax);
gln_status_t gln_cuda_fp8_state_record(gln_context_t *ctx, float *history_row0, int32_t first,
                                       int32_t stride, int32_t n, const float *amax, int nan_propagate);
gln_status_t gln_cuda_fp8_state_update(gln_context_t *ctx, int32_t num_slots, int32_t history_len,
                                       float *amax_history, float *scale, const float *fp8_max, int margin,
                                       gln_amax_algo_t algo, const gln_delayed_update_options_t *opts);

/* ---- kernel launchers used across files --------------------------------------------------- */

/* cuda_quant_members.cu: TENSOR (current / delayed) or MXFP8_1D quantization of `num` members packed
 * in `in` / `out` in a fixed number of launches (no host synchronization, graph-capturable).
 * plan (gln_cuda_plan_make for cfg->mode) gives the members' rows and scale offsets; plan NULL:
 * one member, the whole tensor (gln_quantize). */
gln_status_t gln_cuda_quantize_members(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                                       gln_tensor_t *out, int32_t num, const gln_cuda_plan_t *plan,
                                       const char *call);
/* The same with the scale grids in the swizzled GEMM layout (MXFP8_1D; other modes as above). */
gln_status_t gln_cuda_quantize_members_swizzled(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                const gln_tensor_t *in, gln_tensor_t *out, int32_t num,
                                                const gln_cuda_plan_t *plan, const char *call);
/* The same with the members' bias gradients summed from the same read of `in`, in the order of
 * quant/dbias_tiled.h (plan required); cfg NULL (out NULL): the sums alone. */
gln_status_t gln_cuda_quantize_members_dbias(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                             const gln_tensor_t *in, gln_tensor_t *out, int32_t num,
                                             const gln_cuda_plan_t *plan, gln_tensor_t *dbias, int accumulate,
                                             const char *call);
/* Where a delayed-scaling quantize records its per-member amaxes (history NULL: nowhere):
 * history[first + i·stride] = gln_f32_max_amax(that, amax of member i, nan_propagate). */
typedef struct gln_cuda_amax_record {
    float *history;
    int32_t first, stride;
    int nan_propagate;
} gln_cuda_amax_record_t;
/* gln_cuda_quantize_members(_dbias when dbias) whose delayed-scaling finalize kernel also
 * records into rec (cfg TENSOR delayed; otherwise rec is ignored). */
gln_status_t gln_cuda_quantize_members_record(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                              const gln_tensor_t *in, gln_tensor_t *out, int32_t num,
                                              const gln_cuda_plan_t *plan, gln_tensor_t *dbias, int accumulate,
                                              const gln_cuda_amax_record_t *rec, const char *call);
/* The kernel the last gln_cuda_quantize_members* call on this thread ran its quantize pass on:
 * "tq_tma_kernel" or "tq_general_kernel" (TENSOR), "mxq_tma_kernel" or "mxq_general_kernel"
 * (MXFP8_1D); NULL before the first.  For the tests that prove the dispatch. */
const char *gln_cuda_quant_last_kernel(void);
/* cuda_quant_members.cu: compare num device-resident splits on the device (one small kernel, no
 * host wait); the first member where out_splits[i] != in_splits[i] sets
 * GLN_CUDA_ASYNC_SPLITS_MISMATCH in the async error word. */
gln_status_t gln_cuda_check_out_splits(gln_context_t *ctx, int32_t num, const int64_t *in_splits,
                                       const int64_t *out_splits, const char *call);
/* cuda_block.cu: BLOCK_1D / BLOCK_2D quantization of one tensor (cfg->mode one of those). */
gln_status_t gln_cuda_quantize_block(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                                     gln_tensor_t *out, const char *call);
/* cuda_block.cu: the same for every member of a grouped tensor in one launch, member layout from
 * `plan` (gln_cuda_plan_make for cfg->mode): no host synchronization, graph-capturable. */
gln_status_t gln_cuda_grouped_quantize_block(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                             const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out,
                                             const gln_cuda_plan_t *plan, const char *call);
/* Activation on load (cuda_act.cuh), for gln_activation_forward_quantize: the two launchers above
 * (gln_cuda_quantize_members with a plan; gln_cuda_grouped_quantize_block) quantizing the bf16
 * output of activation `act` without writing it.  `in` describes that output — dtype bf16,
 * [rows, H], the plan's members — while in->data points to the activation's bf16 input, ld
 * elements per row (2H for SwiGLU, H for GELU).  The caller guarantees H % 8 == 0, a 16-byte
 * aligned input and (TENSOR) cfg->amax_nan_propagate = 0: the per-tensor NaN rule re-reads its
 * input, which here is not the quantized tensor.  The bytes equal those of the launcher run on
 * the activation kernel's bf16 output. */
gln_status_t gln_cuda_quantize_members_act(gln_context_t *ctx, const gln_quant_config_t *cfg, gln_activation_t act,
                                           int64_t ld, const gln_tensor_t *in, gln_tensor_t *out, int32_t num,
                                           const gln_cuda_plan_t *plan, const char *call);
gln_status_t gln_cuda_grouped_quantize_block_act(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                 gln_activation_t act, int64_t ld, const gln_grouped_tensor_t *in,
                                                 gln_grouped_tensor_t *out, const gln_cuda_plan_t *plan,
                                                 const char *call);
/* cuda_block.cu, for the tests: the block kernels' fast conversions against numerics.h over every
 * input: counts[0] / counts[1] = FP32 -> E4M3 / E5M2 encodings (all 2^32 values) that differ from
 * gln_f32_to_e4m3_bits / gln_f32_to_e5m2_bits, counts[2] = fp16 -> FP32 widenings (all 2^16) that
 * differ from gln_fp16_bits_to_f32 (NaN: in sign or NaN-ness only); first[k] = the smallest bad
 * input.  Synchronizes the stream. */
gln_status_t gln_cuda_block_selfcheck(gln_context_t *ctx, unsigned long long counts[3], unsigned int first[3],
                                      const char *call);
/* cuda_quant.cu: the raw FP8 values of one copy (decode scale ignored) widened exactly into the
 * high-precision `out` [rows, cols] (transposed copies are transposed back). */
gln_status_t gln_cuda_widen_raw(gln_context_t *ctx, const gln_tensor_t *in, int columnwise, gln_tensor_t *out,
                                const char *call);
/* cuda_grouped_dequant.cu: copy `columnwise` of every member of the MXFP8_1D / BLOCK_1D / BLOCK_2D
 * grouped tensor g, dequantized (exactly, for power-of-two scales) into the bf16 buffer `out`
 * [g->packed.rows, cols] in the normal orientation at the members' rows (rows past them are not
 * written); members' rows and scale offsets from `plan` (gln_cuda_plan_make for g's mode).  One
 * launch, grid from host-known sizes: no host synchronization. */
gln_status_t gln_cuda_grouped_dequantize_bf16(gln_context_t *ctx, const gln_grouped_tensor_t *g, int columnwise,
                                              const gln_cuda_plan_t *plan, void *out, const char *call);
/* ... and of `num` tensors of one shape, mode and dtype (the experts' weights): tensor i into
 * out + i·rows·cols elements.  One launch per 64 tensors. */
gln_status_t gln_cuda_dequantize_list_bf16(gln_context_t *ctx, const gln_tensor_t *list, int32_t num, int columnwise,
                                           void *out, const char *call);

/* Where a block-scaled GEMM operand's decode scales live: scale of logical element (r, c) is
 * scales[index(mode, columnwise, r, c, gc)], the reduction index being r when k_is_row. */
typedef struct gln_cuda_scale_ref {
    const float *scales;
    int mode, columnwise, k_is_row;
    int64_t gc;
} gln_cuda_scale_ref_t;
/* cuda_gemm_kernels.cu: acc[m, n] += partial[m, n] · scale_a(col, k0) · scale_b(row, k0). */
gln_status_t gln_cuda_gemm_block_scale(gln_context_t *ctx, float *acc, const float *partial, int64_t m, int64_t n,
                                       int64_t k0, const gln_cuda_scale_ref_t *a, const gln_cuda_scale_ref_t *b,
                                       const char *call);

/* cuda_reduce.cu: max |x| of `count` elements into the device float *amax; with accumulate,
 * *amax = max(*amax, max|x|).  NaN elements are ignored, exactly like the CPU (TE's fmaxf rule);
 * with nan_propagate a NaN wins as on the CPU: |x[i]| of the lowest NaN index i, and with
 * accumulate an old NaN *amax is kept (gln_f32_max_nan(*amax, ·)). */
gln_status_t gln_cuda_amax_launch(gln_context_t *ctx, const void *x, gln_dtype_t dtype, size_t count,
                                  float *amax, int accumulate, int nan_propagate, const char *call);

/* cuda_gemm_kernels.cu: FP32 accumulator prefill acc[m,n] = (accumulate ? D : 0) + bias[n]
 * (bias may be NULL), and the final rounding D = acc. */
gln_status_t gln_cuda_gemm_prefill(gln_context_t *ctx, float *acc, const gln_tensor_t *D,
                                   const gln_tensor_t *bias, int accumulate, int64_t m, int64_t n,
                                   const char *call);
gln_status_t gln_cuda_narrow(gln_context_t *ctx, const float *acc, gln_tensor_t *D, size_t count,
                             const char *call);

static inline gln_cuda_state_t *gln_cuda_state(gln_context_t *ctx) {
    return (gln_cuda_state_t *)ctx->backend_state;
}

#endif

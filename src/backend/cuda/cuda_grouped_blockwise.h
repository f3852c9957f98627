/* FP8 block scaling (the DeepSeek recipe: 1×128 activation / gradient scales, 128×128 weight
 * scales, FP32 or power-of-two) as real CUTLASS block-scaled grouped GEMMs on Hopper: the
 * tensor cores multiply raw E4M3 values and the mainloop multiplies each 128-wide K block's FP32
 * partial sums by the two operands' decode scales before adding them up (for power-of-two
 * scales this is the same value as dequantizing first).
 *
 *   cuda_grouped_blockwise.c          which argument sets fit, and their translation (host)
 *   cuda_grouped_blockwise_scales.cu  the scale repacks into CUTLASS's layouts (device, no host sync)
 *   cutlass/grouped_blockwise_*.cu    the two instantiations (cutlass/grouped_blockwise_sm90.cuh)
 *
 * Scale layouts.  CUTLASS's Hopper blockwise mainloop derives each expert's scale layout from its
 * problem shape alone (Sm90BlockwiseScaleConfig, MN-major): SFA[kb · M_i + m] and
 * SFB[kb · ⌈N / gN⌉ + n / gN] (gN = 128 for weights, 1 for wgrad's token-blocked copies).  Ours
 * (src/tensor/scale_layout.h) are:
 *   x / dy rowwise 1×128 (fprop, dgrad A): [kb · round_up(m_i, 4) + r] per member — CUTLASS's
 *       layout when m_i is a multiple of 4; other experts' scales are repacked on the device;
 *   W 128×128, rowwise for fprop / the transposed copy's for dgrad: [(n / 128) · round_up(nkb, 4)
 *       + kb] — K-major, always repacked (num · nkb · nnb floats, tiny);
 *   dy / x columnwise 1×128 along the tokens (wgrad A and B): [kb · round_up(cols, 4) + c] —
 *       CUTLASS's layout when cols is a multiple of 4 (required: 16).
 */
#ifndef GLN_BACKEND_CUDA_GROUPED_BLOCKWISE_H
#define GLN_BACKEND_CUDA_GROUPED_BLOCKWISE_H

#include "backend/cuda/cuda_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The block size of the recipe along K (and of the weights along N). */
#define GLN_BLOCKWISE_K 128

/* One block-scaled grouped GEMM: g as for the per-tensor kernels (its alpha fields unused;
 * g.b_scale_list carries the weights' scale pointers for TN / NN), plus the scales. */
typedef struct gln_cutlass_blockwise {
    gln_cutlass_grouped_t g;
    const float *a_sf;         /* device: A's grouped scales (x / dy rowwise; NT: dy columnwise) */
    const int64_t *a_sf_start; /* device [num + 1]: member i's scales start (the plan's srow / scol) */
    const float *b_sf;         /* NT: device, x's grouped columnwise scales */
    const int64_t *b_sf_start; /* NT: device [num + 1] */
    int64_t packed_rows;       /* TN / NN: rows of the grouped operand (the SFA repack's size) */
} gln_cutlass_blockwise_t;

/* cutlass/grouped_blockwise_{tn,wgrad}.cu: E4M3 × E4M3, both K-major.
 *   tn:    D [M_i, N] bf16 = A · Bᵀ (+ bias_i) — fprop (x · Wᵀ) and dgrad (dy · W via W's copy)
 *   wgrad: D [M, N] fp32 (+)= A_iᵀ · B_i over the expert's tokens; experts whose row count is
 *          not a multiple of 16 read zero-padded copies (g.k_align = 16, g.a_pad: cuda_wgrad_pad.cu) */
gln_status_t gln_cutlass_run_blockwise_tn(gln_context_t *ctx, const gln_cutlass_blockwise_t *bw, const char *call);
gln_status_t gln_cutlass_run_blockwise_tn_large(gln_context_t *ctx, const gln_cutlass_blockwise_t *bw,
                                                const char *call); /* 2×1 clusters, large experts */
gln_status_t gln_cutlass_run_blockwise_wgrad(gln_context_t *ctx, const gln_cutlass_blockwise_t *bw,
                                             const char *call);

/* cuda_grouped_blockwise.c: the kernel lab's hook (bench/lab/grouped_tiles.c --recipe block): when
 * set, it is offered every block-scaled call first and runs its own instantiation, or returns
 * GLN_STATUS_NOT_SUPPORTED to leave the call to the kernels above.  NULL outside the lab. */
extern gln_status_t (*gln_cutlass_lab_blockwise)(gln_context_t *ctx, const gln_cutlass_blockwise_t *bw,
                                                 const char *call);

/* cuda_grouped_blockwise_scales.cu: repack the scales of one chunk of experts into CUTLASS's
 * layouts (see above).  sfa: [packed_rows · nkb] floats, expert i's at offsets[i] · nkb, written
 * only for experts with m_i % 4 != 0; sfb: [num · nkb · nnb], expert i's at i · nkb · nnb. */
gln_status_t gln_cuda_blockwise_repack(gln_context_t *ctx, const gln_cutlass_blockwise_t *bw, int32_t first,
                                       int32_t count, float *sfa, float *sfb, const char *call);

/* cuda_grouped_blockwise.c: the grouped GEMM on block-scaled E4M3 operands through the kernels
 * above when the arguments fit (*handled = 1 and the call's status), else *handled = 0. */
gln_status_t gln_cuda_grouped_gemm_blockwise(gln_context_t *ctx, const gln_grouped_gemm_args_t *args, int *handled);

/* cuda_grouped_blockwise.c: one GEMM of the split path (gln_gemm's layout, A, B, D) through the
 * same kernels as a group of one, where they fit (*handled = 1), else *handled = 0. */
gln_status_t gln_cuda_gemm_blockwise_single(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                                            const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias,
                                            int accumulate, int *handled);

#ifdef __cplusplus
}
#endif

#endif

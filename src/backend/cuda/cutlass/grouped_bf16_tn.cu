/* Grouped fprop, bf16: y_i [M_i, N] = x_i [M_i, K] · W_i [N, K]ᵀ, bf16 output, plus
 * the per-expert bias added in the epilogue (GLN_CUTLASS_BF16_TN). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

using GlnGrouped_bf16_tn =
    gln_cutlass::Grouped<cutlass::bfloat16_t, cutlass::layout::RowMajor, cutlass::bfloat16_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t,
                         cute::Shape<cute::_128, cute::_128, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                         cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                         cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative, true>;

extern "C" gln_status_t gln_cutlass_run_bf16_tn(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call) {
    return gln_cutlass::run<GlnGrouped_bf16_tn>(ctx, g, call);
}

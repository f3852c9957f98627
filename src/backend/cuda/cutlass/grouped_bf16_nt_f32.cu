/* Grouped wgrad, bf16: dW_i [M, N] (+)= dy_i [K_i, M]ᵀ · x_i [K_i, N], FP32 output: the FP32 main_grad
 * accumulated in the epilogue (beta = 1), no separate add pass (GLN_CUTLASS_BF16_NT_F32). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

using GlnGrouped_bf16_nt_f32 =
    gln_cutlass::Grouped<cutlass::bfloat16_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t, cutlass::layout::RowMajor, float,
                         cute::Shape<cute::_128, cute::_128, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                         cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                         cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;

extern "C" gln_status_t gln_cutlass_run_bf16_nt_f32(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call) {
    return gln_cutlass::run<GlnGrouped_bf16_nt_f32>(ctx, g, call);
}

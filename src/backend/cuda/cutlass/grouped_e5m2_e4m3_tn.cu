/* Grouped per-tensor FP8 dgrad under HYBRID: E5M2 gradient × E4M3 weight (through its transposed
 * copy), bf16 output, FP32 promotion as in grouped_e4m3_tn.cu (GLN_CUTLASS_E5M2_E4M3_TN). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

using GlnGrouped_e5m2_e4m3_tn =
    gln_cutlass::Grouped<cutlass::float_e5m2_t, cutlass::layout::RowMajor, cutlass::float_e4m3_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t,
                         cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                         cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                         cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;

extern "C" gln_status_t gln_cutlass_run_e5m2_e4m3_tn(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *call) {
    return gln_cutlass::run<GlnGrouped_e5m2_e4m3_tn>(ctx, g, call);
}

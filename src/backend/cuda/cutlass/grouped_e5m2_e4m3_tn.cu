/* Grouped per-tensor FP8 dgrad under HYBRID: E5M2 gradient × E4M3 weight (through its transposed
 * copy), bf16 output, FP32 promotion as in grouped_e4m3_tn.cu (GLN_CUTLASS_E5M2_E4M3_TN). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(e5m2_e4m3_tn,
                    cutlass::float_e5m2_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

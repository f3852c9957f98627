/* Grouped per-tensor FP8 wgrad of large experts under HYBRID: E5M2 gradient × E4M3 input,
 * otherwise as grouped_e4m3_wgrad.cu (GLN_CUTLASS_E5M2_E4M3_WGRAD, large regime). */
#include "backend/cuda/cutlass/grouped_fp8_overlap.cuh"

GLN_CUTLASS_GROUPED_OVERLAP(e5m2_e4m3_wgrad,
                            cutlass::float_e5m2_t, cutlass::layout::RowMajor,
                            cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                            float,
                            cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                            cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                            cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

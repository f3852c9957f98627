/* Grouped per-tensor FP8 fprop with fast accumulation, large experts: 256×128×128 tiles, 1×2
 * clusters; otherwise as grouped_e4m3_tn_fast.cu;
 * the epilogue adds the per-expert bias (GLN_CUTLASS_E4M3_TN for TN, large tiles). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(e4m3_tn_fast_large,
                    cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_256, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_2, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8FastAccum,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
                    true)

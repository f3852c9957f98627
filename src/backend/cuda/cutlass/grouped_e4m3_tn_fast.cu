/* Grouped per-tensor FP8 fprop, E4M3 × E4M3, with the tensor cores' fast accumulation (no FP32
 * promotion inside the K loop): TransformerEngine's default for the forward GEMM
 * (use_split_accumulator off for fprop, on for dgrad and wgrad).  128×128×128 tiles;
 * the epilogue adds the per-expert bias (GLN_CUTLASS_E4M3_TN for TN, small tiles). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(e4m3_tn_fast,
                    cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8FastAccum,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
                    true)

/* Grouped per-tensor FP8 fprop with fast accumulation, many small experts: pingpong
 * 128×128×128 tiles, no cluster (see grouped_bf16_tn_small.cu); otherwise as
 * grouped_e4m3_tn_fast.cu, bias epilogue included (GLN_CUTLASS_E4M3_TN for TN, small-expert
 * regime). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(e4m3_tn_fast_small,
                    cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8FastAccum,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong,
                    true)

/* Grouped per-tensor FP8 with FP32 promotion (the dgrad, E4M3 × E4M3), many small experts:
 * pingpong with 64×128×128 tiles — a pingpong warpgroup holds its whole tile, and promotion
 * doubles the accumulator registers (the tensor-core accumulator plus the FP32 sum), which a
 * 128-row tile would spill; no cluster.  Otherwise as grouped_e4m3_tn.cu (GLN_CUTLASS_E4M3_TN
 * without fast accumulation, small-expert regime). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(e4m3_tn_small,
                    cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_64, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong)

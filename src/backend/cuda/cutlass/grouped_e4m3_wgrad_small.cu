/* Grouped per-tensor FP8 wgrad (E4M3 × E4M3) into the FP32 main_grad, many small experts:
 * pingpong 64×128×128 tiles (promoted accumulation, see grouped_e4m3_tn_small.cu; the main loop
 * is one or two K blocks, hidden under the other warpgroup's main_grad epilogue), no cluster.
 * Otherwise as grouped_e4m3_wgrad.cu (GLN_CUTLASS_E4M3_WGRAD, small-expert regime). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(e4m3_wgrad_small,
                    cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    float,
                    cute::Shape<cute::_64, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong)

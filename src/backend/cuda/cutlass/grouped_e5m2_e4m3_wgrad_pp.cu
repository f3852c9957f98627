/* Grouped per-tensor FP8 wgrad under HYBRID (E5M2 gradient × E4M3 input) into the FP32
 * main_grad, for experts below the large regime: the pingpong kernel of grouped_e4m3_wgrad_pp.cu
 * (why, there).  Kernel lab (grouped_tiles --recipe hybrid --stage wgrad), H200, 2026-12-04,
 * against the cooperative 128 × 128 kernel: DeepSeek-like 1.176 ms against 1.231, Qwen3-like
 * 0.508 against 0.516–0.531; Mixtral-like 5.96 against 4.60 (the large regime keeps the
 * cooperative kernel). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(e5m2_e4m3_wgrad_pp,
                    cutlass::float_e5m2_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    float,
                    cute::Shape<cute::_64, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong, false, cutlass::bfloat16_t,
                    cute::Shape<cute::_64, cute::_64>)

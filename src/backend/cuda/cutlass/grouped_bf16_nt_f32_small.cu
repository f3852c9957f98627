/* Grouped wgrad into the FP32 main_grad, bf16, many small experts (each expert's K = its row
 * count, ≤ 256: one or a few K blocks per tile, so the kernel is bound by reading and writing
 * main_grad in the epilogue): pingpong 128×128×64 tiles, so one warpgroup's short main loop runs
 * under the other's epilogue instead of between two epilogues; no cluster.  Otherwise as
 * grouped_bf16_nt_f32.cu (GLN_CUTLASS_BF16_NT_F32, small-expert regime). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(bf16_nt_f32_small,
                    cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    float,
                    cute::Shape<cute::_128, cute::_128, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong)

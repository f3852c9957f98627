/* Grouped per-tensor FP8 wgrad (E4M3 × E4M3, from the transposed copies) into bf16 weight
 * gradients (no fused FP32 main_grad), beta = 1 when accumulating; 128×128×128 cooperative
 * tiles for every regime; experts whose row count is not a multiple of 16 are read from
 * zero-padded copies (cuda_wgrad_pad.cu) as with the FP32 output (GLN_CUTLASS_E4M3_WGRAD, bf16 D). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(e4m3_wgrad_bf16,
                    cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

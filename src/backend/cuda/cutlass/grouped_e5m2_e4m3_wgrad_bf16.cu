/* Grouped per-tensor FP8 wgrad under HYBRID (E5M2 gradient × E4M3 input, from the transposed
 * copies) into bf16 weight gradients (no fused FP32 main_grad): TE's default Float8CurrentScaling
 * and DelayedScaling format, so that this case stays on the device (graph-capturable) instead of
 * the per-expert loop.  Otherwise as grouped_e4m3_wgrad_bf16.cu (GLN_CUTLASS_E5M2_E4M3_WGRAD,
 * bf16 D; unaligned experts read zero-padded copies, cuda_wgrad_pad.cu). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(e5m2_e4m3_wgrad_bf16,
                    cutlass::float_e5m2_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

/* Grouped wgrad, bf16, into bf16 weight gradients (no fused FP32 main_grad: the layer's
 * parameter-dtype gradient buffers, accumulated with beta = 1 — the sum formed in FP32 and
 * rounded once); 128×128×64 cooperative tiles for every regime (GLN_CUTLASS_BF16_NT_F32's
 * layout, bf16 D). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(bf16_nt_bf16,
                    cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_128, cute::_128, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

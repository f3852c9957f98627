/* Grouped wgrad, bf16: dW_i [M, N] (+)= dy_i [K_i, M]ᵀ · x_i [K_i, N], FP32 output: the FP32 main_grad
 * accumulated in the epilogue (beta = 1), no separate add pass (GLN_CUTLASS_BF16_NT_F32). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(bf16_nt_f32,
                    cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    float,
                    cute::Shape<cute::_128, cute::_128, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

/* Grouped per-tensor FP8 wgrad, E4M3 gradient × E4M3 input: dW_i [M, N] (+)= alpha_i · dy_iᵀ · x_i
 * from the two transposed (columnwise) copies, both K-major along the expert's rows (FP8 on Hopper
 * needs K-major operands), FP32 output into main_grad (beta = 1 when accumulating), FP32 promotion
 * in the mainloop as TE's wgrad GEMM (GLN_CUTLASS_E4M3_WGRAD).  Experts whose row count is not a
 * multiple of 16 cannot be read through TMA (a 16-byte stride): cuda_fp8_wgrad.cu does those. */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(e4m3_wgrad,
                    cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    float,
                    cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

/* Grouped per-tensor FP8 wgrad of large experts, E4M3 gradient × E4M3 input: dW_i [M, N] (+)=
 * alpha_i · dy_iᵀ · x_i from the two transposed (columnwise) copies, both K-major along the
 * expert's rows (FP8 on Hopper needs K-major operands), FP32 output into main_grad (beta = 1 when
 * accumulating), FP32 promotion after every 128-wide K tile as TE's wgrad GEMM, overlapped with
 * the next tile's MMAs (grouped_fp8_overlap.cuh; GLN_CUTLASS_E4M3_WGRAD, large regime).  Experts
 * whose row count is not a multiple of 16 cannot be read in place through TMA (a 16-byte
 * stride): they are read from zero-padded copies (cuda_wgrad_pad.cu). */
#include "backend/cuda/cutlass/grouped_fp8_overlap.cuh"

GLN_CUTLASS_GROUPED_OVERLAP(e4m3_wgrad,
                            cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                            cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                            float,
                            cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                            cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                            cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

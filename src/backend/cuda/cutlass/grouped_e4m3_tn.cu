/* Grouped per-tensor FP8, E4M3 × E4M3, both operands K-major, bf16 output: fprop (x · Wᵀ) and dgrad
 * (dy · W through W's transposed copy); alpha_i = the product of the two decode scales.  The FP8
 * mainloop promotes the tensor-core accumulator to FP32 every few K blocks (not the fast-accumulate
 * schedule) (GLN_CUTLASS_E4M3_TN). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(e4m3_tn,
                    cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

/* Grouped fprop, bf16, large experts: 256×128×64 tiles, 1×2 clusters (the A tile multicast to
 * the two CTAs of a cluster); otherwise as grouped_bf16_tn.cu;
 * the epilogue adds the per-expert bias (GLN_CUTLASS_BF16_TN, large tiles). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(bf16_tn_large,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_256, cute::_128, cute::_64>, cute::Shape<cute::_1, cute::_2, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
                    true)

/* Grouped dgrad, bf16, many small experts: pingpong 128×128×64 tiles, no cluster, as
 * grouped_bf16_tn_small.cu explains; otherwise as grouped_bf16_nn.cu (GLN_CUTLASS_BF16_NN,
 * small-expert regime). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(bf16_nn_small,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_128, cute::_128, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong)

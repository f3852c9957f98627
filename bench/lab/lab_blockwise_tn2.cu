/* One more block-scaled fprop / dgrad lab candidate (see lab_blockwise_tn.cu), in a file of its
 * own so that the lab's CUTLASS files compile in parallel: pingpong 64×128×128 with a 1×2 cluster
 * (each x / dy tile multicast to the two CTAs of its row; the library's pingpong is 1×1). */
#include "backend/cuda/cutlass/grouped_blockwise_sm90.cuh"

GLN_CUTLASS_BLOCKWISE(lab_bw_tn_pp1x2, cutlass::bfloat16_t, 128, cute::Shape<cute::_64, cute::_128, cute::_128>,
                      cute::Shape<cute::_1, cute::_2, cute::_1>, true,
                      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise,
                      cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong)

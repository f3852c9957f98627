/* More block-scaled fprop / dgrad lab candidates (see lab_blockwise_tn.cu): 128×256 cooperative
 * tiles and pingpong 64×128 with a 1×2 cluster.  A file of their own so that the two halves of
 * the lab compile in parallel. */
#include "backend/cuda/cutlass/grouped_blockwise_sm90.cuh"

GLN_CUTLASS_BLOCKWISE(lab_bw_tn_n256, cutlass::bfloat16_t, 128, cute::Shape<cute::_128, cute::_256, cute::_128>,
                      cute::Shape<cute::_1, cute::_1, cute::_1>, true)

GLN_CUTLASS_BLOCKWISE(lab_bw_tn_pp1x2, cutlass::bfloat16_t, 128, cute::Shape<cute::_64, cute::_128, cute::_128>,
                      cute::Shape<cute::_1, cute::_2, cute::_1>, true,
                      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise,
                      cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong)

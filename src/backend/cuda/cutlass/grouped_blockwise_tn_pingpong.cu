/* The block-scaled fprop / dgrad of grouped_blockwise_tn.cu on the pingpong schedule: 64×128×128
 * tiles, each consumer warpgroup on its own tile, so one's epilogue and per-block scale promotion
 * overlap the other's MMAs (DeepGEMM's arrangement).  A kernel-lab variant for now, chosen with
 * GLN_CUTLASS_BLOCKWISE=pingpong (cuda_grouped_blockwise.c) until measurements promote or drop it. */
#include "backend/cuda/cutlass/grouped_blockwise_sm90.cuh"

GLN_CUTLASS_BLOCKWISE(blockwise_tn_pingpong, cutlass::bfloat16_t, 128, cute::Shape<cute::_64, cute::_128, cute::_128>,
                      cute::Shape<cute::_1, cute::_1, cute::_1>, true,
                      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise,
                      cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong)

/* A block-scaled fprop / dgrad lab candidate (see lab_blockwise_tn.cu): the library's kernel on the
 * pingpong schedule, 64×128×128 tiles, each consumer warpgroup on its own tile, so one's epilogue
 * and per-block scale promotion overlap the other's MMAs (DeepGEMM's arrangement).  It lost to the
 * cooperative kernel (bench/RESULTS.md), so it lives here, not in src/. */
#include "backend/cuda/cutlass/grouped_blockwise_sm90.cuh"

GLN_CUTLASS_BLOCKWISE(lab_bw_tn_pp, cutlass::bfloat16_t, 128, cute::Shape<cute::_64, cute::_128, cute::_128>,
                      cute::Shape<cute::_1, cute::_1, cute::_1>, true,
                      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise,
                      cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong)

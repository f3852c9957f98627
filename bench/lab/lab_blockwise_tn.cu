/* Kernel-lab candidates for the block-scaled FP8 fprop / dgrad (TN: E4M3 x or dy 1×128 × E4M3
 * W 128×128 -> bf16, bias epilogue), built only with -DGLN_BUILD_LAB=ON and timed by
 * `grouped_tiles --recipe block` (lab_block.c) next to the library's cooperative 128×128 1×1 and
 * pingpong 64×128 kernels (src/backend/cuda/cutlass/grouped_blockwise_*.cu):
 *   c2x1   128×128×128 cooperative, clusters of 2 CTAs along M: the pair works on the same N
 *          column, so each W tile is fetched once and multicast to both (TMA multicast);
 *   c1x2   the same along N: each x / dy tile is multicast to the two CTAs of its row;
 *   pp1x2  pingpong 64×128×128 with x multicast across a 1×2 cluster (lab_blockwise_tn2.cu).
 * What CUTLASS 4.2's blockwise mainloop rejects at compile time: see lab_block.c (128×256 among
 * them: two weight scales per tile along N pass the collective's static_asserts but not the
 * kernel body's promotion, "Accumulator and scaleB must have same shape"). */
#include "backend/cuda/cutlass/grouped_blockwise_sm90.cuh"

GLN_CUTLASS_BLOCKWISE(lab_bw_tn_c2x1, cutlass::bfloat16_t, 128, cute::Shape<cute::_128, cute::_128, cute::_128>,
                      cute::Shape<cute::_2, cute::_1, cute::_1>, true)

GLN_CUTLASS_BLOCKWISE(lab_bw_tn_c1x2, cutlass::bfloat16_t, 128, cute::Shape<cute::_128, cute::_128, cute::_128>,
                      cute::Shape<cute::_1, cute::_2, cute::_1>, true)

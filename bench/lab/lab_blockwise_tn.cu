/* Kernel-lab candidates for the block-scaled FP8 fprop / dgrad (TN: E4M3 x or dy 1×128 × E4M3
 * W 128×128 -> bf16, bias epilogue), built only with -DGLN_BUILD_LAB=ON and timed by
 * `grouped_tiles --recipe block` (lab_block.c) next to the library's cooperative 128×128 1×1 and
 * pingpong 64×128 kernels (src/backend/cuda/cutlass/grouped_blockwise_*.cu):
 *   c2x1   128×128×128 cooperative, clusters of 2 CTAs along M: the pair works on the same N
 *          column, so each W tile is fetched once and multicast to both (TMA multicast);
 *   c1x2   the same along N: each x / dy tile is multicast to the two CTAs of its row;
 *   n256   128×256×128 cooperative, no cluster: half the x / dy re-reads, two weight scales per
 *          tile along N (SfN = 128 divides 256), but 128 + 128 FP32 registers a thread for the
 *          accumulator and its promotion copy (ptxas's spill report tells);
 *   pp1x2  pingpong 64×128×128 with x multicast across a 1×2 cluster.
 * What CUTLASS 4.2's blockwise mainloop rejects at compile time (probed, see lab_block.c). */
#include "backend/cuda/cutlass/grouped_blockwise_sm90.cuh"

GLN_CUTLASS_BLOCKWISE(lab_bw_tn_c2x1, cutlass::bfloat16_t, 128, cute::Shape<cute::_128, cute::_128, cute::_128>,
                      cute::Shape<cute::_2, cute::_1, cute::_1>, true)

GLN_CUTLASS_BLOCKWISE(lab_bw_tn_c1x2, cutlass::bfloat16_t, 128, cute::Shape<cute::_128, cute::_128, cute::_128>,
                      cute::Shape<cute::_1, cute::_2, cute::_1>, true)

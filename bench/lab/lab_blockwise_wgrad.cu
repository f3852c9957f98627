/* Kernel-lab candidates for the block-scaled FP8 wgrad (NT: dy and x columnwise, 1×128 scales
 * along the tokens, SfN = 1 -> FP32 main_grad), built only with -DGLN_BUILD_LAB=ON and timed by
 * `grouped_tiles --recipe block --stage wgrad` next to the library's 128×128 1×1:
 *   c2x1   clusters of 2 CTAs along M (dW's rows, dy's columns): x's tile multicast to both;
 *   c1x2   along N: dy's tile multicast to both;
 *   n256   128×256×128 cooperative: half the dy re-reads, the FP32 epilogue twice as wide; ptxas
 *          spills it (1676 bytes of spill stores a thread with nvcc 13: the accumulator and its
 *          per-block copy are 2 × 128 floats), 3 pipeline stages — expected to lose, kept as the
 *          measured evidence. */
#include "backend/cuda/cutlass/grouped_blockwise_sm90.cuh"

GLN_CUTLASS_BLOCKWISE(lab_bw_wgrad_c2x1, float, 1, cute::Shape<cute::_128, cute::_128, cute::_128>,
                      cute::Shape<cute::_2, cute::_1, cute::_1>, false)

GLN_CUTLASS_BLOCKWISE(lab_bw_wgrad_c1x2, float, 1, cute::Shape<cute::_128, cute::_128, cute::_128>,
                      cute::Shape<cute::_1, cute::_2, cute::_1>, false)

GLN_CUTLASS_BLOCKWISE(lab_bw_wgrad_n256, float, 1, cute::Shape<cute::_128, cute::_256, cute::_128>,
                      cute::Shape<cute::_1, cute::_1, cute::_1>, false)

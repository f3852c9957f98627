/* Kernel-lab candidates for the block-scaled FP8 fprop / dgrad (see lab_blockwise_tn.cu) on the
 * overlapped main loop (lab_blockwise_overlap.cuh): each K block's
 * scaled promotion runs while the next block's MMAs are in flight.
 *   ov      cooperative 128×128×128, 1×1 clusters (the library's small / medium kernel's tile);
 *   ov2x1   the same on 2×1 clusters (the library's large-expert kernel's tile). */
#include "lab_blockwise_overlap.cuh"

GLN_CUTLASS_BLOCKWISE_OVERLAP(lab_bw_tn_ov, cutlass::bfloat16_t, 128, cute::Shape<cute::_128, cute::_128, cute::_128>,
                              cute::Shape<cute::_1, cute::_1, cute::_1>, true)

GLN_CUTLASS_BLOCKWISE_OVERLAP(lab_bw_tn_ov2x1, cutlass::bfloat16_t, 128,
                              cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_2, cute::_1, cute::_1>,
                              true)

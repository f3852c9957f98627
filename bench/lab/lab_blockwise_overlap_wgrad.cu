/* Kernel-lab candidate for the block-scaled FP8 wgrad (see lab_blockwise_wgrad.cu) on the
 * overlapped main loop (lab_blockwise_overlap.cuh): cooperative
 * 128×128×128, 1×1 clusters, FP32 output (main_grad), per-row × per-column scales. */
#include "lab_blockwise_overlap.cuh"

GLN_CUTLASS_BLOCKWISE_OVERLAP(lab_bw_wgrad_ov, float, 1, cute::Shape<cute::_128, cute::_128, cute::_128>,
                              cute::Shape<cute::_1, cute::_1, cute::_1>, false)

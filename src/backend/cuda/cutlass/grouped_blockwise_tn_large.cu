/* Grouped FP8 block scaling, fprop / dgrad, for large experts (avg >= GLN_CUTLASS_LARGE_ROWS rows
 * per expert): the cooperative 128×128×128 kernel of grouped_blockwise_tn.cu on 2×1 clusters —
 * the two CTAs of a cluster take neighbouring M tiles of one expert and share each weight tile
 * through TMA multicast, halving the weight traffic from L2.  Promoted from the kernel lab
 * (bench/lab/lab_blockwise_tn.cu): on the H200, DeepGEMM's shape (8 × 4096 rows, K 7168,
 * N 4096) fprop 1104.6 TFLOP/s against 1038.6 for 1×1 clusters, 1007.4 for 1×2 (bench/RESULTS.md,
 * 2026-12-03, runs at 9418889).  Small experts (one or two M tiles) would leave a cluster's second
 * CTA idle, so they keep the 1×1 kernel. */
#include "backend/cuda/cutlass/grouped_blockwise_sm90.cuh"

GLN_CUTLASS_BLOCKWISE(blockwise_tn_large, cutlass::bfloat16_t, 128, cute::Shape<cute::_128, cute::_128, cute::_128>,
                      cute::Shape<cute::_2, cute::_1, cute::_1>, true)

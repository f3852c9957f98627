/* Kernel-lab candidate for the per-tensor FP8 dgrad (dy · W through W's transposed copy, bf16
 * output, FP32 promotion in the main loop: TransformerEngine's dgrad default) of large experts,
 * built only with -DGLN_BUILD_LAB=ON (bench/lab/grouped_tiles.c, --recipe e4m3|hybrid --stage
 * dgrad): cooperative 128×192 on 2×1 clusters.
 * The library runs cooperative 128×128 without a cluster below the large regime and 128×192
 * in it (grouped_e4m3_tn.cu, grouped_*_tn_large.cu: the "medium" and "large regime" rows are
 * the controls); two instantiations, E4M3 and the HYBRID recipe's E5M2 gradient.
 * Measured (H200, 2026-12-04, runs at ee03b23): Mixtral-like HYBRID 3.510 ms, DeepGEMM's E4M3 1.967,
 * against 3.514 / 1.722 for 128×192 without a cluster (promoted): not promoted.
 */
#include "lab_fp8.cuh"

using GlnLabDgradTile_128x192_c21 = cute::Shape<cute::_128, cute::_192, cute::_128>;
using GlnLabDgradCluster_128x192_c21 = cute::Shape<cute::_2, cute::_1, cute::_1>;

GLN_LAB_FP8_DGRAD(128x192_c21, GlnLabDgradTile_128x192_c21, GlnLabDgradCluster_128x192_c21)

/* Kernel-lab candidate for the per-tensor FP8 wgrad into the FP32 main_grad on large experts (E4M3
 * dy_iᵀ · E4M3 x_i from the transposed copies, FP32 promotion in the main loop), built only with
 * -DGLN_BUILD_LAB=ON (bench/lab/grouped_tiles.c, --recipe e4m3 --stage wgrad).  The library runs
 * the cooperative 128×128×128 kernel there (grouped_e4m3_wgrad.cu; the "large" row) and the
 * pingpong 64×128 one below the large regime (grouped_fp8_wgrad_pp.cuh, promoted from this file's
 * earlier candidate; the "medium" and "small" rows).  The promoted main loop holds its
 * accumulator twice, so a consumer warpgroup's share of the tile is at most 64 × 192 (96 + 96
 * FP32 registers a thread): cooperative 128×192 raises the FLOPs per operand byte by 1.2× over
 * 128×128 (Mixtral-like N = 4096 gives 22 N tiles, the last one a third full). */
#include "lab_fp8.cuh"

using GlnLabWgradTile_128x192 = cute::Shape<cute::_128, cute::_192, cute::_128>;
using GlnLabWgradCluster_128x192 = cute::Shape<cute::_1, cute::_1, cute::_1>;

GLN_LAB_E4M3_WGRAD(lab_e4m3_wgrad_coop_128x192, GlnLabWgradTile_128x192, GlnLabWgradCluster_128x192)

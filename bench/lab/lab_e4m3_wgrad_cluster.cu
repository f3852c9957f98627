/* Kernel-lab candidates for the per-tensor FP8 wgrad into the FP32 main_grad on large experts
 * (E4M3 dy_iᵀ · E4M3 x_i from the transposed copies, FP32 promotion), built only with
 * -DGLN_BUILD_LAB=ON (bench/lab/grouped_tiles.c, --recipe e4m3 --stage wgrad): the library's
 * cooperative 128×128 tile (grouped_e4m3_wgrad.cu, the "large regime" row) on 2×1 and 1×2
 * clusters, the two CTAs of a cluster sharing one operand tile through TMA multicast (half its
 * L2-to-SM traffic).  Measured (H200, 2026-12-04, runs at ee03b23, Mixtral-like, ms): 2×1 4.263,
 * 1×2 4.298 against 4.282 without a cluster — inside the noise, not promoted. */
#include "lab_fp8.cuh"

using GlnLabWgradTile_128x128 = cute::Shape<cute::_128, cute::_128, cute::_128>;
using GlnLabWgradCluster_1x2 = cute::Shape<cute::_1, cute::_2, cute::_1>;
using GlnLabWgradCluster_2x1 = cute::Shape<cute::_2, cute::_1, cute::_1>;

GLN_LAB_E4M3_WGRAD(lab_e4m3_wgrad_coop_128x128_c21, GlnLabWgradTile_128x128, GlnLabWgradCluster_2x1)
GLN_LAB_E4M3_WGRAD(lab_e4m3_wgrad_coop_128x128_c12, GlnLabWgradTile_128x128, GlnLabWgradCluster_1x2)

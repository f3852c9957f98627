/* Kernel-lab candidates for the per-tensor FP8 wgrad into the FP32 main_grad on large experts
 * (E4M3 dy_iᵀ · E4M3 x_i from the transposed copies, FP32 promotion), built only with
 * -DGLN_BUILD_LAB=ON (bench/lab/grouped_tiles.c, --recipe e4m3 --stage wgrad): cooperative
 * 128×160 tiles without a cluster and on 2×1 clusters — the tile and cluster of the kernel
 * cuBLASLt picks for this GEMM on the Mixtral-like experts (nvjet_sm90_qrsss_128x160_128x5_2x1,
 * ncu, 2026-12-04, runs at ee03b23), which runs it 15 % faster than the library's cooperative
 * 128×128 ("large regime").  Built and checked to compile; not yet run on the H200. */
#include "lab_fp8.cuh"

using GlnLabWgradTile_128x160 = cute::Shape<cute::_128, cute::_160, cute::_128>;
using GlnLabWgradCluster_1x1 = cute::Shape<cute::_1, cute::_1, cute::_1>;
using GlnLabWgradCluster_2x1 = cute::Shape<cute::_2, cute::_1, cute::_1>;

GLN_LAB_E4M3_WGRAD(lab_e4m3_wgrad_coop_128x160, GlnLabWgradTile_128x160, GlnLabWgradCluster_1x1)
GLN_LAB_E4M3_WGRAD(lab_e4m3_wgrad_coop_128x160_c21, GlnLabWgradTile_128x160, GlnLabWgradCluster_2x1)

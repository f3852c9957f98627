/* Kernel-lab candidates for the bf16 fprop (TN, with the bias epilogue) and dgrad (NN) of the
 * large and medium regimes, built only with -DGLN_BUILD_LAB=ON (bench/lab/grouped_tiles.c):
 * cooperative 128×256×64 tiles on 2×1 clusters (the two CTAs of a cluster share their weight tile
 * through TMA multicast).  The library's large regime runs 256×128 on 1×2 clusters, its medium
 * one 128×128 without a cluster; torch 2.11's _grouped_mm, which ran the Mixtral-like bf16 fprop
 * and dgrad at 755–760 TFLOP/s against the H200 in the same run (bench/RESULTS.md,
 * 2026-12-04, runs at 36adfdf), uses this tile and cluster for all but the smallest problems.
 * Measured there (H200, ms, fprop / dgrad): Mixtral-like 5.914 / 5.608 against the large regime's
 * 5.668 / 5.505, DeepGEMM's shape 2.826 / 2.936 against 2.833 / 2.862, DeepSeek-like 0.684 /
 * 0.744 against the pingpong 128×128 kernel's 0.662 / 0.667: not promoted. */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(lab_bf16_tn_coop_128x256_c21,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_128, cute::_256, cute::_64>, cute::Shape<cute::_2, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
                    true)

GLN_CUTLASS_GROUPED(lab_bf16_nn_coop_128x256_c21,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_128, cute::_256, cute::_64>, cute::Shape<cute::_2, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

/* Kernel-lab controls for the FP8 wgrad of large experts: the library's cooperative 128×128
 * tile with CUTLASS's own promoted main loop (the MMA pipe drained before each tile's promotion),
 * E4M3 and HYBRID's E5M2 gradient — what the library ran before the overlapped promotion
 * (grouped_fp8_overlap.cuh) replaced it; the "large regime" rows are the library's kernels.
 * Result (2026-12-04, runs at ea3cccb, H200, Mixtral-like E4M3): the overlapped promotion 3.974 / 3.460 ms
 * against 4.228 / 3.663 for this main loop, bitwise the same output (bench/RESULTS.md). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

using GlnLabWgradTile = cute::Shape<cute::_128, cute::_128, cute::_128>;
using GlnLabWgradCluster = cute::Shape<cute::_1, cute::_1, cute::_1>;

GLN_CUTLASS_GROUPED(lab_e4m3_wgrad_cutlass_promotion, cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor, float, GlnLabWgradTile, GlnLabWgradCluster,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

GLN_CUTLASS_GROUPED(lab_e5m2_e4m3_wgrad_cutlass_promotion, cutlass::float_e5m2_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor, float, GlnLabWgradTile, GlnLabWgradCluster,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

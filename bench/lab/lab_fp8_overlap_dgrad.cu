/* Kernel-lab candidates: the promoted FP8 dgrad on the library's cooperative 128×128 tile with
 * the promotion overlapped with the next K tile's MMAs (grouped_fp8_overlap.cuh, which the
 * library's FP8 wgrad of large experts uses), E4M3 and HYBRID's E5M2 gradient; their controls are
 * the "medium regime" rows (the same tile and numerics with CUTLASS's main loop) and, for large
 * experts, the 128×192 "large regime".
 * Result (2026-12-04, runs at ea3cccb, H200): not promoted — DeepSeek-like 0.464–0.465 ms against 0.471–0.481
 * for the regimes, but Mixtral-like HYBRID 3.581 / 3.619 against 3.407 / 3.076 for 128×192 and
 * DeepGEMM's E4M3 2.026 against 1.676 for CUTLASS's main loop on the same tile. */
#include "backend/cuda/cutlass/grouped_fp8_overlap.cuh"

using GlnLabOverlapTile = cute::Shape<cute::_128, cute::_128, cute::_128>;
using GlnLabOverlapCluster = cute::Shape<cute::_1, cute::_1, cute::_1>;

GLN_CUTLASS_GROUPED_OVERLAP(lab_e4m3_dgrad_overlap, cutlass::float_e4m3_t, cutlass::layout::RowMajor, cutlass::float_e4m3_t,
                    cutlass::layout::ColumnMajor, cutlass::bfloat16_t, GlnLabOverlapTile, GlnLabOverlapCluster,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

GLN_CUTLASS_GROUPED_OVERLAP(lab_e5m2_e4m3_dgrad_overlap, cutlass::float_e5m2_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t, GlnLabOverlapTile,
                    GlnLabOverlapCluster, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

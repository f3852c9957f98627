/* Kernel-lab candidates: the promoted FP8 dgrad on the library's cooperative 128×128 tile with
 * the promotion overlapped with the next K tile's MMAs (lab_fp8_overlap.cuh), E4M3 and HYBRID's
 * E5M2 gradient; their controls are the "medium regime" rows (the same tile and numerics with
 * CUTLASS's main loop) and, for large experts, the 128×192 "large regime". */
#include "lab_fp8_overlap.cuh"

using GlnLabOverlapTile = cute::Shape<cute::_128, cute::_128, cute::_128>;
using GlnLabOverlapCluster = cute::Shape<cute::_1, cute::_1, cute::_1>;

GLN_LAB_FP8_OVERLAP(lab_e4m3_dgrad_overlap, cutlass::float_e4m3_t, cutlass::layout::RowMajor, cutlass::float_e4m3_t,
                    cutlass::layout::ColumnMajor, cutlass::bfloat16_t, GlnLabOverlapTile, GlnLabOverlapCluster,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

GLN_LAB_FP8_OVERLAP(lab_e5m2_e4m3_dgrad_overlap, cutlass::float_e5m2_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t, GlnLabOverlapTile,
                    GlnLabOverlapCluster, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

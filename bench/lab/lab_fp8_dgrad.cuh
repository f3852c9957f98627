/* The kernel lab's promoted FP8 dgrad candidates (lab_fp8_dgrad_*.cu): one tile / cluster shape
 * instantiated for both gradient types the layer uses — E4M3 (gln_cutlass_run_lab_e4m3_dgrad_TAG)
 * and HYBRID's E5M2 (gln_cutlass_run_lab_e5m2_e4m3_dgrad_TAG) — against the E4M3 weight's
 * transposed copy, bf16 output, FP32 promotion in the main loop (cooperative schedule). */
#ifndef GLN_LAB_FP8_DGRAD_CUH
#define GLN_LAB_FP8_DGRAD_CUH

#include "backend/cuda/cutlass/grouped_sm90.cuh"

#define GLN_LAB_FP8_DGRAD_ONE(name, EA, Tile, Cluster)                                                         \
    GLN_CUTLASS_GROUPED(name, EA, cutlass::layout::RowMajor, cutlass::float_e4m3_t,                            \
                        cutlass::layout::ColumnMajor, cutlass::bfloat16_t, Tile, Cluster,                      \
                        cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,                            \
                        cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

#define GLN_LAB_FP8_DGRAD(tag, Tile, Cluster)                                                                  \
    GLN_LAB_FP8_DGRAD_ONE(lab_e4m3_dgrad_##tag, cutlass::float_e4m3_t, Tile, Cluster)                          \
    GLN_LAB_FP8_DGRAD_ONE(lab_e5m2_e4m3_dgrad_##tag, cutlass::float_e5m2_t, Tile, Cluster)

#endif

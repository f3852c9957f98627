/* The kernel lab's promoted per-tensor FP8 candidates (cooperative schedule, FP32 promotion in
 * the main loop), one tile / cluster shape per macro call:
 *   GLN_LAB_FP8_DGRAD(tag, ...)   the dgrad (lab_fp8_dgrad_*.cu) for both gradient types the
 *       layer uses — E4M3 (gln_cutlass_run_lab_e4m3_dgrad_TAG) and HYBRID's E5M2
 *       (gln_cutlass_run_lab_e5m2_e4m3_dgrad_TAG) — against the E4M3 weight's transposed copy,
 *       bf16 output;
 *   GLN_LAB_E4M3_WGRAD(name, ...) the E4M3 wgrad into the FP32 main_grad (lab_e4m3_wgrad*.cu):
 *       dy_iᵀ · x_i from the transposed copies. */
#ifndef GLN_LAB_FP8_CUH
#define GLN_LAB_FP8_CUH

#include "backend/cuda/cutlass/grouped_sm90.cuh"

#define GLN_LAB_FP8_ONE(name, EA, ED, Tile, Cluster)                                                           \
    GLN_CUTLASS_GROUPED(name, EA, cutlass::layout::RowMajor, cutlass::float_e4m3_t,                            \
                        cutlass::layout::ColumnMajor, ED, Tile, Cluster,                                       \
                        cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,                            \
                        cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

#define GLN_LAB_FP8_DGRAD(tag, Tile, Cluster)                                                                  \
    GLN_LAB_FP8_ONE(lab_e4m3_dgrad_##tag, cutlass::float_e4m3_t, cutlass::bfloat16_t, Tile, Cluster)           \
    GLN_LAB_FP8_ONE(lab_e5m2_e4m3_dgrad_##tag, cutlass::float_e5m2_t, cutlass::bfloat16_t, Tile, Cluster)

#define GLN_LAB_E4M3_WGRAD(name, Tile, Cluster) GLN_LAB_FP8_ONE(name, cutlass::float_e4m3_t, float, Tile, Cluster)

#endif

/* Kernel-lab candidates for the bf16 wgrad into the FP32 main_grad (NT) of many small experts,
 * built only with -DGLN_BUILD_LAB=ON (bench/lab/grouped_tiles.c): cooperative 128×256 tiles (half
 * the tiles, so half the per-tile expert switches, for the same main_grad bytes) and pingpong
 * 64×128 (more tiles in flight per SM, each epilogue half as long). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(lab_bf16_nt_coop_128x256,
                    cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    float,
                    cute::Shape<cute::_128, cute::_256, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

GLN_CUTLASS_GROUPED(lab_bf16_nt_pp_64x128,
                    cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    float,
                    cute::Shape<cute::_64, cute::_128, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong)

/* Kernel-lab candidates for the bf16 wgrad into the FP32 main_grad (NT), built only with
 * -DGLN_BUILD_LAB=ON (bench/lab/grouped_tiles.c):
 *   pingpong 64×128 (more tiles in flight per SM, each epilogue half as long), for many small
 *   experts.  The cooperative 128×256 candidate won and became the small regime's kernel, then
 *   the large regime's too (src/backend/cuda/cutlass/grouped_bf16_nt_f32.cu); the lab times it as
 *   "small regime" and "large regime";
 *   cooperative 128×128, the large regime's kernel until 2026-12-04: the control of that change. */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(lab_bf16_nt_pp_64x128,
                    cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    float,
                    cute::Shape<cute::_64, cute::_128, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong)

GLN_CUTLASS_GROUPED(lab_bf16_nt_coop_128x128,
                    cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    float,
                    cute::Shape<cute::_128, cute::_128, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

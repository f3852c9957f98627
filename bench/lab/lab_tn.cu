/* Kernel-lab candidates for the bf16 fprop (TN) of many small experts, built only with
 * -DGLN_BUILD_LAB=ON (bench/lab/grouped_tiles.c times them next to the library's regimes):
 * cooperative 128×256 tiles (each CTA streams a 256-wide slice of an expert's weights: fewer
 * re-reads of x) and pingpong 64×256. */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(lab_bf16_tn_coop_128x256,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_128, cute::_256, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
                    true)

GLN_CUTLASS_GROUPED(lab_bf16_tn_pp_64x256,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_64, cute::_256, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong,
                    true)

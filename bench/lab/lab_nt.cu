/* Kernel-lab candidate for the bf16 wgrad into the FP32 main_grad (NT) of many small experts,
 * built only with -DGLN_BUILD_LAB=ON (bench/lab/grouped_tiles.c): pingpong 64×128 (more tiles in
 * flight per SM, each epilogue half as long).  The cooperative 128×256 candidate won and became
 * the small regime's kernel (src/backend/cuda/cutlass/grouped_bf16_nt_f32_small.cu); the lab
 * times it as "small regime". */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(lab_bf16_nt_pp_64x128,
                    cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    float,
                    cute::Shape<cute::_64, cute::_128, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong)

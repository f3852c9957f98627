/* Kernel-lab candidates for the per-tensor FP8 wgrad into the FP32 main_grad (E4M3 dy_iᵀ · E4M3
 * x_i from the transposed copies, FP32 promotion in the main loop; the library's
 * GLN_CUTLASS_E4M3_WGRAD kernel is cooperative 128×128×128), built only with -DGLN_BUILD_LAB=ON
 * (bench/lab/grouped_tiles.c, --recipe e4m3 --stage wgrad).  The bf16 wgrad of the DeepSeek-like
 * shape ran 1.180 ms on the pingpong 128×128 kernel with 64×64 epilogue subtiles against 1.438 on
 * the cooperative 128×128 (main_grad's epilogue under the other warpgroup's main loop); the FP8
 * wgrad moves the same main_grad bytes.  The promoted FP8 main loop keeps a second accumulator,
 * so a pingpong warpgroup's tile is 64 rows (128×128 would need 256 accumulator registers a
 * thread): 64×128 with 64×64 FP32 epilogue subtiles (the builder then gives 2 C and 2 D stages,
 * D in its C slot).  The second candidate is the same kernel for FP8 HYBRID's wgrad (E5M2 dy ×
 * E4M3 x, the library's GLN_CUTLASS_E5M2_E4M3_WGRAD; grouped_tiles --recipe hybrid), so both
 * wgrads can be promoted together. */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(lab_e4m3_wgrad_pp_64x128_e64,
                    cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    float,
                    cute::Shape<cute::_64, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong, false, cutlass::bfloat16_t,
                    cute::Shape<cute::_64, cute::_64>)

GLN_CUTLASS_GROUPED(lab_e5m2_e4m3_wgrad_pp_64x128_e64,
                    cutlass::float_e5m2_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    float,
                    cute::Shape<cute::_64, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong, false, cutlass::bfloat16_t,
                    cute::Shape<cute::_64, cute::_64>)
